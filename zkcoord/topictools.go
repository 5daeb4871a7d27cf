package zkcoord

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/go-zookeeper/zk"

	"github.com/kafkazk/broker/cluster"
)

// Topic tools beside CreateTopic and DeleteTopic: adding partitions to a
// topic (AdminZkClient.addPartitions) and changing its config overrides
// (AdminZkClient.changeTopicConfig). Both write only the topic's znodes;
// the controller creates the new partitions' states from its watch on
// /brokers/topics/<t>, and every broker's cache reads the new
// /config/topics/<t> from its watch.

// maxZkRetries bounds the read-modify-write loops that lose a race with
// another writer of the same znode.
const maxZkRetries = 5

// ErrConcurrentModification is wrapped by CreatePartitions and
// AlterTopicConfig when another writer changed the znode on every attempt.
var ErrConcurrentModification = errors.New("zkcoord: znode modified concurrently")

// PartitionSpec asks for a topic to grow to Count partitions.
type PartitionSpec struct {
	Topic string
	Count int32
	// Assignment, if not nil, lists the replicas of each new partition in
	// order (partition old count, old count+1, ...); else Kafka's
	// assignment continues from the existing partitions.
	Assignment   [][]int32
	ValidateOnly bool
}

// CreatePartitions validates spec as Kafka's AdminManager.createPartitions
// does and, unless ValidateOnly, writes the grown assignment to
// /brokers/topics/<t> (conditionally on the version read). The new
// partitions have the replication factor of partition 0. It returns the
// new assignment of the added partitions. Errors wrap
// cluster.ErrUnknownTopic, ErrInvalidTopic (queued for deletion),
// ErrInvalidPartitions (not an increase), ErrInvalidReplicaAssignment or
// ErrInvalidReplicationFactor.
func (s *Session) CreatePartitions(ctx context.Context, spec PartitionSpec) (map[int32][]int32, error) {
	if err := ValidateTopicName(spec.Topic); err != nil {
		return nil, fmt.Errorf("create partitions of %q: %w", spec.Topic, cluster.ErrUnknownTopic)
	}
	tp := topicPath(spec.Topic)
	for attempt := 0; attempt < maxZkRetries; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		data, stat, err := s.zk.Get(tp)
		if errors.Is(err, zk.ErrNoNode) {
			return nil, fmt.Errorf("create partitions of %s: %w", spec.Topic, cluster.ErrUnknownTopic)
		}
		if err != nil {
			return nil, fmt.Errorf("create partitions of %s: get %s: %w", spec.Topic, tp, err)
		}
		if deleting, _, err := s.zk.Exists(deleteTopicsPath(spec.Topic)); err != nil {
			return nil, fmt.Errorf("create partitions of %s: exists %s: %w", spec.Topic, deleteTopicsPath(spec.Topic), err)
		} else if deleting {
			return nil, fmt.Errorf("%w: topic %s is queued for deletion", cluster.ErrInvalidTopic, spec.Topic)
		}
		full, err := decodeTopicAssignmentFull(spec.Topic, data)
		if err != nil {
			return nil, fmt.Errorf("create partitions of %s: %w", spec.Topic, err)
		}
		if len(full.Adding)+len(full.Removing) > 0 {
			// Kafka's ZkAdminManager.createPartitions refuses too: the
			// write would drop the reassignment from the topic znode.
			return nil, fmt.Errorf("%w: a partition reassignment is in progress for topic %s", cluster.ErrReassignmentInProgress, spec.Topic)
		}
		existing := full.Replicas
		added, err := planPartitions(existing, spec, s.liveBrokerIDs())
		if err != nil {
			return nil, err
		}
		if spec.ValidateOnly {
			return added, nil
		}
		all := maps.Clone(existing)
		maps.Copy(all, added)
		if _, err := s.zk.Set(tp, encodeTopicAssignment(all), stat.Version); errors.Is(err, zk.ErrBadVersion) {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("create partitions of %s: set %s: %w", spec.Topic, tp, err)
		}
		s.log.Info().Str("topic", spec.Topic).Int("old_partitions", len(existing)).Int32("partitions", spec.Count).
			Msg("added partitions")
		return added, nil
	}
	return nil, fmt.Errorf("create partitions of %s: %w", spec.Topic, ErrConcurrentModification)
}

