package protocol

// ListOffsets (key 2), versions 0-7.
//
//   - Each partition's Timestamp goes to Replicas.ListOffset: -1 (latest)
//     is the high watermark for a consumer (ReplicaID -1; both isolation
//     levels, with no transactions) and the log end offset for any other
//     replica id, -2 (earliest) the log start offset, -3 (max timestamp,
//     v7+) the last offset of the batch with the largest timestamp, and
//     anything else the first batch whose timestamp is at or after it;
//     both answer -1 when that batch is not below the same bound.
//   - v0 answers OldStyleOffsets: the one offset found, or none when it is
//     -1 or MaxNumOffsets is 0. v1+ answers Offset and Timestamp.
//   - CurrentLeaderEpoch (v4+) is checked by the replica
//     (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH); the response carries
//     the leader epoch from v4.
//   - A consumer's request (ReplicaID -1, v1+) for the latest offset, or
//     for a timestamp with no offset below the high watermark, answers
//     OFFSET_NOT_AVAILABLE while a new leader's high watermark lags the
//     start of its leader epoch (KIP-207); clients retry it.
//   - IsolationLevel (v2+): a consumer's read_committed (1) request is
//     bounded by the last stable offset instead of the high watermark
//     (partition.AskerCommittedConsumer), with KIP-207's check as for
//     read_uncommitted; v0-1 have no isolation level.
//   - Authorization: Describe on each topic, else TOPIC_AUTHORIZATION_FAILED
//     for its partitions.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
	"github.com/kafkazk/broker/security"
)

func (s *Server) handleListOffsets(ctx context.Context, rc *reqContext, req *kmsg.ListOffsetsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	resp.Topics = make([]kmsg.ListOffsetsResponseTopic, 0, len(req.Topics))
	// Kafka bounds a consumer's answer (ReplicaID -1) by the HW and any
	// other's by the LEO; only v1+ consumers have an isolation level, the
	// path where KIP-207's OFFSET_NOT_AVAILABLE comes from.
	asker := partition.AskerReplica
	switch {
	case req.ReplicaID == -1 && req.Version >= 2 && req.IsolationLevel == 1:
		asker = partition.AskerCommittedConsumer
	case req.ReplicaID == -1 && req.Version >= 1:
		asker = partition.AskerConsumer
	case req.ReplicaID == -1:
		asker = partition.AskerLegacyConsumer
	}
	describable := s.filterAuthorized(rc, security.OpDescribe, security.ResourceTopic, logDenied)
	for _, t := range req.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.ListOffsetsResponseTopicPartition, 0, len(t.Partitions))
		for _, p := range t.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition = p.Partition
			tp := cluster.TopicPartition{Topic: t.Topic, Partition: p.Partition}
			epoch := int32(-1)
			if req.Version >= 4 {
				epoch = p.CurrentLeaderEpoch
			}
			if !describable(t.Topic) {
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				rp.Timestamp, rp.Offset, rp.LeaderEpoch = -1, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			offset, ts, leaderEpoch, err := s.cfg.Replicas.ListOffset(tp, p.Timestamp, epoch, asker)
			switch {
			case err != nil:
				rp.ErrorCode = s.partitionErrorCode(ctx, rc, tp, err, s.errorCode, nil)
			case req.Version == 0:
				if offset >= 0 && p.MaxNumOffsets > 0 {
					rp.OldStyleOffsets = []int64{offset}
				}
			default:
				rp.Offset = offset
				rp.Timestamp = ts
				if req.Version >= 4 {
					rp.LeaderEpoch = leaderEpoch
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
