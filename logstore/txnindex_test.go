package logstore

import (
	"encoding/binary"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
)

// Tests of the transaction index, after Kafka's TransactionIndexTest: the
// file format, append order, collection over a fetch range, truncation,
// recovery and deletion with the segments.

// appendTxn appends n data batches of one record, a transactional
// producer's, then its marker, and returns the offsets of the first batch
// and of the marker.
func appendTxn(t testing.TB, l *Log, pid int64, n int, typ ControlType, ts int64) (first, marker int64) {
	t.Helper()
	first = -1
	for range n {
		b := makeBatch(batchSpec{records: 1, valueSize: 10, firstTs: ts, attributes: attrTransactional})
		binary.BigEndian.PutUint64(b[offProducerID:], uint64(pid))
		binary.BigEndian.PutUint16(b[offProducerEpoch:], 0)
		binary.BigEndian.PutUint32(b[offBaseSequence:], 0)
		binary.BigEndian.PutUint32(b[offCRC:], crc32Castagnoli(b[offAttributes:]))
		info := mustAppend(t, l, b)
		if first < 0 {
			first = info.FirstOffset
		}
	}
	info, err := l.AppendControlAsLeader(BuildControlBatch(pid, 0, 0, typ, ts), 0)
	if err != nil {
		t.Fatal(err)
	}
	return first, info.FirstOffset
}

func mustAbort(t testing.TB, l *Log, a AbortedTxn) {
	t.Helper()
	if err := l.AppendAbortedTxn(a); err != nil {
		t.Fatalf("AppendAbortedTxn(%+v): %v", a, err)
	}
}

func mustCollect(t testing.TB, l *Log, from, to int64) []AbortedTxn {
	t.Helper()
	got, err := l.CollectAbortedTxns(from, to)
	if err != nil {
		t.Fatalf("CollectAbortedTxns(%d, %d): %v", from, to, err)
	}
	return got
}

func TestAbortedTxnFormat(t *testing.T) {
	t.Parallel()
	a := AbortedTxn{ProducerID: 0x0102030405060708, FirstOffset: 9, LastOffset: 10, LastStableOffset: 11}
	b := encodeAbortedTxns([]AbortedTxn{a})
	want := []byte{0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0, 0, 0, 11}
	if !reflect.DeepEqual(b, want) {
		t.Fatalf("encoded %x, want %x", b, want)
	}
	got, v, ok := parseAbortedTxn(b)
	if !ok || v != 0 || got != a {
		t.Fatalf("parsed %+v v%d %v", got, v, ok)
	}
}

// txnLog is a log with a few segments of 10 offsets each (one-record
// batches of 78 bytes, 780-byte segments).
func txnLog(t testing.TB, dir string) (*Log, Config) {
	cfg := testConfig(t)
	cfg.SegmentBytes = 780
	return openLog(t, dir, cfg, 0), cfg
}

func fill(t testing.TB, l *Log, n int) {
	t.Helper()
	for range n {
		mustAppend(t, l, simpleBatch(1, 0))
	}
}

func TestAppendAndCollectAbortedTxns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, _ := txnLog(t, dir)
	fill(t, l, 40)
	// As TransactionIndexTest's collect test, here spread over segments.
	txns := []AbortedTxn{
		{ProducerID: 0, FirstOffset: 0, LastOffset: 10, LastStableOffset: 11},
		{ProducerID: 1, FirstOffset: 5, LastOffset: 15, LastStableOffset: 13},
		{ProducerID: 2, FirstOffset: 18, LastOffset: 35, LastStableOffset: 25},
		{ProducerID: 3, FirstOffset: 32, LastOffset: 39, LastStableOffset: 40},
	}
	for _, a := range txns {
		mustAbort(t, l, a)
	}
	for _, c := range []struct {
		from, to int64
		want     []AbortedTxn
	}{
		{0, 8, txns[:1]},    // LSO 11 >= 8 ends the search
		{0, 12, txns[:2]},   // LSO 13 >= 12 ends it
		{0, 14, txns[:2]},   // the third starts at 18; its LSO 25 ends it
		{0, 19, txns[:3]},   // now it overlaps
		{11, 14, txns[1:2]}, // from the segment holding 11
		{16, 30, txns[2:3]},
		{36, 41, txns[3:]},
		{40, 41, nil},
		{0, math.MaxInt64, txns},
	} {
		if got := mustCollect(t, l, c.from, c.to); !reflect.DeepEqual(got, c.want) {
			t.Errorf("collect [%d, %d) = %+v, want %+v", c.from, c.to, got, c.want)
		}
	}
	// Idempotent replay: entries at or below the last one are ignored.
	mustAbort(t, l, txns[1])
	mustAbort(t, l, AbortedTxn{ProducerID: 7, FirstOffset: 30, LastOffset: 39, LastStableOffset: 40})
	if got := mustCollect(t, l, 0, math.MaxInt64); !reflect.DeepEqual(got, txns) {
		t.Fatalf("after replay %+v", got)
	}
	// Each entry is in the .txnindex of the segment holding its marker,
	// in Kafka's bytes; segments without one have no file.
	for base, want := range map[int64][]AbortedTxn{0: nil, 10: txns[:2], 20: nil, 30: txns[2:]} {
		raw, err := os.ReadFile(segPath(dir, base, txnIndexSuffix))
		if want == nil {
			if !os.IsNotExist(err) {
				t.Errorf("segment %d has a .txnindex: %v", base, err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(raw, encodeAbortedTxns(want)) {
			t.Errorf("segment %d .txnindex %x, %v; want %x", base, raw, err, encodeAbortedTxns(want))
		}
	}
	// Reopening loads them.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, _ := txnLog(t, dir)
	if got := mustCollect(t, l2, 0, math.MaxInt64); !reflect.DeepEqual(got, txns) {
		t.Fatalf("after reopen %+v", got)
	}
}

func TestAppendAbortedTxnRejects(t *testing.T) {
	t.Parallel()
	l, _ := txnLog(t, t.TempDir())
	fill(t, l, 5)
	for _, a := range []AbortedTxn{
		{ProducerID: 1, FirstOffset: 0, LastOffset: 5, LastStableOffset: 0}, // marker not in the log
		{ProducerID: 1, FirstOffset: 3, LastOffset: 2, LastStableOffset: 0}, // first after last
	} {
		if err := l.AppendAbortedTxn(a); !errorsIs(err, ErrOffsetOutOfRange) {
			t.Errorf("AppendAbortedTxn(%+v) = %v", a, err)
		}
	}
	if got := mustCollect(t, l, 0, math.MaxInt64); got != nil {
		t.Fatalf("entries %+v", got)
	}
}

func TestTxnIndexEndToEnd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, _ := txnLog(t, dir)
	first, marker := appendTxn(t, l, 5, 3, ControlAbort, 0)
	mustAbort(t, l, AbortedTxn{ProducerID: 5, FirstOffset: first, LastOffset: marker, LastStableOffset: marker + 1})
	got := mustCollect(t, l, 0, l.LogEndOffset())
	if len(got) != 1 || got[0].FirstOffset != 0 || got[0].LastOffset != 3 {
		t.Fatalf("collected %+v", got)
	}
	if !strings.HasSuffix(segPath(dir, 0, txnIndexSuffix), "00000000000000000000.txnindex") {
		t.Fatal("file name")
	}
}
