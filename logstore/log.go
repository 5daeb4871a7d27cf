package logstore

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// Config is a log's topic-level configuration, in Kafka's units.
type Config struct {
	SegmentBytes       int64 // roll when appending would take the active segment past this; <= 0 means 1 GiB, capped at MaxInt32
	SegmentMs          int64 // roll when the active segment's first batch is older than this; <= 0: never
	IndexIntervalBytes int64 // bytes between sparse offset-index entries (Kafka default 4096); <= 0: every batch
	RetentionMs        int64 // < 0: keep forever
	RetentionBytes     int64 // < 0: unbounded
	FlushMessages      int64 // fsync after this many records since the last flush; <= 0 or math.MaxInt64: never
	FlushMs            int64 // fsync when the oldest unflushed append is older than this; <= 0 or math.MaxInt64: never
	Log                zerolog.Logger
	// NowMs is the wall clock in Unix milliseconds; nil means time.Now. It
	// dates unflushed appends (FlushMs) and segments whose batches carry no
	// timestamps (SegmentMs). Tests set it to avoid sleeping.
	NowMs func() int64
	// FS is the file system the log's files live on; nil means OSFS. It
	// is fixed when the log opens: SetConfig does not change it.
	FS FS
	// Files is the bounded cache of open .log descriptors shared by the
	// logs of a broker (see FileCache); nil holds every segment's .log
	// open for the segment's life. Index files are never held open
	// either way. Fixed when the log opens, as FS.
	Files *FileCache
	// CleanShutdown, read only by Open, says the caller found Kafka's
	// clean-shutdown marker (.kafka_cleanshutdown): the log was closed
	// by a Close that returned nil, so every segment and index file is
	// complete and fsynced. Open then trusts the recovery point and the
	// index files and reads no segment data beyond the last batches of
	// the last segment (from its last index entry on, normally one
	// header): see the package documentation, "Clean shutdown". The
	// caller must have removed the marker durably (unlink, then fsync of
	// the log dir) before the log takes its first write, truncation,
	// retention or clean pass: after a crash a marker left in place
	// would vouch for index files that no longer describe the log.
	CleanShutdown bool
}

// DefaultConfig returns Kafka's defaults: 1 GiB and 7-day segments, an index
// entry every 4 KiB, 7-day retention with no size limit, and no fsync policy.
func DefaultConfig() Config {
	const week = 7 * 24 * 60 * 60 * 1000
	return Config{
		SegmentBytes:       1 << 30,
		SegmentMs:          week,
		IndexIntervalBytes: 4096,
		RetentionMs:        week,
		RetentionBytes:     -1,
		FlushMessages:      math.MaxInt64,
		FlushMs:            math.MaxInt64,
	}
}

func (c Config) segmentBytes() int64 {
	if c.SegmentBytes <= 0 {
		return 1 << 30
	}
	return min(c.SegmentBytes, math.MaxInt32)
}

func (c Config) nowMs() int64 {
	if c.NowMs != nil {
		return c.NowMs()
	}
	return time.Now().UnixMilli()
}

// AppendInfo describes a successful append.
type AppendInfo struct {
	FirstOffset, LastOffset int64 // inclusive
	MaxTimestamp            int64 // largest batch MaxTimestamp, -1 if none
	NumRecords              int64
	Batches                 []BatchHeader // headers as written (after offset rewrite); no per-record decoding
}

// Log is one partition's log: a directory of segments. See the package
// documentation for the concurrency contract.
type Log struct {
	dir    string
	fs     FS
	files  *FileCache // Config.Files as of Open; nil: none
	epochs *LeaderEpochCache

	// wmu serialises writers: appends, roll, truncation, retention, flush,
	// close and SetConfig. It is held across file writes and fsyncs.
	wmu sync.Mutex
	cfg Config         // guarded by wmu
	log zerolog.Logger // guarded by wmu
	// Writer-only state, guarded by wmu.
	unflushedRecords int64
	indexScratch     [indexScratchBytes]byte // for segment.writeIndexes
	// flushScratch is segment.sync's buffer, guarded by fmu: the
	// background flusher writes the indexes of rolled segments.
	flushScratch [indexScratchBytes]byte
	// syncUntil, when above the recovery point, makes every append fsync
	// (see noteTruncatedBelowLocked); 0 when off.
	syncUntil        int64
	firstUnflushedMs int64 // -1 when nothing is unflushed
	dirDirty         bool  // segment files were created or removed since the last fsync of dir
	// creationPending: the log held no data when Open returned, and Open
	// made nothing durable: the directory's entry in its parent, the
	// segment files' entries in it and the segment files may not survive
	// a crash until syncDeferredLocked, which every path that advances
	// the recovery point calls first. Cleared under fmu; read by close
	// under wmu (atomic, as flushUpTo holds only fmu).
	creationPending atomic.Bool
	// leaveParent: CloseLeavingParent is closing the log, so the deferred
	// creation's fsync of the parent is left to its caller (parentOwed
	// says it is owed).
	leaveParent, parentOwed atomic.Bool

	// mu guards the segment list and what readers see of each segment
	// (segState). Readers hold it shared for the length of a Read,
	// including the pread, so a segment cannot be truncated or closed under
	// them; the writer takes it exclusively only to publish a finished
	// write or to change the segment list, never across a write or fsync
	// of the .log of a live batch.
	mu       sync.RWMutex
	segments []*segment // ordered by base offset; never empty while open

	// fmu serialises fsyncs of rolled segments with every change to the
	// recovery point and to the files of the segments the flush may be
	// syncing (those ending above the recovery point, never the active
	// one): truncation, deletion, flush, close. The background flusher
	// holds it, and not wmu, while it fsyncs, so appends go on meanwhile.
	// Lock order: wmu -> fmu -> mu.
	fmu sync.Mutex
	// bg counts the background flusher (at most one runs); Close waits
	// for it.
	bg sync.WaitGroup
	// The background flush of rolled segments: rolls raise flushTarget
	// (the highest offset a flush was requested up to), set flushPending
	// and start the flusher unless flushRunning says one runs; the one
	// flusher loops until no request is pending.
	flushTarget  atomic.Int64
	flushPending atomic.Bool
	flushRunning atomic.Bool
	// failure is the first storage error of an fsync (or of restoring a
	// file after a failed write, or of any .txnindex write): once set, the log refuses every write
	// and never advances its recovery point again, since what the failed
	// fsync should have persisted may be lost (Kafka marks the log
	// directory offline).
	failure atomic.Pointer[error]

	// closed is set while holding both wmu and mu, and never cleared, so
	// it cannot change while either is held: writers test it under wmu
	// alone and readers under mu (read). It is atomic so that the test
	// takes no lock and a read without either lock is not a data race.
	closed atomic.Bool
	// closeErr is what the Close that closed the log returned (or the
	// failed full truncation that left it closed), returned again by
	// every later Close. Guarded by wmu.
	closeErr error

	// cmu serialises clean passes (Clean); it is taken before wmu.
	cmu sync.Mutex
	// segGen counts changes of the segment list other than a roll
	// (truncation, retention, a cleaner swap). Bumped under wmu and mu; a
	// clean pass gives up on a group if it moved under the pass.
	segGen atomic.Int64
	// txnEntries is the number of transaction index entries of all the
	// segments, set under mu (recountTxnsLocked) whenever they change, so
	// that CollectAbortedTxns answers a log without aborted transactions
	// (the usual case) without looking at its segments.
	txnEntries atomic.Int64
	// txnScans counts the CollectAbortedTxns calls that looked at the
	// segments, for tests.
	txnScans atomic.Int64

	// Changed under wmu+mu, readable without a lock.
	logStartOffset atomic.Int64
	logEndOffset   atomic.Int64
	recoveryPoint  atomic.Int64
}

// hdrPool holds header scratch buffers so that Read allocates only the
// buffer it returns.
var hdrPool = sync.Pool{New: func() any { return new([BatchHeaderSize]byte) }}

