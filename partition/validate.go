package partition

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/kafkazk/broker/logstore"
)

// ErrInvalidTimestamp: a produced batch claims the LogAppendTime timestamp
// type, which only the broker may set.
var ErrInvalidTimestamp = errors.New("partition: invalid timestamp")

// ErrUnsupportedCompressionType: a batch names a compression codec Kafka
// does not define (only none, gzip, snappy, lz4 and zstd exist).
var ErrUnsupportedCompressionType = errors.New("partition: unsupported compression type")

// maxCompressionCodec is zstd, the highest codec id Kafka defines.
const maxCompressionCodec = 4

// validateProduced checks what the CRC cannot: the compression codec, and
// for an uncompressed batch the framing of every record inside it, as
// Kafka's LogValidator does when it walks the records. A batch whose
// records do not parse is refused with ErrInvalidRecord, or with
// ErrCorruptMessage when its CRC is wrong too (a damaged batch, not a
// malformed one). The walk reads varints in place and allocates nothing.
// Compressed batches are stored as sent: their records are not inflated
// here.
func validateProduced(raw []byte, h logstore.BatchHeader) error {
	if h.TimestampType() == logstore.LogAppendTime {
		return fmt.Errorf("%w: a producer may not set the LogAppendTime attribute", ErrInvalidTimestamp)
	}
	if codec := h.Compression(); codec > maxCompressionCodec {
		return fmt.Errorf("%w: codec %d", ErrUnsupportedCompressionType, codec)
	}
	if h.Compression() != 0 {
		return nil
	}
	if err := walkRecords(raw[logstore.BatchHeaderSize:], h.NumRecords); err != nil {
		if _, crcErr := logstore.ValidateBatch(raw); crcErr != nil {
			return mapLogError(crcErr)
		}
		return fmt.Errorf("%w: %v", ErrInvalidRecord, err)
	}
	return nil
}

// walkRecords checks that b holds exactly n v2 records with offset deltas
// 0..n-1 and consistent lengths.
func walkRecords(b []byte, n int32) error {
	for i := int32(0); i < n; i++ {
		length, k := binary.Varint(b)
		if k <= 0 || length < 0 || length > int64(len(b)-k) {
			return fmt.Errorf("record %d: bad length", i)
		}
		if err := walkRecordBody(b[k:k+int(length)], i); err != nil {
			return err
		}
		b = b[k+int(length):]
	}
	if len(b) != 0 {
		return fmt.Errorf("%d bytes after the last of %d records", len(b), n)
	}
	return nil
}

// walkRecordBody checks one record's fields: attributes, timestamp delta,
// offset delta (must be i), key, value and headers, filling body exactly.
func walkRecordBody(body []byte, i int32) error {
	if len(body) < 1 {
		return fmt.Errorf("record %d: empty", i)
	}
	p := 1 // attributes
	varint := func() (int64, bool) {
		v, k := binary.Varint(body[p:])
		if k <= 0 {
			return 0, false
		}
		p += k
		return v, true
	}
	bytesField := func(nullable bool) bool {
		l, ok := varint()
		if !ok || l < -1 || (l == -1 && !nullable) || l > int64(len(body)-p) {
			return false
		}
		if l > 0 {
			p += int(l)
		}
		return true
	}
	if _, ok := varint(); !ok { // timestamp delta
		return fmt.Errorf("record %d: bad timestamp delta", i)
	}
	if d, ok := varint(); !ok || d != int64(i) {
		return fmt.Errorf("record %d: offset delta %d", i, d)
	}
	if !bytesField(true) {
		return fmt.Errorf("record %d: bad key", i)
	}
	if !bytesField(true) {
		return fmt.Errorf("record %d: bad value", i)
	}
	headers, ok := varint()
	if !ok || headers < 0 || headers > int64(len(body)-p) {
		return fmt.Errorf("record %d: bad header count", i)
	}
	for j := int64(0); j < headers; j++ {
		if !bytesField(false) || !bytesField(true) {
			return fmt.Errorf("record %d: bad header %d", i, j)
		}
	}
	if p != len(body) {
		return fmt.Errorf("record %d: %d bytes left after its fields", i, len(body)-p)
	}
	return nil
}
