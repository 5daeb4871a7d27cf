package protocol

import (
	"context"
	"errors"
	"fmt"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/group"
	"github.com/kafkazk/broker/partition"
	"github.com/kafkazk/broker/txn"
)

// errorCodes is the one table from domain errors to Kafka error codes.
// Lookups use errors.Is, so wrapped errors map like their sentinel. Order
// matters only if an error wraps two sentinels: the first row wins.
var errorCodes = []struct {
	err  error
	code *kerr.Error
}{
	// The group coordinator's errors come first: a failed write to
	// __consumer_offsets wraps both a group and a partition sentinel, and
	// the client must see the group one (e.g. COORDINATOR_NOT_AVAILABLE
	// rather than NOT_ENOUGH_REPLICAS), as in Kafka.
	{group.ErrNotCoordinator, kerr.NotCoordinator},
	{group.ErrCoordinatorLoadInProgress, kerr.CoordinatorLoadInProgress},
	{group.ErrCoordinatorNotAvailable, kerr.CoordinatorNotAvailable},
	{group.ErrInvalidGroupID, kerr.InvalidGroupID},
	{group.ErrUnknownMemberID, kerr.UnknownMemberID},
	{group.ErrMemberIDRequired, kerr.MemberIDRequired},
	{group.ErrIllegalGeneration, kerr.IllegalGeneration},
	{group.ErrRebalanceInProgress, kerr.RebalanceInProgress},
	{group.ErrInvalidSessionTimeout, kerr.InvalidSessionTimeout},
	{group.ErrInconsistentGroupProtocol, kerr.InconsistentGroupProtocol},
	{group.ErrFencedInstanceID, kerr.FencedInstanceID},
	{group.ErrNonEmptyGroup, kerr.NonEmptyGroup},
	{group.ErrGroupIDNotFound, kerr.GroupIDNotFound},
	{group.ErrGroupSubscribedToTopic, kerr.GroupSubscribedToTopic},
	{group.ErrOffsetMetadataTooLarge, kerr.OffsetMetadataTooLarge},
	{group.ErrInvalidCommitOffsetSize, kerr.InvalidCommitOffsetSize},
	{group.ErrRequestTimedOut, kerr.RequestTimedOut},
	{group.ErrUnstableOffsetCommit, kerr.UnstableOffsetCommit},

	// The transaction coordinator's, first for the same reason: a failed
	// write to __transaction_state wraps a partition sentinel too.
	{txn.ErrNotCoordinator, kerr.NotCoordinator},
	{txn.ErrCoordinatorLoadInProgress, kerr.CoordinatorLoadInProgress},
	{txn.ErrCoordinatorNotAvailable, kerr.CoordinatorNotAvailable},
	{txn.ErrConcurrentTransactions, kerr.ConcurrentTransactions},
	{txn.ErrProducerFenced, kerr.ProducerFenced},
	{txn.ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch},
	{txn.ErrInvalidTxnState, kerr.InvalidTxnState},
	{txn.ErrInvalidProducerIDMapping, kerr.InvalidProducerIDMapping},
	{txn.ErrInvalidTransactionTimeout, kerr.InvalidTransactionTimeout},
	{txn.ErrTransactionalIDNotFound, kerr.TransactionalIDNotFound},
	{txn.ErrRequestTimedOut, kerr.RequestTimedOut},

	{partition.ErrNotLeader, kerr.NotLeaderForPartition},
	{partition.ErrUnknownTopicOrPartition, kerr.UnknownTopicOrPartition},
	{partition.ErrNotEnoughReplicas, kerr.NotEnoughReplicas},
	{partition.ErrNotEnoughReplicasAfterAppend, kerr.NotEnoughReplicasAfterAppend},
	{partition.ErrRequestTimedOut, kerr.RequestTimedOut},
	{partition.ErrOffsetOutOfRange, kerr.OffsetOutOfRange},
	{partition.ErrCorruptMessage, kerr.CorruptMessage},
	{partition.ErrInvalidRecord, kerr.InvalidRecord},
	{partition.ErrUnsupportedCompressionType, kerr.UnsupportedCompressionType},
	{partition.ErrInvalidTimestamp, kerr.InvalidTimestamp},
	{partition.ErrMessageTooLarge, kerr.MessageTooLarge},
	{partition.ErrRecordListTooLarge, kerr.RecordListTooLarge},
	{partition.ErrOutOfOrderSequence, kerr.OutOfOrderSequenceNumber},
	{partition.ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch},
	{partition.ErrUnknownProducerID, kerr.UnknownProducerID},
	{partition.ErrFencedLeaderEpoch, kerr.FencedLeaderEpoch},
	{partition.ErrUnknownLeaderEpoch, kerr.UnknownLeaderEpoch},
	{partition.ErrOffsetNotAvailable, kerr.OffsetNotAvailable},
	{partition.ErrStorage, kerr.KafkaStorageError},
	{partition.ErrInvalidTxnState, kerr.InvalidTxnState},
	{partition.ErrTransactionCoordinatorFenced, kerr.TransactionCoordinatorFenced},

	{cluster.ErrTopicExists, kerr.TopicAlreadyExists},
	{cluster.ErrUnknownTopic, kerr.UnknownTopicOrPartition},
	{cluster.ErrInvalidTopic, kerr.InvalidTopicException},
	{cluster.ErrInvalidPartitions, kerr.InvalidPartitions},
	{cluster.ErrInvalidReplicationFactor, kerr.InvalidReplicationFactor},
	{cluster.ErrInvalidReplicaAssignment, kerr.InvalidReplicaAssignment},
	{cluster.ErrInvalidConfig, kerr.InvalidConfig},
	{cluster.ErrNotController, kerr.NotController},
	{cluster.ErrTopicDeletionDisabled, kerr.TopicDeletionDisabled},
	{cluster.ErrStaleControllerEpoch, kerr.StaleControllerEpoch},
	{cluster.ErrStaleBrokerEpoch, kerr.StaleBrokerEpoch},
	{cluster.ErrBrokerNotAvailable, kerr.BrokerNotAvailable},
	{cluster.ErrNoReassignmentInProgress, kerr.NoReassignmentInProgress},
	{cluster.ErrElectionNotNeeded, kerr.ElectionNotNeeded},
	{cluster.ErrPreferredLeaderNotAvailable, kerr.PreferredLeaderNotAvailable},
	{cluster.ErrEligibleLeadersNotAvailable, kerr.EligibleLeadersNotAvailable},
	{cluster.ErrTopicBeingDeleted, kerr.InvalidTopicException},
	{cluster.ErrReassignmentInProgress, kerr.ReassignmentInProgress},
	// Kafka's AdminOperationException from assignReplicasToBrokers (some
	// brokers racked, some not): UNKNOWN_SERVER_ERROR with its message.
	{cluster.ErrIncompleteRackInfo, kerr.UnknownServerError},

	// A wait bounded by the request's timeout, or cut short because the
	// server is closing: the client should retry, as after any timeout.
	{context.DeadlineExceeded, kerr.RequestTimedOut},
	{context.Canceled, kerr.RequestTimedOut},
}

