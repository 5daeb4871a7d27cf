package main

import (
	"context"

	"github.com/kafkazk/broker/cluster"
)

// The controller's admin operations (protocol.ClusterControl), served by
// the ZooKeeper session's controller.

func (a *admin) AlterPartitionReassignments(ctx context.Context, reqs map[cluster.TopicPartition][]int32) (map[cluster.TopicPartition]error, error) {
	return a.session.AlterPartitionReassignments(ctx, reqs)
}

func (a *admin) ListPartitionReassignments(ctx context.Context, tps []cluster.TopicPartition) ([]cluster.PartitionReassignment, error) {
	return a.session.ListPartitionReassignments(ctx, tps)
}

func (a *admin) ElectLeaders(ctx context.Context, typ cluster.ElectionType, tps []cluster.TopicPartition) (map[cluster.TopicPartition]error, error) {
	return a.session.ElectLeaders(ctx, typ, tps)
}
