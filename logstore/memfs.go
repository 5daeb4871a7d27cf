package logstore

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// MemFS is a strict in-memory FS for crash and fault tests, after pebble's
// vfs.NewStrictMem. It remembers, besides each file's data and each
// directory's entries, what was last made durable: a file's data as of
// its last successful Sync, and a directory's entries as of its last
// successful SyncDir. Crash throws away everything else, as a power loss
// would: unsynced writes and truncations are lost, and a file created,
// renamed or removed without a sync of its directory reverts (a new file
// vanishes, a removed one comes back with its synced data).
//
// An injector (SetInjector) is asked before every operation that changes
// something, and can fail it. A failed write writes nothing; a failed
// Sync or SyncDir persists nothing, and, as Linux after an fsync error
// (the "fsyncgate" behaviour), the file's dirty data is then dropped from
// what a later Sync can persist: later Syncs of that file, through any
// handle, report success and persist nothing until a crash, so code that
// retries an fsync (or reopens the file and fsyncs it) and trusts it is
// caught.
//
// Paths are absolute and cleaned; "/" always exists and is durable.
type MemFS struct {
	mu       sync.Mutex
	root     *memNode
	inject   func(op MemOp, name string) error
	syncWait func(op MemOp, name string) // see SetSyncWaiter
	crashGen int                         // bumped by Crash; handles of an older generation are dead
	ops      int64                       // operations offered to the injector
}

// MemOp names an operation for MemFS's injector.
type MemOp int

// The operations a MemFS injector sees.
const (
	MemOpCreate   MemOp = iota // OpenFile creating a file
	MemOpWrite                 // Write or WriteAt
	MemOpTruncate              // Truncate, or OpenFile with O_TRUNC
	MemOpSync                  // File.Sync
	MemOpSyncDir               // SyncDir
	MemOpRename                // Rename
	MemOpRemove                // Remove or RemoveAll
	MemOpMkdir                 // MkdirAll creating a directory
	MemOpSyncFS                // SyncFileSystem
)

func (o MemOp) String() string {
	return [...]string{"create", "write", "truncate", "sync", "syncdir", "rename", "remove", "mkdir", "syncfs"}[o]
}

// ErrInjected is what a test injector usually returns; MemFS itself
// returns it for operations on files opened before a Crash.
var ErrInjected = errors.New("logstore: injected fault")

type memNode struct {
	dir bool
	// A directory's entries, now and as last synced.
	children, synced map[string]*memNode
	// A file's data, now and as last synced.
	data, syncedData []byte
	modTime          time.Time
	// poisoned: a Sync of the file failed, and what it should have
	// persisted is lost; no later Sync, through any handle, persists
	// anything until a crash (Linux drops the dirty pages and marks them
	// clean, so a reopen and fsync does not write them either).
	poisoned bool
}

func newDirNode() *memNode {
	return &memNode{dir: true, children: map[string]*memNode{}, synced: map[string]*memNode{}}
}

// NewMemFS returns an empty MemFS.
func NewMemFS() *MemFS { return &MemFS{root: newDirNode()} }

// SetInjector sets the function consulted before every changing operation
// (nil: none). A non-nil error fails the operation with it.
func (m *MemFS) SetInjector(f func(op MemOp, name string) error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.inject = f
}

// SetSyncWaiter sets a function that File.Sync and SyncDir call, with
// the operation and the path, before they take the MemFS lock or consult
// the injector (nil: none). Unlike the injector it may block, to hold an
// fsync in progress, without stalling the other operations.
func (m *MemFS) SetSyncWaiter(f func(op MemOp, name string)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.syncWait = f
}

// waitSync calls the sync waiter, if any, without holding m.mu.
func (m *MemFS) waitSync(op MemOp, name string) {
	m.mu.Lock()
	f := m.syncWait
	m.mu.Unlock()
	if f != nil {
		f(op, name)
	}
}

// Ops is the number of changing operations offered to the injector so far.
func (m *MemFS) Ops() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ops
}

// Crash reverts every directory and file to its last synced state, clears
// the injector and makes every open file unusable (its operations return
// ErrInjected), as a machine that lost power and rebooted.
func (m *MemFS) Crash() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.crashLocked(true, func(_ string, c *memNode) {
		c.data = append([]byte(nil), c.syncedData...)
	})
}

