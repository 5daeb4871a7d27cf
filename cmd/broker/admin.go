package main

import (
	"context"
	"fmt"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/protocol"
	"github.com/kafkazk/broker/zkcoord"
)

// admin adapts the ZooKeeper session to protocol.Admin. It hands topic
// config overrides to zkcoord unchecked: CreateTopic and AlterTopicConfig
// check them there (cluster.ErrInvalidConfig, naming the key) before any
// write to /config/topics/<t>, and on ValidateOnly too, as Kafka's
// AdminZkClient does.
type admin struct {
	session       *zkcoord.Session
	defaults      cluster.LogConfig
	dyn           *dynamicConfig    // when set, its topic defaults and layers replace defaults and static
	static        map[string]string // server.properties, for DescribeConfigs' sources
	deleteEnabled bool
}

func (a *admin) CreateTopic(ctx context.Context, req protocol.CreateTopicRequest) error {
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
	if a.dyn != nil {
		cfg, err := a.dyn.logDefaults().WithOverrides(overrides)
		if err != nil {
			return nil, err
		}
		return cfg.EntriesWithBrokerLayers(overrides, a.dyn.brokerLayers()), nil
	}
	cfg, err := a.defaults.WithOverrides(overrides)
	if err != nil {
		return nil, err
	}
	return cfg.Entries(overrides, a.static), nil
}

func (a *admin) CreatePartitions(ctx context.Context, topic string, count int32, assignment [][]int32, validateOnly bool) error {
	_, err := a.session.CreatePartitions(ctx, zkcoord.PartitionSpec{
		Topic: topic, Count: count, Assignment: assignment, ValidateOnly: validateOnly,
	})
	return err
}

func (a *admin) AlterTopicConfig(ctx context.Context, topic string, alter func(map[string]string) (map[string]string, error), validateOnly bool) error {
	return a.session.AlterTopicConfig(ctx, topic, alter, validateOnly)
}

var (
	_ protocol.PartitionAdmin = (*admin)(nil)
	_ protocol.ConfigAdmin    = (*admin)(nil)
)
