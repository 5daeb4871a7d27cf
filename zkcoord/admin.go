package zkcoord

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/kafkazk/broker/cluster"
)

// Topic administration (AdminZkClient createTopic/deleteTopic). Any broker
// writes a new topic's config and assignment; the controller, watching
// /brokers/topics, creates the partition states (ctrlstate.go).

// TopicSpec is one topic to create.
type TopicSpec struct {
	Name              string
	NumPartitions     int32             // -1 or 0 with Assignment set
	ReplicationFactor int16             // -1 or 0 with Assignment set
	Assignment        map[int32][]int32 // explicit replica assignment, or nil
	Configs           map[string]string // topic-level overrides
	ValidateOnly      bool
}

// maxTopicNameLength is Kafka's Topic.MaxNameLength.
const maxTopicNameLength = 249

// ValidateTopicName applies Kafka's topic name rules (Topic.validate): not
// empty, not "." or "..", at most 249 characters of [a-zA-Z0-9._-]. The
// error wraps cluster.ErrInvalidTopic.
func ValidateTopicName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: topic name is empty", cluster.ErrInvalidTopic)
	case name == "." || name == "..":
		return fmt.Errorf("%w: topic name cannot be %q", cluster.ErrInvalidTopic, name)
	case len(name) > maxTopicNameLength:
		return fmt.Errorf("%w: topic name is %d characters, more than the maximum %d",
			cluster.ErrInvalidTopic, len(name), maxTopicNameLength)
	}
	for _, c := range []byte(name) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("%w: topic name %q contains a character other than ASCII alphanumerics, '.', '_' and '-'",
				cluster.ErrInvalidTopic, name)
		}
	}
	return nil
}

// validateAssignment checks an explicit assignment as Kafka's CreateTopics
// does: partitions 0..n-1, every list non-empty, of the same length,
// without duplicates, on registered brokers.
func validateAssignment(a map[int32][]int32, live []int32) error {
	rf := -1
	for p := int32(0); p < int32(len(a)); p++ {
		replicas, ok := a[p]
		if !ok {
			return fmt.Errorf("%w: partitions must be numbered 0 to %d", cluster.ErrInvalidReplicaAssignment, len(a)-1)
		}
		if len(replicas) == 0 {
			return fmt.Errorf("%w: partition %d has no replicas", cluster.ErrInvalidReplicaAssignment, p)
		}
		if rf >= 0 && len(replicas) != rf {
			return fmt.Errorf("%w: partition %d has %d replicas, others %d", cluster.ErrInvalidReplicaAssignment, p, len(replicas), rf)
		}
		rf = len(replicas)
		seen := make(map[int32]bool, len(replicas))
		for _, r := range replicas {
			if seen[r] {
				return fmt.Errorf("%w: partition %d lists broker %d twice", cluster.ErrInvalidReplicaAssignment, p, r)
			}
			seen[r] = true
			if !slices.Contains(live, r) {
				return fmt.Errorf("%w: partition %d: unknown broker %d", cluster.ErrInvalidReplicaAssignment, p, r)
			}
		}
	}
	return nil
}

// CreateTopic validates spec (the name, the partitions or assignment, then
// the config overrides against Kafka's topic keys) and, unless
// ValidateOnly, writes the topic in Kafka's order: /config/topics/<t> and a
// config change notification, then /brokers/topics/<t>. It writes no
// partition state: the controller does, when its watch on /brokers/topics
// fires (leader = first live replica, ISR = live replicas in assignment
// order, leader epoch 0), so leaders appear shortly after CreateTopic
// returns, as in Kafka. Errors wrap the cluster.Err* sentinels.
func (s *Session) CreateTopic(ctx context.Context, spec TopicSpec) error {
	if err := ValidateTopicName(spec.Name); err != nil {
		return err
	}
	brokers := s.liveBrokerRacks()
	live := rackBrokerIDs(brokers)
	assignment := spec.Assignment
	if len(assignment) > 0 {
		if err := validateAssignment(assignment, live); err != nil {
			return err
		}
		if spec.NumPartitions > 0 && int(spec.NumPartitions) != len(assignment) ||
			spec.ReplicationFactor > 0 && int(spec.ReplicationFactor) != len(assignment[0]) {
			return fmt.Errorf("%w: both a replica assignment and a partition count or replication factor were given",
				cluster.ErrInvalidReplicaAssignment)
		}
	} else {
		if spec.NumPartitions < 1 {
			return fmt.Errorf("%w: %d partitions, must be at least 1", cluster.ErrInvalidPartitions, spec.NumPartitions)
		}
		if spec.ReplicationFactor < 1 || int(spec.ReplicationFactor) > len(live) {
			return fmt.Errorf("%w: replication factor %d, must be between 1 and the %d live brokers",
				cluster.ErrInvalidReplicationFactor, spec.ReplicationFactor, len(live))
		}
		if err := checkAssignmentFits(spec.NumPartitions, int(spec.ReplicationFactor)); err != nil {
			return err
		}
		// Kafka's default: a random start index and shift; rack-aware
		// when every broker has a broker.rack.
		var err error
		if assignment, err = cluster.AssignReplicas(brokers, 0, spec.NumPartitions, spec.ReplicationFactor, -1, -1); err != nil {
			return fmt.Errorf("create topic %s: %w", spec.Name, err)
		}
	}
	if err := s.checkTopicAbsent(spec.Name); err != nil {
		return err
	}
	if err := s.validateTopicConfig(spec.Name, spec.Configs); err != nil {
		return err
	}
	if spec.ValidateOnly || ctx.Err() != nil {
		return ctx.Err()
	}

	// Config first, so a broker that sees the topic also sees its config.
	cp := configTopicPath(spec.Name)
	cfgData := encodeTopicConfig(spec.Configs)
	if _, err := s.zk.Create(cp, cfgData, 0); errors.Is(err, zk.ErrNodeExists) {
		if _, err := s.zk.Set(cp, cfgData, -1); err != nil {
			return fmt.Errorf("create topic %s: set %s: %w", spec.Name, cp, err)
		}
	} else if err != nil {
		return fmt.Errorf("create topic %s: create %s: %w", spec.Name, cp, err)
	}
	if _, err := s.zk.Create(configChangeSequencePrefix, encodeTopicConfigChange(spec.Name), zk.FlagSequence); err != nil {
		return fmt.Errorf("create topic %s: create %s: %w", spec.Name, configChangeSequencePrefix, err)
	}
	tp := topicPath(spec.Name)
	if _, err := s.zk.Create(tp, encodeTopicAssignment(assignment), 0); err != nil {
		if errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", tp, cluster.ErrTopicExists)
		}
		return fmt.Errorf("create topic %s: create %s: %w", spec.Name, tp, err)
	}
	s.log.Info().Str("topic", spec.Name).Int("partitions", len(assignment)).Msg("created topic")
	return nil
}

