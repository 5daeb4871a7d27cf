package logstore

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// openFDs is the number of descriptors this process has open (Linux).
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(ents)
}

// TestDescriptorsPerLog counts, on the real file system, the descriptors
// held by 200 open logs of two segments each: one per segment (its .log)
// without a FileCache, and no more than the cache's capacity with one,
// however many logs are open. No index file is held open either way.
func TestDescriptorsPerLog(t *testing.T) { // not parallel: counts the process's descriptors
	const logs, capacity = 200, 50
	for _, cached := range []bool{false, true} {
		t.Run(fmt.Sprintf("FileCache=%v", cached), func(t *testing.T) {
			root := t.TempDir()
			cfg := testConfig(t)
			cfg.SegmentBytes = 2 * int64(len(simpleBatch(2, 0)))
			if cached {
				cfg.Files = NewFileCache(capacity)
			}
			before := openFDs(t)
			ls := make([]*Log, logs)
			for i := range ls {
				l, err := Open(filepath.Join(root, fmt.Sprintf("t-%d", i)), cfg, 0)
				mustNoError(t)(err)
				ls[i] = l
				for j := range 3 { // rolls once: two segments
					mustAppend(t, l, simpleBatch(2, int64(1000+j)))
				}
				mustNoError(t)(l.AppendAbortedTxn(AbortedTxn{ProducerID: 1, FirstOffset: 0, LastOffset: 1, LastStableOffset: 0}))
			}
			for _, l := range ls {
				l.bg.Wait()
				if len(l.segments) != 2 {
					t.Fatalf("%d segments", len(l.segments))
				}
			}
			held := openFDs(t) - before
			t.Logf("%d logs of 2 segments hold %d descriptors (%.2f per log)", logs, held, float64(held)/logs)
			want := 2 * logs
			if cached {
				want = capacity
			}
			if held > want {
				t.Errorf("%d descriptors held, want at most %d", held, want)
			}
			for _, l := range ls {
				mustNoError(t)(l.Close())
			}
			if after := openFDs(t) - before; after > 0 {
				t.Errorf("%d descriptors still open after closing every log", after)
			}
		})
	}
}
