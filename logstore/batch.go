package logstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// BatchHeaderSize is the size of a v2 record batch header; the records follow it.
const BatchHeaderSize = 61

// Byte offsets of the v2 record batch header fields (all big endian).
const (
	offBaseOffset      = 0
	offBatchLength     = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offFirstTimestamp  = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offNumRecords      = 57

	// batchLengthOverhead is what batchLength does not count: the base
	// offset and the length field itself.
	batchLengthOverhead = 12
)

// Attribute bits of a v2 batch.
const (
	attrCompressionMask = 0x07
	attrTimestampType   = 0x08
	attrTransactional   = 0x10
	attrControl         = 0x20
)

// TimestampType says what a batch's timestamps mean.
type TimestampType int8

const (
	// CreateTime timestamps were set by the producer.
	CreateTime TimestampType = 0
	// LogAppendTime timestamps were set by the leader broker on append.
	LogAppendTime TimestampType = 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// BatchHeader is the 61-byte header of a v2 record batch, parsed.
type BatchHeader struct {
	BaseOffset           int64
	BatchLength          int32 // bytes after the BatchLength field
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32 // CRC32C of everything from Attributes to the end of the batch
	Attributes           int16
	LastOffsetDelta      int32
	FirstTimestamp       int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	NumRecords           int32
}

// LastOffset is the offset of the batch's last record (inclusive).
func (h BatchHeader) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// NextOffset is the offset after the batch's last record.
func (h BatchHeader) NextOffset() int64 { return h.LastOffset() + 1 }

// Size is the batch's total size in bytes, header included.
func (h BatchHeader) Size() int { return batchLengthOverhead + int(h.BatchLength) }

// IsControl reports whether the batch holds transaction markers.
func (h BatchHeader) IsControl() bool { return h.Attributes&attrControl != 0 }

// IsTransactional reports whether the batch belongs to a transaction.
func (h BatchHeader) IsTransactional() bool { return h.Attributes&attrTransactional != 0 }

// TimestampType says whether MaxTimestamp was set by the producer or the broker.
func (h BatchHeader) TimestampType() TimestampType {
	if h.Attributes&attrTimestampType != 0 {
		return LogAppendTime
	}
	return CreateTime
}

// Compression is the codec id in the low attribute bits (0 none, 1 gzip,
// 2 snappy, 3 lz4, 4 zstd). Logstore never decompresses.
func (h BatchHeader) Compression() int8 { return int8(h.Attributes & attrCompressionMask) }

// parseHeader decodes the header fields of b, which must hold at least
// BatchHeaderSize bytes. It checks nothing.
func parseHeader(b []byte) BatchHeader {
	_ = b[BatchHeaderSize-1]
	return BatchHeader{
		BaseOffset:           int64(binary.BigEndian.Uint64(b[offBaseOffset:])),
		BatchLength:          int32(binary.BigEndian.Uint32(b[offBatchLength:])),
		PartitionLeaderEpoch: int32(binary.BigEndian.Uint32(b[offLeaderEpoch:])),
		Magic:                int8(b[offMagic]),
		CRC:                  binary.BigEndian.Uint32(b[offCRC:]),
		Attributes:           int16(binary.BigEndian.Uint16(b[offAttributes:])),
		LastOffsetDelta:      int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:])),
		FirstTimestamp:       int64(binary.BigEndian.Uint64(b[offFirstTimestamp:])),
		MaxTimestamp:         int64(binary.BigEndian.Uint64(b[offMaxTimestamp:])),
		ProducerID:           int64(binary.BigEndian.Uint64(b[offProducerID:])),
		ProducerEpoch:        int16(binary.BigEndian.Uint16(b[offProducerEpoch:])),
		BaseSequence:         int32(binary.BigEndian.Uint32(b[offBaseSequence:])),
		NumRecords:           int32(binary.BigEndian.Uint32(b[offNumRecords:])),
	}
}

