//go:build linux && (amd64 || arm64)

package logstore

import (
	"errors"
	"io/fs"
	"path/filepath"
	"testing"
)

// TestOSFSSyncsFileSystem: OSFS is a FileSystemSyncer on Linux, its
// syncfs succeeds on a directory and fails, naming it, on a missing one.
func TestOSFSSyncsFileSystem(t *testing.T) {
	s, ok := OSFS.(FileSystemSyncer)
	if !ok {
		t.Fatal("OSFS is no FileSystemSyncer on Linux")
	}
	dir := t.TempDir()
	mustNoError(t)(s.SyncFileSystem(dir))
	if err := s.SyncFileSystem(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("SyncFileSystem of a missing directory: %v, want ErrNotExist", err)
	}
}
