package cluster

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// LogConfig is the effective configuration of one topic's logs: the broker
// defaults (log.* and friends in server.properties) with the topic's
// overrides from /config/topics/<topic> applied. Every topic-level key of
// Kafka 3.x's LogConfig has a field; the comment says what it does here.
// LogConfig is comparable (replicas compare old and new with !=).
type LogConfig struct {
	// CleanupPolicy is cleanup.policy / log.cleanup.policy, normalised to
	// its comma-joined items ("compact", "delete", "compact,delete", ...);
	// Compact and Delete are the parsed items. The log cleaner compacts
	// logs with Compact; retention (time and size) applies only with
	// Delete; a compacted topic refuses records without a key.
	CleanupPolicy         string
	Compact               bool
	Delete                bool
	CompressionType       string // compression.type; only "producer" (batches kept as sent) is accepted
	SegmentBytes          int64  // segment.bytes / log.segment.bytes
	SegmentMs             int64  // segment.ms / log.roll.ms
	RetentionMs           int64  // retention.ms / log.retention.ms; -1 keeps forever
	RetentionBytes        int64  // retention.bytes / log.retention.bytes; negative is unbounded
	FlushMessages         int64  // flush.messages / log.flush.interval.messages
	FlushMs               int64  // flush.ms / log.flush.interval.ms
	IndexIntervalBytes    int64  // index.interval.bytes / log.index.interval.bytes
	MaxMessageBytes       int64  // max.message.bytes / message.max.bytes
	MinInsyncReplicas     int64  // min.insync.replicas
	UncleanLeaderElection bool   // unclean.leader.election.enable
	MessageTimestampType  string // message.timestamp.type: CreateTime or LogAppendTime

	// The log cleaner's settings, for compacted topics.
	DeleteRetentionMs      int64   // delete.retention.ms / log.cleaner.delete.retention.ms: tombstones kept after cleaning
	MinCompactionLagMs     int64   // min.compaction.lag.ms / log.cleaner.min.compaction.lag.ms
	MaxCompactionLagMs     int64   // max.compaction.lag.ms / log.cleaner.max.compaction.lag.ms
	MinCleanableDirtyRatio float64 // min.cleanable.dirty.ratio / log.cleaner.min.cleanable.ratio

	// Accepted and reported; logstore has no use for them yet.
	SegmentJitterMs   int64 // segment.jitter.ms / log.roll.jitter.ms: logstore rolls at segment.ms exactly
	SegmentIndexBytes int64 // segment.index.bytes / log.index.size.max.bytes: logstore's index has no size cap
	FileDeleteDelayMs int64 // file.delete.delay.ms / log.segment.delete.delay.ms: logstore deletes at once
	Preallocate       bool  // preallocate / log.preallocate: segments grow as written

	// MessageTimestampDifferenceMaxMs is message.timestamp.difference.max.ms,
	// the bound on |record timestamp - now| for CreateTime topics before
	// Kafka 3.6 split it into the two below, which fall back to it while
	// at their defaults (see TimestampBeforeMaxMs).
	MessageTimestampDifferenceMaxMs int64
	MessageTimestampBeforeMaxMs     int64 // message.timestamp.before.max.ms
	MessageTimestampAfterMaxMs      int64 // message.timestamp.after.max.ms

	// MessageFormatVersion is message.format.version: accepted and
	// ignored, as Kafka 3.x ignores it from inter.broker.protocol.version
	// 3.0 on (every batch is stored as the v2 format it arrives in).
	MessageFormatVersion string
	// MessageDownconversionEnable is message.downconversion.enable: no
	// fetch version this broker serves needs down-conversion.
	MessageDownconversionEnable bool
	// The replication throttle lists ("*" or partition:broker,...): accepted
	// and reported; replication is not throttled here.
	LeaderReplicationThrottledReplicas   string
	FollowerReplicationThrottledReplicas string
	// Levels of broker-side recompression, which compression.type=producer
	// never does: accepted and reported.
	CompressionGzipLevel int64
	CompressionLz4Level  int64
	CompressionZstdLevel int64
	// Tiered storage is not served: remote.storage.enable and, as Kafka
	// refuses them in ZooKeeper mode, remote.log.copy.disable and
	// remote.log.delete.on.disable must stay false; local.retention.* are
	// accepted and have no effect without it.
	RemoteStorageEnable      bool
	RemoteLogCopyDisable     bool
	RemoteLogDeleteOnDisable bool
	LocalRetentionMs         int64
	LocalRetentionBytes      int64
}

