package txn

import (
	"bytes"
	"encoding/binary"
	"errors"
	"go/parser"
	"go/token"
	"hash/crc32"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
)

// kafkaValueV0 builds a TransactionLogValue version 0 as Kafka's schema
// (TransactionLogValue.json) lays it out, independently of kmsg: version
// int16, producer id int64, producer epoch int16, timeout int32, status
// int8, partitions (nullable array int32 count; per topic a string with
// int16 length and an int32 array), last update int64, start int64.
func kafkaValueV0(pid int64, epoch int16, timeoutMs int32, status int8, topics map[string][]int32, order []string, null bool, lastUpdate, start int64) []byte {
	var b []byte
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint64(b, uint64(pid))
	b = binary.BigEndian.AppendUint16(b, uint16(epoch))
	b = binary.BigEndian.AppendUint32(b, uint32(timeoutMs))
	b = append(b, byte(status))
	if null {
		b = binary.BigEndian.AppendUint32(b, math.MaxUint32) // -1
	} else {
		b = binary.BigEndian.AppendUint32(b, uint32(len(order)))
		for _, t := range order {
			b = binary.BigEndian.AppendUint16(b, uint16(len(t)))
			b = append(b, t...)
			b = binary.BigEndian.AppendUint32(b, uint32(len(topics[t])))
			for _, p := range topics[t] {
				b = binary.BigEndian.AppendUint32(b, uint32(p))
			}
		}
	}
	b = binary.BigEndian.AppendUint64(b, uint64(lastUpdate))
	b = binary.BigEndian.AppendUint64(b, uint64(start))
	return b
}

// kafkaKeyV0 is TransactionLogKey version 0: version int16, id string.
func kafkaKeyV0(id string) []byte {
	var b []byte
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(len(id)))
	return append(b, id...)
}

func TestRecordFormatMatchesKafkaSchema(t *testing.T) {
	ongoing := transit{
		producerID: 4242, producerEpoch: 7, timeoutMs: 60000, state: stateOngoing,
		partitions: sortTPs([]cluster.TopicPartition{tp("b", 1), tp("a", 2), tp("a", 0)}),
		startTs:    111, updateTs: 222,
	}
	got := txnValue(ongoing)
	want := kafkaValueV0(4242, 7, 60000, 1, map[string][]int32{"a": {0, 2}, "b": {1}}, []string{"a", "b"}, false, 222, 111)
	if !bytes.Equal(got, want) {
		t.Fatalf("Ongoing value\n got %x\nwant %x", got, want)
	}
	var v kmsg.TxnMetadataValue
	if err := v.ReadFrom(got); err != nil {
		t.Fatal(err)
	}
	if v.Version != 0 || v.ProducerID != 4242 || v.ProducerEpoch != 7 || v.TimeoutMillis != 60000 ||
		v.State != kmsg.TransactionState(1) || len(v.Topics) != 2 || v.LastUpdateTimestamp != 222 || v.StartTimestamp != 111 {
		t.Fatalf("kmsg decoded %+v", v)
	}

	// Empty: a null partition array, as TransactionLog.valueToBytes.
	empty := transit{producerID: 1, producerEpoch: 0, timeoutMs: 1000, state: stateEmpty, startTs: -1, updateTs: 5}
	if got, want := txnValue(empty), kafkaValueV0(1, 0, 1000, 0, nil, nil, true, 5, -1); !bytes.Equal(got, want) {
		t.Fatalf("Empty value\n got %x\nwant %x", got, want)
	}
	// CompleteCommit: an empty, not null, array.
	done := transit{producerID: 1, producerEpoch: 0, timeoutMs: 1000, state: stateCompleteCommit, startTs: 3, updateTs: 5}
	if got, want := txnValue(done), kafkaValueV0(1, 0, 1000, 4, nil, nil, false, 5, 3); !bytes.Equal(got, want) {
		t.Fatalf("CompleteCommit value\n got %x\nwant %x", got, want)
	}
	if got, want := txnKey("my-txn"), kafkaKeyV0("my-txn"); !bytes.Equal(got, want) {
		t.Fatalf("key\n got %x\nwant %x", got, want)
	}
	var k kmsg.TxnMetadataKey
	if err := k.ReadFrom(txnKey("my-txn")); err != nil || k.Version != 0 || k.TransactionalID != "my-txn" {
		t.Fatalf("kmsg key %+v %v", k, err)
	}
}

