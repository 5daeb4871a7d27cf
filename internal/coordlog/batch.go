package coordlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/internal/recordcodec"
)

// Batch attribute bits (Kafka's RecordBatch): the low three bits are the
// codec.
const (
	AttrCodecMask     int16 = 0x07
	AttrTransactional int16 = 0x10
	AttrControl       int16 = 0x20
)

// CodecNone is Kafka's codec id 0: no compression.
const CodecNone int8 = 0

// InflatedBatchMaxBytes bounds what one compressed batch of an internal
// topic may inflate to when loading: the default segment.bytes of both
// internal topics, far above what one coordinator write holds.
const InflatedBatchMaxBytes = 100 << 20

// ErrCorrupt wraps every error of Walk: a batch that does not decode,
// inflate or (with Strict) pass its CRC. Callers wrap it in their own
// malformed-record sentinel.
var ErrCorrupt = errors.New("coordlog: malformed record batch")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Record is one key/value record; a nil Value is a tombstone.
type Record struct {
	Key, Value []byte
}

// Producer is the producer a transactional batch is written for.
type Producer struct {
	ID    int64
	Epoch int16
}

// EncodeBatch encodes records as one v2 record batch compressed with codec
// (Kafka's codec ids), with base offset 0, leader epoch -1, base sequence
// -1 and every timestamp nowMs, length and CRC32C filled in: the form
// partition.Manager.Append accepts. With a producer the batch carries its
// id and epoch and the transactional attribute bit (a coordinator write,
// not sequence checked); without one, producer id and epoch -1. Only
// compression can fail.
func EncodeBatch(records []Record, nowMs int64, codec int8, producer *Producer) ([]byte, error) {
	recs := make([]recordcodec.Record, len(records))
	for i, r := range records {
		// A coordinator record always has a key: length 0, never null.
		key := r.Key
		if key == nil {
			key = []byte{}
		}
		recs[i] = recordcodec.Record{Key: key, Value: r.Value}
	}
	b := recordcodec.NewBatch(nowMs, recs...)
	b.Attributes = int16(codec)
	if producer != nil {
		b.Attributes |= AttrTransactional
		b.ProducerID, b.ProducerEpoch = producer.ID, producer.Epoch
	}
	return recordcodec.AppendBatch(nil, b)
}

// Header is what a reader of an internal topic needs of a batch besides
// its records.
type Header struct {
	ProducerID    int64
	Transactional bool // attribute bit 0x10: a transactional write
	Control       bool // attribute bit 0x20: a transaction marker
}

// WalkOptions chooses how strictly Walk reads.
type WalkOptions struct {
	// Strict checks every batch's CRC32C and takes a length field below
	// the 49 bytes of a v2 batch header as corruption (not a batch at
	// all) instead of a partial tail.
	Strict bool
	// SkipControl skips control batches without decoding their records.
	SkipControl bool
}

// Walk calls fn for every record of the whole v2 batches in b, compressed
// or not, with its batch's header, and returns the offset after the last
// batch (-1 if b holds none). A batch cut off at the end of b ends the walk
// without an error. On an error (wrapping ErrCorrupt) it returns the offset
// after the last batch walked whole, so a caller re-reads the failing
// batch rather than skip its records; fn may have seen some records of the
// failing batch, which applying again in order leaves unchanged.
func Walk(b []byte, opts WalkOptions, fn func(h Header, offset int64, key, value []byte)) (int64, error) {
	next := int64(-1)
	for len(b) >= 12 {
		size := int(int32(binary.BigEndian.Uint32(b[8:12])))
		if size < 49 && opts.Strict {
			// Shorter than a v2 batch header: not a batch at all, so
			// corrupt, not a partial tail (whose length field is whole).
			return next, fmt.Errorf("%w: batch length %d after offset %d", ErrCorrupt, size, next)
		}
		if size < 49 || len(b) < 12+size {
			break // a partial batch at the end of a read
		}
		raw := b[:12+size]
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(raw); err != nil {
			return next, fmt.Errorf("%w: batch: %v", ErrCorrupt, err)
		}
		b = b[12+size:]
		if rb.Magic != 2 {
			return next, fmt.Errorf("%w: magic %d", ErrCorrupt, rb.Magic)
		}
		if opts.Strict && crc32.Checksum(raw[21:], castagnoli) != uint32(rb.CRC) {
			return next, fmt.Errorf("%w: batch at %d fails its CRC", ErrCorrupt, rb.FirstOffset)
		}
		end := rb.FirstOffset + int64(rb.LastOffsetDelta) + 1
		h := Header{ProducerID: rb.ProducerID, Transactional: rb.Attributes&AttrTransactional != 0,
			Control: rb.Attributes&AttrControl != 0}
		if h.Control && opts.SkipControl {
			next = end
			continue
		}
		recs := rb.Records
		if codec := int8(rb.Attributes & AttrCodecMask); codec != CodecNone {
			inflated, err := inflate(codec, recs)
			if err != nil {
				return next, fmt.Errorf("%w: batch at %d: %v", ErrCorrupt, rb.FirstOffset, err)
			}
			recs = inflated
		}
		for i := int32(0); i < rb.NumRecords; i++ {
			l, n := binary.Varint(recs)
			if n <= 0 || l < 0 || int64(len(recs)-n) < l {
				return next, fmt.Errorf("%w: record length at batch %d", ErrCorrupt, rb.FirstOffset)
			}
			var r kmsg.Record
			if err := r.ReadFrom(recs[:n+int(l)]); err != nil {
				return next, fmt.Errorf("%w: record: %v", ErrCorrupt, err)
			}
			recs = recs[n+int(l):]
			fn(h, rb.FirstOffset+int64(r.OffsetDelta), r.Key, r.Value)
		}
		next = end
	}
	return next, nil
}

// inflate returns the records of a batch compressed with codec.
func inflate(codec int8, data []byte) ([]byte, error) {
	r, err := recordcodec.NewReader(codec, data, InflatedBatchMaxBytes)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}
