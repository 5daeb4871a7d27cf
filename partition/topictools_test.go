package partition

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/kafkazk/broker/cluster"
)

// TestDeleteRecordsReplicated deletes records on the leader of a
// 3-replica partition and checks that the followers follow its log start
// offset through their fetches, and that DeleteRecords answers only once
// the low watermark over the live replicas reached the offset.
func TestDeleteRecordsReplicated(t *testing.T) {
	cfg := cluster.DefaultLogConfig()
	cfg.SegmentBytes = 300 // a few batches per segment, so whole segments go
	s := newSim(t, 3, cfg)
	for range 10 {
		s.produce(2, 1)
	}
	s.catchUp()
	leader := s.mgr(1)

	type result struct {
		lw  int64
		err error
	}
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		lw, err := leader.DeleteRecords(ctx, tp0, 7, nil)
		done <- result{lw, err}
	}()
	eventually(t, 5*time.Second, func() bool { return s.status(1).LogStartOffset == 7 }, "leader log start at 7")
	select {
	case r := <-done:
		t.Fatalf("answered before the followers moved: %+v", r)
	case <-time.After(50 * time.Millisecond):
	}
	// One round carries the leader's start to the followers, the next
	// tells the leader theirs.
	s.fetch(2, 3)
	s.fetch(2, 3)
	select {
	case r := <-done:
		if r.err != nil || r.lw != 7 {
			t.Fatalf("DeleteRecords = %d, %v; want 7", r.lw, r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("DeleteRecords did not complete after the followers fetched")
	}
	for _, id := range []int32{2, 3} {
		if st := s.status(id); st.LogStartOffset != 7 {
			t.Errorf("broker %d log start %d, want 7", id, st.LogStartOffset)
		}
	}
	if off, _, _, err := leader.ListOffset(tp0, EarliestTimestamp, -1, AskerConsumer); err != nil || off != 7 {
		t.Errorf("earliest offset %d, %v; want 7", off, err)
	}
	if _, err := leader.Read(tp0, ReadRequest{FetchOffset: 6, MaxBytes: 1 << 20, ReplicaID: -1, CurrentLeaderEpoch: -1}); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Errorf("read below the log start: %v", err)
	}
	res, err := leader.Read(tp0, ReadRequest{FetchOffset: 7, MaxBytes: 1 << 20, ReplicaID: -1, CurrentLeaderEpoch: -1})
	if err != nil || len(res.Records) == 0 || res.LogStartOffset != 7 {
		t.Errorf("read at the log start: %d bytes, start %d, %v", len(res.Records), res.LogStartOffset, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := leader.DeleteRecords(ctx, tp0, 21, nil); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Errorf("above the high watermark: %v", err)
	}
	if _, err := leader.DeleteRecords(ctx, tp0, -5, nil); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Errorf("negative offset: %v", err)
	}
	if _, err := s.mgr(2).DeleteRecords(ctx, tp0, 8, nil); !errors.Is(err, ErrNotLeader) {
		t.Errorf("on a follower: %v", err)
	}
	if lw, err := leader.DeleteRecords(ctx, tp0, 3, nil); err != nil || lw != 7 {
		t.Errorf("below the start: %d, %v; want 7", lw, err)
	}

	// A follower that stops fetching holds the low watermark back until
	// the request times out, unless it is not alive.
	short, cancelShort := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancelShort()
	s.fetch(2)
	if _, err := leader.DeleteRecords(short, tp0, DeleteRecordsHighWatermark, nil); !errors.Is(err, ErrRequestTimedOut) {
		t.Errorf("with broker 3 not fetching: %v", err)
	}
	if st := s.status(1); st.LogStartOffset != 20 {
		t.Errorf("leader log start %d after deleting to the high watermark, want 20", st.LogStartOffset)
	}
	go func() {
		lw, err := leader.DeleteRecords(ctx, tp0, DeleteRecordsHighWatermark, func(id int32) bool { return id != 3 })
		done <- result{lw, err}
	}()
	s.fetch(2) // takes the leader's start
	s.fetch(2) // tells the leader its own
	if r := <-done; r.err != nil || r.lw != 20 {
		t.Errorf("with broker 3 dead: %+v, want 20", r)
	}
}