// ParseBatchHeader decodes the v2 batch header at the start of b and checks
// its framing: at least BatchHeaderSize bytes (else ErrCorrupt), magic 2
// (else ErrInvalidRecord; older message formats are not supported) and a
// batch length that covers at least the header (else ErrCorrupt). The batch
// itself may extend past the end of b; ValidateBatch checks the whole batch.
func ParseBatchHeader(b []byte) (BatchHeader, error) {
	// Magic sits at byte 16 in every message format, so an old-format
	// message is reported as such even when it is shorter than a v2 header.
	if len(b) > offMagic && b[offMagic] != 2 {
		return BatchHeader{}, fmt.Errorf("%w: magic %d, only v2 batches are supported", ErrInvalidRecord, int8(b[offMagic]))
	}
	if len(b) < BatchHeaderSize {
		return BatchHeader{}, fmt.Errorf("%w: %d bytes, shorter than a batch header", ErrCorrupt, len(b))
	}
	h := parseHeader(b)
	if h.BatchLength < BatchHeaderSize-batchLengthOverhead {
		return BatchHeader{}, fmt.Errorf("%w: batch length %d shorter than a batch header", ErrCorrupt, h.BatchLength)
	}
	return h, nil
}

// ValidateBatch checks the one batch at the start of b: framing (the whole
// batch within b), magic 2, CRC32C over attributes to the end of the batch,
// and a record count that equals LastOffsetDelta+1 and is positive. Framing
// and CRC failures are ErrCorrupt, the rest ErrInvalidRecord. Bytes in b
// after the batch are ignored.
func ValidateBatch(b []byte) (BatchHeader, error) {
	h, err := ParseBatchHeader(b)
	if err != nil {
		return h, err
	}
	return h, checkBatch(b, &h)
}

// checkBatch is what ValidateBatch checks after ParseBatchHeader: that the
// batch whose header h was parsed from b lies within b, its CRC32C, and
// its record count. The appends call it with the header BatchIter parsed,
// so that no batch header is decoded twice.
func checkBatch(b []byte, h *BatchHeader) error { return checkBatchCount(b, h, true) }

// checkBatchCount is checkBatch; with strict false the record count may be
// anything from 0 to LastOffsetDelta+1, as in batches the log cleaner
// rewrote (kept records keep their offsets; a producer's last batch may be
// kept empty), which followers replicate and recovery re-reads.
func checkBatchCount(b []byte, h *BatchHeader, strict bool) error {
	if h.Size() > len(b) {
		return fmt.Errorf("%w: batch of %d bytes truncated to %d", ErrCorrupt, h.Size(), len(b))
	}
	if crc := crc32.Checksum(b[offAttributes:h.Size()], castagnoli); crc != h.CRC {
		return fmt.Errorf("%w: batch at offset %d has CRC %#08x, computed %#08x", ErrCorrupt, h.BaseOffset, h.CRC, crc)
	}
	if !cleanedCountOK(h, strict) {
		return fmt.Errorf("%w: batch at offset %d has %d records and last offset delta %d",
			ErrInvalidRecord, h.BaseOffset, h.NumRecords, h.LastOffsetDelta)
	}
	return nil
}

// countBatches counts the batches in b by their length fields alone,
// stopping at the first that does not fit, so that validate can size its
// result before it decodes any header. When BatchIter walks b without an
// error, the count is the number of batches it yields.
func countBatches(b []byte) int {
	n := 0
	for pos := 0; len(b)-pos >= BatchHeaderSize; n++ {
		length := int64(int32(binary.BigEndian.Uint32(b[pos+offBatchLength:])))
		if length < BatchHeaderSize-batchLengthOverhead || length > int64(len(b)-pos-batchLengthOverhead) {
			break
		}
		pos += batchLengthOverhead + int(length)
	}
	return n
}

// errBatchPastEnd is what parseStoredHeader returns for a batch that does
// not end within the bytes left. It is static so that AppendRead can stop
// before a batch cut by maxBytes without allocating.
var errBatchPastEnd = errors.New("batch runs past the end")

// errNegativeDelta is what parseStoredHeader returns for a batch whose last
// offset is below its base offset.
var errNegativeDelta = errors.New("negative last offset delta")

// parseStoredHeader decodes into h the header at the start of b, which
// was read from a segment with left bytes from there to the end of the
// segment (or of what the caller read), and checks the framing the batch
// had when it was stored: ParseBatchHeader's checks, a last offset delta
// that is not negative, and a batch that ends within left (else
// errBatchPastEnd). Its errors do not wrap ErrCorrupt: the caller knows
// the segment and the position, and whether the bytes are damaged or
// merely cut. It fills *h rather than returning a header, which would be
// copied once more on every header a read scans.
func parseStoredHeader(h *BatchHeader, b []byte, left int64) error {
	var err error
	if *h, err = ParseBatchHeader(b); err != nil {
		return err
	}
	if h.LastOffsetDelta < 0 {
		return errNegativeDelta
	}
	if int64(h.Size()) > left {
		return errBatchPastEnd
	}
	return nil
}

