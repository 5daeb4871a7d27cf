package logstore

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// countFS wraps an FS and counts, by file kind (the suffix: .log,
// .index, .timeindex, .txnindex, other), the files open now, the most
// ever open at once, the opens, the attempts (failed opens included),
// and the bytes read from .log files; and the directory listings.
// failOpen, when set, fails the OpenFile calls it returns an error for.
type countFS struct {
	FS
	mu       sync.Mutex
	open     map[string]int
	maxOpen  map[string]int
	opens    map[string]int
	tries    map[string]int
	readDirs int
	logRead  int64 // bytes read from .log files (Read and ReadAt)
	logReads map[string]int64
	failOpen func(name string, flag int) error
}

func newCountFS(inner FS) *countFS {
	return &countFS{FS: inner, open: map[string]int{}, maxOpen: map[string]int{}, opens: map[string]int{}, tries: map[string]int{}, logReads: map[string]int64{}}
}

// fileKind is the suffix counts are kept by.
func fileKind(name string) string {
	base := filepath.Base(name)
	for _, k := range []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix} {
		if strings.HasSuffix(base, k) {
			return k
		}
	}
	return "other"
}

func (c *countFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	c.mu.Lock()
	fail := c.failOpen
	c.tries[fileKind(name)]++
	c.mu.Unlock()
	if fail != nil {
		if err := fail(name, flag); err != nil {
			return nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
	}
	f, err := c.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	k := fileKind(name)
	c.mu.Lock()
	c.open[k]++
	c.opens[k]++
	c.maxOpen[k] = max(c.maxOpen[k], c.open[k])
	c.mu.Unlock()
	return &countFile{File: f, c: c, kind: k}, nil
}

// ReadDir implements FS, counting the listings.
func (c *countFS) ReadDir(name string) ([]string, error) {
	c.mu.Lock()
	c.readDirs++
	c.mu.Unlock()
	return c.FS.ReadDir(name)
}

// ReadDirs is the number of directory listings (failed ones included).
func (c *countFS) ReadDirs() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.readDirs
}

// Tries is the number of OpenFile calls for files of kind, failed ones
// included.
func (c *countFS) Tries(kind string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tries[kind]
}

// Open is the number of files of kind open now.
func (c *countFS) Open(kind string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open[kind]
}

// MaxOpen is the most files of kind ever open at once.
func (c *countFS) MaxOpen(kind string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.maxOpen[kind]
}

// Opens is the number of opens of files of kind.
func (c *countFS) Opens(kind string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.opens[kind]
}

// LogBytesRead is the number of bytes read from .log files.
func (c *countFS) LogBytesRead() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.logRead
}

// LogBytesReadFrom is the number of bytes read from the .log file name.
func (c *countFS) LogBytesReadFrom(name string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.logReads[name]
}

// Reset forgets the counts of opens, maxima and bytes read (not what is open).
func (c *countFS) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.opens, c.tries, c.readDirs, c.logRead, c.logReads = map[string]int{}, map[string]int{}, 0, 0, map[string]int64{}
	for k, v := range c.open {
		c.maxOpen[k] = v
	}
}

func (c *countFS) SetFailOpen(f func(name string, flag int) error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failOpen = f
}

type countFile struct {
	File
	c      *countFS
	kind   string
	closed bool
}

func (f *countFile) read(n int) {
	if f.kind != logSuffix || n <= 0 {
		return
	}
	f.c.mu.Lock()
	f.c.logRead += int64(n)
	f.c.logReads[f.Name()] += int64(n)
	f.c.mu.Unlock()
}

func (f *countFile) Read(p []byte) (int, error) {
	n, err := f.File.Read(p)
	f.read(n)
	return n, err
}

func (f *countFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.read(n)
	return n, err
}

func (f *countFile) Close() error {
	f.c.mu.Lock()
	if f.closed {
		f.c.mu.Unlock()
		panic(fmt.Sprintf("%s closed twice", f.Name()))
	}
	f.closed = true
	f.c.open[f.kind]--
	f.c.mu.Unlock()
	return f.File.Close()
}

// isReopen reports whether flag is a segFile's reopen (os.O_RDWR alone).
func isReopen(flag int) bool { return flag == os.O_RDWR }
