package logstore

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
)

// The transaction index, Kafka's TransactionIndex: <base>.txnindex holds,
// for the aborted transactions whose ABORT marker lies in the segment, one
// 34-byte entry each (AbortedTxn), in marker order. The file exists only
// once the segment has an entry. Logstore keeps the entries in memory too
// (34 bytes per aborted transaction), so reads of the index do no I/O.

const (
	txnIndexSuffix = ".txnindex"
	// abortedTxnSize is one .txnindex entry: version int16, producer id,
	// first offset, last offset, last stable offset (int64 each).
	abortedTxnSize = 34
	// abortedTxnVersion is the only entry version (Kafka's CURRENT_VERSION).
	abortedTxnVersion = 0
)

// AbortedTxn is one entry of a segment's .txnindex (Kafka's AbortedTxn): 34 bytes, big endian:
// version int16 (0), producer id int64, first offset int64, last offset int64, last stable offset int64.
type AbortedTxn struct {
	ProducerID       int64
	FirstOffset      int64 // offset of the transaction's first batch
	LastOffset       int64 // offset of its ABORT marker
	LastStableOffset int64 // the partition's LSO when the marker was appended
}

func (t AbortedTxn) put(b []byte) {
	be := binary.BigEndian
	be.PutUint16(b[0:], abortedTxnVersion)
	be.PutUint64(b[2:], uint64(t.ProducerID))
	be.PutUint64(b[10:], uint64(t.FirstOffset))
	be.PutUint64(b[18:], uint64(t.LastOffset))
	be.PutUint64(b[26:], uint64(t.LastStableOffset))
}

// parseAbortedTxn decodes one entry; ok is false for a version other than 0.
func parseAbortedTxn(b []byte) (t AbortedTxn, version int16, ok bool) {
	be := binary.BigEndian
	version = int16(be.Uint16(b[0:]))
	t = AbortedTxn{
		ProducerID:       int64(be.Uint64(b[2:])),
		FirstOffset:      int64(be.Uint64(b[10:])),
		LastOffset:       int64(be.Uint64(b[18:])),
		LastStableOffset: int64(be.Uint64(b[26:])),
	}
	return t, version, version == abortedTxnVersion
}

// encodeAbortedTxns is the file content of entries.
func encodeAbortedTxns(entries []AbortedTxn) []byte {
	b := make([]byte, len(entries)*abortedTxnSize)
	for i, t := range entries {
		t.put(b[i*abortedTxnSize:])
	}
	return b
}

// loadTxnIndex reads the segment's .txnindex, if it exists, into s.txns
// (and closes it again). A torn last entry (a size that is not
// a multiple of 34) is cut off. An entry of another version, one whose
// last offset is below the segment's base, or one not above the entry
// before it is ErrCorrupt, naming the file. Entries are not checked
// against the segment's end here: recovery cuts those at or past it
// (truncateTxns).
func (s *segment) loadTxnIndex(fsys FS, dir string) error {
	name := segmentFileName(dir, s.baseOffset, txnIndexSuffix)
	f, err := openFile(fsys, s.files, name, os.O_RDWR, 0o644)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open transaction index %s: %w", name, err)
	}
	err = s.readTxnIndex(f, name)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close transaction index %s: %w", name, cerr)
	}
	return err
}

