package logstore

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// syncCountFS wraps an FS and counts its fsyncs: SyncDir calls and the
// Sync calls of the files it opened.
type syncCountFS struct {
	FS
	dirSyncs, fileSyncs atomic.Int64
}

func (c *syncCountFS) SyncDir(name string) error {
	c.dirSyncs.Add(1)
	return c.FS.SyncDir(name)
}

func (c *syncCountFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := c.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &syncCountFile{File: f, c: c}, nil
}

// syncs is the number of fsyncs so far.
func (c *syncCountFS) syncs() int64 { return c.dirSyncs.Load() + c.fileSyncs.Load() }

type syncCountFile struct {
	File
	c *syncCountFS
}

func (f *syncCountFile) Sync() error {
	f.c.fileSyncs.Add(1)
	return f.File.Sync()
}

// BenchmarkCreate10kLogs creates 10,000 new empty logs on the real file
// system as a broker does for a LeaderAndIsr that creates its replicas:
// Open of a missing partition directory, one leader epoch assigned at
// offset 0 (the new leader), then, after all of them, Close. It reports
// the fsyncs per log of the request path (Open and Assign:
// reqsyncs/log) and of Close (closesyncs/log), and the time per log of
// each (req-ns/log, close-ns/log). Files=nil holds each .log open, as a
// broker without a FileCache; FileCache=1000 goes through a cache
// smaller than the number of logs.
func BenchmarkCreate10kLogs(b *testing.B) {
	const logs = 10_000
	for _, cached := range []bool{false, true} {
		name := "Files=nil"
		if cached {
			name = "FileCache=1000"
		}
		b.Run(name, func(b *testing.B) {
			var reqSyncs, closeSyncs, reqNs, closeNs int64
			for range b.N {
				b.StopTimer()
				root := b.TempDir()
				fsys := &syncCountFS{FS: OSFS}
				cfg := DefaultConfig()
				cfg.Log = zerolog.Nop()
				cfg.FS = fsys
				if cached {
					cfg.Files = NewFileCache(1000)
				}
				ls := make([]*Log, logs)
				b.StartTimer()
				start := time.Now().UnixNano()
				for i := range logs {
					l, err := Open(filepath.Join(root, fmt.Sprintf("t-%d", i)), cfg, 0)
					if err != nil {
						b.Fatal(err)
					}
					if err := l.LeaderEpochs().Assign(1, l.LogEndOffset()); err != nil {
						b.Fatal(err)
					}
					ls[i] = l
				}
				mid := time.Now().UnixNano()
				reqSyncs += fsys.syncs()
				for _, l := range ls {
					if err := l.Close(); err != nil {
						b.Fatal(err)
					}
				}
				end := time.Now().UnixNano()
				closeSyncs += fsys.syncs()
				reqNs += mid - start
				closeNs += end - mid
			}
			closeSyncs -= reqSyncs
			n := float64(b.N) * logs
			b.ReportMetric(float64(reqSyncs)/n, "reqsyncs/log")
			b.ReportMetric(float64(closeSyncs)/n, "closesyncs/log")
			b.ReportMetric(float64(reqNs)/n, "req-ns/log")
			b.ReportMetric(float64(closeNs)/n, "close-ns/log")
		})
	}
}
