package main

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
	"github.com/kafkazk/broker/zkcoord"
)

// fakeBrokerStore is /config/brokers in memory.
type fakeBrokerStore struct {
	mu       sync.Mutex
	entities map[string]map[string]string
}

func (f *fakeBrokerStore) BrokerConfig(e string) map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.entities[e])
}

func (f *fakeBrokerStore) AlterBrokerConfig(_ context.Context, e string, alter zkcoord.BrokerConfigAlter, validateOnly bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur := maps.Clone(f.entities[e])
	if cur == nil {
		cur = map[string]string{} // as zkcoord hands a missing znode
	}
	next, err := alter(cur)
	if err != nil || validateOnly {
		return err
	}
	f.entities[e] = next
	return nil
}

func (f *fakeBrokerStore) set(e string, m map[string]string) {
	f.mu.Lock()
	f.entities[e] = m
	f.mu.Unlock()
}

type dynHooks struct {
	defaults []cluster.LogConfig
	cleaner  []partition.CleanerConfig
	limits   [][2]int
	throttle [][2]int64
	recovery []int
}

func newTestDynamic(t *testing.T, props string) (*dynamicConfig, *fakeBrokerStore, *dynHooks) {
	t.Helper()
	static, err := loadConfig([]string{writeProps(t, minimal+props)})
	if err != nil {
		t.Fatal(err)
	}
	d := newDynamicConfig(static, zerolog.New(zerolog.NewTestWriter(t)))
	h := &dynHooks{}
	d.onLogDefaults = func(c cluster.LogConfig) { h.defaults = append(h.defaults, c) }
	d.onCleaner = func(c partition.CleanerConfig) { h.cleaner = append(h.cleaner, c) }
	d.onConnectionLimits = func(a, b int) { h.limits = append(h.limits, [2]int{a, b}) }
	d.onRecoveryThreads = func(n int) { h.recovery = append(h.recovery, n) }
	d.ReplicationThrottles = func(l, f int64) { h.throttle = append(h.throttle, [2]int64{l, f}) }
	return d, &fakeBrokerStore{entities: map[string]map[string]string{}}, h
}

// TestDynamicConfigApplies: layers read at attach shape the effective
// config; later changes reach each hook once, and only the hooks of what
// changed.
func TestDynamicConfigApplies(t *testing.T) {
	d, store, h := newTestDynamic(t, "log.retention.hours=1\nlog.cleaner.threads=2\n")
	store.set(cluster.BrokerDefaultEntity, map[string]string{"log.retention.ms": "60000"})
	cfg := d.attach(store)
	if cfg.LogDefaults.RetentionMs != 60000 {
		t.Fatalf("retention at attach %d, want the dynamic default's 60000 over the static hour", cfg.LogDefaults.RetentionMs)
	}
	// The broker's own entity wins over the default; the throttle comes
	// from it only.
	store.set("3", map[string]string{"log.retention.ms": "5000", "message.max.bytes": "2000",
		"log.cleaner.threads": "3", "max.connections": "7", "leader.replication.throttled.rate": "1000"})
	store.set(cluster.BrokerDefaultEntity, map[string]string{"log.retention.ms": "60000", "follower.replication.throttled.rate": "5"})
	d.reload(true)
	if len(h.defaults) != 1 || h.defaults[0].RetentionMs != 5000 || h.defaults[0].MaxMessageBytes != 2000 {
		t.Errorf("log defaults applied %+v", h.defaults)
	}
	if len(h.cleaner) != 1 || h.cleaner[0].Threads != 3 {
		t.Errorf("cleaner applied %+v", h.cleaner)
	}
	if len(h.limits) != 1 || h.limits[0] != [2]int{7, math.MaxInt32} {
		t.Errorf("limits applied %v", h.limits)
	}
	if len(h.throttle) != 1 || h.throttle[0] != [2]int64{1000, math.MaxInt64} {
		t.Errorf("throttles applied %v", h.throttle)
	}
	// Nothing changed: no hook.
	d.reload(true)
	if len(h.defaults)+len(h.cleaner)+len(h.limits)+len(h.throttle) != 4 {
		t.Errorf("a reload without change called hooks: %+v", h)
	}
	// Deleting the broker's override falls back to the default, then to
	// the static hours.
	store.set("3", map[string]string{})
	d.reload(true)
	if got := h.defaults[len(h.defaults)-1].RetentionMs; got != 60000 {
		t.Errorf("retention after deleting the broker override %d", got)
	}
	store.set(cluster.BrokerDefaultEntity, nil)
	d.reload(true)
	if got := h.defaults[len(h.defaults)-1].RetentionMs; got != 3600000 {
		t.Errorf("retention back to the static log.retention.hours: %d", got)
	}
	if got := h.throttle[len(h.throttle)-1]; got != [2]int64{math.MaxInt64, math.MaxInt64} {
		t.Errorf("throttles after deleting them %v", got)
	}
	// start reports the throttles once before any change.
	ctx, cancel := context.WithCancel(context.Background())
	n := len(h.throttle)
	done := make(chan struct{})
	go func() { d.start(ctx); close(done) }()
	time.Sleep(20 * time.Millisecond)
	cancel()
	<-done
	if len(h.throttle) != n+1 {
		t.Errorf("start did not report the throttles: %v", h.throttle)
	}
}