// CrashKeepingData is a crash after which every file kept its current
// data, truncations included (the kernel wrote all of it back), while
// every directory reverts to its entries as last synced: a file created
// without a sync of its directory vanishes, and one removed without it
// comes back with the data it had when it was removed. ext4 and XFS can
// leave this, since a file's size change may reach the journal before
// the unlinks in its directory. Open files become unusable as after
// Crash.
func (m *MemFS) CrashKeepingData() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.crashLocked(true, func(_ string, c *memNode) {
		c.syncedData = append([]byte(nil), c.data...)
	})
}

// CrashWith is a crash after which the kernel had written back more than
// was synced, as a power loss can leave: every directory keeps its current
// entries, and each file keeps what keep returns, given its path and its
// synced and current data (keep may return any prefix or mix of them, to
// leave a torn tail). Open files become unusable as after Crash.
func (m *MemFS) CrashWith(keep func(name string, synced, current []byte) []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.crashLocked(false, func(path string, c *memNode) {
		c.data = append([]byte(nil), keep(path, c.syncedData, c.data)...)
		c.syncedData = append([]byte(nil), c.data...)
	})
}

// crashLocked is the part every crash shares: it clears the injector,
// makes every open file unusable, and walks the tree. Each directory
// reverts to its entries as last synced if revertDirs, else keeps its
// current entries as its synced ones; then file sets each file's data
// (given its path), and the file's failed-fsync poison is cleared.
// Caller holds m.mu.
func (m *MemFS) crashLocked(revertDirs bool, file func(path string, c *memNode)) {
	m.crashGen++
	m.inject = nil
	var reset func(dir string, n *memNode)
	reset = func(dir string, n *memNode) {
		if revertDirs {
			n.children = maps.Clone(n.synced)
		} else {
			n.synced = maps.Clone(n.children)
		}
		for name, c := range n.children {
			path := filepath.Join(dir, name)
			if c.dir {
				reset(path, c)
				continue
			}
			file(path, c)
			c.poisoned = false
		}
	}
	reset("/", m.root)
}

// check offers op to the injector. Caller holds m.mu.
func (m *MemFS) check(op MemOp, name string) error {
	m.ops++
	if m.inject == nil {
		return nil
	}
	if err := m.inject(op, name); err != nil {
		return &fs.PathError{Op: op.String(), Path: name, Err: err}
	}
	return nil
}

func splitPath(name string) []string {
	name = filepath.Clean(name)
	if name == "/" {
		return nil
	}
	return strings.Split(strings.TrimPrefix(name, "/"), "/")
}

// lookupDir returns the directory node holding name and name's last
// element. Caller holds m.mu.
func (m *MemFS) lookupDir(name string) (*memNode, string, error) {
	parts := splitPath(name)
	if len(parts) == 0 {
		return nil, "", &fs.PathError{Op: "lookup", Path: name, Err: fs.ErrInvalid}
	}
	n := m.root
	for _, p := range parts[:len(parts)-1] {
		c, ok := n.children[p]
		if !ok || !c.dir {
			return nil, "", &fs.PathError{Op: "lookup", Path: name, Err: fs.ErrNotExist}
		}
		n = c
	}
	return n, parts[len(parts)-1], nil
}

// lookup returns the node at name. Caller holds m.mu.
func (m *MemFS) lookup(name string) (*memNode, error) {
	if len(splitPath(name)) == 0 {
		return m.root, nil
	}
	d, base, err := m.lookupDir(name)
	if err != nil {
		return nil, err
	}
	n, ok := d.children[base]
	if !ok {
		return nil, &fs.PathError{Op: "lookup", Path: name, Err: fs.ErrNotExist}
	}
	return n, nil
}

// OpenFile implements FS. It honours O_CREATE, O_EXCL, O_TRUNC and
// O_APPEND; any other flag opens the file for reading and writing.
func (m *MemFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.lookupDir(name)
	if err != nil {
		return nil, err
	}
	n, ok := d.children[base]
	switch {
	case ok && n.dir:
		return nil, &fs.PathError{Op: "open", Path: name, Err: errors.New("is a directory")}
	case ok && flag&(os.O_CREATE|os.O_EXCL) == os.O_CREATE|os.O_EXCL:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrExist}
	case !ok && flag&os.O_CREATE == 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	case !ok:
		if err := m.check(MemOpCreate, name); err != nil {
			return nil, err
		}
		n = &memNode{modTime: time.Now()}
		d.children[base] = n
	case flag&os.O_TRUNC != 0 && len(n.data) > 0:
		if err := m.check(MemOpTruncate, name); err != nil {
			return nil, err
		}
		n.data = nil
		n.modTime = time.Now()
	}
	return &memFile{fs: m, node: n, name: name, gen: m.crashGen, append: flag&os.O_APPEND != 0}, nil
}

