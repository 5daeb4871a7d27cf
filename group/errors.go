package group

import "errors"

// Errors returned by Coordinator methods. protocol maps each to a Kafka
// error code in its one table (protocol/errors.go).
var (
	// ErrNotCoordinator: this broker does not lead the group's
	// __consumer_offsets partition (or stopped leading it while the request
	// waited). The client looks the coordinator up again.
	ErrNotCoordinator = errors.New("group: not coordinator")
	// ErrCoordinatorLoadInProgress: this broker leads the partition but is
	// still reading it; the client retries.
	ErrCoordinatorLoadInProgress = errors.New("group: coordinator load in progress")
	// ErrCoordinatorNotAvailable: the group is being removed, or the offsets
	// partition cannot take writes right now (too few in-sync replicas);
	// the client looks the coordinator up again.
	ErrCoordinatorNotAvailable = errors.New("group: coordinator not available")
	// ErrInvalidGroupID: an empty group id where one is required.
	ErrInvalidGroupID = errors.New("group: invalid group id")
	// ErrUnknownMemberID: the member id is not in the group (expired,
	// removed by a rebalance, or the group does not exist).
	ErrUnknownMemberID = errors.New("group: unknown member id")
	// ErrMemberIDRequired: a first JoinGroup at v4+ (KIP-394); the result
	// carries the member id to join with.
	ErrMemberIDRequired = errors.New("group: member id required")
	// ErrIllegalGeneration: the request's generation is not the group's.
	ErrIllegalGeneration = errors.New("group: illegal generation")
	// ErrRebalanceInProgress: the group is rebalancing; the member must
	// rejoin.
	ErrRebalanceInProgress = errors.New("group: rebalance in progress")
	// ErrInvalidSessionTimeout: the session timeout is outside
	// [group.min.session.timeout.ms, group.max.session.timeout.ms].
	ErrInvalidSessionTimeout = errors.New("group: invalid session timeout")
	// ErrInconsistentGroupProtocol: the protocol type or protocols do not
	// match the group's.
	ErrInconsistentGroupProtocol = errors.New("group: inconsistent group protocol")
	// ErrFencedInstanceID: a static member (group.instance.id) was replaced
	// by a newer member id with the same instance id.
	ErrFencedInstanceID = errors.New("group: fenced instance id")
	// ErrNonEmptyGroup: DeleteGroups of a group that still has members.
	ErrNonEmptyGroup = errors.New("group: group is not empty")
	// ErrGroupIDNotFound: DeleteGroups or DeleteOffsets of a group that
	// does not exist.
	ErrGroupIDNotFound = errors.New("group: group id not found")
	// ErrGroupSubscribedToTopic: DeleteOffsets of a partition of a topic
	// the group's members subscribe to.
	ErrGroupSubscribedToTopic = errors.New("group: group is subscribed to the topic")
	// ErrOffsetMetadataTooLarge: a commit's metadata string is longer than
	// offset.metadata.max.bytes (4096).
	ErrOffsetMetadataTooLarge = errors.New("group: offset metadata too large")
	// ErrInvalidCommitOffsetSize: the commit's records are too large for the
	// offsets topic.
	ErrInvalidCommitOffsetSize = errors.New("group: invalid commit offset size")
	// ErrRequestTimedOut: a commit or group write was appended but not
	// replicated within offsets.commit.timeout.ms; it may still commit.
	ErrRequestTimedOut = errors.New("group: request timed out")
	// ErrUnstableOffsetCommit (UNSTABLE_OFFSET_COMMIT, 88): FetchOffsets
	// with requireStable (OffsetFetch v7+, KIP-447) of a partition with a
	// transactional commit waiting for its transaction's marker, or a
	// commit still waiting for replication; the consumer retries.
	ErrUnstableOffsetCommit = errors.New("group: unstable offset commit")
	// ErrInvalidProducerIDMapping (INVALID_PRODUCER_ID_MAPPING, 49):
	// CommitTxnOffsets without a producer id (negative).
	ErrInvalidProducerIDMapping = errors.New("group: invalid producer id mapping")
)
