package group

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/internal/recordcodec"
)

// Record formats of __consumer_offsets, as Kafka 2.x writes them
// (GroupMetadataManager): keys start with an int16 version, 0 or 1 for an
// offset commit, 2 for group metadata.
const (
	offsetKeyVersion    int16 = 1
	groupKeyVersion     int16 = 2
	offsetValueVersion  int16 = 3 // with the committed leader epoch (KIP-320)
	offsetValueExpiring int16 = 1 // with an explicit expire timestamp (OffsetCommit v2-v4 retention)
	groupValueVersion   int16 = 3 // with group.instance.id (KIP-345)
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errBadRecord wraps any record of the offsets topic that does not parse.
var errBadRecord = errors.New("group: malformed __consumer_offsets record")

// kv is one record: a nil value is a tombstone.
type kv struct {
	key, value []byte
}

func offsetKey(group, topic string, partition int32) []byte {
	k := kmsg.OffsetCommitKey{Version: offsetKeyVersion, Group: group, Topic: topic, Partition: partition}
	return k.AppendTo(nil)
}

func offsetValue(o Offset) []byte {
	v := kmsg.NewOffsetCommitValue()
	v.Version = offsetValueVersion
	v.Offset, v.LeaderEpoch, v.Metadata, v.CommitTimestamp = o.Offset, o.LeaderEpoch, o.Metadata, o.CommitTimestamp
	if o.ExpireTimestamp >= 0 {
		v.Version = offsetValueExpiring
		v.ExpireTimestamp = o.ExpireTimestamp
	}
	return v.AppendTo(nil)
}

func groupKey(group string) []byte {
	k := kmsg.GroupMetadataKey{Version: groupKeyVersion, Group: group}
	return k.AppendTo(nil)
}

// groupValue encodes g's current generation. Caller holds the coordinator
// lock.
func groupValue(g *group, now time.Time) []byte {
	v := kmsg.NewGroupMetadataValue()
	v.Version = groupValueVersion
	v.ProtocolType = g.protocolType
	v.Generation = g.generation
	if g.protocol != "" {
		p := g.protocol
		v.Protocol = &p
	}
	if g.leader != "" {
		l := g.leader
		v.Leader = &l
	}
	v.CurrentStateTimestamp = now.UnixMilli()
	for _, id := range g.memberOrder() {
		m := g.members[id]
		vm := kmsg.NewGroupMetadataValueMember()
		vm.MemberID, vm.InstanceID, vm.ClientID, vm.ClientHost = m.id, m.instanceID, m.clientID, m.clientHost
		vm.RebalanceTimeoutMillis = int32(m.rebalanceTimeout / time.Millisecond)
		vm.SessionTimeoutMillis = int32(m.sessionTimeout / time.Millisecond)
		vm.Subscription = m.metadataFor(g.protocol)
		vm.Assignment = m.assignment
		if vm.Subscription == nil {
			vm.Subscription = []byte{}
		}
		if vm.Assignment == nil {
			vm.Assignment = []byte{}
		}
		v.Members = append(v.Members, vm)
	}
	return v.AppendTo(nil)
}

// Batch attribute bits (Kafka's RecordBatch): the low three bits are the
// codec.
const (
	attrTransactional int16 = 0x10
	attrControl       int16 = 0x20
)

// Control record types (Kafka's ControlRecordType, EndTransactionMarker):
// the key of a control record is version int16 (0), type int16.
const (
	controlAbort  int16 = 0
	controlCommit int16 = 1
)

// buildBatch is encodeBatch without compression, which cannot fail.
func buildBatch(records []kv, now time.Time) []byte {
	b, _ := encodeBatch(records, now, codecNone)
	return b
}

// encodeBatch encodes records as one v2 record batch compressed with codec
// (Kafka's codec ids, offsets.topic.compression.codec), with base offset
// 0, no producer id and timestamps of now, CRC32C filled in: the form
// partition.Manager.Append accepts from a producer.
func encodeBatch(records []kv, now time.Time, codec int8) ([]byte, error) {
	return encodeRecordBatch(records, now, codec, -1, -1, false)
}

// encodeTxnBatch is encodeBatch for a transactional offset commit
// (Kafka's generateOffsetRecords with a producer id): the batch carries
// the producer's id and epoch, base sequence -1 (a coordinator write is
// not sequence checked) and the transactional attribute bit.
func encodeTxnBatch(records []kv, now time.Time, codec int8, producerID int64, producerEpoch int16) ([]byte, error) {
	return encodeRecordBatch(records, now, codec, producerID, producerEpoch, true)
}

func encodeRecordBatch(records []kv, now time.Time, codec int8, producerID int64, producerEpoch int16, transactional bool) ([]byte, error) {
	ts := now.UnixMilli()
	var body []byte
	for i, r := range records {
		var rec []byte
		rec = append(rec, 0)                     // attributes
		rec = binary.AppendVarint(rec, 0)        // timestamp delta
		rec = binary.AppendVarint(rec, int64(i)) // offset delta
		rec = binary.AppendVarint(rec, int64(len(r.key)))
		rec = append(rec, r.key...)
		if r.value == nil {
			rec = binary.AppendVarint(rec, -1)
		} else {
			rec = binary.AppendVarint(rec, int64(len(r.value)))
			rec = append(rec, r.value...)
		}
		rec = binary.AppendVarint(rec, 0) // no headers
		body = binary.AppendVarint(body, int64(len(rec)))
		body = append(body, rec...)
	}
	if codec != codecNone {
		var err error
		if body, err = compress(codec, body); err != nil {
			return nil, fmt.Errorf("compress %d records: %w", len(records), err)
		}
	}
	attrs := int16(codec)
	if transactional {
		attrs |= attrTransactional
	}
	rb := kmsg.RecordBatch{
		FirstOffset:          0,
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           attrs,
		LastOffsetDelta:      int32(len(records) - 1),
		FirstTimestamp:       ts,
		MaxTimestamp:         ts,
		ProducerID:           producerID,
		ProducerEpoch:        producerEpoch,
		FirstSequence:        -1,
		NumRecords:           int32(len(records)),
		Records:              body,
	}
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[8:12], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:21], crc32.Checksum(b[21:], castagnoli))
	return b, nil
}

