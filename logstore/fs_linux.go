//go:build linux && (amd64 || arm64)

package logstore

import (
	"fmt"
	"os"
	"syscall"
)

// SyncFileSystem implements FileSystemSyncer with syncfs(2), which
// reports a write-back error of the file system since Linux 5.8. (The
// syscall package lacks its number: sysSyncfs is per architecture; on
// others OSFS is no FileSystemSyncer and a shutdown fsyncs each file.)
func (osFS) SyncFileSystem(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	_, _, errno := syscall.Syscall(sysSyncfs, f.Fd(), 0, 0)
	err = f.Close()
	if errno != 0 {
		err = errno
	}
	if err != nil {
		return fmt.Errorf("syncfs %s: %w", dir, err)
	}
	return nil
}
