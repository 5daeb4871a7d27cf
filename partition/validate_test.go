package partition

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/kafkazk/broker/logstore"
)

// recrc recomputes a test batch's CRC after its bytes were edited, so the
// record walk, not the CRC, is what refuses it.
func recrc(b []byte) []byte {
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
	return b
}

func header(t *testing.T, b []byte) logstore.BatchHeader {
	t.Helper()
	h, err := logstore.ParseBatchHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestValidateProduced: malformed records inside a batch with a valid CRC,
// and unknown codecs, are refused; a damaged batch is corrupt, not invalid.
func TestValidateProduced(t *testing.T) {
	good := buildBatch(batchSpec{records: 3, valueSize: 8})
	if err := validateProduced(good, header(t, good)); err != nil {
		t.Fatalf("valid batch refused: %v", err)
	}
	cases := []struct {
		name string
		edit func(b []byte) []byte
		want error
	}{
		{"record length past the end", func(b []byte) []byte { b[61] = 0x7e; return recrc(b) }, ErrInvalidRecord},
		{"count above the records", func(b []byte) []byte { binary.BigEndian.PutUint32(b[57:], 4); return recrc(b) }, ErrInvalidRecord},
		{"count below the records", func(b []byte) []byte { binary.BigEndian.PutUint32(b[57:], 2); return recrc(b) }, ErrInvalidRecord},
		{"offset delta out of order", func(b []byte) []byte { b[61+3] = 0x04; return recrc(b) }, ErrInvalidRecord},
		{"header count too large", func(b []byte) []byte {
			// the last byte of the first record is its header count (0)
			l, k := binary.Varint(b[61:])
			b[61+k+int(l)-1] = 0x40
			return recrc(b)
		}, ErrInvalidRecord},
		{"LogAppendTime from a producer", func(b []byte) []byte { b[22] |= 0x08; return recrc(b) }, ErrInvalidTimestamp},
		{"unknown codec", func(b []byte) []byte { b[22] |= 0x07; return recrc(b) }, ErrUnsupportedCompressionType},
		{"damaged, crc wrong", func(b []byte) []byte { b[61] = 0x7e; return b }, ErrCorruptMessage},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := c.edit(buildBatch(batchSpec{records: 3, valueSize: 8}))
			if err := validateProduced(b, header(t, b)); !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
}

// BenchmarkValidateProduced: the record walk costs per record but allocates nothing.
func BenchmarkValidateProduced(b *testing.B) {
	batch := buildBatch(batchSpec{records: 100, valueSize: 100})
	h, _ := logstore.ParseBatchHeader(batch)
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	for b.Loop() {
		if err := validateProduced(batch, h); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzValidateProduced: any bytes framed as one batch are either accepted
// or refused with one of the produce-path sentinels; the validator never
// panics and never reads past the batch.
func FuzzValidateProduced(f *testing.F) {
	f.Add(buildBatch(batchSpec{records: 3, valueSize: 8}))
	f.Add(buildBatch(batchSpec{records: 1, producerID: 7, producerEpoch: 1}))
	f.Add(recrc(append(buildBatch(batchSpec{records: 2}), 0)))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := logstore.ParseBatchHeader(b)
		if err != nil || h.Size() != len(b) {
			return
		}
		err = validateProduced(b, h)
		if err != nil && !errors.Is(err, ErrInvalidRecord) && !errors.Is(err, ErrCorruptMessage) &&
			!errors.Is(err, ErrUnsupportedCompressionType) && !errors.Is(err, ErrInvalidTimestamp) {
			t.Fatalf("unexpected error class: %v", err)
		}
	})
}
