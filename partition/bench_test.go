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