// TestDynamicConfigIgnoresBadZooKeeperValues: what another tool wrote
// that this broker must not apply is dropped, the rest applies.
func TestDynamicConfigIgnoresBadZooKeeperValues(t *testing.T) {
	d, store, _ := newTestDynamic(t, "")
	store.set("3", map[string]string{"log.dirs": "/elsewhere", "log.retention.ms": "soon",
		"message.max.bytes": "-5", "log.retention.bytes": "100", "vendor.plugin.key": "x"})
	cfg := d.attach(store)
	if cfg.LogDirs[0] != "/tmp/a" || cfg.LogDefaults.MaxMessageBytes != 1048588 || cfg.LogDefaults.RetentionBytes != 100 ||
		cfg.LogDefaults.RetentionMs != 7*24*3600*1000 {
		t.Errorf("effective %+v %+v", cfg.LogDirs, cfg.LogDefaults)
	}
	desc := map[string]cluster.BrokerConfigEntry{}
	for _, e := range d.DescribeBroker(true) {
		desc[e.Name] = e
	}
	if e := desc["log.dirs"]; e.Source != cluster.SourceStaticBroker {
		t.Errorf("log.dirs from ZooKeeper described: %+v", e)
	}
	if e := desc["vendor.plugin.key"]; e.Source != cluster.SourceDynamicBroker || e.Value != nil {
		t.Errorf("custom key: %+v", e)
	}
}

