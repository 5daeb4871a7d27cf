package logstore

import (
	"fmt"
	"io/fs"
	"os"
	"sync"
)

// FileCache bounds the open .log descriptors of every Log that shares it
// (Config.Files): a broker makes one, sized from its open-file limit, and
// passes it to each log it opens. A segment's .log is then opened on
// demand (os.O_RDWR, never creating or truncating) when it is read,
// written, truncated, fsynced or stat'ed and is not open, and the least
// recently used descriptor that no operation is using is closed to make
// room. A descriptor is pinned for the length of each operation (a pread,
// a write, an fsync), so a reader never sees its file closed under it;
// when every descriptor is pinned the cache opens one more rather than
// wait, and closes the surplus as pins are released.
//
// A file with writes (or a truncation) since its last fsync is fsynced
// before its descriptor is closed: on Linux an fsync on a later
// descriptor flushes the inode's dirty pages too, but a write-back error
// reported to the closed descriptor could be lost. If that fsync fails,
// the file's next Sync returns the error (and the log fails, ErrStorage).
// So an eviction may cost an fsync of another log's active segment when
// the cache is smaller than the number of logs being written.
//
// A FileCache is safe for concurrent use. Index files never go through
// it: logstore opens them only to load, write or fsync them.
//
// Headroom: the bound counts the cached .log descriptors only. Beside
// them a broker's logs hold, each for the length of one call: an index,
// time index or transaction index file (one at a time per writer and
// one per background flush, so at most two per log being written), a
// .log over the bound while every cached one is pinned (one per
// concurrent read beyond it), the cleaner's new segment and its
// .txnindex.cleaned (per clean pass), a checkpoint's temporary file, and
// one index file per Open under way. So a broker sizes the cache below
// its RLIMIT_NOFILE by its sockets and by about twice the number of
// threads that write or fetch at once (request handlers, replica
// fetchers, flushes), plus its cleaner and recovery threads. Should the
// process run out anyway (EMFILE, or ENFILE for the system), every open
// of logstore's files sheds idle descriptors of the cache and retries
// briefly (see fdRetries) before it fails.
type FileCache struct {
	max  int
	mu   sync.Mutex
	cond sync.Cond // broadcast when an open or a close finishes
	// open counts the descriptors open, being closed, or being opened.
	open    int
	closing int
	// The unpinned open handles, most recently used first.
	head, tail *segFile
}

// NewFileCache returns a cache that keeps at most maxOpen .log files open
// (at least 1), except while more than that are in use at once.
func NewFileCache(maxOpen int) *FileCache {
	c := &FileCache{max: max(maxOpen, 1)}
	c.cond.L = &c.mu
	return c
}

// OpenFiles is the number of .log descriptors the cache holds now
// (including any being opened or closed).
func (c *FileCache) OpenFiles() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open
}

// Capacity is the maxOpen the cache was made with (at least 1).
func (c *FileCache) Capacity() int { return c.max }

func (c *FileCache) pushFrontLocked(h *segFile) {
	h.prev, h.next = nil, c.head
	if c.head != nil {
		c.head.prev = h
	} else {
		c.tail = h
	}
	c.head = h
	h.inLRU = true
}

func (c *FileCache) unlinkLocked(h *segFile) {
	if !h.inLRU {
		return
	}
	if h.prev != nil {
		h.prev.next = h.next
	} else {
		c.head = h.next
	}
	if h.next != nil {
		h.next.prev = h.prev
	} else {
		c.tail = h.prev
	}
	h.prev, h.next, h.inLRU = nil, nil, false
}

// makeRoomLocked closes unpinned descriptors, least recently used first,
// until fewer than limit are open, waiting for closes under way when no
// unpinned one is left; when every descriptor is pinned it gives up (the
// caller goes over the bound). It drops c.mu while closing.
func (c *FileCache) makeRoomLocked(limit int) {
	for c.open >= limit {
		v := c.tail
		if v == nil {
			if c.closing == 0 {
				return
			}
			c.cond.Wait()
			continue
		}
		c.evictLocked(v)
	}
}

// evictLocked closes the unpinned descriptor of v, fsyncing it first if
// it has unsynced writes. It drops c.mu meanwhile; v's state keeps other
// users away until the close is done.
func (c *FileCache) evictLocked(v *segFile) {
	c.unlinkLocked(v)
	f, needSync := v.f, v.dirty
	v.state, v.dirty = stateClosing, false
	c.closing++
	c.mu.Unlock()
	var err error
	if needSync {
		if err = f.Sync(); err != nil {
			err = fmt.Errorf("fsync %s before closing it: %w", f.Name(), err)
		}
	}
	if cerr := f.Close(); cerr != nil && needSync && err == nil {
		err = fmt.Errorf("close %s: %w", f.Name(), cerr)
	}
	c.mu.Lock()
	if err != nil && v.syncErr == nil {
		v.syncErr = err
	}
	v.f, v.state = nil, stateIdle
	c.open--
	c.closing--
	c.cond.Broadcast()
}

