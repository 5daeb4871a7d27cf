package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/group"
	"github.com/kafkazk/broker/partition"
	"github.com/kafkazk/broker/protocol"
	"github.com/kafkazk/broker/txn"
	"github.com/kafkazk/broker/zkcoord"
)

// controlPlane applies the controller's requests to this broker: it is
// protocol.ControlPlane, implemented over the replica manager, the metadata
// cache and the ZooKeeper session.
type controlPlane struct {
	brokerID int32
	defaults cluster.LogConfig
	dyn      *dynamicConfig // when set, its topic defaults replace defaults
	session  *zkcoord.Session
	replicas *partition.Manager
	meta     *protocol.MetadataCache
	groups   *group.Coordinator // told when it gains or loses __consumer_offsets partitions
	txns     *txn.Coordinator   // told when it gains or loses __transaction_state partitions
	log      zerolog.Logger

	// beforeApply, when set (tests), runs between building a
	// LeaderAndIsr's partition states and applying them.
	beforeApply func()
}

// logDefaults is the current broker defaults of topic configs.
func (c *controlPlane) logDefaults() cluster.LogConfig {
	if c.dyn != nil {
		return c.dyn.logDefaults()
	}
	return c.defaults
}

// topicConfig is the effective log config of topic: broker defaults with
// the topic's overrides from /config/topics.
func (c *controlPlane) topicConfig(topic string) cluster.LogConfig {
	overrides, _ := c.session.TopicConfig(topic)
	defaults := c.logDefaults()
	cfg, err := defaults.WithOverrides(overrides)
	if err != nil {
		c.log.Error().Err(err).Str("topic", topic).Msg("topic config invalid; using broker defaults")
		return defaults
	}
	return cfg
}

func (c *controlPlane) LeaderAndIsr(_ context.Context, req cluster.LeaderAndIsrRequest) (map[cluster.TopicPartition]error, error) {
	errs := map[cluster.TopicPartition]error{}
	defaults := c.logDefaults()
	states := make([]partition.PartitionState, 0, len(req.Partitions))
	// One effective config per topic, not per partition: each is a copy
	// of the topic's overrides merged over the defaults.
	configs := map[string]cluster.LogConfig{}
	for _, p := range req.Partitions {
		mine := false
		for _, id := range p.Replicas {
			mine = mine || id == c.brokerID
		}
		if !mine {
			errs[p.TopicPartition] = fmt.Errorf("%w: %s not assigned to broker %d", partition.ErrUnknownTopicOrPartition, p.TopicPartition, c.brokerID)
			continue
		}
		cfg, ok := configs[p.TopicPartition.Topic]
		if !ok {
			cfg = c.topicConfig(p.TopicPartition.Topic)
			configs[p.TopicPartition.Topic] = cfg
		}
		states = append(states, partition.PartitionState{
			TopicPartition: p.TopicPartition, Replicas: p.Replicas, LeaderAndIsr: p.LeaderAndIsr,
			Config:         cfg,
			AddingReplicas: p.AddingReplicas, RemovingReplicas: p.RemovingReplicas,
			IsNew: p.IsNew,
		})
	}
	if c.beforeApply != nil {
		c.beforeApply()
	}
	applied := c.replicas.BecomeLeaderOrFollower(states)
	for tp, res := range applied {
		if res.Err != nil {
			errs[tp] = res.Err
		}
	}
	// A dynamic default that changed while the states were built or
	// applied was pushed to the hosted topics, which did not list the
	// partitions still opening here: give them the current config.
	// A change after this comparison finds them hosted.
	if c.logDefaults() != defaults {
		pushed := map[string]bool{}
		for _, st := range states {
			if t := st.TopicPartition.Topic; !pushed[t] && applied[st.TopicPartition].Err == nil {
				pushed[t] = true
				c.replicas.UpdateConfig(t, c.topicConfig(t))
			}
		}
	}
	// After the replicas, and as they applied the states: a coordinator
	// (groups for __consumer_offsets, transactions for
	// __transaction_state) loads a partition it now leads by reading it,
	// and unloads one it lost (Kafka's onLeadershipChange). A state the
	// replica ignored as stale changes nothing, or a stale request could
	// unload the groups or transactions of a partition still led here, or
	// start a load of one followed.
	for _, st := range states {
		tp := st.TopicPartition
		res := applied[tp]
		coord := c.coordinatorOf(tp.Topic)
		if coord != nil && errors.Is(res.Err, partition.ErrStorage) {
			// The replica is on a log dir that failed: it serves nothing,
			// so neither does the coordinator of its groups or
			// transactions, which the controller moves with its leader.
			coord.OnBecomeFollower(tp.Partition)
			continue
		}
		if coord == nil || res.Err != nil || !res.Applied {
			continue
		}
		if res.Role == partition.RoleLeader {
			coord.OnBecomeLeader(tp.Partition, res.LeaderEpoch)
		} else {
			coord.OnBecomeFollower(tp.Partition)
		}
	}
	return errs, nil
}

// partitionCoordinator is a coordinator over the partitions of an
// internal topic that it leads: group.Coordinator and txn.Coordinator.
type partitionCoordinator interface {
	OnBecomeLeader(p int32, leaderEpoch int32)
	OnBecomeFollower(p int32)
}

// coordinatorOf is the coordinator of topic's partitions, or nil.
func (c *controlPlane) coordinatorOf(topic string) partitionCoordinator {
	switch {
	case topic == group.Topic && c.groups != nil:
		return c.groups
	case topic == txn.Topic && c.txns != nil:
		return c.txns
	}
	return nil
}

// StopReplica stops each partition (partition.Manager.StopReplica, which
// refuses a stale leader epoch) and only then, for a partition of the
// offsets or transaction state topic whose replica stopped, unloads its
// groups or transactions, as Kafka's handleStopReplicaRequest resigns only
// for partitions stopped without error.
func (c *controlPlane) StopReplica(_ context.Context, req cluster.StopReplicaRequest) (map[cluster.TopicPartition]error, error) {
	errs := map[cluster.TopicPartition]error{}
	stops := make([]partition.StopRequest, len(req.Partitions))
	for i, tp := range req.Partitions {
		epoch, ok := req.LeaderEpochs[tp]
		if !ok {
			epoch = -1 // StopReplica before v3: no epoch to check
		}
		stops[i] = partition.StopRequest{TopicPartition: tp, LeaderEpoch: epoch}
	}
	// The logs close side by side (num.recovery.threads.per.data.dir per
	// log dir); the coordinators hear of the stops after, in order.
	for i, res := range c.replicas.StopReplicaBatch(stops, req.DeletePartitions) {
		tp := req.Partitions[i]
		if res.Err != nil {
			errs[tp] = res.Err
		}
		if coord := c.coordinatorOf(tp.Topic); res.Stopped && coord != nil {
			coord.OnBecomeFollower(tp.Partition)
		}
	}
	return errs, nil
}

func (c *controlPlane) UpdateMetadata(_ context.Context, req cluster.UpdateMetadataRequest) error {
	c.meta.Apply(req)
	return nil
}

func (c *controlPlane) ControlledShutdown(ctx context.Context, brokerID int32, brokerEpoch int64) ([]cluster.TopicPartition, error) {
	return c.session.ControlledShutdown(ctx, brokerID, brokerEpoch)
}

// VerifyController checks a controller request's sender against
// /controller and /controller_epoch (protocol.ControllerVerifier).
func (c *controlPlane) VerifyController(controllerID, controllerEpoch int32) error {
	return c.session.VerifyController(controllerID, controllerEpoch)
}
