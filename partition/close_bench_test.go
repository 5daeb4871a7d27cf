package partition

import (
	"fmt"
	"path/filepath"
	"testing"
)

// BenchmarkManagerClose closes a Manager holding n idle replicas (opened
// from existing logs, nothing appended since): a broker's shutdown after
// its controlled shutdown.
//
//	go test -run='^$' -bench=ManagerClose -benchtime=1x ./partition/
func BenchmarkManagerClose(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("idle/partitions=%d", n), func(b *testing.B) {
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
				b.StartTimer()
				if err := m.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
