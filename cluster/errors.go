package cluster

import "errors"

// Errors of topic administration, returned by implementations of the
// protocol's Admin interface and mapped to Kafka error codes in protocol.
var (
	// ErrTopicExists is returned when creating a topic that already exists.
	ErrTopicExists = errors.New("cluster: topic already exists")
	// ErrUnknownTopic is returned for a topic that does not exist.
	ErrUnknownTopic = errors.New("cluster: unknown topic or partition")
	// ErrInvalidTopic is returned for an illegal topic name.
	ErrInvalidTopic = errors.New("cluster: invalid topic name")
	// ErrInvalidPartitions is returned for a partition count below 1.
	ErrInvalidPartitions = errors.New("cluster: invalid number of partitions")
	// ErrInvalidReplicationFactor is returned when the replication factor is
	// below 1 or above the number of live brokers.
	ErrInvalidReplicationFactor = errors.New("cluster: invalid replication factor")
	// ErrInvalidReplicaAssignment is returned for a manual assignment that
	// names unknown brokers, repeats a broker, or has uneven lengths.
	ErrInvalidReplicaAssignment = errors.New("cluster: invalid replica assignment")
	// ErrInvalidConfig is returned for an unknown topic config key or a bad value.
	ErrInvalidConfig = errors.New("cluster: invalid config")
	// ErrTopicDeletionDisabled is returned by DeleteTopic when
	// delete.topic.enable is false.
	ErrTopicDeletionDisabled = errors.New("cluster: topic deletion disabled")
	// ErrNotController is returned by controller-only operations on a broker
	// that is not the controller.
	ErrNotController = errors.New("cluster: not controller")
)

// Errors of the controller channel.
var (
	// ErrStaleControllerEpoch is returned for a request from a controller
	// whose epoch is older than one already seen (STALE_CONTROLLER_EPOCH).
	ErrStaleControllerEpoch = errors.New("cluster: stale controller epoch")
	// ErrStaleBrokerEpoch is returned for a request addressed to an older
	// incarnation of the broker (STALE_BROKER_EPOCH).
	ErrStaleBrokerEpoch = errors.New("cluster: stale broker epoch")
	// ErrBrokerNotAvailable is returned when a broker cannot be reached.
	ErrBrokerNotAvailable = errors.New("cluster: broker not available")
)
