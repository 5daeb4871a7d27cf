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
	if _, ok := FileSystemSyncerOf(OSFS); ok != kernelSyncfsReports() {
		t.Fatalf("FileSystemSyncerOf(OSFS) %t on a kernel whose syncfs reports errors %t", ok, kernelSyncfsReports())
	}
	dir := t.TempDir()
	mustNoError(t)(s.SyncFileSystem(dir))
	if err := s.SyncFileSystem(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("SyncFileSystem of a missing directory: %v, want ErrNotExist", err)
	}
}

// TestReleaseAtLeast: syncfs reports write-back errors from Linux 5.8 on.
func TestReleaseAtLeast(t *testing.T) {
	for release, want := range map[string]bool{
		"6.18.44-fc-v1098": true, "5.8.0": true, "5.8-rc1": true, "5.10.0-21-amd64": true,
		"5.7.19": false, "4.19.0": false, "3": false, "": false, "x.y": false,
	} {
		if got := releaseAtLeast(release, 5, 8); got != want {
			t.Errorf("releaseAtLeast(%q, 5, 8) = %t, want %t", release, got, want)
		}
	}
}
