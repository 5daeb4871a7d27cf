package logstore

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Suffixes of the files a clean pass writes, as Kafka's: the new segment is
// written as .cleaned, renamed to .swap once complete and fsynced (from then
// on recovery completes the swap), and renamed to .log once the segments it
// replaces are gone.
const (
	cleanedSuffix = ".cleaned"
	swapSuffix    = ".swap"
)

// defaultMaxInflatedBatchBytes bounds the inflated records of one
// compressed batch that the cleaner rewrites.
const defaultMaxInflatedBatchBytes = 64 << 20

// cleanerWriteBufferBytes is how much the cleaner buffers before a write.
const cleanerWriteBufferBytes = 1 << 20

var (
	// ErrCleanAborted is returned by Clean when the log's segments changed
	// under the pass (a truncation, retention or a full truncation), as
	// Kafka's LogCleaningAbortedException: nothing was replaced by the
	// group in progress, and the caller may clean again later.
	ErrCleanAborted = errors.New("logstore: clean aborted, the log changed")
	// ErrNoCodec is returned by Clean for a compressed batch when
	// CleanConfig.Codec is nil.
	ErrNoCodec = errors.New("logstore: compressed batch and no codec")
)

// Codec compresses and inflates record sections with Kafka's codecs (ids
// 1 gzip, 2 snappy, 3 lz4, 4 zstd). Logstore declares it so that it needs no
// compression library; internal/recordcodec.Codecs implements it.
type Codec interface {
	// Decompress appends the inflated src to dst and returns it, failing
	// when more than maxBytes would be appended.
	Decompress(codec int8, dst, src []byte, maxBytes int) ([]byte, error)
	// Compress appends src compressed with codec to dst and returns it.
	Compress(codec int8, dst, src []byte) ([]byte, error)
}

// Throttler limits the cleaner's I/O (log.cleaner.io.max.bytes.per.second).
// Clean calls Throttle after reading or writing bytes; it may sleep.
type Throttler interface {
	Throttle(bytes int64)
}

// CleanConfig is one clean pass's input.
type CleanConfig struct {
	// FirstDirtyOffset is the cleaner checkpoint (cleaner-offset-checkpoint):
	// offsets below it were cleaned by an earlier pass. Outside
	// [LogStartOffset, LogEndOffset] it is taken as LogStartOffset.
	FirstDirtyOffset int64
	// UpperOffset bounds what may be cleaned: records and markers at or
	// above it are neither mapped nor dropped, and an aborted
	// transaction whose ABORT marker is at or above it keeps its data
	// (Kafka passes the first unstable offset, bounded by the high
	// watermark; partition passes min(high watermark, last stable
	// offset)). The active segment is never cleaned.
	UpperOffset int64
	// NowMs is the clock, for MinCompactionLagMs.
	NowMs int64
	// MinCompactionLagMs (min.compaction.lag.ms): a segment whose largest
	// timestamp is newer than NowMs minus this is not cleaned, nor any
	// after it.
	MinCompactionLagMs int64
	// DeleteRetentionMs (delete.retention.ms): tombstones, and markers
	// whose transaction has no data left before them, in a segment last
	// modified more than this before the last segment of the clean section
	// (below FirstDirtyOffset) are removed (Kafka's deleteHorizonMs).
	DeleteRetentionMs int64
	// Map is the offset map, sized by log.cleaner.dedupe.buffer.size; Clean
	// clears it first. Required.
	Map *OffsetMap
	// Codec rewrites compressed batches; nil makes a compressed batch in the
	// cleaned range an error (ErrNoCodec).
	Codec Codec
	// Throttler, if not nil, is told of every read and write.
	Throttler Throttler
	// Abort, if not nil, aborts the pass when closed (Kafka's
	// abortAndPauseCleaning): Clean returns ErrCleanAborted at the next
	// batch read or written, and a RateThrottler's wait ends at once.
	Abort <-chan struct{}
	// MaxInflatedBatchBytes bounds one compressed batch's inflated
	// records; <= 0 means 64 MiB.
	MaxInflatedBatchBytes int
}

// CleanStats describes one clean pass, for the cleaner's metrics.
type CleanStats struct {
	FirstDirtyOffset int64 // where the pass began mapping
	// EndOffset is the new cleaner checkpoint: everything below it is clean.
	// Below the cleanable end when the offset map filled (MapFull).
	EndOffset        int64
	MapFull          bool
	MapUtilization   float64
	BytesRead        int64 // mapping and rewriting, so the dirty section counts twice
	BytesWritten     int64
	RecordsRead      int64 // records rewritten (mapping not counted)
	RecordsKept      int64
	RecordsDropped   int64 // superseded, tombstones past the horizon, keyless, aborted, and markers dropped
	TombstonesKept   int64
	EmptyBatchesKept int64 // batches left empty and kept as their producer's last
	SegmentsCleaned  int   // old segments replaced
	SegmentsWritten  int   // new segments
	Elapsed          time.Duration

	// AbortedRecordsDropped counts the records of aborted transactions
	// removed (also in RecordsDropped).
	AbortedRecordsDropped int64
	// MarkersDropped counts the COMMIT/ABORT markers removed: their
	// transaction had no data left before them and they were past the
	// delete horizon.
	MarkersDropped int64
}