// TestDeleteRecordsSurvivesRestart checks the log start offset inside a
// segment comes back from log-start-offset-checkpoint.
func TestDeleteRecordsSurvivesRestart(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	dir := filepath.Join(t.TempDir(), "logs")
	m := newTestManager(t, 1, dir, clock)
	st := leaderState(1, 0, []int32{1}, []int32{1}, cluster.DefaultLogConfig())
	if err := m.ApplyPartitionStates([]PartitionState{st}); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		mustAppend(t, m, buildBatch(batchSpec{records: 3, valueSize: 4}), -1)
	}
	if lw, err := m.DeleteRecords(context.Background(), tp0, 5, nil); err != nil || lw != 5 {
		t.Fatalf("DeleteRecords = %d, %v", lw, err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m2 := newTestManager(t, 1, dir, clock)
	if err := m2.ApplyPartitionStates([]PartitionState{st}); err != nil {
		t.Fatal(err)
	}
	if off, _, _, err := m2.ListOffset(tp0, EarliestTimestamp, -1, AskerConsumer); err != nil || off != 5 {
		t.Fatalf("earliest offset after restart %d, %v; want 5", off, err)
	}
}

// TestUpdateConfig changes a live replica's config: the next append obeys it.
func TestUpdateConfig(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	m := newTestManager(t, 1, "", clock)
	cfg := cluster.DefaultLogConfig()
	if err := m.ApplyPartitionStates([]PartitionState{leaderState(1, 0, []int32{1}, []int32{1}, cfg)}); err != nil {
		t.Fatal(err)
	}
	batch := buildBatch(batchSpec{records: 2, valueSize: 100})
	mustAppend(t, m, batch, -1)

	small := cfg
	small.MaxMessageBytes = 100
	if n := m.UpdateConfig("t", small); n != 1 {
		t.Fatalf("UpdateConfig changed %d replicas, want 1", n)
	}
	if n := m.UpdateConfig("t", small); n != 0 {
		t.Fatalf("the same config again changed %d replicas", n)
	}
	if n := m.UpdateConfig("other", cluster.DefaultLogConfig()); n != 0 {
		t.Fatalf("another topic's config changed %d replicas", n)
	}
	if _, err := m.Append(tp0, batch, -1); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("append over the new max.message.bytes: %v", err)
	}
	strict := cfg
	strict.MinInsyncReplicas = 2
	m.UpdateConfig("t", strict)
	if _, err := m.Append(tp0, batch, -1); !errors.Is(err, ErrNotEnoughReplicas) {
		t.Fatalf("acks=all with min.insync.replicas 2 and isr [1]: %v", err)
	}
	if _, err := m.Append(tp0, batch, 1); err != nil {
		t.Fatalf("acks=1 ignores min.insync.replicas: %v", err)
	}
}

func TestDescribeLogDirs(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	dir := filepath.Join(t.TempDir(), "logs")
	m := newTestManager(t, 1, dir, clock)
	if dirs := m.DescribeLogDirs(); len(dirs) != 1 || dirs[0].Dir != dir || len(dirs[0].Replicas) != 0 {
		t.Fatalf("empty broker: %+v", dirs)
	}
	if err := m.ApplyPartitionStates([]PartitionState{leaderState(1, 0, []int32{1}, []int32{1}, cluster.DefaultLogConfig())}); err != nil {
		t.Fatal(err)
	}
	batch := buildBatch(batchSpec{records: 2, valueSize: 10})
	mustAppend(t, m, batch, -1)
	mustAppend(t, m, batch, -1)
	dirs := m.DescribeLogDirs()
	want := ReplicaLogInfo{TopicPartition: tp0, Size: int64(2 * len(batch))}
	if len(dirs) != 1 || len(dirs[0].Replicas) != 1 || dirs[0].Replicas[0] != want {
		t.Fatalf("DescribeLogDirs = %+v, want one dir with %+v", dirs, want)
	}
}
