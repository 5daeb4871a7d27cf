package main

import (
	"fmt"
	"slices"
)

// brokerRack is a broker and its broker.rack ("" when it has none), the
// input of replica assignment.
type brokerRack struct {
	ID   int32
	Rack string
}

// assignReplicas places partitions [firstPartition, firstPartition+partitions)
// with rf replicas each on brokers, as Kafka's AdminUtils does, from the given
// start index and replica shift.
//
// Stand-in with cluster.AssignReplicas's signature until the offdel branch
// (which owns cluster/assign.go, rack-aware) is merged: it is Kafka's
// rack-unaware algorithm only.
var assignReplicas = func(brokers []brokerRack, firstPartition, partitions int32, rf int16, startIndex, shift int) (map[int32][]int32, error) {
	n := len(brokers)
	if rf <= 0 {
		return nil, fmt.Errorf("INVALID_REPLICATION_FACTOR: Replication factor must be larger than 0.")
	}
	if int(rf) > n {
		return nil, fmt.Errorf("INVALID_REPLICATION_FACTOR: Replication factor: %d larger than available brokers: %d.", rf, n)
	}
	ids := make([]int32, n)
	for i, b := range brokers {
		ids[i] = b.ID
	}
	slices.Sort(ids)
	out := make(map[int32][]int32, partitions)
	p := firstPartition
	for range partitions {
		if p > 0 && int(p)%n == 0 {
			shift++
		}
		first := (int(p) + startIndex) % n
		replicas := []int32{ids[first]}
		for j := range int(rf) - 1 {
			s := 1 + (shift+j)%(n-1)
			replicas = append(replicas, ids[(first+s)%n])
		}
		out[p] = replicas
		p++
	}
	return out, nil
}