// Remove implements FS.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.lookupDir(name)
	if err != nil {
		return err
	}
	n, ok := d.children[base]
	if !ok {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	if n.dir && len(n.children) > 0 {
		return &fs.PathError{Op: "remove", Path: name, Err: errors.New("directory not empty")}
	}
	if err := m.check(MemOpRemove, name); err != nil {
		return err
	}
	delete(d.children, base)
	return nil
}

// RemoveAll implements FS. Like a real file system, removing a directory
// with its files is durable once the parent directory is synced.
func (m *MemFS) RemoveAll(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.lookupDir(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, ok := d.children[base]; !ok {
		return nil
	}
	if err := m.check(MemOpRemove, name); err != nil {
		return err
	}
	delete(d.children, base)
	return nil
}

// Rename implements FS.
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	od, obase, err := m.lookupDir(oldname)
	if err != nil {
		return err
	}
	n, ok := od.children[obase]
	if !ok {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: fs.ErrNotExist}
	}
	nd, nbase, err := m.lookupDir(newname)
	if err != nil {
		return err
	}
	if err := m.check(MemOpRename, newname); err != nil {
		return err
	}
	delete(od.children, obase)
	nd.children[nbase] = n
	return nil
}

// ReadDir implements FS.
func (m *MemFS) ReadDir(name string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup(name)
	if err != nil {
		return nil, err
	}
	if !n.dir {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: errors.New("not a directory")}
	}
	names := make([]string, 0, len(n.children))
	for k := range n.children {
		names = append(names, k)
	}
	return sortedNames(names), nil
}

// MkdirAll implements FS. New directories are not durable until their
// parents are synced.
func (m *MemFS) MkdirAll(name string, perm fs.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.root
	for i, p := range splitPath(name) {
		c, ok := n.children[p]
		if !ok {
			if err := m.check(MemOpMkdir, "/"+strings.Join(splitPath(name)[:i+1], "/")); err != nil {
				return err
			}
			c = newDirNode()
			n.children[p] = c
		} else if !c.dir {
			return &fs.PathError{Op: "mkdir", Path: name, Err: errors.New("not a directory")}
		}
		n = c
	}
	return nil
}

// SyncDir implements FS.
func (m *MemFS) SyncDir(name string) error {
	m.waitSync(MemOpSyncDir, name)
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup(name)
	if err != nil {
		return err
	}
	if !n.dir {
		return &fs.PathError{Op: "syncdir", Path: name, Err: errors.New("not a directory")}
	}
	if err := m.check(MemOpSyncDir, name); err != nil {
		return err
	}
	n.synced = maps.Clone(n.children)
	return nil
}