// codeErrors is the reverse table, for the inter-broker client: which
// sentinel an error code in a response stands for. Where two sentinels
// share a code (UNKNOWN_TOPIC_OR_PARTITION, REQUEST_TIMED_OUT), the
// partition one is chosen, because the follower's fetcher is the caller
// that acts on them; the coordinator codes (NOT_COORDINATOR, ...) stand
// for txn's, because the client asks only the transaction coordinator
// (VerifyPartitionsInTxn); INVALID_TXN_STATE and INVALID_PRODUCER_EPOCH
// for both partition's and txn's (sentinels), as both a leader
// (WriteTxnMarkers) and a coordinator answer them. Every row maps back to
// its code through errorCodes (TestErrorTableReverse).
var codeErrors = []struct {
	code *kerr.Error
	err  error
}{
	{kerr.NotLeaderForPartition, partition.ErrNotLeader},
	{kerr.UnknownTopicOrPartition, partition.ErrUnknownTopicOrPartition},
	{kerr.NotEnoughReplicas, partition.ErrNotEnoughReplicas},
	{kerr.NotEnoughReplicasAfterAppend, partition.ErrNotEnoughReplicasAfterAppend},
	{kerr.RequestTimedOut, partition.ErrRequestTimedOut},
	{kerr.OffsetOutOfRange, partition.ErrOffsetOutOfRange},
	{kerr.CorruptMessage, partition.ErrCorruptMessage},
	{kerr.InvalidRecord, partition.ErrInvalidRecord},
	{kerr.MessageTooLarge, partition.ErrMessageTooLarge},
	{kerr.RecordListTooLarge, partition.ErrRecordListTooLarge},
	{kerr.OutOfOrderSequenceNumber, partition.ErrOutOfOrderSequence},
	{kerr.InvalidProducerEpoch, &sentinels{partition.ErrInvalidProducerEpoch, txn.ErrInvalidProducerEpoch}},
	{kerr.UnknownProducerID, partition.ErrUnknownProducerID},
	{kerr.FencedLeaderEpoch, partition.ErrFencedLeaderEpoch},
	{kerr.UnknownLeaderEpoch, partition.ErrUnknownLeaderEpoch},
	{kerr.KafkaStorageError, partition.ErrStorage},
	{kerr.InvalidTxnState, &sentinels{partition.ErrInvalidTxnState, txn.ErrInvalidTxnState}},
	{kerr.TransactionCoordinatorFenced, partition.ErrTransactionCoordinatorFenced},

	{kerr.NotCoordinator, txn.ErrNotCoordinator},
	{kerr.CoordinatorLoadInProgress, txn.ErrCoordinatorLoadInProgress},
	{kerr.CoordinatorNotAvailable, txn.ErrCoordinatorNotAvailable},
	{kerr.ConcurrentTransactions, txn.ErrConcurrentTransactions},
	{kerr.ProducerFenced, txn.ErrProducerFenced},
	{kerr.InvalidProducerIDMapping, txn.ErrInvalidProducerIDMapping},
	{kerr.InvalidTransactionTimeout, txn.ErrInvalidTransactionTimeout},
	{kerr.TransactionalIDNotFound, txn.ErrTransactionalIDNotFound},

	{kerr.TopicAlreadyExists, cluster.ErrTopicExists},
	{kerr.InvalidTopicException, cluster.ErrInvalidTopic},
	{kerr.InvalidPartitions, cluster.ErrInvalidPartitions},
	{kerr.InvalidReplicationFactor, cluster.ErrInvalidReplicationFactor},
	{kerr.InvalidReplicaAssignment, cluster.ErrInvalidReplicaAssignment},
	{kerr.InvalidConfig, cluster.ErrInvalidConfig},
	{kerr.NotController, cluster.ErrNotController},
	{kerr.TopicDeletionDisabled, cluster.ErrTopicDeletionDisabled},
	{kerr.StaleControllerEpoch, cluster.ErrStaleControllerEpoch},
	{kerr.StaleBrokerEpoch, cluster.ErrStaleBrokerEpoch},
	{kerr.BrokerNotAvailable, cluster.ErrBrokerNotAvailable},
}

