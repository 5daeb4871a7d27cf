package logstore

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Control records, Kafka's EndTransactionMarker: a control batch
// (attributes transactional|control) holds one record whose key is
// version int16 (0) and type int16 (0 ABORT, 1 COMMIT), and whose value
// is version int16 (0) and coordinator epoch int32.

// ControlType is the type in a control record's key.
type ControlType int16

// The transaction marker types (Kafka's ControlRecordType ABORT and
// COMMIT). Other types (KRaft's) exist in Kafka; logstore neither writes
// nor interprets them.
const (
	ControlAbort  ControlType = 0
	ControlCommit ControlType = 1
)

func (t ControlType) String() string {
	switch t {
	case ControlAbort:
		return "ABORT"
	case ControlCommit:
		return "COMMIT"
	}
	return fmt.Sprintf("ControlType(%d)", int16(t))
}

const (
	controlKeySize   = 4 // version int16, type int16
	controlValueSize = 6 // version int16, coordinator epoch int32
)

// BuildControlBatch is a v2 control batch of one marker record: base offset 0, attributes
// transactional|control (0x30), producer id/epoch set, base sequence -1, timestamps
// timestampMs, CRC32C. It is the one control-batch builder of the repo.
func BuildControlBatch(producerID int64, producerEpoch int16, coordinatorEpoch int32, typ ControlType, timestampMs int64) []byte {
	var rec []byte
	rec = append(rec, 0)              // attributes
	rec = binary.AppendVarint(rec, 0) // timestamp delta
	rec = binary.AppendVarint(rec, 0) // offset delta
	rec = binary.AppendVarint(rec, controlKeySize)
	rec = binary.BigEndian.AppendUint16(rec, 0) // key version
	rec = binary.BigEndian.AppendUint16(rec, uint16(typ))
	rec = binary.AppendVarint(rec, controlValueSize)
	rec = binary.BigEndian.AppendUint16(rec, 0) // value version
	rec = binary.BigEndian.AppendUint32(rec, uint32(coordinatorEpoch))
	rec = binary.AppendVarint(rec, 0) // no headers

	b := make([]byte, BatchHeaderSize, BatchHeaderSize+binary.MaxVarintLen32+len(rec))
	b = binary.AppendVarint(b, int64(len(rec)))
	b = append(b, rec...)
	be := binary.BigEndian
	be.PutUint32(b[offBatchLength:], uint32(len(b)-batchLengthOverhead))
	be.PutUint32(b[offLeaderEpoch:], 0xffffffff) // -1 until the leader stamps it
	b[offMagic] = 2
	be.PutUint16(b[offAttributes:], attrTransactional|attrControl)
	be.PutUint32(b[offLastOffsetDelta:], 0)
	be.PutUint64(b[offFirstTimestamp:], uint64(timestampMs))
	be.PutUint64(b[offMaxTimestamp:], uint64(timestampMs))
	be.PutUint64(b[offProducerID:], uint64(producerID))
	be.PutUint16(b[offProducerEpoch:], uint16(producerEpoch))
	be.PutUint32(b[offBaseSequence:], 0xffffffff) // -1
	be.PutUint32(b[offNumRecords:], 1)
	be.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return b
}

// ParseControlBatch returns the marker of one whole control batch (as stored or as replicated).
// The batch must be framed and CRC-correct (else ErrCorrupt), a control batch
// holding at least one record, uncompressed, whose first record is a
// transaction marker (else ErrInvalidRecord; later key and value versions
// are read as version 0, as Kafka reads them). Bytes after the
// batch are ignored. A batch the cleaner emptied has no marker: ErrInvalidRecord.
func ParseControlBatch(batch []byte) (typ ControlType, coordinatorEpoch int32, err error) {
	h, err := ParseBatchHeader(batch)
	if err != nil {
		return 0, 0, fmt.Errorf("parse control batch: %w", err)
	}
	if err := checkBatchCount(batch, &h, false); err != nil {
		return 0, 0, fmt.Errorf("parse control batch: %w", err)
	}
	if !h.IsControl() {
		return 0, 0, fmt.Errorf("parse control batch at offset %d: %w: not a control batch", h.BaseOffset, ErrInvalidRecord)
	}
	if h.Compression() != 0 {
		return 0, 0, fmt.Errorf("parse control batch at offset %d: %w: compressed (codec %d)", h.BaseOffset, ErrInvalidRecord, h.Compression())
	}
	key, value, ok := firstControlRecord(batch[BatchHeaderSize:h.Size()])
	if !ok {
		return 0, 0, fmt.Errorf("parse control batch at offset %d: %w: no control record", h.BaseOffset, ErrInvalidRecord)
	}
	typ, ok = markerType(key)
	if !ok {
		return 0, 0, fmt.Errorf("parse control batch at offset %d: %w: control key of %d bytes, version %d", h.BaseOffset, ErrInvalidRecord, len(key), keyVersion(key))
	}
	if typ != ControlAbort && typ != ControlCommit {
		return typ, 0, fmt.Errorf("parse control batch at offset %d: %w: control type %d is no transaction marker", h.BaseOffset, ErrInvalidRecord, int16(typ))
	}
	// As Kafka's EndTransactionMarker: a later value version is read as
	// version 0, whose fields it starts with; a negative one is damage.
	if len(value) < controlValueSize || int16(binary.BigEndian.Uint16(value)) < 0 {
		return typ, 0, fmt.Errorf("parse control batch at offset %d: %w: marker value of %d bytes, version %d", h.BaseOffset, ErrInvalidRecord, len(value), keyVersion(value))
	}
	return typ, int32(binary.BigEndian.Uint32(value[2:])), nil
}

// firstControlRecord returns the key and value of the first record of an
// uncompressed records section; ok is false when there is none, it does
// not frame or its key is null.
func firstControlRecord(section []byte) (key, value []byte, ok bool) {
	it := newRecordIter(section)
	if !it.next() || !it.rec.hasKey {
		return nil, nil, false
	}
	return it.rec.key, it.rec.value, true
}

// markerType decodes a control record key: its version and type. As
// Kafka's ControlRecordType.parseTypeId, a later version is read as
// version 0 (the type follows the version in every one); a negative one
// is not a key.
func markerType(key []byte) (ControlType, bool) {
	if len(key) < controlKeySize || int16(binary.BigEndian.Uint16(key)) < 0 {
		return 0, false
	}
	return ControlType(int16(binary.BigEndian.Uint16(key[2:]))), true
}

func keyVersion(key []byte) int16 {
	if len(key) < 2 {
		return -1
	}
	return int16(binary.BigEndian.Uint16(key))
}
