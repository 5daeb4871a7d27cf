package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
	"github.com/kafkazk/broker/protocol"
	"github.com/kafkazk/broker/txn"
)

// newTxnCoordinator builds the transaction coordinator from the broker
// config: its state lives in __transaction_state through the replica
// manager (offsetsLog, as the group coordinator's), its producer ids come
// from the broker's one allocator, and its markers go out through markers.
func newTxnCoordinator(cfg *Config, replicas *partition.Manager, ids txn.ProducerIDs, markers txn.MarkerWriter, log zerolog.Logger) *txn.Coordinator {
	c := txnCoordinatorConfig(cfg, replicas, ids, markers, log)
	c.Now = wallNow // testhooks.go
	return txn.New(c)
}

// txnCoordinatorConfig is the txn.Config of the broker config.
func txnCoordinatorConfig(cfg *Config, replicas *partition.Manager, ids txn.ProducerIDs, markers txn.MarkerWriter, log zerolog.Logger) txn.Config {
	return txn.Config{
		BrokerID:               cfg.BrokerID,
		NumPartitions:          cfg.TransactionStateLogNumPartitions,
		OffsetsTopicPartitions: cfg.OffsetsTopicNumPartitions,
		MaxTimeout:             cfg.TransactionMaxTimeout,
		IDExpiration:           cfg.TransactionalIDExpiration,
		AbortTimedOutInterval:  cfg.TransactionAbortTimedOutInterval,
		RemoveExpiredInterval:  cfg.TransactionRemoveExpiredInterval,
		Log:                    offsetsLog{replicas},
		ProducerIDs:            ids,
		Markers:                markers,
		Logger:                 log,
	}
}

// markerSender is how markerWriter reaches a leader:
// protocol.BrokerClient.WriteTxnMarkers.
type markerSender interface {
	WriteTxnMarkers(ctx context.Context, to cluster.Broker, markers []protocol.TxnMarkerFor) (map[cluster.TopicPartition]error, error)
}

// markerMetadata is where markerWriter finds each partition's leader:
// the broker's metadata cache (protocol.MetadataCache).
type markerMetadata interface {
	Topic(name string) (cluster.TopicInfo, bool)
	Broker(id int32) (cluster.Broker, bool)
}

// markerWriter is txn.MarkerWriter: one WriteTxnMarkers per leader broker
// of the transaction's partitions, from the metadata cache, sent in
// parallel. As Kafka's TransactionMarkerChannelManager: a partition the
// metadata does not list (its topic deleted) answers an error wrapping
// cluster.ErrUnknownTopic, which the coordinator drops; a partition with no
// leader, or a leader that is not alive, answers an error wrapping
// partition.ErrNotLeader, which it retries once the metadata moves on.
type markerWriter struct {
	client markerSender
	meta   markerMetadata
	log    zerolog.Logger
}

var _ txn.MarkerWriter = (*markerWriter)(nil)

func (w *markerWriter) WriteMarkers(ctx context.Context, m txn.Markers) map[cluster.TopicPartition]error {
	out := make(map[cluster.TopicPartition]error, len(m.Partitions))
	byLeader := map[int32][]cluster.TopicPartition{}
	topics := map[string]*cluster.TopicInfo{}
	for _, tp := range m.Partitions {
		info, seen := topics[tp.Topic]
		if !seen {
			if ti, ok := w.meta.Topic(tp.Topic); ok {
				info = &ti
			}
			topics[tp.Topic] = info
		}
		leader, known := leaderOf(info, tp.Partition)
		switch {
		case !known:
			out[tp] = fmt.Errorf("marker for %s: not in the metadata: %w", tp, cluster.ErrUnknownTopic)
		case leader == cluster.NoLeader:
			out[tp] = fmt.Errorf("marker for %s: no leader: %w", tp, partition.ErrNotLeader)
		default:
			byLeader[leader] = append(byLeader[leader], tp)
		}
	}
	marker := partition.TxnMarker{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch,
		CoordinatorEpoch: m.CoordinatorEpoch, Commit: m.Commit}
	// Every answer known before sending is in out before the first
	// request goes: from then on out is written under mu only.
	leaders := make(map[int32]cluster.Broker, len(byLeader))
	for leader, tps := range byLeader {
		b, ok := w.meta.Broker(leader)
		if !ok {
			for _, tp := range tps {
				out[tp] = fmt.Errorf("marker for %s: leader %d not alive: %w", tp, leader, partition.ErrNotLeader)
			}
			continue
		}
		leaders[leader] = b
	}
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for leader, b := range leaders {
		tps := byLeader[leader]
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs, err := w.client.WriteTxnMarkers(ctx, b, []protocol.TxnMarkerFor{{TxnMarker: marker, Partitions: tps}})
			mu.Lock()
			defer mu.Unlock()
			for _, tp := range tps {
				e := err
				if e == nil {
					e = errs[tp]
				}
				out[tp] = leaderMarkerError(e, tp, leader)
			}
		}()
	}
	wg.Wait()
	return out
}

// leaderOf is partition p's leader in info; false if info (nil: topic
// unknown) does not list p.
func leaderOf(info *cluster.TopicInfo, p int32) (int32, bool) {
	if info == nil {
		return cluster.NoLeader, false
	}
	for _, pi := range info.Partitions {
		if pi.Partition == p {
			return pi.State.Leader, true
		}
	}
	return cluster.NoLeader, false
}

// leaderMarkerError is the leader's answer for tp as the coordinator must
// read it. UNKNOWN_TOPIC_OR_PARTITION from a leader means its replica is
// not there yet (or any more) while this broker's metadata still lists
// the partition: Kafka's coordinator retries it, and it must not look like
// a deleted topic, which the coordinator drops, so it becomes a retriable
// NOT_LEADER until the metadata says otherwise.
func leaderMarkerError(err error, tp cluster.TopicPartition, leader int32) error {
	if err != nil && errors.Is(err, partition.ErrUnknownTopicOrPartition) {
		return fmt.Errorf("marker for %s: leader %d has no replica (%v): %w", tp, leader, err, partition.ErrNotLeader)
	}
	return err
}