// CleanableRange is what a log offers the cleaner, for choosing the
// dirtiest log (Kafka's LogToClean).
type CleanableRange struct {
	FirstDirtyOffset       int64 // the checkpoint, adjusted into the log
	FirstUncleanableOffset int64 // end of what a pass may clean now
	CleanBytes             int64 // bytes of segments below FirstDirtyOffset
	CleanableBytes         int64 // bytes of segments in [FirstDirtyOffset, FirstUncleanableOffset)
	// DirtyRatio is CleanableBytes / (CleanBytes + CleanableBytes), 0 for
	// an empty range; compare with min.cleanable.dirty.ratio.
	DirtyRatio float64
	// FirstDirtyTimestampMs is the first batch timestamp of the first dirty
	// segment (-1 if none), for max.compaction.lag.ms.
	FirstDirtyTimestampMs int64
}

// segSnap is a non-active segment as a clean pass saw it.
type segSnap struct {
	s         *segment
	base      int64
	size      int64
	nextBase  int64 // the next segment's base; LogEndOffset for the active one
	largestTs int64 // largestTimestampMs
	maxTs     int64 // largest batch MaxTimestamp, -1 if none
	mtimeMs   int64
	txns      []AbortedTxn // its transaction index entries
}

// snapshot copies what the pass needs of the segment list. The list and
// the files of non-active segments change only under wmu and mu with
// segGen bumped, which the swap checks.
func (l *Log) snapshot() ([]segSnap, int64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.isClosed() {
		return nil, 0, ErrClosed
	}
	snaps := make([]segSnap, len(l.segments))
	for i, s := range l.segments {
		next := l.logEndOffset.Load()
		if i+1 < len(l.segments) {
			next = l.segments[i+1].baseOffset
		}
		var mtime int64
		if fi, err := s.logFile.Stat(); err == nil {
			mtime = fi.ModTime().UnixMilli()
		}
		snaps[i] = segSnap{s: s, base: s.baseOffset, size: s.size, nextBase: next, largestTs: s.largestTimestampMs(), maxTs: s.maxTimestamp, mtimeMs: mtime,
			txns: slices.Clone(s.txns)}
	}
	return snaps, l.segGen.Load(), nil
}

// cleanableRange computes Kafka's LogToClean over a snapshot.
func cleanableRange(snaps []segSnap, logStart, leo, firstDirty, upper, nowMs, lagMs int64) CleanableRange {
	if firstDirty < logStart || firstDirty > leo {
		firstDirty = logStart
	}
	active := snaps[len(snaps)-1]
	end := min(active.base, upper)
	for _, sn := range snaps[:len(snaps)-1] {
		if sn.nextBase <= firstDirty {
			continue
		}
		if lagMs > 0 && sn.largestTs > nowMs-lagMs {
			end = min(end, sn.base)
			break
		}
	}
	end = max(end, firstDirty)
	r := CleanableRange{FirstDirtyOffset: firstDirty, FirstUncleanableOffset: end, FirstDirtyTimestampMs: -1}
	for _, sn := range snaps {
		switch {
		case sn.base < firstDirty && sn.nextBase > logStart && sn.nextBase <= firstDirty:
			r.CleanBytes += sn.size
		case sn.base < end && sn.nextBase > firstDirty:
			r.CleanableBytes += sn.size
		}
	}
	if total := r.CleanBytes + r.CleanableBytes; total > 0 {
		r.DirtyRatio = float64(r.CleanableBytes) / float64(total)
	}
	return r
}

// Cleanable reports what a clean pass with these settings would find to
// clean (see CleanConfig for the arguments), and the log's dirty ratio. It
// reads only the segment list, and the first batch header of the first
// dirty segment.
func (l *Log) Cleanable(firstDirtyOffset, upperOffset, nowMs, minCompactionLagMs int64) (CleanableRange, error) {
	snaps, _, err := l.snapshot()
	if err != nil {
		return CleanableRange{}, err
	}
	r := cleanableRange(snaps, l.LogStartOffset(), l.LogEndOffset(), firstDirtyOffset, upperOffset, nowMs, minCompactionLagMs)
	for _, sn := range snaps {
		if sn.nextBase > r.FirstDirtyOffset && sn.size >= BatchHeaderSize {
			var hdr [BatchHeaderSize]byte
			if _, err := sn.s.logFile.ReadAt(hdr[:], 0); err == nil {
				r.FirstDirtyTimestampMs = parseHeader(hdr[:]).FirstTimestamp
			}
			break
		}
	}
	return r, nil
}

// cleanPass is the state of one Clean.
type cleanPass struct {
	l          *Log
	cfg        CleanConfig
	stats      CleanStats
	mappedEnd  int64           // records at or above it are kept as they are
	lastOfPID  map[int64]int64 // producer id -> last offset of its last batch
	lastData   map[int64]int64 // producer id -> last offset of its last data (not control) batch
	txns       *txnTracker     // the aborted transactions, over the rewrite
	horizonMs  int64           // deleteHorizonMs
	readBuf    []byte
	br         *bufio.Reader // reused for every segment read
	inflated   []byte
	kept       []byte
	out        []byte
	maxInflate int
	createdMs  int64 // the log's clock at the start of the pass
}

