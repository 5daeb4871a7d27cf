package txn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/internal/coordlog"
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
	recs := make([]coordlog.Record, len(records))
	for i, r := range records {
		recs[i] = coordlog.Record{Key: r.key, Value: r.value}
	}
	b, _ := coordlog.EncodeBatch(recs, nowMs, coordlog.CodecNone, nil) // fails only compressing
	return b
}

// walkOptions is how the transaction log is read: every batch's CRC is
// checked, a length field below a batch header is corruption, and control
// batches (never written to this topic) are skipped. Kafka never compresses
// this topic, but a reader does not choke on it.
var walkOptions = coordlog.WalkOptions{Strict: true, SkipControl: true}

// parseBatches calls fn for every record of the whole v2 batches in b,
// skipping control batches, and returns the offset after the last batch
// parsed whole (-1 if none). A batch that fails its CRC or does not decode
// is an error wrapping errBadRecord, returned with the offset after the
// last good batch, so the caller re-reads it rather than skip its records.
func parseBatches(b []byte, fn func(offset int64, key, value []byte)) (int64, error) {
	next, err := coordlog.Walk(b, walkOptions, func(_ coordlog.Header, offset int64, key, value []byte) {
		fn(offset, key, value)
	})
	if err != nil {
		return next, fmt.Errorf("%w: %w", errBadRecord, err)
	}
	return next, nil
}
