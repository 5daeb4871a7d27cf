package partition

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
)

// BenchmarkHighWatermark is the leader's replication round with N
// followers: a produce of one batch of 100 records of 100 bytes (acks=-1),
// then each follower's fetch from where it is, which returns the new batch
// and reports the follower's log end offset, so the high watermark moves
// to the previous batch's end. Reads go to the page cache, not the disk.
//
//	go test -run='^$' -bench=HighWatermark -benchmem ./partition/
func BenchmarkHighWatermark(b *testing.B) {
	for _, followers := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("followers=%d", followers), func(b *testing.B) {
			m, err := NewManager(Config{
				BrokerID: 1, LogDirs: []string{filepath.Join(b.TempDir(), "logs")},
				HighWatermarkCheckpointInterval: time.Hour, RecoveryPointCheckpointInterval: time.Hour,
				RetentionCheckInterval: time.Hour, Log: zerolog.Nop(),
			})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			replicas := []int32{1}
			for f := range followers {
				replicas = append(replicas, int32(f+2))
			}
			cfg := cluster.DefaultLogConfig()
			cfg.SegmentBytes = 1 << 30
			if err := m.ApplyPartitionStates([]PartitionState{leaderState(1, 0, replicas, replicas, cfg)}); err != nil {
				b.Fatal(err)
			}
			batch := buildBatch(batchSpec{records: 100, valueSize: 100})
			// Append assigns offsets in place, as in a produce request's
			// frame, so every round appends a fresh copy.
			scratch := make([]byte, len(batch))
			var leo int64
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			for b.Loop() {
				copy(scratch, batch)
				if _, err := m.Append(tp0, scratch, -1); err != nil {
					b.Fatal(err)
				}
				var res ReadResult
				for _, f := range replicas[1:] {
					res, err = m.Read(tp0, ReadRequest{FetchOffset: leo, MaxBytes: 1 << 20, ReplicaID: f, CurrentLeaderEpoch: 0, LogStartOffset: 0})
					if err != nil {
						b.Fatal(err)
					}
					if len(res.Records) != len(batch) {
						b.Fatalf("follower %d read %d bytes, want %d", f, len(res.Records), len(batch))
					}
				}
				if res.HighWatermark != leo {
					b.Fatalf("high watermark %d after every follower fetched at %d", res.HighWatermark, leo)
				}
				leo += 100
			}
		})
	}
}

// BenchmarkCommitWaiters is the acks=all waiter list at a depth of N
// waits, the steady state of a pipelined producer: each round adds a
// waiter at the next offset and moves the HW by one, which completes the
// oldest waiter and touches no other. Waiters are pooled, so rounds
// allocate only when the list's array regrows.
//
//	go test -run='^$' -bench=CommitWaiters -benchmem ./partition/
func BenchmarkCommitWaiters(b *testing.B) {
	for _, depth := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("waiters=%d", depth), func(b *testing.B) {
			r := &Replica{isr: []int32{1}}
			r.cfg.MinInsyncReplicas = 1
			ring := make([]*commitWaiter, depth)
			next := int64(0)
			add := func() {
				w := commitWaiterPool.Get().(*commitWaiter)
				w.lastOffset = next
				ring[next%int64(depth)] = w
				next++
				r.addWaiterLocked(w)
			}
			for range depth {
				add()
			}
			b.ReportAllocs()
			for b.Loop() {
				r.hw++
				r.completeWaitersLocked()
				w := ring[(r.hw-1)%int64(depth)]
				if err := <-w.done; err != nil {
					b.Fatal(err)
				}
				commitWaiterPool.Put(w)
				add()
			}
			if r.waiterWakeups != uint64(b.N) || len(r.waiters) != depth {
				b.Fatalf("%d wakeups in %d rounds, %d waiters left", r.waiterWakeups, b.N, len(r.waiters))
			}
		})
	}
}
