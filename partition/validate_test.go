package partition

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kafkazk/broker/cluster"
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
	if err := validateProduced(good, header(t, good), 1<<20, recordRules{}); err != nil {
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
			if err := validateProduced(b, header(t, b), 1<<20, recordRules{}); !errors.Is(err, c.want) {
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
		if err := validateProduced(batch, h, 1<<20, recordRules{}); err != nil {
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
		err = validateProduced(b, h, 1<<20, recordRules{})
		if err != nil && !errors.Is(err, ErrInvalidRecord) && !errors.Is(err, ErrCorruptMessage) && !errors.Is(err, ErrMessageTooLarge) &&
			!errors.Is(err, ErrUnsupportedCompressionType) && !errors.Is(err, ErrInvalidTimestamp) {
			t.Fatalf("unexpected error class: %v", err)
		}
	})
}

// gzipBatch compresses the records of b with gzip, as a producer would,
// and fixes up the batch length, codec bits and CRC.
func gzipBatch(b []byte, records []byte) []byte {
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, _ = zw.Write(records)
	_ = zw.Close()
	out := append(append([]byte(nil), b[:61]...), z.Bytes()...)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	out[22] = out[22]&^0x07 | 1
	return recrc(out)
}

// TestValidateCompressed: a gzip batch is inflated and its records walked;
// a malformed one inside is refused, and a bomb is refused once it passes
// the bound, having used bounded memory.
func TestValidateCompressed(t *testing.T) {
	plain := buildBatch(batchSpec{records: 50, valueSize: 100})
	good := gzipBatch(plain, plain[61:])
	if err := validateProduced(good, header(t, good), 1<<20, recordRules{}); err != nil {
		t.Fatalf("valid gzip batch refused: %v", err)
	}
	bad := append([]byte(nil), plain[61:]...)
	bad[0] = 0x7e // first record's length runs past the data
	if b := gzipBatch(plain, bad); !errors.Is(validateProduced(b, header(t, b), 1<<20, recordRules{}), ErrInvalidRecord) {
		t.Fatal("a malformed record inside a gzip batch must be refused")
	}
	zeros := gzipBatch(plain, make([]byte, 64<<20)) // 64 MiB of zeros, ~64 KiB compressed
	if err := validateProduced(zeros, header(t, zeros), 8<<20, recordRules{}); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("zeros where records belong: %v, want ErrInvalidRecord", err)
	}
	huge := buildBatch(batchSpec{records: 1, valueSize: 1 << 20})
	bomb := gzipBatch(huge, huge[61:]) // one valid record of 1 MiB
	if err := validateProduced(bomb, header(t, bomb), 256<<10, recordRules{}); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("a gzip bomb past the bound: %v, want ErrMessageTooLarge", err)
	}
}

// TestProduceTooLarge: a compressed batch larger than max.message.bytes is
// refused for its size, before its records are inflated (Kafka checks the
// batch size first), and a batch within the limit whose records inflate
// past the compression-bomb bound is refused as too large too, with the
// sizes in the message: both MESSAGE_TOO_LARGE, not INVALID_RECORD.
func TestProduceTooLarge(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	m := newTestManager(t, 1, "", clock)
	cfg := cluster.DefaultLogConfig()
	cfg.MaxMessageBytes = 4096
	if err := m.ApplyPartitionStates([]PartitionState{leaderState(1, 0, []int32{1}, []int32{1}, cfg)}); err != nil {
		t.Fatal(err)
	}
	bound := inflateFactor * cfg.MaxMessageBytes

	plain := buildBatch(batchSpec{records: 3000, valueSize: 100})
	big := gzipBatch(plain, plain[61:])
	if len(big) <= int(cfg.MaxMessageBytes) || int64(len(plain)-61) <= bound {
		t.Fatalf("test batch: %d bytes compressed, %d inflated; want > %d and > %d", len(big), len(plain)-61, cfg.MaxMessageBytes, bound)
	}
	_, err := m.Append(tp0, big, 1)
	if !errors.Is(err, ErrMessageTooLarge) {
		t.Errorf("compressed batch of %d bytes > max.message.bytes %d: %v, want ErrMessageTooLarge", len(big), cfg.MaxMessageBytes, err)
	}

	// Size first: an oversized batch whose records are malformed is too
	// large, not an invalid record.
	bad := append([]byte(nil), plain[61:]...)
	bad[0] = 0x7e // first record's length runs past the data
	bigBad := gzipBatch(plain, bad)
	if len(bigBad) <= int(cfg.MaxMessageBytes) {
		t.Fatalf("malformed test batch of %d bytes compressed, want > %d", len(bigBad), cfg.MaxMessageBytes)
	}
	if _, err := m.Append(tp0, bigBad, 1); !errors.Is(err, ErrMessageTooLarge) {
		t.Errorf("malformed compressed batch of %d bytes > max.message.bytes %d: %v, want ErrMessageTooLarge", len(bigBad), cfg.MaxMessageBytes, err)
	}

	huge := buildBatch(batchSpec{records: 1, valueSize: 1 << 20}) // one valid record of 1 MiB
	bomb := gzipBatch(huge, huge[61:])
	if len(bomb) > int(cfg.MaxMessageBytes) {
		t.Fatalf("bomb of %d bytes, want at most %d", len(bomb), cfg.MaxMessageBytes)
	}
	_, err = m.Append(tp0, bomb, 1)
	if !errors.Is(err, ErrMessageTooLarge) {
		t.Errorf("bomb of %d bytes inflating past %d: %v, want ErrMessageTooLarge", len(bomb), bound, err)
	} else if msg := err.Error(); !strings.Contains(msg, strconv.Itoa(len(bomb))) || !strings.Contains(msg, strconv.FormatInt(bound, 10)) {
		t.Errorf("bomb refused with %q, want its size %d and the bound %d in it", msg, len(bomb), bound)
	}
	if off, _, _, _ := m.ListOffset(tp0, LatestTimestamp, -1, AskerConsumer); off != 0 {
		t.Fatalf("nothing may be written, latest = %d", off)
	}
}
