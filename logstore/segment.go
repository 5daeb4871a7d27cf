package logstore

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
)

// File name suffixes of a segment, as in Kafka.
const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"

	indexEntrySize     = 8  // int32 offset relative to the base, int32 file position
	timeIndexEntrySize = 12 // int64 timestamp, int32 offset relative to the base
)

// segmentFileName is the 20-digit zero-padded base offset plus suffix.
func segmentFileName(dir string, baseOffset int64, suffix string) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", baseOffset, suffix))
}

// parseSegmentFileName returns the base offset of a "<20 digits><suffix>" name.
func parseSegmentFileName(name, suffix string) (int64, bool) {
	stem, ok := strings.CutSuffix(name, suffix)
	if !ok || len(stem) != 20 {
		return 0, false
	}
	off, err := strconv.ParseInt(stem, 10, 64)
	return off, err == nil && off >= 0
}

// indexEntry says that the batch at position ends with offset base+relOffset.
// Lookups take the last entry at or below the target and scan forward.
type indexEntry struct {
	relOffset int32
	position  int32
}

// timeIndexEntry says that the segment's largest timestamp up to the batch
// ending at base+relOffset is timestamp, and that batch first reached it.
type timeIndexEntry struct {
	timestamp int64
	relOffset int32
}

// segState is what a scan of a segment's batches derives. Readers read it
// under Log.mu (read); the writer changes it under Log.wmu and Log.mu.
type segState struct {
	size                 int64 // bytes of whole batches in the .log
	nextOffset           int64 // last offset + 1, or the base offset when empty
	index                []indexEntry
	timeIndex            []timeIndexEntry
	maxTimestamp         int64 // largest batch MaxTimestamp, -1 if none
	offsetOfMaxTimestamp int64 // last offset of the first batch that reached maxTimestamp
	firstBatchTimestamp  int64 // MaxTimestamp of the first batch, -1 if empty
	bytesSinceIndex      int64 // bytes appended since the last index entry
	lastBatchPos         int64 // position of the last batch, -1 if empty or unknown (a loaded segment)
}

// firstTsUnknown is segState.firstBatchTimestamp of a segment that a
// clean-shutdown Open did not read from the start: the writer reads the
// first batch's header when a roll decision needs it, as Kafka's
// LogSegment loads its rollingBasedTimestamp lazily.
const firstTsUnknown = -2

func newSegState(baseOffset int64) segState {
	return segState{nextOffset: baseOffset, maxTimestamp: -1, offsetOfMaxTimestamp: -1, firstBatchTimestamp: -1, lastBatchPos: -1}
}

// noteBatch accounts for a batch of size bytes written at pos, adding
// sparse index entries every intervalBytes (Kafka's log.index.interval.bytes)
// and a time index entry whenever the largest timestamp has grown since the
// last one.
func (st *segState) noteBatch(base int64, h *BatchHeader, pos int64, intervalBytes int64) {
	if pos == 0 {
		st.firstBatchTimestamp = h.MaxTimestamp
	}
	if h.MaxTimestamp > st.maxTimestamp {
		st.maxTimestamp = h.MaxTimestamp
		st.offsetOfMaxTimestamp = h.LastOffset()
	}
	if st.bytesSinceIndex >= intervalBytes {
		st.index = append(st.index, indexEntry{relOffset: int32(h.LastOffset() - base), position: int32(pos)})
		st.maybeAddTimeEntry(base)
		st.bytesSinceIndex = 0
	}
	size := int64(h.Size())
	st.bytesSinceIndex += size
	st.size = pos + size
	st.nextOffset = h.NextOffset()
	st.lastBatchPos = pos
}

// addFinalEntries gives the segment, as Close leaves it (and as recovery
// leaves the last segment), an index entry for its last batch and a time
// index entry for its largest timestamp, so that a clean-shutdown Open
// learns the segment's end and largest timestamp from the index files,
// reading no more than the last batch's header.
func (st *segState) addFinalEntries(base int64) {
	st.maybeAddTimeEntry(base)
	if st.lastBatchPos < 0 {
		return
	}
	if n := len(st.index); n > 0 && int64(st.index[n-1].position) >= st.lastBatchPos {
		return
	}
	st.index = append(st.index, indexEntry{relOffset: int32(st.nextOffset - 1 - base), position: int32(st.lastBatchPos)})
	st.bytesSinceIndex = st.size - st.lastBatchPos
}