// BatchIter walks the batches in a byte slice without allocating. It checks
// framing only (ParseBatchHeader and that each batch fits in the slice); use
// ValidateBatch on Batch() for the CRC. Use it as
//
//	it := NewBatchIter(b)
//	for it.Next() {
//		h, raw := it.Header(), it.Batch()
//	}
//	if err := it.Err(); err != nil { ... }
type BatchIter struct {
	buf []byte
	pos int // start of the next batch
	cur int // start of the current batch
	hdr BatchHeader
	err error
}

// NewBatchIter returns an iterator over the batches in b.
func NewBatchIter(b []byte) BatchIter { return BatchIter{buf: b} }

// Next advances to the next batch. It returns false at the end of the slice
// or at the first framing error, which Err then reports.
func (it *BatchIter) Next() bool {
	if it.err != nil || it.pos >= len(it.buf) {
		return false
	}
	rest := it.buf[it.pos:]
	h, err := ParseBatchHeader(rest)
	if err == nil && h.Size() > len(rest) {
		err = fmt.Errorf("%w: batch of %d bytes truncated to %d", ErrCorrupt, h.Size(), len(rest))
	}
	if err != nil {
		it.err = fmt.Errorf("batch at byte %d: %w", it.pos, err)
		return false
	}
	it.hdr = h
	it.cur = it.pos
	it.pos += h.Size()
	return true
}

// Header is the current batch's header.
func (it *BatchIter) Header() BatchHeader { return it.hdr }

// Batch is the current batch's bytes, aliasing the iterated slice.
func (it *BatchIter) Batch() []byte { return it.buf[it.cur:it.pos] }

// Position is the current batch's byte position in the iterated slice.
func (it *BatchIter) Position() int { return it.cur }

// Err is the framing error that stopped the iteration, or nil.
func (it *BatchIter) Err() error { return it.err }

// setBaseOffset and setLeaderEpoch rewrite fields the CRC does not cover.
func setBaseOffset(b []byte, off int64) { binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(off)) }

func setLeaderEpoch(b []byte, leaderEpoch int32) {
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(leaderEpoch))
}

// setLogAppendTime marks the batch's timestamps as broker-set with the given
// max timestamp and recomputes the CRC, which covers both fields. It
// returns the new CRC.
func setLogAppendTime(b []byte, size int, ts int64) uint32 {
	attrs := binary.BigEndian.Uint16(b[offAttributes:])
	binary.BigEndian.PutUint16(b[offAttributes:], attrs|attrTimestampType)
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(ts))
	crc := crc32.Checksum(b[offAttributes:size], castagnoli)
	binary.BigEndian.PutUint32(b[offCRC:], crc)
	return crc
}

// stampAsLeader rewrites the batches in records, whose headers are
// batches, as a leader appends them: base offsets from next on, partition
// leader epoch leaderEpoch and, if logAppendTimeMs >= 0, LogAppendTime. It
// updates each header to what parsing the rewritten bytes would give, so
// that the append need not parse them again.
func stampAsLeader(records []byte, batches []BatchHeader, next int64, leaderEpoch int32, logAppendTimeMs int64) {
	pos := 0
	for i := range batches {
		h := &batches[i]
		raw := records[pos : pos+h.Size()]
		pos += h.Size()
		setBaseOffset(raw, next)
		h.BaseOffset = next
		setLeaderEpoch(raw, leaderEpoch)
		h.PartitionLeaderEpoch = leaderEpoch
		if logAppendTimeMs >= 0 {
			h.CRC = setLogAppendTime(raw, len(raw), logAppendTimeMs)
			h.Attributes |= attrTimestampType
			h.MaxTimestamp = logAppendTimeMs
		}
		next = h.NextOffset()
	}
}

// cleanedCountOK checks a batch's record count against its offsets:
// exactly LastOffsetDelta+1 and positive when strict (a producer's batch),
// else at most that (a batch the cleaner rewrote).
func cleanedCountOK(h *BatchHeader, strict bool) bool {
	if strict {
		return h.NumRecords > 0 && int64(h.NumRecords) == int64(h.LastOffsetDelta)+1
	}
	return h.NumRecords >= 0 && int64(h.NumRecords) <= int64(h.LastOffsetDelta)+1
}