// inflatedBatchMaxBytes bounds what one compressed batch of the offsets
// topic may inflate to when loading: the default offsets.topic.segment.bytes,
// far above what one coordinator write holds.
const inflatedBatchMaxBytes = 100 << 20

// batchHeader is what loading needs of a batch besides its records.
type batchHeader struct {
	producerID    int64
	transactional bool // attribute bit 0x10: a transactional offset commit
	control       bool // attribute bit 0x20: a transaction marker
}

// parseBatches calls fn for every record of the whole v2 batches in b,
// compressed or not, skipping control batches, and returns the offset
// after the last batch (-1 if b holds none). On an error (a batch that does
// not decode or inflate) it returns the offset after the last batch parsed
// whole, so a caller re-reads the failing batch rather than skip its
// records; fn may have seen some records of the failing batch, which
// applying again in order leaves unchanged.
func parseBatches(b []byte, fn func(offset int64, key, value []byte)) (int64, error) {
	return walkBatches(b, func(h batchHeader, offset int64, key, value []byte) {
		if !h.control {
			fn(offset, key, value)
		}
	})
}

// walkBatches is parseBatches calling fn for the records of control
// batches too, with each record's batch header.
func walkBatches(b []byte, fn func(h batchHeader, offset int64, key, value []byte)) (int64, error) {
	next := int64(-1)
	for len(b) >= 12 {
		size := int(int32(binary.BigEndian.Uint32(b[8:12])))
		if size < 49 || len(b) < 12+size {
			break // a partial batch at the end of a read
		}
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b[:12+size]); err != nil {
			return next, fmt.Errorf("%w: batch: %v", errBadRecord, err)
		}
		b = b[12+size:]
		if rb.Magic != 2 {
			return next, fmt.Errorf("%w: magic %d", errBadRecord, rb.Magic)
		}
		end := rb.FirstOffset + int64(rb.LastOffsetDelta) + 1
		h := batchHeader{producerID: rb.ProducerID, transactional: rb.Attributes&attrTransactional != 0,
			control: rb.Attributes&attrControl != 0}
		recs := rb.Records
		if codec := int8(rb.Attributes & 0x07); codec != codecNone {
			inflated, err := inflate(codec, recs)
			if err != nil {
				return next, fmt.Errorf("%w: batch at %d: %v", errBadRecord, rb.FirstOffset, err)
			}
			recs = inflated
		}
		for i := int32(0); i < rb.NumRecords; i++ {
			l, n := binary.Varint(recs)
			if n <= 0 || l < 0 || int64(len(recs)-n) < l {
				return next, fmt.Errorf("%w: record length at batch %d", errBadRecord, rb.FirstOffset)
			}
			var r kmsg.Record
			if err := r.ReadFrom(recs[:n+int(l)]); err != nil {
				return next, fmt.Errorf("%w: record: %v", errBadRecord, err)
			}
			recs = recs[n+int(l):]
			fn(h, rb.FirstOffset+int64(r.OffsetDelta), r.Key, r.Value)
		}
		next = end
	}
	return next, nil
}