// DefaultLogConfig returns Kafka's defaults for the topic-level settings.
func DefaultLogConfig() LogConfig {
	return LogConfig{
		CleanupPolicy:                   "delete",
		Delete:                          true,
		CompressionType:                 "producer",
		SegmentBytes:                    1 << 30,
		SegmentMs:                       7 * 24 * 3600 * 1000,
		RetentionMs:                     7 * 24 * 3600 * 1000,
		RetentionBytes:                  -1,
		FlushMessages:                   math.MaxInt64,
		FlushMs:                         math.MaxInt64,
		IndexIntervalBytes:              4096,
		MaxMessageBytes:                 1048588,
		MinInsyncReplicas:               1,
		UncleanLeaderElection:           false,
		MessageTimestampType:            "CreateTime",
		DeleteRetentionMs:               24 * 3600 * 1000,
		MinCompactionLagMs:              0,
		MaxCompactionLagMs:              math.MaxInt64,
		MinCleanableDirtyRatio:          0.5,
		SegmentJitterMs:                 0,
		SegmentIndexBytes:               10 << 20,
		FileDeleteDelayMs:               60000,
		Preallocate:                     false,
		MessageTimestampDifferenceMaxMs: math.MaxInt64,
		MessageTimestampBeforeMaxMs:     math.MaxInt64,
		MessageTimestampAfterMaxMs:      math.MaxInt64,
		MessageFormatVersion:            "3.0-IV1",
		MessageDownconversionEnable:     true,
		CompressionGzipLevel:            -1,
		CompressionLz4Level:             9,
		CompressionZstdLevel:            3,
		LocalRetentionMs:                -2,
		LocalRetentionBytes:             -2,
	}
}

// TimestampBeforeMaxMs is how far before the broker's clock a CreateTime
// record's timestamp may be: message.timestamp.before.max.ms, or
// message.timestamp.difference.max.ms while the former is at its default,
// as Kafka's LogConfig.getMessageTimestampBeforeMaxMs.
func (c LogConfig) TimestampBeforeMaxMs() int64 {
	if c.MessageTimestampBeforeMaxMs != math.MaxInt64 {
		return c.MessageTimestampBeforeMaxMs
	}
	return c.MessageTimestampDifferenceMaxMs
}

// TimestampAfterMaxMs is how far after the broker's clock a CreateTime
// record's timestamp may be, with the same fallback.
func (c LogConfig) TimestampAfterMaxMs() int64 {
	if c.MessageTimestampAfterMaxMs != math.MaxInt64 {
		return c.MessageTimestampAfterMaxMs
	}
	return c.MessageTimestampDifferenceMaxMs
}

// ConfigType is a setting's type as DescribeConfigs v3+ reports it
// (Kafka's DescribeConfigsResponse.ConfigType ids).
type ConfigType int8

// The ConfigType values Kafka's topic keys use.
const (
	TypeBoolean ConfigType = 1
	TypeString  ConfigType = 2
	TypeInt     ConfigType = 3
	TypeLong    ConfigType = 5
	TypeDouble  ConfigType = 6
	TypeList    ConfigType = 7
)

// ConfigSource says where a described value comes from (Kafka's
// DescribeConfigsResponse.ConfigSource ids).
type ConfigSource int8

// The sources a topic setting can have on a broker without dynamic
// broker configs.
const (
	SourceDynamicTopic ConfigSource = 1 // TOPIC_CONFIG: an override in /config/topics/<t>
	SourceStaticBroker ConfigSource = 4 // STATIC_BROKER_CONFIG: set in server.properties
	SourceDefault      ConfigSource = 5 // DEFAULT_CONFIG: Kafka's default
)

// ConfigSynonym is one of the settings that may supply a described value,
// in the order of precedence.
type ConfigSynonym struct {
	Name   string
	Value  string
	Source ConfigSource
}

