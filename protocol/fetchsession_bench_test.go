package protocol

// The cost of an idle follower fetch of 3,000 partitions (STYLE.md §6):
// sessionless (every partition in the request and the response) against
// an incremental fetch in a KIP-227 session (none in either), each frame
// decoded, served by a real partition.Manager and its response encoded,
// as the connection goroutine does; and the follower client's side,
// building the request from the fetcher's wish list.
//
//	go test -run='^$' -bench=IdleFollowerFetch -benchmem ./protocol/

import (
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
)

const idleFetchPartitions = 3000

// idleLeader is a Manager leading idleFetchPartitions partitions of
// topics "idle0".."idle29" (100 each), replicas [1 2], each with one
// record, which follower 2 has: every partition is idle.
func idleLeader(b *testing.B) *partition.Manager {
	m, err := partition.NewManager(partition.Config{
		BrokerID: 1, LogDirs: []string{filepath.Join(b.TempDir(), "logs")},
		HighWatermarkCheckpointInterval: time.Hour, RecoveryPointCheckpointInterval: time.Hour,
		RetentionCheckInterval: time.Hour, ReplicaLagTimeMax: time.Hour, Log: zerolog.Nop(),
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = m.Close() })
	var states []partition.PartitionState
	for _, tp := range idleTPs() {
		states = append(states, partition.PartitionState{TopicPartition: tp, Replicas: []int32{1, 2},
			Config: cluster.DefaultLogConfig(), LeaderAndIsr: cluster.LeaderAndIsr{Leader: 1, LeaderEpoch: 1, Isr: []int32{1, 2}}})
	}
	for tp, res := range m.BecomeLeaderOrFollower(states) {
		if res.Err != nil {
			b.Fatalf("%s: %v", tp, res.Err)
		}
	}
	for _, tp := range idleTPs() {
		if _, err := m.Append(tp, makeBatch(1, "v"), 1); err != nil {
			b.Fatal(err)
		}
	}
	return m
}

func idleTPs() []cluster.TopicPartition {
	out := make([]cluster.TopicPartition, 0, idleFetchPartitions)
	for i := range idleFetchPartitions {
		out = append(out, cluster.TopicPartition{Topic: fmt.Sprintf("idle%d", i/100), Partition: int32(i % 100)})
	}
	return out
}

// idleWishList is the follower's fetch of every partition at its LEO, 1.
func idleWishList() []partition.FetchPartition {
	var out []partition.FetchPartition
	for _, tp := range idleTPs() {
		out = append(out, partition.FetchPartition{TopicPartition: tp, FetchOffset: 1, CurrentLeaderEpoch: 1, LogStartOffset: 0, MaxBytes: 1 << 20})
	}
	return out
}

// idleFetch is follower 2's Fetch v12 of want, in session id at epoch.
func idleFetch(id, epoch int32, want []partition.FetchPartition) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.ReplicaID = 2
	req.MinBytes = 1
	req.MaxBytes = 10 << 20
	req.SessionID, req.SessionEpoch = id, epoch
	appendFetchTopics(req, want)
	return req
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loopCPU runs fn b.N times (b.Loop) and reports the process CPU time per
// iteration as cpu-ns/op, which a machine shared with other work inflates
// less than ns/op (wall time).
func loopCPU(b *testing.B, fn func()) {
	start := cpuTime(b)
	n := 0
	for b.Loop() {
		fn()
		n++
	}
	b.ReportMetric(float64(cpuTime(b)-start)/float64(n), "cpu-ns/op")
}

func BenchmarkIdleFollowerFetch(b *testing.B) {
	m := idleLeader(b)
	want := idleWishList()
	b.Run("sessionless", func(b *testing.B) {
		c := benchConn(b, m)
		frame := benchFrame(idleFetch(0, -1, want))
		out, err := benchHandle(c, frame)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(len(frame)), "req-bytes")
		b.ReportMetric(float64(len(out)), "resp-bytes")
		b.ReportAllocs()
		loopCPU(b, func() {
			if _, err := benchHandle(c, frame); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("incremental", func(b *testing.B) {
		c := benchConn(b, m)
		if _, err := benchHandle(c, benchFrame(idleFetch(0, 0, want))); err != nil {
			b.Fatal(err)
		}
		var id int32
		for sid := range c.s.fetchSessions.sessions {
			id = sid
		}
		epoch := int32(1)
		frame := benchFrame(idleFetch(id, epoch, nil))
		out, err := benchHandle(c, frame)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(len(frame)), "req-bytes")
		b.ReportMetric(float64(len(out)), "resp-bytes")
		b.ReportAllocs()
		loopCPU(b, func() {
			epoch++
			// The epoch is the only field that changes: patch it in the
			// frame rather than encode a request per iteration.
			patchSessionEpoch(frame, epoch)
			if _, err := benchHandle(c, frame); err != nil {
				b.Fatal(err)
			}
		})
		if s := c.s.fetchSessions.get(id); s == nil || s.epoch != epoch+1 {
			b.Fatalf("session %d not at epoch %d: every fetch must have been served in it", id, epoch+1)
		}
	})
}

// patchSessionEpoch writes epoch into a Fetch v12 frame built by
// idleFetch (header: key, version, correlation id, client id "bench",
// empty tags; body: replica id, max wait, min bytes, max bytes,
// isolation level, session id, session epoch).
func patchSessionEpoch(frame []byte, epoch int32) {
	const off = 2 + 2 + 4 + 2 + len("bench") + 1 + 4 + 4 + 4 + 4 + 1 + 4
	frame[off] = byte(epoch >> 24)
	frame[off+1] = byte(epoch >> 16)
	frame[off+2] = byte(epoch >> 8)
	frame[off+3] = byte(epoch)
}

// BenchmarkIdleFollowerFetchBuild is the follower client's side: the
// request for an idle wish list of 3,000 partitions, full (every
// partition) or incremental (none changed).
func BenchmarkIdleFollowerFetchBuild(b *testing.B) {
	want := idleWishList()
	b.Run("full", func(b *testing.B) {
		h := newFetchSessionHandler()
		b.ReportAllocs()
		loopCPU(b, func() {
			kreq := kmsg.NewPtrFetchRequest()
			h.build(kreq, want)
			h.failed(true)
		})
	})
	b.Run("incremental", func(b *testing.B) {
		h := newFetchSessionHandler()
		kreq := kmsg.NewPtrFetchRequest()
		h.build(kreq, want)
		h.handled(false, 7)
		b.ReportAllocs()
		loopCPU(b, func() {
			kreq := kmsg.NewPtrFetchRequest()
			if !h.build(kreq, want) || len(kreq.Topics) != 0 {
				b.Fatal("not an empty incremental fetch")
			}
			h.handled(true, 7)
		})
	})
}
