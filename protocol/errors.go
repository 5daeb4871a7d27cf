package protocol

import (
	"context"
	"errors"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
)

// errorCodes is the one table from domain errors to Kafka error codes.
// Lookups use errors.Is, so wrapped errors map like their sentinel. Order
// matters only if an error wraps two sentinels: the first row wins.
var errorCodes = []struct {
	err  error
	code *kerr.Error
}{
	{partition.ErrNotLeader, kerr.NotLeaderForPartition},
	{partition.ErrUnknownTopicOrPartition, kerr.UnknownTopicOrPartition},
	{partition.ErrNotEnoughReplicas, kerr.NotEnoughReplicas},
	{partition.ErrNotEnoughReplicasAfterAppend, kerr.NotEnoughReplicasAfterAppend},
	{partition.ErrRequestTimedOut, kerr.RequestTimedOut},
	{partition.ErrOffsetOutOfRange, kerr.OffsetOutOfRange},
	{partition.ErrCorruptMessage, kerr.CorruptMessage},
	{partition.ErrInvalidRecord, kerr.InvalidRecord},
	{partition.ErrMessageTooLarge, kerr.MessageTooLarge},
	{partition.ErrRecordListTooLarge, kerr.RecordListTooLarge},
	{partition.ErrOutOfOrderSequence, kerr.OutOfOrderSequenceNumber},
	{partition.ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch},
	{partition.ErrUnknownProducerID, kerr.UnknownProducerID},
	{partition.ErrFencedLeaderEpoch, kerr.FencedLeaderEpoch},
	{partition.ErrUnknownLeaderEpoch, kerr.UnknownLeaderEpoch},
	{partition.ErrStorage, kerr.KafkaStorageError},

	{cluster.ErrTopicExists, kerr.TopicAlreadyExists},
	{cluster.ErrUnknownTopic, kerr.UnknownTopicOrPartition},
	{cluster.ErrInvalidTopic, kerr.InvalidTopicException},
	{cluster.ErrInvalidPartitions, kerr.InvalidPartitions},
	{cluster.ErrInvalidReplicationFactor, kerr.InvalidReplicationFactor},
	{cluster.ErrInvalidReplicaAssignment, kerr.InvalidReplicaAssignment},
	{cluster.ErrInvalidConfig, kerr.InvalidConfig},
	{cluster.ErrNotController, kerr.NotController},

	// A wait bounded by the request's timeout, or cut short because the
	// server is closing: the client should retry, as after any timeout.
	{context.DeadlineExceeded, kerr.RequestTimedOut},
	{context.Canceled, kerr.RequestTimedOut},
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