// SyncFileSystem implements FileSystemSyncer: every directory and file
// becomes durable as it is now, as after a SyncDir of each directory and a
// Sync of each file; it fails (and persists nothing of it) for a file
// whose earlier Sync failed. dir must exist.
func (m *MemFS) SyncFileSystem(dir string) error {
	m.waitSync(MemOpSyncFS, dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.lookup(dir); err != nil {
		return err
	}
	if err := m.check(MemOpSyncFS, dir); err != nil {
		return err
	}
	var poisoned []string
	var walk func(path string, n *memNode)
	walk = func(path string, n *memNode) {
		n.synced = maps.Clone(n.children)
		for name, c := range n.children {
			p := filepath.Join(path, name)
			switch {
			case c.dir:
				walk(p, c)
			case c.poisoned:
				poisoned = append(poisoned, p)
			default:
				c.syncedData = append([]byte(nil), c.data...)
			}
		}
	}
	walk("/", m.root)
	if len(poisoned) > 0 {
		slices.Sort(poisoned)
		return &fs.PathError{Op: "syncfs", Path: dir, Err: fmt.Errorf("write-back error on %s: %w", strings.Join(poisoned, ", "), ErrInjected)}
	}
	return nil
}

// ReadFile returns the current content of a file, for tests.
func (m *MemFS) ReadFile(name string) ([]byte, error) { return readFile(m, name) }

// WriteFile replaces a file's content, durably and without consulting the
// injector, for tests that damage a file on "disk".
func (m *MemFS) WriteFile(name string, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup(name)
	if err != nil {
		return err
	}
	if n.dir {
		return &fs.PathError{Op: "write", Path: name, Err: errors.New("is a directory")}
	}
	n.data = append([]byte(nil), data...)
	n.syncedData = append([]byte(nil), data...)
	return nil
}

// memFile is an open MemFS file. The node is shared by every handle, as
// an inode.
type memFile struct {
	fs     *MemFS
	node   *memNode
	name   string
	gen    int
	append bool
	pos    int64 // for Read and Write
	closed bool
}

// usable reports why the handle cannot be used. Caller holds f.fs.mu.
func (f *memFile) usable(op string) error {
	switch {
	case f.closed:
		return &fs.PathError{Op: op, Path: f.name, Err: fs.ErrClosed}
	case f.gen != f.fs.crashGen:
		return &fs.PathError{Op: op, Path: f.name, Err: fmt.Errorf("file opened before a crash: %w", ErrInjected)}
	}
	return nil
}

func (f *memFile) Name() string { return f.name }

func (f *memFile) Read(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.usable("read"); err != nil {
		return 0, err
	}
	if f.pos >= int64(len(f.node.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.node.data[f.pos:])
	f.pos += int64(n)
	return n, nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.usable("read"); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &fs.PathError{Op: "read", Path: f.name, Err: fs.ErrInvalid}
	}
	if off >= int64(len(f.node.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.node.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	at := f.pos
	if f.append {
		at = int64(len(f.node.data))
	}
	n, err := f.writeAtLocked(p, at)
	f.pos = at + int64(n)
	return n, err
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return f.writeAtLocked(p, off)
}

// writeAtLocked: caller holds f.fs.mu.
func (f *memFile) writeAtLocked(p []byte, off int64) (int, error) {
	if err := f.usable("write"); err != nil {
		return 0, err
	}
	if err := f.fs.check(MemOpWrite, f.name); err != nil {
		return 0, err
	}
	if end := off + int64(len(p)); end > int64(len(f.node.data)) {
		f.node.data = append(f.node.data, make([]byte, end-int64(len(f.node.data)))...)
	}
	copy(f.node.data[off:], p)
	f.node.modTime = time.Now()
	return len(p), nil
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.usable("truncate"); err != nil {
		return err
	}
	if err := f.fs.check(MemOpTruncate, f.name); err != nil {
		return err
	}
	if size < int64(len(f.node.data)) {
		f.node.data = f.node.data[:size:size]
	} else {
		f.node.data = append(f.node.data, make([]byte, size-int64(len(f.node.data)))...)
	}
	f.node.modTime = time.Now()
	return nil
}

func (f *memFile) Sync() error {
	f.fs.waitSync(MemOpSync, f.name)
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.usable("sync"); err != nil {
		return err
	}
	if err := f.fs.check(MemOpSync, f.name); err != nil {
		f.node.poisoned = true
		return err
	}
	if !f.node.poisoned {
		f.node.syncedData = append([]byte(nil), f.node.data...)
	}
	return nil
}

func (f *memFile) Stat() (fs.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.usable("stat"); err != nil {
		return nil, err
	}
	return memFileInfo{name: filepath.Base(f.name), size: int64(len(f.node.data)), modTime: f.node.modTime}, nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return &fs.PathError{Op: "close", Path: f.name, Err: fs.ErrClosed}
	}
	f.closed = true
	return nil
}

type memFileInfo struct {
	name    string
	size    int64
	modTime time.Time
}

func (i memFileInfo) Name() string       { return i.name }
func (i memFileInfo) Size() int64        { return i.size }
func (i memFileInfo) Mode() fs.FileMode  { return 0o644 }
func (i memFileInfo) ModTime() time.Time { return i.modTime }
func (i memFileInfo) IsDir() bool        { return false }
func (i memFileInfo) Sys() any           { return nil }

// Chtimes implements ChtimesFS. Like a write, it is metadata of the file
// and survives a crash only with the file.
func (m *MemFS) Chtimes(name string, mtime time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup(name)
	if err != nil {
		return err
	}
	if err := m.check(MemOpWrite, name); err != nil {
		return err
	}
	n.modTime = mtime
	return nil
}