// planPartitions checks spec against the existing assignment and the live
// brokers and returns the assignment of the new partitions.
func planPartitions(existing map[int32][]int32, spec PartitionSpec, live []int32) (map[int32][]int32, error) {
	old := int32(len(existing))
	switch {
	case spec.Count < old:
		return nil, fmt.Errorf("%w: topic currently has %d partitions, %d would not be an increase", cluster.ErrInvalidPartitions, old, spec.Count)
	case spec.Count == old:
		return nil, fmt.Errorf("%w: topic already has %d partitions", cluster.ErrInvalidPartitions, old)
	}
	p0, ok := existing[0]
	if !ok || len(p0) == 0 {
		return nil, fmt.Errorf("%w: topic %s has no replicas for partition 0", cluster.ErrInvalidReplicaAssignment, spec.Topic)
	}
	rf := len(p0)
	if err := checkAssignmentFits(spec.Count, rf); err != nil {
		return nil, err
	}
	add := spec.Count - old
	if spec.Assignment != nil {
		if int32(len(spec.Assignment)) != add {
			return nil, fmt.Errorf("%w: increasing the number of partitions by %d but %d assignments provided",
				cluster.ErrInvalidReplicaAssignment, add, len(spec.Assignment))
		}
		out := make(map[int32][]int32, add)
		for i, replicas := range spec.Assignment {
			p := old + int32(i)
			if len(replicas) != rf {
				return nil, fmt.Errorf("%w: inconsistent replication factor: partition 0 has %d replicas, partition %d %d",
					cluster.ErrInvalidReplicaAssignment, rf, p, len(replicas))
			}
			out[p] = slices.Clone(replicas)
		}
		// The same rules as a new topic's assignment: no duplicate or
		// unknown brokers.
		shifted := make(map[int32][]int32, len(out))
		for p, r := range out {
			shifted[p-old] = r
		}
		if err := validateAssignment(shifted, live); err != nil {
			return nil, err
		}
		return out, nil
	}
	if rf > len(live) {
		return nil, fmt.Errorf("%w: replication factor %d larger than the %d available brokers",
			cluster.ErrInvalidReplicationFactor, rf, len(live))
	}
	// AdminZkClient.addPartitions: the start index is that of the first
	// broker (in id order) at or above partition 0's first replica, and
	// numbering continues at the old partition count.
	startIndex := max(0, slices.IndexFunc(live, func(id int32) bool { return id >= p0[0] }))
	return assignReplicasFrom(live, old, add, int16(rf), startIndex, startIndex), nil
}

// TopicConfigAlter computes a topic's new overrides from its current ones
// (a copy the function may modify), or refuses with an error.
type TopicConfigAlter func(current map[string]string) (map[string]string, error)

// AlterTopicConfig replaces the overrides in /config/topics/<t> with what
// alter returns given the current ones, conditionally on the znode version
// it read (retrying when another writer won), then creates a
// /config/changes/config_change_<seq> notification as Kafka does, and
// refreshes this broker's cache before returning so that its
// DescribeConfigs shows the change at once. The new overrides are checked
// against Kafka's topic keys (cluster.ErrInvalidConfig). With validateOnly
// nothing is written. An unknown topic returns cluster.ErrUnknownTopic.
func (s *Session) AlterTopicConfig(ctx context.Context, topic string, alter TopicConfigAlter, validateOnly bool) error {
	if err := ValidateTopicName(topic); err != nil {
		return fmt.Errorf("alter config of %q: %w", topic, cluster.ErrUnknownTopic)
	}
	cp := configTopicPath(topic)
	for attempt := 0; attempt < maxZkRetries; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if exists, _, err := s.zk.Exists(topicPath(topic)); err != nil {
			return fmt.Errorf("alter config of %s: exists %s: %w", topic, topicPath(topic), err)
		} else if !exists {
			return fmt.Errorf("alter config of %s: %w", topic, cluster.ErrUnknownTopic)
		}
		current := map[string]string{}
		version := int32(-1) // -1: the znode is missing and is created
		data, stat, err := s.zk.Get(cp)
		switch {
		case errors.Is(err, zk.ErrNoNode):
		case err != nil:
			return fmt.Errorf("alter config of %s: get %s: %w", topic, cp, err)
		default:
			version = stat.Version
			if current, err = decodeTopicConfig(topic, data); err != nil {
				return fmt.Errorf("alter config of %s: %w", topic, err)
			}
		}
		next, err := alter(maps.Clone(current))
		if err != nil {
			return err
		}
		if err := s.validateTopicConfig(topic, next); err != nil {
			return err
		}
		if validateOnly {
			return nil
		}
		enc := encodeTopicConfig(next)
		if version < 0 {
			_, err = s.zk.Create(cp, enc, 0)
		} else {
			_, err = s.zk.Set(cp, enc, version)
		}
		if errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNodeExists) {
			continue
		}
		if err != nil {
			return fmt.Errorf("alter config of %s: write %s: %w", topic, cp, err)
		}
		if _, err := s.zk.Create(configChangeSequencePrefix, encodeTopicConfigChange(topic), zk.FlagSequence); err != nil {
			return fmt.Errorf("alter config of %s: create %s: %w", topic, configChangeSequencePrefix, err)
		}
		s.log.Info().Str("topic", topic).Interface("config", next).Msg("changed topic config")
		// Our own watch would bring the change shortly; reading it now
		// makes this broker's answers consistent with the write.
		_ = s.do(ctx, func() error { return s.refreshConfig(topic) })
		return nil
	}
	return fmt.Errorf("alter config of %s: %w", topic, ErrConcurrentModification)
}
