package partition

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/logstore"
)

// benchThreads is RecoveryThreadsPerDataDir in BenchmarkBecomeLeaderOrFollower
// (go test -bench=BecomeLeaderOrFollower -args -apply.threads=8).
var benchThreads = flag.Int("apply.threads", 1, "num.recovery.threads.per.data.dir of BenchmarkBecomeLeaderOrFollower")

// nopLeaderClient is a LeaderClient that never answers with data: the
// benchmarks below never Start the Manager, so no fetch is sent; it only
// makes followed partitions join a fetcher as on a broker.
type nopLeaderClient struct{}

func (nopLeaderClient) Fetch(context.Context, int32, FetchRequest) (FetchResponse, error) {
	return FetchResponse{}, nil
}

func (nopLeaderClient) OffsetsForLeaderEpoch(context.Context, int32, []EpochQuery) ([]EpochAnswer, error) {
	return nil, nil
}

// nopStateWriter accepts every ISR write.
type nopStateWriter struct{}

func (nopStateWriter) WriteLeaderAndIsr(_ context.Context, _ cluster.TopicPartition, st cluster.LeaderAndIsr) (int32, error) {
	return st.ZkVersion + 1, nil
}
func (nopStateWriter) NotifyIsrChange(cluster.TopicPartition) {}

// applyStates is n partition states of broker 1 over replicas 1, 2, 3 in
// topics of 100 partitions, a third led here and the rest followed
// (leaders 2 and 3), in leader epoch epoch.
func applyStates(n int, epoch int32) []PartitionState {
	cfg := cluster.DefaultLogConfig()
	out := make([]PartitionState, 0, n)
	for i := range n {
		leader := int32(i%3 + 1)
		out = append(out, PartitionState{
			TopicPartition: cluster.TopicPartition{Topic: fmt.Sprintf("topic-%04d", i/100), Partition: int32(i % 100)},
			Replicas:       []int32{1, 2, 3},
			Config:         cfg,
			LeaderAndIsr:   cluster.LeaderAndIsr{Leader: leader, LeaderEpoch: epoch, Isr: []int32{1, 2, 3}, ZkVersion: epoch},
		})
	}
	return out
}

func benchManager(b *testing.B, dirs []string, threads int) *Manager {
	b.Helper()
	m, err := NewManager(Config{
		BrokerID: 1, LogDirs: dirs,
		HighWatermarkCheckpointInterval: time.Hour, RecoveryPointCheckpointInterval: time.Hour,
		RetentionCheckInterval: time.Hour, Log: zerolog.Nop(),
		LeaderClient: nopLeaderClient{}, StateWriter: nopStateWriter{},
		RecoveryThreadsPerDataDir: threads, Files: logstore.NewFileCache(4096),
	})
	if err != nil {
		b.Fatal(err)
	}
	return m
}

func mustApply(b *testing.B, m *Manager, states []PartitionState) {
	b.Helper()
	for tp, t := range m.BecomeLeaderOrFollower(states) {
		if t.Err != nil {
			b.Fatalf("%s: %v", tp, t.Err)
		}
	}
}

// BenchmarkBecomeLeaderOrFollower applies one LeaderAndIsr of n partition
// states (a third led here, the rest followed) to a broker with two log
// dirs on the real file system:
//
//   - create: none of the logs exists yet (a topic creation);
//
//   - reopen: the logs exist, written and closed by an earlier Manager
//     (a broker restart: the first LeaderAndIsr opens every log);
//
//   - epoch: the replicas are open and every state has a new leader
//     epoch (a controller failover re-sending every state).
//
//     go test -run='^$' -bench=BecomeLeaderOrFollower -benchtime=1x ./partition/
func BenchmarkBecomeLeaderOrFollower(b *testing.B) {
	for _, n := range []int{1000, 5000, 10000} {
		b.Run(fmt.Sprintf("create/partitions=%d", n), func(b *testing.B) {
			states := applyStates(n, 0)
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				root, err := os.MkdirTemp(b.TempDir(), "apply")
				if err != nil {
					b.Fatal(err)
				}
				m := benchManager(b, []string{filepath.Join(root, "d1"), filepath.Join(root, "d2")}, *benchThreads)
				b.StartTimer()
				mustApply(b, m, states)
				b.StopTimer()
				_ = m.Close()
				_ = os.RemoveAll(root)
				b.StartTimer()
			}
		})
		b.Run(fmt.Sprintf("reopen/partitions=%d", n), func(b *testing.B) {
			states := applyStates(n, 0)
			dirs := []string{filepath.Join(b.TempDir(), "d1"), filepath.Join(b.TempDir(), "d2")}
			m := benchManager(b, dirs, *benchThreads)
			mustApply(b, m, states)
			if err := m.Close(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				m := benchManager(b, dirs, *benchThreads)
				b.StartTimer()
				mustApply(b, m, states)
				b.StopTimer()
				if err := m.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
		b.Run(fmt.Sprintf("epoch/partitions=%d", n), func(b *testing.B) {
			dirs := []string{filepath.Join(b.TempDir(), "d1"), filepath.Join(b.TempDir(), "d2")}
			m := benchManager(b, dirs, *benchThreads)
			defer m.Close()
			mustApply(b, m, applyStates(n, 0))
			epoch := int32(0)
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				epoch++
				states := applyStates(n, epoch)
				b.StartTimer()
				mustApply(b, m, states)
			}
		})
	}
}