// checkTopicAbsent fails if the topic exists or its name collides with an
// existing topic once '.' is read as '_' (AdminZkClient validateTopicCreate),
// since both map to the same metric names.
func (s *Session) checkTopicAbsent(name string) error {
	topics, _, err := s.zk.Children(topicsPath)
	if err != nil {
		return fmt.Errorf("create topic %s: children %s: %w", name, topicsPath, err)
	}
	norm := strings.ReplaceAll(name, ".", "_")
	for _, t := range topics {
		if t == name {
			return fmt.Errorf("topic %s: %w", name, cluster.ErrTopicExists)
		}
		if strings.ReplaceAll(t, ".", "_") == norm {
			return fmt.Errorf("%w: topic %q collides with existing topic %q", cluster.ErrInvalidTopic, name, t)
		}
	}
	return nil
}

// DeleteTopic asks the controller to delete a topic by creating
// /admin/delete_topics/<t>; the controller removes the topic's znodes and
// then the request. An unknown topic returns cluster.ErrUnknownTopic; a
// topic already marked for deletion returns nil.
func (s *Session) DeleteTopic(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := ValidateTopicName(name); err != nil {
		// A name Kafka could never have created cannot exist (and must
		// not reach a znode path).
		return fmt.Errorf("delete topic %q: %w", name, cluster.ErrUnknownTopic)
	}
	tp := topicPath(name)
	exists, _, err := s.zk.Exists(tp)
	if err != nil {
		return fmt.Errorf("delete topic: exists %s: %w", tp, err)
	}
	if !exists {
		return fmt.Errorf("delete topic %s: %w", name, cluster.ErrUnknownTopic)
	}
	dp := deleteTopicsPath(name)
	if _, err := s.zk.Create(dp, nil, 0); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("delete topic: create %s: %w", dp, err)
	}
	s.log.Info().Str("topic", name).Msg("topic marked for deletion")
	return nil
}

// maxAssignmentBytes is ZooKeeper's default jute.maxbuffer: a znode's data
// cannot be larger, so a topic's assignment must fit in it.
const maxAssignmentBytes = 1 << 20

// checkAssignmentFits refuses a partition count whose assignment JSON
// could not be stored in /brokers/topics/<t> (about 10 bytes a partition
// plus 6 a replica), before any work is done for it: a request for a
// billion partitions must fail at once, not assign them first.
func checkAssignmentFits(partitions int32, rf int) error {
	if est := int64(partitions) * int64(10+6*rf); est > maxAssignmentBytes {
		return fmt.Errorf("%w: %d partitions with %d replicas would need about %d bytes in /brokers/topics, over ZooKeeper's %d-byte znode limit",
			cluster.ErrInvalidPartitions, partitions, rf, est, maxAssignmentBytes)
	}
	return nil
}

// validateTopicConfig checks a topic's overrides, on top of the broker's
// topic defaults (Config.TopicDefaults): an unknown key, a bad value or a
// conflict (min.compaction.lag.ms above max.compaction.lag.ms) is an error
// wrapping cluster.ErrInvalidConfig that names the key.
func (s *Session) validateTopicConfig(topic string, overrides map[string]string) error {
	defaults := cluster.DefaultLogConfig()
	if d := s.topicDefaults.Load(); d != nil {
		defaults = *d
	} else if s.cfg.TopicDefaults != nil {
		defaults = *s.cfg.TopicDefaults
	}
	if _, err := defaults.WithOverrides(overrides); err != nil {
		return fmt.Errorf("topic %s: %w", topic, err)
	}
	return nil
}
