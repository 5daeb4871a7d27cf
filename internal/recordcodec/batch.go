package recordcodec

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Header is one record header.
type Header struct {
	Key   string
	Value []byte
}

// Record is one record of a Batch. A nil Key or Value is encoded as null
// (length -1); an empty non-nil one as length 0.
type Record struct {
	Key, Value     []byte
	Headers        []Header
	TimestampDelta int64
}

// Batch is a v2 record batch to encode with AppendBatch. Offset deltas are
// the records' indexes.
type Batch struct {
	BaseOffset           int64
	PartitionLeaderEpoch int32
	// Attributes are Kafka's: the low three bits are the codec, which
	// AppendBatch compresses the records with; 0x08 log-append time,
	// 0x10 transactional, 0x20 control.
	Attributes     int16
	FirstTimestamp int64
	// MaxTimestamp, when 0, is FirstTimestamp plus the largest
	// TimestampDelta.
	MaxTimestamp  int64
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
	Records       []Record
}

// NewBatch is a batch as a client without a producer id sends it: base
// offset 0, partition leader epoch, producer id, producer epoch and base
// sequence -1, every record at timestamp ts.
func NewBatch(ts int64, records ...Record) Batch {
	return Batch{PartitionLeaderEpoch: -1, FirstTimestamp: ts, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Records: records}
}

// Values are records with these values, no key and no headers.
func Values(values ...[]byte) []Record {
	out := make([]Record, len(values))
	for i, v := range values {
		out[i].Value = v
	}
	return out
}

// batchHeaderBytes is the v2 batch header up to and including the record
// count: what precedes the records.
const batchHeaderBytes = 61

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// AppendBatch appends b encoded as a v2 record batch to dst, with its
// length and CRC32C filled in and its records compressed with the codec of
// its attributes. Only compression can fail. It is the one batch encoder of
// the module: the coordinators' writes (internal/coordlog), the chaos raw
// writers and the tests' batches go through it; tests of hostile input
// that must hand-build wrong bytes do not.
func AppendBatch(dst []byte, b Batch) ([]byte, error) {
	var recs []byte
	maxDelta := int64(0)
	for i, r := range b.Records {
		recs = appendRecord(recs, int64(i), r)
		maxDelta = max(maxDelta, r.TimestampDelta)
	}
	if codec := int8(b.Attributes & 0x07); codec != 0 {
		var err error
		if recs, err = Compress(codec, nil, recs); err != nil {
			return nil, fmt.Errorf("compress %d records: %w", len(b.Records), err)
		}
	}
	maxTs := b.MaxTimestamp
	if maxTs == 0 {
		maxTs = b.FirstTimestamp + maxDelta
	}
	start := len(dst)
	dst = binary.BigEndian.AppendUint64(dst, uint64(b.BaseOffset))
	dst = binary.BigEndian.AppendUint32(dst, uint32(batchHeaderBytes-12+len(recs)))
	dst = binary.BigEndian.AppendUint32(dst, uint32(b.PartitionLeaderEpoch))
	dst = append(dst, 2)                        // magic
	dst = binary.BigEndian.AppendUint32(dst, 0) // CRC, below
	dst = binary.BigEndian.AppendUint16(dst, uint16(b.Attributes))
	dst = binary.BigEndian.AppendUint32(dst, uint32(int32(len(b.Records)-1)))
	dst = binary.BigEndian.AppendUint64(dst, uint64(b.FirstTimestamp))
	dst = binary.BigEndian.AppendUint64(dst, uint64(maxTs))
	dst = binary.BigEndian.AppendUint64(dst, uint64(b.ProducerID))
	dst = binary.BigEndian.AppendUint16(dst, uint16(b.ProducerEpoch))
	dst = binary.BigEndian.AppendUint32(dst, uint32(b.BaseSequence))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(b.Records)))
	dst = append(dst, recs...)
	binary.BigEndian.PutUint32(dst[start+17:start+21], crc32.Checksum(dst[start+21:], castagnoli))
	return dst, nil
}

// MustBatch is AppendBatch for an uncompressed batch, which cannot fail;
// it panics on a compressed one that does.
func MustBatch(b Batch) []byte {
	out, err := AppendBatch(nil, b)
	if err != nil {
		panic(err)
	}
	return out
}

func appendBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(b)))
	return append(dst, b...)
}

// appendRecord appends one length-prefixed v2 record.
func appendRecord(dst []byte, offsetDelta int64, r Record) []byte {
	body := make([]byte, 0, 16+len(r.Key)+len(r.Value))
	body = append(body, 0) // attributes
	body = binary.AppendVarint(body, r.TimestampDelta)
	body = binary.AppendVarint(body, offsetDelta)
	body = appendBytes(body, r.Key)
	body = appendBytes(body, r.Value)
	body = binary.AppendVarint(body, int64(len(r.Headers)))
	for _, h := range r.Headers {
		body = binary.AppendVarint(body, int64(len(h.Key)))
		body = append(body, h.Key...)
		body = appendBytes(body, h.Value)
	}
	dst = binary.AppendVarint(dst, int64(len(body)))
	return append(dst, body...)
}