// Clean runs one pass of Kafka's log cleaner over the log: it maps the
// dirty section [FirstDirtyOffset, first uncleanable offset) key -> last
// offset in cfg.Map, stopping where the map fills, and rewrites the
// segments from the log start to the end of the mapped section, in groups
// of at most SegmentBytes, keeping for each key only its latest record,
// and removing aborted transactions and, in time, the markers of
// transactions with no data left (see the package documentation for the
// rules). It holds the writer lock
// only to swap each group in. The returned stats' EndOffset is the new
// cleaner checkpoint. ErrCleanAborted means the log changed under the
// pass; an error after a group's swap began fails the log (ErrStorage).
func (l *Log) Clean(cfg CleanConfig) (CleanStats, error) {
	start := time.Now()
	l.cmu.Lock()
	defer l.cmu.Unlock()
	p := &cleanPass{l: l, cfg: cfg, maxInflate: cfg.MaxInflatedBatchBytes}
	if p.maxInflate <= 0 {
		p.maxInflate = defaultMaxInflatedBatchBytes
	}
	err := p.run()
	p.stats.Elapsed = time.Since(start)
	if err != nil {
		return p.stats, fmt.Errorf("clean %s: %w", l.dir, err)
	}
	return p.stats, nil
}

func (p *cleanPass) run() error {
	l, cfg := p.l, p.cfg
	if cfg.Map == nil {
		return errors.New("no offset map")
	}
	cfg.Map.Clear()
	snaps, gen, err := l.snapshot()
	if err != nil {
		return err
	}
	l.wmu.Lock() // l.cfg and l.log are the writer's
	segBytes := l.cfg.segmentBytes()
	interval := l.cfg.IndexIntervalBytes
	p.createdMs = l.cfg.nowMs()
	log := l.log
	l.wmu.Unlock()
	r := cleanableRange(snaps, l.LogStartOffset(), l.LogEndOffset(), cfg.FirstDirtyOffset, cfg.UpperOffset, cfg.NowMs, cfg.MinCompactionLagMs)
	p.stats.FirstDirtyOffset, p.stats.EndOffset = r.FirstDirtyOffset, r.FirstDirtyOffset
	if r.FirstUncleanableOffset <= r.FirstDirtyOffset {
		return nil
	}
	if err := p.scanProducers(snaps); err != nil {
		return p.abortedIf(gen, err)
	}
	if err := p.buildMap(snaps, r.FirstDirtyOffset, r.FirstUncleanableOffset); err != nil {
		return p.abortedIf(gen, err)
	}
	if p.mappedEnd <= r.FirstDirtyOffset {
		return fmt.Errorf("offset map of %d entries holds no key of the dirty section", cfg.Map.MaxEntries())
	}
	p.stats.EndOffset = p.mappedEnd
	p.stats.MapUtilization = cfg.Map.Utilization()

	// Kafka's deleteHorizonMs: the modification time of the last segment
	// of the clean section (below the first dirty offset), less
	// delete.retention.ms; 0 when nothing is clean yet, so that a
	// tombstone outlives at least the pass that first cleans it.
	p.horizonMs = 0
	var allTxns []AbortedTxn
	for _, sn := range snaps {
		allTxns = append(allTxns, sn.txns...)
	}
	p.txns = newTxnTracker(allTxns, cfg.UpperOffset)
	var toClean []segSnap
	for _, sn := range snaps[:len(snaps)-1] {
		if sn.base < r.FirstDirtyOffset {
			p.horizonMs = sn.mtimeMs - cfg.DeleteRetentionMs
		}
		if sn.base < p.mappedEnd {
			toClean = append(toClean, sn)
		}
	}
	for len(toClean) > 0 {
		n, size := 1, toClean[0].size
		for n < len(toClean) && size+toClean[n].size <= segBytes && toClean[n].nextBase-1-toClean[0].base <= math.MaxInt32 {
			size += toClean[n].size
			n++
		}
		group := toClean[:n]
		toClean = toClean[n:]
		ns, err := p.cleanGroup(group, interval)
		if err != nil {
			return p.abortedIf(gen, err)
		}
		if gen, err = l.replaceSegments(group, gen, ns); err != nil {
			return err
		}
		p.stats.SegmentsCleaned += len(group)
		p.stats.SegmentsWritten++
	}
	log.Info().Int64("first_dirty_offset", p.stats.FirstDirtyOffset).Int64("end_offset", p.stats.EndOffset).
		Int("segments_cleaned", p.stats.SegmentsCleaned).Int64("bytes_read", p.stats.BytesRead).
		Int64("bytes_written", p.stats.BytesWritten).Int64("records_dropped", p.stats.RecordsDropped).
		Int64("aborted_records_dropped", p.stats.AbortedRecordsDropped).Int64("markers_dropped", p.stats.MarkersDropped).
		Bool("map_full", p.stats.MapFull).Msg("cleaned log")
	return nil
}

// abortedIf turns a read error into ErrCleanAborted when the segments
// changed meanwhile (a truncation or retention closed the file being read).
func (p *cleanPass) abortedIf(gen int64, err error) error {
	if p.l.segGen.Load() != gen || p.l.closed.Load() {
		return fmt.Errorf("%w: %v", ErrCleanAborted, err)
	}
	return err
}

// throttle tells the throttler of n bytes read or written (a wait it
// imposes ends early on Abort) and returns ErrCleanAborted once Abort is
// closed.
func (p *cleanPass) throttle(n int64) error {
	if p.cfg.Throttler != nil && n > 0 {
		if rt, ok := p.cfg.Throttler.(*RateThrottler); ok && p.cfg.Abort != nil {
			rt.throttle(n, p.cfg.Abort)
		} else {
			p.cfg.Throttler.Throttle(n)
		}
	}
	select {
	case <-p.cfg.Abort:
		return fmt.Errorf("%w: aborted by the caller", ErrCleanAborted)
	default:
		return nil
	}
}

