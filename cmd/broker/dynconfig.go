package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"strconv"
	"sync"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
	"github.com/kafkazk/broker/protocol"
	"github.com/kafkazk/broker/zkcoord"
)

// brokerConfigStore is where the dynamic broker configs live:
// zkcoord.Session (/config/brokers/<id> and <default>).
type brokerConfigStore interface {
	BrokerConfig(entity string) map[string]string
	AlterBrokerConfig(ctx context.Context, entity string, alter zkcoord.BrokerConfigAlter, validateOnly bool) error
}

// dynamicConfig is Kafka's DynamicBrokerConfig: the broker's effective
// configuration is server.properties overridden by
// /config/brokers/<default> and then /config/brokers/<id>
// (cluster.BrokerConfigLayers.Merged), parsed by BuildConfig like the
// static one. It serves protocol.BrokerConfigs, and applies every change
// it reads without a restart through its hooks:
//
//   - the topic defaults (log.retention.ms, log.retention.bytes,
//     message.max.bytes, log.cleanup.policy, log.cleaner.delete.retention.ms,
//     ... every cluster-wide log key) reach every hosted partition without
//     a topic override, and the topic config checks (onLogDefaults);
//   - log.cleaner.threads, .dedupe.buffer.size, .io.max.bytes.per.second
//     and .backoff.ms reach the cleaner (onCleaner);
//   - max.connections and max.connections.per.ip reach the server
//     (onConnectionLimits);
//   - num.recovery.threads.per.data.dir reaches the replica manager
//     (onRecoveryThreads), within Kafka's DynamicThreadPool bounds;
//   - unclean.leader.election.enable, the broker-wide default the
//     controller reads for topics without an override, reaches
//     onUncleanLeaderElection (also called once by start);
//   - leader.replication.throttled.rate and
//     follower.replication.throttled.rate, read from the broker's own
//     entity only as Kafka's BrokerConfigHandler reads them, go to
//     ReplicationThrottles.
//
// Keys that need a restart are refused when an alter sets them; if some
// come from ZooKeeper anyway (written by another tool, or Kafka's
// per-broker listeners) they are ignored with an error logged, as Kafka's
// fromPersistentProps ignores them, and so are dynamic values that do not
// parse; an alter of the entity drops them from the znode and goes on.
// Keys this broker does not know (Kafka's custom configs) are kept.
//
// A successful alter reloads the configuration before it returns, so a
// DescribeConfigs or alter that follows sees it; the hooks run then too
// once start has run (before it, start applies what changed). A change
// made elsewhere (another broker, a tool) arrives through changed and is
// applied by start's loop, asynchronously.
type dynamicConfig struct {
	brokerID int32
	static   map[string]string
	log      zerolog.Logger

	// ReplicationThrottles is called with leader.replication.throttled.rate
	// and follower.replication.throttled.rate (bytes per second,
	// math.MaxInt64 when unset: unthrottled) once by start and again on
	// every change of either. Set it before start.
	ReplicationThrottles func(leaderRate, followerRate int64)

	// The hooks, set before start; nil ones are skipped.
	onLogDefaults      func(cluster.LogConfig)
	onCleaner          func(partition.CleanerConfig)
	onConnectionLimits func(maxConnections, maxConnectionsPerIP int)
	onRecoveryThreads  func(n int)
	// onUncleanLeaderElection receives unclean.leader.election.enable of
	// the effective configuration: once from start, then on each change.
	onUncleanLeaderElection func(enable bool)

	wake chan struct{} // buffer 1: the store has news

	// reloadMu serializes reloads and hook calls (start's loop and
	// AlterBroker's synchronous reload), so the hooks see the changes in
	// order. Taken before mu.
	reloadMu sync.Mutex

	mu      sync.Mutex
	store   brokerConfigStore
	layers  cluster.BrokerConfigLayers
	current *Config
	leader  int64 // the throttle rates of current
	follow  int64
	// applied, appliedLeader and appliedFollow are what the hooks last
	// received (the components started with applied).
	applied       *Config
	appliedLeader int64
	appliedFollow int64
	started       bool // start ran: the hooks are set and may be called
}

func newDynamicConfig(static *Config, log zerolog.Logger) *dynamicConfig {
	return &dynamicConfig{
		brokerID: static.BrokerID, static: static.StaticProps, log: log,
		wake:    make(chan struct{}, 1),
		current: static, leader: math.MaxInt64, follow: math.MaxInt64,
		applied: static, appliedLeader: math.MaxInt64, appliedFollow: math.MaxInt64,
		layers: cluster.BrokerConfigLayers{Static: static.StaticProps,
			DynamicDefault: map[string]string{}, DynamicBroker: map[string]string{}},
	}
}

