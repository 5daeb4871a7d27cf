package main

import (
	"bufio"
	"fmt"
	"math"
	"net"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kafkazk/broker/cluster"
)

// Listener is one entry of listeners or advertised.listeners.
type Listener struct {
	Name string // PLAINTEXT, EXTERNAL, ...
	Host string // "" binds every interface
	Port int32
}

// Config is the parsed broker configuration.
type Config struct {
	BrokerID                        int32
	Rack                            string
	Listeners                       []Listener
	AdvertisedListeners             []Listener
	SecurityProtocolMap             map[string]string
	InterBrokerListenerName         string
	ZooKeeperConnect                string
	ZooKeeperSessionTimeout         time.Duration
	ZooKeeperConnectionTimeout      time.Duration
	LogDirs                         []string
	NumPartitions                   int32
	DefaultReplicationFactor        int16
	AutoCreateTopics                bool
	DeleteTopicEnable               bool
	SocketRequestMaxBytes           int32
	ConnectionsMaxIdle              time.Duration
	QueuedMaxRequestBytes           int64
	MaxConnections                  int
	MaxConnectionsPerIP             int
	LogRetentionCheckInterval       time.Duration
	FlushOffsetCheckpointInterval   time.Duration
	HighWatermarkCheckpointInterval time.Duration
	ReplicaLagTimeMax               time.Duration
	ReplicaFetchMaxBytes            int32
	ReplicaFetchWaitMax             time.Duration
	ReplicaFetchMinBytes            int32
	ControlledShutdownEnable        bool
	AutoLeaderRebalanceEnable       bool
	OffsetsTopicReplicationFactor   int16
	OffsetsTopicNumPartitions       int32
	// The group coordinator's settings (group.*, offsets.*).
	OffsetsTopicSegmentBytes   int64
	GroupInitialRebalanceDelay time.Duration
	GroupMinSessionTimeout     time.Duration
	GroupMaxSessionTimeout     time.Duration
	OffsetsRetention           time.Duration
	OffsetsCommitTimeout       time.Duration
	// OffsetsRetentionCheckInterval is offsets.retention.check.interval.ms.
	OffsetsRetentionCheckInterval time.Duration
	// OffsetsTopicCompressionCodec is offsets.topic.compression.codec:
	// Kafka's codec id of the coordinator's writes (0 none, 1 gzip, 2
	// snappy, 3 lz4, 4 zstd).
	OffsetsTopicCompressionCodec int8
	// The transaction coordinator's settings (transaction.*), with Kafka's
	// defaults.
	TransactionStateLogNumPartitions     int32
	TransactionStateLogReplicationFactor int16
	TransactionStateLogMinISR            int32
	TransactionStateLogSegmentBytes      int64
	TransactionMaxTimeout                time.Duration
	TransactionalIDExpiration            time.Duration
	TransactionAbortTimedOutInterval     time.Duration
	TransactionRemoveExpiredInterval     time.Duration
	// TransactionPartitionVerification is
	// transaction.partition.verification.enable (KIP-890 part 1).
	TransactionPartitionVerification bool
	// HTTPListener is http.listener (host:port, "" for none): where
	// /metrics, /v1/partitions and the status page are served.
	HTTPListener string
	// RecoveryThreadsPerDataDir is num.recovery.threads.per.data.dir.
	RecoveryThreadsPerDataDir int
	// The log cleaner's settings (log.cleaner.*), with Kafka's defaults.
	LogCleanerEnable              bool
	LogCleanerThreads             int
	LogCleanerIOMaxBytesPerSecond float64
	LogCleanerDedupeBufferSize    int64
	LogCleanerIOBufferSize        int
	LogCleanerIOBufferLoadFactor  float64
	LogCleanerBackoff             time.Duration
	// LogDefaults are the topic-level defaults (log.segment.bytes,
	// log.cleaner.delete.retention.ms, ...).
	LogDefaults cluster.LogConfig
	// Security is every listener's security and the authorizer's,
	// inter-broker and ZooKeeper security settings.
	Security SecurityConfig
	// StaticProps are the keys set in the properties file or by
	// --override, as written: DescribeConfigs reports a topic default
	// they set as STATIC_BROKER_CONFIG.
	StaticProps map[string]string
	// MaxIncrementalFetchSessionCacheSlots is
	// max.incremental.fetch.session.cache.slots (KIP-227).
	MaxIncrementalFetchSessionCacheSlots int
}

