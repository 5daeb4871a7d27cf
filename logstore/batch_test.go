package logstore

import (
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestValidateBatch(t *testing.T) {
	t.Parallel()
	good := simpleBatch(3, 1000)
	mutate := func(f func(b []byte) []byte) []byte {
		b := append([]byte(nil), good...)
		return f(b)
	}
	tests := []struct {
		name  string
		batch []byte
		want  error
	}{
		{"valid", good, nil},
		{"empty", nil, ErrCorrupt},
		{"shorter than header", good[:40], ErrCorrupt},
		{"truncated body", good[:len(good)-1], ErrCorrupt},
		{"magic 1", mutate(func(b []byte) []byte { b[offMagic] = 1; return b }), ErrInvalidRecord},
		{"magic 0 short message", mutate(func(b []byte) []byte { b[offMagic] = 0; return b[:30] }), ErrInvalidRecord},
		{"crc bit flipped", mutate(func(b []byte) []byte { b[offCRC] ^= 0x01; return b }), ErrCorrupt},
		{"payload bit flipped", mutate(func(b []byte) []byte { b[len(b)-3] ^= 0x80; return b }), ErrCorrupt},
		{"batch length below header", mutate(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[offBatchLength:], 10)
			return b
		}), ErrCorrupt},
		{"record count mismatch", makeBatchWith(func(b []byte) { binary.BigEndian.PutUint32(b[offNumRecords:], 2) }), ErrInvalidRecord},
		{"zero records", makeBatchWith(func(b []byte) {
			binary.BigEndian.PutUint32(b[offNumRecords:], 0)
			binary.BigEndian.PutUint32(b[offLastOffsetDelta:], 0xffffffff)
		}), ErrInvalidRecord},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ValidateBatch(tt.batch)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("ValidateBatch: %v", err)
				}
				return
			}
			wantErr(t, err, tt.want)
		})
	}
}

// makeBatchWith builds a 3-record batch, applies f to its header and
// recomputes the CRC, so that only the rule f breaks fails.
func makeBatchWith(f func(b []byte)) []byte {
	b := simpleBatch(3, 1000)
	f(b)
	setLogAppendTime(b, len(b), 1002) // recomputes the CRC
	return b
}

// TestBatchHeaderMatchesKmsg checks our header parser and CRC against
// franz-go's encoder, so the test helper is not the only witness.
func TestBatchHeaderMatchesKmsg(t *testing.T) {
	t.Parallel()
	rb := kmsg.RecordBatch{
		FirstOffset:          0,
		PartitionLeaderEpoch: 7,
		Magic:                2,
		Attributes:           0x10,
		LastOffsetDelta:      1,
		FirstTimestamp:       1234,
		MaxTimestamp:         1235,
		ProducerID:           42,
		ProducerEpoch:        3,
		FirstSequence:        9,
		NumRecords:           2,
		Records:              simpleBatch(2, 1234)[BatchHeaderSize:],
	}
	raw := rb.AppendTo(nil)
	// kmsg leaves Length and CRC to the caller.
	binary.BigEndian.PutUint32(raw[offBatchLength:], uint32(len(raw)-batchLengthOverhead))
	binary.BigEndian.PutUint32(raw[offCRC:], crc32Castagnoli(raw[offAttributes:]))
	h, err := ValidateBatch(raw)
	if err != nil {
		t.Fatalf("ValidateBatch(kmsg batch): %v", err)
	}
	want := BatchHeader{BaseOffset: 0, BatchLength: int32(len(raw) - 12), PartitionLeaderEpoch: 7, Magic: 2,
		CRC: h.CRC, Attributes: 0x10, LastOffsetDelta: 1, FirstTimestamp: 1234, MaxTimestamp: 1235,
		ProducerID: 42, ProducerEpoch: 3, BaseSequence: 9, NumRecords: 2}
	if h != want {
		t.Fatalf("header = %+v\nwant %+v", h, want)
	}
	if !h.IsTransactional() || h.IsControl() || h.TimestampType() != CreateTime || h.LastOffset() != 1 || h.Size() != len(raw) {
		t.Fatalf("helpers disagree with header %+v", h)
	}
	var back kmsg.RecordBatch
	if err := back.ReadFrom(raw); err != nil {
		t.Fatalf("kmsg cannot read back: %v", err)
	}
	if int32(back.CRC) != int32(h.CRC) {
		t.Fatalf("kmsg CRC %d, ours %d", back.CRC, h.CRC)
	}
}

func TestBatchIter(t *testing.T) { // not parallel: AllocsPerRun
	a, b := simpleBatch(1, 1), simpleBatch(2, 2)
	buf := append(append([]byte(nil), a...), b...)
	it := NewBatchIter(buf)
	var sizes []int
	for it.Next() {
		sizes = append(sizes, len(it.Batch()))
	}
	if it.Err() != nil || len(sizes) != 2 || sizes[0] != len(a) || sizes[1] != len(b) {
		t.Fatalf("sizes %v err %v", sizes, it.Err())
	}
	it = NewBatchIter(buf[:len(buf)-1])
	n := 0
	for it.Next() {
		n++
	}
	if n != 1 {
		t.Fatalf("iterated %d batches of a truncated buffer, want 1", n)
	}
	wantErr(t, it.Err(), ErrCorrupt)
	if allocs := testing.AllocsPerRun(100, func() {
		it := NewBatchIter(buf)
		for it.Next() {
		}
	}); allocs != 0 {
		t.Fatalf("BatchIter allocates %v per run", allocs)
	}
}

// TestCountBatches: the count that sizes an append's headers is what
// BatchIter yields, and it stops where the framing does.
func TestCountBatches(t *testing.T) {
	t.Parallel()
	a, b := simpleBatch(1, 1), simpleBatch(3, 2)
	ab := append(append([]byte(nil), a...), b...)
	badLength := append([]byte(nil), ab...)
	binary.BigEndian.PutUint32(badLength[len(a)+offBatchLength:], 3)
	tests := []struct {
		name    string
		records []byte
		want    int
	}{
		{"empty", nil, 0},
		{"one", a, 1},
		{"two", ab, 2},
		{"second truncated", ab[:len(ab)-1], 1},
		{"partial header after", append(append([]byte(nil), ab...), make([]byte, 10)...), 2},
		{"second length too short", badLength, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := countBatches(tt.records); got != tt.want {
				t.Fatalf("countBatches = %d, want %d", got, tt.want)
			}
			it, n := NewBatchIter(tt.records), 0
			for it.Next() {
				n++
			}
			if n != tt.want {
				t.Fatalf("BatchIter yields %d batches, want %d", n, tt.want)
			}
		})
	}
}