// Open opens or creates the log in dir (a partition directory named
// <topic>-<partition>). recoveryPoint is the offset below which the log
// was known to be fsynced (from recovery-point-offset-checkpoint; 0 when
// unknown). As Kafka's LogLoader.recoverLog, every segment holding offsets
// at or above recoveryPoint, and always the last one, is re-validated
// batch by batch (CRC32C, framing, increasing offsets) and has its indexes
// rebuilt; at the first invalid or torn batch (or the end of a segment
// that stops short of the next one) that segment is truncated there and
// every later segment is deleted (their records were never
// fsynced; followers fetch them again), and what was dropped is logged.
// Segments wholly below recoveryPoint were fsynced and are trusted: they
// keep their indexes unless one is missing or fails a sanity check, and
// then the index is rebuilt from the .log; damage found in such a rebuild
// is not a torn write, so it returns an error wrapping ErrCorrupt. A
// trusted segment whose data ends before the next segment begins (a
// truncation whose deletion of the later segments did not reach the
// disk) is recovered as an unflushed one: the later segments go. The
// recovered segments are fsynced, so RecoveryPoint is then LogEndOffset.
// With cfg.CleanShutdown, Open instead trusts every segment and its index
// files as Close left them and reads only the last batch header of the
// last segment (see the package documentation, "Clean shutdown"); a
// segment whose indexes fail their checks is recovered as above. Nor does
// it fsync the parent of an existing dir: the Open of the run that shut
// down cleanly did.
//
// A log that holds no data (a new one, or an existing one whose only
// segment is empty) costs no fsync: Open creates what is missing and
// defers making it durable to the log's first flush (see the package
// documentation, "Durability").
func Open(dir string, cfg Config, recoveryPoint int64) (*Log, error) {
	fsys := orOS(cfg.FS)
	entries, existed, err := ensureDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("open log %s: %w", dir, err)
	}
	l := &Log{dir: dir, fs: fsys, files: cfg.Files, cfg: cfg, firstUnflushedMs: -1}
	l.log = cfg.Log.With().Str("dir", dir).Logger()
	epochPath := filepath.Join(dir, LeaderEpochCheckpointFile)
	epochs := &LeaderEpochCache{fs: fsys, path: epochPath} // a directory just made has no file to read
	if existed {
		if epochs, err = openLeaderEpochCache(fsys, epochPath); err != nil {
			return nil, fmt.Errorf("open log %s: %w", dir, err)
		}
	}
	epochs.deferAssign = true
	l.epochs = epochs
	err = l.load(entries, existed, recoveryPoint)
	if err == nil && existed && !cfg.CleanShutdown && !l.creationPending.Load() {
		// The directory may be a crashed run's whose parent was never
		// fsynced: the data recovered in it is durable only with it. (A
		// clean shutdown's Close made it durable; an empty log leaves it
		// to its first flush.)
		err = syncParent(fsys, dir)
	}
	if err != nil {
		for _, s := range l.segments {
			_ = s.close()
		}
		return nil, fmt.Errorf("open log %s: %w", dir, err)
	}
	l.recountTxnsLocked()
	return l, nil
}

// load finds, opens and recovers the segments, from entries, the
// directory's listing (empty when Open has just made it: existed false).
// Called only by Open.
func (l *Log) load(entries []string, existed bool, recoveryPoint int64) error {
	// A clean pass a crash interrupted: finish or undo it first, then
	// list the directory again.
	rebuild, err := l.completeSwaps(entries)
	if err != nil {
		return err
	}
	if rebuild != nil {
		if entries, err = l.fs.ReadDir(l.dir); err != nil {
			return err
		}
	}
	var bases []int64
	have := map[string]bool{}
	for _, name := range entries {
		have[name] = true
		if base, ok := parseSegmentFileName(name, logSuffix); ok {
			bases = append(bases, base)
		}
		// Leftovers of an interrupted atomic write or of Kafka's deletes.
		if strings.HasSuffix(name, ".tmp") || strings.HasSuffix(name, ".deleted") {
			_ = l.fs.Remove(filepath.Join(l.dir, name))
		}
	}
	// Indexes without a .log are what a crash during a segment delete leaves.
	for _, name := range entries {
		for _, suffix := range []string{indexSuffix, timeIndexSuffix, txnIndexSuffix} {
			if base, ok := parseSegmentFileName(name, suffix); ok && !have[filepath.Base(segmentFileName("", base, logSuffix))] {
				_ = l.fs.Remove(filepath.Join(l.dir, name))
				delete(have, name)
			}
		}
	}
	slices.Sort(bases)
	now := l.cfg.nowMs()
	// After a clean shutdown, trust the segments and their indexes;
	// not if a clean pass was interrupted (no clean shutdown then).
	clean := l.cfg.CleanShutdown && rebuild == nil && len(bases) > 0
	if len(bases) == 0 {
		s, err := openSegment(l.fs, l.dir, 0, createMode(existed), now, l.files)
		if err != nil {
			return err
		}
		s.logFile.markCleanEmpty()
		l.segments = []*segment{s}
		l.dirDirty = true
	}
	for _, base := range bases {
		s, err := openSegment(l.fs, l.dir, base, segmentExisting, now, l.files)
		if err != nil {
			return err
		}
		l.segments = append(l.segments, s)
		if have[filepath.Base(segmentFileName("", base, txnIndexSuffix))] {
			if err := s.loadTxnIndex(l.fs, l.dir); err != nil {
				return err
			}
		}
	}

	// A log with no data: the segment just created, or an existing lone
	// empty one (without a .txnindex to sanitize). Nothing to read,
	// rebuild or fsync: a crash may take it (or its directory) away, and
	// Open makes it again, as empty.
	empty := rebuild == nil && (len(bases) == 0 ||
		len(bases) == 1 && !have[filepath.Base(segmentFileName("", bases[0], txnIndexSuffix))])

	var epochChanges []EpochEntry
	for i := 0; i < len(l.segments); i++ {
		s := l.segments[i]
		last := i == len(l.segments)-1
		nextBase := int64(math.MaxInt64)
		if !last {
			nextBase = l.segments[i+1].baseOffset
		}
		size, err := s.fileSize()
		if err != nil {
			return err
		}
		if empty && size == 0 {
			if len(bases) > 0 {
				// Whatever an earlier run left in its index files goes
				// with their next write; a missing one (a fresh
				// segment's, never written) is created by it, and its
				// entry fsynced with the directory (createdIndex).
				for _, f := range []struct {
					st     *indexFileState
					suffix string
				}{{&s.indexFile, indexSuffix}, {&s.timeIndexFile, timeIndexSuffix}} {
					if have[filepath.Base(segmentFileName("", s.baseOffset, f.suffix))] {
						f.st.stale, f.st.unsynced = true, true
					} else {
						f.st.absent = true
					}
				}
			}
			l.creationPending.Store(true)
			continue
		}
		recover := last || nextBase > recoveryPoint || rebuild[s.baseOffset]
		trusted := !recover // wholly below the recovery point: fsynced
		if clean {
			// Close fsynced every segment and index: trust them all,
			// checking the indexes as for a trusted segment.
			recover = false
		}
		if !recover {
			idx := filepath.Base(segmentFileName("", s.baseOffset, indexSuffix))
			tidx := filepath.Base(segmentFileName("", s.baseOffset, timeIndexSuffix))
			if size > 0 && (!have[idx] || !have[tidx]) {
				l.log.Warn().Int64("segment", s.baseOffset).Msg("index missing, rebuilding it")
				recover = true
			} else if ok, why, err := s.loadIndexes(size, nextBase); err != nil {
				return err
			} else if !ok {
				l.log.Warn().Int64("segment", s.baseOffset).Str("reason", why).Msg("index failed its sanity check, rebuilding it")
				recover = true
			} else if clean && last {
				if ok, why, err := s.trustTail(size, l.cfg.IndexIntervalBytes); err != nil {
					return err
				} else if !ok {
					l.log.Warn().Int64("segment", s.baseOffset).Str("reason", why).
						Msg("clean shutdown, but the last segment does not end as its index says: recovering it")
					recover = true
				}
			} else if clean {
				// No check of the data: Close made the removal of any
				// segments a truncation cut off durable.
			} else if end, err := s.dataEnd(size, nextBase); err != nil {
				return err
			} else if end < nextBase {
				// Its data stops short of the next segment: a truncation
				// reached the disk and the removal of the later segments
				// did not. Validate it and drop what follows, as for an
				// unflushed segment, rather than open with a hole.
				l.log.Warn().Int64("segment", s.baseOffset).Int64("offset", end).Int64("next_segment", nextBase).
					Msg("segment below the recovery point ends before the next one, validating it")
				recover = true
			}
		}
		if !recover && last {
			// A clean shutdown's last segment: trustTail set its end.
			s.addFinalEntries(s.baseOffset) // as recovery leaves it; a no-op after Close
			if err := l.sanitizeTxnIndex(s, s.nextOffset, true); err != nil {
				return err
			}
			continue
		}
		if !recover {
			s.nextOffset = nextBase // only the last segment's is used
			if err := l.sanitizeTxnIndex(s, nextBase, true); err != nil {
				return err
			}
			continue
		}
		r, err := s.scan(size, nextBase, l.cfg.IndexIntervalBytes, true)
		if err != nil {
			return err
		}
		short := false
		if r.damage == nil && !last && r.state.nextOffset < nextBase {
			// Our segments are contiguous: an unflushed one that ends
			// before the next begins lost its tail in the crash (the
			// kernel wrote back a later file's pages but not its own),
			// and a trusted one was truncated by a truncation whose
			// removal of the later segments did not reach the disk.
			r.damage = fmt.Errorf("segment ends at offset %d, before the next segment at %d", r.state.nextOffset, nextBase)
			short = true
		}
		if r.damage != nil && trusted && !short {
			return fmt.Errorf("segment %d below the recovery point %d: %v: %w", s.baseOffset, recoveryPoint, r.damage, ErrCorrupt)
		}
		if r.damage != nil && !last {
			// Kafka's recoverLog: the rest of the log was never fsynced
			// past this point either; keep nothing after the damage.
			later := l.segments[i+1:]
			var droppedBytes int64
			for _, d := range later {
				if sz, err := d.fileSize(); err == nil {
					droppedBytes += sz
				}
			}
			l.log.Error().Int64("segment", s.baseOffset).Int64("offset", r.state.nextOffset).
				Int("segments_deleted", len(later)).Int64("first_deleted_segment", later[0].baseOffset).
				Int64("bytes_dropped", droppedBytes).Int64("recovery_point", recoveryPoint).
				Str("reason", r.damage.Error()).Msg("corrupt, torn or short segment: deleting the segments after it")
			for _, d := range later {
				if err := d.remove(l.fs, l.dir); err != nil {
					return err
				}
			}
			l.segments = l.segments[:i+1]
			l.dirDirty = true
			last = true
		}
		if r.damage != nil && !short {
			ev := l.log.Warn()
			if r.state.nextOffset < recoveryPoint {
				// Damage below the recovery point: fsynced data went bad.
				ev = l.log.Error()
			}
			ev.Int64("segment", s.baseOffset).Int64("offset", r.state.nextOffset).
				Int64("position", r.state.size).Int64("bytes_dropped", size-r.state.size).
				Int64("recovery_point", recoveryPoint).
				Str("reason", r.damage.Error()).Msg("truncating torn or corrupt tail of the log")
			if err := s.logFile.Truncate(r.state.size); err != nil {
				return fmt.Errorf("truncate segment %d: %w", s.baseOffset, err)
			}
		}
		s.segState = r.state
		if err := l.sanitizeTxnIndex(s, r.state.nextOffset, false); err != nil {
			return err
		}
		if last {
			// As Close leaves it, so that the indexes agree whether the
			// log was opened after a clean shutdown or recovered.
			s.addFinalEntries(s.baseOffset)
		} else {
			// As on roll: a later open that trusts this segment takes its
			// largest timestamp from the last time index entry.
			s.maybeAddTimeEntry(s.baseOffset)
		}
		if err := s.rewriteIndexes(&l.indexScratch); err != nil {
			return err
		}
		s.logFile.markDirty() // validated, maybe only in the page cache
		if err := s.sync(&l.flushScratch, true); err != nil {
			return err
		}
		epochChanges = append(epochChanges, r.epochs...)
	}

	active := l.segments[len(l.segments)-1]
	leo := active.nextOffset
	l.logStartOffset.Store(l.segments[0].baseOffset)
	l.logEndOffset.Store(leo)
	if l.dirDirty && !l.creationPending.Load() {
		if err := syncDir(l.fs, l.dir); err != nil {
			return err
		}
		l.dirDirty = false
	}
	l.recoveryPoint.Store(leo)

	// The cache may run ahead of a truncated tail, and may miss epochs of
	// batches written after its last save; the batches are the truth.
	if err := l.epochs.TruncateFromEnd(leo); err != nil {
		return err
	}
	for _, e := range epochChanges {
		if err := l.epochs.Assign(e.LeaderEpoch, e.StartOffset); err != nil {
			return err
		}
	}
	if err := l.epochs.TruncateFromStart(l.segments[0].baseOffset); err != nil {
		return err
	}
	// The epochs recovered from the batches are below the recovery point
	// just set: durable before Open returns. (A log without data has
	// none.)
	if _, err := l.epochs.persist(true); err != nil {
		return err
	}
	l.log.Debug().Int64("log_start_offset", l.segments[0].baseOffset).Int64("leo", leo).
		Int("segments", len(l.segments)).Msg("opened log")
	return nil
}