// sentinels is one error code standing for several sentinels: errors.Is
// matches each; its text is the first's. A pointer, so that it is
// comparable as errors.Is needs.
type sentinels [2]error

func (e *sentinels) Error() string   { return e[0].Error() }
func (e *sentinels) Unwrap() []error { return e[:] }

// errorFromCode turns an error code from a response back into an error:
// nil for 0; for a code in codeErrors, an error wrapping both the
// sentinel and the *kerr.Error, so errors.Is matches either; otherwise the
// *kerr.Error alone (UNKNOWN_SERVER_ERROR for a code kerr does not know).
func errorFromCode(code int16) error {
	if code == 0 {
		return nil
	}
	ke := kerr.ErrorForCode(code)
	for _, row := range codeErrors {
		if row.code.Code == code {
			return fmt.Errorf("%w (%w)", row.err, ke)
		}
	}
	return ke
}

// errorMessage is err's text for a response's nullable ErrorMessage: nil
// for no error.
func errorMessage(err error) *string {
	if err == nil {
		return nil
	}
	msg := err.Error()
	return &msg
}

// lookupCode returns the Kafka error for err from the table, or nil if
// err is unmapped. A nil err is not looked up.
func lookupCode(err error) *kerr.Error {
	for _, row := range errorCodes {
		if errors.Is(err, row.err) {
			return row.code
		}
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke
	}
	return nil
}

// errorCode maps err to a Kafka error code: 0 for nil, the table's code,
// or UNKNOWN_SERVER_ERROR (logged at Error, because it means a domain
// error nobody classified).
func errorCode(log *zerolog.Logger, err error) int16 {
	if err == nil {
		return 0
	}
	if ke := lookupCode(err); ke != nil {
		return ke.Code
	}
	log.Error().Err(err).Msg("unmapped error answered with UNKNOWN_SERVER_ERROR")
	return kerr.UnknownServerError.Code
}

// errorCode is the package's errorCode with the request's logger built
// only when it logs (an unmapped error): hot paths build none.
func (s *Server) errorCode(rc *reqContext, err error) int16 {
	return s.codeOrLog(rc, err, errorCode)
}

// produceErrorCode is the package's produceErrorCode with the request's
// logger built only when it logs, as Server.errorCode.
func (s *Server) produceErrorCode(rc *reqContext, err error) int16 {
	return s.codeOrLog(rc, err, produceErrorCode)
}