// maybeAddTimeEntry appends the current largest timestamp to the time index
// if it is larger than the last entry's.
func (st *segState) maybeAddTimeEntry(base int64) {
	if st.maxTimestamp < 0 {
		return
	}
	if n := len(st.timeIndex); n > 0 && st.timeIndex[n-1].timestamp >= st.maxTimestamp {
		return
	}
	st.timeIndex = append(st.timeIndex, timeIndexEntry{timestamp: st.maxTimestamp, relOffset: int32(st.offsetOfMaxTimestamp - base)})
}

// segment is one .log file with its .index and .timeindex. The .log is
// written with WriteAt at known positions on every append, through a
// segFile (held open, or opened on demand through Config.Files). The
// index entries live in memory; the index files are not held open: they
// are opened to load them (Open), to write the entries not yet in them
// and fsync them (flush, close), and to rewrite them (truncation,
// recovery), and closed again at once.
type segment struct {
	baseOffset int64
	fsys       FS
	dir        string
	logFile    *segFile
	files      *FileCache // Config.Files of the log (nil: none), for openFile
	createdMs  int64      // when this process created or opened it, for segment.ms without timestamps

	segState // see segState for locking

	// Writer-only (Log.wmu, or Log.fmu for a segment that is no longer
	// active): the state of the index files on disk. createdIndex says
	// an absent index file was created since the directory's last fsync
	// (Log.syncCreatedIndexesLocked makes its entry durable).
	indexFile, timeIndexFile indexFileState
	createdIndex             atomic.Bool // set under wmu or fmu, read under fmu

	// The transaction index (txnindex.go): txns, the entries in marker
	// order, are read under Log.mu and changed under Log.wmu and Log.mu;
	// hasTxnFile says <base>.txnindex exists (set under Log.wmu and
	// Log.mu), txnUnsynced that it changed since its last fsync
	// (writer-only). txnTorn says Open cut a torn last entry.
	txns        []AbortedTxn
	hasTxnFile  bool
	txnUnsynced bool
	txnTorn     bool
}

// indexFileState is what the writer knows of an index file on disk.
type indexFileState struct {
	written  int  // entries in the file
	stale    bool // the file must be truncated before the next write
	unsynced bool // created, written or truncated since its last fsync
	// absent: there is no file (a segment created in a directory Open
	// has just made). It is created with its first entry, or empty by
	// the first write that fsyncs (a roll's or Close's): Open rebuilds a
	// segment with data whose index is missing, as Kafka does.
	absent bool
}

// segmentMode says how openSegment finds the files of a segment.
type segmentMode int

const (
	// segmentExisting opens the files of a segment on disk.
	segmentExisting segmentMode = iota
	// segmentCreate creates the segment, truncating any stale files of
	// the same names, the indexes included.
	segmentCreate
	// segmentCreateFresh creates the .log of a segment in a directory
	// that Open has just made, so that no stale file can be there: the
	// index files are created only when they get their first entry.
	segmentCreateFresh
)

// createMode is the mode of the first segment of a log that holds none:
// fresh when Open has just made the directory.
func createMode(dirExisted bool) segmentMode {
	if dirExisted {
		return segmentCreate
	}
	return segmentCreateFresh
}

