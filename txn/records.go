package txn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/internal/recordcodec"
)

// Record formats of __transaction_state, as Kafka 3.x in ZooKeeper mode
// writes them (TransactionLog): key version 0 (the transactional id), value
// version 0 (producer id, producer epoch, timeout, state, partitions by
// topic, last update and start timestamps). Version 1 values (KIP-915,
// flexible) are read too.
const (
	keyVersion   int16 = 0
	valueVersion int16 = 0
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errBadRecord wraps any record of the transaction log that does not parse.
var errBadRecord = errors.New("txn: malformed __transaction_state record")

// kv is one record: a nil value is a tombstone.
type kv struct {
	key, value []byte
}

func txnKey(transactionalID string) []byte {
	k := kmsg.TxnMetadataKey{Version: keyVersion, TransactionalID: transactionalID}
	return k.AppendTo(nil)
}

// txnValue encodes a transition as Kafka's TransactionLog.valueToBytes:
// an Empty state has a null partition array, every other state an array
// (possibly empty) grouped by topic.
func txnValue(t transit) []byte {
	v := kmsg.NewTxnMetadataValue()
	v.Version = valueVersion
	v.ProducerID = t.producerID
	v.ProducerEpoch = t.producerEpoch
	v.TimeoutMillis = t.timeoutMs
	v.State = kmsg.TransactionState(t.state)
	v.LastUpdateTimestamp = t.updateTs
	v.StartTimestamp = t.startTs
	if t.state != stateEmpty {
		v.Topics = groupByTopic(t.partitions)
	}
	return v.AppendTo(nil)
}

// groupByTopic returns tps as kmsg's per-topic form, topics and partitions
// sorted; never nil.
func groupByTopic(tps []cluster.TopicPartition) []kmsg.TxnMetadataValueTopic {
	byTopic := make(map[string][]int32)
	for _, tp := range tps {
		byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partition)
	}
	topics := make([]string, 0, len(byTopic))
	for t := range byTopic {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	out := make([]kmsg.TxnMetadataValueTopic, 0, len(topics))
	for _, t := range topics {
		ps := byTopic[t]
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		vt := kmsg.NewTxnMetadataValueTopic()
		vt.Topic, vt.Partitions = t, ps
		out = append(out, vt)
	}
	return out
}

// decodedRecord is one record of the transaction log, decoded; meta nil is
// a tombstone.
type decodedRecord struct {
	transactionalID string
	meta            *txnMeta
}

// errUnknownKey marks a key version this package does not know: Kafka's
// loader logs and skips it (a leftover of an aborted upgrade).
var errUnknownKey = errors.New("txn: unknown __transaction_state key version")

// decodeRecord decodes one key/value pair of the transaction log as
// Kafka's TransactionLog.readTxnRecordKey/readTxnRecordValue.
func decodeRecord(key, value []byte) (decodedRecord, error) {
	if len(key) < 2 {
		return decodedRecord{}, fmt.Errorf("%w: key of %d bytes", errBadRecord, len(key))
	}
	if version := int16(binary.BigEndian.Uint16(key)); version != keyVersion {
		return decodedRecord{}, fmt.Errorf("%w %d", errUnknownKey, version)
	}
	var k kmsg.TxnMetadataKey
	if err := k.ReadFrom(key); err != nil {
		return decodedRecord{}, fmt.Errorf("%w: key: %v", errBadRecord, err)
	}
	d := decodedRecord{transactionalID: k.TransactionalID}
	if value == nil {
		return d, nil
	}
	if len(value) < 2 {
		return decodedRecord{}, fmt.Errorf("%w: value of %d bytes for %q", errBadRecord, len(value), k.TransactionalID)
	}
	if version := int16(binary.BigEndian.Uint16(value)); version < 0 || version > 1 {
		return decodedRecord{}, fmt.Errorf("%w: value version %d for %q", errBadRecord, version, k.TransactionalID)
	}
	var v kmsg.TxnMetadataValue
	if err := v.ReadFrom(value); err != nil {
		return decodedRecord{}, fmt.Errorf("%w: value for %q: %v", errBadRecord, k.TransactionalID, err)
	}
	st := txnState(v.State)
	if st < stateEmpty || st > statePrepareEpochFence {
		return decodedRecord{}, fmt.Errorf("%w: state %d for %q", errBadRecord, v.State, k.TransactionalID)
	}
	m := &txnMeta{
		id:                k.TransactionalID,
		producerID:        v.ProducerID,
		prevProducerID:    -1,
		producerEpoch:     v.ProducerEpoch,
		lastProducerEpoch: -1, // not in the log (as Kafka's loader)
		timeoutMs:         v.TimeoutMillis,
		state:             st,
		partitions:        make(map[cluster.TopicPartition]struct{}),
		startTs:           v.StartTimestamp,
		updateTs:          v.LastUpdateTimestamp,
	}
	if v.Version >= 1 {
		m.prevProducerID = v.PreviousProducerID
	}
	if st != stateEmpty {
		for _, t := range v.Topics {
			for _, p := range t.Partitions {
				m.partitions[cluster.TopicPartition{Topic: t.Topic, Partition: p}] = struct{}{}
			}
		}
	}
	d.meta = m
	return d, nil
}

// encodeBatch encodes records as one uncompressed v2 record batch (Kafka
// enforces no compression on the transaction log) with base offset 0, no
// producer id and timestamps of nowMs, CRC32C filled in: the form
// partition.Manager.Append accepts.
func encodeBatch(records []kv, nowMs int64) []byte {
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
	rb := kmsg.RecordBatch{
		FirstOffset:          0,
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           0,
		LastOffsetDelta:      int32(len(records) - 1),
		FirstTimestamp:       nowMs,
		MaxTimestamp:         nowMs,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           int32(len(records)),
		Records:              body,
	}
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[8:12], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:21], crc32.Checksum(b[21:], castagnoli))
	return b
}

