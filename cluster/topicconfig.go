package cluster

import (
	"fmt"
	"math"
	"sort"
	"strconv"
)

// LogConfig is the effective configuration of one topic's logs: the broker
// defaults (log.* and friends in server.properties) with the topic's
// overrides from /config/topics/<topic> applied.
type LogConfig struct {
	CleanupPolicy         string // cleanup.policy; only "delete" is supported
	CompressionType       string // compression.type; "producer" keeps batches as sent
	SegmentBytes          int64  // segment.bytes / log.segment.bytes
	SegmentMs             int64  // segment.ms / log.roll.ms
	RetentionMs           int64  // retention.ms / log.retention.ms; -1 keeps forever
	RetentionBytes        int64  // retention.bytes / log.retention.bytes; -1 is unbounded
	FlushMessages         int64  // flush.messages / log.flush.interval.messages
	FlushMs               int64  // flush.ms / log.flush.interval.ms
	IndexIntervalBytes    int64  // index.interval.bytes / log.index.interval.bytes
	MaxMessageBytes       int64  // max.message.bytes / message.max.bytes
	MinInsyncReplicas     int64  // min.insync.replicas
	UncleanLeaderElection bool   // unclean.leader.election.enable
	MessageTimestampType  string // message.timestamp.type: CreateTime or LogAppendTime
}

// DefaultLogConfig returns Kafka's defaults for the topic-level settings.
func DefaultLogConfig() LogConfig {
	return LogConfig{
		CleanupPolicy:         "delete",
		CompressionType:       "producer",
		SegmentBytes:          1 << 30,
		SegmentMs:             7 * 24 * 3600 * 1000,
		RetentionMs:           7 * 24 * 3600 * 1000,
		RetentionBytes:        -1,
		FlushMessages:         math.MaxInt64,
		FlushMs:               math.MaxInt64,
		IndexIntervalBytes:    4096,
		MaxMessageBytes:       1048588,
		MinInsyncReplicas:     1,
		UncleanLeaderElection: false,
		MessageTimestampType:  "CreateTime",
	}
}

// ConfigEntry is one resolved topic setting, for DescribeConfigs.
type ConfigEntry struct {
	Name      string
	Value     string
	IsDefault bool // true when no topic override is set
}

type topicKey struct {
	get func(*LogConfig) string
	set func(*LogConfig, string) error
}

func intKey(field func(*LogConfig) *int64, min int64) topicKey {
	return topicKey{
		get: func(c *LogConfig) string { return strconv.FormatInt(*field(c), 10) },
		set: func(c *LogConfig, v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return fmt.Errorf("%q is not an integer", v)
			}
			if n < min {
				return fmt.Errorf("%d is below the minimum %d", n, min)
			}
			*field(c) = n
			return nil
		},
	}
}

func enumKey(field func(*LogConfig) *string, allowed ...string) topicKey {
	return topicKey{
		get: func(c *LogConfig) string { return *field(c) },
		set: func(c *LogConfig, v string) error {
			for _, a := range allowed {
				if v == a {
					*field(c) = v
					return nil
				}
			}
			return fmt.Errorf("%q is not one of %v", v, allowed)
		},
	}
}

var topicKeys = map[string]topicKey{
	"cleanup.policy":       enumKey(func(c *LogConfig) *string { return &c.CleanupPolicy }, "delete"),
	"compression.type":     enumKey(func(c *LogConfig) *string { return &c.CompressionType }, "producer"),
	"segment.bytes":        intKey(func(c *LogConfig) *int64 { return &c.SegmentBytes }, 14),
	"segment.ms":           intKey(func(c *LogConfig) *int64 { return &c.SegmentMs }, 1),
	"retention.ms":         intKey(func(c *LogConfig) *int64 { return &c.RetentionMs }, -1),
	"retention.bytes":      intKey(func(c *LogConfig) *int64 { return &c.RetentionBytes }, -1),
	"flush.messages":       intKey(func(c *LogConfig) *int64 { return &c.FlushMessages }, 1),
	"flush.ms":             intKey(func(c *LogConfig) *int64 { return &c.FlushMs }, 0),
	"index.interval.bytes": intKey(func(c *LogConfig) *int64 { return &c.IndexIntervalBytes }, 0),
	"max.message.bytes":    intKey(func(c *LogConfig) *int64 { return &c.MaxMessageBytes }, 0),
	"min.insync.replicas":  intKey(func(c *LogConfig) *int64 { return &c.MinInsyncReplicas }, 1),
	"unclean.leader.election.enable": {
		get: func(c *LogConfig) string { return strconv.FormatBool(c.UncleanLeaderElection) },
		set: func(c *LogConfig, v string) error {
			switch v {
			case "true":
				c.UncleanLeaderElection = true
			case "false":
				c.UncleanLeaderElection = false
			default:
				return fmt.Errorf("%q is not true or false", v)
			}
			return nil
		},
	},
	"message.timestamp.type": enumKey(func(c *LogConfig) *string { return &c.MessageTimestampType }, "CreateTime", "LogAppendTime"),
}

// IsTopicConfigKey reports whether name is a topic-level setting this broker honours.
func IsTopicConfigKey(name string) bool {
	_, ok := topicKeys[name]
	return ok
}

// WithOverrides returns c with the topic overrides applied. An unknown key
// or a bad value returns an error wrapping ErrInvalidConfig that names it.
func (c LogConfig) WithOverrides(overrides map[string]string) (LogConfig, error) {
	out := c
	for name, v := range overrides {
		k, ok := topicKeys[name]
		if !ok {
			return c, fmt.Errorf("%w: unknown topic config %q", ErrInvalidConfig, name)
		}
		if err := k.set(&out, v); err != nil {
			return c, fmt.Errorf("%w: %s: %v", ErrInvalidConfig, name, err)
		}
	}
	return out, nil
}

// Entries lists every topic-level setting of c, sorted by name, marking
// those not present in overrides as defaults.
func (c LogConfig) Entries(overrides map[string]string) []ConfigEntry {
	out := make([]ConfigEntry, 0, len(topicKeys))
	for name, k := range topicKeys {
		_, set := overrides[name]
		out = append(out, ConfigEntry{Name: name, Value: k.get(&c), IsDefault: !set})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