// openSegment opens or creates the files of the segment at baseOffset
// (see segmentMode). Opening an existing segment opens nothing when cache
// is non-nil; creating one opens only its .log, and closes any index it
// truncates.
func openSegment(fsys FS, dir string, baseOffset int64, mode segmentMode, nowMs int64, cache *FileCache) (*segment, error) {
	s := &segment{baseOffset: baseOffset, fsys: fsys, dir: dir, files: cache, createdMs: nowMs, segState: newSegState(baseOffset)}
	name := segmentFileName(dir, baseOffset, logSuffix)
	if mode == segmentExisting {
		var err error
		if s.logFile, err = lazySegFile(fsys, name, cache); err != nil {
			return nil, err
		}
		return s, nil
	}
	var err error
	if s.logFile, err = createSegFile(fsys, name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, cache); err != nil {
		return nil, err
	}
	if mode == segmentCreateFresh {
		s.indexFile.absent, s.timeIndexFile.absent = true, true
		return s, nil
	}
	for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
		idx, err := openFile(fsys, cache, segmentFileName(dir, baseOffset, suffix), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		if err == nil {
			err = idx.Close()
		}
		if err != nil {
			_ = s.close()
			return nil, err
		}
	}
	s.indexFile.unsynced, s.timeIndexFile.unsynced = true, true
	return s, nil
}

// close closes the .log (the only file a segment holds).
func (s *segment) close() error {
	if s.logFile == nil {
		return nil
	}
	return s.logFile.Close()
}