// topicDefaultKeys are the broker keys that set a topic key's default in
// the same units, as Kafka's ServerTopicConfigSynonyms maps them; their
// values are checked by the topic key's own validator.
var topicDefaultKeys = []struct{ broker, topic string }{
	{"log.cleanup.policy", "cleanup.policy"},
	{"log.cleaner.delete.retention.ms", "delete.retention.ms"},
	{"log.cleaner.min.compaction.lag.ms", "min.compaction.lag.ms"},
	{"log.cleaner.max.compaction.lag.ms", "max.compaction.lag.ms"},
	{"log.cleaner.min.cleanable.ratio", "min.cleanable.dirty.ratio"},
	{"log.index.size.max.bytes", "segment.index.bytes"},
	{"log.segment.delete.delay.ms", "file.delete.delay.ms"},
	{"log.preallocate", "preallocate"},
	{"log.message.format.version", "message.format.version"},
	{"log.message.timestamp.difference.max.ms", "message.timestamp.difference.max.ms"},
	{"log.message.timestamp.before.max.ms", "message.timestamp.before.max.ms"},
	{"log.message.timestamp.after.max.ms", "message.timestamp.after.max.ms"},
	{"log.message.downconversion.enable", "message.downconversion.enable"},
	{"compression.type", "compression.type"},
	{"compression.gzip.level", "compression.gzip.level"},
	{"compression.lz4.level", "compression.lz4.level"},
	{"compression.zstd.level", "compression.zstd.level"},
	{"log.local.retention.ms", "local.retention.ms"},
	{"log.local.retention.bytes", "local.retention.bytes"},
}

// keyDefaults lists every key server.properties may set with Kafka's
// default ("" means unset): cluster's broker key table, the one list of
// broker keys (DescribeConfigs and dynamic updates read it too).
var keyDefaults = cluster.StaticBrokerKeyDefaults()

// ConfigError names the key and what is wrong with it.
type ConfigError struct {
	Key     string
	Problem string
}

func (e *ConfigError) Error() string {
	if e.Key == "" {
		return "config: " + e.Problem
	}
	return fmt.Sprintf("config: %s: %s", e.Key, e.Problem)
}

