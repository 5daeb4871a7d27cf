//go:build linux && (amd64 || arm64)

package logstore

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
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

// syncReportsErrors reports whether this kernel's syncfs reports
// write-back errors: Linux 5.8 or later (FileSystemSyncerOf).
func (osFS) syncReportsErrors() bool { return kernelSyncfsReports() }

var kernelSyncfsReports = sync.OnceValue(func() bool {
	var u syscall.Utsname
	if err := syscall.Uname(&u); err != nil {
		return false
	}
	var b strings.Builder
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		b.WriteByte(byte(c))
	}
	return releaseAtLeast(b.String(), 5, 8)
})

// releaseAtLeast reports whether a kernel release ("6.18.44-fc-v1098",
// "5.8-rc1") is at least major.minor; an unreadable one is not.
func releaseAtLeast(release string, major, minor int) bool {
	ma, rest, ok := strings.Cut(release, ".")
	if !ok {
		return false
	}
	n := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
	if n < 0 {
		n = len(rest)
	}
	maj, err1 := strconv.Atoi(ma)
	mi, err2 := strconv.Atoi(rest[:n])
	if err1 != nil || err2 != nil {
		return false
	}
	return maj > major || maj == major && mi >= minor
}