// dataEnd is the offset after the last batch of a segment of size bytes
// whose indexes were loaded, not rebuilt: it reads the batch headers from
// the last offset index entry on. Headers that are not whole batches
// within [base, nextBase) end it where they start; a rebuild then finds
// the damage.
func (s *segment) dataEnd(size, nextBase int64) (int64, error) {
	pos := int64(0)
	if n := len(s.index); n > 0 {
		pos = int64(s.index[n-1].position)
	}
	end := s.baseOffset
	var hdr [BatchHeaderSize]byte
	for size-pos >= BatchHeaderSize {
		if _, err := s.logFile.ReadAt(hdr[:], pos); err != nil {
			return 0, fmt.Errorf("read segment %d at %d: %w", s.baseOffset, pos, err)
		}
		var h BatchHeader
		if parseStoredHeader(&h, hdr[:], size-pos) != nil || checkStoredOffsets(&h, end, s.baseOffset, nextBase) != nil {
			break
		}
		end = h.NextOffset()
		pos += int64(h.Size())
	}
	return end, nil
}

// SetConfig replaces the configuration (a topic config changed at runtime).
// It applies to the next append, roll, flush or retention run.
func (l *Log) SetConfig(cfg Config) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.cfg = cfg
	l.log = cfg.Log.With().Str("dir", l.dir).Logger()
}

// Dir is the partition directory.
func (l *Log) Dir() string { return l.dir }

// LogStartOffset is the first offset in the log.
func (l *Log) LogStartOffset() int64 { return l.logStartOffset.Load() }

// LogEndOffset is the next offset to be assigned.
func (l *Log) LogEndOffset() int64 { return l.logEndOffset.Load() }

// RecoveryPoint is the offset below which everything (segment data,
// indexes, directory entries) is fsynced; it is what the caller stores in
// recovery-point-offset-checkpoint. It advances only after fsyncs (the
// background flush after each roll, Flush, the flush policy, Close), never
// after a failed one, and falls with truncations.
func (l *Log) RecoveryPoint() int64 { return l.recoveryPoint.Load() }

// LeaderEpochs is the log's leader epoch cache. Appends assign the leader
// epoch of every batch that starts a new epoch; truncations trim it.
func (l *Log) LeaderEpochs() *LeaderEpochCache { return l.epochs }

// appendMode says whose batches an append takes, and so which rules
// validate applies.
type appendMode uint8

const (
	appendClient   appendMode = iota // a producer's batches: base offset 0, exact record counts, no control batches
	appendFollower                   // replicated batches: offsets set, cleaned batches and control batches allowed
	appendControl                    // the broker's own marker: as a client's, but only control batches
)

// validate checks every batch in records and returns their headers, in a
// slice of exactly their number that becomes AppendInfo.Batches: each
// header is decoded once, here. A client or control append adds the
// leader rules: base offset 0 and exact record counts; a client's may hold
// no control batch, a control append nothing else. It reads only records,
// so it runs before the writer lock is taken.
func validate(records []byte, mode appendMode, segmentBytes int64) ([]BatchHeader, error) {
	asLeader := mode != appendFollower
	var batches []BatchHeader
	if n := countBatches(records); n > 0 {
		batches = make([]BatchHeader, 0, n)
	}
	it := NewBatchIter(records)
	for it.Next() {
		raw, h := it.Batch(), it.Header()
		// A follower replicates batches the leader's cleaner rewrote.
		err := checkBatchCount(raw, &h, asLeader)
		if err == nil && asLeader && h.BaseOffset != 0 {
			err = fmt.Errorf("%w: batch base offset %d from a client, want 0", ErrInvalidRecord, h.BaseOffset)
		}
		if err == nil && mode == appendClient && h.IsControl() {
			err = fmt.Errorf("%w: control batch from a client", ErrInvalidRecord)
		}
		if err == nil && mode == appendControl && !h.IsControl() {
			err = fmt.Errorf("%w: not a control batch", ErrInvalidRecord)
		}
		if err == nil && int64(len(raw)) > segmentBytes {
			err = fmt.Errorf("%w: batch of %d bytes, segment bytes %d", ErrRecordListTooLarge, len(raw), segmentBytes)
		}
		if err != nil {
			return nil, fmt.Errorf("batch %d at byte %d: %w", len(batches), it.Position(), err)
		}
		batches = append(batches, h)
	}
	if err := it.Err(); err != nil {
		return nil, err
	}
	if len(batches) == 0 {
		return nil, fmt.Errorf("%w: no record batches", ErrInvalidRecord)
	}
	return batches, nil
}

