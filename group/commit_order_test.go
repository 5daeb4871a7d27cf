package group

import (
	"context"
	"testing"
	"time"

	"github.com/kafkazk/broker/cluster"
)

// TestConcurrentCommitsKeepTheLaterAppend: two commits of one partition
// whose appends complete out of order leave the cache with the commit
// appended last, which is also what the log holds and a reload finds
// (Kafka's CommitRecordMetadataAndOffset: the larger appendedBatchOffset
// wins), not the one whose replication finished last.
func TestConcurrentCommitsKeepTheLaterAppend(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	log := newFakeLog()
	c := newTestCoordinator(t, log, clock, -1)
	tp := cluster.TopicPartition{Topic: "t", Partition: 0}
	offsetsTP := c.tp(c.PartitionFor("s"))
	openFirst, openSecond := log.gate(0), log.gate(1)
	commit := func(offset int64) <-chan error {
		done := make(chan error, 1)
		go func() {
			errs, err := c.CommitOffsets(context.Background(), CommitRequest{Group: "s", Generation: -1, Retention: -1,
				Offsets: map[cluster.TopicPartition]CommitOffset{tp: {Offset: offset, LeaderEpoch: -1}}})
			if err == nil {
				err = errs[tp]
			}
			done <- err
		}()
		return done
	}
	appended := func(n int64) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			if leo, _ := log.LogEndOffset(offsetsTP); leo >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("commit %d not appended within 5s", n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	first := commit(5) // appended at 0
	appended(1)
	second := commit(10) // appended at 1
	appended(2)
	openSecond()
	if err := recv(t, second); err != nil {
		t.Fatal(err)
	}
	openFirst()
	if err := recv(t, first); err != nil {
		t.Fatal(err)
	}
	if offs, err := c.FetchOffsets("s", nil, false); err != nil || offs[tp].Offset != 10 {
		t.Fatalf("after both commits: %v (%v), want offset 10, the later append", offs, err)
	}

	reloaded := newTestCoordinator(t, log, clock, -1)
	if offs, err := reloaded.FetchOffsets("s", nil, false); err != nil || offs[tp].Offset != 10 {
		t.Fatalf("reloaded from the log: %v (%v), want offset 10", offs, err)
	}
}
