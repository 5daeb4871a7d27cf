package partition

import (
	"fmt"
	"path/filepath"
	"testing"
)

// BenchmarkManagerClose closes a Manager holding n replicas opened from
// existing logs: a broker's shutdown after its controlled shutdown.
// idle: nothing appended since the open; written: one batch appended to
// every tenth (as bench-scale's produce phase leaves 1,000 of 10,000).
//
//	go test -run='^$' -bench=ManagerClose -benchtime=1x ./partition/
func BenchmarkManagerClose(b *testing.B) {
	for _, c := range []struct {
		name    string
		n       int
		written bool
	}{{"idle", 1000, false}, {"idle", 10000, false}, {"written", 10000, true}} {
		n := c.n
		b.Run(fmt.Sprintf("%s/partitions=%d", c.name, n), func(b *testing.B) {
			states := applyStates(n, 0)
			dirs := []string{filepath.Join(b.TempDir(), "d1")}
			m := benchManager(b, dirs, *benchThreads)
			mustApply(b, m, states)
			if err := m.Close(); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				b.StopTimer()
				m := benchManager(b, dirs, *benchThreads)
				mustApply(b, m, states)
				for i, st := range states {
					if !c.written || i%9 != 0 { // 1,111 of the 3,334 led here
						continue
					}
					if _, err := m.Append(st.TopicPartition, buildBatch(batchSpec{producerID: -1}), 1); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				if err := m.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
