package main

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kafkazk/broker/partition"
)

func writeProps(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const minimal = "broker.id=3\nzookeeper.connect=127.0.0.1:2181/kafka\nlog.dirs=/tmp/a,/tmp/b\n"

func TestConfigDefaults(t *testing.T) {
	cfg, err := loadConfig([]string{writeProps(t, minimal)})
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"broker.id", cfg.BrokerID, int32(3)},
		{"listeners", cfg.Listeners[0], Listener{Name: "PLAINTEXT", Host: "", Port: 9092}},
		{"advertised defaults to listeners", len(cfg.AdvertisedListeners), 1},
		{"log.dirs", strings.Join(cfg.LogDirs, ","), "/tmp/a,/tmp/b"},
		{"zookeeper.session.timeout.ms", cfg.ZooKeeperSessionTimeout, 18 * time.Second},
		{"num.partitions", cfg.NumPartitions, int32(1)},
		{"default.replication.factor", cfg.DefaultReplicationFactor, int16(1)},
		{"auto.create.topics.enable", cfg.AutoCreateTopics, true},
		{"socket.request.max.bytes", cfg.SocketRequestMaxBytes, int32(104857600)},
		{"offsets.topic.segment.bytes", cfg.OffsetsTopicSegmentBytes, int64(104857600)},
		{"offsets.retention.minutes", cfg.OffsetsRetention, 7 * 24 * time.Hour},
		{"offsets.commit.timeout.ms", cfg.OffsetsCommitTimeout, 5 * time.Second},
		{"group.initial.rebalance.delay.ms", cfg.GroupInitialRebalanceDelay, 3 * time.Second},
		{"group.min.session.timeout.ms", cfg.GroupMinSessionTimeout, 6 * time.Second},
		{"group.max.session.timeout.ms", cfg.GroupMaxSessionTimeout, 30 * time.Minute},
		{"replica.lag.time.max.ms", cfg.ReplicaLagTimeMax, 30 * time.Second},
		{"message.max.bytes", cfg.LogDefaults.MaxMessageBytes, int64(1048588)},
		{"log.segment.bytes", cfg.LogDefaults.SegmentBytes, int64(1 << 30)},
		{"log.retention.hours", cfg.LogDefaults.RetentionMs, int64(168 * 3600 * 1000)},
		{"log.retention.bytes", cfg.LogDefaults.RetentionBytes, int64(-1)},
		{"min.insync.replicas", cfg.LogDefaults.MinInsyncReplicas, int64(1)},
		{"unclean.leader.election.enable", cfg.LogDefaults.UncleanLeaderElection, false},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestConfigOverridesAndPrecedence(t *testing.T) {
	path := writeProps(t, minimal+"log.retention.hours=1\nlog.retention.minutes=5\n"+
		"listeners=PLAINTEXT://127.0.0.1:9092,EXTERNAL://0.0.0.0:19092\n"+
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT\n"+
		"advertised.listeners=PLAINTEXT://broker1:9092,EXTERNAL://127.0.0.1:19092\n")
	cfg, err := loadConfig([]string{path, "--override", "log.retention.ms=1234", "--override=min.insync.replicas=2"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.LogDefaults.RetentionMs != 1234 {
		t.Errorf("log.retention.ms should win over minutes and hours: got %d", cfg.LogDefaults.RetentionMs)
	}
	if cfg.LogDefaults.MinInsyncReplicas != 2 {
		t.Errorf("override min.insync.replicas: got %d", cfg.LogDefaults.MinInsyncReplicas)
	}
	if len(cfg.Listeners) != 2 || cfg.AdvertisedListeners[1] != (Listener{Name: "EXTERNAL", Host: "127.0.0.1", Port: 19092}) {
		t.Errorf("listeners: %+v advertised %+v", cfg.Listeners, cfg.AdvertisedListeners)
	}
	if cfg.InterBrokerListenerName != "PLAINTEXT" {
		t.Errorf("inter.broker.listener.name defaults to the first listener, got %q", cfg.InterBrokerListenerName)
	}
}

func TestConfigErrorsNameTheKey(t *testing.T) {
	cases := []struct {
		name, body string
		args       []string
		key        string
	}{
		{"unknown key", minimal + "log.retention.dayz=3\n", nil, "log.retention.dayz"},
		{"bad integer", minimal + "num.partitions=many\n", nil, "num.partitions"},
		{"zero partitions", minimal + "num.partitions=0\n", nil, "num.partitions"},
		{"bad bool", minimal + "auto.create.topics.enable=yes\n", nil, "auto.create.topics.enable"},
		{"no broker id", "zookeeper.connect=x:1\n", nil, "broker.id"},
		{"no zookeeper", "broker.id=1\n", nil, "zookeeper.connect"},
		{"bad listener", minimal + "listeners=127.0.0.1:9092\n", nil, "listeners"},
		{"unmapped listener", minimal + "listeners=EXTERNAL://:9093\n", nil, "listeners"},
		{"unknown protocol", minimal + "listener.security.protocol.map=PLAINTEXT:KERBEROS\n", nil, "listener.security.protocol.map"},
		{"bad override", minimal, []string{"--override", "replica.lag.time.max.ms=-5"}, "replica.lag.time.max.ms"},
		{"unknown override", minimal, []string{"--override", "foo.bar=1"}, "foo.bar"},
		{"fetch wait above lag", minimal + "replica.fetch.wait.max.ms=40000\n", nil, "replica.fetch.wait.max.ms"},
		{"bad timestamp type", minimal + "log.message.timestamp.type=Now\n", nil, "log.message.timestamp.type"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := loadConfig(append([]string{writeProps(t, c.body)}, c.args...))
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("want a ConfigError, got %v", err)
			}
			if ce.Key != c.key || !strings.Contains(err.Error(), c.key) {
				t.Fatalf("error %q should name %q", err, c.key)
			}
		})
	}
}

func TestConfigPropertiesSyntax(t *testing.T) {
	path := writeProps(t, "# comment\n! also comment\n\nbroker.id : 7\nzookeeper.connect=a:1,\\\n  b:2/chroot\nlog.dirs=/x\n")
	cfg, err := loadConfig([]string{path})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BrokerID != 7 || cfg.ZooKeeperConnect != "a:1,b:2/chroot" {
		t.Fatalf("got broker.id %d zookeeper.connect %q", cfg.BrokerID, cfg.ZooKeeperConnect)
	}
	if _, err := loadConfig([]string{writeProps(t, "just words\n")}); err == nil {
		t.Fatal("a line without = should fail")
	}
	if _, err := loadConfig([]string{filepath.Join(t.TempDir(), "missing.properties")}); err == nil {
		t.Fatal("a missing file should fail")
	}
}

func TestConfigConnectionLimits(t *testing.T) {
	cfg, err := loadConfig([]string{writeProps(t, minimal)})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ConnectionsMaxIdle != 10*time.Minute || cfg.QueuedMaxRequestBytes != 104857600 ||
		cfg.MaxConnections != 2147483647 || cfg.MaxConnectionsPerIP != 2147483647 {
		t.Fatalf("defaults: idle %v, queued %d, max %d, per ip %d", cfg.ConnectionsMaxIdle,
			cfg.QueuedMaxRequestBytes, cfg.MaxConnections, cfg.MaxConnectionsPerIP)
	}
	cfg, err = loadConfig([]string{writeProps(t, minimal+"connections.max.idle.ms=2000\nqueued.max.request.bytes=-1\nmax.connections.per.ip=5\n")})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ConnectionsMaxIdle != 2*time.Second || cfg.QueuedMaxRequestBytes != -1 || cfg.MaxConnectionsPerIP != 5 {
		t.Fatalf("overrides: idle %v, queued %d, per ip %d", cfg.ConnectionsMaxIdle, cfg.QueuedMaxRequestBytes, cfg.MaxConnectionsPerIP)
	}
	// max.connections is atLeast(0) in Kafka, as in the key table.
	cfg, err = loadConfig([]string{writeProps(t, minimal+"max.connections=0\n")})
	if err != nil || cfg.MaxConnections != 0 {
		t.Fatalf("max.connections=0: %v, %+v", err, cfg)
	}
	for _, bad := range []string{"queued.max.request.bytes=0", "max.connections.per.ip=0", "connections.max.idle.ms=0", "max.connections=-1"} {
		_, err := loadConfig([]string{writeProps(t, minimal+bad+"\n")})
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Key != strings.Split(bad, "=")[0] {
			t.Errorf("%s: error %v, want one naming the key", bad, err)
		}
	}
}

// TestShippedConfigParses: config/server.properties, the commented example
// the README points to, names only keys the broker accepts, with valid values.
func TestShippedConfigParses(t *testing.T) {
	cfg, err := loadConfig([]string{filepath.Join("..", "..", "config", "server.properties")})
	if err != nil {
		t.Fatalf("config/server.properties: %v", err)
	}
	if cfg.Listeners[0].Port != 9092 || len(cfg.LogDirs) != 1 {
		t.Fatalf("unexpected example config: listeners %+v log.dirs %v", cfg.Listeners, cfg.LogDirs)
	}
}

// TestConfigCleanerAndTopicDefaults: the log cleaner's broker keys and
// the broker keys that set topic defaults take Kafka's names and
// defaults, and set the topic defaults.
func TestConfigCleanerAndTopicDefaults(t *testing.T) {
	cfg, err := loadConfig([]string{writeProps(t, minimal)})
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"log.cleaner.enable", cfg.LogCleanerEnable, true},
		{"log.cleaner.threads", cfg.LogCleanerThreads, 1},
		{"num.recovery.threads.per.data.dir", cfg.RecoveryThreadsPerDataDir, 1},
		{"log.cleaner.io.max.bytes.per.second", cfg.LogCleanerIOMaxBytesPerSecond, math.MaxFloat64},
		{"log.cleaner.dedupe.buffer.size", cfg.LogCleanerDedupeBufferSize, int64(134217728)},
		{"log.cleaner.io.buffer.size", cfg.LogCleanerIOBufferSize, 524288},
		{"log.cleaner.io.buffer.load.factor", cfg.LogCleanerIOBufferLoadFactor, 0.9},
		{"log.cleaner.backoff.ms", cfg.LogCleanerBackoff, 15 * time.Second},
		{"offsets.retention.check.interval.ms", cfg.OffsetsRetentionCheckInterval, 10 * time.Minute},
		{"log.cleaner.delete.retention.ms", cfg.LogDefaults.DeleteRetentionMs, int64(86400000)},
		{"log.cleaner.min.compaction.lag.ms", cfg.LogDefaults.MinCompactionLagMs, int64(0)},
		{"log.cleaner.max.compaction.lag.ms", cfg.LogDefaults.MaxCompactionLagMs, int64(math.MaxInt64)},
		{"log.cleaner.min.cleanable.ratio", cfg.LogDefaults.MinCleanableDirtyRatio, 0.5},
		{"log.cleanup.policy", cfg.LogDefaults.CleanupPolicy, "delete"},
		{"log.message.timestamp.difference.max.ms", cfg.LogDefaults.MessageTimestampDifferenceMaxMs, int64(math.MaxInt64)},
		{"log.index.size.max.bytes", cfg.LogDefaults.SegmentIndexBytes, int64(10485760)},
		{"log.segment.delete.delay.ms", cfg.LogDefaults.FileDeleteDelayMs, int64(60000)},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}

	cfg, err = loadConfig([]string{writeProps(t, minimal+
		"log.cleaner.enable=false\nlog.cleaner.threads=2\nlog.cleaner.io.max.bytes.per.second=1048576\n"+
		"log.cleaner.dedupe.buffer.size=1000000\nlog.cleaner.backoff.ms=100\n"+
		"log.cleaner.delete.retention.ms=1000\nlog.cleaner.min.compaction.lag.ms=5\n"+
		"log.cleaner.max.compaction.lag.ms=10\nlog.cleaner.min.cleanable.ratio=0.25\n"+
		"log.message.timestamp.difference.max.ms=3600000\nlog.roll.jitter.hours=1\n"+
		"log.message.format.version=2.8\nlog.preallocate=true\noffsets.retention.check.interval.ms=1000\n")})
	if err != nil {
		t.Fatal(err)
	}
	d := cfg.LogDefaults
	if cfg.LogCleanerEnable || cfg.LogCleanerThreads != 2 || cfg.LogCleanerIOMaxBytesPerSecond != 1048576 ||
		cfg.LogCleanerDedupeBufferSize != 1000000 || cfg.LogCleanerBackoff != 100*time.Millisecond ||
		cfg.OffsetsRetentionCheckInterval != time.Second {
		t.Errorf("cleaner keys not read: %+v", cfg)
	}
	if d.DeleteRetentionMs != 1000 || d.MinCompactionLagMs != 5 || d.MaxCompactionLagMs != 10 ||
		d.MinCleanableDirtyRatio != 0.25 || d.MessageTimestampDifferenceMaxMs != 3600000 ||
		d.SegmentJitterMs != 3600000 || d.MessageFormatVersion != "2.8" || !d.Preallocate {
		t.Errorf("topic defaults not set: %+v", d)
	}
	if cfg.StaticProps["log.cleaner.delete.retention.ms"] != "1000" {
		t.Errorf("static props: %v", cfg.StaticProps)
	}

	for _, bad := range []string{
		"log.cleaner.threads=-1", "log.cleaner.min.cleanable.ratio=2", "log.cleaner.delete.retention.ms=-1",
		"log.cleanup.policy=forever", "log.message.timestamp.difference.max.ms=-1", "log.cleaner.io.max.bytes.per.second=fast",
		"log.index.size.max.bytes=2", "log.message.format.version=0.7",
		"num.recovery.threads.per.data.dir=0", "num.recovery.threads.per.data.dir=two",
	} {
		key := strings.SplitN(bad, "=", 2)[0]
		_, err := loadConfig([]string{writeProps(t, minimal+bad+"\n")})
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Key != key {
			t.Errorf("%s: got %v, want a ConfigError naming %s", bad, err, key)
		}
	}
}