func TestDecodeKafkaBytes(t *testing.T) {
	val := kafkaValueV0(99, 3, 30000, 2, map[string][]int32{"out": {4, 1}, "__consumer_offsets": {17}},
		[]string{"out", "__consumer_offsets"}, false, 1234, 1200)
	d, err := decodeRecord(kafkaKeyV0("app-1"), val)
	if err != nil {
		t.Fatal(err)
	}
	m := d.meta
	if d.transactionalID != "app-1" || m.producerID != 99 || m.producerEpoch != 3 || m.timeoutMs != 30000 ||
		m.state != statePrepareCommit || m.startTs != 1200 || m.updateTs != 1234 || m.lastProducerEpoch != -1 {
		t.Fatalf("decoded %+v", m)
	}
	want := []cluster.TopicPartition{tp("__consumer_offsets", 17), tp("out", 1), tp("out", 4)}
	if got := m.sortedPartitions(); len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("partitions %v", got)
	}
	// A tombstone.
	if d, err := decodeRecord(kafkaKeyV0("app-1"), nil); err != nil || d.meta != nil {
		t.Fatalf("tombstone: %+v %v", d, err)
	}
	// Unknown key version: skipped by the loader, not fatal.
	if _, err := decodeRecord([]byte{0, 1, 0, 0}, val); err == nil {
		t.Fatal("key version 1 decoded")
	}
	// An Empty state's partitions are ignored even if present.
	d, err = decodeRecord(kafkaKeyV0("x"), kafkaValueV0(1, 0, 10, 0, map[string][]int32{"t": {0}}, []string{"t"}, false, 1, -1))
	if err != nil || len(d.meta.partitions) != 0 {
		t.Fatalf("empty with partitions: %+v %v", d.meta, err)
	}
	// A value version 1 (flexible, KIP-915) written by kmsg decodes too.
	v1 := kmsg.NewTxnMetadataValue()
	v1.Version, v1.ProducerID, v1.ProducerEpoch, v1.State, v1.TimeoutMillis = 1, 5, 2, 4, 100
	v1.PreviousProducerID = 4
	v1.Topics = []kmsg.TxnMetadataValueTopic{}
	d, err = decodeRecord(kafkaKeyV0("v1"), v1.AppendTo(nil))
	if err != nil || d.meta.producerID != 5 || d.meta.state != stateCompleteCommit || d.meta.prevProducerID != 4 {
		t.Fatalf("v1: %+v %v", d.meta, err)
	}
	// Garbage and out-of-range states are errors.
	if _, err := decodeRecord(kafkaKeyV0("x"), []byte{0, 0, 1}); err == nil {
		t.Fatal("short value decoded")
	}
	if _, err := decodeRecord(kafkaKeyV0("x"), kafkaValueV0(1, 0, 10, 9, nil, nil, true, 1, -1)); err == nil {
		t.Fatal("state 9 decoded")
	}
}

func TestBatchFormat(t *testing.T) {
	recs := []kv{{txnKey("a"), txnValue(transit{producerID: 1, state: stateEmpty, startTs: -1})}, {txnKey("b"), nil}}
	b := encodeBatch(recs, 777)
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(b); err != nil {
		t.Fatal(err)
	}
	if rb.Magic != 2 || rb.Attributes != 0 || rb.ProducerID != -1 || rb.ProducerEpoch != -1 || rb.FirstSequence != -1 ||
		rb.NumRecords != 2 || rb.LastOffsetDelta != 1 || rb.FirstTimestamp != 777 || int(rb.Length) != len(b)-12 {
		t.Fatalf("batch header %+v", rb)
	}
	if crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)) != uint32(rb.CRC) {
		t.Fatal("CRC32C wrong")
	}
	var got []kv
	next, err := parseBatches(b, func(_ int64, k, v []byte) { got = append(got, kv{k, v}) })
	if err != nil || next != 2 || len(got) != 2 || got[1].value != nil || !bytes.Equal(got[0].key, recs[0].key) {
		t.Fatalf("parse: next %d err %v got %v", next, err, got)
	}
	// A flipped bit fails the CRC check.
	b[len(b)-3] ^= 1
	if _, err := parseBatches(b, func(int64, []byte, []byte) {}); err == nil {
		t.Fatal("corrupt batch parsed")
	}
}

