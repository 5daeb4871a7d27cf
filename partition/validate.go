package partition

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/kafkazk/broker/cluster"
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
//
// rules are the topic's per-record checks (a key on a compacted topic, the
// timestamp bounds of a CreateTime topic), applied to every record as
// Kafka's LogValidator.validateRecord does; records that break them refuse
// the batch with a *RecordValidationError naming them.
func validateProduced(raw []byte, h logstore.BatchHeader, maxInflated int64, rules recordRules) error {
	if h.TimestampType() == logstore.LogAppendTime {
		return fmt.Errorf("%w: a producer may not set the LogAppendTime attribute", ErrInvalidTimestamp)
	}
	if codec := h.Compression(); codec > maxCompressionCodec {
		return fmt.Errorf("%w: codec %d", ErrUnsupportedCompressionType, codec)
	}
	var rc *recordChecker
	if rules.active() {
		rc = &recordChecker{rules: rules, h: h}
	}
	var err error
	if h.Compression() != 0 {
		err = walkCompressed(raw[logstore.BatchHeaderSize:], h, maxInflated, rc)
	} else {
		err = walkRecords(raw[logstore.BatchHeaderSize:], h.NumRecords, rc)
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
	if rc != nil && len(rc.errs) > 0 {
		e := &RecordValidationError{Err: ErrInvalidRecord, Records: rc.errs}
		if rc.badTimestamp {
			e.Err = ErrInvalidTimestamp
		}
		return e
	}
	return nil
}

// recordRules are the per-record checks of a topic's config, fixed when a
// produce is validated.
type recordRules struct {
	tp         cluster.TopicPartition
	requireKey bool // cleanup.policy includes compact
	// checkTimestamps bounds CreateTime records to [nowMs-beforeMaxMs,
	// nowMs+afterMaxMs].
	checkTimestamps         bool
	nowMs                   int64
	beforeMaxMs, afterMaxMs int64
}

// rulesFor is the checks of cfg at now for partition tp.
func rulesFor(cfg cluster.LogConfig, tp cluster.TopicPartition, now time.Time) recordRules {
	r := recordRules{tp: tp, requireKey: cfg.Compact}
	if cfg.MessageTimestampType == "CreateTime" {
		r.beforeMaxMs, r.afterMaxMs = cfg.TimestampBeforeMaxMs(), cfg.TimestampAfterMaxMs()
		r.checkTimestamps = r.beforeMaxMs != math.MaxInt64 || r.afterMaxMs != math.MaxInt64
		r.nowMs = now.UnixMilli()
	}
	return r
}

func (r recordRules) active() bool { return r.requireKey || r.checkTimestamps }

// recordChecker applies recordRules to each record of one batch as it is
// walked, collecting the errors (Kafka validates every record and reports
// them all).
type recordChecker struct {
	rules        recordRules
	h            logstore.BatchHeader
	errs         []RecordError
	badTimestamp bool
}

// noTimestamp is RecordBatch.NO_TIMESTAMP: a record without a timestamp,
// which Kafka does not bound.
const noTimestamp = -1

// record checks record i, whose key is null or not and whose timestamp
// and offset deltas are given: first the key, then the timestamp, one
// error per record, as LogValidator.validateRecord.
func (c *recordChecker) record(i int32, keyNull bool, tsDelta, offsetDelta int64) {
	r := &c.rules
	if r.requireKey && keyNull {
		c.errs = append(c.errs, RecordError{BatchIndex: i,
			Message: fmt.Sprintf("Compacted topic cannot accept message without key in topic partition %s.", r.tp)})
		return
	}
	if !r.checkTimestamps {
		return
	}
	ts := c.h.FirstTimestamp + tsDelta
	if ts == noTimestamp || !outOfRange(ts, r.nowMs, r.beforeMaxMs, r.afterMaxMs) {
		return
	}
	c.badTimestamp = true
	c.errs = append(c.errs, RecordError{BatchIndex: i,
		Message: fmt.Sprintf("Timestamp %d of message with offset %d is out of range. The timestamp should be within [%d, %d]",
			ts, c.h.BaseOffset+offsetDelta, satAdd(r.nowMs, -r.beforeMaxMs), satAdd(r.nowMs, r.afterMaxMs))})
}

// outOfRange reports whether ts is more than before ms before now or
// more than after ms after it, without overflowing for any ts.
func outOfRange(ts, now, before, after int64) bool {
	if ts <= now {
		return uint64(now)-uint64(ts) > uint64(before)
	}
	return uint64(ts)-uint64(now) > uint64(after)
}

// satAdd is a+b clamped to the int64 range.
func satAdd(a, b int64) int64 {
	s := a + b
	if b > 0 && s < a {
		return math.MaxInt64
	}
	if b < 0 && s > a {
		return math.MinInt64
	}
	return s
}

// walkRecords checks that b holds exactly n v2 records with offset deltas
// 0..n-1 and consistent lengths, handing each to rc unless it is nil.
func walkRecords(b []byte, n int32, rc *recordChecker) error {
	for i := int32(0); i < n; i++ {
		length, k := binary.Varint(b)
		if k <= 0 || length < 0 || length > int64(len(b)-k) {
			return fmt.Errorf("record %d: bad length", i)
		}
		keyNull, tsDelta, err := walkRecordBody(b[k:k+int(length)], i)
		if err != nil {
			return err
		}
		if rc != nil {
			rc.record(i, keyNull, tsDelta, int64(i))
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
// It returns whether the key is null and the timestamp delta.
func walkRecordBody(body []byte, i int32) (keyNull bool, tsDelta int64, err error) {
	if len(body) < 1 {
		return false, 0, fmt.Errorf("record %d: empty", i)
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
	tsDelta, ok := varint()
	if !ok {
		return false, 0, fmt.Errorf("record %d: bad timestamp delta", i)
	}
	if d, ok := varint(); !ok || d != int64(i) {
		return false, 0, fmt.Errorf("record %d: offset delta %d", i, d)
	}
	if kl, _ := binary.Varint(body[p:]); kl == -1 {
		keyNull = true
	}
	if !bytesField(true) {
		return false, 0, fmt.Errorf("record %d: bad key", i)
	}
	if !bytesField(true) {
		return false, 0, fmt.Errorf("record %d: bad value", i)
	}
	headers, ok := varint()
	if !ok || headers < 0 || headers > int64(len(body)-p) {
		return false, 0, fmt.Errorf("record %d: bad header count", i)
	}
	for j := int64(0); j < headers; j++ {
		if !bytesField(false) || !bytesField(true) {
			return false, 0, fmt.Errorf("record %d: bad header %d", i, j)
		}
	}
	if p != len(body) {
		return false, 0, fmt.Errorf("record %d: %d bytes left after its fields", i, len(body)-p)
	}
	return keyNull, tsDelta, nil
}

// walkCompressed inflates a compressed records section as a stream and
// walks its records.
func walkCompressed(data []byte, h logstore.BatchHeader, maxInflated int64, rc *recordChecker) error {
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
		keyNull, tsDelta, err := s.body(i)
		if err != nil {
			return err
		}
		if rc != nil {
			rc.record(i, keyNull, tsDelta, int64(i))
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

// body checks one record's fields as walkRecordBody does, from the stream,
// and returns whether its key is null and its timestamp delta.
func (s *recordStream) body(i int32) (keyNull bool, tsDelta int64, err error) {
	if _, err := s.ReadByte(); err != nil { // attributes
		return false, 0, fmt.Errorf("record %d: %w", i, err)
	}
	if tsDelta, err = s.varint(); err != nil {
		return false, 0, fmt.Errorf("record %d: bad timestamp delta: %w", i, err)
	}
	if d, err := s.varint(); err != nil || d != int64(i) {
		return false, 0, fmt.Errorf("record %d: offset delta %d: %w", i, d, orBad(err))
	}
	kl, err := s.varint()
	if err != nil || kl < -1 {
		return false, 0, fmt.Errorf("record %d: bad key: %w", i, orBad(err))
	}
	if kl > 0 {
		if err := s.skip(kl); err != nil {
			return false, 0, fmt.Errorf("record %d: bad key: %w", i, err)
		}
	}
	if err := s.bytesField(true); err != nil {
		return false, 0, fmt.Errorf("record %d: bad value: %w", i, err)
	}
	headers, err := s.varint()
	if err != nil || headers < 0 || headers > s.left {
		return false, 0, fmt.Errorf("record %d: bad header count: %w", i, orBad(err))
	}
	for j := int64(0); j < headers; j++ {
		if err := s.bytesField(false); err != nil {
			return false, 0, fmt.Errorf("record %d: bad header %d key: %w", i, j, err)
		}
		if err := s.bytesField(true); err != nil {
			return false, 0, fmt.Errorf("record %d: bad header %d value: %w", i, j, err)
		}
	}
	if s.left != 0 {
		return false, 0, fmt.Errorf("record %d: %d bytes left after its fields", i, s.left)
	}
	return kl == -1, tsDelta, nil
}

// RecordError is one refused record of a produced batch, as Produce v8+
// reports it: its index in the batch and why.
type RecordError struct {
	BatchIndex int32
	Message    string
}

// RecordValidationError refuses a produced batch for some of its records,
// as Kafka's RecordValidationException: Err is ErrInvalidTimestamp when
// any record's timestamp is out of range, else ErrInvalidRecord; Records
// are the records at fault, in batch order.
type RecordValidationError struct {
	Err     error
	Records []RecordError
}

func (e *RecordValidationError) Error() string {
	if errors.Is(e.Err, ErrInvalidTimestamp) {
		return e.Err.Error() + ": One or more records have been rejected due to invalid timestamp"
	}
	shown := e.Records[:min(len(e.Records), 3)]
	parts := make([]string, len(shown))
	for i, r := range shown {
		parts[i] = fmt.Sprintf("RecordError(batchIndex=%d, message='%s')", r.BatchIndex, r.Message)
	}
	return fmt.Sprintf("%v: One or more records have been rejected due to %d record errors in total, and only showing the first three errors at most: [%s]",
		e.Err, len(e.Records), strings.Join(parts, ", "))
}

func (e *RecordValidationError) Unwrap() error { return e.Err }
