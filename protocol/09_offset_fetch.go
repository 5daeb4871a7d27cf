package protocol

// OffsetFetch (key 9), versions 0-9 (v10 addresses topics by id).
//
//   - Answers Groups.FetchOffsets: each partition asked for with its
//     committed offset, leader epoch (v5+) and metadata, or offset -1,
//     leader epoch -1 and empty metadata when nothing was committed.
//   - Topics null (v2+) asks for every partition the group committed.
//   - Group errors (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS) are
//     the top-level ErrorCode from v2; at v0-1 they go on every partition.
//   - v8+ carries many groups (Groups), each answered with its own error;
//     v9's member id and epoch (KIP-848) are ignored: classic groups do
//     not check them.
//   - RequireStable (v7+, KIP-447) goes to Groups.FetchOffsets: a
//     partition with a pending transactional commit (or one waiting for
//     replication) answers offset -1 with UNSTABLE_OFFSET_COMMIT (88),
//     which the consumer retries.
//   - Kafka 2.x reads v0 from ZooKeeper; here every version reads
//     __consumer_offsets.
//   - Authorization: Describe on the group (GROUP_AUTHORIZATION_FAILED); a
//     requested partition of a topic the principal may not Describe answers
//     TOPIC_AUTHORIZATION_FAILED with offset -1, and such topics are left
//     out of a fetch of all offsets.

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/group"
	"github.com/kafkazk/broker/security"
)

// fetchedTopic is one topic of one group's OffsetFetch answer.
type fetchedTopic struct {
	topic      string
	partitions []fetchedPartition
}

type fetchedPartition struct {
	partition int32
	offset    group.Offset
	code      int16
}

func (s *Server) handleOffsetFetch(_ context.Context, rc *reqContext, req *kmsg.OffsetFetchRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version >= 8 {
		for _, g := range req.Groups {
			var tps []cluster.TopicPartition
			if g.Topics != nil {
				tps = []cluster.TopicPartition{}
				for _, t := range g.Topics {
					for _, p := range t.Partitions {
						tps = append(tps, cluster.TopicPartition{Topic: t.Topic, Partition: p})
					}
				}
			}
			topics, err := s.fetchOffsets(rc, g.Group, tps, req.RequireStable)
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group = g.Group
			rg.ErrorCode = s.errorCode(rc, err)
			for _, t := range topics {
				rt := kmsg.NewOffsetFetchResponseGroupTopic()
				rt.Topic = t.topic
				for _, p := range t.partitions {
					rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					rp.Partition, rp.Offset, rp.LeaderEpoch = p.partition, p.offset.Offset, p.offset.LeaderEpoch
					rp.Metadata = kmsg.StringPtr(p.offset.Metadata)
					rp.ErrorCode = p.code
					rt.Partitions = append(rt.Partitions, rp)
				}
				rg.Topics = append(rg.Topics, rt)
			}
			resp.Groups = append(resp.Groups, rg)
		}
		return resp, nil
	}
	var tps []cluster.TopicPartition
	if req.Topics != nil || req.Version < 2 {
		tps = []cluster.TopicPartition{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				tps = append(tps, cluster.TopicPartition{Topic: t.Topic, Partition: p})
			}
		}
	}
	topics, err := s.fetchOffsets(rc, req.Group, tps, req.Version >= 7 && req.RequireStable)
	code := s.errorCode(rc, err)
	if req.Version >= 2 {
		resp.ErrorCode = code
	}
	if err != nil && req.Version < 2 {
		// Before v2 there is no top-level error: every partition asked
		// for carries it.
		topics = groupTPs(tps, nil)
		for i := range topics {
			for j := range topics[i].partitions {
				topics[i].partitions[j].code = code
			}
		}
	}
	for _, t := range topics {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t.topic
		for _, p := range t.partitions {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = p.partition, p.offset.Offset, p.offset.LeaderEpoch
			rp.Metadata = kmsg.StringPtr(p.offset.Metadata)
			rp.ErrorCode = p.code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// fetchOffsets reads one group's offsets for tps (nil: all it has),
// grouped by topic in request order (sorted for "all"); a partition's
// Offset.Err (requireStable) becomes its error code.
func (s *Server) fetchOffsets(rc *reqContext, groupID string, tps []cluster.TopicPartition, requireStable bool) ([]fetchedTopic, error) {
	if !s.authorize(rc, security.OpDescribe, security.ResourceGroup, groupID) {
		return nil, kerr.GroupAuthorizationFailed
	}
	// Offsets of topics the principal may not describe are never shown:
	// asked for, they answer TOPIC_AUTHORIZATION_FAILED; among all of a
	// group's, they are left out.
	describable := s.filterAuthorized(rc, security.OpDescribe, security.ResourceTopic, logDenied)
	ask := tps
	if tps != nil {
		ask = make([]cluster.TopicPartition, 0, len(tps))
		for _, tp := range tps {
			if describable(tp.Topic) {
				ask = append(ask, tp)
			}
		}
	}
	offsets, err := s.cfg.Groups.FetchOffsets(groupID, ask, requireStable)
	if err != nil {
		return nil, err
	}

	if tps == nil {
		for tp := range offsets {
			if describable(tp.Topic) {
				tps = append(tps, tp)
			}
		}
		sort.Slice(tps, func(i, j int) bool {
			if tps[i].Topic != tps[j].Topic {
				return tps[i].Topic < tps[j].Topic
			}
			return tps[i].Partition < tps[j].Partition
		})
	}
	topics := groupTPs(tps, offsets)
	for i := range topics {
		for j := range topics[i].partitions {
			if !describable(topics[i].topic) {
				topics[i].partitions[j].code = kerr.TopicAuthorizationFailed.Code
				continue
			}
			if err := topics[i].partitions[j].offset.Err; err != nil {
				topics[i].partitions[j].code = s.errorCode(rc, err)
			}
		}
	}
	return topics, nil
}

func groupTPs(tps []cluster.TopicPartition, offsets map[cluster.TopicPartition]group.Offset) []fetchedTopic {
	var out []fetchedTopic
	index := map[string]int{}
	for _, tp := range tps {
		i, ok := index[tp.Topic]
		if !ok {
			i = len(out)
			index[tp.Topic] = i
			out = append(out, fetchedTopic{topic: tp.Topic})
		}
		o, ok := offsets[tp]
		if !ok {
			o = group.Offset{Offset: -1, LeaderEpoch: -1}
		}
		out[i].partitions = append(out[i].partitions, fetchedPartition{partition: tp.Partition, offset: o})
	}
	return out
}
