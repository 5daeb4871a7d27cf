package partition

import (
	"context"
	"testing"
	"time"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/internal/recordcodec"
	"github.com/kafkazk/broker/logstore"
)

// timedBatch encodes a v2 batch (base offset 0, CreateTime) whose records
// carry the given timestamps, gzip-compressed when compress is set.
func timedBatch(timestamps []int64, compress bool) []byte {
	first, maxTs := timestamps[0], timestamps[0]
	for _, ts := range timestamps {
		first, maxTs = min(first, ts), max(maxTs, ts)
	}
	b := recordcodec.NewBatch(first)
	b.MaxTimestamp = maxTs
	for i, ts := range timestamps {
		b.Records = append(b.Records, recordcodec.Record{Value: []byte{'v', byte('0' + i%10), 'x'}, TimestampDelta: ts - first})
	}
	if compress {
		b.Attributes = int16(recordcodec.Gzip)
	}
	return recordcodec.MustBatch(b)
}

// TestListOffsetByTimestampWithinBatch: ListOffsets for a timestamp
// answers the first record, not the first batch, whose timestamp reaches
// it (Kafka's LogSegment.findOffsetByTimestamp): records of one batch with
// different timestamps give different offsets, compressed or not, and the
// answer carries the record's timestamp. A record below the log start
// never answers.
func TestListOffsetByTimestampWithinBatch(t *testing.T) {
	for _, compress := range []bool{false, true} {
		name := "uncompressed"
		if compress {
			name = "gzip"
		}
		t.Run(name, func(t *testing.T) {
			clock := &fakeClock{t: time.Unix(1000, 0)}
			m := newTestManager(t, 1, "", clock)
			if err := m.ApplyPartitionStates([]PartitionState{leaderState(1, 0, []int32{1}, []int32{1}, cluster.DefaultLogConfig())}); err != nil {
				t.Fatal(err)
			}
			mustAppend(t, m, timedBatch([]int64{100, 200, 300}, compress), -1) // offsets 0-2
			mustAppend(t, m, timedBatch([]int64{150, 400}, compress), -1)      // offsets 3-4
			for _, c := range []struct {
				ts, offset, timestamp int64
			}{
				{50, 0, 100},
				{100, 0, 100},
				{101, 1, 200},
				{200, 1, 200},
				{250, 2, 300},
				{300, 2, 300},
				{301, 4, 400},
				{400, 4, 400},
				{401, -1, -1},
			} {
				off, ts, _, err := m.ListOffset(tp0, c.ts, -1, AskerConsumer)
				if err != nil || off != c.offset || ts != c.timestamp {
					t.Errorf("timestamp %d: offset %d timestamp %d (%v), want offset %d timestamp %d", c.ts, off, ts, err, c.offset, c.timestamp)
				}
			}
			if lw, err := m.DeleteRecords(context.Background(), tp0, 2, nil); err != nil || lw != 2 {
				t.Fatalf("DeleteRecords = %d, %v", lw, err)
			}
			if off, ts, _, err := m.ListOffset(tp0, 100, -1, AskerConsumer); err != nil || off != 2 || ts != 300 {
				t.Errorf("timestamp 100 with the log start at 2: offset %d timestamp %d (%v), want 2 at 300", off, ts, err)
			}
		})
	}
}