// inflatedBatchMaxBytes bounds what one compressed batch may inflate to
// when loading (the default transaction.state.log.segment.bytes). Kafka
// never compresses this topic, but a reader should not choke on it.
const inflatedBatchMaxBytes = 100 << 20

// parseBatches calls fn for every record of the whole v2 batches in b,
// skipping control batches, and returns the offset after the last batch
// parsed whole (-1 if none). A batch that fails its CRC or does not decode
// is an error, returned with the offset after the last good batch, so the
// caller re-reads it rather than skip its records.
func parseBatches(b []byte, fn func(offset int64, key, value []byte)) (int64, error) {
	next := int64(-1)
	for len(b) >= 12 {
		size := int(int32(binary.BigEndian.Uint32(b[8:12])))
		if size < 49 {
			// Shorter than a v2 batch header: not a batch at all, so
			// corrupt, not a partial tail (whose length field is whole).
			return next, fmt.Errorf("%w: batch length %d after offset %d", errBadRecord, size, next)
		}
		if len(b) < 12+size {
			break // a partial batch at the end of a read
		}
		raw := b[:12+size]
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(raw); err != nil {
			return next, fmt.Errorf("%w: batch: %v", errBadRecord, err)
		}
		b = b[12+size:]
		if rb.Magic != 2 {
			return next, fmt.Errorf("%w: magic %d", errBadRecord, rb.Magic)
		}
		if crc32.Checksum(raw[21:], castagnoli) != uint32(rb.CRC) {
			return next, fmt.Errorf("%w: batch at %d fails its CRC", errBadRecord, rb.FirstOffset)
		}
		end := rb.FirstOffset + int64(rb.LastOffsetDelta) + 1
		if rb.Attributes&0x20 != 0 { // control batch
			next = end
			continue
		}
		recs := rb.Records
		if codec := int8(rb.Attributes & 0x07); codec != 0 {
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
			fn(rb.FirstOffset+int64(r.OffsetDelta), r.Key, r.Value)
		}
		next = end
	}
	return next, nil
}

func inflate(codec int8, data []byte) ([]byte, error) {
	r, err := recordcodec.NewReader(codec, data, inflatedBatchMaxBytes)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}