// changed is zkcoord's OnBrokerConfigChange: it must not block.
func (d *dynamicConfig) changed(string) {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

func (d *dynamicConfig) entity(perBroker bool) string {
	if perBroker {
		return strconv.Itoa(int(d.brokerID))
	}
	return cluster.BrokerDefaultEntity
}

// attach reads the dynamic layers from store and returns the effective
// configuration, for the components started after it.
func (d *dynamicConfig) attach(store brokerConfigStore) *Config {
	d.mu.Lock()
	d.store = store
	d.mu.Unlock()
	d.reload(false)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.applied = d.current // what the components are started with
	return d.current
}

// config is the current effective configuration.
func (d *dynamicConfig) config() *Config {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.current
}

// logDefaults is the current topic defaults.
func (d *dynamicConfig) logDefaults() cluster.LogConfig { return d.config().LogDefaults }

// brokerLayers is a copy of the current layers.
func (d *dynamicConfig) brokerLayers() cluster.BrokerConfigLayers {
	d.mu.Lock()
	defer d.mu.Unlock()
	return cluster.BrokerConfigLayers{Static: d.layers.Static,
		DynamicDefault: maps.Clone(d.layers.DynamicDefault), DynamicBroker: maps.Clone(d.layers.DynamicBroker)}
}

// start applies the throttle rates and unclean.leader.election.enable
// once, then what changed since attach, then every change until ctx ends.
func (d *dynamicConfig) start(ctx context.Context) {
	d.reloadMu.Lock()
	d.mu.Lock()
	d.started = true
	l, f, cfg := d.leader, d.follow, d.current
	d.appliedLeader, d.appliedFollow = l, f
	d.mu.Unlock()
	if d.ReplicationThrottles != nil {
		d.ReplicationThrottles(l, f)
	}
	if d.onUncleanLeaderElection != nil {
		d.onUncleanLeaderElection(cfg.LogDefaults.UncleanLeaderElection)
	}
	d.applyLocked(true)
	d.reloadMu.Unlock()
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
			d.reload(true)
		}
	}
}

// buildDynamic parses the merged layers as BuildConfig does, with the
// quota keys (which server.properties does not take) and keys unknown to
// this broker left out; the listener.name.<listener>.* keys come from
// server.properties alone (the listeners' security needs them, and no
// dynamic layer may change a JAAS config or a keystore: CVE-2023-25194).
func buildDynamic(l cluster.BrokerConfigLayers) (*Config, error) {
	props := l.Merged()
	for name := range props {
		if k, ok := cluster.LookupBrokerKey(name); !ok || k.Mode == cluster.ModeQuota {
			delete(props, name)
		}
	}
	for name, v := range l.Static {
		if listenerPrefixedKey(name) {
			props[name] = v
		}
	}
	cfg, err := BuildConfig(props)
	if err != nil {
		return nil, err
	}
	cfg.StaticProps = l.Static
	return cfg, nil
}

// throttleRate is a quota key of the broker's own entity, or unthrottled.
func throttleRate(broker map[string]string, key string) int64 {
	if v, ok := broker[key]; ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
			return n
		}
	}
	return math.MaxInt64
}

// usable drops from a layer read from ZooKeeper what Kafka's
// fromPersistentProps drops: keys that need a restart, and values that do
// not parse, each logged. Keys this broker does not know are kept, and
// described, as Kafka keeps custom configs; nothing reads them.
func (d *dynamicConfig) usable(entity string, layer map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range layer {
		if _, known := cluster.LookupBrokerKey(k); !known {
			out[k] = v
			continue
		}
		if err := cluster.CheckBrokerConfigUpdate(map[string]string{k: v}); err != nil {
			d.log.Error().Str("entity", entity).Str("key", k).Err(err).Msg("ignoring dynamic broker config")
			continue
		}
		out[k] = v
	}
	return out
}