// TestParseBatchesPartialTailAndShortLength: a batch cut off by the end
// of a read (its length field whole, its bytes not) ends the parse without
// an error, at the last whole batch; a length field below the v2 header's
// 49 bytes is a malformed batch, returned as one with the offset after the
// last good batch, so the loader retries instead of taking the rest as a
// partial tail.
func TestParseBatchesPartialTailAndShortLength(t *testing.T) {
	one := encodeBatch([]kv{{txnKey("a"), nil}}, 1)
	second := encodeBatch([]kv{{txnKey("b"), nil}}, 1)
	binary.BigEndian.PutUint64(second[0:8], 1)
	whole := append(append([]byte(nil), one...), second...)
	for cut := len(one) + 1; cut < len(whole); cut++ {
		n := 0
		next, err := parseBatches(whole[:cut], func(int64, []byte, []byte) { n++ })
		if err != nil || next != 1 || n != 1 {
			t.Fatalf("cut at %d: next %d, %d records, err %v; want 1, 1, nil", cut, next, n, err)
		}
	}
	for _, length := range []int32{-1, 0, 12, 48} {
		b := append([]byte(nil), whole...)
		binary.BigEndian.PutUint32(b[len(one)+8:], uint32(length))
		next, err := parseBatches(b, func(int64, []byte, []byte) {})
		if !errors.Is(err, errBadRecord) || next != 1 {
			t.Fatalf("length %d: next %d err %v, want 1 and a malformed record", length, next, err)
		}
	}
}

// TestPartitionForMatchesGroup compares PartitionFor with
// group.PartitionFor's answers, computed once and written down here (txn
// does not import group, not even in tests).
func TestPartitionForMatchesGroup(t *testing.T) {
	ns := [3]int32{1, 3, 50}
	for _, c := range []struct {
		id   string
		want [3]int32 // group.PartitionFor(id, n) for each of ns
	}{
		{"", [3]int32{0, 0, 0}},
		{"a", [3]int32{0, 1, 47}},
		{"hello", [3]int32{0, 1, 22}},
		{"transactional-id-1", [3]int32{0, 2, 41}},
		{"ünïcødé", [3]int32{0, 2, 27}},
		{"😀-emoji", [3]int32{0, 2, 38}},
		{"polygenelubricants", [3]int32{0, 0, 0}},
		{"my-txn-producer", [3]int32{0, 1, 6}},
		{"__consumer_offsets", [3]int32{0, 0, 19}},
	} {
		for i, n := range ns {
			if got := PartitionFor(c.id, n); got != c.want[i] {
				t.Errorf("PartitionFor(%q, %d) = %d, group says %d", c.id, n, got, c.want[i])
			}
		}
	}
	// Java: "hello".hashCode() = 99162322; abs mod 50 = 22.
	if got := PartitionFor("hello", 50); got != 22 {
		t.Fatalf("hello: %d", got)
	}
	// "polygenelubricants".hashCode() is Integer.MIN_VALUE: Utils.abs maps it to 0.
	if got := PartitionFor("polygenelubricants", 50); got != 0 {
		t.Fatalf("MinInt32 hash: %d", got)
	}
}

// TestForbiddenImports checks the package arrows (STYLE.md, the
// contract): no file of txn, tests included, imports protocol, zkcoord,
// logstore, group or cmd; no file of internal/coordlog, which txn and
// group share, imports those or txn.
func TestForbiddenImports(t *testing.T) {
	const mod = "github.com/kafkazk/broker/"
	for _, c := range []struct {
		dir       string
		forbidden []string
	}{
		{".", []string{"protocol", "zkcoord", "logstore", "group", "cmd"}},
		{"../internal/coordlog", []string{"protocol", "zkcoord", "logstore", "group", "txn", "cmd"}},
	} {
		files, err := filepath.Glob(filepath.Join(c.dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no Go files in %s: %v", c.dir, err)
		}
		fset := token.NewFileSet()
		for _, name := range files {
			f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range f.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				for _, p := range c.forbidden {
					if path == mod+p || strings.HasPrefix(path, mod+p+"/") {
						t.Errorf("%s imports %s", name, path)
					}
				}
			}
		}
	}
}