// AppendAsLeader validates records (one or more v2 batches exactly as a
// producer sent them), rewrites each batch's base offset to the next
// offsets and its partition leader epoch to leaderEpoch (the CRC covers
// neither), and, if logAppendTimeMs >= 0, sets the LogAppendTime attribute
// and MaxTimestamp and recomputes the CRC. The rewrite is done in place:
// records is modified. Nothing is written if any batch is invalid
// (ErrCorrupt, ErrInvalidRecord, ErrRecordListTooLarge); an I/O error part
// way through a multi-batch append that spans a roll may leave the earlier
// batches written, as LogEndOffset then shows.
func (l *Log) AppendAsLeader(records []byte, leaderEpoch int32, logAppendTimeMs int64) (AppendInfo, error) {
	return l.appendBatches("append as leader", records, appendClient, func(batches []BatchHeader, leo int64) error {
		stampAsLeader(records, batches, leo, leaderEpoch, logAppendTimeMs)
		return nil
	})
}

// AppendAsFollower appends batches that already carry offsets (replicated
// from a leader), byte for byte. Offsets must increase but need not be
// contiguous, as in Kafka's appendAsFollower: a cleaned leader log has gaps,
// and its Read at our LogEndOffset may return a batch that starts above
// it. So the first batch must not start below LogEndOffset and each later
// one must start after the one before (ErrOffsetMismatch); every batch is
// validated as in AppendAsLeader, except that base offsets and control
// batches are allowed. LogEndOffset becomes the last batch's last offset
// + 1. Nothing is written if any check fails.
func (l *Log) AppendAsFollower(records []byte) (AppendInfo, error) {
	return l.appendBatches("append as follower", records, appendFollower, func(batches []BatchHeader, leo int64) error {
		next := leo
		for i := range batches {
			h := &batches[i]
			if h.BaseOffset < next {
				return fmt.Errorf("batch %d starts at %d, log end offset %d: %w", i, h.BaseOffset, next, ErrOffsetMismatch)
			}
			next = h.NextOffset()
		}
		return nil
	})
}

// appendBatches is what the two appends share: it validates records
// (mode as in validate) before taking l.wmu, then, holding it, calls
// place with the validated headers and the log end offset to assign or
// check their offsets, and writes the batches. op names the append in
// errors. Nothing is written if validation or place fails. (place gets no
// pointer to the AppendInfo: that would move it to the heap.)
func (l *Log) appendBatches(op string, records []byte, mode appendMode, place func(batches []BatchHeader, leo int64) error) (AppendInfo, error) {
	l.wmu.Lock()
	segmentBytes := l.cfg.segmentBytes()
	l.wmu.Unlock()
	batches, err := validate(records, mode, segmentBytes)
	if err != nil {
		return AppendInfo{}, fmt.Errorf("%s to %s: %w", op, l.dir, err)
	}

	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.writable(); err != nil {
		return AppendInfo{}, err
	}
	info := AppendInfo{Batches: batches, FirstOffset: l.logEndOffset.Load(), MaxTimestamp: -1}
	if err := place(info.Batches, info.FirstOffset); err != nil {
		return AppendInfo{}, fmt.Errorf("%s to %s: %w", op, l.dir, err)
	}
	if err := l.appendLocked(records, &info); err != nil {
		return AppendInfo{}, fmt.Errorf("%s to %s at %d: %w", op, l.dir, info.FirstOffset, err)
	}
	return info, nil
}

// appendLocked writes validated records whose headers are info.Batches,
// rolling segments as needed, publishes them to readers, updates the leader
// epoch cache and applies FlushMessages. It completes info. Caller holds
// l.wmu.
func (l *Log) appendLocked(records []byte, info *AppendInfo) error {
	seg := l.segments[len(l.segments)-1]
	if seg.firstBatchTimestamp == firstTsUnknown {
		if err := l.loadFirstBatchTimestamp(seg); err != nil {
			return err
		}
	}
	runStart, runLen, runFirst := 0, int64(0), 0
	for i := range info.Batches {
		h := &info.Batches[i]
		if l.shouldRoll(seg, runLen, &info.Batches[runFirst], h) {
			if runLen > 0 {
				if err := l.writeRun(seg, records[runStart:runStart+int(runLen)], info.Batches[runFirst:i]); err != nil {
					return err
				}
			}
			// The new segment starts at the log end offset, not at h:
			// a follower batch may start above it (a gap a cleaned
			// leader log left), and segments stay contiguous, as
			// recovery's "ends short of the next segment" rule needs. A
			// base below its first batch is normal (cleaned segments
			// have it too). Only a gap too wide for h's relative offset
			// moves the base up into it.
			newBase := max(seg.nextOffset, h.LastOffset()-math.MaxInt32)
			// The roll's background flush may move the recovery point
			// past the batches written so far: their epochs first.
			if err := l.assignEpochsLocked(info.Batches[:i]); err != nil {
				return err
			}
			var err error
			if seg, err = l.roll(newBase); err != nil {
				return err
			}
			runStart += int(runLen)
			runLen, runFirst = 0, i
		}
		runLen += int64(h.Size())
		info.NumRecords += int64(h.NumRecords)
		info.MaxTimestamp = max(info.MaxTimestamp, h.MaxTimestamp)
	}
	if err := l.writeRun(seg, records[runStart:runStart+int(runLen)], info.Batches[runFirst:]); err != nil {
		return err
	}
	info.LastOffset = info.Batches[len(info.Batches)-1].LastOffset()

	if err := l.assignEpochsLocked(info.Batches); err != nil {
		return err
	}

	if l.firstUnflushedMs < 0 {
		l.firstUnflushedMs = l.cfg.nowMs()
	}
	l.unflushedRecords += info.NumRecords
	if l.syncUntil > 0 {
		if l.recoveryPoint.Load() >= l.syncUntil {
			l.syncUntil = 0
		} else {
			return l.flushLocked()
		}
	}
	if fm := l.cfg.FlushMessages; fm > 0 && fm != math.MaxInt64 && l.unflushedRecords >= fm {
		return l.flushLocked()
	}
	return nil
}

// assignEpochsLocked records the leader epoch of every batch in batches
// (written) that starts a new epoch. Caller holds l.wmu.
func (l *Log) assignEpochsLocked(batches []BatchHeader) error {
	latest, ok := l.epochs.LatestEpoch()
	for i := range batches {
		h := &batches[i]
		if h.PartitionLeaderEpoch >= 0 && (!ok || h.PartitionLeaderEpoch > latest) {
			if err := l.epochs.Assign(h.PartitionLeaderEpoch, h.BaseOffset); err != nil {
				// The batches are written but the cache does not know
				// their epoch: the log must not go on.
				return l.fail("assign leader epoch", err)
			}
			latest, ok = h.PartitionLeaderEpoch, true
		}
	}
	return nil
}

// loadFirstBatchTimestamp reads the first batch header of seg, which a
// clean-shutdown Open did not read. Caller holds l.wmu.
func (l *Log) loadFirstBatchTimestamp(seg *segment) error {
	ts := int64(-1)
	if seg.size > 0 {
		var scratch [BatchHeaderSize]byte
		h, err := seg.readHeaderAt(0, &scratch)
		if err != nil {
			return err
		}
		ts = h.MaxTimestamp
	}
	l.mu.Lock()
	seg.firstBatchTimestamp = ts
	l.mu.Unlock()
	return nil
}

// shouldRoll reports whether the batch h must go to a new segment, given
// that runLen bytes starting with batch first are about to be written to
// seg. Caller holds l.wmu.
func (l *Log) shouldRoll(seg *segment, runLen int64, first, h *BatchHeader) bool {
	used := seg.size + runLen
	if h.LastOffset()-seg.baseOffset > math.MaxInt32 {
		return used > 0 || h.BaseOffset != seg.baseOffset
	}
	if used == 0 {
		return false
	}
	if used+int64(h.Size()) > l.cfg.segmentBytes() {
		return true
	}
	if ms := l.cfg.SegmentMs; ms > 0 {
		firstTs := seg.firstBatchTimestamp
		if seg.size == 0 {
			firstTs = first.MaxTimestamp
		}
		if firstTs >= 0 && h.MaxTimestamp >= 0 {
			return h.MaxTimestamp-firstTs >= ms
		}
		return l.cfg.nowMs()-seg.createdMs >= ms
	}
	return false
}