// ConfigEntry is one resolved topic setting, for DescribeConfigs.
type ConfigEntry struct {
	Name      string
	Value     string
	IsDefault bool // Source is DEFAULT_CONFIG (DescribeConfigs v0's is_default)
	Source    ConfigSource
	Type      ConfigType
	// Synonyms are the topic override (if any), then the broker synonyms
	// set in server.properties, then those with a Kafka default, as
	// Kafka's ConfigHelper lists them. The first is the Source.
	Synonyms []ConfigSynonym
}

// brokerSynonym is a server.properties key that sets a topic key's
// default, with Kafka's broker default for it (hasDefault false: none, as
// log.roll.ms, which falls back to log.roll.hours).
type brokerSynonym struct {
	name       string
	def        string
	hasDefault bool
}

func syn(name, def string) brokerSynonym {
	return brokerSynonym{name: name, def: def, hasDefault: true}
}
func synNoDefault(name string) brokerSynonym {
	return brokerSynonym{name: name}
}

// topicKey is one row of the table: Kafka's name, type and broker
// synonyms (Kafka's ServerTopicConfigSynonyms and
// DynamicBrokerConfig.brokerConfigSynonyms), and how the value is read
// from and parsed into a LogConfig. set receives the value trimmed, as
// Kafka's ConfigDef.parseType trims.
type topicKey struct {
	name   string
	typ    ConfigType
	broker []brokerSynonym
	codec
}

// codec reads a key's value from a LogConfig and parses one into it.
type codec struct {
	get func(*LogConfig) string
	set func(*LogConfig, string) error
}

const maxLong = "9223372036854775807"

func longKey(field func(*LogConfig) *int64, lo, hi int64) codec {
	return codec{numGet(field), numSet(field, "LONG", lo, hi)}
}

func intKey(field func(*LogConfig) *int64, lo int64) codec {
	return codec{numGet(field), numSet(field, "INT", lo, math.MaxInt32)}
}

func numGet(field func(*LogConfig) *int64) func(*LogConfig) string {
	return func(c *LogConfig) string { return strconv.FormatInt(*field(c), 10) }
}

func numSet(field func(*LogConfig) *int64, typ string, lo, hi int64) func(*LogConfig, string) error {
	bits := 64
	if typ == "INT" {
		bits = 32
	}
	return func(c *LogConfig, v string) error {
		n, err := strconv.ParseInt(v, 10, bits)
		if err != nil {
			return fmt.Errorf("%q is not a number of type %s", v, typ)
		}
		if n < lo || n > hi {
			return fmt.Errorf("value %d must be in [%d, %d]", n, lo, hi)
		}
		*field(c) = n
		return nil
	}
}

func boolKey(field func(*LogConfig) *bool) codec {
	return codec{func(c *LogConfig) string { return strconv.FormatBool(*field(c)) },
		func(c *LogConfig, v string) error {
			switch strings.ToLower(v) {
			case "true":
				*field(c) = true
			case "false":
				*field(c) = false
			default:
				return fmt.Errorf("%q is not true or false", v)
			}
			return nil
		}}
}

// falseOnlyKey is a boolean Kafka refuses to set true on this kind of
// broker, saying why.
func falseOnlyKey(field func(*LogConfig) *bool, why string) codec {
	bc := boolKey(field)
	return codec{bc.get, func(c *LogConfig, v string) error {
		if err := bc.set(c, v); err != nil {
			return err
		}
		if *field(c) {
			*field(c) = false
			return errors.New(why)
		}
		return nil
	}}
}

func enumKey(field func(*LogConfig) *string, allowed ...string) codec {
	return codec{func(c *LogConfig) string { return *field(c) },
		func(c *LogConfig, v string) error {
			for _, a := range allowed {
				if v == a {
					*field(c) = v
					return nil
				}
			}
			return fmt.Errorf("%q is not one of %v", v, allowed)
		}}
}

// formatDouble writes f as Java's Double.toString does for the values a
// ratio takes: always with a fraction ("1.0", "0.5").
func formatDouble(f float64) string {
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}

// parseList splits a LIST value as Kafka's ConfigDef.parseType: an empty
// value is the empty list; otherwise items split at commas, trimmed.
func parseList(v string) []string {
	if v == "" {
		return nil
	}
	items := strings.Split(v, ",")
	for i := range items {
		items[i] = strings.TrimSpace(items[i])
	}
	return items
}

