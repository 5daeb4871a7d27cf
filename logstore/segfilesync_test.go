package logstore

import (
	"bytes"
	"io/fs"
	"os"
	"testing"
)

// hookFS wraps an FS so that every WriteAt of the files it opens first
// calls beforeWrite (nil: none), which may block to hold the write.
type hookFS struct {
	FS
	beforeWrite func(name string)
}

func (h *hookFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := h.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &hookFile{File: f, fs: h}, nil
}

type hookFile struct {
	File
	fs *hookFS
}

func (f *hookFile) WriteAt(p []byte, off int64) (int, error) {
	if hook := f.fs.beforeWrite; hook != nil {
		hook(f.Name())
	}
	return f.File.WriteAt(p, off)
}

// TestSegFileSyncDuringWrite: a Sync whose fsync runs while a write
// through the same cached handle is in flight (pinned, its bytes not yet
// written) leaves the file dirty, so that the next Sync fsyncs the write:
// a Sync that cleared the dirty mark before its fsync reported the next
// one durable with nothing fsynced, and a crash lost the write.
func TestSegFileSyncDuringWrite(t *testing.T) {
	t.Parallel()
	mem := NewMemFS()
	mkdirSynced(t, mem, "/d")
	entered, proceed := make(chan struct{}), make(chan struct{})
	hfs := &hookFS{FS: mem}
	const name = "/d/00000000000000000000.log"
	h, err := createSegFile(hfs, name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, NewFileCache(2))
	mustNoError(t)(err)
	mustNoError(t)(mem.SyncDir("/d"))
	mustNoError(t)(h.Sync())
	hfs.beforeWrite = func(string) {
		close(entered)
		<-proceed
	}
	wrote := make(chan error)
	go func() {
		_, err := h.WriteAt([]byte("batch"), 0)
		wrote <- err
	}()
	<-entered // the write is pinned, its bytes not yet in the file
	mustNoError(t)(h.Sync())
	close(proceed)
	mustNoError(t)(<-wrote)
	hfs.beforeWrite = nil
	mustNoError(t)(h.Sync()) // must fsync the write
	mustNoError(t)(h.Close())
	mem.Crash()
	got, err := readFile(mem, name)
	mustNoError(t)(err)
	if !bytes.Equal(got, []byte("batch")) {
		t.Fatalf("after Sync, Sync and a crash the file holds %q, want %q", got, "batch")
	}
}
