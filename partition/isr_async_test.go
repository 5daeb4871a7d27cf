package partition

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/logstore"
)

// stuckZK is a StateWriter in a ZooKeeper outage: every write waits until
// its context ends (the partition's isrWriteTimeout, or Close).
type stuckZK struct {
	started chan struct{} // one value per write begun
}

func (z *stuckZK) WriteLeaderAndIsr(ctx context.Context, tp cluster.TopicPartition, _ cluster.LeaderAndIsr) (int32, error) {
	z.started <- struct{}{}
	<-ctx.Done()
	return -1, ctx.Err()
}

func (z *stuckZK) NotifyIsrChange(cluster.TopicPartition) {}

func newStuckManager(t *testing.T, lag time.Duration) (*Manager, *stuckZK, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "logs")
	zk := &stuckZK{started: make(chan struct{}, 16)}
	m, err := NewManager(Config{BrokerID: 1, LogDirs: []string{dir},
		HighWatermarkCheckpointInterval: time.Millisecond, RecoveryPointCheckpointInterval: time.Millisecond,
		RetentionCheckInterval: time.Hour, ReplicaLagTimeMax: lag, StateWriter: zk,
		Log: zerolog.New(zerolog.NewTestWriter(t))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m, zk, dir
}

// TestIsrExpirationDoesNotBlockCheckpoints: a shrink write stuck on
// ZooKeeper must not stop the time-based duties (flush, retention, the
// checkpoints), as Kafka runs isr-expiration as its own scheduled task.
func TestIsrExpirationDoesNotBlockCheckpoints(t *testing.T) {
	m, zk, dir := newStuckManager(t, 100*time.Millisecond)
	cfg := cluster.DefaultLogConfig()
	cfg.MinInsyncReplicas = 1
	// Broker 2 is in the ISR but never fetches: out of sync after 100 ms.
	if err := m.ApplyPartitionStates([]PartitionState{leaderState(1, 0, []int32{1, 2}, []int32{1, 2}, cfg)}); err != nil {
		t.Fatal(err)
	}
	m.Start()
	select {
	case <-zk.started:
	case <-time.After(5 * time.Second):
		t.Fatal("no ISR shrink was written")
	}
	// The shrink write now hangs; the HW checkpoint must still be written.
	cp := filepath.Join(dir, logstore.ReplicationCheckpointFile)
	if err := os.Remove(cp); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	deadline := time.Now().Add(4 * time.Second)
	for {
		if _, err := os.Stat(cp); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("HW checkpoint not written while an ISR shrink write hangs on ZooKeeper")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReadDoesNotWaitForIsrExpansion: a follower's fetch that proposes an
// ISR expansion answers at once; the write goes on in the background, so a
// ZooKeeper outage does not hold the whole Fetch response (and with it the
// HW and acks=all of every other partition in it).
func TestReadDoesNotWaitForIsrExpansion(t *testing.T) {
	m, zk, _ := newStuckManager(t, 30*time.Second)
	cfg := cluster.DefaultLogConfig()
	cfg.MinInsyncReplicas = 1
	if err := m.ApplyPartitionStates([]PartitionState{leaderState(1, 0, []int32{1, 2}, []int32{1}, cfg)}); err != nil {
		t.Fatal(err)
	}
	first := mustAppend(t, m, buildBatch(batchSpec{records: 2}), -1)
	read := make(chan error, 1)
	go func() {
		_, err := m.Read(tp0, ReadRequest{FetchOffset: first.LastOffset + 1, MaxBytes: 100, ReplicaID: 2, CurrentLeaderEpoch: 0})
		read <- err
	}()
	select {
	case <-zk.started:
	case <-time.After(5 * time.Second):
		t.Fatal("no ISR expansion was written")
	}
	select {
	case err := <-read:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Read waited for the ISR expansion write")
	}
	// One write in flight per partition: another fetch proposes nothing.
	followerFetch(t, m, first.LastOffset+1, 0)
	select {
	case <-zk.started:
		t.Fatal("a second ISR write started while one is in flight")
	case <-time.After(50 * time.Millisecond):
	}
	// Close ends the hung write and waits for it.
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}
