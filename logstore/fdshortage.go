package logstore

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
	"time"
)

// A descriptor shortage (EMFILE: the process is at RLIMIT_NOFILE;
// ENFILE: the system file table is full) is usually brief: descriptors
// come and go with connections, fetches and other logs' flushes. An open
// that fails with one is retried fdRetries times after a pause that
// doubles from fdRetryPause (31 ms in all), each time first closing up
// to fdShedBase<<try idle descriptors of the FileCache, least recently
// used first (nothing without one), before it fails as the I/O error it
// is (a write failing so fails the log, ErrStorage).
const (
	fdRetries    = 5
	fdRetryPause = time.Millisecond
	fdShedBase   = 8
)

// isFDShortage reports whether err is EMFILE or ENFILE.
func isFDShortage(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// openFile is fsys.OpenFile that rides out a descriptor shortage (see
// fdRetries), shedding idle descriptors of cache (nil: none) between
// tries. Every open of logstore's own files goes through it.
func openFile(fsys FS, cache *FileCache, name string, flag int, perm fs.FileMode) (File, error) {
	f, err := fsys.OpenFile(name, flag, perm)
	for try := 0; err != nil && try < fdRetries && isFDShortage(err); try++ {
		cache.shedIdle(fdShedBase << try)
		time.Sleep(fdRetryPause << try)
		f, err = fsys.OpenFile(name, flag, perm)
	}
	return f, err
}

// shedIdle closes up to n descriptors that no operation has pinned,
// least recently used first (fsyncing a dirty one first, as any
// eviction), and reports how many it closed. A nil cache closes none.
func (c *FileCache) shedIdle(n int) int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	closed := 0
	for ; closed < n && c.tail != nil; closed++ {
		c.evictLocked(c.tail)
	}
	return closed
}

// readFileVia reads a whole file, opening it with openFile.
func readFileVia(fsys FS, cache *FileCache, name string) ([]byte, error) {
	f, err := openFile(fsys, cache, name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	return readAllClose(f)
}
