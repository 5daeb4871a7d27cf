package partition

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/internal/recordcodec"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// batchSpec describes a v2 record batch to build in tests.
type batchSpec struct {
	records       int
	producerID    int64
	producerEpoch int16
	baseSequence  int32
	valueSize     int
	timestamp     int64
	transactional bool // attribute bit 0x10; needs a producer id
}

func appendVarint(b []byte, v int64) []byte { return binary.AppendVarint(b, v) }

// buildBatch encodes a v2 record batch as a producer would send it (base
// offset 0), with a valid CRC32C.
func buildBatch(s batchSpec) []byte {
	if s.records == 0 {
		s.records = 1
	}
	b := recordcodec.NewBatch(s.timestamp)
	if s.producerID != 0 {
		b.ProducerID, b.ProducerEpoch, b.BaseSequence = s.producerID, s.producerEpoch, s.baseSequence
	}
	if s.transactional {
		b.Attributes = 0x10
	}
	for i := 0; i < s.records; i++ {
		v := make([]byte, s.valueSize)
		for j := range v {
			v[j] = byte('a' + (i+j)%26)
		}
		b.Records = append(b.Records, recordcodec.Record{Value: v})
	}
	return recordcodec.MustBatch(b)
}

// fakeClock is a settable clock for deterministic tests.
type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time          { return c.t }
func (c *fakeClock) Advance(d time.Duration) { c.t = c.t.Add(d) }

var tp0 = cluster.TopicPartition{Topic: "t", Partition: 0}

// newTestManager makes a Manager for broker id over a fresh log dir.
func newTestManager(t testing.TB, id int32, dir string, clock *fakeClock) *Manager {
	t.Helper()
	if dir == "" {
		dir = filepath.Join(t.TempDir(), "logs")
	}
	m, err := NewManager(Config{
		BrokerID: id, LogDirs: []string{dir},
		HighWatermarkCheckpointInterval: time.Second, RecoveryPointCheckpointInterval: time.Second,
		RetentionCheckInterval: time.Minute, Now: clock.Now,
		Log: zerolog.New(zerolog.NewTestWriter(t)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func leaderState(leader int32, epoch int32, replicas, isr []int32, cfg cluster.LogConfig) PartitionState {
	return PartitionState{TopicPartition: tp0, Replicas: replicas, Config: cfg,
		LeaderAndIsr: cluster.LeaderAndIsr{Leader: leader, LeaderEpoch: epoch, Isr: isr, ZkVersion: 0}}
}

// newLeaderManager makes broker 1 lead tp0 in leader epoch 0 over replicas
// and isr, with min.insync.replicas minIsr, on a fake clock at 1000 s. It
// returns the log config, for the states a test applies later.
func newLeaderManager(t *testing.T, minIsr int64, replicas, isr []int32) (*Manager, cluster.LogConfig) {
	t.Helper()
	m := newTestManager(t, 1, "", &fakeClock{t: time.Unix(1000, 0)})
	cfg := cluster.DefaultLogConfig()
	cfg.MinInsyncReplicas = minIsr
	if err := m.ApplyPartitionStates([]PartitionState{leaderState(1, 0, replicas, isr, cfg)}); err != nil {
		t.Fatal(err)
	}
	return m, cfg
}

// followerFetch is broker 2 fetching tp0 from offset in leader epoch
// epoch, which tells the leader its LEO.
func followerFetch(t *testing.T, m *Manager, offset int64, epoch int32) {
	t.Helper()
	if _, err := m.Read(tp0, ReadRequest{FetchOffset: offset, MaxBytes: 100, ReplicaID: 2, CurrentLeaderEpoch: epoch}); err != nil {
		t.Fatal(err)
	}
}

// waitWaiters waits until r holds n acks=all waiters.
func waitWaiters(t *testing.T, r *Replica, n int) {
	t.Helper()
	eventually(t, 10*time.Second, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.waiters) == n
	}, fmt.Sprintf("%d acks=all waiters to register", n))
}