// reload reads the layers from the store, rebuilds the configuration and,
// with apply, calls the hooks of what changed since they were last called.
func (d *dynamicConfig) reload(apply bool) {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	d.mu.Lock()
	store := d.store
	d.mu.Unlock()
	if store == nil {
		return
	}
	layers := cluster.BrokerConfigLayers{Static: d.static,
		DynamicDefault: d.usable(cluster.BrokerDefaultEntity, store.BrokerConfig(cluster.BrokerDefaultEntity)),
		DynamicBroker:  d.usable(d.entity(true), store.BrokerConfig(d.entity(true)))}
	cfg, err := buildDynamic(layers)
	for attempt := 0; err != nil && attempt < 64; attempt++ {
		// A value that parses but that BuildConfig refuses (a range, or
		// a conflict with another key): drop the key it names from the
		// layer whose value is the effective one (the broker's own over
		// the default, so a valid default of the key still applies), as
		// Kafka's removeInvalidConfigs, and try again.
		var ce *ConfigError
		if !errors.As(err, &ce) {
			break
		}
		layer := layers.DynamicBroker
		if _, ok := layer[ce.Key]; !ok {
			layer = layers.DynamicDefault
		}
		if _, ok := layer[ce.Key]; !ok {
			break
		}
		d.log.Error().Err(err).Str("key", ce.Key).Msg("ignoring invalid dynamic broker config")
		delete(layer, ce.Key)
		cfg, err = buildDynamic(layers)
	}
	if err != nil {
		d.log.Error().Err(err).Msg("dynamic broker configs could not be applied; keeping the current ones")
		return
	}
	leader := throttleRate(layers.DynamicBroker, "leader.replication.throttled.rate")
	follow := throttleRate(layers.DynamicBroker, "follower.replication.throttled.rate")
	d.mu.Lock()
	d.current, d.layers, d.leader, d.follow = cfg, layers, leader, follow
	d.mu.Unlock()
	if apply {
		d.applyLocked(false)
	}
}

// applyLocked calls the hooks of what differs between the current
// configuration and the one they last received (the unclean election
// hook unless start called it already). Caller holds reloadMu.
func (d *dynamicConfig) applyLocked(fromStart bool) {
	d.mu.Lock()
	cfg, old := d.current, d.applied
	leader, follow, oldLeader, oldFollow := d.leader, d.follow, d.appliedLeader, d.appliedFollow
	d.applied, d.appliedLeader, d.appliedFollow = cfg, leader, follow
	d.mu.Unlock()
	if cfg.LogDefaults != old.LogDefaults && d.onLogDefaults != nil {
		d.log.Info().Interface("log_defaults", cfg.LogDefaults).Msg("applying dynamic topic defaults")
		d.onLogDefaults(cfg.LogDefaults)
	}
	if u := cfg.LogDefaults.UncleanLeaderElection; !fromStart && u != old.LogDefaults.UncleanLeaderElection && d.onUncleanLeaderElection != nil {
		d.log.Info().Bool("unclean.leader.election.enable", u).Msg("applying dynamic unclean leader election default")
		d.onUncleanLeaderElection(u)
	}
	if cleanerConfig(cfg) != cleanerConfig(old) && d.onCleaner != nil {
		d.onCleaner(cleanerConfig(cfg))
	}
	if (cfg.MaxConnections != old.MaxConnections || cfg.MaxConnectionsPerIP != old.MaxConnectionsPerIP) && d.onConnectionLimits != nil {
		d.log.Info().Int("max.connections", cfg.MaxConnections).Int("max.connections.per.ip", cfg.MaxConnectionsPerIP).
			Msg("applying dynamic connection limits")
		d.onConnectionLimits(cfg.MaxConnections, cfg.MaxConnectionsPerIP)
	}
	if cfg.RecoveryThreadsPerDataDir != old.RecoveryThreadsPerDataDir && d.onRecoveryThreads != nil {
		d.log.Info().Int("num.recovery.threads.per.data.dir", cfg.RecoveryThreadsPerDataDir).Msg("applying dynamic recovery threads")
		d.onRecoveryThreads(cfg.RecoveryThreadsPerDataDir)
	}
	if (leader != oldLeader || follow != oldFollow) && d.ReplicationThrottles != nil {
		d.log.Info().Int64("leader.replication.throttled.rate", leader).Int64("follower.replication.throttled.rate", follow).
			Msg("applying replication throttle rates")
		d.ReplicationThrottles(leader, follow)
	}
}

// DescribeBroker is protocol.BrokerConfigs.
func (d *dynamicConfig) DescribeBroker(perBroker bool) []cluster.BrokerConfigEntry {
	return d.brokerLayers().BrokerEntries(perBroker)
}

