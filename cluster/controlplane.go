package cluster

// The controller's requests to brokers, as value types. zkcoord's
// controller builds them; protocol encodes them as Kafka's LeaderAndIsr,
// UpdateMetadata and StopReplica requests (kmsg) and decodes them on the
// receiving broker. Every request carries the controller's epoch, so that a
// broker refuses a deposed controller, and the receiver's broker epoch, so
// that a request meant for an earlier incarnation of the broker is refused.

// PartitionAssignment is the replication state of one partition as the
// controller tells it.
type PartitionAssignment struct {
	TopicPartition TopicPartition
	Replicas       []int32 // assignment order
	LeaderAndIsr   LeaderAndIsr
	// IsNew is true when the partition was just created (Kafka's is_new).
	IsNew bool
	// AddingReplicas and RemovingReplicas are the replicas a reassignment
	// in progress adds to and removes from Replicas (KIP-455; LeaderAndIsr
	// v3+); both empty when the partition is not being reassigned.
	AddingReplicas   []int32
	RemovingReplicas []int32
}

// LeaderAndIsrRequest tells a broker which of its replicas lead and which
// follow (Kafka's LeaderAndIsr, API key 4).
type LeaderAndIsrRequest struct {
	ControllerID    int32
	ControllerEpoch int32
	BrokerEpoch     int64 // the receiver's epoch, -1 to skip the check
	Partitions      []PartitionAssignment
	// LiveLeaders are the brokers leading the partitions above, with their
	// endpoints, so followers can reach them.
	LiveLeaders []Broker
}

// UpdateMetadataRequest replaces a broker's view of the cluster (Kafka's
// UpdateMetadata, API key 6).
type UpdateMetadataRequest struct {
	ControllerID    int32
	ControllerEpoch int32
	BrokerEpoch     int64
	// Partitions carries the state of every partition the update covers;
	// Offline in each entry lists replicas on dead brokers.
	Partitions  []TopicPartitionInfo
	LiveBrokers []Broker
}

// TopicPartitionInfo is a PartitionInfo that names its topic.
type TopicPartitionInfo struct {
	Topic string
	PartitionInfo
}

// StopReplicaRequest tells a broker to stop replicas, and to delete them
// when DeletePartitions is set (Kafka's StopReplica, API key 5).
type StopReplicaRequest struct {
	ControllerID     int32
	ControllerEpoch  int32
	BrokerEpoch      int64
	DeletePartitions bool
	Partitions       []TopicPartition
	// LeaderEpochs holds, per partition, the leader epoch the stop belongs
	// to (-2 for a deletion), as StopReplica v3 does.
	LeaderEpochs map[TopicPartition]int32
}