func setCleanupPolicy(c *LogConfig, v string) error {
	items := parseList(v)
	compact, del := false, false
	for _, it := range items {
		switch it {
		case "compact":
			compact = true
		case "delete":
			del = true
		default:
			return fmt.Errorf("%q is not a list of [compact, delete]", v)
		}
	}
	c.CleanupPolicy, c.Compact, c.Delete = strings.Join(items, ","), compact, del
	return nil
}

// throttledReplicas is ThrottledReplicaListValidator's rule.
var throttledReplicas = regexp.MustCompile(`^([0-9]+:[0-9]+)?$`)

func throttleKey(field func(*LogConfig) *string) codec {
	return codec{func(c *LogConfig) string { return *field(c) },
		func(c *LogConfig, v string) error {
			items := parseList(v)
			ok := strings.Join(items, "") == "*"
			if !ok {
				ok = true
				for _, it := range items {
					ok = ok && throttledReplicas.MatchString(it)
				}
			}
			if !ok {
				return fmt.Errorf("%q must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...", v)
			}
			*field(c) = strings.Join(items, ",")
			return nil
		}}
}

// metadataVersions are the inter.broker.protocol versions Kafka 3.9's
// MetadataVersion knows, each release with its IV sub-versions (0 for
// the releases before 0.10, which have none).
var metadataVersions = []struct {
	release string
	ivs     int
}{
	{"0.8.0", 0}, {"0.8.1", 0}, {"0.8.2", 0}, {"0.9.0", 0},
	{"0.10.0", 2}, {"0.10.1", 3}, {"0.10.2", 1}, {"0.11.0", 3},
	{"1.0", 1}, {"1.1", 1}, {"2.0", 2}, {"2.1", 3}, {"2.2", 2}, {"2.3", 2}, {"2.4", 2},
	{"2.5", 1}, {"2.6", 1}, {"2.7", 3}, {"2.8", 2}, {"3.0", 2}, {"3.1", 1}, {"3.2", 1},
	{"3.3", 4}, {"3.4", 1}, {"3.5", 3}, {"3.6", 3}, {"3.7", 5}, {"3.8", 1}, {"3.9", 1},
}

// validMetadataVersion is MetadataVersion.fromVersionString: the first
// three dotted parts of a 0.x version, or two of a later one, must name a
// release ("2.8") or a release and sub-version ("2.8-IV1").
func validMetadataVersion(v string) bool {
	parts := strings.Split(v, ".")
	n := 2
	if strings.HasPrefix(v, "0.") {
		n = 3
	}
	key := v
	if len(parts) > n {
		key = strings.Join(parts[:n], ".")
	}
	for _, mv := range metadataVersions {
		if key == mv.release {
			return true
		}
		for iv := 0; iv < mv.ivs; iv++ {
			if key == fmt.Sprintf("%s-IV%d", mv.release, iv) {
				return true
			}
		}
	}
	return false
}

func messageFormatVersionKey() codec {
	return codec{func(c *LogConfig) string { return c.MessageFormatVersion },
		func(c *LogConfig, v string) error {
			if !validMetadataVersion(v) {
				return fmt.Errorf("version %s is not a valid version", v)
			}
			c.MessageFormatVersion = v
			return nil
		}}
}

func row(name string, typ ConfigType, broker []brokerSynonym, cd codec) topicKey {
	return topicKey{name: name, typ: typ, broker: broker, codec: cd}
}

func brokers(s ...brokerSynonym) []brokerSynonym { return s }

