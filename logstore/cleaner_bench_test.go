package logstore

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// BenchmarkClean measures one full clean of a 16 MiB log (10,000 keys,
// 100-byte values, 50 records a batch, 1 MiB segments, each key written
// about 30 times), by log.cleaner.dedupe.buffer.size. A buffer too small
// for the keys takes several passes, all counted. It reports MB/s of log
// cleaned (SetBytes: the log's size), passes per clean, and the peak heap
// in use during the passes (sampled every millisecond) beside the map's
// own size.
func BenchmarkClean(b *testing.B) {
	cfg := DefaultConfig()
	cfg.Log = zerolog.Nop()
	cfg.SegmentBytes = 1 << 20
	cfg.RetentionMs = -1
	src := b.TempDir()
	l, err := Open(src, cfg, 0)
	if err != nil {
		b.Fatal(err)
	}
	value := string(make([]byte, 100))
	var size int64
	for i := 0; size < 16<<20; i++ {
		recs := make([]kv, 50)
		for j := range recs {
			recs[j] = k(keyName((i*50+j)%10000), value)
		}
		info := mustAppend(b, l, kvBatch(b, kvOpts{ts: 1}, recs...))
		size += int64(info.Batches[0].Size())
	}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	for _, buf := range []int64{64 << 10, 256 << 10, 1 << 20, 16 << 20} {
		b.Run(fmt.Sprintf("dedupe=%dKiB", buf>>10), func(b *testing.B) {
			m := NewOffsetMap(buf)
			var peak atomic.Uint64
			var passes int
			b.SetBytes(size)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				dir := copyDir(b, src)
				cl, err := Open(dir, cfg, math.MaxInt64)
				if err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				stop := make(chan struct{})
				var wg sync.WaitGroup
				wg.Add(1)
				go func() {
					defer wg.Done()
					var ms runtime.MemStats
					for {
						runtime.ReadMemStats(&ms)
						if ms.HeapInuse > peak.Load() {
							peak.Store(ms.HeapInuse)
						}
						select {
						case <-stop:
							return
						case <-time.After(time.Millisecond):
						}
					}
				}()
				b.StartTimer()
				passes += len(mustCleanAll(b, cl, cleanCfg(m)))
				b.StopTimer()
				close(stop)
				wg.Wait()
				_ = cl.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(passes)/float64(b.N), "passes/op")
			b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MiB")
			b.ReportMetric(float64(m.Bytes())/(1<<20), "map-MiB")
		})
	}
}