// writeRun writes consecutive batches to the end of seg and then publishes
// them: readers see them only once they are wholly written. Caller holds
// l.wmu.
func (l *Log) writeRun(seg *segment, run []byte, batches []BatchHeader) error {
	if _, err := seg.logFile.WriteAt(run, seg.size); err != nil {
		// Cut off whatever part was written, so that the next append
		// starts on a batch boundary. If that fails too, the segment
		// holds bytes that are no batch, which a flush must never make
		// durable: the log fails.
		if terr := seg.logFile.Truncate(seg.size); terr != nil {
			return l.fail("restore segment after a failed write", errors.Join(err, terr))
		}
		return fmt.Errorf("write segment %d at %d: %w", seg.baseOffset, seg.size, err)
	}
	interval := l.cfg.IndexIntervalBytes
	l.mu.Lock()
	pos := seg.size
	for i := range batches {
		seg.noteBatch(seg.baseOffset, &batches[i], pos, interval)
		pos += int64(batches[i].Size())
	}
	l.logEndOffset.Store(seg.nextOffset)
	l.mu.Unlock()
	return nil
}

// roll closes the active segment for appends, persisting its indexes with
// a final time index entry, and starts a new one at newBase. Caller holds
// l.wmu.
func (l *Log) roll(newBase int64) (*segment, error) {
	old := l.segments[len(l.segments)-1]
	l.mu.Lock()
	old.maybeAddTimeEntry(old.baseOffset)
	l.mu.Unlock()
	// Its index entries reach the files with the background flush below,
	// which opens each index file once to write and fsync it. But when a
	// flush took the recovery point to the roll offset already (the flush
	// policy, Flush), the segment is wholly below the recovery point the
	// moment it stops being the active one, and a checkpoint of that
	// recovery point makes Open trust its index files: they must be
	// durable first. The append pays two small fsyncs, under a policy
	// that fsyncs anyway.
	if l.recoveryPoint.Load() >= newBase {
		if err := old.syncIndexes(&l.indexScratch); err != nil {
			return nil, l.fail("roll", err)
		}
	}
	seg, err := openSegment(l.fs, l.dir, newBase, segmentCreate, l.cfg.nowMs(), l.files)
	if err != nil {
		return nil, fmt.Errorf("roll segment %d: %w", newBase, err)
	}
	l.mu.Lock()
	l.segments = append(l.segments, seg)
	l.mu.Unlock()
	l.dirDirty = true
	l.log.Info().Int64("segment", newBase).Int64("previous_segment", old.baseOffset).
		Int64("previous_bytes", old.size).Msg("rolled segment")
	// As Kafka's roll, flush everything below the new segment in the
	// background: the append path must not wait for an fsync of a whole
	// segment.
	l.requestFlushLocked(newBase)
	return seg, nil
}

// requestFlushLocked asks the background flusher to flush up to upTo,
// starting it if none runs: rolls during a long fsync add no goroutines,
// they only raise the target. Caller holds l.wmu.
func (l *Log) requestFlushLocked(upTo int64) {
	for cur := l.flushTarget.Load(); cur < upTo && !l.flushTarget.CompareAndSwap(cur, upTo); cur = l.flushTarget.Load() {
	}
	l.flushPending.Store(true)
	if l.flushRunning.CompareAndSwap(false, true) {
		l.bg.Add(1)
		go l.flushRolled(l.log)
	}
}

// flushRolled is the background flusher: it flushes up to the requested
// target until no request is pending. There is no caller to return an
// error to, so it logs it; the failure is kept (ErrStorage) and returned
// by the log's next write.
func (l *Log) flushRolled(log zerolog.Logger) {
	defer l.bg.Done()
	for {
		for l.flushPending.Swap(false) {
			target := l.flushTarget.Load()
			if err := l.flushUpTo(target); err != nil {
				if !errors.Is(err, ErrClosed) {
					log.Error().Err(err).Int64("offset", target).Msg("background flush of rolled segments failed; the log takes no more writes")
				}
				l.flushRunning.Store(false)
				return
			}
		}
		l.flushRunning.Store(false)
		// A roll that saw this flusher still running left its request
		// pending: take it up, unless a new flusher already has.
		if !l.flushPending.Load() || !l.flushRunning.CompareAndSwap(false, true) {
			return
		}
	}
}

// flushUpTo fsyncs the directory and every segment that lies wholly below
// endOffset and not below the recovery point, never the active one, and
// then advances the recovery point to the end of the last of them (Kafka's
// flushUptoOffsetExclusive). It holds fmu but not wmu, so appends go on
// meanwhile: the segments it syncs are no longer written, and every
// change to them takes fmu. It touches no segment wholly below the
// recovery point, which retention deletes without fmu: a roll at the
// recovery point fsyncs the rolled segment's indexes itself (roll), and
// flushLocked, under wmu, persists any other pending ones.
func (l *Log) flushUpTo(endOffset int64) error {
	l.fmu.Lock()
	defer l.fmu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	if err := l.syncDeferredLocked(); err != nil {
		return err
	}
	rp := l.recoveryPoint.Load()
	if endOffset <= rp {
		return nil
	}
	var todo []*segment
	newRP := rp
	l.mu.RLock()
	for i := 0; i+1 < len(l.segments); i++ {
		next := l.segments[i+1].baseOffset
		if next > endOffset {
			break
		}
		if next > rp {
			todo = append(todo, l.segments[i])
			newRP = next
		}
	}
	l.mu.RUnlock()
	if len(todo) == 0 {
		return nil
	}
	// The directory first: it makes the removals of truncated-away
	// segments durable before any later data that replaced them.
	if err := l.syncDirLocked("flush"); err != nil {
		return err
	}
	for _, s := range todo {
		if err := s.sync(&l.flushScratch, true); err != nil {
			return l.fail("flush", err)
		}
	}
	if err := l.syncCreatedIndexesLocked(); err != nil {
		return err
	}
	l.recoveryPoint.Store(newRP)
	return nil
}

// syncCreatedIndexesLocked fsyncs the directory if an index file was
// created in it since its last fsync (an index of a segment made in a new
// directory has no file until its first durable write:
// segmentCreateFresh), so that every index a flush or Close wrote
// survives a crash with its entry. Caller holds l.fmu.
func (l *Log) syncCreatedIndexesLocked() error {
	created := false
	l.mu.RLock()
	for _, s := range l.segments {
		created = created || s.createdIndex.Load()
	}
	l.mu.RUnlock()
	if !created {
		return nil
	}
	return l.syncDirLocked("flush")
}

// syncDirLocked fsyncs the log's directory for op; a failure fails the
// log. The fsync makes the entries of the index files created before it
// durable: their createdIndex marks are cleared first, so that one
// created meanwhile is fsynced by the next call. Caller holds l.fmu.
func (l *Log) syncDirLocked(op string) error {
	l.mu.RLock()
	for _, s := range l.segments {
		s.createdIndex.Store(false)
	}
	l.mu.RUnlock()
	if err := syncDir(l.fs, l.dir); err != nil {
		return l.fail(op, err)
	}
	return nil
}

// writable returns ErrClosed after Close, the storage error after a
// failed fsync, and nil otherwise. Caller holds l.wmu or l.fmu.
func (l *Log) writable() error {
	if l.isClosed() {
		return ErrClosed
	}
	if p := l.failure.Load(); p != nil {
		return *p
	}
	return nil
}

// failIf is fail for a non-nil err, and nil otherwise.
func (l *Log) failIf(op string, err error) error {
	if err == nil {
		return nil
	}
	return l.fail(op, err)
}

// fail records err, from op, as the log's storage failure (the first one
// wins) and returns it wrapped in ErrStorage.
func (l *Log) fail(op string, err error) error {
	werr := fmt.Errorf("%s %s: %w: %w", op, l.dir, ErrStorage, err)
	l.failure.CompareAndSwap(nil, &werr)
	return werr
}

// isClosed reports whether the log was closed. Caller holds l.wmu or
// l.mu, so that it stays open until the lock is released.
func (l *Log) isClosed() bool { return l.closed.Load() }

// Read returns whole batches starting with the batch that contains offset,
// stopping before any batch whose last offset is >= maxOffset (an exclusive
// bound, e.g. the high watermark) and after maxBytes, but always at least
// one whole batch if one qualifies, even when it is larger than maxBytes.
// A read stays within one segment. offset == LogEndOffset, or offset >=
// maxOffset, returns an empty, non-nil slice; offset outside
// [LogStartOffset, LogEndOffset] returns ErrOffsetOutOfRange. A stored
// batch that fails its framing check returns ErrCorrupt. The returned slice
// is the caller's; it is the only allocation.
func (l *Log) Read(offset int64, maxBytes int32, maxOffset int64) ([]byte, error) {
	out, err := l.AppendRead(nil, offset, maxBytes, maxOffset)
	if err == nil && out == nil {
		out = []byte{}
	}
	return out, err
}

// readChunkBytes is how much of a segment Read scans at a time to find
// the batch holding an offset: one pread covers the headers between two
// offset index entries (log.index.interval.bytes, 4 KiB by default) and,
// for small reads, the batches returned as well.
const readChunkBytes = 16 << 10

var chunkPool = sync.Pool{New: func() any { return new([readChunkBytes]byte) }}