// TestConfigCompactCleanupPolicy: log.cleanup.policy takes compact, alone
// or with delete, as the topic default.
func TestConfigCompactCleanupPolicy(t *testing.T) {
	cfg, err := loadConfig([]string{writeProps(t, minimal+"log.cleanup.policy=compact,delete\n")})
	if err != nil {
		t.Fatal(err)
	}
	if d := cfg.LogDefaults; !d.Compact || !d.Delete || d.CleanupPolicy != "compact,delete" {
		t.Fatalf("log.cleanup.policy=compact,delete: %+v", d)
	}
}

// TestCleanerConfigWiring: the log.cleaner.* keys reach the replica
// manager's cleaner; log.cleaner.threads=0 leaves it off, as Kafka's
// cleaner without threads cleans nothing.
func TestCleanerConfigWiring(t *testing.T) {
	cfg, err := loadConfig([]string{writeProps(t, minimal), "--override", "log.cleaner.threads=2",
		"--override", "log.cleaner.dedupe.buffer.size=4194304", "--override", "log.cleaner.backoff.ms=250",
		"--override", "log.cleaner.io.max.bytes.per.second=1000000"})
	if err != nil {
		t.Fatal(err)
	}
	want := partition.CleanerConfig{Enable: true, Threads: 2, DedupeBufferSize: 4 << 20,
		IOMaxBytesPerSecond: 1e6, Backoff: 250 * time.Millisecond}
	if got := cleanerConfig(cfg); got != want {
		t.Errorf("cleanerConfig = %+v, want %+v", got, want)
	}
	for _, override := range []string{"log.cleaner.threads=0", "log.cleaner.enable=false"} {
		cfg, err := loadConfig([]string{writeProps(t, minimal), "--override", override})
		if err != nil {
			t.Fatal(err)
		}
		if cleanerConfig(cfg).Enable {
			t.Errorf("%s: cleaner enabled", override)
		}
	}
}
