package logstore

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// EpochEntry says that leader epoch LeaderEpoch wrote its first record at
// StartOffset.
type EpochEntry struct {
	LeaderEpoch int32
	StartOffset int64
}

// LeaderEpochCache maps leader epochs to the offset where each began, for
// KIP-101/279 truncation. It is persisted in the partition directory as
// leader-epoch-checkpoint ("0\n<count>\n<epoch> <startOffset>\n..."),
// always replaced atomically (temporary file, fsync, rename). Entries are
// strictly increasing in both epoch and start offset.
//
// A cache opened alone (OpenLeaderEpochCache) writes every change before
// it becomes visible. A Log's cache defers Assign: the entry is visible at
// once and reaches the file with the log's next flush, before the
// recovery point passes it (see the package documentation, "Durability"),
// so that a new leader's epoch costs no fsync; the truncations are
// written at once, as in a cache opened alone.
//
// Methods are safe for concurrent use. Readers never wait for a file
// write; a mutator that writes holds c.wmu across it (an fsync).
type LeaderEpochCache struct {
	fs   FS
	path string
	// deferAssign: Assign only marks the cache dirty, and persist
	// writes it (a Log's cache). Fixed at open.
	deferAssign bool
	// wmu serialises the changes and the writes of the file; taken
	// before mu.
	wmu   sync.Mutex
	dirty bool // guarded by wmu: entries holds changes the file lacks
	mu    sync.RWMutex
	// entries is guarded by mu for readers and changed only under wmu
	// and mu; replaced, never modified in place.
	entries []EpochEntry
}

// OpenLeaderEpochCache loads the cache stored at path (a missing file is an
// empty cache). A file that does not parse, or whose entries are not
// increasing, returns an error wrapping ErrCorrupt.
func OpenLeaderEpochCache(path string) (*LeaderEpochCache, error) {
	return openLeaderEpochCache(OSFS, path)
}

func openLeaderEpochCache(fsys FS, path string) (*LeaderEpochCache, error) {
	lines, err := readCheckpointLines(fsys, path)
	if err != nil {
		return nil, err
	}
	c := &LeaderEpochCache{fs: fsys, path: path}
	for i, line := range lines {
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("read leader epochs %s: entry %d %q: %w", path, i, line, ErrCorrupt)
		}
		e, err1 := strconv.ParseInt(f[0], 10, 32)
		off, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || e < 0 || off < 0 {
			return nil, fmt.Errorf("read leader epochs %s: entry %d %q: %w", path, i, line, ErrCorrupt)
		}
		if n := len(c.entries); n > 0 && (int32(e) <= c.entries[n-1].LeaderEpoch || off < c.entries[n-1].StartOffset) {
			return nil, fmt.Errorf("read leader epochs %s: entry %d %q goes backwards: %w", path, i, line, ErrCorrupt)
		}
		c.entries = append(c.entries, EpochEntry{LeaderEpoch: int32(e), StartOffset: off})
	}
	return c, nil
}

// Assign records that leaderEpoch starts at startOffset. It is ignored when
// leaderEpoch is not greater than the latest epoch, or startOffset is below
// the latest entry's start offset. A latest entry that starts exactly at
// startOffset wrote nothing, so it is replaced (as Kafka does). A negative
// leaderEpoch (a batch from before leader epochs) is ignored.
func (c *LeaderEpochCache) Assign(leaderEpoch int32, startOffset int64) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if leaderEpoch < 0 || startOffset < 0 {
		return nil
	}
	n := len(c.entries)
	if n > 0 {
		last := c.entries[n-1]
		if leaderEpoch <= last.LeaderEpoch || startOffset < last.StartOffset {
			return nil
		}
		if startOffset == last.StartOffset {
			n--
		}
	}
	next := make([]EpochEntry, n, n+1)
	copy(next, c.entries)
	next = append(next, EpochEntry{LeaderEpoch: leaderEpoch, StartOffset: startOffset})
	if c.deferAssign {
		c.publishLocked(next)
		c.dirty = true
		return nil
	}
	return c.replaceLocked(next)
}

// LatestEpoch is the highest leader epoch recorded; false if none is.
func (c *LeaderEpochCache) LatestEpoch() (int32, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if len(c.entries) == 0 {
		return -1, false
	}
	return c.entries[len(c.entries)-1].LeaderEpoch, true
}

// Entries returns a copy of the entries, oldest first.
func (c *LeaderEpochCache) Entries() []EpochEntry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return append([]EpochEntry(nil), c.entries...)
}

