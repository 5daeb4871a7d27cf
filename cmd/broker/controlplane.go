package main

import (
	"context"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/group"
	"github.com/kafkazk/broker/partition"
	"github.com/kafkazk/broker/protocol"
	"github.com/kafkazk/broker/zkcoord"
)

// controlPlane applies the controller's requests to this broker: it is
// protocol.ControlPlane, implemented over the replica manager, the metadata
// cache and the ZooKeeper session.
type controlPlane struct {
	brokerID int32
	defaults cluster.LogConfig
	session  *zkcoord.Session
	replicas *partition.Manager
	meta     *protocol.MetadataCache
	groups   *group.Coordinator // told when it gains or loses __consumer_offsets partitions
	log      zerolog.Logger
}

// topicConfig is the effective log config of topic: broker defaults with
// the topic's overrides from /config/topics.
func (c *controlPlane) topicConfig(topic string) cluster.LogConfig {
	overrides, _ := c.session.TopicConfig(topic)
	cfg, err := c.defaults.WithOverrides(overrides)
	if err != nil {
		c.log.Error().Err(err).Str("topic", topic).Msg("topic config invalid; using broker defaults")
		return c.defaults
	}
	return cfg
}

func (c *controlPlane) LeaderAndIsr(_ context.Context, req cluster.LeaderAndIsrRequest) (map[cluster.TopicPartition]error, error) {
	errs := map[cluster.TopicPartition]error{}
	states := make([]partition.PartitionState, 0, len(req.Partitions))
	for _, p := range req.Partitions {
		mine := false
		for _, id := range p.Replicas {
			mine = mine || id == c.brokerID
		}
		if !mine {
			errs[p.TopicPartition] = fmt.Errorf("%w: %s not assigned to broker %d", partition.ErrUnknownTopicOrPartition, p.TopicPartition, c.brokerID)
			continue
		}
		states = append(states, partition.PartitionState{
			TopicPartition: p.TopicPartition, Replicas: p.Replicas, LeaderAndIsr: p.LeaderAndIsr,
			Config:         c.topicConfig(p.TopicPartition.Topic),
			AddingReplicas: p.AddingReplicas, RemovingReplicas: p.RemovingReplicas,
		})
	}
	applied := c.replicas.BecomeLeaderOrFollower(states)
	for tp, res := range applied {
		if res.Err != nil {
			errs[tp] = res.Err
		}
	}
	// After the replicas, and as they applied the states: the coordinator
	// loads a partition it now leads by reading it, and unloads one it
	// lost (Kafka's onLeadershipChange). A state the replica ignored as
	// stale changes nothing, or a stale request could unload the groups
	// of a partition still led here, or start a load of one followed.
	for _, st := range states {
		tp := st.TopicPartition
		res := applied[tp]
		if tp.Topic != group.Topic || c.groups == nil || res.Err != nil || !res.Applied {
			continue
		}
		if res.Role == partition.RoleLeader {
			c.groups.OnBecomeLeader(tp.Partition, res.LeaderEpoch)
		} else {
			c.groups.OnBecomeFollower(tp.Partition)
		}
	}
	return errs, nil
}

// StopReplica stops each partition (partition.Manager.StopReplica, which
// refuses a stale leader epoch) and only then, for a partition of the
// offsets topic whose replica stopped, unloads its groups, as Kafka's
// handleStopReplicaRequest resigns only for partitions stopped without
// error.
func (c *controlPlane) StopReplica(_ context.Context, req cluster.StopReplicaRequest) (map[cluster.TopicPartition]error, error) {
	errs := map[cluster.TopicPartition]error{}
	for _, tp := range req.Partitions {
		epoch, ok := req.LeaderEpochs[tp]
		if !ok {
			epoch = -1 // StopReplica before v3: no epoch to check
		}
		stopped, err := c.replicas.StopReplica(tp, req.DeletePartitions, epoch)
		if err != nil {
			errs[tp] = err
		}
		if stopped && tp.Topic == group.Topic && c.groups != nil {
			c.groups.OnBecomeFollower(tp.Partition)
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