// ParseProperties reads a Java-style properties file: key=value or
// key:value lines, # and ! comments, backslash line continuations.
func ParseProperties(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config: open %s: %w", path, err)
	}
	defer f.Close()
	props := map[string]string{}
	sc := bufio.NewScanner(f)
	lineNo := 0
	var pending string
	for sc.Scan() {
		lineNo++
		line := strings.TrimSpace(sc.Text())
		if pending == "" && (line == "" || line[0] == '#' || line[0] == '!') {
			continue
		}
		if strings.HasSuffix(line, `\`) {
			pending += strings.TrimSuffix(line, `\`)
			continue
		}
		line = pending + line
		pending = ""
		i := strings.IndexAny(line, "=:")
		if i <= 0 {
			return nil, &ConfigError{Problem: fmt.Sprintf("%s:%d: expected key=value, got %q", path, lineNo, line)}
		}
		props[strings.TrimSpace(line[:i])] = strings.TrimSpace(line[i+1:])
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("config: read %s: %w", path, err)
	}
	return props, nil
}

// BuildConfig validates props (file values with overrides applied) and
// fills in Kafka's defaults.
func BuildConfig(props map[string]string) (*Config, error) {
	var unknown []string
	for k := range props {
		if _, ok := keyDefaults[k]; !ok && !listenerPrefixedKey(k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, &ConfigError{Key: unknown[0], Problem: "unknown configuration key"}
	}
	p := &propReader{props: props}
	c := &Config{LogDefaults: cluster.DefaultLogConfig()}
	c.BrokerID = int32(p.int("broker.id", -1, math.MaxInt32))
	if p.err == nil && c.BrokerID < 0 {
		return nil, &ConfigError{Key: "broker.id", Problem: "must be set to a non-negative integer (broker id generation is not supported)"}
	}
	c.Rack = p.str("broker.rack")
	c.SecurityProtocolMap = p.protocolMap("listener.security.protocol.map")
	c.Listeners = p.listeners("listeners", c.SecurityProtocolMap)
	if p.str("advertised.listeners") != "" {
		c.AdvertisedListeners = p.listeners("advertised.listeners", c.SecurityProtocolMap)
	} else {
		c.AdvertisedListeners = append([]Listener(nil), c.Listeners...)
	}
	c.InterBrokerListenerName = p.interBrokerListener(c.Listeners)
	if c.InterBrokerListenerName == "" && len(c.Listeners) > 0 {
		c.InterBrokerListenerName = c.Listeners[0].Name
	}
	if p.err == nil {
		c.Security = p.security(c)
	}
	c.ZooKeeperConnect = p.str("zookeeper.connect")
	if p.err == nil && c.ZooKeeperConnect == "" {
		return nil, &ConfigError{Key: "zookeeper.connect", Problem: "is required (host:port[,host:port][/chroot])"}
	}
	c.ZooKeeperSessionTimeout = p.ms("zookeeper.session.timeout.ms", 1)
	c.ZooKeeperConnectionTimeout = c.ZooKeeperSessionTimeout
	if p.str("zookeeper.connection.timeout.ms") != "" {
		c.ZooKeeperConnectionTimeout = p.ms("zookeeper.connection.timeout.ms", 1)
	}
	dirs := p.str("log.dirs")
	if dirs == "" {
		dirs = p.str("log.dir")
	}
	for _, d := range strings.Split(dirs, ",") {
		if d = strings.TrimSpace(d); d != "" {
			c.LogDirs = append(c.LogDirs, d)
		}
	}
	c.NumPartitions = int32(p.int("num.partitions", 1, math.MaxInt32))
	c.DefaultReplicationFactor = int16(p.int("default.replication.factor", 1, math.MaxInt16))
	c.AutoCreateTopics = p.bool("auto.create.topics.enable")
	c.DeleteTopicEnable = p.bool("delete.topic.enable")
	c.SocketRequestMaxBytes = int32(p.int("socket.request.max.bytes", 1, math.MaxInt32))
	c.ConnectionsMaxIdle = p.ms("connections.max.idle.ms", 1)
	c.QueuedMaxRequestBytes = p.int("queued.max.request.bytes", -1, math.MaxInt64)
	if p.err == nil && c.QueuedMaxRequestBytes == 0 {
		p.fail("queued.max.request.bytes", "must be -1 (unbounded) or positive")
	}
	c.MaxConnections = int(p.int("max.connections", 0, math.MaxInt32))
	c.MaxConnectionsPerIP = int(p.int("max.connections.per.ip", 1, math.MaxInt32))
	c.LogRetentionCheckInterval = p.ms("log.retention.check.interval.ms", 1)
	c.FlushOffsetCheckpointInterval = p.ms("log.flush.offset.checkpoint.interval.ms", 0)
	c.HighWatermarkCheckpointInterval = p.ms("replica.high.watermark.checkpoint.interval.ms", 1)
	c.ReplicaLagTimeMax = p.ms("replica.lag.time.max.ms", 1)
	c.ReplicaFetchMaxBytes = int32(p.int("replica.fetch.max.bytes", 0, math.MaxInt32))
	c.ReplicaFetchWaitMax = p.ms("replica.fetch.wait.max.ms", 0)
	c.ReplicaFetchMinBytes = int32(p.int("replica.fetch.min.bytes", 1, math.MaxInt32))
	c.MaxIncrementalFetchSessionCacheSlots = int(p.int("max.incremental.fetch.session.cache.slots", 0, math.MaxInt32))
	c.ControlledShutdownEnable = p.bool("controlled.shutdown.enable")
	c.AutoLeaderRebalanceEnable = p.bool("auto.leader.rebalance.enable")
	c.OffsetsTopicReplicationFactor = int16(p.int("offsets.topic.replication.factor", 1, math.MaxInt16))
	c.OffsetsTopicNumPartitions = int32(p.int("offsets.topic.num.partitions", 1, math.MaxInt32))
	c.OffsetsTopicSegmentBytes = p.int("offsets.topic.segment.bytes", 14, math.MaxInt32)
	c.OffsetsRetention = time.Duration(p.int("offsets.retention.minutes", 1, math.MaxInt32)) * time.Minute
	c.OffsetsCommitTimeout = p.ms("offsets.commit.timeout.ms", 1)
	c.OffsetsRetentionCheckInterval = p.ms("offsets.retention.check.interval.ms", 1)
	c.OffsetsTopicCompressionCodec = int8(p.int("offsets.topic.compression.codec", 0, 4))
	c.GroupInitialRebalanceDelay = p.ms("group.initial.rebalance.delay.ms", 0)
	c.GroupMinSessionTimeout = p.ms("group.min.session.timeout.ms", 0)
	c.GroupMaxSessionTimeout = p.ms("group.max.session.timeout.ms", 0)
	c.RecoveryThreadsPerDataDir = int(p.int("num.recovery.threads.per.data.dir", 1, math.MaxInt32))
	c.LogCleanerEnable = p.bool("log.cleaner.enable")
	c.LogCleanerThreads = int(p.int("log.cleaner.threads", 0, math.MaxInt32))
	c.LogCleanerIOMaxBytesPerSecond = p.double("log.cleaner.io.max.bytes.per.second", -math.MaxFloat64, math.MaxFloat64)
	c.LogCleanerDedupeBufferSize = p.int("log.cleaner.dedupe.buffer.size", math.MinInt64, math.MaxInt64)
	c.LogCleanerIOBufferSize = int(p.int("log.cleaner.io.buffer.size", 0, math.MaxInt32))
	c.LogCleanerIOBufferLoadFactor = p.double("log.cleaner.io.buffer.load.factor", -math.MaxFloat64, math.MaxFloat64)
	c.LogCleanerBackoff = p.ms("log.cleaner.backoff.ms", 0)
	// Kafka's TransactionLogConfig and TransactionStateManagerConfig:
	// each an INT (the replication factor a SHORT) of at least 1.
	c.TransactionStateLogNumPartitions = int32(p.int("transaction.state.log.num.partitions", 1, math.MaxInt32))
	c.TransactionStateLogReplicationFactor = int16(p.int("transaction.state.log.replication.factor", 1, math.MaxInt16))
	c.TransactionStateLogMinISR = int32(p.int("transaction.state.log.min.isr", 1, math.MaxInt32))
	c.TransactionStateLogSegmentBytes = p.int("transaction.state.log.segment.bytes", 1, math.MaxInt32)
	c.TransactionMaxTimeout = p.intMs("transaction.max.timeout.ms", 1)
	c.TransactionalIDExpiration = p.intMs("transactional.id.expiration.ms", 1)
	c.TransactionAbortTimedOutInterval = p.intMs("transaction.abort.timed.out.transaction.cleanup.interval.ms", 1)
	c.TransactionRemoveExpiredInterval = p.intMs("transaction.remove.expired.transaction.cleanup.interval.ms", 1)
	c.TransactionPartitionVerification = p.bool("transaction.partition.verification.enable")
	c.HTTPListener = p.str("http.listener")
	if c.HTTPListener != "" {
		if _, port, err := net.SplitHostPort(c.HTTPListener); err != nil || port == "" {
			p.fail("http.listener", "%q is not host:port", c.HTTPListener)
		}
	}

	d := &c.LogDefaults
	d.SegmentBytes = p.int("log.segment.bytes", 14, math.MaxInt32)
	d.SegmentMs = p.int("log.roll.hours", 1, math.MaxInt32) * 3600 * 1000
	if p.str("log.roll.ms") != "" {
		d.SegmentMs = p.int("log.roll.ms", 1, math.MaxInt64)
	}
	d.RetentionMs = p.int("log.retention.hours", -1, math.MaxInt32) * 3600 * 1000
	if p.str("log.retention.minutes") != "" {
		d.RetentionMs = p.int("log.retention.minutes", -1, math.MaxInt32) * 60 * 1000
	}
	if p.str("log.retention.ms") != "" {
		d.RetentionMs = p.int("log.retention.ms", -1, math.MaxInt64)
	}
	if d.RetentionMs < 0 {
		d.RetentionMs = -1
	}
	d.RetentionBytes = p.int("log.retention.bytes", -1, math.MaxInt64)
	d.FlushMessages = p.int("log.flush.interval.messages", 1, math.MaxInt64)
	d.FlushMs = p.int("log.flush.scheduler.interval.ms", 0, math.MaxInt64)
	if p.str("log.flush.interval.ms") != "" {
		d.FlushMs = p.int("log.flush.interval.ms", 0, math.MaxInt64)
	}
	d.IndexIntervalBytes = p.int("log.index.interval.bytes", 0, math.MaxInt32)
	d.MaxMessageBytes = p.int("message.max.bytes", 0, math.MaxInt32)
	d.MinInsyncReplicas = p.int("min.insync.replicas", 1, math.MaxInt16)
	d.UncleanLeaderElection = p.bool("unclean.leader.election.enable")
	d.MessageTimestampType = p.oneOf("log.message.timestamp.type", "CreateTime", "LogAppendTime")
	d.SegmentJitterMs = p.int("log.roll.jitter.hours", 0, math.MaxInt32) * 3600 * 1000
	if p.str("log.roll.jitter.ms") != "" {
		d.SegmentJitterMs = p.int("log.roll.jitter.ms", 0, math.MaxInt64)
	}
	for _, k := range topicDefaultKeys {
		if p.err != nil {
			break
		}
		next, err := d.WithOverrides(map[string]string{k.topic: p.str(k.broker)})
		if err != nil {
			p.fail(k.broker, "%v", err)
			break
		}
		*d = next
	}
	if p.err != nil {
		return nil, p.err
	}
	if d.MinCompactionLagMs > d.MaxCompactionLagMs {
		return nil, &ConfigError{Key: "log.cleaner.min.compaction.lag.ms", Problem: "must not exceed log.cleaner.max.compaction.lag.ms"}
	}
	c.StaticProps = make(map[string]string, len(props))
	for k, v := range props {
		c.StaticProps[k] = v
	}
	if c.ReplicaFetchWaitMax >= c.ReplicaLagTimeMax {
		return nil, &ConfigError{Key: "replica.fetch.wait.max.ms", Problem: "must be less than replica.lag.time.max.ms"}
	}
	if len(c.LogDirs) == 0 {
		return nil, &ConfigError{Key: "log.dirs", Problem: "names no directory"}
	}
	return c, nil
}

// propReader reads typed values, remembering the first error.
type propReader struct {
	props map[string]string
	err   error
}

func (p *propReader) str(key string) string {
	if v, ok := p.props[key]; ok {
		return v
	}
	return keyDefaults[key]
}

func (p *propReader) fail(key, format string, args ...any) {
	if p.err == nil {
		p.err = &ConfigError{Key: key, Problem: fmt.Sprintf(format, args...)}
	}
}

func (p *propReader) int(key string, lo, hi int64) int64 {
	v := p.str(key)
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		p.fail(key, "%q is not an integer", v)
		return 0
	}
	if n < lo || n > hi {
		p.fail(key, "%d is outside [%d, %d]", n, lo, hi)
		return 0
	}
	return n
}

// double parses a DOUBLE key as Java's Double.parseDouble would.
func (p *propReader) double(key string, lo, hi float64) float64 {
	v := p.str(key)
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || math.IsNaN(f) {
		p.fail(key, "%q is not a number", v)
		return 0
	}
	if f < lo || f > hi {
		p.fail(key, "%v is outside [%v, %v]", f, lo, hi)
		return 0
	}
	return f
}

func (p *propReader) ms(key string, lo int64) time.Duration {
	return time.Duration(p.int(key, lo, math.MaxInt64/int64(time.Millisecond))) * time.Millisecond
}

// intMs is a key of Kafka's type INT in milliseconds.
func (p *propReader) intMs(key string, lo int64) time.Duration {
	return time.Duration(p.int(key, lo, math.MaxInt32)) * time.Millisecond
}

func (p *propReader) bool(key string) bool {
	switch v := strings.ToLower(p.str(key)); v {
	case "true":
		return true
	case "false":
		return false
	default:
		p.fail(key, "%q is not true or false", v)
		return false
	}
}

func (p *propReader) oneOf(key string, allowed ...string) string {
	v := p.str(key)
	for _, a := range allowed {
		if v == a {
			return v
		}
	}
	p.fail(key, "%q is not one of %s", v, strings.Join(allowed, ", "))
	return allowed[0]
}

func (p *propReader) protocolMap(key string) map[string]string {
	out := map[string]string{}
	for _, pair := range strings.Split(p.str(key), ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		name, proto, ok := strings.Cut(pair, ":")
		if !ok || name == "" {
			p.fail(key, "%q is not NAME:PROTOCOL", pair)
			continue
		}
		if !slices.Contains(securityProtocols, proto) {
			p.fail(key, "security protocol %q of %s is not one of %s", proto, name, strings.Join(securityProtocols, ", "))
			continue
		}
		out[strings.ToUpper(name)] = proto
	}
	return out
}

// listeners parses NAME://host:port,... Every name must be in the
// security protocol map.
func (p *propReader) listeners(key string, protocols map[string]string) []Listener {
	var out []Listener
	seen := map[string]bool{}
	for _, item := range strings.Split(p.str(key), ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, addr, ok := strings.Cut(item, "://")
		if !ok {
			p.fail(key, "%q is not NAME://host:port", item)
			return nil
		}
		name = strings.ToUpper(name)
		if _, ok := protocols[name]; !ok {
			p.fail(key, "listener %q is not in listener.security.protocol.map", name)
			return nil
		}
		if seen[name] {
			p.fail(key, "listener %q appears twice", name)
			return nil
		}
		seen[name] = true
		host, portStr, err := net.SplitHostPort(addr)
		if err != nil {
			p.fail(key, "%q: %v", item, err)
			return nil
		}
		port, err := strconv.ParseUint(portStr, 10, 16)
		if err != nil {
			p.fail(key, "%q: port %q is not a number in [0, 65535]", item, portStr)
			return nil
		}
		out = append(out, Listener{Name: name, Host: host, Port: int32(port)})
	}
	if len(out) == 0 {
		p.fail(key, "names no listener")
	}
	return out
}
