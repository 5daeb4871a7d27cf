package main

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkazk/broker/cluster"
)

// assignReplicas is cluster.AssignReplicas (Kafka's
// AdminUtils.assignReplicasToBrokers, rack-aware when every broker has a
// rack) with its errors named as Kafka names them.
func assignReplicas(brokers []cluster.BrokerRack, firstPartition, partitions int32, rf int16, startIndex, shift int) (map[int32][]int32, error) {
	out, err := cluster.AssignReplicas(brokers, firstPartition, partitions, rf, startIndex, shift)
	switch {
	case err == nil:
		return out, nil
	case errors.Is(err, cluster.ErrInvalidReplicationFactor):
		return nil, fmt.Errorf("%w: %v", kerr.InvalidReplicationFactor, err)
	case errors.Is(err, cluster.ErrInvalidPartitions):
		return nil, fmt.Errorf("%w: %v", kerr.InvalidPartitions, err)
	default:
		return nil, fmt.Errorf("%w: %v", kerr.InvalidReplicaAssignment, err)
	}
}
