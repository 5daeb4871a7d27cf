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
	if s.producerID == 0 {
		s.producerID = -1
		s.producerEpoch = -1
		s.baseSequence = -1
	}
	var recs []byte
	for i := 0; i < s.records; i++ {
		var body []byte
		body = append(body, 0)              // attributes
		body = appendVarint(body, 0)        // timestamp delta
		body = appendVarint(body, int64(i)) // offset delta
		body = appendVarint(body, -1)       // null key
		body = appendVarint(body, int64(s.valueSize))
		for j := 0; j < s.valueSize; j++ {
			body = append(body, byte('a'+(i+j)%26))
		}
		body = appendVarint(body, 0) // headers
		recs = appendVarint(recs, int64(len(body)))
		recs = append(recs, body...)
	}
	b := make([]byte, 61, 61+len(recs))
	binary.BigEndian.PutUint64(b[0:], 0)                    // base offset
	binary.BigEndian.PutUint32(b[8:], uint32(49+len(recs))) // batch length
	binary.BigEndian.PutUint32(b[12:], 0xffffffff)          // partition leader epoch
	b[16] = 2                                               // magic
	binary.BigEndian.PutUint16(b[21:], 0)                   // attributes
	if s.transactional {
		binary.BigEndian.PutUint16(b[21:], 0x10)
	}
	binary.BigEndian.PutUint32(b[23:], uint32(s.records-1))  // last offset delta
	binary.BigEndian.PutUint64(b[27:], uint64(s.timestamp))  // first timestamp
	binary.BigEndian.PutUint64(b[35:], uint64(s.timestamp))  // max timestamp
	binary.BigEndian.PutUint64(b[43:], uint64(s.producerID)) // producer id
	binary.BigEndian.PutUint16(b[51:], uint16(s.producerEpoch))
	binary.BigEndian.PutUint32(b[53:], uint32(s.baseSequence))
	binary.BigEndian.PutUint32(b[57:], uint32(s.records))
	b = append(b, recs...)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
	return b
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