// batches calls fn with each batch of sn, read whole into p.readBuf (the
// slice is reused for the next batch). It checks framing and the CRC: a
// clean pass must not copy damage into a segment it fsyncs.
func (p *cleanPass) batches(sn segSnap, fn func(h *BatchHeader, raw []byte) (bool, error)) error {
	sr := io.NewSectionReader(sn.s.logFile, 0, sn.size)
	if p.br == nil {
		p.br = bufio.NewReaderSize(sr, 64<<10)
	} else {
		p.br.Reset(sr)
	}
	br := p.br
	var hdr [BatchHeaderSize]byte
	for pos := int64(0); pos < sn.size; {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return fmt.Errorf("read segment %d at %d: %w", sn.base, pos, err)
		}
		var h BatchHeader
		if err := parseStoredHeader(&h, hdr[:], sn.size-pos); err != nil {
			return sn.s.corruptAt(pos, err)
		}
		size := h.Size()
		if cap(p.readBuf) < size {
			p.readBuf = make([]byte, size)
		}
		raw := p.readBuf[:size]
		copy(raw, hdr[:])
		if _, err := io.ReadFull(br, raw[BatchHeaderSize:]); err != nil {
			return fmt.Errorf("read segment %d at %d: %w", sn.base, pos, err)
		}
		if crc := crc32.Checksum(raw[offAttributes:], castagnoli); crc != h.CRC {
			return sn.s.corruptAt(pos, fmt.Errorf("CRC %#08x, computed %#08x", h.CRC, crc))
		}
		p.stats.BytesRead += int64(size)
		if err := p.throttle(int64(size)); err != nil {
			return err
		}
		pos += int64(size)
		more, err := fn(&h, raw)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// records returns the inflated records section of raw, a batch with
// header h (aliasing raw when it is not compressed).
func (p *cleanPass) records(h *BatchHeader, raw []byte) ([]byte, error) {
	codec := h.Compression()
	if codec == 0 {
		return raw[BatchHeaderSize:], nil
	}
	if p.cfg.Codec == nil {
		return nil, fmt.Errorf("batch at offset %d with codec %d: %w", h.BaseOffset, codec, ErrNoCodec)
	}
	var err error
	p.inflated, err = p.cfg.Codec.Decompress(codec, p.inflated[:0], raw[BatchHeaderSize:], p.maxInflate)
	if err != nil {
		return nil, fmt.Errorf("batch at offset %d: inflate codec %d: %w", h.BaseOffset, codec, err)
	}
	return p.inflated, nil
}

// scanProducers finds each producer's last batch in the whole log
// (Kafka's lastRecordsOfActiveProducers): that batch is kept, even empty,
// so that the producer's last sequence survives. A batch appended after
// the snapshot only makes more batches kept than needed.
func (p *cleanPass) scanProducers(snaps []segSnap) error {
	p.lastOfPID = map[int64]int64{}
	p.lastData = map[int64]int64{}
	var hdr [BatchHeaderSize]byte
	for _, sn := range snaps {
		for pos := int64(0); pos+BatchHeaderSize <= sn.size; {
			if _, err := sn.s.logFile.ReadAt(hdr[:], pos); err != nil {
				return fmt.Errorf("read segment %d at %d: %w", sn.base, pos, err)
			}
			var h BatchHeader
			if err := parseStoredHeader(&h, hdr[:], sn.size-pos); err != nil {
				return sn.s.corruptAt(pos, err)
			}
			if h.ProducerID >= 0 {
				p.lastOfPID[h.ProducerID] = h.LastOffset()
				if !h.IsControl() {
					p.lastData[h.ProducerID] = h.LastOffset()
				}
			}
			pos += int64(h.Size())
		}
	}
	return nil
}

// buildMap maps key -> last offset over [from, to), stopping at the first
// new key the map has no room for; p.mappedEnd is where it stopped.
func (p *cleanPass) buildMap(snaps []segSnap, from, to int64) error {
	m := p.cfg.Map
	p.mappedEnd = to
	// Kafka's buildOffsetMap: the records of aborted transactions are
	// not mapped, so they never supersede a committed record.
	var overlapping []AbortedTxn
	for _, sn := range snaps {
		for _, t := range sn.txns {
			if t.LastOffset >= from && t.FirstOffset < to {
				overlapping = append(overlapping, t)
			}
		}
	}
	tt := newTxnTracker(overlapping, math.MaxInt64)
	for _, sn := range snaps[:len(snaps)-1] {
		if sn.nextBase <= from || sn.base >= to {
			continue
		}
		full := false
		err := p.batches(sn, func(h *BatchHeader, raw []byte) (bool, error) {
			if h.LastOffset() < from {
				return true, nil
			}
			if h.BaseOffset >= to {
				return false, nil
			}
			if h.IsControl() {
				tt.onControl(h, raw[BatchHeaderSize:])
				return true, nil
			}
			if tt.onBatch(h) != nil {
				return true, nil
			}
			recs, err := p.records(h, raw)
			if err != nil {
				return false, err
			}
			it := newRecordIter(recs)
			for it.next() {
				off := h.BaseOffset + int64(it.rec.offsetDelta)
				if off < from || !it.rec.hasKey {
					continue
				}
				if off >= to {
					return false, nil
				}
				if !m.Put(it.rec.key, off) {
					full, p.mappedEnd = true, off
					return false, nil
				}
			}
			if it.err != nil {
				return false, fmt.Errorf("batch at offset %d: %w: %w", h.BaseOffset, ErrCorrupt, it.err)
			}
			return true, nil
		})
		if err != nil {
			return err
		}
		if full {
			p.stats.MapFull = true
			break
		}
	}
	return nil
}

// cleanGroup writes the retained batches of group into a new segment file
// <base>.log.cleaned, fsyncs it and returns the new segment (its indexes
// in memory only).
func (p *cleanPass) cleanGroup(group []segSnap, interval int64) (*segment, error) {
	l := p.l
	base := group[0].base
	nextBase := group[len(group)-1].nextBase
	name := segmentFileName(l.dir, base, logSuffix+cleanedSuffix)
	f, err := openFile(l.fs, l.files, name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	// The handle stays outside the FileCache until the swap has renamed
	// the file into place: a reopen by name before then would open
	// the replaced segment's .log.
	ns := &segment{baseOffset: base, fsys: l.fs, dir: l.dir, files: l.files, logFile: newSegFile(l.fs, name, f, nil, false),
		createdMs: p.createdMs, segState: newSegState(base)}
	txnName := segmentFileName(l.dir, base, txnIndexSuffix+cleanedSuffix)
	ok := false
	defer func() {
		if !ok {
			_ = f.Close()
			_ = l.fs.Remove(name)
			if ns.hasTxnFile {
				_ = l.fs.Remove(txnName)
			}
		}
	}()
	var written int64
	p.out = p.out[:0]
	emit := func(batch []byte) error {
		h := parseHeader(batch)
		ns.noteBatch(base, &h, written+int64(len(p.out)), interval)
		p.out = append(p.out, batch...)
		if len(p.out) >= cleanerWriteBufferBytes {
			return p.flushOut(f, &written)
		}
		return nil
	}
	lastEpoch := int32(-1) // of the group's last batch, kept or not
	for _, sn := range group {
		retainDeletes := sn.mtimeMs > p.horizonMs
		err := p.batches(sn, func(h *BatchHeader, raw []byte) (bool, error) {
			lastEpoch = h.PartitionLeaderEpoch
			return true, p.filterBatch(h, raw, retainDeletes, emit)
		})
		if err != nil {
			return nil, err
		}
	}
	if ns.nextOffset < nextBase {
		// Close the gap to the next segment with an empty batch, so the
		// segments stay contiguous and recovery does not take the end of
		// this one for a lost tail. It carries the leader epoch of the
		// group's last batch and the group's largest
		// timestamp, so that retention and min.compaction.lag.ms see the
		// segment as old as the records it replaced.
		groupMaxTs := int64(-1)
		for _, sn := range group {
			groupMaxTs = max(groupMaxTs, sn.maxTs)
		}
		var empty [BatchHeaderSize]byte
		writeEmptyBatch(empty[:], nextBase-1, 0, lastEpoch, -1, -1, -1, 0, groupMaxTs)
		if err := emit(empty[:]); err != nil {
			return nil, err
		}
	}
	if err := p.flushOut(f, &written); err != nil {
		return nil, err
	}
	if err := f.Sync(); err != nil {
		return nil, fmt.Errorf("fsync %s: %w", name, err)
	}
	if cfs, isC := l.fs.(ChtimesFS); isC {
		// Kafka: the cleaned segment keeps the last replaced one's
		// modification time, so tombstones are not dated anew.
		last := group[len(group)-1].mtimeMs
		if err := cfs.Chtimes(name, time.UnixMilli(last)); err != nil {
			return nil, fmt.Errorf("set modification time of %s: %w", name, err)
		}
	}
	// The cleaned segment's transaction index: the entries of the
	// group's ABORT markers that were kept with data still before them,
	// and of those the pass may not touch yet (Kafka's cleanedIndex).
	if ns.txns = p.txns.takeKept(); len(ns.txns) > 0 {
		tf, err := openFile(l.fs, l.files, txnName, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return nil, err
		}
		ns.hasTxnFile = true
		_, err = tf.WriteAt(encodeAbortedTxns(ns.txns), 0)
		if err != nil {
			err = fmt.Errorf("write %s: %w", txnName, err)
		} else if err = tf.Sync(); err != nil {
			err = fmt.Errorf("fsync %s: %w", txnName, err)
		}
		if cerr := tf.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("close %s: %w", txnName, cerr)
		}
		if err != nil {
			return nil, err
		}
	}
	ok = true
	return ns, nil
}

func (p *cleanPass) flushOut(f File, written *int64) error {
	if len(p.out) == 0 {
		return nil
	}
	if _, err := f.WriteAt(p.out, *written); err != nil {
		return fmt.Errorf("write %s: %w", f.Name(), err)
	}
	*written += int64(len(p.out))
	p.stats.BytesWritten += int64(len(p.out))
	n := int64(len(p.out))
	p.out = p.out[:0]
	return p.throttle(n)
}

// filterBatch passes to emit what is kept of the batch raw: the batch
// itself when every record is kept, a rewritten batch of the kept records
// (same base offset, last offset delta, producer fields and codec; the
// records byte for byte, headers included), an empty batch when none is
// kept but it is its producer's last (Kafka's BatchRetention.RETAIN_EMPTY),
// or nothing.
func (p *cleanPass) filterBatch(h *BatchHeader, raw []byte, retainDeletes bool, emit func([]byte) error) error {
	// Batches at or above the upper offset are kept as they are: no
	// record there is mapped, and markers there are not yet stable.
	below := h.LastOffset() < p.cfg.UpperOffset
	if h.IsControl() {
		// Kafka's isBatchRetained for markers: one whose transaction
		// still has data before it in this pass is kept; another only
		// until the delete horizon. A producer's last batch is kept for
		// its producer state, as a data batch is.
		discardable := p.txns.onControl(h, raw[BatchHeaderSize:])
		last := h.ProducerID >= 0 && p.lastOfPID[h.ProducerID] == h.LastOffset()
		if !below || !discardable || retainDeletes || last {
			p.stats.RecordsKept += int64(h.NumRecords)
			return emit(raw)
		}
		p.stats.MarkersDropped++
		p.stats.RecordsDropped += int64(h.NumRecords)
		return nil
	}
	if st := p.txns.onBatch(h); st != nil {
		if st.hold || !below {
			// Aborted, but the marker may still be truncated away.
			p.stats.RecordsKept += int64(h.NumRecords)
			return emit(raw)
		}
		// Kafka's discardBatchRecords: the transaction was aborted.
		p.stats.RecordsRead += int64(h.NumRecords)
		p.stats.RecordsDropped += int64(h.NumRecords)
		p.stats.AbortedRecordsDropped += int64(h.NumRecords)
		return p.dropAll(h, emit)
	}
	recs, err := p.records(h, raw)
	if err != nil {
		return err
	}
	m := p.cfg.Map
	p.kept = p.kept[:0]
	var kept, total int32
	maxTs := int64(-1)
	it := newRecordIter(recs)
	for it.next() {
		r := &it.rec
		total++
		off := h.BaseOffset + int64(r.offsetDelta)
		keep := off >= p.mappedEnd ||
			(r.hasKey && off >= m.Get(r.key) && (r.hasValue || retainDeletes))
		if !keep {
			continue
		}
		kept++
		if !r.hasValue {
			p.stats.TombstonesKept++
		}
		maxTs = max(maxTs, h.FirstTimestamp+r.timestampDelta)
		p.kept = append(p.kept, recs[r.start:r.end]...)
	}
	if it.err != nil {
		return fmt.Errorf("batch at offset %d: %w: %w", h.BaseOffset, ErrCorrupt, it.err)
	}
	p.stats.RecordsRead += int64(total)
	p.stats.RecordsKept += int64(kept)
	p.stats.RecordsDropped += int64(total - kept)
	switch {
	case kept == total:
		return emit(raw)
	case kept == 0:
		return p.dropAll(h, emit)
	}
	// A rewritten batch: the header as it was, the kept records.
	batch := append(p.out[len(p.out):len(p.out)], raw[:BatchHeaderSize]...) // scratch after p.out
	if codec := h.Compression(); codec != 0 {
		batch, err = p.cfg.Codec.Compress(codec, batch, p.kept)
		if err != nil {
			return fmt.Errorf("batch at offset %d: compress codec %d: %w", h.BaseOffset, codec, err)
		}
	} else {
		batch = append(batch, p.kept...)
	}
	be := binary.BigEndian
	be.PutUint32(batch[offBatchLength:], uint32(len(batch)-batchLengthOverhead))
	be.PutUint32(batch[offNumRecords:], uint32(kept))
	if h.TimestampType() == CreateTime {
		be.PutUint64(batch[offMaxTimestamp:], uint64(maxTs))
	}
	be.PutUint32(batch[offCRC:], crc32.Checksum(batch[offAttributes:], castagnoli))
	// batch may sit in p.out's spare capacity, exactly where emit appends
	// it: the copy is then onto itself.
	return emit(batch)
}

// dropAll drops every record of the data batch h: the batch goes, unless
// it is its producer's last batch or last data batch, which is kept empty
// (no records, same offsets and producer fields: Kafka's RETAIN_EMPTY) so
// that the producer's last sequence survives.
func (p *cleanPass) dropAll(h *BatchHeader, emit func([]byte) error) error {
	if h.ProducerID < 0 || (p.lastOfPID[h.ProducerID] != h.LastOffset() && p.lastData[h.ProducerID] != h.LastOffset()) {
		return nil
	}
	p.stats.EmptyBatchesKept++
	var empty [BatchHeaderSize]byte
	writeEmptyBatch(empty[:], h.BaseOffset, h.LastOffsetDelta, h.PartitionLeaderEpoch,
		h.ProducerID, h.ProducerEpoch, h.BaseSequence, h.Attributes&(attrTimestampType|attrTransactional), h.MaxTimestamp)
	return emit(empty[:])
}

// writeEmptyBatch writes into b (BatchHeaderSize bytes) a batch of no
// records covering [baseOffset, baseOffset+lastOffsetDelta], as Kafka's
// DefaultRecordBatch.writeEmptyHeader: both timestamps are ts.
func writeEmptyBatch(b []byte, baseOffset int64, lastOffsetDelta, leaderEpoch int32, producerID int64, producerEpoch int16, baseSequence int32, attrs int16, ts int64) {
	be := binary.BigEndian
	be.PutUint64(b[offBaseOffset:], uint64(baseOffset))
	be.PutUint32(b[offBatchLength:], BatchHeaderSize-batchLengthOverhead)
	be.PutUint32(b[offLeaderEpoch:], uint32(leaderEpoch))
	b[offMagic] = 2
	be.PutUint16(b[offAttributes:], uint16(attrs))
	be.PutUint32(b[offLastOffsetDelta:], uint32(lastOffsetDelta))
	be.PutUint64(b[offFirstTimestamp:], uint64(ts))
	be.PutUint64(b[offMaxTimestamp:], uint64(ts))
	be.PutUint64(b[offProducerID:], uint64(producerID))
	be.PutUint16(b[offProducerEpoch:], uint16(producerEpoch))
	be.PutUint32(b[offBaseSequence:], uint32(baseSequence))
	be.PutUint32(b[offNumRecords:], 0)
	be.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:BatchHeaderSize], castagnoli))
}

