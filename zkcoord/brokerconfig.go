package zkcoord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/go-zookeeper/zk"

	"github.com/kafkazk/broker/cluster"
)

// Dynamic broker configs (KIP-226), ZooKeeper side. /config/brokers/<id>
// holds one broker's dynamic settings and /config/brokers/<default> the
// cluster-wide defaults, both in the ConfigEntityZNode format
// {"version":1,"config":{...}}. A writer follows each write with a
// /config/changes/config_change_<seq> notification
// {"version":2,"entity_path":"brokers/<entity>"}, as Kafka's
// AdminZkClient.changeBrokerConfig does, so that Kafka's own brokers and
// tools see it. This broker keeps a data watch on its own znode and on
// <default> (re-armed by every read, like /config/topics/<t>), so it sees
// every change, notified or not, and calls Config.OnBrokerConfigChange.

// configBrokerPath is /config/brokers/<entity>: a broker id or <default>.
func configBrokerPath(entity string) string { return configBrokersPath + "/" + entity }

func encodeBrokerConfig(cfg map[string]string) []byte {
	if cfg == nil {
		cfg = map[string]string{}
	}
	return marshal(topicConfig{Version: 1, Config: cfg})
}

func decodeBrokerConfig(entity string, data []byte) (map[string]string, error) {
	var c topicConfig
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, decodeErr(configBrokerPath(entity), err)
	}
	if c.Config == nil {
		c.Config = map[string]string{}
	}
	return c.Config, nil
}

func encodeBrokerConfigChange(entity string) []byte {
	return marshal(configChangeNotification{Version: 2, EntityPath: "brokers/" + entity})
}

// ErrInvalidBrokerEntity is returned for a broker config entity that is
// neither a broker id nor cluster.BrokerDefaultEntity.
var ErrInvalidBrokerEntity = errors.New("zkcoord: invalid broker config entity")

func checkBrokerEntity(entity string) error {
	if entity == cluster.BrokerDefaultEntity {
		return nil
	}
	if id, err := strconv.ParseInt(entity, 10, 32); err != nil || id < 0 || strconv.FormatInt(id, 10) != entity {
		return fmt.Errorf("%w: %q", ErrInvalidBrokerEntity, entity)
	}
	return nil
}

// ownBrokerEntities are the entities whose configs this broker applies.
func (s *Session) ownBrokerEntities() []string {
	return []string{cluster.BrokerDefaultEntity, strconv.Itoa(int(s.cfg.BrokerID))}
}

// BrokerConfig returns the dynamic configs of entity (this broker's id or
// cluster.BrokerDefaultEntity) as last read from ZooKeeper; empty if the
// znode is missing. Other entities are not cached (nil).
func (s *Session) BrokerConfig(entity string) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.brokerConfigs[entity])
}

// refreshBrokerConfigs reads this broker's and the default dynamic configs.
func (s *Session) refreshBrokerConfigs() error {
	var first error
	for _, e := range s.ownBrokerEntities() {
		if err := s.refreshBrokerConfig(e); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// refreshBrokerConfig reads /config/brokers/<entity>, re-arming its watch,
// and calls OnBrokerConfigChange when its content changed. A payload that
// does not parse is logged and read as empty (a later write heals it).
// Caller is the session goroutine.
func (s *Session) refreshBrokerConfig(entity string) error {
	p := configBrokerPath(entity)
	data, _, ok, err := s.readData(watchKey{kind: wBrokerConfig, topic: entity}, p)
	if err != nil {
		return err
	}
	cfg := map[string]string{}
	if ok {
		if cfg, err = decodeBrokerConfig(entity, data); err != nil {
			s.log.Error().Err(err).Str("zk_path", p).Msg("ignoring broker config")
			cfg = map[string]string{}
		}
	}
	s.mu.Lock()
	if s.brokerConfigs == nil {
		s.brokerConfigs = map[string]map[string]string{}
	}
	old, known := s.brokerConfigs[entity]
	same := known && maps.Equal(old, cfg)
	s.brokerConfigs[entity] = cfg
	s.mu.Unlock()
	if same {
		return nil
	}
	s.log.Info().Str("zk_path", p).Int("keys", len(cfg)).Msg("read dynamic broker config")
	if s.cfg.OnBrokerConfigChange != nil {
		s.cfg.OnBrokerConfigChange(entity)
	}
	return nil
}

// SetTopicDefaults replaces the topic defaults that CreateTopic and
// AlterTopicConfig check overrides against (Config.TopicDefaults), after
// a dynamic change of the broker's log.* defaults.
func (s *Session) SetTopicDefaults(c cluster.LogConfig) { s.topicDefaults.Store(&c) }

// BrokerConfigAlter computes an entity's new dynamic configs from its
// current ones (a copy it may modify), or refuses with an error.
type BrokerConfigAlter func(current map[string]string) (map[string]string, error)

// AlterBrokerConfig replaces /config/brokers/<entity> (a broker id or
// cluster.BrokerDefaultEntity) with what alter returns given its current
// content, conditionally on the znode version it read (retrying when
// another writer won), then creates the config_change_ notification, as
// Kafka's AdminZkClient.changeBrokerConfig. alter validates: its error is
// returned as is, and with validateOnly nothing is written. When entity is
// one this broker applies, its cache is refreshed before returning, so
// that its DescribeConfigs shows the change at once (cmd/broker reloads
// from it); should that read fail (ctx ends, the session is down) the
// error is logged and the watch brings the change a little later.
func (s *Session) AlterBrokerConfig(ctx context.Context, entity string, alter BrokerConfigAlter, validateOnly bool) error {
	if err := checkBrokerEntity(entity); err != nil {
		return err
	}
	p := configBrokerPath(entity)
	for attempt := 0; attempt < maxZkRetries; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		current := map[string]string{}
		version := int32(-1) // -1: the znode is missing and is created
		data, stat, err := s.zk.Get(p)
		switch {
		case errors.Is(err, zk.ErrNoNode):
		case err != nil:
			return fmt.Errorf("alter broker config %s: get %s: %w", entity, p, err)
		default:
			version = stat.Version
			if current, err = decodeBrokerConfig(entity, data); err != nil {
				return fmt.Errorf("alter broker config %s: %w", entity, err)
			}
		}
		next, err := alter(maps.Clone(current))
		if err != nil {
			return err
		}
		if validateOnly {
			return nil
		}
		enc := encodeBrokerConfig(next)
		if version < 0 {
			_, err = s.zk.Create(p, enc, 0)
		} else {
			_, err = s.zk.Set(p, enc, version)
		}
		if errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNodeExists) {
			continue
		}
		if err != nil {
			return fmt.Errorf("alter broker config %s: write %s: %w", entity, p, err)
		}
		if _, err := s.zk.Create(configChangeSequencePrefix, encodeBrokerConfigChange(entity), zk.FlagSequence); err != nil {
			return fmt.Errorf("alter broker config %s: create %s: %w", entity, configChangeSequencePrefix, err)
		}
		s.log.Info().Str("zk_path", p).Strs("keys", sortedKeys(next)).Msg("changed dynamic broker config")
		for _, own := range s.ownBrokerEntities() {
			if own == entity {
				if err := s.do(ctx, func() error { return s.refreshBrokerConfig(entity) }); err != nil {
					s.log.Warn().Err(err).Str("zk_path", p).Msg("re-reading the broker config after writing it; the watch will")
				}
			}
		}
		return nil
	}
	return fmt.Errorf("alter broker config %s: %w", entity, ErrConcurrentModification)
}

// sortedKeys lists m's keys in order, for logs (values may be secrets).
func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