// AppendRead is Read appending the batches to dst, so that a caller can
// reuse one buffer across reads; it allocates only if dst lacks the
// capacity. The result is the caller's, as with Read; on an error or an
// empty read it is dst unchanged.
func (l *Log) AppendRead(dst []byte, offset int64, maxBytes int32, maxOffset int64) ([]byte, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.isClosed() {
		return dst, ErrClosed
	}
	lso, leo := l.logStartOffset.Load(), l.logEndOffset.Load()
	if offset < lso || offset > leo {
		return dst, fmt.Errorf("read %s at %d, log offsets [%d, %d]: %w", l.dir, offset, lso, leo, ErrOffsetOutOfRange)
	}
	if offset == leo || offset >= maxOffset {
		return dst, nil
	}
	chunk := chunkPool.Get().(*[readChunkBytes]byte)
	defer chunkPool.Put(chunk)
	for i := l.segmentFor(offset); i < len(l.segments); i++ {
		s := l.segments[i]
		pos, h, buffered, found, err := s.findBatchChunked(offset, chunk[:])
		if err != nil {
			return dst, fmt.Errorf("read %s at %d: %w", l.dir, offset, err)
		}
		if !found {
			continue
		}
		if h.LastOffset() >= maxOffset {
			return dst, nil
		}
		want := min(s.size, max(s.upperBound(maxOffset), pos+int64(h.Size()))) - pos
		if want > int64(maxBytes) {
			want = max(int64(maxBytes), int64(h.Size()))
		}
		start := len(dst)
		if cap(dst)-start < int(want) {
			// Grow geometrically: a Fetch appends partition after
			// partition to one buffer, and growing it by exactly each
			// read copies everything before it again, quadratic in the
			// partitions of a response (65 % of a broker's CPU in
			// memmove at 1,000 partitions). One make and copy, not
			// slices.Grow, which makes two under -race.
			grown := make([]byte, start, max(start+int(want), 2*cap(dst)))
			copy(grown, dst)
			dst = grown
		}
		dst = dst[:start+int(want)]
		buf := dst[start:]
		// The scan chunk may already hold the batches: copy them instead
		// of reading them again.
		if n := copy(buf, buffered); n < len(buf) {
			if _, err := s.logFile.ReadAt(buf[n:], pos+int64(n)); err != nil {
				return dst[:start], fmt.Errorf("read %s at %d: segment %d position %d: %w", l.dir, offset, s.baseOffset, pos, err)
			}
		}
		// Keep the whole batches below maxOffset; the first one qualifies.
		cut := h.Size()
		var bh BatchHeader
		for len(buf)-cut >= BatchHeaderSize {
			if err := parseStoredHeader(&bh, buf[cut:], int64(len(buf)-cut)); err != nil {
				if errors.Is(err, errBatchPastEnd) {
					break // cut off by maxBytes
				}
				return dst[:start], fmt.Errorf("read %s at %d: segment %d position %d: %w", l.dir, offset, s.baseOffset, pos+int64(cut), ErrCorrupt)
			}
			if bh.LastOffset() >= maxOffset {
				break
			}
			cut += bh.Size()
		}
		return dst[:start+cut], nil
	}
	return dst, nil
}

// segmentFor is the index of the last segment whose base offset is <=
// offset, or 0. Caller holds l.mu or l.wmu.
func (l *Log) segmentFor(offset int64) int {
	lo, hi := 0, len(l.segments)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if l.segments[m].baseOffset > offset {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return max(lo-1, 0)
}

// OffsetForTimestamp returns the base offset of the first batch whose max
// timestamp is >= ts, with that timestamp; found is false if there is none.
// Offsets are per batch: records are not decoded.
func (l *Log) OffsetForTimestamp(ts int64) (offset, timestamp int64, found bool, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.isClosed() {
		return -1, -1, false, ErrClosed
	}
	scratch := hdrPool.Get().(*[BatchHeaderSize]byte)
	defer hdrPool.Put(scratch)
	for _, s := range l.segments {
		if s.maxTimestamp < ts || s.size == 0 {
			continue
		}
		var h BatchHeader
		for pos := s.lookup(s.timeLookup(ts)); pos < s.size; pos += int64(h.Size()) {
			if h, err = s.readHeaderAt(pos, scratch); err != nil {
				return -1, -1, false, fmt.Errorf("offset for timestamp %d in %s: %w", ts, l.dir, err)
			}
			if h.MaxTimestamp >= ts {
				return max(h.BaseOffset, l.logStartOffset.Load()), h.MaxTimestamp, true, nil
			}
		}
	}
	return -1, -1, false, nil
}

// OffsetOfMaxTimestamp returns the largest batch MaxTimestamp in the log
// and the last offset of the first batch that reached it (Kafka's
// offsetOfMaxTimestampSoFar: offsets are per batch, records are not
// decoded); found is false when no batch carries a timestamp.
func (l *Log) OffsetOfMaxTimestamp() (offset, timestamp int64, found bool, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.isClosed() {
		return -1, -1, false, ErrClosed
	}
	var best *segment
	for _, s := range l.segments {
		if s.size > 0 && s.maxTimestamp >= 0 && (best == nil || s.maxTimestamp > best.maxTimestamp) {
			best = s
		}
	}
	if best == nil {
		return -1, -1, false, nil
	}
	return best.offsetOfMaxTimestamp, best.maxTimestamp, true, nil
}

// TruncateTo removes everything at or above endOffset, for a follower whose
// log diverged from its leader. Truncation is by whole batch: if endOffset
// falls inside a batch, that batch goes too, and LogEndOffset becomes its
// base offset. endOffset >= LogEndOffset does nothing; endOffset below the
// first segment or the log start offset empties the log as
// TruncateFullyAndStartAt(endOffset).
// The leader epoch cache loses the epochs starting at or after the new
// LogEndOffset, and RecoveryPoint falls to it if above.
func (l *Log) TruncateTo(endOffset int64) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	oldLEO := l.logEndOffset.Load()
	if endOffset >= oldLEO {
		return nil
	}
	if endOffset < l.segments[0].baseOffset || endOffset < l.logStartOffset.Load() {
		// Kafka's Log.truncateTo: below the log start nothing is kept.
		return l.truncateFullyLocked(endOffset)
	}
	i := l.segmentFor(endOffset)
	s := l.segments[i]
	var scratch [BatchHeaderSize]byte
	pos, h, found, err := s.findBatch(endOffset, &scratch)
	if err != nil {
		return fmt.Errorf("truncate %s to %d: %w", l.dir, endOffset, err)
	}
	newSize := s.size
	if found {
		newSize = pos
	}
	removed := slices.Clone(l.segments[i+1:])
	if found && h.BaseOffset < endOffset {
		l.log.Warn().Int64("offset", endOffset).Int64("batch_base_offset", h.BaseOffset).
			Msg("truncation offset inside a batch, truncating the whole batch")
	}

	// Rebuild what the remaining prefix implies before touching the file:
	// a scan of headers only, under wmu.
	r, err := s.scan(newSize, math.MaxInt64, l.cfg.IndexIntervalBytes, false)
	if err != nil {
		return fmt.Errorf("truncate %s to %d: %w", l.dir, endOffset, err)
	}
	if r.damage != nil {
		return fmt.Errorf("truncate %s to %d: segment %d: %v: %w", l.dir, endOffset, s.baseOffset, r.damage, ErrCorrupt)
	}
	newLEO := r.state.nextOffset
	// The background flush syncs only segments other than the active one
	// and moves the recovery point only up to the active segment's base
	// (<= newLEO when s is the active one). So a truncation inside the
	// active segment that leaves the recovery point alone need not wait
	// for it (a follower's truncation must not stall behind the fsync of
	// a whole segment); any other one may change files it is syncing.
	if len(removed) > 0 || l.recoveryPoint.Load() > newLEO {
		l.fmu.Lock()
		defer l.fmu.Unlock()
	}
	oldRP := l.recoveryPoint.Load()
	below := oldRP > newLEO
	// Kafka's order (Log.truncateTo): forget and delete the later
	// segments, newest first, and make that durable when truncating below
	// the recovery point, before cutting s. The other way round, a crash
	// could persist the cut (a file's size change can reach the journal
	// before its directory's unlinks) and bring the later segments back:
	// a hole that a recovery point above it would make Open trust.
	l.mu.Lock()
	l.segments = l.segments[:i+1]
	l.logEndOffset.Store(s.nextOffset)
	if below {
		l.recoveryPoint.Store(newLEO)
		l.syncUntil = max(l.syncUntil, oldRP)
	}
	l.mu.Unlock()
	for j := len(removed) - 1; j >= 0; j-- {
		if err := removed[j].remove(l.fs, l.dir); err != nil {
			// What is left on disk is a contiguous prefix of the log,
			// but not what the log holds in memory: stop here.
			l.dirDirty = true
			return fmt.Errorf("truncate %s to %d: %w", l.dir, endOffset,
				l.fail("truncate", fmt.Errorf("delete segment %d: %w", removed[j].baseOffset, err)))
		}
	}
	if len(removed) > 0 {
		l.dirDirty = true
	}
	if below && l.dirDirty {
		if err := syncDir(l.fs, l.dir); err != nil {
			return fmt.Errorf("truncate %s to %d: %w", l.dir, endOffset, l.fail("truncate", err))
		}
		l.dirDirty = false
	}
	l.mu.Lock()
	err = s.logFile.Truncate(newSize)
	if err == nil {
		l.segGen.Add(1)
		s.segState = r.state
		l.logEndOffset.Store(newLEO)
		// The markers at or above the new end are gone: so are their
		// entries (Kafka's TransactionIndex.truncateTo).
		if _, terr := s.truncateTxns(newLEO); terr != nil {
			err = l.fail("truncate", terr)
		}
	}
	l.recountTxnsLocked()
	l.mu.Unlock()
	if err != nil {
		return fmt.Errorf("truncate %s to %d: segment %d: %w", l.dir, endOffset, s.baseOffset, err)
	}
	var errs []error
	errs = append(errs, s.rewriteIndexes(&l.indexScratch))
	if below {
		errs = append(errs, l.noteTruncatedBelowLocked(oldRP, s))
	}
	errs = append(errs, l.failIf("truncate", l.epochs.TruncateFromEnd(newLEO)))
	l.log.Info().Int64("offset", endOffset).Int64("leo", newLEO).Int64("old_leo", oldLEO).
		Int("segments_removed", len(removed)).Msg("truncated log")
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("truncate %s to %d: %w", l.dir, endOffset, err)
	}
	return nil
}

