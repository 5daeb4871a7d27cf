package partition

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/kafkazk/broker/internal/recordcodec"
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

// inflateFactor bounds how far a compressed batch may inflate: its records
// may take at most this many times max.message.bytes once inflated. Real
// producers compress batches of at most about max.message.bytes; a
// compression bomb is refused once it passes the bound.
const inflateFactor = 16

// validateProduced checks what the CRC cannot: the timestamp type, the
// compression codec, and the framing of every record inside the batch, as
// Kafka's LogValidator does when it walks the records. A compressed batch
// is inflated as a stream through a bounded reader and walked the same
// way, so it costs bounded memory whatever it claims, and is refused past
// maxInflated bytes with ErrMessageTooLarge (a compression bomb, or
// records too large to accept). A batch whose records do not parse is refused with
// ErrInvalidRecord, or with ErrCorruptMessage when its CRC is wrong too (a
// damaged batch, not a malformed one). The batch is stored as sent either
// way. The uncompressed walk reads varints in place and allocates nothing.
func validateProduced(raw []byte, h logstore.BatchHeader, maxInflated int64) error {
	if h.TimestampType() == logstore.LogAppendTime {
		return fmt.Errorf("%w: a producer may not set the LogAppendTime attribute", ErrInvalidTimestamp)
	}
	if codec := h.Compression(); codec > maxCompressionCodec {
		return fmt.Errorf("%w: codec %d", ErrUnsupportedCompressionType, codec)
	}
	var err error
	if h.Compression() != 0 {
		err = walkCompressed(raw[logstore.BatchHeaderSize:], h, maxInflated)
	} else {
		err = walkRecords(raw[logstore.BatchHeaderSize:], h.NumRecords)
	}
	if err != nil {
		if _, crcErr := logstore.ValidateBatch(raw); crcErr != nil {
			return mapLogError(crcErr)
		}
		if errors.Is(err, recordcodec.ErrTooLarge) {
			return fmt.Errorf("%w: compressed batch of %d bytes inflates past %d bytes (%d times max.message.bytes): %v",
				ErrMessageTooLarge, h.Size(), maxInflated, inflateFactor, err)
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

// walkCompressed inflates a compressed records section as a stream and
// walks its records.
func walkCompressed(data []byte, h logstore.BatchHeader, maxInflated int64) error {
	zr, err := recordcodec.NewReader(h.Compression(), data, maxInflated)
	if err != nil {
		return err
	}
	defer zr.Close()
	s := &recordStream{br: bufio.NewReaderSize(zr, 32<<10)}
	for i := int32(0); i < h.NumRecords; i++ {
		length, err := binary.ReadVarint(s.br)
		if err != nil || length < 0 {
			return fmt.Errorf("record %d: bad length: %w", i, orBad(err))
		}
		s.left = length
		if err := s.body(i); err != nil {
			return err
		}
	}
	if _, err := s.br.ReadByte(); err != io.EOF {
		return fmt.Errorf("data after the last of %d records: %w", h.NumRecords, orBad(err))
	}
	return nil
}

func orBad(err error) error {
	if err == nil {
		return errors.New("malformed")
	}
	return err
}

// recordStream reads one record's fields from an inflating stream, never
// past the record's length (left).
type recordStream struct {
	br   *bufio.Reader
	left int64
}

func (s *recordStream) ReadByte() (byte, error) {
	if s.left <= 0 {
		return 0, errors.New("field runs past its record")
	}
	c, err := s.br.ReadByte()
	if err == nil {
		s.left--
	}
	return c, err
}

func (s *recordStream) varint() (int64, error) { return binary.ReadVarint(s) }

func (s *recordStream) skip(n int64) error {
	if n > s.left {
		return errors.New("field runs past its record")
	}
	d, err := s.br.Discard(int(n))
	s.left -= int64(d)
	return err
}

func (s *recordStream) bytesField(nullable bool) error {
	l, err := s.varint()
	if err != nil || l < -1 || (l == -1 && !nullable) {
		return orBad(err)
	}
	if l > 0 {
		return s.skip(l)
	}
	return nil
}

// body checks one record's fields as walkRecordBody does, from the stream.
func (s *recordStream) body(i int32) error {
	if _, err := s.ReadByte(); err != nil { // attributes
		return fmt.Errorf("record %d: %w", i, err)
	}
	if _, err := s.varint(); err != nil { // timestamp delta
		return fmt.Errorf("record %d: bad timestamp delta: %w", i, err)
	}
	if d, err := s.varint(); err != nil || d != int64(i) {
		return fmt.Errorf("record %d: offset delta %d: %w", i, d, orBad(err))
	}
	if err := s.bytesField(true); err != nil {
		return fmt.Errorf("record %d: bad key: %w", i, err)
	}
	if err := s.bytesField(true); err != nil {
		return fmt.Errorf("record %d: bad value: %w", i, err)
	}
	headers, err := s.varint()
	if err != nil || headers < 0 || headers > s.left {
		return fmt.Errorf("record %d: bad header count: %w", i, orBad(err))
	}
	for j := int64(0); j < headers; j++ {
		if err := s.bytesField(false); err != nil {
			return fmt.Errorf("record %d: bad header %d key: %w", i, j, err)
		}
		if err := s.bytesField(true); err != nil {
			return fmt.Errorf("record %d: bad header %d value: %w", i, j, err)
		}
	}
	if s.left != 0 {
		return fmt.Errorf("record %d: %d bytes left after its fields", i, s.left)
	}
	return nil
}
