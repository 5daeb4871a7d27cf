package protocol

// DeleteRecords (key 21), versions 0-2 (v2 is flexible).
//
//   - Served only when Config.Replicas implements RecordDeleter. Each
//     partition must be led here: NOT_LEADER_FOR_PARTITION otherwise, also
//     for a partition this broker holds no replica of if the metadata
//     knows it (as Produce and Fetch, and Kafka), else
//     UNKNOWN_TOPIC_OR_PARTITION.
//   - A partition of an internal topic (__consumer_offsets,
//     __transaction_state) that the metadata knows answers
//     INVALID_TOPIC_EXCEPTION, as Kafka's
//     ReplicaManager.deleteRecordsOnLocalLog refuses internal topics
//     before it looks for the replica.
//   - Offset is the new log start offset ("low watermark"); -1 means the
//     high watermark. Above the high watermark, or another negative value,
//     is OFFSET_OUT_OF_RANGE. An offset below the current start changes
//     nothing and answers the current low watermark.
//   - As Kafka's DelayedDeleteRecords, a partition answers once the log
//     start offset of every replica on a live broker has reached the
//     offset (followers take the leader's from their fetches), with that
//     low watermark; if TimeoutMillis passes first, REQUEST_TIMED_OUT (the
//     leader's records are deleted all the same). Partitions wait in
//     parallel, so the response takes at most TimeoutMillis.
//   - LowWatermark is -1 with any error.
//   - Authorization: Delete on each topic, else TOPIC_AUTHORIZATION_FAILED.

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
	"github.com/kafkazk/broker/security"
)

// deleteRecordsParallel bounds the partitions of one DeleteRecords request
// that wait at the same time.
const deleteRecordsParallel = 32

func (s *Server) handleDeleteRecords(ctx context.Context, rc *reqContext, req *kmsg.DeleteRecordsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	deleter := s.cfg.Replicas.(RecordDeleter)
	dctx, cancel := context.WithTimeout(ctx, time.Duration(max(req.TimeoutMillis, 0))*time.Millisecond)
	defer cancel()
	live := map[int32]bool{}
	for _, b := range s.cfg.Metadata.Brokers() {
		live[b.ID] = true
	}
	alive := func(id int32) bool { return live[id] }

	var wg sync.WaitGroup
	sem := make(chan struct{}, deleteRecordsParallel)
	resp.Topics = make([]kmsg.DeleteRecordsResponseTopic, len(req.Topics))
	deletable := s.filterAuthorized(rc, security.OpDelete, security.ResourceTopic, logDenied)
	for i, t := range req.Topics {
		rt := &resp.Topics[i]
		*rt = kmsg.NewDeleteRecordsResponseTopic()
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.DeleteRecordsResponseTopicPartition, len(t.Partitions))
		for j, p := range t.Partitions {
			rp := &rt.Partitions[j]
			*rp = kmsg.NewDeleteRecordsResponseTopicPartition()
			rp.Partition = p.Partition
			rp.LowWatermark = -1
			tp := cluster.TopicPartition{Topic: t.Topic, Partition: p.Partition}
			if !deletable(tp.Topic) {
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				continue
			}
			if cluster.IsInternalTopic(tp.Topic) {
				if _, known := s.hasPartition(tp); known {
					rp.ErrorCode = kerr.InvalidTopicException.Code
					continue
				}
			}
			offset := p.Offset
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				lw, err := deleter.DeleteRecords(dctx, tp, offset, alive)
				if err != nil {
					rp.ErrorCode = s.partitionErrorCode(dctx, rc, tp, err, s.errorCode, nil)
					requestEvent(s.log.Debug(), rc).Err(err).Str("topic", tp.Topic).Int32("partition", tp.Partition).Int64("offset", offset).Msg("delete records failed")
					return
				}
				rp.LowWatermark = lw
			}()
		}
	}
	wg.Wait()
	return resp, nil
}

var _ RecordDeleter = (*partition.Manager)(nil)
