package group

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/internal/coordlog"
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

// Batch attribute bits (Kafka's RecordBatch), as coordlog reads them.
const (
	attrTransactional = coordlog.AttrTransactional
	attrControl       = coordlog.AttrControl
)

// Control record types (Kafka's ControlRecordType, EndTransactionMarker):
// the key of a control record is version int16 (0), type int16.
const (
	controlAbort  int16 = 0
	controlCommit int16 = 1
)

// codecNone is Kafka's codec id 0: no compression.
const codecNone = coordlog.CodecNone

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
	return coordlog.EncodeBatch(coordRecords(records), now.UnixMilli(), codec, nil)
}

// encodeTxnBatch is encodeBatch for a transactional offset commit
// (Kafka's generateOffsetRecords with a producer id): the batch carries
// the producer's id and epoch, base sequence -1 (a coordinator write is
// not sequence checked) and the transactional attribute bit.
func encodeTxnBatch(records []kv, now time.Time, codec int8, producerID int64, producerEpoch int16) ([]byte, error) {
	return coordlog.EncodeBatch(coordRecords(records), now.UnixMilli(), codec,
		&coordlog.Producer{ID: producerID, Epoch: producerEpoch})
}

func coordRecords(records []kv) []coordlog.Record {
	out := make([]coordlog.Record, len(records))
	for i, r := range records {
		out[i] = coordlog.Record{Key: r.key, Value: r.value}
	}
	return out
}

// walkOptions is how the offsets topic is read: control batches too (the
// loader applies their markers), each batch's CRC32C checked, and a length
// field below a batch header taken as corruption, not as a partial tail:
// either fails the load (which retries) rather than marking the partition
// loaded without the groups at and after the batch.
var walkOptions = coordlog.WalkOptions{Strict: true}

// parseBatches calls fn for every record of the whole v2 batches in b,
// compressed or not, skipping control batches, and returns the offset
// after the last batch (-1 if b holds none); errors wrap errBadRecord.
// See coordlog.Walk.
func parseBatches(b []byte, fn func(offset int64, key, value []byte)) (int64, error) {
	next, err := coordlog.Walk(b, coordlog.WalkOptions{SkipControl: true}, func(_ coordlog.Header, offset int64, key, value []byte) {
		fn(offset, key, value)
	})
	return next, badBatch(err)
}

// badBatch wraps an error of coordlog.Walk in errBadRecord.
func badBatch(err error) error {
	if err != nil {
		return fmt.Errorf("%w: %w", errBadRecord, err)
	}
	return nil
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
