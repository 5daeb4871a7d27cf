package protocol

// WriteTxnMarkers (key 27), versions 0-1 (Replicas implements
// TxnPartitions; v2 carries KIP-890 part 2's transaction version). Sent
// by the transaction coordinator to each partition leader.
//
//   - Each marker's partitions get a COMMIT or ABORT control batch through
//     TxnPartitions.WriteTxnMarker (min.insync.replicas checked as for
//     acks=-1; internal topics allowed), then the handler waits for every
//     appended marker to be replicated, each partition on its own
//     (Replicas.WaitCommitted, acks=all
//     as Kafka's appendRecords with requiredAcks -1), under one deadline
//     of request.timeout.ms (30 s): REQUEST_TIMED_OUT after it,
//     NOT_ENOUGH_REPLICAS_AFTER_APPEND or NOT_LEADER_OR_FOLLOWER as for a
//     produce.
//   - Each partition of __consumer_offsets whose marker is committed
//     then gets Groups' CompleteTxn (TxnGroups) with the marker's offset,
//     right after that partition's own wait (not after every partition of
//     the request): the producer's pending offsets appended below the
//     marker become committed or are dropped, as Kafka's
//     onTransactionCompleted after the append callback; later ones are a
//     later transaction's and stay pending.
//   - Errors are per partition: INVALID_PRODUCER_EPOCH (the marker's
//     epoch is older than the producer's), TRANSACTION_COORDINATOR_FENCED
//     (a newer coordinator epoch was seen), NOT_ENOUGH_REPLICAS, and for a
//     partition without a replica here NOT_LEADER_OR_FOLLOWER when the
//     metadata knows it, else UNKNOWN_TOPIC_OR_PARTITION (the coordinator
//     drops a partition of a deleted topic, so it must be told only when
//     the topic is gone).
//   - A partition listed twice in one marker gets one control batch.
//   - The connection is parked for the wait, holding no lock; the
//     coordinator sends markers on a connection of their own
//     (BrokerClient).

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
)

// markerWait is one appended marker to wait for, and where its answer goes.
type markerWait struct {
	mi, ti, pi int
	tp         cluster.TopicPartition
	offset     int64 // the marker's, for CompleteTxn
	last       int64
	epoch      int32
}

func (s *Server) handleWriteTxnMarkers(ctx context.Context, rc *reqContext, req *kmsg.WriteTxnMarkersRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	if !s.mayWriteTxnMarkers(rc) {
		return writeTxnMarkersRefused(req, resp), nil
	}
	tpr := s.cfg.Replicas.(TxnPartitions) // the key is served only then
	var waits []markerWait
	resp.Markers = make([]kmsg.WriteTxnMarkersResponseMarker, 0, len(req.Markers))
	for mi, m := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		topics := make([]txnTopicPartitions, 0, len(m.Topics))
		for _, t := range m.Topics {
			topics = append(topics, txnTopicPartitions{t.Topic, t.Partitions})
		}
		skeleton, _ := dedupeTopicPartitions(topics)
		mk := partition.TxnMarker{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch,
			CoordinatorEpoch: m.CoordinatorEpoch, Commit: m.Committed}
		for ti, t := range skeleton {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.topic
			for pi, p := range t.partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition = p.partition
				tp := cluster.TopicPartition{Topic: t.topic, Partition: p.partition}
				res, err := tpr.WriteTxnMarker(tp, mk)
				if err != nil {
					rp.ErrorCode = s.partitionErrorCode(ctx, rc, tp, err, s.errorCode, nil)
				} else {
					waits = append(waits, markerWait{mi: mi, ti: ti, pi: pi, tp: tp, offset: res.BaseOffset, last: res.LastOffset, epoch: res.LeaderEpoch})
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	if len(waits) == 0 {
		return resp, nil
	}

	wctx, cancel := txnTimeout(ctx)
	defer cancel()
	tg, _ := s.cfg.Groups.(TxnGroups)
	// Each partition waits on its own: the group coordinator learns of a
	// marker only once it is committed (an offset made visible before that
	// could be lost with the marker), and as soon as it is, so that no
	// other partition's wait delays it past the producer's next
	// transaction. Each goroutine sets only its own partition's code.
	var wg sync.WaitGroup
	for _, w := range waits {
		wg.Add(1)
		go func(w markerWait) {
			defer wg.Done()
			if err := s.cfg.Replicas.WaitCommitted(wctx, w.tp, w.last, w.epoch); err != nil {
				resp.Markers[w.mi].Topics[w.ti].Partitions[w.pi].ErrorCode = s.errorCode(rc, err)
				return
			}
			if tg != nil && w.tp.Topic == offsetsTopic {
				m := req.Markers[w.mi]
				tg.CompleteTxn(w.tp.Partition, m.ProducerID, w.offset, m.Committed)
			}
		}(w)
	}
	wg.Wait()
	return resp, nil
}