// EndOffsetFor answers OffsetsForLeaderEpoch as Kafka 2.x does (KIP-101,
// KIP-279): for the latest epoch, (epoch, logEndOffset); otherwise the
// largest epoch <= requestedEpoch and the start offset of the first higher
// epoch. When requestedEpoch is below every entry the answer is
// (requestedEpoch, start of the first entry): the older epochs were removed
// with the start of the log, and the follower must not keep anything past
// the leader's first epoch. (-1, -1) when requestedEpoch is -1, above the
// latest epoch, or the cache is empty.
func (c *LeaderEpochCache) EndOffsetFor(requestedEpoch int32, logEndOffset int64) (leaderEpoch int32, endOffset int64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := len(c.entries)
	if requestedEpoch < 0 || n == 0 {
		return -1, -1
	}
	if c.entries[n-1].LeaderEpoch == requestedEpoch {
		return requestedEpoch, logEndOffset
	}
	// higher is the first entry with an epoch above the requested one.
	higher := sort.Search(n, func(i int) bool { return c.entries[i].LeaderEpoch > requestedEpoch })
	if higher == n {
		return -1, -1
	}
	if higher == 0 {
		return requestedEpoch, c.entries[0].StartOffset
	}
	return c.entries[higher-1].LeaderEpoch, c.entries[higher].StartOffset
}

// TruncateFromEnd drops the entries that start at or after endOffset; the
// log was truncated to endOffset.
func (c *LeaderEpochCache) TruncateFromEnd(endOffset int64) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	keep := sort.Search(len(c.entries), func(i int) bool { return c.entries[i].StartOffset >= endOffset })
	if keep == len(c.entries) {
		return nil
	}
	return c.replaceLocked(append([]EpochEntry(nil), c.entries[:keep]...))
}

// TruncateFromStart drops the entries that start at or before startOffset,
// the new log start, and re-adds the last of them starting at startOffset,
// since its epoch still covers the first remaining records.
func (c *LeaderEpochCache) TruncateFromStart(startOffset int64) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	drop := sort.Search(len(c.entries), func(i int) bool { return c.entries[i].StartOffset > startOffset })
	if drop == 0 || (drop == 1 && c.entries[0].StartOffset == startOffset) {
		return nil
	}
	next := make([]EpochEntry, 0, len(c.entries)-drop+1)
	next = append(next, EpochEntry{LeaderEpoch: c.entries[drop-1].LeaderEpoch, StartOffset: startOffset})
	return c.replaceLocked(append(next, c.entries[drop:]...))
}

// Clear removes every entry; the log was emptied.
func (c *LeaderEpochCache) Clear() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if len(c.entries) == 0 {
		return nil
	}
	return c.replaceLocked(nil)
}

// replaceLocked persists entries and then makes them current. Caller holds c.wmu.
func (c *LeaderEpochCache) replaceLocked(entries []EpochEntry) error {
	if err := c.writeLocked(entries, true); err != nil {
		return err
	}
	c.publishLocked(entries)
	c.dirty = false
	return nil
}

// publishLocked makes entries current. Caller holds c.wmu.
func (c *LeaderEpochCache) publishLocked(entries []EpochEntry) {
	c.mu.Lock()
	c.entries = entries
	c.mu.Unlock()
}

// writeLocked replaces the file with entries: the temporary file is
// fsynced before the rename, and the directory after it when syncDir is
// set (else the caller's fsync of the directory must follow before
// anything relies on the rename). Caller holds c.wmu.
func (c *LeaderEpochCache) writeLocked(entries []EpochEntry, syncDir bool) error {
	err := writeCheckpointLinesSync(c.fs, c.path, len(entries), func(b []byte, i int) []byte {
		b = strconv.AppendInt(b, int64(entries[i].LeaderEpoch), 10)
		b = append(b, ' ')
		return strconv.AppendInt(b, entries[i].StartOffset, 10)
	}, syncDir)
	if err != nil {
		return fmt.Errorf("write leader epochs %s: %w", c.path, err)
	}
	return nil
}

// persist writes the entries a deferred Assign added since the last
// write, if any, and reports whether it wrote. With syncDir false the
// caller fsyncs the directory afterwards (a log flush does anyway), and
// until then the rename may not survive a crash; the file's data is
// fsynced before the rename either way, so a crash leaves the old file or
// the new one, whole, never a renamed file without its data.
func (c *LeaderEpochCache) persist(syncDir bool) (bool, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if !c.dirty {
		return false, nil
	}
	if err := c.writeLocked(c.entries, syncDir); err != nil {
		return false, err
	}
	c.dirty = false
	return true, nil
}