// noteTruncatedBelowLocked is called when a truncation took the recovery
// point down from oldRP. A recovery-point checkpoint written before it may
// still say oldRP, and a crash before the caller checkpoints again would
// make Open trust, below oldRP, segments now rewritten and not yet
// fsynced. (Kafka's LogManager.truncateTo checkpoints at once; logstore
// does not rely on its caller for it.) So the truncation is made durable
// now (the directory, then s, the segment truncated into, when it is
// non-nil) and every append fsyncs until the recovery point is back at
// oldRP. Truncating below the recovery point is rare: a deep divergence,
// or a follower out of range. TruncateTo has already synced the directory
// after deleting the later segments, before truncating s. Caller holds
// l.wmu and l.fmu.
func (l *Log) noteTruncatedBelowLocked(oldRP int64, s *segment) error {
	l.syncUntil = max(l.syncUntil, oldRP)
	if l.dirDirty {
		if err := syncDir(l.fs, l.dir); err != nil {
			return l.fail("truncate", err)
		}
		l.dirDirty = false
	}
	if s != nil {
		if err := s.sync(&l.flushScratch, true); err != nil {
			return l.fail("truncate", err)
		}
	}
	return nil
}

// TruncateFullyAndStartAt empties the log and starts it again at offset:
// LogStartOffset, LogEndOffset and RecoveryPoint all become offset, and the
// leader epoch cache is cleared. A follower does this when its fetch
// offset is out of range of the leader's log.
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	return l.truncateFullyLocked(offset)
}

// truncateFullyLocked: see TruncateFullyAndStartAt. Caller holds l.wmu.
func (l *Log) truncateFullyLocked(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("truncate %s fully: negative start offset %d", l.dir, offset)
	}
	l.fmu.Lock()
	defer l.fmu.Unlock()
	if err := l.syncDeferredLocked(); err != nil {
		return err
	}
	l.mu.Lock()
	old := l.segments
	l.segments = nil
	l.segGen.Add(1)
	l.recountTxnsLocked()
	l.mu.Unlock()
	var errs []error
	for _, s := range old {
		errs = append(errs, s.remove(l.fs, l.dir))
	}
	seg, err := openSegment(l.fs, l.dir, offset, segmentCreate, l.cfg.nowMs(), l.files)
	if err != nil {
		// Leave an unusable log closed rather than without segments;
		// Close then reports why.
		err = fmt.Errorf("truncate %s fully at %d: %w", l.dir, offset, errors.Join(append(errs, err)...))
		l.closeErr = fmt.Errorf("log %s closed by a failed full truncation: %w", l.dir, err)
		l.mu.Lock()
		l.closed.Store(true)
		l.mu.Unlock()
		return err
	}
	oldRP := l.recoveryPoint.Load()
	l.mu.Lock()
	l.segments = []*segment{seg}
	l.logStartOffset.Store(offset)
	l.logEndOffset.Store(offset)
	l.recoveryPoint.Store(offset)
	l.mu.Unlock()
	l.syncUntil = max(l.syncUntil, oldRP) // the directory is synced below
	l.unflushedRecords, l.firstUnflushedMs = 0, -1
	// Make the emptying durable at once, so that a crash cannot bring the
	// old segments back beside the new one.
	if err := syncDir(l.fs, l.dir); err != nil {
		errs = append(errs, l.fail("truncate fully", err))
		l.dirDirty = true
	} else {
		l.dirDirty = false
	}
	errs = append(errs, l.failIf("truncate fully", l.epochs.Clear()))
	l.log.Info().Int64("offset", offset).Int("segments_removed", len(old)).Msg("truncated log fully")
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("truncate %s fully at %d: %w", l.dir, offset, err)
	}
	return nil
}

// DeleteOldSegments applies retention with the clock at nowMs: it deletes
// the oldest segments while their largest timestamp is more than
// RetentionMs before nowMs, then while the log stays at or above
// RetentionBytes without them. It deletes whole segments only and never
// the active one, moves LogStartOffset to the first remaining segment and
// trims the leader epoch cache.
func (l *Log) DeleteOldSegments(nowMs int64) (deleted int, err error) {
	return l.DeleteOldSegmentsBelow(nowMs, math.MaxInt64)
}

// DeleteOldSegmentsBelow is DeleteOldSegments that also keeps every segment
// holding an offset at or above highWatermark, as Kafka does, so that
// retention never removes records not yet replicated.
func (l *Log) DeleteOldSegmentsBelow(nowMs, highWatermark int64) (deleted int, err error) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.writable(); err != nil {
		return 0, err
	}
	// Candidates: not the active segment, and wholly below highWatermark.
	candidates := 0
	for candidates < len(l.segments)-1 && l.segments[candidates+1].baseOffset <= highWatermark {
		candidates++
	}
	n := 0
	if ms := l.cfg.RetentionMs; ms >= 0 {
		for n < candidates && nowMs-l.segments[n].largestTimestampMs() > ms {
			n++
		}
	}
	if limit := l.cfg.RetentionBytes; limit >= 0 {
		var total int64
		for _, s := range l.segments[n:] {
			total += s.size
		}
		for diff := total - limit; n < candidates && diff-l.segments[n].size >= 0; n++ {
			diff -= l.segments[n].size
		}
	}
	if n == 0 {
		return 0, nil
	}
	deleted, lso, err := l.deleteFirstSegmentsLocked(n, 0)
	errs := []error{err}
	errs = append(errs, l.failIf("delete old segments", l.epochs.TruncateFromStart(lso)))
	l.log.Info().Int("segments_deleted", deleted).Int64("log_start_offset", lso).Msg("deleted segments by retention")
	if err := errors.Join(errs...); err != nil {
		return deleted, fmt.Errorf("delete old segments of %s: %w", l.dir, err)
	}
	return deleted, nil
}

// deleteFirstSegmentsLocked deletes the first n segments (never the active
// one), oldest first, and moves the log start to the largest of newStart,
// the first remaining base offset and the current start. It stops at the
// first segment whose files cannot be removed and keeps the later ones:
// what is left on disk is then still contiguous, where deleting on past a
// failure would leave an old segment before a gap. It takes l.fmu only
// when a doomed segment ends above the recovery point. Caller holds l.wmu.
func (l *Log) deleteFirstSegmentsLocked(n int, newStart int64) (deleted int, lso int64, err error) {
	doomed := slices.Clone(l.segments[:n])
	// The background flush syncs only segments that end above the
	// recovery point (which only it and writers under wmu move, and only
	// up): deleting segments wholly below it, as retention usually does,
	// need not wait for its fsync, and deleting none never does.
	rp := l.recoveryPoint.Load()
	for k := range n {
		if l.segments[k+1].baseOffset > rp {
			l.fmu.Lock()
			defer l.fmu.Unlock()
			break
		}
	}
	oldStart := l.logStartOffset.Load()
	l.mu.Lock()
	l.segments = slices.Delete(l.segments, 0, n)
	l.segGen.Add(1)
	l.recountTxnsLocked()
	lso = max(l.segments[0].baseOffset, oldStart, newStart)
	l.logStartOffset.Store(lso)
	l.mu.Unlock()
	if n > 0 {
		l.dirDirty = true
	}
	for i, s := range doomed {
		if err = s.remove(l.fs, l.dir); err != nil {
			if keep := doomed[i+1:]; len(keep) > 0 {
				l.mu.Lock()
				l.segments = append(slices.Clone(keep), l.segments...)
				l.recountTxnsLocked()
				lso = max(keep[0].baseOffset, oldStart, newStart)
				l.logStartOffset.Store(lso)
				l.mu.Unlock()
			}
			return i, lso, fmt.Errorf("delete segment %d: %w", s.baseOffset, err)
		}
	}
	return n, lso, nil
}