// remove closes the files and deletes them, the .log first so that a crash
// part way leaves orphan indexes (deleted on open) rather than a log
// without its index (which would merely be rebuilt).
func (s *segment) remove(fsys FS, dir string) error {
	hasTxn := s.hasTxnFile
	errs := []error{s.close()}
	suffixes := []string{logSuffix, indexSuffix, timeIndexSuffix}
	if hasTxn {
		// Only a segment with entries has the file (Open loads every
		// one on disk), so the others cost no extra remove.
		suffixes = append(suffixes, txnIndexSuffix)
	}
	for _, suffix := range suffixes {
		if err := fsys.Remove(segmentFileName(dir, s.baseOffset, suffix)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// fileSize is the .log's size on disk, which may exceed s.size by a torn tail.
func (s *segment) fileSize() (int64, error) {
	fi, err := s.logFile.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// loadIndexes reads both index files and checks them against the .log of
// logSize bytes whose offsets end before nextBase. It reports false, with a
// reason, when either index fails the sanity check and must be rebuilt.
// On success s.segState holds everything but nextOffset and
// firstBatchTimestamp, which only the last segment needs and which it gets
// from a scan.
func (s *segment) loadIndexes(logSize, nextBase int64) (bool, string, error) {
	maxRel := int64(math.MaxInt32)
	if nextBase != math.MaxInt64 {
		maxRel = min(maxRel, nextBase-1-s.baseOffset)
	}
	raw, err := readIndexFile(s.fsys, s.files, segmentFileName(s.dir, s.baseOffset, indexSuffix))
	if err != nil {
		return false, "", err
	}
	if len(raw)%indexEntrySize != 0 {
		return false, fmt.Sprintf("index size %d is not a multiple of %d", len(raw), indexEntrySize), nil
	}
	index := make([]indexEntry, 0, len(raw)/indexEntrySize)
	for i := 0; i < len(raw); i += indexEntrySize {
		e := indexEntry{relOffset: int32(binary.BigEndian.Uint32(raw[i:])), position: int32(binary.BigEndian.Uint32(raw[i+4:]))}
		if e.relOffset < 0 || int64(e.relOffset) > maxRel || e.position < 0 || int64(e.position)+BatchHeaderSize > logSize {
			return false, fmt.Sprintf("index entry %d (%d, %d) outside the segment", i/indexEntrySize, e.relOffset, e.position), nil
		}
		if n := len(index); n > 0 && (e.relOffset <= index[n-1].relOffset || e.position <= index[n-1].position) {
			return false, fmt.Sprintf("index entry %d goes backwards", i/indexEntrySize), nil
		}
		index = append(index, e)
	}
	raw, err = readIndexFile(s.fsys, s.files, segmentFileName(s.dir, s.baseOffset, timeIndexSuffix))
	if err != nil {
		return false, "", err
	}
	if len(raw)%timeIndexEntrySize != 0 {
		return false, fmt.Sprintf("time index size %d is not a multiple of %d", len(raw), timeIndexEntrySize), nil
	}
	timeIndex := make([]timeIndexEntry, 0, len(raw)/timeIndexEntrySize)
	for i := 0; i < len(raw); i += timeIndexEntrySize {
		e := timeIndexEntry{timestamp: int64(binary.BigEndian.Uint64(raw[i:])), relOffset: int32(binary.BigEndian.Uint32(raw[i+8:]))}
		if e.timestamp < 0 || e.relOffset < 0 || int64(e.relOffset) > maxRel {
			return false, fmt.Sprintf("time index entry %d (%d, %d) outside the segment", i/timeIndexEntrySize, e.timestamp, e.relOffset), nil
		}
		if n := len(timeIndex); n > 0 && (e.timestamp <= timeIndex[n-1].timestamp || e.relOffset < timeIndex[n-1].relOffset) {
			return false, fmt.Sprintf("time index entry %d goes backwards", i/timeIndexEntrySize), nil
		}
		timeIndex = append(timeIndex, e)
	}
	s.size = logSize
	s.index, s.indexFile = index, indexFileState{written: len(index)}
	s.timeIndex, s.timeIndexFile = timeIndex, indexFileState{written: len(timeIndex)}
	if n := len(timeIndex); n > 0 {
		s.maxTimestamp = timeIndex[n-1].timestamp
		s.offsetOfMaxTimestamp = s.baseOffset + int64(timeIndex[n-1].relOffset)
	}
	return true, "", nil
}

// trustTail completes the state of the last segment of a clean-shutdown
// Open, whose indexes loadIndexes loaded from a .log of size bytes: it
// reads the batch headers from the last offset index entry on (only the
// last batch's, when Close left the segment) to learn the segment's end,
// its last batch and any timestamp above the time index. It reports
// false, with a reason, when they are not whole batches up to size, the
// first being the one the entry names. Headers only: no CRC check, as
// for any trusted segment.
func (s *segment) trustTail(size, intervalBytes int64) (bool, string, error) {
	st := s.segState
	st.nextOffset, st.bytesSinceIndex, st.lastBatchPos = s.baseOffset, 0, -1
	st.firstBatchTimestamp = firstTsUnknown
	n := len(st.index)
	pos := int64(0)
	if n > 0 {
		pos = int64(st.index[n-1].position)
	}
	if pos == 0 {
		st.firstBatchTimestamp = -1 // set by the first batch, if any
	}
	var hdr [BatchHeaderSize]byte
	for first := n > 0; pos < size; first = false {
		if size-pos < BatchHeaderSize {
			return false, fmt.Sprintf("%d bytes at position %d are too short for a batch header", size-pos, pos), nil
		}
		if _, err := s.logFile.ReadAt(hdr[:], pos); err != nil {
			return false, "", fmt.Errorf("read segment %d at %d: %w", s.baseOffset, pos, err)
		}
		var h BatchHeader
		err := parseStoredHeader(&h, hdr[:], size-pos)
		if err == nil {
			err = checkStoredOffsets(&h, st.nextOffset, s.baseOffset, math.MaxInt64)
		}
		if err == nil && first && h.LastOffset() != s.baseOffset+int64(st.index[n-1].relOffset) {
			err = fmt.Errorf("last offset %d, the index entry says %d", h.LastOffset(), s.baseOffset+int64(st.index[n-1].relOffset))
		}
		if err != nil {
			return false, fmt.Sprintf("batch at position %d: %v", pos, err), nil
		}
		if first {
			// The batch of the last entry: as noteBatch, but the entry
			// is there already.
			if pos == 0 {
				st.firstBatchTimestamp = h.MaxTimestamp
			}
			if h.MaxTimestamp > st.maxTimestamp {
				st.maxTimestamp, st.offsetOfMaxTimestamp = h.MaxTimestamp, h.LastOffset()
			}
			st.bytesSinceIndex = int64(h.Size())
			st.size, st.nextOffset, st.lastBatchPos = pos+int64(h.Size()), h.NextOffset(), pos
		} else {
			st.noteBatch(s.baseOffset, &h, pos, intervalBytes)
		}
		pos += int64(h.Size())
	}
	s.segState = st
	return true, "", nil
}

// scanResult is what scan found: the state of the valid prefix, the leader
// epoch changes in it, and why it stopped before the end of the file (nil
// when the whole file is valid).
type scanResult struct {
	state  segState
	epochs []EpochEntry
	damage error
}

// scan reads the segment's batches from the start, up to limit bytes,
// rebuilding the index state. With validate it checks each batch's CRC and
// record count too. Batches must have increasing offsets within
// [baseOffset, nextBase) that fit a relative int32. The first batch that
// fails ends the valid prefix (scanResult.damage); err is an I/O error.
func (s *segment) scan(limit, nextBase, intervalBytes int64, validate bool) (scanResult, error) {
	r := scanResult{state: newSegState(s.baseOffset)}
	br := bufio.NewReaderSize(io.NewSectionReader(s.logFile, 0, limit), 64<<10)
	crc := crc32.New(castagnoli)
	var hdr [BatchHeaderSize]byte
	lastEpoch := int32(-1)
	pos := int64(0)
	for pos < limit {
		if limit-pos < BatchHeaderSize {
			r.damage = fmt.Errorf("%d bytes at position %d are too short for a batch header", limit-pos, pos)
			break
		}
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return r, fmt.Errorf("read segment %d at %d: %w", s.baseOffset, pos, err)
		}
		var h BatchHeader
		err := parseStoredHeader(&h, hdr[:], limit-pos)
		if err == nil {
			err = checkStoredOffsets(&h, r.state.nextOffset, s.baseOffset, nextBase)
		}
		if err != nil {
			r.damage = fmt.Errorf("batch at position %d: %w", pos, err)
			break
		}
		body := int64(h.Size() - BatchHeaderSize)
		if validate {
			crc.Reset()
			_, _ = crc.Write(hdr[offAttributes:])
			if _, err := io.CopyN(crc, br, body); err != nil {
				return r, fmt.Errorf("read segment %d at %d: %w", s.baseOffset, pos, err)
			}
			if crc.Sum32() != h.CRC {
				r.damage = fmt.Errorf("batch at position %d (offset %d): CRC %#08x, computed %#08x", pos, h.BaseOffset, h.CRC, crc.Sum32())
				break
			}
			if !cleanedCountOK(&h, false) { // the cleaner leaves fewer records than offsets
				r.damage = fmt.Errorf("batch at position %d (offset %d): %d records, last offset delta %d", pos, h.BaseOffset, h.NumRecords, h.LastOffsetDelta)
				break
			}
		} else if _, err := br.Discard(int(body)); err != nil {
			return r, fmt.Errorf("read segment %d at %d: %w", s.baseOffset, pos, err)
		}
		if h.PartitionLeaderEpoch > lastEpoch {
			lastEpoch = h.PartitionLeaderEpoch
			r.epochs = append(r.epochs, EpochEntry{LeaderEpoch: h.PartitionLeaderEpoch, StartOffset: h.BaseOffset})
		}
		r.state.noteBatch(s.baseOffset, &h, pos, intervalBytes)
		pos += int64(h.Size())
	}
	return r, nil
}

// checkStoredOffsets checks the offsets of a header that a scan read from
// a segment and framed (parseStoredHeader): that they are increasing from
// expectNext and within [baseOffset, nextBase), and that they fit the
// index's relative int32.
func checkStoredOffsets(h *BatchHeader, expectNext, baseOffset, nextBase int64) error {
	switch {
	case h.BaseOffset < expectNext:
		return fmt.Errorf("base offset %d below the expected %d", h.BaseOffset, expectNext)
	case h.LastOffset() >= nextBase || h.LastOffset() < h.BaseOffset:
		return fmt.Errorf("last offset %d beyond the next segment at %d", h.LastOffset(), nextBase)
	case h.LastOffset()-baseOffset > math.MaxInt32:
		return fmt.Errorf("last offset %d too far above the segment base", h.LastOffset())
	}
	return nil
}

// indexScratchBytes is the size of the buffer index writes go through: a
// multiple of both entry sizes.
const indexScratchBytes = 170 * indexEntrySize * timeIndexEntrySize / 4 // 4080

// readIndexFile reads an index file; a missing one reads as empty.
func readIndexFile(fsys FS, cache *FileCache, name string) ([]byte, error) {
	raw, err := readFileVia(fsys, cache, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return raw, nil
}

// writeIndexes appends the index entries not yet in the files (each file
// opened, written and closed), so that a flush allocates nothing beyond
// the opens: the encoding goes through scratch (Log.indexScratch), as a
// buffer made here would escape through the File interface. Caller holds
// Log.wmu, or Log.fmu for a segment no longer active.
func (s *segment) writeIndexes(scratch *[indexScratchBytes]byte) error {
	return s.persistIndexes(scratch, false)
}

// persistIndexes brings both index files up to date with the entries in
// memory, opening each file at most once: it truncates a stale one,
// appends the entries not yet in it and, with doSync, fsyncs it if it
// changed since its last fsync. A file with nothing to do is not opened.
func (s *segment) persistIndexes(scratch *[indexScratchBytes]byte, doSync bool) error {
	if err := s.persistIndexFile(indexSuffix, &s.indexFile, len(s.index), scratch, doSync); err != nil {
		return err
	}
	return s.persistIndexFile(timeIndexSuffix, &s.timeIndexFile, len(s.timeIndex), scratch, doSync)
}

func (s *segment) persistIndexFile(suffix string, st *indexFileState, entries int, scratch *[indexScratchBytes]byte, doSync bool) error {
	if st.absent {
		if entries == 0 && !doSync {
			return nil
		}
	} else if st.written == entries && !st.stale && (!doSync || !st.unsynced) {
		return nil
	}
	name := segmentFileName(s.dir, s.baseOffset, suffix)
	flags := os.O_RDWR | os.O_CREATE
	if st.stale {
		flags |= os.O_TRUNC
	}
	f, err := openFile(s.fsys, s.files, name, flags, 0o644)
	if err != nil {
		return fmt.Errorf("open %s: %w", name, err)
	}
	if st.absent {
		st.absent, st.unsynced = false, true
		s.createdIndex.Store(true)
	}
	if st.stale {
		st.stale, st.written, st.unsynced = false, 0, true
	}
	err = s.writeIndexEntries(f, suffix, st, entries, scratch)
	if err == nil && doSync && st.unsynced {
		if err = f.Sync(); err != nil {
			err = fmt.Errorf("fsync %s: %w", name, err)
		} else {
			st.unsynced = false
		}
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close %s: %w", name, cerr)
	}
	return err
}

// writeIndexEntries writes the entries of the index named by suffix from
// st.written on to f.
func (s *segment) writeIndexEntries(f File, suffix string, st *indexFileState, entries int, scratch *[indexScratchBytes]byte) error {
	size := indexEntrySize
	if suffix == timeIndexSuffix {
		size = timeIndexEntrySize
	}
	for st.written < entries {
		n := min(entries-st.written, indexScratchBytes/size)
		buf := scratch[:n*size]
		if suffix == indexSuffix {
			for i, e := range s.index[st.written : st.written+n] {
				binary.BigEndian.PutUint32(buf[i*indexEntrySize:], uint32(e.relOffset))
				binary.BigEndian.PutUint32(buf[i*indexEntrySize+4:], uint32(e.position))
			}
		} else {
			for i, e := range s.timeIndex[st.written : st.written+n] {
				binary.BigEndian.PutUint64(buf[i*timeIndexEntrySize:], uint64(e.timestamp))
				binary.BigEndian.PutUint32(buf[i*timeIndexEntrySize+8:], uint32(e.relOffset))
			}
		}
		if _, err := f.WriteAt(buf, int64(st.written)*int64(size)); err != nil {
			return fmt.Errorf("write %s: %w", f.Name(), err)
		}
		st.written += n
		st.unsynced = true
	}
	return nil
}

// writeIndexesUnsynced brings both index files up to date with the
// entries in memory without fsyncing them, creating an absent one even
// without entries (Open rebuilds a segment with data whose index is
// missing): what Log.CloseUnsynced leaves for the caller's sync of the
// file system. Caller holds Log.fmu.
func (s *segment) writeIndexesUnsynced(scratch *[indexScratchBytes]byte) error {
	for _, st := range []*indexFileState{&s.indexFile, &s.timeIndexFile} {
		if st.absent {
			st.absent, st.stale = false, true // created (truncated, if a stale file is there) by the write below
		}
	}
	return s.persistIndexes(scratch, false)
}

// rewriteIndexes replaces both index files with the in-memory entries,
// after a rebuild or truncation. Caller holds Log.wmu (and Log.fmu for a
// segment no longer active).
func (s *segment) rewriteIndexes(scratch *[indexScratchBytes]byte) error {
	s.indexFile.stale, s.timeIndexFile.stale = true, true
	return s.writeIndexes(scratch)
}

// sync fsyncs the segment's files: the .log, then, with indexes, its two
// indexes (writing the entries not yet in them first), and its
// .txnindex; each index file only if it changed since its last fsync.
// A flush leaves out the indexes of the active segment (indexes false):
// Open rebuilds the last segment's indexes unless Close wrote them, so
// they need reach the disk only at roll and close, and an fsyncing append
// opens no index file. Caller holds Log.fmu, or owns the log (Open).
func (s *segment) sync(scratch *[indexScratchBytes]byte, indexes bool) error {
	if err := s.logFile.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", s.logFile.Name(), err)
	}
	if indexes {
		if err := s.persistIndexes(scratch, true); err != nil {
			return err
		}
	}
	return s.syncTxnIndex()
}

// syncIndexes brings the segment's index files up to date and fsyncs
// them and its .txnindex, each only if it has something pending: for a
// segment whose .log is already durable (wholly below the recovery
// point). Caller holds Log.fmu.
func (s *segment) syncIndexes(scratch *[indexScratchBytes]byte) error {
	if err := s.persistIndexes(scratch, true); err != nil {
		return err
	}
	return s.syncTxnIndex()
}

// lookup returns the position from which to scan for offset: that of the
// last index entry at or below it, or 0. Caller holds Log.mu.
func (s *segment) lookup(offset int64) int64 {
	rel := offset - s.baseOffset
	lo, hi := 0, len(s.index) // find the first entry above rel
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if int64(s.index[m].relOffset) > rel {
			hi = m
		} else {
			lo = m + 1
		}
	}
	if lo == 0 {
		return 0
	}
	return int64(s.index[lo-1].position)
}

// upperBound returns a position at or after the end of the last batch whose
// last offset is below endOffset: that of the first index entry at or above
// endOffset, or the segment size. Caller holds Log.mu.
func (s *segment) upperBound(endOffset int64) int64 {
	rel := endOffset - s.baseOffset
	lo, hi := 0, len(s.index) // find the first entry at or above rel
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if int64(s.index[m].relOffset) >= rel {
			hi = m
		} else {
			lo = m + 1
		}
	}
	if lo == len(s.index) {
		return s.size
	}
	return int64(s.index[lo].position)
}

// timeLookup returns the offset from which to scan for the first batch with
// a max timestamp >= ts. Caller holds Log.mu.
func (s *segment) timeLookup(ts int64) int64 {
	lo, hi := 0, len(s.timeIndex) // find the first entry above ts
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s.timeIndex[m].timestamp > ts {
			hi = m
		} else {
			lo = m + 1
		}
	}
	if lo == 0 {
		return s.baseOffset
	}
	return s.baseOffset + int64(s.timeIndex[lo-1].relOffset)
}

