package protocol

// OffsetCommit (key 8), versions 0-9 (v10 addresses topics by id).
//
//   - Passed to Groups.CommitOffsets, which checks the member and
//     generation (generation -1 with no member id is a "simple" commit,
//     allowed for a group without members), writes the offsets to
//     __consumer_offsets with acks=all and answers once they are
//     replicated, parking only this connection (at most
//     offsets.commit.timeout.ms).
//   - v0 carries no generation: it is a simple commit. Kafka 2.x keeps v0
//     commits in ZooKeeper; here every version goes to __consumer_offsets.
//   - v1's per-partition commit timestamp is ignored (Kafka also stamps
//     the commit itself); v2-v4's RetentionTimeMillis, when not -1, sets
//     an explicit expiry. v6+ carries the committed leader epoch, v7+
//     group.instance.id.
//   - A partition of a topic the metadata does not know answers
//     UNKNOWN_TOPIC_OR_PARTITION and is not written; a metadata string
//     over 4096 bytes OFFSET_METADATA_TOO_LARGE. A group-level error is
//     answered on every partition.
//   - Authorization: Read on the group (else GROUP_AUTHORIZATION_FAILED on
//     every partition), then Read on each topic
//     (TOPIC_AUTHORIZATION_FAILED); refused partitions are not committed.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/group"
	"github.com/kafkazk/broker/security"
)

func (s *Server) handleOffsetCommit(ctx context.Context, rc *reqContext, req *kmsg.OffsetCommitRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	cr := group.CommitRequest{
		Group: req.Group, Generation: req.Generation, MemberID: req.MemberID, InstanceID: req.InstanceID,
		Retention: -1, Offsets: map[cluster.TopicPartition]group.CommitOffset{},
	}
	if req.Version == 0 {
		cr.Generation, cr.MemberID = -1, ""
	}
	if req.Version >= 2 && req.Version <= 4 && req.RetentionTimeMillis >= 0 {
		cr.Retention = time.Duration(req.RetentionTimeMillis) * time.Millisecond
	}
	groupOK := s.authorize(rc, security.OpRead, security.ResourceGroup, req.Group)
	readable := s.filterAuthorized(rc, security.OpRead, security.ResourceTopic, logDenied)
	unknown := map[cluster.TopicPartition]bool{}
	for _, t := range req.Topics {
		if !groupOK || !readable(t.Topic) {
			continue
		}
		for _, p := range t.Partitions {
			tp := cluster.TopicPartition{Topic: t.Topic, Partition: p.Partition}
			if _, known := s.hasPartition(tp); !known {
				unknown[tp] = true
				continue
			}
			o := group.CommitOffset{Offset: p.Offset, LeaderEpoch: -1}
			if p.Metadata != nil {
				o.Metadata = *p.Metadata
			}
			if req.Version >= 6 {
				o.LeaderEpoch = p.LeaderEpoch
			}
			cr.Offsets[tp] = o
		}
	}
	var (
		errs map[cluster.TopicPartition]error
		err  error
	)
	if len(cr.Offsets) > 0 {
		errs, err = s.cfg.Groups.CommitOffsets(ctx, cr)
	}
	topLevel := s.errorCode(rc, err)
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			tp := cluster.TopicPartition{Topic: t.Topic, Partition: p.Partition}
			switch {
			case !groupOK:
				rp.ErrorCode = kerr.GroupAuthorizationFailed.Code
			case !readable(t.Topic):
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case unknown[tp]:
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case err != nil:
				rp.ErrorCode = topLevel
			default:
				rp.ErrorCode = s.errorCode(rc, errs[tp])
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