// MaybeFlush applies the FlushMs policy with the clock at nowMs: it fsyncs
// if the oldest unflushed append is at least FlushMs old.
// (FlushMessages is applied inside the appends.)
func (l *Log) MaybeFlush(nowMs int64) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	ms := l.cfg.FlushMs
	if ms <= 0 || ms == math.MaxInt64 || l.firstUnflushedMs < 0 || nowMs-l.firstUnflushedMs < ms {
		return nil
	}
	return l.flushLocked()
}

// Flush fsyncs the directory and every segment holding offsets at or
// above RecoveryPoint, with their indexes (but the active segment's, which
// Close writes), writes and fsyncs the index files of any other segment
// with entries pending, and advances RecoveryPoint to LogEndOffset. A
// failure returns an error wrapping ErrStorage, and the log takes no more
// writes.
func (l *Log) Flush() error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	return l.flushLocked()
}

// flushLocked: see Flush. Caller holds l.wmu.
func (l *Log) flushLocked() error {
	l.fmu.Lock()
	defer l.fmu.Unlock()
	if p := l.failure.Load(); p != nil {
		return *p
	}
	dirSynced, err := l.syncDeferredDirLocked()
	if err != nil {
		return err
	}
	leo, rp := l.logEndOffset.Load(), l.recoveryPoint.Load()
	// The directory first, as in flushUpTo (once: the deferred sync's
	// fsync of it covers the segment files created before it).
	if l.dirDirty && !dirSynced {
		if err := l.syncDirLocked("flush"); err != nil {
			return err
		}
	}
	l.dirDirty = false
	for i, s := range l.segments {
		if i+1 < len(l.segments) && l.segments[i+1].baseOffset <= rp {
			// Wholly below the recovery point: its .log is durable, but
			// a segment rolled when the recovery point had reached the
			// roll offset may still have index entries to persist.
			if s.pending() {
				if err := s.syncIndexes(&l.flushScratch); err != nil {
					return l.fail("flush", err)
				}
			}
			continue
		}
		if err := s.sync(&l.flushScratch, i+1 < len(l.segments)); err != nil {
			return l.fail("flush", err)
		}
	}
	if err := l.syncCreatedIndexesLocked(); err != nil {
		return err
	}
	l.recoveryPoint.Store(leo)
	l.unflushedRecords, l.firstUnflushedMs = 0, -1
	return nil
}

// Close flushes the log (so RecoveryPoint is LogEndOffset, ready to be
// checkpointed), writes the pending entries of every segment's index
// files and fsyncs each index file and .txnindex changed since its last
// fsync (the active segment's with a final entry for its last batch;
// a segment with nothing pending opens no file), so that every index
// file is complete and durable, waits for the background flushes and
// closes its files. Only after a Close that
// returned nil may a caller open the log with Config.CleanShutdown. A
// log that failed (ErrStorage) is closed without a flush and Close
// returns the failure. It is safe to call twice: a later call returns
// what the first returned (nil only if that one did; the error of a
// failed TruncateFullyAndStartAt, which leaves the log closed), and every
// other method then returns ErrClosed.
func (l *Log) Close() error {
	return l.close(closeFlushed)
}

// CloseLeavingParent is Close, except that the fsync of the parent
// directory (the log dir) that makes a log created since its last flush
// survive a crash is left to the caller: parentSync reports that the
// caller must fsync it before anything claims the log (a recovery-point
// checkpoint, a clean-shutdown marker). A broker closing thousands of new
// logs of one log dir so fsyncs that dir once instead of once a log.
func (l *Log) CloseLeavingParent() (parentSync bool, err error) {
	l.leaveParent.Store(true)
	err = l.Close()
	return l.parentOwed.Load(), err
}

// CloseUnsynced is Close for a caller that syncs the file system itself
// afterwards (FileSystemSyncer.SyncFileSystem of the log's dir), as a
// broker's shutdown does once for thousands of logs: it writes what Close
// writes (every pending index entry, the active segment's final entries,
// every index file a segment lacks, the leader epochs) and moves the
// recovery point to the log end, but fsyncs only the temporary file of a
// changed leader-epoch-checkpoint (a torn one would fail the next Open).
// Until the caller's sync has returned, nothing may claim the log (a
// recovery-point checkpoint, a clean-shutdown marker): a crash before it
// leaves an unflushed log, which Open recovers above its last
// checkpointed recovery point. A log that never held data writes nothing,
// as with Close.
func (l *Log) CloseUnsynced() error {
	return l.close(closeUnsynced)
}

// writeForCloseLocked is CloseUnsynced's writing. Caller holds l.wmu.
func (l *Log) writeForCloseLocked() error {
	active := l.segments[len(l.segments)-1]
	l.mu.Lock()
	active.addFinalEntries(active.baseOffset)
	l.mu.Unlock()
	l.fmu.Lock()
	defer l.fmu.Unlock()
	if p := l.failure.Load(); p != nil {
		return *p
	}
	if _, err := l.epochs.persist(false); err != nil {
		return l.fail("write leader epochs", err)
	}
	for _, s := range l.segments {
		if err := s.writeIndexesUnsynced(&l.flushScratch); err != nil {
			return l.fail("close", err)
		}
	}
	l.recoveryPoint.Store(l.logEndOffset.Load())
	l.unflushedRecords, l.firstUnflushedMs = 0, -1
	return nil
}

// Delete closes the log without flushing it and removes its directory.
func (l *Log) Delete() error {
	if err := l.close(closeDiscarded); err != nil && !errors.Is(err, ErrClosed) {
		l.log.Warn().Err(err).Msg("closing log before delete")
	}
	if err := l.fs.RemoveAll(l.dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete log %s: %w", l.dir, err)
	}
	l.log.Info().Msg("deleted log")
	return nil
}

// closeMode is what close writes before it closes the files.
type closeMode int

const (
	closeFlushed   closeMode = iota // Close: everything written and fsynced
	closeUnsynced                   // CloseUnsynced: written, for the caller's sync of the file system
	closeDiscarded                  // Delete and CloseHandlers: nothing
)

func (l *Log) close(mode closeMode) error {
	// The background flushes still to run see the log closed and return;
	// wait for them only after unlocking, since they take fmu.
	defer l.bg.Wait()
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.isClosed() {
		return l.closeErr
	}
	var errs []error
	if mode == closeUnsynced && !l.neverHeldDataLocked() {
		errs = append(errs, l.writeForCloseLocked())
	}
	if mode == closeFlushed && !l.neverHeldDataLocked() {
		// Leave every index file complete and fsynced, the active
		// segment's too (a flush leaves those out), so that an Open
		// with CleanShutdown can trust them.
		// The active segment's first, so that the flush's one fsync of
		// the directory covers any index file this creates.
		active := l.segments[len(l.segments)-1]
		l.mu.Lock()
		active.addFinalEntries(active.baseOffset)
		l.mu.Unlock()
		var err error
		l.fmu.Lock()
		if l.failure.Load() == nil {
			if ierr := active.persistIndexes(&l.flushScratch, true); ierr != nil {
				err = l.fail("close", ierr)
			}
		}
		l.fmu.Unlock()
		if err == nil {
			err = l.flushLocked()
		}
		errs = append(errs, err)
	}
	errs = append(errs, l.closeSegmentsLocked()...)
	if err := errors.Join(errs...); err != nil {
		l.closeErr = fmt.Errorf("close log %s: %w", l.dir, err)
	}
	return l.closeErr
}

// closeSegmentsLocked marks the log closed and closes its segments'
// files. Caller holds l.wmu.
func (l *Log) closeSegmentsLocked() []error {
	l.fmu.Lock()
	defer l.fmu.Unlock()
	l.mu.Lock()
	l.closed.Store(true)
	segs := l.segments
	l.mu.Unlock()
	var errs []error
	for _, s := range segs {
		errs = append(errs, s.close())
	}
	return errs
}
