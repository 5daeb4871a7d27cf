package protocol

// ListOffsets (key 2), versions 0-7.
//
//   - Each partition's Timestamp goes to Replicas.ListOffset: -1 (latest)
//     is the high watermark for both isolation levels (no transactions),
//     -2 (earliest) the log start offset, anything else the first offset
//     whose timestamp is at or after it (-1 if none). -3 (max timestamp,
//     v7+) is passed through for the replica to resolve.
//   - v0 answers OldStyleOffsets: the one offset found, or none when it is
//     -1 or MaxNumOffsets is 0. v1+ answers Offset and Timestamp.
//   - CurrentLeaderEpoch (v4+) is checked by the replica
//     (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH); the response carries
//     the leader epoch from v4.
//   - ReplicaID and IsolationLevel are accepted and ignored.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
)

func (s *Server) handleListOffsets(ctx context.Context, rc *reqContext, req *kmsg.ListOffsetsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	resp.Topics = make([]kmsg.ListOffsetsResponseTopic, 0, len(req.Topics))
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
			offset, ts, leaderEpoch, err := s.cfg.Replicas.ListOffset(tp, p.Timestamp, epoch)
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