// readHeaderAt reads and frames the header of the batch at pos. Any problem
// is ErrCorrupt: the bytes came from our own segment. Caller holds Log.mu
// or Log.wmu, which keep s.size and the file stable.
func (s *segment) readHeaderAt(pos int64, scratch *[BatchHeaderSize]byte) (BatchHeader, error) {
	if pos+BatchHeaderSize > s.size {
		return BatchHeader{}, s.headerPastEnd(pos)
	}
	if _, err := s.logFile.ReadAt(scratch[:], pos); err != nil {
		return BatchHeader{}, fmt.Errorf("read segment %d at %d: %w", s.baseOffset, pos, err)
	}
	var h BatchHeader
	if err := parseStoredHeader(&h, scratch[:], s.size-pos); err != nil {
		return h, s.corruptAt(pos, err)
	}
	return h, nil
}

// corruptAt reports the framing problem err of the batch at pos as
// ErrCorrupt: the bytes came from our own segment.
func (s *segment) corruptAt(pos int64, err error) error {
	return fmt.Errorf("segment %d position %d: %v: %w", s.baseOffset, pos, err, ErrCorrupt)
}

// headerPastEnd is the error for a batch at pos too close to the end of
// the segment to hold a header.
func (s *segment) headerPastEnd(pos int64) error {
	return s.corruptAt(pos, fmt.Errorf("header past the end at %d", s.size))
}