// topicKeyTable is every topic-level key of Kafka 3.9's LogConfig, with
// its type, validator and default (DefaultLogConfig), and the broker keys
// that set its default. It is the one list of topic keys: validation,
// DescribeConfigs and the list-type test of IncrementalAlterConfigs all
// read it.
var topicKeyTable = func() []topicKey {
	rows := []topicKey{
		row("segment.bytes", TypeInt, brokers(syn("log.segment.bytes", "1073741824")),
			intKey(func(c *LogConfig) *int64 { return &c.SegmentBytes }, 14)),
		row("segment.ms", TypeLong, brokers(synNoDefault("log.roll.ms"), syn("log.roll.hours", "168")),
			longKey(func(c *LogConfig) *int64 { return &c.SegmentMs }, 1, math.MaxInt64)),
		row("segment.jitter.ms", TypeLong, brokers(synNoDefault("log.roll.jitter.ms"), syn("log.roll.jitter.hours", "0")),
			longKey(func(c *LogConfig) *int64 { return &c.SegmentJitterMs }, 0, math.MaxInt64)),
		row("segment.index.bytes", TypeInt, brokers(syn("log.index.size.max.bytes", "10485760")),
			intKey(func(c *LogConfig) *int64 { return &c.SegmentIndexBytes }, 4)),
		row("flush.messages", TypeLong, brokers(syn("log.flush.interval.messages", maxLong)),
			longKey(func(c *LogConfig) *int64 { return &c.FlushMessages }, 1, math.MaxInt64)),
		row("flush.ms", TypeLong, brokers(synNoDefault("log.flush.interval.ms"), syn("log.flush.scheduler.interval.ms", maxLong)),
			longKey(func(c *LogConfig) *int64 { return &c.FlushMs }, 0, math.MaxInt64)),
		row("retention.bytes", TypeLong, brokers(syn("log.retention.bytes", "-1")),
			longKey(func(c *LogConfig) *int64 { return &c.RetentionBytes }, math.MinInt64, math.MaxInt64)),
		row("retention.ms", TypeLong, brokers(synNoDefault("log.retention.ms"), synNoDefault("log.retention.minutes"), syn("log.retention.hours", "168")),
			longKey(func(c *LogConfig) *int64 { return &c.RetentionMs }, -1, math.MaxInt64)),
		row("max.message.bytes", TypeInt, brokers(syn("message.max.bytes", "1048588")),
			intKey(func(c *LogConfig) *int64 { return &c.MaxMessageBytes }, 0)),
		row("index.interval.bytes", TypeInt, brokers(syn("log.index.interval.bytes", "4096")),
			intKey(func(c *LogConfig) *int64 { return &c.IndexIntervalBytes }, 0)),
		row("delete.retention.ms", TypeLong, brokers(syn("log.cleaner.delete.retention.ms", "86400000")),
			longKey(func(c *LogConfig) *int64 { return &c.DeleteRetentionMs }, 0, math.MaxInt64)),
		row("min.compaction.lag.ms", TypeLong, brokers(syn("log.cleaner.min.compaction.lag.ms", "0")),
			longKey(func(c *LogConfig) *int64 { return &c.MinCompactionLagMs }, 0, math.MaxInt64)),
		row("max.compaction.lag.ms", TypeLong, brokers(syn("log.cleaner.max.compaction.lag.ms", maxLong)),
			longKey(func(c *LogConfig) *int64 { return &c.MaxCompactionLagMs }, 1, math.MaxInt64)),
		row("file.delete.delay.ms", TypeLong, brokers(syn("log.segment.delete.delay.ms", "60000")),
			longKey(func(c *LogConfig) *int64 { return &c.FileDeleteDelayMs }, 0, math.MaxInt64)),
		row("min.cleanable.dirty.ratio", TypeDouble, brokers(syn("log.cleaner.min.cleanable.ratio", "0.5")),
			codec{func(c *LogConfig) string { return formatDouble(c.MinCleanableDirtyRatio) },
				func(c *LogConfig, v string) error {
					x, err := strconv.ParseFloat(v, 64)
					if err != nil || math.IsNaN(x) {
						return fmt.Errorf("%q is not a number of type DOUBLE", v)
					}
					if x < 0 || x > 1 {
						return fmt.Errorf("value %v must be in [0, 1]", x)
					}
					c.MinCleanableDirtyRatio = x
					return nil
				}}),
		row("cleanup.policy", TypeList, brokers(syn("log.cleanup.policy", "delete")),
			codec{func(c *LogConfig) string { return c.CleanupPolicy }, setCleanupPolicy}),
		row("unclean.leader.election.enable", TypeBoolean, brokers(syn("unclean.leader.election.enable", "false")),
			boolKey(func(c *LogConfig) *bool { return &c.UncleanLeaderElection })),
		row("min.insync.replicas", TypeInt, brokers(syn("min.insync.replicas", "1")),
			intKey(func(c *LogConfig) *int64 { return &c.MinInsyncReplicas }, 1)),
		// Kafka also takes uncompressed, zstd, lz4, snappy and gzip, which
		// make the broker recompress; it keeps batches as produced.
		row("compression.type", TypeString, brokers(syn("compression.type", "producer")),
			enumKey(func(c *LogConfig) *string { return &c.CompressionType }, "producer")),
		row("compression.gzip.level", TypeInt, brokers(syn("compression.gzip.level", "-1")),
			codec{numGet(func(c *LogConfig) *int64 { return &c.CompressionGzipLevel }),
				func(c *LogConfig, v string) error {
					if err := numSet(func(c *LogConfig) *int64 { return &c.CompressionGzipLevel }, "INT", math.MinInt32, math.MaxInt32)(c, v); err != nil {
						return err
					}
					if l := c.CompressionGzipLevel; l > 9 || (l < 1 && l != -1) {
						return fmt.Errorf("value %d must be between 1 and 9 or equal to -1", l)
					}
					return nil
				}}),
		row("compression.lz4.level", TypeInt, brokers(syn("compression.lz4.level", "9")),
			codec{numGet(func(c *LogConfig) *int64 { return &c.CompressionLz4Level }),
				numSet(func(c *LogConfig) *int64 { return &c.CompressionLz4Level }, "INT", 1, 17)}),
		row("compression.zstd.level", TypeInt, brokers(syn("compression.zstd.level", "3")),
			codec{numGet(func(c *LogConfig) *int64 { return &c.CompressionZstdLevel }),
				numSet(func(c *LogConfig) *int64 { return &c.CompressionZstdLevel }, "INT", -131072, 22)}),
		row("preallocate", TypeBoolean, brokers(syn("log.preallocate", "false")),
			boolKey(func(c *LogConfig) *bool { return &c.Preallocate })),
		row("message.format.version", TypeString, brokers(syn("log.message.format.version", "3.0-IV1")),
			messageFormatVersionKey()),
		row("message.timestamp.type", TypeString, brokers(syn("log.message.timestamp.type", "CreateTime")),
			enumKey(func(c *LogConfig) *string { return &c.MessageTimestampType }, "CreateTime", "LogAppendTime")),
		row("message.timestamp.difference.max.ms", TypeLong, brokers(syn("log.message.timestamp.difference.max.ms", maxLong)),
			longKey(func(c *LogConfig) *int64 { return &c.MessageTimestampDifferenceMaxMs }, 0, math.MaxInt64)),
		row("message.timestamp.before.max.ms", TypeLong, brokers(syn("log.message.timestamp.before.max.ms", maxLong)),
			longKey(func(c *LogConfig) *int64 { return &c.MessageTimestampBeforeMaxMs }, 0, math.MaxInt64)),
		row("message.timestamp.after.max.ms", TypeLong, brokers(syn("log.message.timestamp.after.max.ms", maxLong)),
			longKey(func(c *LogConfig) *int64 { return &c.MessageTimestampAfterMaxMs }, 0, math.MaxInt64)),
		row("leader.replication.throttled.replicas", TypeList, nil,
			throttleKey(func(c *LogConfig) *string { return &c.LeaderReplicationThrottledReplicas })),
		row("follower.replication.throttled.replicas", TypeList, nil,
			throttleKey(func(c *LogConfig) *string { return &c.FollowerReplicationThrottledReplicas })),
		row("message.downconversion.enable", TypeBoolean, brokers(syn("log.message.downconversion.enable", "true")),
			boolKey(func(c *LogConfig) *bool { return &c.MessageDownconversionEnable })),
		row("remote.storage.enable", TypeBoolean, nil,
			falseOnlyKey(func(c *LogConfig) *bool { return &c.RemoteStorageEnable },
				"Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.")),
		row("local.retention.ms", TypeLong, brokers(syn("log.local.retention.ms", "-2")),
			longKey(func(c *LogConfig) *int64 { return &c.LocalRetentionMs }, -2, math.MaxInt64)),
		row("local.retention.bytes", TypeLong, brokers(syn("log.local.retention.bytes", "-2")),
			longKey(func(c *LogConfig) *int64 { return &c.LocalRetentionBytes }, -2, math.MaxInt64)),
		row("remote.log.copy.disable", TypeBoolean, nil,
			falseOnlyKey(func(c *LogConfig) *bool { return &c.RemoteLogCopyDisable },
				"It is invalid to set `remote.log.delete.on.disable` or `remote.log.copy.disable` under Zookeeper's mode.")),
		row("remote.log.delete.on.disable", TypeBoolean, nil,
			falseOnlyKey(func(c *LogConfig) *bool { return &c.RemoteLogDeleteOnDisable },
				"It is invalid to set `remote.log.delete.on.disable` or `remote.log.copy.disable` under Zookeeper's mode.")),
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].name < rows[j].name })
	return rows
}()

