package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
	"github.com/kafkazk/broker/protocol"
	"github.com/kafkazk/broker/zkcoord"
)

// metadataSource is the part of the ZooKeeper metadata cache the state
// applier reads.
type metadataSource interface {
	Topics() []cluster.TopicInfo
}

// replicaHost is the part of the replica manager the state applier drives.
type replicaHost interface {
	ApplyPartitionStates(states []partition.PartitionState) error
	StopReplicas(tps []cluster.TopicPartition, remove bool) error
	Hosted() []cluster.TopicPartition
}

// stateApplier hands the replica manager the state of every partition this
// broker is assigned, each time the metadata cache changes, and removes
// replicas of deleted topics. (With replication, the controller's
// LeaderAndIsr requests take over this role.)
type stateApplier struct {
	brokerID int32
	defaults cluster.LogConfig
	meta     metadataSource
	replicas replicaHost
	log      zerolog.Logger
}

func (a *stateApplier) run(ctx context.Context, changes <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-changes:
			if err := a.apply(); err != nil {
				a.log.Error().Err(err).Msg("apply partition states")
			}
		}
	}
}

// apply makes the replica manager match the metadata.
func (a *stateApplier) apply() error {
	var states []partition.PartitionState
	assigned := map[cluster.TopicPartition]bool{}
	var errs []error
	for _, t := range a.meta.Topics() {
		cfg, err := a.defaults.WithOverrides(t.Config)
		if err != nil {
			errs = append(errs, fmt.Errorf("topic %s config: %w", t.Name, err))
			cfg = a.defaults
		}
		for _, p := range t.Partitions {
			tp := cluster.TopicPartition{Topic: t.Name, Partition: p.Partition}
			mine := false
			for _, id := range p.Replicas {
				mine = mine || id == a.brokerID
			}
			if !mine {
				continue
			}
			assigned[tp] = true
			states = append(states, partition.PartitionState{TopicPartition: tp, Replicas: p.Replicas, LeaderAndIsr: p.State, Config: cfg})
		}
	}
	if err := a.replicas.ApplyPartitionStates(states); err != nil {
		errs = append(errs, err)
	}
	var gone []cluster.TopicPartition
	for _, tp := range a.replicas.Hosted() {
		if !assigned[tp] {
			gone = append(gone, tp)
		}
	}
	if len(gone) > 0 {
		a.log.Info().Int("partitions", len(gone)).Msg("removing replicas no longer assigned")
		if err := a.replicas.StopReplicas(gone, true); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// admin adapts the ZooKeeper session to protocol.Admin.
type admin struct {
	session       *zkcoord.Session
	defaults      cluster.LogConfig
	deleteEnabled bool
}

func (a *admin) CreateTopic(ctx context.Context, req protocol.CreateTopicRequest) error {
	if _, err := a.defaults.WithOverrides(req.Configs); err != nil {
		return err
	}
	return a.session.CreateTopic(ctx, zkcoord.TopicSpec{
		Name: req.Name, NumPartitions: req.NumPartitions, ReplicationFactor: req.ReplicationFactor,
		Assignment: req.Assignment, Configs: req.Configs, ValidateOnly: req.ValidateOnly,
	})
}

func (a *admin) DeleteTopic(ctx context.Context, name string) error {
	if !a.deleteEnabled {
		return fmt.Errorf("%w: delete.topic.enable is false", cluster.ErrTopicDeletionDisabled)
	}
	return a.session.DeleteTopic(ctx, name)
}

func (a *admin) TopicConfig(name string) ([]cluster.ConfigEntry, error) {
	overrides, ok := a.session.TopicConfig(name)
	if !ok {
		return nil, fmt.Errorf("%w: %s", cluster.ErrUnknownTopic, name)
	}
	cfg, err := a.defaults.WithOverrides(overrides)
	if err != nil {
		return nil, err
	}
	return cfg.Entries(overrides), nil
}