// readTxnIndex is loadTxnIndex's reading of the open file f.
func (s *segment) readTxnIndex(f File, name string) error {
	raw, err := io.ReadAll(f)
	if err != nil {
		return fmt.Errorf("read transaction index %s: %w", name, err)
	}
	n := len(raw) / abortedTxnSize
	entries := make([]AbortedTxn, 0, n)
	for i := range n {
		t, version, ok := parseAbortedTxn(raw[i*abortedTxnSize:])
		var bad string
		switch {
		case !ok:
			bad = fmt.Sprintf("version %d, want %d", version, abortedTxnVersion)
		case t.LastOffset < s.baseOffset:
			bad = fmt.Sprintf("last offset %d below the segment base %d", t.LastOffset, s.baseOffset)
		case t.FirstOffset > t.LastOffset:
			bad = fmt.Sprintf("first offset %d above the last offset %d", t.FirstOffset, t.LastOffset)
		case len(entries) > 0 && t.LastOffset <= entries[len(entries)-1].LastOffset:
			bad = fmt.Sprintf("last offset %d not above the previous entry's %d", t.LastOffset, entries[len(entries)-1].LastOffset)
		}
		if bad != "" {
			return fmt.Errorf("transaction index %s: entry %d: %s: %w", name, i, bad, ErrCorrupt)
		}
		entries = append(entries, t)
	}
	s.hasTxnFile, s.txns = true, entries
	if len(raw)%abortedTxnSize != 0 {
		// A torn append: the entry never completed, so its marker's
		// segment is being recovered too, and the caller replays it.
		if err := f.Truncate(int64(n * abortedTxnSize)); err != nil {
			return fmt.Errorf("truncate torn entry of transaction index %s: %w", name, err)
		}
		s.txnTorn, s.txnUnsynced = true, true
	}
	return nil
}