var topicKeys = func() map[string]*topicKey {
	m := make(map[string]*topicKey, len(topicKeyTable))
	for i := range topicKeyTable {
		m[topicKeyTable[i].name] = &topicKeyTable[i]
	}
	return m
}()

// IsTopicConfigKey reports whether name is a topic-level setting (one of
// Kafka's; unknown names are INVALID_CONFIG).
func IsTopicConfigKey(name string) bool {
	_, ok := topicKeys[name]
	return ok
}

// IsListTopicConfigKey reports whether name is a topic key of Kafka's LIST
// type, the only ones IncrementalAlterConfigs may APPEND to or SUBTRACT from.
func IsListTopicConfigKey(name string) bool {
	k, ok := topicKeys[name]
	return ok && k.typ == TypeList
}

// WithOverrides returns c with the topic overrides applied. An unknown key
// or a bad value returns an error wrapping ErrInvalidConfig that names it;
// so does a conflict between keys that Kafka's LogConfig.validate refuses
// (min.compaction.lag.ms above max.compaction.lag.ms).
func (c LogConfig) WithOverrides(overrides map[string]string) (LogConfig, error) {
	out := c
	names := make([]string, 0, len(overrides))
	for name := range overrides {
		names = append(names, name)
	}
	sort.Strings(names) // the same key named first on every call
	for _, name := range names {
		k, ok := topicKeys[name]
		if !ok {
			return c, fmt.Errorf("%w: unknown topic config name: %s", ErrInvalidConfig, name)
		}
		v := strings.TrimSpace(overrides[name])
		if err := k.set(&out, v); err != nil {
			return c, fmt.Errorf("%w: invalid value %s for configuration %s: %v", ErrInvalidConfig, v, name, err)
		}
	}
	if out.MinCompactionLagMs > out.MaxCompactionLagMs {
		return c, fmt.Errorf("%w: conflict topic config setting min.compaction.lag.ms (%d) > max.compaction.lag.ms (%d)",
			ErrInvalidConfig, out.MinCompactionLagMs, out.MaxCompactionLagMs)
	}
	return out, nil
}