// AlterBroker is protocol.BrokerConfigs: Kafka's
// ZkAdminManager.alterBrokerConfigs. The entity's current content is read
// as fromPersistentProps reads it (keys that need a restart and values
// that do not parse are dropped, with an error logged; custom keys are
// kept), alter edits it, and the keys the request sets are validated
// (DynamicBrokerConfig.validate: keys, types, then the whole configuration
// built with the new layer, and the cleaner thread rule of
// LogCleaner.validateReconfiguration) before the write. After a write the
// configuration is reloaded before returning (see dynamicConfig).
func (d *dynamicConfig) AlterBroker(ctx context.Context, perBroker bool, alter func(map[string]string) (map[string]string, error), validateOnly bool) error {
	d.mu.Lock()
	store := d.store
	d.mu.Unlock()
	if store == nil {
		return errors.New("dynamic broker configs are not available yet")
	}
	entity := d.entity(perBroker)
	err := store.AlterBrokerConfig(ctx, entity, func(cur map[string]string) (map[string]string, error) {
		base := d.fromPersistent(perBroker, entity, cur)
		next, err := alter(maps.Clone(base))
		if err != nil {
			return nil, err
		}
		if next == nil {
			next = map[string]string{}
		}
		if err := d.checkLayer(perBroker, base, next); err != nil {
			return nil, err
		}
		return next, nil
	}, validateOnly)
	if err != nil || validateOnly {
		return err
	}
	d.mu.Lock()
	started := d.started
	d.mu.Unlock()
	d.reload(started)
	return nil
}

// fromPersistent is Kafka's fromPersistentProps for an alter: the
// entity's content read from ZooKeeper without what reload ignores (keys
// that need a restart, values that do not parse, and values the
// configuration build refuses: a range, or a conflict with another key),
// each logged, so that only what the request sets can refuse it. Custom
// keys are kept.
func (d *dynamicConfig) fromPersistent(perBroker bool, entity string, cur map[string]string) map[string]string {
	base := d.usable(entity, cur)
	layers := d.brokerLayers()
	for attempt := 0; attempt < 64; attempt++ {
		if perBroker {
			layers.DynamicBroker = base
		} else {
			layers.DynamicDefault = base
		}
		_, err := buildDynamic(layers)
		var ce *ConfigError
		if err == nil || !errors.As(err, &ce) {
			break
		}
		if _, ok := base[ce.Key]; !ok {
			break
		}
		d.log.Error().Err(err).Str("entity", entity).Str("key", ce.Key).Msg("dropping invalid dynamic broker config")
		delete(base, ce.Key)
	}
	return base
}

// checkLayer validates next, edited from base, as the new content of one
// dynamic layer: the keys next sets to a value base does not hold must be
// dynamic and parse; then the configuration built with next must be valid.
func (d *dynamicConfig) checkLayer(perBroker bool, base, next map[string]string) error {
	set := map[string]string{}
	for k, v := range next {
		if old, ok := base[k]; !ok || old != v {
			set[k] = v
		}
	}
	if err := cluster.CheckBrokerConfigUpdate(set); err != nil {
		return err
	}
	layers := d.brokerLayers()
	if perBroker {
		layers.DynamicBroker = next
	} else {
		layers.DynamicDefault = next
	}
	cfg, err := buildDynamic(layers)
	if err != nil {
		var ce *ConfigError
		if errors.As(err, &ce) && ce.Key != "" {
			v, ok := next[ce.Key]
			if !ok {
				v = layers.Merged()[ce.Key]
			}
			return &cluster.BrokerConfigError{Msg: fmt.Sprintf("Invalid value %s for configuration %s: %s", v, ce.Key, ce.Problem)}
		}
		return &cluster.BrokerConfigError{Msg: "Invalid dynamic configuration: " + err.Error()}
	}
	// Kafka's DynamicThreadPool.validateReconfiguration.
	if cur, n := d.config().RecoveryThreadsPerDataDir, cfg.RecoveryThreadsPerDataDir; n != cur {
		const key = "num.recovery.threads.per.data.dir"
		prefix := fmt.Sprintf("Dynamic thread count update validation failed for %s=%d", key, n)
		switch {
		case n <= 0:
			return &cluster.BrokerConfigError{Msg: prefix + ", value should be at least 1"}
		case n < cur/2:
			return &cluster.BrokerConfigError{Msg: fmt.Sprintf("%s, value should be at least half the current value %d", prefix, cur)}
		case n > cur*2:
			return &cluster.BrokerConfigError{Msg: fmt.Sprintf("%s, value should not be greater than double the current value %d", prefix, cur)}
		}
	}
	cur := d.config().LogCleanerThreads
	if n := cfg.LogCleanerThreads; n != cur {
		switch {
		case n < 1:
			return &cluster.BrokerConfigError{Msg: "Log cleaner threads should be at least 1"}
		case n < cur/2:
			return &cluster.BrokerConfigError{Msg: fmt.Sprintf("Log cleaner threads cannot be reduced to less than half the current value %d", cur)}
		case n > cur*2:
			return &cluster.BrokerConfigError{Msg: fmt.Sprintf("Log cleaner threads cannot be increased to more than double the current value %d", cur)}
		}
	}
	return nil
}

var _ protocol.BrokerConfigs = (*dynamicConfig)(nil)