func TestDynamicConfigAlterValidation(t *testing.T) {
	d, store, _ := newTestDynamic(t, "log.cleaner.threads=2\nnum.recovery.threads.per.data.dir=2\n")
	d.attach(store)
	ctx := context.Background()
	set := func(k, v string) func(map[string]string) (map[string]string, error) {
		return func(cur map[string]string) (map[string]string, error) { cur[k] = v; return cur, nil }
	}
	if err := d.AlterBroker(ctx, true, set("log.retention.ms", "1000"), false); err != nil {
		t.Fatal(err)
	}
	if got := store.BrokerConfig("3"); got["log.retention.ms"] != "1000" {
		t.Errorf("stored %v", got)
	}
	if err := d.AlterBroker(ctx, false, set("log.retention.bytes", "99"), true); err != nil || store.BrokerConfig(cluster.BrokerDefaultEntity) != nil {
		t.Errorf("validate only: %v %v", err, store.BrokerConfig(cluster.BrokerDefaultEntity))
	}
	for _, c := range []struct{ k, v, msg string }{
		{"max.connections", "-1", "Invalid value -1 for configuration max.connections: Value must be at least 0"},
		{"max.connections.per.ip", "0", "Invalid value 0 for configuration max.connections.per.ip: 0 is outside [1, 2147483647]"},
		{"log.cleaner.threads", "5", "Log cleaner threads cannot be increased to more than double the current value 2"},
		{"log.cleaner.threads", "0", "Log cleaner threads should be at least 1"},
		{"num.recovery.threads.per.data.dir", "5", "Dynamic thread count update validation failed for num.recovery.threads.per.data.dir=5, value should not be greater than double the current value 2"},
		{"num.recovery.threads.per.data.dir", "0", "Invalid value 0 for configuration num.recovery.threads.per.data.dir"},
		{"log.cleaner.min.compaction.lag.ms", "100", ""},
		{"log.cleaner.max.compaction.lag.ms", "10", "Invalid value 10 for configuration log.cleaner.max.compaction.lag.ms"},
		{"num.partitions", "3", "Cannot update these configs dynamically: Set(num.partitions)"},
	} {
		err := d.AlterBroker(ctx, true, set(c.k, c.v), false)
		if c.msg == "" {
			if err != nil {
				t.Errorf("%s=%s: %v", c.k, c.v, err)
			}
			d.reload(false)
			continue
		}
		if !errors.Is(err, cluster.ErrBrokerConfigRefused) || !strings.HasPrefix(err.Error(), c.msg) {
			t.Errorf("%s=%s: %v, want %q", c.k, c.v, err, c.msg)
		}
	}
}

func TestLogLevels(t *testing.T) {
	var buf bytes.Buffer
	levels := newLogLevels(zerolog.InfoLevel)
	root := levels.root(zerolog.New(&buf))
	rm := levels.component(root, "replicas")
	other := levels.component(root, "somewhere")
	rm.Debug().Msg("hidden")
	levels.SetLogLevel("kafka.server.ReplicaManager", "DEBUG")
	rm.Debug().Msg("shown")
	root.Debug().Msg("root hidden")
	other.Debug().Msg("other hidden")
	levels.SetLogLevel("kafka.server.ReplicaManager", "")
	rm.Debug().Msg("hidden again")
	levels.SetLogLevel("root", "WARN")
	rm.Info().Msg("info hidden under root WARN")
	levels.SetLogLevel("root", "OFF")
	rm.Error().Msg("off")
	out := buf.String()
	if strings.Count(out, "\n") != 1 || !strings.Contains(out, `"shown"`) || !strings.Contains(out, `"component":"replicas"`) {
		t.Errorf("log output:\n%s", out)
	}
	got := map[string]string{}
	for _, l := range levels.Loggers() {
		got[l.Name] = l.Level
	}
	if got["root"] != "OFF" || got["kafka.server.ReplicaManager"] != "OFF" || len(got) != len(brokerLoggers)+1 {
		t.Errorf("loggers %v", got)
	}
}

// setKey is an alter that sets one key.
func setKey(k, v string) func(map[string]string) (map[string]string, error) {
	return func(cur map[string]string) (map[string]string, error) { cur[k] = v; return cur, nil }
}

