package logstore

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"
)

// BenchmarkOpen10kLogs opens 10,000 small logs (one segment of three
// batches each, closed cleanly), as a broker's startup does, with and
// without CleanShutdown, through a FileCache of 1,000. It reports the
// .log bytes read per open of all of them (logbytes/op) besides the time.
// Without CleanShutdown each log's last segment is scanned, its indexes
// rewritten and everything fsynced, as after an unclean shutdown.
func BenchmarkOpen10kLogs(b *testing.B) {
	const logs = 10_000
	root := b.TempDir()
	fsys := newCountFS(OSFS)
	cfg := DefaultConfig()
	cfg.Log = zerolog.Nop()
	cfg.FS = fsys
	cfg.Files = NewFileCache(1000)
	rps := make([]int64, logs)
	for i := range logs {
		l, err := Open(filepath.Join(root, fmt.Sprintf("t-%d", i)), cfg, 0)
		if err != nil {
			b.Fatal(err)
		}
		for j := range 3 {
			if _, err := l.AppendAsLeader(makeBatch(batchSpec{records: 5, valueSize: 100, firstTs: int64(1000 + j)}), 1, -1); err != nil {
				b.Fatal(err)
			}
		}
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
		rps[i] = l.RecoveryPoint()
	}
	for _, clean := range []bool{false, true} {
		b.Run(fmt.Sprintf("CleanShutdown=%v", clean), func(b *testing.B) {
			c := cfg
			c.CleanShutdown = clean
			ls := make([]*Log, logs)
			var read int64
			for range b.N {
				fsys.Reset()
				b.StartTimer()
				for i := range logs {
					l, err := Open(filepath.Join(root, fmt.Sprintf("t-%d", i)), c, rps[i])
					if err != nil {
						b.Fatal(err)
					}
					ls[i] = l
				}
				b.StopTimer()
				read += fsys.LogBytesRead()
				for _, l := range ls {
					if err := l.Close(); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(read)/float64(b.N), "logbytes/op")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/logs, "ns/log")
		})
	}
}
