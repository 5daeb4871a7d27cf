package logstore

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// FS is the file system under a Log and the checkpoint files: every file
// operation of the package goes through one, so that tests can fail
// writes and fsyncs on demand and crash to the last synced state
// (MemFS). OSFS, the default, is the operating system's.
//
// Paths are file paths as filepath builds them. Creating, renaming or
// removing a file is durable only once its directory has been synced
// (SyncDir); data written to a file only once the file has been synced.
type FS interface {
	// OpenFile opens a file as os.OpenFile does (os.O_* flags).
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// RemoveAll removes a directory and everything in it; a missing one
	// is not an error.
	RemoveAll(name string) error
	// Rename renames a file, replacing any file at newname.
	Rename(oldname, newname string) error
	// ReadDir returns the names of a directory's entries, sorted.
	ReadDir(name string) ([]string, error)
	// MkdirAll creates a directory and its missing parents.
	MkdirAll(name string, perm fs.FileMode) error
	// SyncDir fsyncs a directory, making the creations, renames and
	// removals in it durable.
	SyncDir(name string) error
}

// File is an open file of an FS. *os.File implements it, so the OS file
// system adds no wrapper, and no allocation, to the hot path.
type File interface {
	io.Reader
	io.Writer
	io.ReaderAt
	io.WriterAt
	io.Closer
	// Truncate changes the file's size.
	Truncate(size int64) error
	// Sync fsyncs the file's data.
	Sync() error
	// Stat returns the file's size and modification time.
	Stat() (fs.FileInfo, error)
	// Name is the path the file was opened with.
	Name() string
}

// FileSystemSyncer is an FS that makes everything written on the file
// system holding a directory durable in one call (Linux's syncfs(2)): the
// data of every file and every creation, rename and removal. A broker's
// shutdown closes thousands of logs without fsyncing each
// (Log.CloseUnsynced) and then syncs each log dir's file system once.
// OSFS is one on Linux.
type FileSystemSyncer interface {
	FS
	// SyncFileSystem syncs the file system that holds dir, reporting any
	// write-back error on it.
	SyncFileSystem(dir string) error
}

// FileSystemSyncerOf returns fsys as a FileSystemSyncer if it is one whose
// sync reports write-back errors: OSFS only on Linux 5.8 or later, where
// syncfs(2) began to (before, it answered success regardless, so a caller
// must fsync each file instead).
func FileSystemSyncerOf(fsys FS) (FileSystemSyncer, bool) {
	s, ok := fsys.(FileSystemSyncer)
	if !ok {
		return nil, false
	}
	if r, ok := fsys.(interface{ syncReportsErrors() bool }); ok && !r.syncReportsErrors() {
		return nil, false
	}
	return s, true
}

// OSFS is the operating system's file system; a nil Config.FS means it.
var OSFS FS = osFS{}

type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return f, nil
}

func (osFS) Remove(name string) error                     { return os.Remove(name) }
func (osFS) RemoveAll(name string) error                  { return os.RemoveAll(name) }
func (osFS) Rename(oldname, newname string) error         { return os.Rename(oldname, newname) }
func (osFS) MkdirAll(name string, perm fs.FileMode) error { return os.MkdirAll(name, perm) }

func (osFS) ReadDir(name string) ([]string, error) {
	entries, err := os.ReadDir(name)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, nil
}

func (osFS) SyncDir(name string) error {
	d, err := os.Open(name)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// orOS is fsys, or OSFS when it is nil.
func orOS(fsys FS) FS {
	if fsys == nil {
		return OSFS
	}
	return fsys
}

// readFile reads a whole file through fsys.
func readFile(fsys FS, name string) ([]byte, error) {
	return readFileVia(fsys, nil, name)
}

// readAllClose reads f to its end and closes it.
func readAllClose(f File) ([]byte, error) {
	data, err := io.ReadAll(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return data, err
}

// ensureDir lists dir, creating it if it is missing; existed reports
// whether it was there (a new one lists as empty). Open uses the listing,
// so a log costs one directory read. Nothing is fsynced: a new directory
// is durable once its parent is synced (syncParent), which Open leaves to
// the log's first flush.
func ensureDir(fsys FS, dir string) (entries []string, existed bool, err error) {
	entries, err = fsys.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, fsys.MkdirAll(dir, 0o755)
	} else if err != nil {
		return nil, false, err
	}
	return entries, true, nil
}

// syncParent fsyncs the parent of dir, so that dir itself survives a
// crash (a log whose directory vanished would lose everything fsynced
// inside it).
func syncParent(fsys FS, dir string) error {
	if err := fsys.SyncDir(filepath.Dir(dir)); err != nil {
		return fmt.Errorf("fsync %s: %w", filepath.Dir(dir), err)
	}
	return nil
}

// sortedNames is names sorted, for FS implementations.
func sortedNames(names []string) []string {
	slices.Sort(names)
	return names
}

// ChtimesFS is an FS that can set a file's modification time. The log
// cleaner gives a cleaned segment the modification time of the newest
// segment it replaces, as Kafka does, so that cleaning does not restart
// the delete.retention.ms clock of the tombstones in it. On an FS without
// it a cleaned segment is dated when it was written.
type ChtimesFS interface {
	FS
	// Chtimes sets the modification time of the named file.
	Chtimes(name string, mtime time.Time) error
}

func (osFS) Chtimes(name string, mtime time.Time) error { return os.Chtimes(name, mtime, mtime) }
