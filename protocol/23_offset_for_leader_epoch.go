package protocol

// OffsetForLeaderEpoch (key 23), versions 0-4, served only with
// Config.LeaderEpochs.
//
// Followers (KIP-101/279) and, from KIP-320, consumers ask where a leader
// epoch ends in the leader's log, to truncate or to detect divergence.
//
//   - v1+ answers the leader epoch found (the largest at or below the one
//     asked for); v0 only the end offset. v2 adds each partition's
//     CurrentLeaderEpoch (KIP-320, -1 before: no check) and ThrottleMillis
//     (always 0). v3 adds ReplicaID (a follower's broker id, -1 for a
//     consumer), accepted and only logged: LeaderEpochs answers both alike,
//     as Kafka's leader does. v4 is flexible.
//   - Each partition goes to LeaderEpochs.OffsetForLeaderEpoch. Errors map
//     through the error table: FENCED_LEADER_EPOCH and UNKNOWN_LEADER_EPOCH
//     from the current-epoch check, NOT_LEADER_OR_FOLLOWER from a
//     follower; a partition this broker holds no replica of answers
//     NOT_LEADER_OR_FOLLOWER when the metadata knows it, else
//     UNKNOWN_TOPIC_OR_PARTITION, as for Fetch. A failed partition has
//     leader epoch -1 and end offset -1 (Kafka's UNDEFINED_EPOCH_OFFSET).
//   - Authorization: ClusterAction on the cluster (a follower) covers every
//     topic, else Describe on each (TOPIC_AUTHORIZATION_FAILED).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/security"
)

func (s *Server) handleOffsetForLeaderEpoch(ctx context.Context, rc *reqContext, req *kmsg.OffsetForLeaderEpochRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	if req.Version >= 3 {
		requestEvent(s.log.Debug(), rc).Int32("replica_id", req.ReplicaID).Msg("offset for leader epoch")
	}
	resp.Topics = make([]kmsg.OffsetForLeaderEpochResponseTopic, 0, len(req.Topics))
	// ClusterAction on the cluster (a follower; asked quietly) covers
	// every topic, else Describe on each.
	clusterAction := s.authorizeLog(rc, security.OpClusterAction, security.ResourceCluster, security.ClusterResourceName, quiet)
	describable := s.filterAuthorized(rc, security.OpDescribe, security.ResourceTopic, logDenied)
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.OffsetForLeaderEpochResponseTopicPartition, 0, len(t.Partitions))
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			rp.Partition = p.Partition
			tp := cluster.TopicPartition{Topic: t.Topic, Partition: p.Partition}
			if !clusterAction && !describable(t.Topic) {
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				rp.LeaderEpoch, rp.EndOffset = -1, -1
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			current := int32(-1)
			if req.Version >= 2 {
				current = p.CurrentLeaderEpoch
			}
			epoch, end, err := s.cfg.LeaderEpochs.OffsetForLeaderEpoch(tp, current, p.LeaderEpoch)
			if err != nil {
				rp.ErrorCode = s.partitionErrorCode(ctx, rc, tp, err, s.errorCode, nil)
				rp.LeaderEpoch, rp.EndOffset = -1, -1
			} else {
				rp.LeaderEpoch, rp.EndOffset = epoch, end
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