// TestDynamicConfigAlterIgnoresForeignKeys: what another tool left in the
// entity's znode does not block an alter of another key, as Kafka's
// fromPersistentProps reads it: a custom key is kept, a key that needs a
// restart here (Kafka's per-broker listeners, a static key) is dropped
// with an error logged. Only the keys the request sets are refused.
func TestDynamicConfigAlterIgnoresForeignKeys(t *testing.T) {
	for _, c := range []struct {
		foreign map[string]string
		kept    bool
	}{
		{map[string]string{"my.plugin.setting": "x"}, true},
		{map[string]string{"listeners": "PLAINTEXT://:9093"}, false},
		{map[string]string{"log.retention.hours": "1"}, false},
		{map[string]string{"message.max.bytes": "-5"}, false},
	} {
		d, store, _ := newTestDynamic(t, "")
		store.set("3", maps.Clone(c.foreign))
		d.attach(store)
		if err := d.AlterBroker(context.Background(), true, setKey("log.retention.ms", "1000"), false); err != nil {
			t.Errorf("with %v in the znode, SET log.retention.ms: %v", c.foreign, err)
			continue
		}
		got := store.BrokerConfig("3")
		for k, v := range c.foreign {
			if _, ok := got[k]; ok != c.kept || (ok && got[k] != v) {
				t.Errorf("with %v in the znode: stored %v, want the foreign key kept %v", c.foreign, got, c.kept)
			}
		}
		if got["log.retention.ms"] != "1000" {
			t.Errorf("with %v in the znode: stored %v", c.foreign, got)
		}
	}
	// The request's own keys are still checked.
	d, store, _ := newTestDynamic(t, "")
	store.set("3", map[string]string{"my.plugin.setting": "x"})
	d.attach(store)
	for k, msg := range map[string]string{
		"listeners":         "Cannot update these configs dynamically: Set(listeners)",
		"my.other.setting":  "Cannot update these configs dynamically: Set(my.other.setting)",
		"message.max.bytes": "Invalid value -5 for configuration message.max.bytes",
	} {
		v := "PLAINTEXT://:9093"
		if k != "listeners" {
			v = "-5"
		}
		if err := d.AlterBroker(context.Background(), true, setKey(k, v), false); err == nil || !strings.HasPrefix(err.Error(), msg) {
			t.Errorf("SET %s=%s: %v, want %q", k, v, err, msg)
		}
	}
}

// TestDynamicConfigDropsBadValueFromWinningLayer: a value BuildConfig
// refuses is dropped from the layer it came from only, so the other
// layer's valid value of the key applies (it was dropped from both, and
// the static value applied).
func TestDynamicConfigDropsBadValueFromWinningLayer(t *testing.T) {
	d, store, _ := newTestDynamic(t, "")
	store.set(cluster.BrokerDefaultEntity, map[string]string{"max.connections.per.ip": "7"})
	store.set("3", map[string]string{"max.connections.per.ip": "0"}) // parses, but refused without overrides
	cfg := d.attach(store)
	if cfg.MaxConnectionsPerIP != 7 {
		t.Fatalf("max.connections.per.ip %d, want the default entity's 7", cfg.MaxConnectionsPerIP)
	}
}