// segFile is the handle of a segment's .log. Without a cache it holds
// its file open for its life, as an *os.File would be; with one, the
// descriptor comes and goes (see FileCache). Its methods allocate nothing
// while the file is open.
type segFile struct {
	fsys  FS
	name  string     // the .log's path, reopened with os.O_RDWR
	cache *FileCache // nil: f is open until Close

	// Guarded by cache.mu when cache is non-nil.
	f          File
	pins       int
	state      uint8
	closed     bool
	dirty      bool   // written or truncated since its last fsync
	writing    int    // pins of writes (WriteAt, Truncate) not yet released
	writeSeq   uint64 // bumped as each write releases its pin
	syncErr    error  // a failed fsync before an eviction, for the next Sync
	inLRU      bool
	prev, next *segFile
}

const (
	stateIdle    = iota
	stateOpening // one caller is opening f
	stateClosing // the cache is closing f
)

// newSegFile wraps f, the open file name, in a handle that goes through
// cache (nil: none). dirty says f has changes not yet fsynced.
func newSegFile(fsys FS, name string, f File, cache *FileCache, dirty bool) *segFile {
	h := &segFile{fsys: fsys, name: name, f: f, dirty: dirty}
	h.adopt(cache, name)
	return h
}

// createSegFile creates (or truncates) the file name with flags and
// returns its handle, through cache (nil: none): the cache makes room
// before the file is opened, so the bound holds at every instant.
func createSegFile(fsys FS, name string, flags int, cache *FileCache) (*segFile, error) {
	if cache == nil {
		f, err := openFile(fsys, nil, name, flags, 0o644)
		if err != nil {
			return nil, err
		}
		return &segFile{fsys: fsys, name: name, f: f, dirty: true}, nil
	}
	c := cache
	c.mu.Lock()
	c.makeRoomLocked(c.max)
	c.open++ // reserved
	c.mu.Unlock()
	f, err := openFile(fsys, c, name, flags, 0o644)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.open--
		return nil, err
	}
	h := &segFile{fsys: fsys, name: name, cache: c, f: f, dirty: true}
	c.pushFrontLocked(h)
	return h, nil
}

// lazySegFile is a handle of the existing file name that opens it on its
// first use; without a cache it opens it now.
func lazySegFile(fsys FS, name string, cache *FileCache) (*segFile, error) {
	if cache == nil {
		f, err := openFile(fsys, nil, name, os.O_RDWR, 0o644)
		if err != nil {
			return nil, err
		}
		return &segFile{fsys: fsys, name: name, f: f}, nil
	}
	return &segFile{fsys: fsys, name: name, cache: cache}, nil
}

// adopt puts an uncached handle's open file under cache, to be reopened
// as name from then on (the cleaner's segment, once renamed into place:
// until then its descriptor is outside the cache's bound, one per clean
// pass). Caller excludes every other user of h.
func (h *segFile) adopt(cache *FileCache, name string) {
	h.name = name
	if cache == nil {
		return
	}
	c := cache
	c.mu.Lock()
	c.makeRoomLocked(c.max)
	h.cache = c
	c.open++
	c.pushFrontLocked(h)
	c.mu.Unlock()
}

// acquire returns the open file, opening it if the cache closed it, and
// pins it until release. write marks the file dirty.
func (h *segFile) acquire(write bool) (File, error) {
	c := h.cache
	if c == nil {
		return h.f, nil
	}
	c.mu.Lock()
	for h.state != stateIdle {
		c.cond.Wait()
	}
	if h.closed {
		c.mu.Unlock()
		return nil, &fs.PathError{Op: "use", Path: h.name, Err: os.ErrClosed}
	}
	if h.f != nil {
		if h.pins == 0 {
			c.unlinkLocked(h)
		}
		h.pins++
		if write {
			h.dirty = true
			h.writing++
		}
		f := h.f
		c.mu.Unlock()
		return f, nil
	}
	h.state = stateOpening
	c.makeRoomLocked(c.max)
	c.open++ // reserved
	c.mu.Unlock()
	f, err := openFile(h.fsys, c, h.name, os.O_RDWR, 0o644)
	c.mu.Lock()
	h.state = stateIdle
	c.cond.Broadcast()
	if err != nil {
		c.open--
		c.mu.Unlock()
		return nil, fmt.Errorf("reopen segment: %w", err)
	}
	if h.closed {
		c.open--
		c.mu.Unlock()
		_ = f.Close()
		return nil, &fs.PathError{Op: "use", Path: h.name, Err: os.ErrClosed}
	}
	h.f, h.pins = f, 1
	if write {
		h.dirty = true
		h.writing++
	}
	c.mu.Unlock()
	return f, nil
}

