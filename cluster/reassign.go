package cluster

import "errors"

// PartitionReassignment is a partition being reassigned (KIP-455), as
// ListPartitionReassignments reports it: Replicas is the whole replica set
// while the reassignment runs (target first, then the original replicas it
// drops), AddingReplicas and RemovingReplicas what it adds and removes.
type PartitionReassignment struct {
	TopicPartition   TopicPartition
	Replicas         []int32
	AddingReplicas   []int32
	RemovingReplicas []int32
}

// ElectionType is an ElectLeaders request's election (KIP-460).
type ElectionType int8

const (
	// ElectPreferred moves leadership to the first replica of the
	// assignment if it is alive and in the ISR.
	ElectPreferred ElectionType = 0
	// ElectUnclean elects a leader for a partition without a live one,
	// from its live in-sync replicas or, failing that, any live replica.
	ElectUnclean ElectionType = 1
)

// Errors of the reassignment and election operations of the controller.
var (
	// ErrNoReassignmentInProgress is a cancel of a partition not being
	// reassigned (NO_REASSIGNMENT_IN_PROGRESS).
	ErrNoReassignmentInProgress = errors.New("cluster: no partition reassignment in progress")
	// ErrElectionNotNeeded is an election for a partition whose leader is
	// already the one the election would pick (ELECTION_NOT_NEEDED).
	ErrElectionNotNeeded = errors.New("cluster: leader election not needed")
	// ErrPreferredLeaderNotAvailable is a preferred election whose
	// preferred replica is not alive or not in the ISR
	// (PREFERRED_LEADER_NOT_AVAILABLE).
	ErrPreferredLeaderNotAvailable = errors.New("cluster: preferred leader not available")
	// ErrEligibleLeadersNotAvailable is an unclean election without a live
	// replica (ELIGIBLE_LEADERS_NOT_AVAILABLE).
	ErrEligibleLeadersNotAvailable = errors.New("cluster: eligible leaders not available")
	// ErrTopicBeingDeleted is an election for a topic being deleted
	// (INVALID_TOPIC_EXCEPTION, as Kafka answers).
	ErrTopicBeingDeleted = errors.New("cluster: topic is being deleted")
	// ErrReassignmentInProgress is a change refused while a partition of
	// the topic is being reassigned (REASSIGNMENT_IN_PROGRESS).
	ErrReassignmentInProgress = errors.New("cluster: partition reassignment in progress")
)