// controlType parses the key of a control record (Kafka's
// ControlRecordType.parse): version int16, type int16. A version above 0
// is read the same way, as Kafka does.
func controlType(key []byte) (int16, error) {
	if len(key) < 4 {
		return 0, fmt.Errorf("%w: control record key of %d bytes", errBadRecord, len(key))
	}
	return int16(binary.BigEndian.Uint16(key[2:4])), nil
}

// inflate returns the records of a batch compressed with codec.
func inflate(codec int8, data []byte) ([]byte, error) {
	r, err := recordcodec.NewReader(codec, data, inflatedBatchMaxBytes)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// Offset is one committed offset.
type Offset struct {
	Offset      int64
	LeaderEpoch int32 // -1 if unknown
	Metadata    string
	// CommitTimestamp is when the commit was written, in ms.
	CommitTimestamp int64
	// ExpireTimestamp is an explicit expiry (OffsetCommit v2-v4 with a
	// retention time) in ms, or -1.
	ExpireTimestamp int64
	// Err is set only in an answer of FetchOffsets with requireStable:
	// ErrUnstableOffsetCommit for a partition whose commit is not stable
	// yet (the other fields are then -1 and empty).
	Err error
}

// decodedRecord is one record of the offsets topic, decoded.
type decodedRecord struct {
	group string
	// offset commit (isOffset) or group metadata
	isOffset  bool
	topic     string
	partition int32
	offset    *Offset                  // nil: tombstone
	metadata  *kmsg.GroupMetadataValue // nil: tombstone
}

// decodeRecord decodes one key/value pair; a key version this package does
// not know is an error the loader logs and skips.
func decodeRecord(key, value []byte) (decodedRecord, error) {
	if len(key) < 2 {
		return decodedRecord{}, fmt.Errorf("%w: key of %d bytes", errBadRecord, len(key))
	}
	switch version := int16(binary.BigEndian.Uint16(key)); version {
	case 0, 1:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(key); err != nil {
			return decodedRecord{}, fmt.Errorf("%w: offset key: %v", errBadRecord, err)
		}
		d := decodedRecord{group: k.Group, isOffset: true, topic: k.Topic, partition: k.Partition}
		if value == nil {
			return d, nil
		}
		var v kmsg.OffsetCommitValue
		if err := v.ReadFrom(value); err != nil {
			return decodedRecord{}, fmt.Errorf("%w: offset value: %v", errBadRecord, err)
		}
		o := Offset{Offset: v.Offset, LeaderEpoch: -1, Metadata: v.Metadata, CommitTimestamp: v.CommitTimestamp, ExpireTimestamp: -1}
		if v.Version >= 3 {
			o.LeaderEpoch = v.LeaderEpoch
		}
		if v.Version == 1 {
			o.ExpireTimestamp = v.ExpireTimestamp
		}
		d.offset = &o
		return d, nil
	case 2:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(key); err != nil {
			return decodedRecord{}, fmt.Errorf("%w: group key: %v", errBadRecord, err)
		}
		d := decodedRecord{group: k.Group}
		if value == nil {
			return d, nil
		}
		var v kmsg.GroupMetadataValue
		if err := v.ReadFrom(value); err != nil {
			return decodedRecord{}, fmt.Errorf("%w: group value: %v", errBadRecord, err)
		}
		d.metadata = &v
		return d, nil
	default:
		return decodedRecord{}, fmt.Errorf("%w: unknown key version %d", errBadRecord, version)
	}
}