// replaceSegments swaps the new segment ns in for the group's old
// segments, as Kafka's replaceSegments, under wmu and fmu: it renames
// <base>.log.cleaned to <base>.log.swap and fsyncs the directory (the
// commit point: from here recovery completes the swap), replaces the
// segments in the list (under mu, so a read sees the old segments or the
// new one, never a mix), deletes the old segments' files, fsyncs the
// directory, renames the .swap to <base>.log, writes the new indexes and
// fsyncs them and the directory. It returns the new segment generation.
// Before the commit point a change of the log aborts the swap and removes
// the .cleaned file; after it, any error fails the log (ErrStorage), since
// the files on disk are then those of neither state until Open completes
// the swap.
func (l *Log) replaceSegments(group []segSnap, gen int64, ns *segment) (int64, error) {
	cleaned := segmentFileName(l.dir, ns.baseOffset, logSuffix+cleanedSuffix)
	swap := segmentFileName(l.dir, ns.baseOffset, logSuffix+swapSuffix)
	txnCleaned := segmentFileName(l.dir, ns.baseOffset, txnIndexSuffix+cleanedSuffix)
	txnSwap := segmentFileName(l.dir, ns.baseOffset, txnIndexSuffix+swapSuffix)
	discard := func() {
		_ = ns.close()
		if ns.hasTxnFile {
			// The index first: a .txnindex.swap left without its
			// .log.cleaned would be taken for a completed swap.
			_ = l.fs.Remove(txnSwap)
			_ = l.fs.Remove(txnCleaned)
		}
		_ = l.fs.Remove(cleaned)
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.writable(); err != nil {
		discard()
		return gen, err
	}
	l.fmu.Lock()
	defer l.fmu.Unlock()
	k := -1
	for i, s := range l.segments {
		if s == group[0].s {
			k = i
			break
		}
	}
	if l.segGen.Load() != gen || k < 0 || k+len(group) >= len(l.segments) {
		discard()
		return gen, ErrCleanAborted
	}
	for i, sn := range group {
		// An entry added to a replaced segment meanwhile would be lost.
		if s := l.segments[k+i]; s != sn.s || s.size != sn.size || len(s.txns) != len(sn.txns) {
			discard()
			return gen, ErrCleanAborted
		}
	}
	if ns.hasTxnFile {
		// The index becomes .swap before the segment does, durably, so
		// that a committed swap always has it.
		if err := l.fs.Rename(txnCleaned, txnSwap); err != nil {
			discard()
			return gen, fmt.Errorf("rename %s: %w", txnCleaned, err)
		}
		if err := syncDir(l.fs, l.dir); err != nil {
			_ = ns.close()
			return gen, l.fail("clean", err)
		}
	}
	if err := l.fs.Rename(cleaned, swap); err != nil {
		discard()
		return gen, fmt.Errorf("rename %s: %w", cleaned, err)
	}
	if err := syncDir(l.fs, l.dir); err != nil {
		_ = ns.close()
		return gen, l.fail("clean", err)
	}
	l.mu.Lock()
	segs := make([]*segment, 0, len(l.segments)-len(group)+1)
	segs = append(segs, l.segments[:k]...)
	segs = append(segs, ns)
	segs = append(segs, l.segments[k+len(group):]...)
	l.segments = segs
	gen = l.segGen.Add(1)
	l.recountTxnsLocked()
	l.mu.Unlock()
	l.dirDirty = true
	for _, sn := range group {
		if err := sn.s.remove(l.fs, l.dir); err != nil {
			return gen, l.fail("clean", fmt.Errorf("delete replaced segment %d: %w", sn.base, err))
		}
	}
	if err := syncDir(l.fs, l.dir); err != nil {
		return gen, l.fail("clean", err)
	}
	if err := l.fs.Rename(swap, segmentFileName(l.dir, ns.baseOffset, logSuffix)); err != nil {
		return gen, l.fail("clean", fmt.Errorf("rename %s: %w", swap, err))
	}
	if ns.hasTxnFile {
		// After the .log: a .txnindex.swap with neither a .log.swap nor
		// a .log.cleaned beside it is one whose segment was renamed.
		if err := l.fs.Rename(txnSwap, segmentFileName(l.dir, ns.baseOffset, txnIndexSuffix)); err != nil {
			return gen, l.fail("clean", fmt.Errorf("rename %s: %w", txnSwap, err))
		}
	}
	l.mu.Lock()
	ns.maybeAddTimeEntry(ns.baseOffset) // as on roll
	// Renamed into place: from now on it may be closed and reopened by
	// its name.
	ns.logFile.adopt(l.files, segmentFileName(l.dir, ns.baseOffset, logSuffix))
	l.mu.Unlock()
	// Replace any stale index of that name, write and fsync, each file
	// opened once.
	ns.indexFile.stale, ns.timeIndexFile.stale = true, true
	if err := ns.persistIndexes(&l.flushScratch, true); err != nil {
		return gen, l.fail("clean", err)
	}
	if err := syncDir(l.fs, l.dir); err != nil {
		return gen, l.fail("clean", err)
	}
	l.dirDirty = false
	return gen, nil
}

// completeSwaps is the part of Open that finishes a clean pass a crash
// interrupted (Kafka's LogLoader swap handling): a .cleaned file is
// deleted (the pass had not committed); a <base>.log.swap was complete and
// fsynced when it got its name, so the segments whose base offsets lie in
// [base, its next offset) are deleted and it becomes <base>.log. It
// returns the bases of completed swaps, whose indexes must be rebuilt.
func (l *Log) completeSwaps(entries []string) (map[int64]bool, error) {
	var rebuilt map[int64]bool
	logSwaps, logCleaned := map[int64]bool{}, map[int64]bool{}
	for _, name := range entries {
		if base, ok := parseSegmentFileName(name, logSuffix+swapSuffix); ok {
			logSwaps[base] = true
		}
		if base, ok := parseSegmentFileName(name, logSuffix+cleanedSuffix); ok {
			logCleaned[base] = true
		}
	}
	for _, name := range entries {
		if len(name) > 8 && name[len(name)-8:] == cleanedSuffix {
			if err := l.fs.Remove(filepath.Join(l.dir, name)); err != nil {
				return nil, err
			}
			l.dirDirty = true
		}
	}
	for _, name := range entries {
		if base, ok := parseSegmentFileName(name, txnIndexSuffix+swapSuffix); ok && !logSwaps[base] {
			path := filepath.Join(l.dir, name)
			if logCleaned[base] {
				// The swap had not committed.
				if err := l.fs.Remove(path); err != nil {
					return nil, err
				}
			} else {
				// The swap's .log was renamed into place, its index
				// not yet.
				if err := l.fs.Rename(path, segmentFileName(l.dir, base, txnIndexSuffix)); err != nil {
					return nil, err
				}
				if err := syncDir(l.fs, l.dir); err != nil {
					return nil, err
				}
				l.log.Warn().Int64("segment", base).Msg("completed an interrupted cleaner swap of a transaction index")
				if rebuilt == nil {
					rebuilt = map[int64]bool{}
				}
				rebuilt[base] = true // so that load lists the directory again
			}
			l.dirDirty = true
		}
	}
	for _, name := range entries {
		base, ok := parseSegmentFileName(name, logSuffix+swapSuffix)
		if !ok {
			if len(name) > 5 && name[len(name)-5:] == swapSuffix && !strings.HasSuffix(name, txnIndexSuffix+swapSuffix) {
				_ = l.fs.Remove(filepath.Join(l.dir, name)) // an index: rebuilt
			}
			continue
		}
		path := filepath.Join(l.dir, name)
		f, err := openFile(l.fs, l.files, path, os.O_RDONLY, 0)
		if err != nil {
			return nil, err
		}
		s := &segment{baseOffset: base, fsys: l.fs, dir: l.dir, files: l.files, logFile: newSegFile(l.fs, path, f, nil, false), segState: newSegState(base)}
		size, err := s.fileSize()
		var r scanResult
		if err == nil {
			r, err = s.scan(size, math.MaxInt64, math.MaxInt64, true)
		}
		_ = f.Close()
		if err != nil {
			return nil, err
		}
		if r.damage != nil {
			return nil, fmt.Errorf("swap file %s: %v: %w", name, r.damage, ErrCorrupt)
		}
		end := max(r.state.nextOffset, base+1)
		for _, other := range entries {
			for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix} {
				if b, ok := parseSegmentFileName(other, suffix); ok && b >= base && b < end {
					if err := l.fs.Remove(filepath.Join(l.dir, other)); err != nil && !errors.Is(err, os.ErrNotExist) {
						return nil, err
					}
				}
			}
		}
		if err := syncDir(l.fs, l.dir); err != nil {
			return nil, err
		}
		if err := l.fs.Rename(path, segmentFileName(l.dir, base, logSuffix)); err != nil {
			return nil, err
		}
		if slices.Contains(entries, filepath.Base(segmentFileName("", base, txnIndexSuffix+swapSuffix))) {
			if err := l.fs.Rename(segmentFileName(l.dir, base, txnIndexSuffix+swapSuffix), segmentFileName(l.dir, base, txnIndexSuffix)); err != nil {
				return nil, err
			}
		}
		if err := syncDir(l.fs, l.dir); err != nil {
			return nil, err
		}
		l.log.Warn().Int64("segment", base).Int64("end_offset", end).Msg("completed an interrupted cleaner swap")
		if rebuilt == nil {
			rebuilt = map[int64]bool{}
		}
		rebuilt[base] = true
	}
	return rebuilt, nil
}