// findBatch returns the position and header of the first batch whose last
// offset is >= offset; found is false if the segment has none. Caller holds
// Log.mu or Log.wmu.
func (s *segment) findBatch(offset int64, scratch *[BatchHeaderSize]byte) (pos int64, h BatchHeader, found bool, err error) {
	for pos = s.lookup(offset); pos < s.size; pos += int64(h.Size()) {
		if h, err = s.readHeaderAt(pos, scratch); err != nil {
			return 0, h, false, err
		}
		if h.LastOffset() >= offset {
			return pos, h, true, nil
		}
	}
	return 0, h, false, nil
}

// findBatchChunked is findBatch reading the segment in chunks of
// len(chunk) bytes rather than one pread per header: the headers between
// two index entries usually come from one read. buffered is the part of
// chunk that holds the segment's bytes from pos on (possibly empty), so
// that the caller need not read them again. Caller holds Log.mu or
// Log.wmu.
func (s *segment) findBatchChunked(offset int64, chunk []byte) (pos int64, h BatchHeader, buffered []byte, found bool, err error) {
	var (
		chunkPos int64 = -1 // segment position of chunk[0]
		chunkLen int
	)
	for pos = s.lookup(offset); pos < s.size; pos += int64(h.Size()) {
		if pos+BatchHeaderSize > s.size {
			return 0, h, nil, false, s.headerPastEnd(pos)
		}
		if chunkPos < 0 || pos+BatchHeaderSize > chunkPos+int64(chunkLen) {
			chunkPos, chunkLen = pos, int(min(int64(len(chunk)), s.size-pos))
			if _, err := s.logFile.ReadAt(chunk[:chunkLen], pos); err != nil {
				return 0, h, nil, false, fmt.Errorf("read segment %d at %d: %w", s.baseOffset, pos, err)
			}
		}
		at := chunk[pos-chunkPos : chunkLen]
		if err = parseStoredHeader(&h, at, s.size-pos); err != nil {
			return 0, h, nil, false, s.corruptAt(pos, err)
		}
		if h.LastOffset() >= offset {
			return pos, h, at, true, nil
		}
	}
	return 0, h, nil, false, nil
}

// largestTimestampMs is what time retention compares: the largest batch
// timestamp, or the file's modification time when no batch has one.
func (s *segment) largestTimestampMs() int64 {
	if s.maxTimestamp >= 0 {
		return s.maxTimestamp
	}
	fi, err := s.logFile.Stat()
	if err != nil {
		return math.MaxInt64 // unknown age: keep it
	}
	return fi.ModTime().UnixMilli()
}

// pending reports whether the segment's index files (.index, .timeindex,
// .txnindex) lack entries it holds in memory, need rewriting, changed
// since their last fsync, or are yet to be created: what a flush must still persist, whatever the
// segment's place relative to the recovery point. Caller holds Log.wmu,
// or Log.fmu for a segment no longer active.
func (s *segment) pending() bool {
	return s.indexFile.written < len(s.index) || s.indexFile.stale || s.indexFile.unsynced || s.indexFile.absent ||
		s.timeIndexFile.written < len(s.timeIndex) || s.timeIndexFile.stale || s.timeIndexFile.unsynced || s.timeIndexFile.absent ||
		(s.hasTxnFile && s.txnUnsynced)
}