// syncTxnIndex fsyncs the segment's .txnindex if it changed since its
// last fsync, opening it for that and closing it again.
func (s *segment) syncTxnIndex() error {
	if !s.hasTxnFile || !s.txnUnsynced {
		return nil
	}
	name := segmentFileName(s.dir, s.baseOffset, txnIndexSuffix)
	f, err := openFile(s.fsys, s.files, name, os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("open transaction index %s: %w", name, err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync %s: %w", name, err)
	}
	s.txnUnsynced = false
	return nil
}

// truncateTxns removes the entries whose last offset is at or above
// endOffset, from memory and from the file. It reports whether any went.
// Caller holds Log.wmu, and Log.mu unless the segment is not yet
// published.
func (s *segment) truncateTxns(endOffset int64) (bool, error) {
	k := len(s.txns)
	for k > 0 && s.txns[k-1].LastOffset >= endOffset {
		k--
	}
	if k == len(s.txns) {
		return false, nil
	}
	s.txns = s.txns[:k:k]
	if s.hasTxnFile {
		name := segmentFileName(s.dir, s.baseOffset, txnIndexSuffix)
		f, err := openFile(s.fsys, s.files, name, os.O_RDWR, 0o644)
		if err == nil {
			err = f.Truncate(int64(k * abortedTxnSize))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		s.txnUnsynced = true
		if err != nil {
			return true, fmt.Errorf("truncate transaction index of segment %d: %w", s.baseOffset, err)
		}
	}
	return true, nil
}

// recountTxnsLocked sets l.txnEntries from the segments. Caller holds
// l.mu for writing, or owns l (Open).
func (l *Log) recountTxnsLocked() {
	n := 0
	for _, s := range l.segments {
		n += len(s.txns)
	}
	l.txnEntries.Store(int64(n))
}

// AppendAbortedTxn adds t to the .txnindex of the segment holding t.LastOffset (normally the
// active one), creating the file on first use. An entry whose segment already holds one with
// the same LastOffset is ignored, so replaying the log after a restart is idempotent.
//
// The duplicate check is per segment, not against the last entry of the
// whole log (the contract's first wording, which is enough only while
// every index is intact): an entry not yet in its segment goes in marker
// order, at the end of the segment's index as a rule. After an unclean shutdown an older
// segment's .txnindex may have lost entries a newer one kept, and the
// caller's replay then adds them again in the middle of the log; an entry
// inserted before the segment's last one rewrites the segment's file
// atomically (temporary file, fsync, rename, directory fsync).
//
// t.LastOffset must be below LogEndOffset (the marker is appended first)
// and t.FirstOffset at most t.LastOffset, else the error wraps
// ErrOffsetOutOfRange. An entry whose marker lies below the first segment
// is ignored: its segment is gone. The entry is written to the page cache
// and fsynced with its segment (Flush, the flush policy, the roll flush,
// Close); an entry whose marker is already below the recovery point (in a
// segment below it, or in the active segment after the flush policy
// fsynced the marker) is fsynced at once. So after a crash an entry may be missing for a marker at or above the recovery
// point passed to Open: the caller replays the markers from there (see
// the package documentation, "Transaction index").
//
// Any I/O failure of the index (creating, writing, rewriting or fsyncing
// the file) fails the log (ErrStorage), as a failed fsync does: the
// marker is in the log already and its entry is not, so the log refuses
// every later write (Kafka takes the log directory offline) and only a
// reopen, whose caller replays the markers, makes them agree again.
func (l *Log) AppendAbortedTxn(t AbortedTxn) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	if leo := l.logEndOffset.Load(); t.LastOffset >= leo || t.FirstOffset > t.LastOffset {
		return fmt.Errorf("append aborted transaction %+v to %s, log end offset %d: %w", t, l.dir, leo, ErrOffsetOutOfRange)
	}
	if t.LastOffset < l.segments[0].baseOffset {
		return nil
	}
	i := l.segmentFor(t.LastOffset)
	s := l.segments[i]
	k, found := slices.BinarySearchFunc(s.txns, t.LastOffset, func(e AbortedTxn, off int64) int {
		return cmp.Compare(e.LastOffset, off)
	})
	if found {
		return nil
	}
	active := i == len(l.segments)-1
	// The background flusher syncs only segments that were not active
	// when it listed them; a write to an older one must not race it.
	if !active {
		l.fmu.Lock()
		defer l.fmu.Unlock()
	}
	if k < len(s.txns) {
		return l.insertAbortedTxnLocked(s, k, t)
	}
	name := segmentFileName(l.dir, s.baseOffset, txnIndexSuffix)
	flags := os.O_RDWR
	if !s.hasTxnFile {
		// None of ours is on disk (Open loads every one): a stale one of
		// the same name is replaced.
		flags |= os.O_CREATE | os.O_TRUNC
	}
	f, err := openFile(l.fs, l.files, name, flags, 0o644)
	if err != nil {
		return l.fail("append aborted transaction", fmt.Errorf("open transaction index %s: %w", name, err))
	}
	closed := false
	defer func() {
		if !closed {
			_ = f.Close()
		}
	}()
	if !s.hasTxnFile {
		l.mu.Lock()
		s.hasTxnFile = true
		l.mu.Unlock()
		l.dirDirty = true
	}
	s.txnUnsynced = true
	var buf [abortedTxnSize]byte
	t.put(buf[:])
	pos := int64(len(s.txns) * abortedTxnSize)
	if _, err := f.WriteAt(buf[:], pos); err != nil {
		if terr := f.Truncate(pos); terr != nil {
			err = errors.Join(err, terr)
		}
		return l.fail("append aborted transaction", fmt.Errorf("write transaction index of segment %d: %w", s.baseOffset, err))
	}
	l.mu.Lock()
	s.txns = append(s.txns, t)
	l.recountTxnsLocked()
	l.mu.Unlock()
	if t.LastOffset < l.recoveryPoint.Load() {
		// The marker is below the recovery point (a segment wholly
		// below it, or a flush policy that fsynced the marker in the
		// active one): a crash must not lose the entry, since the
		// caller replays markers only from the recovery point it
		// checkpointed, so it is fsynced now.
		if l.dirDirty {
			if err := syncDir(l.fs, l.dir); err != nil {
				return l.fail("append aborted transaction", err)
			}
			l.dirDirty = false
		}
		if err := f.Sync(); err != nil {
			return l.fail("append aborted transaction", fmt.Errorf("fsync %s: %w", name, err))
		}
		s.txnUnsynced = false
	}
	closed = true
	if err := f.Close(); err != nil {
		return l.fail("append aborted transaction", fmt.Errorf("close %s: %w", name, err))
	}
	return nil
}

// insertAbortedTxnLocked puts t at position k of s's index, before
// entries already there: the whole file is written anew beside the old
// one and renamed over it (fsynced, with its directory), so a crash
// leaves either index, both in marker order. Any failure fails the log.
// Caller holds l.wmu, and l.fmu unless s is the active segment.
func (l *Log) insertAbortedTxnLocked(s *segment, k int, t AbortedTxn) error {
	entries := slices.Insert(slices.Clone(s.txns), k, t)
	name := segmentFileName(l.dir, s.baseOffset, txnIndexSuffix)
	if err := WriteFileAtomicFS(l.fs, name, encodeAbortedTxns(entries)); err != nil {
		return l.fail("insert aborted transaction", fmt.Errorf("rewrite transaction index %s: %w", name, err))
	}
	l.mu.Lock()
	s.hasTxnFile, s.txns = true, entries
	s.txnUnsynced = false // WriteFileAtomicFS fsynced it
	l.recountTxnsLocked()
	l.mu.Unlock()
	l.log.Warn().Int64("segment", s.baseOffset).Int64("offset", t.LastOffset).Int("entries", len(entries)).
		Msg("aborted transaction added before the last entry of its segment's transaction index (replayed after a lost index)")
	return nil
}

// CollectAbortedTxns returns, oldest first, the aborted transactions that overlap
// [fetchOffset, upperBoundOffset): LastOffset >= fetchOffset and FirstOffset < upperBoundOffset,
// searching from the segment holding fetchOffset on (Kafka's collectAbortedTransactions).
//
// As Kafka's, the search stops after the first entry whose
// LastStableOffset is at or above upperBoundOffset: no transaction
// aborted later can have started below it. The result is the caller's;
// it is nil when there is none.
func (l *Log) CollectAbortedTxns(fetchOffset, upperBoundOffset int64) ([]AbortedTxn, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.isClosed() {
		return nil, ErrClosed
	}
	if l.txnEntries.Load() == 0 {
		return nil, nil // no aborted transaction at all: no segment to look at
	}
	l.txnScans.Add(1)
	var out []AbortedTxn
	for _, s := range l.segments[l.segmentFor(fetchOffset):] {
		for _, t := range s.txns {
			if t.LastOffset >= fetchOffset && t.FirstOffset < upperBoundOffset {
				out = append(out, t)
			}
			if t.LastStableOffset >= upperBoundOffset {
				return out, nil
			}
		}
	}
	return out, nil
}

// AppendControlAsLeader appends one control batch built by BuildControlBatch as leader
// (AppendAsLeader refuses control batches from clients; this is the broker's own path).
//
// batch must be exactly one transaction marker (ParseControlBatch) with
// base offset 0; it is stamped as AppendAsLeader stamps (offset, partition
// leader epoch; its timestamps stay as built) and modified in place.
func (l *Log) AppendControlAsLeader(batch []byte, leaderEpoch int32) (AppendInfo, error) {
	if _, _, err := ParseControlBatch(batch); err != nil {
		return AppendInfo{}, fmt.Errorf("append control batch to %s: %w", l.dir, err)
	}
	if h := parseHeader(batch); h.Size() != len(batch) || h.BaseOffset != 0 || h.NumRecords != 1 {
		return AppendInfo{}, fmt.Errorf("append control batch to %s: %w: want one batch of one marker at base offset 0", l.dir, ErrInvalidRecord)
	}
	return l.appendBatches("append control batch", batch, appendControl, func(batches []BatchHeader, leo int64) error {
		stampAsLeader(batch, batches, leo, leaderEpoch, -1)
		return nil
	})
}

// sanitizeTxnIndex is recovery's part for the transaction index of s, a
// segment whose batches end before endOffset: the entries at or past it
// (markers lost with a torn tail, or an index that ran ahead of its
// segment) are removed, as is a torn last entry (loadTxnIndex), and both
// are logged. With syncNow (a trusted segment, which load does not fsync)
// a changed file is fsynced here. Called only by Open.
func (l *Log) sanitizeTxnIndex(s *segment, endOffset int64, syncNow bool) error {
	n := len(s.txns)
	cut, err := s.truncateTxns(endOffset)
	if err != nil {
		return err
	}
	if !cut && !s.txnTorn {
		return nil
	}
	l.log.Warn().Int64("segment", s.baseOffset).Int64("offset", endOffset).
		Int("entries_removed", n-len(s.txns)).Bool("torn_entry", s.txnTorn).
		Msg("removed transaction index entries past the end of the segment")
	s.txnTorn = false
	if syncNow {
		return s.syncTxnIndex()
	}
	return nil
}