// TestListOffsetByLogAppendTime: with message.timestamp.type=LogAppendTime
// every record of a batch has the batch's append time, so a timestamp
// answers the first record of the first batch appended at or after it.
func TestListOffsetByLogAppendTime(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	m := newTestManager(t, 1, "", clock)
	cfg := cluster.DefaultLogConfig()
	cfg.MessageTimestampType = "LogAppendTime"
	if err := m.ApplyPartitionStates([]PartitionState{leaderState(1, 0, []int32{1}, []int32{1}, cfg)}); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, m, timedBatch([]int64{100, 200, 300}, false), -1) // offsets 0-2 at 1000 s
	clock.Advance(time.Second)
	mustAppend(t, m, timedBatch([]int64{50, 60}, true), -1) // offsets 3-4 at 1001 s
	for _, c := range []struct{ ts, offset, timestamp int64 }{
		{200, 0, 1_000_000},
		{1_000_000, 0, 1_000_000},
		{1_000_001, 3, 1_001_000},
		{1_001_001, -1, -1},
	} {
		off, ts, _, err := m.ListOffset(tp0, c.ts, -1, AskerConsumer)
		if err != nil || off != c.offset || ts != c.timestamp {
			t.Errorf("timestamp %d: offset %d timestamp %d (%v), want offset %d timestamp %d", c.ts, off, ts, err, c.offset, c.timestamp)
		}
	}
}

// TestListOffsetByTimestampDuringLogChange: the timestamp walk runs
// without Replica.mu, so the log start may move past it (retention,
// DeleteRecords) and the leader epoch may change while this broker stays
// leader; neither is an error for the asker.
func TestListOffsetByTimestampDuringLogChange(t *testing.T) {
	for _, tc := range []struct {
		name       string
		change     func(t *testing.T, m *Manager)
		wantOffset int64
		wantTs     int64
	}{
		{name: "log start moves past the walk", change: func(t *testing.T, m *Manager) {
			if _, err := m.DeleteRecords(context.Background(), tp0, 2, nil); err != nil {
				t.Error(err)
			}
		}, wantOffset: 2, wantTs: 300},
		{name: "new epoch, same leader", change: func(t *testing.T, m *Manager) {
			if err := m.ApplyPartitionStates([]PartitionState{leaderState(1, 1, []int32{1}, []int32{1}, cluster.DefaultLogConfig())}); err != nil {
				t.Error(err)
			}
		}, wantOffset: 0, wantTs: 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{t: time.Unix(1000, 0)}
			m := newTestManager(t, 1, "", clock)
			if err := m.ApplyPartitionStates([]PartitionState{leaderState(1, 0, []int32{1}, []int32{1}, cluster.DefaultLogConfig())}); err != nil {
				t.Fatal(err)
			}
			mustAppend(t, m, timedBatch([]int64{100, 200, 300}, false), -1) // offsets 0-2
			mustAppend(t, m, timedBatch([]int64{150, 400}, false), -1)      // offsets 3-4
			r, err := m.get(tp0)
			if err != nil {
				t.Fatal(err)
			}
			once := false
			r.timestampWalkHook = func() {
				if !once {
					once = true
					tc.change(t, m)
				}
			}
			off, ts, _, err := m.ListOffset(tp0, 50, -1, AskerConsumer)
			if err != nil || off != tc.wantOffset || ts != tc.wantTs {
				t.Fatalf("ListOffset(50) = offset %d timestamp %d (%v), want offset %d timestamp %d",
					off, ts, err, tc.wantOffset, tc.wantTs)
			}
		})
	}
}

// TestFirstRecordAtTimestampSkipsEmptyBatch: a batch the cleaner kept with
// no records (it keeps an emptied batch's header for its producer state)
// holds no record at any timestamp, even with the LogAppendTime attribute
// and a max timestamp above the one asked for.
func TestFirstRecordAtTimestampSkipsEmptyBatch(t *testing.T) {
	h := logstore.BatchHeader{BaseOffset: 10, LastOffsetDelta: 4, Magic: 2, Attributes: 0x08,
		FirstTimestamp: 500, MaxTimestamp: 1000, NumRecords: 0}
	raw := make([]byte, logstore.BatchHeaderSize)
	if o, ts, ok, err := firstRecordAtTimestamp(raw, h, 900, 0); ok || err != nil {
		t.Fatalf("empty LogAppendTime batch: offset %d timestamp %d found %v err %v, want not found", o, ts, ok, err)
	}
}
