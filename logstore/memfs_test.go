package logstore

import (
	"errors"
	"io/fs"
	"os"
	"testing"
)

// TestMemFSStrict pins the crash semantics the crash tests rely on: only
// synced data and synced directory entries survive a Crash.
func TestMemFSStrict(t *testing.T) {
	t.Parallel()
	m := NewMemFS()
	must := mustNoError(t)
	mkdirSynced(t, m, "/d")
	create := func(name, data string, syncFile bool) {
		t.Helper()
		f, err := m.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		must(err)
		_, err = f.Write([]byte(data))
		must(err)
		if syncFile {
			must(f.Sync())
		}
		must(f.Close())
	}
	create("/d/synced-no-dirsync", "a", true)
	must(m.SyncDir("/d"))
	create("/d/unsynced-data", "c", false)
	must(m.SyncDir("/d"))
	create("/d/after-dirsync", "b", true) // synced data, entry never synced
	f, err := m.OpenFile("/d/synced-no-dirsync", os.O_RDWR, 0)
	must(err)
	_, err = f.WriteAt([]byte("zzz"), 0) // not synced
	must(err)
	must(m.Rename("/d/unsynced-data", "/d/renamed")) // dir not synced after
	// A failed fsync persists nothing, and nor does a retry.
	m.SetInjector(failSyncs)
	if err := f.Sync(); !errors.Is(err, ErrInjected) {
		t.Fatalf("injected Sync: %v", err)
	}
	m.SetInjector(nil)
	if err := f.Sync(); err != nil {
		t.Fatalf("Sync after a failed one: %v", err)
	}

	m.Crash()
	if _, err := f.ReadAt(make([]byte, 1), 0); !errors.Is(err, ErrInjected) {
		t.Fatalf("a file opened before the crash still reads: %v", err)
	}
	names, err := m.ReadDir("/d")
	must(err)
	if len(names) != 2 || names[0] != "synced-no-dirsync" || names[1] != "unsynced-data" {
		t.Fatalf("after crash /d holds %q, want [synced-no-dirsync unsynced-data]", names)
	}
	if data, err := m.ReadFile("/d/synced-no-dirsync"); err != nil || string(data) != "a" {
		t.Fatalf("synced file holds %q %v, want a (the write after a failed fsync is lost)", data, err)
	}
	if data, err := m.ReadFile("/d/unsynced-data"); err != nil || len(data) != 0 {
		t.Fatalf("unsynced file holds %q %v, want nothing", data, err)
	}
	if _, err := m.ReadFile("/d/renamed"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("rename without a directory sync survived: %v", err)
	}

	// WriteFileAtomicFS is durable when it returns.
	must(WriteFileAtomicFS(m, "/d/ckpt", []byte("x")))
	m.Crash()
	if data, err := m.ReadFile("/d/ckpt"); err != nil || string(data) != "x" {
		t.Fatalf("atomic file after crash: %q %v", data, err)
	}
}

// TestMemFSPoisonSurvivesReopen: after a failed fsync, reopening the file
// and fsyncing it through the new handle persists nothing either, as on
// Linux, where the failed fsync dropped the dirty pages; a crash clears it.
func TestMemFSPoisonSurvivesReopen(t *testing.T) {
	t.Parallel()
	m := NewMemFS()
	must := mustNoError(t)
	mkdirSynced(t, m, "/d")
	f, err := m.OpenFile("/d/f", os.O_RDWR|os.O_CREATE, 0o644)
	must(err)
	must(f.Sync())
	must(m.SyncDir("/d"))
	_, err = f.Write([]byte("lost"))
	must(err)
	m.SetInjector(failSyncs)
	if err := f.Sync(); !errors.Is(err, ErrInjected) {
		t.Fatalf("injected Sync: %v", err)
	}
	m.SetInjector(nil)
	must(f.Close())
	g, err := m.OpenFile("/d/f", os.O_RDWR, 0)
	must(err)
	must(g.Sync())
	m.Crash()
	if data, err := m.ReadFile("/d/f"); err != nil || len(data) != 0 {
		t.Fatalf("after a failed fsync, reopen, fsync and crash the file holds %q %v, want nothing", data, err)
	}
	// A crash clears the poison.
	g, err = m.OpenFile("/d/f", os.O_RDWR, 0)
	must(err)
	_, err = g.Write([]byte("kept"))
	must(err)
	must(g.Sync())
	m.Crash()
	if data, err := m.ReadFile("/d/f"); err != nil || string(data) != "kept" {
		t.Fatalf("fsync after the crash persisted %q %v, want kept", data, err)
	}
}

// TestMemFSCrashKeepingData: file data (a truncation too) survives, while
// directory entries revert to their last sync.
func TestMemFSCrashKeepingData(t *testing.T) {
	t.Parallel()
	m := NewMemFS()
	must := mustNoError(t)
	mkdirSynced(t, m, "/d")
	for _, name := range []string{"/d/a", "/d/b"} {
		f, err := m.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
		must(err)
		_, err = f.Write([]byte("123456"))
		must(err)
		must(f.Sync())
		must(f.Close())
	}
	must(m.SyncDir("/d"))
	f, err := m.OpenFile("/d/a", os.O_RDWR, 0)
	must(err)
	must(f.Truncate(3)) // not synced
	must(m.Remove("/d/b"))
	c, err := m.OpenFile("/d/c", os.O_RDWR|os.O_CREATE, 0o644)
	must(err)
	must(c.Sync())
	m.CrashKeepingData()
	if data, err := m.ReadFile("/d/a"); err != nil || string(data) != "123" {
		t.Fatalf("truncated file holds %q %v, want 123", data, err)
	}
	if data, err := m.ReadFile("/d/b"); err != nil || string(data) != "123456" {
		t.Fatalf("file removed without a directory sync holds %q %v, want it back whole", data, err)
	}
	if _, err := m.ReadFile("/d/c"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("file created without a directory sync survived: %v", err)
	}
}
