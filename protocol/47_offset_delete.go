package protocol

// OffsetDelete (key 47), version 0 (the only one; KIP-496).
//
//   - A partition the metadata does not know answers
//     UNKNOWN_TOPIC_OR_PARTITION; the others go to Groups.DeleteOffsets,
//     which answers per partition GROUP_SUBSCRIBED_TO_TOPIC for a topic a
//     live consumer group's members subscribe to, or deletes the offset
//     (tombstones in __consumer_offsets).
//   - A group-level error (INVALID_GROUP_ID, NOT_COORDINATOR,
//     COORDINATOR_LOAD_IN_PROGRESS, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, or
//     a failed tombstone write) is answered in ErrorCode with no topics,
//     as Kafka's OffsetDeleteRequest.getErrorResponse does.
//   - Authorization: Delete on the group (top-level
//     GROUP_AUTHORIZATION_FAILED), then Read on each topic
//     (TOPIC_AUTHORIZATION_FAILED for its partitions).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/security"
)

func (s *Server) handleOffsetDelete(ctx context.Context, rc *reqContext, req *kmsg.OffsetDeleteRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	if !s.authorize(rc, security.OpDelete, security.ResourceGroup, req.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	readable := s.filterAuthorized(rc, security.OpRead, security.ResourceTopic, logDenied)
	unknown := map[cluster.TopicPartition]bool{}
	var known []cluster.TopicPartition
	for _, t := range req.Topics {
		if !readable(t.Topic) {
			continue
		}
		for _, p := range t.Partitions {
			tp := cluster.TopicPartition{Topic: t.Topic, Partition: p.Partition}
			if _, ok := s.hasPartition(tp); !ok {
				unknown[tp] = true
			} else {
				known = append(known, tp)
			}
		}
	}
	errs, err := s.cfg.Groups.DeleteOffsets(ctx, req.Group, known)
	if err != nil {
		resp.ErrorCode = s.errorCode(rc, err)
		return resp, nil
	}
	// One entry per topic and partition, in the request's order.
	topicAt := map[string]int{}
	seen := map[cluster.TopicPartition]bool{}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			tp := cluster.TopicPartition{Topic: t.Topic, Partition: p.Partition}
			if seen[tp] {
				continue
			}
			seen[tp] = true
			i, ok := topicAt[t.Topic]
			if !ok {
				i = len(resp.Topics)
				topicAt[t.Topic] = i
				rt := kmsg.NewOffsetDeleteResponseTopic()
				rt.Topic = t.Topic
				resp.Topics = append(resp.Topics, rt)
			}
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition = p.Partition
			switch {
			case !readable(t.Topic):
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case unknown[tp]:
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				rp.ErrorCode = s.errorCode(rc, errs[tp])
			}
			resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
		}
	}
	return resp, nil
}