// codeOrLog maps err through the table, leaving an unmapped error to
// unmapped with the request's logger, built only then.
func (s *Server) codeOrLog(rc *reqContext, err error, unmapped func(*zerolog.Logger, error) int16) int16 {
	if err == nil {
		return 0
	}
	if ke := lookupCode(err); ke != nil {
		return ke.Code
	}
	return unmapped(s.requestLog(rc), err)
}

// produceErrorCode is errorCode for the produce path, where an unmapped
// error becomes REQUEST_TIMED_OUT instead: the append may have happened,
// and UNKNOWN_SERVER_ERROR there makes clients give up on a record that
// might be written (KAFKA-14034). A timeout tells them the outcome is
// unknown and to retry, which idempotent producers deduplicate.
func produceErrorCode(log *zerolog.Logger, err error) int16 {
	if err == nil {
		return 0
	}
	if ke := lookupCode(err); ke != nil {
		return ke.Code
	}
	log.Error().Err(err).Msg("unmapped produce error answered with REQUEST_TIMED_OUT")
	return kerr.RequestTimedOut.Code
}

// requestLog is the server's logger with the request's remote address and
// correlation id, for the rare line a request logs.
func (s *Server) requestLog(rc *reqContext) *zerolog.Logger {
	l := s.log.With().Str("remote_addr", rc.remoteAddr).Int32("correlation_id", rc.correlationID).Logger()
	return &l
}

// requestEvent adds the request's remote address and correlation id to e,
// a line of the server's logger, which then reads as one of requestLog's:
// a handler logging a line or two needs no logger of its own, and a line
// at a disabled level (e nil) costs nothing.
func requestEvent(e *zerolog.Event, rc *reqContext) *zerolog.Event {
	return e.Str("remote_addr", rc.remoteAddr).Int32("correlation_id", rc.correlationID)
}

// partitionErrorCode maps err from a call on tp's replica, for the
// handlers that read or write one (Produce, Fetch, ListOffsets,
// OffsetForLeaderEpoch, DeleteRecords). partition.ErrUnknownTopicOrPartition
// means this broker holds no replica of tp, which unknownPartitionCode
// answers from the metadata (created as there: nil but for Produce); any
// other error maps through mapErr, Server.errorCode or, for Produce,
// Server.produceErrorCode.
func (s *Server) partitionErrorCode(ctx context.Context, rc *reqContext, tp cluster.TopicPartition, err error,
	mapErr func(*reqContext, error) int16, created *map[string]bool) int16 {
	if errors.Is(err, partition.ErrUnknownTopicOrPartition) {
		if created != nil && s.cfg.AutoCreateTopics && !s.mayCreateTopic(rc, tp.Topic) {
			created = nil
		}
		return s.unknownPartitionCode(ctx, tp, created)
	}
	return mapErr(rc, err)
}

// unknownPartitionCode answers a request for a partition this broker holds
// no replica of: NOT_LEADER_OR_FOLLOWER if the metadata knows the
// partition (the client's metadata is stale), else
// UNKNOWN_TOPIC_OR_PARTITION, creating the topic first when auto-creation
// is on. *created remembers topics already tried in this request (made
// on first use); a nil created means no auto-creation.
func (s *Server) unknownPartitionCode(ctx context.Context, tp cluster.TopicPartition, created *map[string]bool) int16 {
	if topicExists, partitionExists := s.hasPartition(tp); topicExists {
		if partitionExists {
			return kerr.NotLeaderForPartition.Code
		}
		return kerr.UnknownTopicOrPartition.Code
	}
	if s.cfg.AutoCreateTopics && created != nil && !(*created)[tp.Topic] {
		if *created == nil {
			*created = map[string]bool{}
		}
		(*created)[tp.Topic] = true
		if err := s.autoCreateTopic(ctx, tp.Topic); err != nil && !errors.Is(err, cluster.ErrTopicExists) {
			s.log.Warn().Err(err).Str("topic", tp.Topic).Msg("auto-creating topic")
		}
	}
	return kerr.UnknownTopicOrPartition.Code
}

// hasPartition reports whether the metadata knows tp's topic, and tp:
// through PartitionLookup, which copies nothing, when Metadata has it.
func (s *Server) hasPartition(tp cluster.TopicPartition) (topicExists, partitionExists bool) {
	if pl, ok := s.cfg.Metadata.(PartitionLookup); ok {
		return pl.HasPartition(tp)
	}
	info, ok := s.cfg.Metadata.Topic(tp.Topic)
	return ok, ok && hasPartition(info, tp.Partition)
}

// hasPartition reports whether info lists partition p.
func hasPartition(info cluster.TopicInfo, p int32) bool {
	for _, pi := range info.Partitions {
		if pi.Partition == p {
			return true
		}
	}
	return false
}
