package recordcodec

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// kmsgBatch is the same batch built with franz-go's kmsg types, the way
// the tests built batches before AppendBatch.
func kmsgBatch(b Batch) []byte {
	var recs []byte
	for i, r := range b.Records {
		kr := kmsg.Record{TimestampDelta64: r.TimestampDelta, OffsetDelta: int32(i), Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
		}
		kr.Length = int32(len(kr.AppendTo(nil)) - 1)
		recs = kr.AppendTo(recs)
	}
	rb := kmsg.RecordBatch{FirstOffset: b.BaseOffset, PartitionLeaderEpoch: b.PartitionLeaderEpoch, Magic: 2,
		Attributes: b.Attributes, LastOffsetDelta: int32(len(b.Records) - 1), FirstTimestamp: b.FirstTimestamp,
		MaxTimestamp: b.MaxTimestamp, ProducerID: b.ProducerID, ProducerEpoch: b.ProducerEpoch,
		FirstSequence: b.BaseSequence, NumRecords: int32(len(b.Records)), Records: recs}
	out := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:12], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:21], crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli)))
	return out
}

func TestAppendBatchMatchesKmsg(t *testing.T) {
	withProducer := NewBatch(1000, Record{Key: []byte("k"), Value: []byte("v"), Headers: []Header{{"h", []byte("x")}, {"n", nil}}},
		Record{Value: nil, TimestampDelta: 7}, Record{Key: []byte{}, Value: []byte{}})
	withProducer.ProducerID, withProducer.ProducerEpoch, withProducer.BaseSequence = 42, 3, 17
	withProducer.Attributes = 0x10
	withProducer.BaseOffset, withProducer.PartitionLeaderEpoch = 99, 5
	for name, b := range map[string]Batch{
		"values":        NewBatch(123, Values([]byte("a"), []byte("bb"))...),
		"producer":      withProducer,
		"one empty":     NewBatch(0, Values([]byte{})...),
		"explicit max":  {PartitionLeaderEpoch: -1, FirstTimestamp: 5, MaxTimestamp: 9, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Records: Values([]byte("z"))},
		"many and long": NewBatch(1, Values(bytes.Repeat([]byte("x"), 300), bytes.Repeat([]byte("y"), 70000))...),
	} {
		got := MustBatch(b)
		want := b
		if want.MaxTimestamp == 0 {
			for _, r := range b.Records {
				want.MaxTimestamp = max(want.MaxTimestamp, b.FirstTimestamp+r.TimestampDelta)
			}
		}
		if exp := kmsgBatch(want); !bytes.Equal(got, exp) {
			t.Errorf("%s: AppendBatch\n%x\nkmsg\n%x", name, got, exp)
		}
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(got); err != nil || int(rb.Length) != len(got)-12 || rb.NumRecords != int32(len(b.Records)) {
			t.Errorf("%s: kmsg reads %+v, %v", name, rb, err)
		}
	}
}

func TestAppendBatchAppendsAndCompresses(t *testing.T) {
	b := NewBatch(10, Values([]byte("one"), []byte("two"))...)
	plain := MustBatch(b)
	prefix := []byte("prefix")
	out, err := AppendBatch(append([]byte(nil), prefix...), b)
	if err != nil || !bytes.Equal(out[:len(prefix)], prefix) || !bytes.Equal(out[len(prefix):], plain) {
		t.Fatalf("AppendBatch after a prefix: %v %x", err, out)
	}
	b.Attributes = int16(Gzip)
	gz := MustBatch(b)
	if crc32.Checksum(gz[21:], castagnoli) != binary.BigEndian.Uint32(gz[17:21]) {
		t.Fatal("compressed batch CRC wrong")
	}
	inflated, err := Decompress(Gzip, nil, gz[batchHeaderBytes:], 1<<20)
	if err != nil || !bytes.Equal(inflated, plain[batchHeaderBytes:]) {
		t.Fatalf("gzip records inflate to %x (%v), want %x", inflated, err, plain[batchHeaderBytes:])
	}
	b.Attributes = 7
	if _, err := AppendBatch(nil, b); err == nil {
		t.Fatal("codec 7 accepted")
	}
}
