package protocol

// TxnOffsetCommit (key 28), versions 0-3 (Config.Transactions, with Groups
// implementing TxnGroups; v4 only adds KIP-890 part 2's
// TRANSACTION_ABORTABLE, v6 topic ids).
//
//   - Passed to the group coordinator's CommitTxnOffsets, which writes the
//     offsets as one transactional batch of the producer to the group's
//     __consumer_offsets partition and keeps them pending until the
//     transaction's marker there (WriteTxnMarkers -> CompleteTxn).
//   - v3+ (KIP-447) carries the member id, group instance id and
//     generation, which the coordinator checks as for OffsetCommit; before
//     v3 they are not checked (generation -1, no member). v2+ carries the
//     committed leader epoch (else -1).
//   - A partition the metadata does not know answers
//     UNKNOWN_TOPIC_OR_PARTITION and is not written, as Kafka's
//     handleTxnOffsetCommitRequest; a group-level error is answered on
//     every other partition.
//   - COORDINATOR_LOAD_IN_PROGRESS answers COORDINATOR_NOT_AVAILABLE before
//     v2, which 0.11-2.0 producers need (KAFKA-7296), as Kafka does.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/group"
	"github.com/kafkazk/broker/security"
)

func (s *Server) handleTxnOffsetCommit(ctx context.Context, rc *reqContext, req *kmsg.TxnOffsetCommitRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	cr := group.TxnCommitRequest{
		TransactionalID: req.TransactionalID, ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch,
		Group: req.Group, Generation: -1, Offsets: map[cluster.TopicPartition]group.CommitOffset{},
	}
	if req.Version >= 3 {
		cr.Generation, cr.MemberID, cr.InstanceID = req.Generation, req.MemberID, req.InstanceID
	}
	whole := s.txnOffsetCommitRefusal(rc, req)
	readable := s.filterAuthorized(rc, security.OpRead, security.ResourceTopic, logDenied)
	unknown := map[cluster.TopicPartition]bool{}
	for _, t := range req.Topics {
		if whole != 0 || !readable(t.Topic) {
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
			if req.Version >= 2 {
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
		tctx, cancel := txnTimeout(ctx)
		errs, err = s.cfg.Groups.(TxnGroups).CommitTxnOffsets(tctx, cr)
		cancel()
	}
	code := func(err error) int16 {
		c := s.errorCode(rc, err)
		if req.Version < 2 && c == kerr.CoordinatorLoadInProgress.Code {
			c = kerr.CoordinatorNotAvailable.Code
		}
		return c
	}
	for _, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			tp := cluster.TopicPartition{Topic: t.Topic, Partition: p.Partition}
			switch {
			case whole != 0:
				rp.ErrorCode = whole
			case !readable(t.Topic):
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case unknown[tp]:
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case err != nil:
				rp.ErrorCode = code(err)
			default:
				rp.ErrorCode = code(errs[tp])
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
