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
//   - KIP-890 part 1, as Kafka 3.6+'s handleTxnCommitOffsets
//     (Config.TxnVerification, with Replicas implementing TxnPartitions):
//     the replica of the group's __consumer_offsets partition gives a
//     verification guard unless the producer already has an ongoing
//     transaction there; the partition is then verified with the
//     transaction coordinator (verifyInTxn, the path Produce uses: the
//     local Transactions or TxnVerifier to its broker) and the offsets
//     are committed with the guard (TxnCommitRequest.VerificationGuard,
//     which the group coordinator appends with). A request of a
//     transaction that already ended (a late retry, a zombie) is so
//     refused instead of leaving offsets pending with no marker to come.
//     Failures answer every partition, mapped as Kafka's
//     maybeConvertOffsetCommitError after AddPartitionsToTxnManager:
//     PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH; a failure to reach
//     the coordinator (Kafka's NETWORK_EXCEPTION) COORDINATOR_LOAD_IN_PROGRESS;
//     no coordinator, UNKNOWN_TOPIC_OR_PARTITION or NOT_ENOUGH_REPLICAS
//     COORDINATOR_NOT_AVAILABLE; NOT_LEADER_OR_FOLLOWER (this broker no
//     longer leads the group's partition) NOT_COORDINATOR; the
//     coordinator's other answers (INVALID_TXN_STATE, NOT_COORDINATOR,
//     CONCURRENT_TRANSACTIONS, INVALID_PRODUCER_ID_MAPPING, ...) as they
//     are. Requests the group coordinator refuses anyway (empty group id,
//     negative producer id) are not verified.
//   - COORDINATOR_LOAD_IN_PROGRESS answers COORDINATOR_NOT_AVAILABLE before
//     v2, which 0.11-2.0 producers need (KAFKA-7296), as Kafka does.

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/group"
	"github.com/kafkazk/broker/partition"
	"github.com/kafkazk/broker/security"
	"github.com/kafkazk/broker/txn"
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
		cr.VerificationGuard, err = s.verifyTxnOffsetCommit(tctx, rc, req)
		if err == nil {
			errs, err = s.cfg.Groups.(TxnGroups).CommitTxnOffsets(tctx, cr)
		}
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

// verifyTxnOffsetCommit is Kafka's maybeStartTransactionVerificationForPartition
// for a TxnOffsetCommit: the guard to commit with (0 when verification is
// off or not needed), or the mapped error of a failed verification.
func (s *Server) verifyTxnOffsetCommit(ctx context.Context, rc *reqContext, req *kmsg.TxnOffsetCommitRequest) (uint64, error) {
	tpr, ok := s.cfg.Replicas.(TxnPartitions)
	if !ok || !s.cfg.TxnVerification || req.Group == "" || req.ProducerID < 0 {
		return 0, nil
	}
	tp := cluster.TopicPartition{Topic: offsetsTopic, Partition: s.cfg.Groups.PartitionFor(req.Group)}
	guard, needed, err := tpr.TxnVerificationGuard(tp, req.ProducerID)
	if err != nil {
		return 0, txnOffsetCommitVerifyFailure(err)
	}
	if !needed {
		return 0, nil
	}
	errs, err := s.verifyInTxn(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, []cluster.TopicPartition{tp})
	if err == nil {
		err = errs[tp]
	}
	if err != nil {
		requestEvent(s.log.Debug(), rc).Err(err).Str("transactional_id", req.TransactionalID).Str("group", req.Group).
			Int64("producer_id", req.ProducerID).Msg("transactional offset commit verification failed")
		return 0, txnOffsetCommitVerifyFailure(err)
	}
	return guard, nil
}

// txnOffsetCommitVerifyFailure maps a failed verification of a
// TxnOffsetCommit as Kafka does: AddPartitionsToTxnManager's answer
// (PRODUCER_FENCED as INVALID_PRODUCER_EPOCH, a request that got no
// answer as NETWORK_EXCEPTION), then GroupMetadataManager's
// maybeConvertOffsetCommitError (NETWORK_EXCEPTION as
// COORDINATOR_LOAD_IN_PROGRESS, which clients retry without looking the
// coordinator up again). The original error is kept as text only, so
// that the table maps the translated sentinel.
func txnOffsetCommitVerifyFailure(err error) error {
	wrap := func(sentinel error) error {
		return fmt.Errorf("verify transactional offset commit: %v: %w", err, sentinel)
	}
	switch {
	case errors.Is(err, txn.ErrProducerFenced):
		return wrap(txn.ErrInvalidProducerEpoch)
	case errors.Is(err, cluster.ErrBrokerNotAvailable), errors.Is(err, ErrClientClosed),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return wrap(group.ErrCoordinatorLoadInProgress)
	case errors.Is(err, partition.ErrUnknownTopicOrPartition), errors.Is(err, partition.ErrNotEnoughReplicas),
		errors.Is(err, partition.ErrNotEnoughReplicasAfterAppend):
		return wrap(group.ErrCoordinatorNotAvailable)
	case errors.Is(err, partition.ErrNotLeader), errors.Is(err, partition.ErrStorage):
		return wrap(group.ErrNotCoordinator)
	}
	return err
}
