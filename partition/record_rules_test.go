package partition

// Tests of the per-record rules of Kafka's LogValidator.validateRecord
// that depend on the topic's config: a compacted topic refuses records
// without a key (INVALID_RECORD), and a CreateTime topic refuses records
// whose timestamp is farther from the broker's clock than
// message.timestamp.difference.max.ms (or its before/after split)
// allows (INVALID_TIMESTAMP). Both are checked per record, in plain and
// compressed batches, and report which records failed.

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/internal/recordcodec"
)

// testRecord is one record of keyedBatch: a nil key is a null key.
type testRecord struct {
	key     []byte
	tsDelta int64
}

// keyedBatch builds a v2 batch whose records carry the given keys and
// timestamp deltas from firstTimestamp, with a value each.
func keyedBatch(firstTimestamp int64, recs ...testRecord) []byte {
	b := recordcodec.NewBatch(firstTimestamp)
	for _, r := range recs {
		b.Records = append(b.Records, recordcodec.Record{Key: r.key, Value: []byte("v"), TimestampDelta: r.tsDelta})
	}
	return recordcodec.MustBatch(b)
}

func TestCompactedTopicRefusesRecordsWithoutKey(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	m := newTestManager(t, 1, "", clock)
	cfg := cluster.DefaultLogConfig()
	cfg.Compact, cfg.Delete, cfg.CleanupPolicy = true, false, "compact"
	if err := m.ApplyPartitionStates([]PartitionState{leaderState(1, 0, []int32{1}, []int32{1}, cfg)}); err != nil {
		t.Fatal(err)
	}
	now := clock.Now().UnixMilli()
	keyed := keyedBatch(now, testRecord{key: []byte("a")}, testRecord{key: []byte("")})
	if _, err := m.Append(tp0, keyed, 1); err != nil {
		t.Fatalf("keyed records (an empty key is a key) refused: %v", err)
	}
	for name, b := range map[string][]byte{
		"plain": keyedBatch(now, testRecord{key: []byte("a")}, testRecord{}, testRecord{key: []byte("b")}, testRecord{}),
		"gzip": func() []byte {
			p := keyedBatch(now, testRecord{key: []byte("a")}, testRecord{}, testRecord{key: []byte("b")}, testRecord{})
			return gzipBatch(p, p[61:])
		}(),
	} {
		_, err := m.Append(tp0, b, 1)
		var rve *RecordValidationError
		if !errors.Is(err, ErrInvalidRecord) || !errors.As(err, &rve) {
			t.Fatalf("%s: keyless records on a compacted topic: %v, want ErrInvalidRecord with record errors", name, err)
		}
		if len(rve.Records) != 2 || rve.Records[0].BatchIndex != 1 || rve.Records[1].BatchIndex != 3 ||
			!strings.Contains(rve.Records[0].Message, "Compacted topic cannot accept message without key in topic partition t-0") {
			t.Fatalf("%s: record errors %+v", name, rve.Records)
		}
		if !strings.Contains(err.Error(), "One or more records have been rejected due to 2 record errors in total") {
			t.Fatalf("%s: message %q", name, err)
		}
	}
	if off, _, _, _ := m.ListOffset(tp0, LatestTimestamp, -1, AskerConsumer); off != 2 {
		t.Fatalf("a refused batch was written: latest %d", off)
	}

	// A topic that is not compacted takes records without a key.
	cfg = cluster.DefaultLogConfig()
	if err := m.ApplyPartitionStates([]PartitionState{leaderState(1, 0, []int32{1}, []int32{1}, cfg)}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Append(tp0, keyedBatch(now, testRecord{}), 1); err != nil {
		t.Fatalf("keyless record on a delete topic: %v", err)
	}
}

func TestMessageTimestampDifferenceMax(t *testing.T) {
	clock := &fakeClock{t: time.Unix(100000, 0)}
	m := newTestManager(t, 1, "", clock)
	cfg := cluster.DefaultLogConfig()
	cfg.MessageTimestampDifferenceMaxMs = 1000
	if err := m.ApplyPartitionStates([]PartitionState{leaderState(1, 0, []int32{1}, []int32{1}, cfg)}); err != nil {
		t.Fatal(err)
	}
	now := clock.Now().UnixMilli()
	k := []byte("k")
	for name, b := range map[string][]byte{
		"at the bounds":      keyedBatch(now-1000, testRecord{key: k}, testRecord{key: k, tsDelta: 2000}),
		"no timestamp (-1)":  keyedBatch(-1, testRecord{key: k}),
		"within, compressed": func() []byte { p := keyedBatch(now, testRecord{key: k, tsDelta: 999}); return gzipBatch(p, p[61:]) }(),
	} {
		if _, err := m.Append(tp0, b, 1); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name, c := range map[string]struct {
		b     []byte
		index int32
	}{
		"too old":                       {keyedBatch(now-1001, testRecord{key: k}), 0},
		"too new, second record":        {keyedBatch(now, testRecord{key: k}, testRecord{key: k, tsDelta: 1001}), 1},
		"far past (no overflow)":        {keyedBatch(-1<<62, testRecord{key: k}), 0},
		"too new, compressed":           {func() []byte { p := keyedBatch(now, testRecord{key: k, tsDelta: 5000}); return gzipBatch(p, p[61:]) }(), 0},
		"first ok, max timestamp wrong": {keyedBatch(now, testRecord{key: k}, testRecord{key: k, tsDelta: -5000}), 1},
	} {
		_, err := m.Append(tp0, c.b, 1)
		var rve *RecordValidationError
		if !errors.Is(err, ErrInvalidTimestamp) || !errors.As(err, &rve) || len(rve.Records) != 1 || rve.Records[0].BatchIndex != c.index ||
			!strings.Contains(rve.Records[0].Message, "is out of range") {
			t.Errorf("%s: %v (%+v), want ErrInvalidTimestamp at record %d", name, err, rve, c.index)
		}
	}

	// message.timestamp.after.max.ms set: it bounds the future, the
	// difference still bounds the past.
	cfg.MessageTimestampAfterMaxMs = 10
	if err := m.ApplyPartitionStates([]PartitionState{leaderState(1, 0, []int32{1}, []int32{1}, cfg)}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Append(tp0, keyedBatch(now+11, testRecord{key: k}), 1); !errors.Is(err, ErrInvalidTimestamp) {
		t.Errorf("after.max.ms: %v", err)
	}
	if _, err := m.Append(tp0, keyedBatch(now-900, testRecord{key: k}), 1); err != nil {
		t.Errorf("before falls back to the difference: %v", err)
	}

	// LogAppendTime topics stamp the records: the producer's timestamps
	// are not checked, as Kafka checks them only for CreateTime.
	cfg.MessageTimestampType = "LogAppendTime"
	if err := m.ApplyPartitionStates([]PartitionState{leaderState(1, 0, []int32{1}, []int32{1}, cfg)}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Append(tp0, keyedBatch(0, testRecord{key: k}), 1); err != nil {
		t.Errorf("LogAppendTime topic: %v", err)
	}
}

// TestRetentionOnlyWithDeletePolicy: time and size retention apply only
// when cleanup.policy includes delete, as Kafka's
// UnifiedLog.deleteOldSegments (a compact-only log keeps every segment
// for the cleaner), and follow a policy change at runtime.
func TestRetentionOnlyWithDeletePolicy(t *testing.T) {
	clock := &fakeClock{t: time.Unix(100000, 0)}
	m := newTestManager(t, 1, "", clock)
	cfg := cluster.DefaultLogConfig()
	cfg.SegmentBytes, cfg.RetentionMs, cfg.RetentionBytes = 200, 1, 100
	cfg.Compact, cfg.Delete, cfg.CleanupPolicy = true, false, "compact"
	if err := m.ApplyPartitionStates([]PartitionState{leaderState(1, 0, []int32{1}, []int32{1}, cfg)}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 6; i++ {
		mustAppend(t, m, keyedBatch(1000, testRecord{key: []byte("k")}, testRecord{key: []byte("k")}), 1)
	}
	r, err := m.get(tp0)
	if err != nil {
		t.Fatal(err)
	}
	retain := func() int {
		hw, _, _ := r.snapshot()
		n, err := r.log.DeleteOldSegmentsBelow(clock.Now().UnixMilli(), hw)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := retain(); n != 0 {
		t.Fatalf("compact-only log lost %d segments to retention", n)
	}
	cfg.Delete, cfg.CleanupPolicy = true, "compact,delete"
	if err := m.ApplyPartitionStates([]PartitionState{leaderState(1, 0, []int32{1}, []int32{1}, cfg)}); err != nil {
		t.Fatal(err)
	}
	if n := retain(); n == 0 {
		t.Fatal("compact,delete: retention deleted nothing")
	}
}