// release unpins the file acquire(false) returned.
func (h *segFile) release() {
	h.releasePin(false)
}

// releaseWrite unpins the file acquire(true) returned, once the write is
// done: the file is dirty again and its write sequence moves, so that a
// Sync whose fsync may have run before the write landed keeps it dirty.
func (h *segFile) releaseWrite() {
	h.releasePin(true)
}

func (h *segFile) releasePin(write bool) {
	c := h.cache
	if c == nil {
		return
	}
	c.mu.Lock()
	if write {
		h.writing--
		h.writeSeq++
		h.dirty = true
	}
	h.pins--
	if h.pins == 0 {
		if h.closed {
			f := h.f
			h.f = nil
			c.open--
			c.mu.Unlock()
			_ = f.Close()
			return
		}
		c.pushFrontLocked(h)
		if c.open > c.max {
			// Over the bound while everything was pinned: shed it now.
			c.evictLocked(c.tail)
		}
	}
	c.mu.Unlock()
}

// markDirty makes the next Sync fsync the file even without a write
// through this handle: recovery validated bytes a crashed process may
// have left in the page cache only. Caller owns the log (Open).
func (h *segFile) markDirty() {
	if c := h.cache; c != nil {
		c.mu.Lock()
		h.dirty = true
		c.mu.Unlock()
	}
}

// Name is the .log's path.
func (h *segFile) Name() string { return h.name }

func (h *segFile) ReadAt(p []byte, off int64) (int, error) {
	f, err := h.acquire(false)
	if err != nil {
		return 0, err
	}
	n, err := f.ReadAt(p, off)
	h.release()
	return n, err
}

func (h *segFile) WriteAt(p []byte, off int64) (int, error) {
	f, err := h.acquire(true)
	if err != nil {
		return 0, err
	}
	n, err := f.WriteAt(p, off)
	h.releaseWrite()
	return n, err
}

func (h *segFile) Truncate(size int64) error {
	f, err := h.acquire(true)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	h.releaseWrite()
	return err
}

func (h *segFile) Stat() (fs.FileInfo, error) {
	f, err := h.acquire(false)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	h.release()
	return fi, err
}

// Sync fsyncs the file. With a cache, a file with no write since its
// last fsync is not reopened for it, and a failed fsync before an
// eviction is returned here, by every later Sync too. The file stays
// dirty unless no write was in flight or released meanwhile (the write
// sequence is unchanged after the fsync): a write concurrent with the
// fsync may not be in it, so the next Sync fsyncs again.
func (h *segFile) Sync() error {
	c := h.cache
	if c == nil {
		return h.f.Sync()
	}
	c.mu.Lock()
	for h.state != stateIdle {
		c.cond.Wait() // an eviction's fsync must finish before we answer
	}
	err, dirty := h.syncErr, h.dirty
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if !dirty {
		return nil
	}
	f, err := h.acquire(false)
	if err != nil {
		return err
	}
	c.mu.Lock()
	err, dirty = h.syncErr, h.dirty
	seq := h.writeSeq
	c.mu.Unlock()
	if err == nil && dirty {
		err = f.Sync()
		c.mu.Lock()
		if err != nil {
			if h.syncErr == nil {
				h.syncErr = err
			}
		} else if h.writeSeq == seq && h.writing == 0 {
			h.dirty = false
		}
		c.mu.Unlock()
	}
	h.release()
	return err
}

// Close closes the file (at once, or when its last user releases it);
// later uses fail with os.ErrClosed.
func (h *segFile) Close() error {
	c := h.cache
	if c == nil {
		return h.f.Close()
	}
	c.mu.Lock()
	if h.closed {
		c.mu.Unlock()
		return &fs.PathError{Op: "close", Path: h.name, Err: os.ErrClosed}
	}
	h.closed = true
	if h.f == nil || h.pins > 0 || h.state != stateIdle {
		// Not open, or its user or the cache closes it.
		c.mu.Unlock()
		return nil
	}
	c.unlinkLocked(h)
	f := h.f
	h.f = nil
	c.open--
	c.mu.Unlock()
	return f.Close()
}