// TestDynamicConfigAlterThenDescribe: a successful alter is in the
// effective configuration when it returns, without waiting for the
// ZooKeeper notification: DescribeConfigs shows it, a second alter is
// validated against it, and (once started) the hooks have run.
func TestDynamicConfigAlterThenDescribe(t *testing.T) {
	d, store, h := newTestDynamic(t, "log.cleaner.threads=2\n")
	d.attach(store)
	ctx := context.Background()
	if err := d.AlterBroker(ctx, true, setKey("log.retention.ms", "1234"), false); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range d.DescribeBroker(true) {
		if e.Name == "log.retention.ms" {
			found = true
			if e.Value == nil || *e.Value != "1234" || e.Source != cluster.SourceDynamicBroker {
				t.Errorf("described right after the alter: %+v", e)
			}
		}
	}
	if !found || d.config().LogDefaults.RetentionMs != 1234 {
		t.Errorf("effective retention %d after the alter", d.config().LogDefaults.RetentionMs)
	}
	// 2 -> 4 -> 8: each doubles the one before, which the second alter
	// must see (against the stale 2, 8 is more than double).
	if err := d.AlterBroker(ctx, true, setKey("log.cleaner.threads", "4"), false); err != nil {
		t.Fatal(err)
	}
	if err := d.AlterBroker(ctx, true, setKey("log.cleaner.threads", "8"), false); err != nil {
		t.Fatalf("threads 4 -> 8 right after 2 -> 4: %v", err)
	}
	if len(h.defaults)+len(h.cleaner) != 0 {
		t.Fatalf("hooks called before start: %+v", h)
	}
	// Once started, the hooks run before the alter returns; start applied
	// what changed before it.
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { d.start(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	waitUntil(t, "start applied the earlier alters", func() bool {
		d.reloadMu.Lock()
		defer d.reloadMu.Unlock()
		return len(h.cleaner) == 1 && h.cleaner[0].Threads == 8 && len(h.defaults) == 1
	})
	if err := d.AlterBroker(ctx, false, setKey("log.retention.bytes", "777"), false); err != nil {
		t.Fatal(err)
	}
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	if len(h.defaults) != 2 || h.defaults[1].RetentionBytes != 777 {
		t.Errorf("log defaults applied %+v, want the second alter's at once", h.defaults)
	}
}

// TestDynamicConfigUncleanLeaderElectionHook: the controller's hook gets
// unclean.leader.election.enable once from start, then on each change
// (and not on a reload that changes nothing).
func TestDynamicConfigUncleanLeaderElectionHook(t *testing.T) {
	d, store, _ := newTestDynamic(t, "")
	var mu sync.Mutex
	var got []bool
	d.onUncleanLeaderElection = func(b bool) { mu.Lock(); got = append(got, b); mu.Unlock() }
	calls := func() []bool { mu.Lock(); defer mu.Unlock(); return append([]bool(nil), got...) }
	d.attach(store)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.start(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	waitUntil(t, "start's call", func() bool { return len(calls()) == 1 })
	if c := calls(); c[0] {
		t.Fatalf("start reported %v, want the static false", c)
	}
	if err := d.AlterBroker(ctx, false, setKey("unclean.leader.election.enable", "true"), false); err != nil {
		t.Fatal(err)
	}
	if c := calls(); len(c) != 2 || !c[1] {
		t.Fatalf("after enabling: %v", c)
	}
	d.reload(true)
	if err := d.AlterBroker(ctx, false, setKey("log.retention.bytes", "5"), false); err != nil {
		t.Fatal(err)
	}
	if c := calls(); len(c) != 2 {
		t.Fatalf("calls without a change of the key: %v", c)
	}
	store.set(cluster.BrokerDefaultEntity, nil)
	d.changed(cluster.BrokerDefaultEntity)
	waitUntil(t, "the change made elsewhere", func() bool { c := calls(); return len(c) == 3 && !c[2] })
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestDynamicRecoveryThreads: num.recovery.threads.per.data.dir changes
// without a restart within Kafka's DynamicThreadPool bounds (at least half,
// at most double the current value), and reaches the replica manager.
func TestDynamicRecoveryThreads(t *testing.T) {
	d, store, h := newTestDynamic(t, "num.recovery.threads.per.data.dir=4\n")
	d.attach(store)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.start(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	waitUntil(t, "started", func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.started
	})
	set := func(v string) func(map[string]string) (map[string]string, error) {
		return func(cur map[string]string) (map[string]string, error) {
			cur["num.recovery.threads.per.data.dir"] = v
			return cur, nil
		}
	}
	if err := d.AlterBroker(ctx, true, set("1"), false); err == nil || !strings.Contains(err.Error(), "value should be at least half the current value 4") {
		t.Fatalf("4 -> 1: %v", err)
	}
	if err := d.AlterBroker(ctx, true, set("8"), false); err != nil {
		t.Fatal(err)
	}
	d.reloadMu.Lock()
	got := slices.Clone(h.recovery)
	d.reloadMu.Unlock()
	if !slices.Equal(got, []int{8}) {
		t.Fatalf("recovery threads applied %v, want [8]", got)
	}
	if got := d.config().RecoveryThreadsPerDataDir; got != 8 {
		t.Fatalf("effective num.recovery.threads.per.data.dir %d, want 8", got)
	}
}