// Entries lists every topic-level setting of c, sorted by name, with its
// source and synonyms as Kafka's ConfigHelper.createTopicConfigEntry
// builds them: overrides are the topic's own (DYNAMIC_TOPIC_CONFIG);
// static holds the keys set in server.properties with their values as
// written (STATIC_BROKER_CONFIG); c is the effective config. Only the
// synonyms from the first broker synonym on are listed (Kafka drops the
// others), so with log.retention.hours alone set, retention.ms is
// reported from DEFAULT_CONFIG although its value is the hours'.
func (c LogConfig) Entries(overrides, static map[string]string) []ConfigEntry {
	out := make([]ConfigEntry, 0, len(topicKeyTable))
	for i := range topicKeyTable {
		k := &topicKeyTable[i]
		e := ConfigEntry{Name: k.name, Value: k.get(&c), Type: k.typ}
		if _, set := overrides[k.name]; set {
			e.Synonyms = append(e.Synonyms, ConfigSynonym{Name: k.name, Value: e.Value, Source: SourceDynamicTopic})
		}
		var broker []ConfigSynonym
		for _, s := range k.broker {
			if v, ok := static[s.name]; ok {
				broker = append(broker, ConfigSynonym{Name: s.name, Value: v, Source: SourceStaticBroker})
			}
		}
		for _, s := range k.broker {
			if s.hasDefault {
				broker = append(broker, ConfigSynonym{Name: s.name, Value: s.def, Source: SourceDefault})
			}
		}
		for len(broker) > 0 && broker[0].Name != k.broker[0].name {
			broker = broker[1:]
		}
		e.Synonyms = append(e.Synonyms, broker...)
		e.Source = SourceDefault
		if len(e.Synonyms) > 0 {
			e.Source = e.Synonyms[0].Source
		}
		e.IsDefault = e.Source == SourceDefault
		out = append(out, e)
	}
	return out
}
