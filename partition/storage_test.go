package partition

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/logstore"
)

// TestStorageErrorOnAppend: an fsync that fails under an append
// (flush.messages=1) is logstore.ErrStorage, fatal for the log; the append
// returns ErrStorage (KAFKA_STORAGE_ERROR), and the acks=all waits on the
// partition end with it at once rather than time out, as do waits begun
// after it, since no later append can be written.
func TestStorageErrorOnAppend(t *testing.T) {
	m, _ := newLeaderManager(t, 1, []int32{1, 2}, []int32{1, 2})
	// Move the replica's log onto a MemFS that can fail an fsync.
	r, err := m.get(tp0)
	if err != nil {
		t.Fatal(err)
	}
	fs := logstore.NewMemFS()
	r.mu.Lock()
	lc := logstoreConfig(r.cfg, zerolog.New(zerolog.NewTestWriter(t)))
	lc.FS, lc.FlushMessages = fs, 1
	l, err := logstore.Open("/logs/t-0", lc, 0)
	if err != nil {
		r.mu.Unlock()
		t.Fatal(err)
	}
	if err := l.LeaderEpochs().Assign(0, 0); err != nil {
		r.mu.Unlock()
		t.Fatal(err)
	}
	old := r.log
	r.log = l
	r.mu.Unlock()
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	first := mustAppend(t, m, buildBatch(batchSpec{records: 1}), -1) // broker 2 has not fetched it
	waited := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		waited <- m.WaitCommitted(ctx, tp0, first.LastOffset, first.LeaderEpoch)
	}()
	waitWaiters(t, r, 1)
	fs.SetInjector(func(op logstore.MemOp, _ string) error {
		if op == logstore.MemOpSync {
			return logstore.ErrInjected
		}
		return nil
	})
	_, err = m.Append(tp0, buildBatch(batchSpec{records: 1}), -1)
	if !errors.Is(err, ErrStorage) {
		t.Fatalf("append with a failing fsync: %v, want ErrStorage", err)
	}
	if err := <-waited; !errors.Is(err, ErrStorage) {
		t.Fatalf("acks=all wait after the log failed: %v, want ErrStorage", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.WaitCommitted(ctx, tp0, first.LastOffset, first.LeaderEpoch); !errors.Is(err, ErrStorage) {
		t.Fatalf("acks=all wait begun after the log failed: %v, want ErrStorage", err)
	}
}
