package cluster

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// kafkaTopicKeys are the topic-level keys of Kafka 3.9's LogConfig with
// their type and default, as LogConfig.java and TopicConfig.java define them.
var kafkaTopicKeys = map[string]struct {
	typ ConfigType
	def string
}{
	"cleanup.policy":                          {TypeList, "delete"},
	"compression.gzip.level":                  {TypeInt, "-1"},
	"compression.lz4.level":                   {TypeInt, "9"},
	"compression.type":                        {TypeString, "producer"},
	"compression.zstd.level":                  {TypeInt, "3"},
	"delete.retention.ms":                     {TypeLong, "86400000"},
	"file.delete.delay.ms":                    {TypeLong, "60000"},
	"flush.messages":                          {TypeLong, "9223372036854775807"},
	"flush.ms":                                {TypeLong, "9223372036854775807"},
	"follower.replication.throttled.replicas": {TypeList, ""},
	"index.interval.bytes":                    {TypeInt, "4096"},
	"leader.replication.throttled.replicas":   {TypeList, ""},
	"local.retention.bytes":                   {TypeLong, "-2"},
	"local.retention.ms":                      {TypeLong, "-2"},
	"max.compaction.lag.ms":                   {TypeLong, "9223372036854775807"},
	"max.message.bytes":                       {TypeInt, "1048588"},
	"message.downconversion.enable":           {TypeBoolean, "true"},
	"message.format.version":                  {TypeString, "3.0-IV1"},
	"message.timestamp.after.max.ms":          {TypeLong, "9223372036854775807"},
	"message.timestamp.before.max.ms":         {TypeLong, "9223372036854775807"},
	"message.timestamp.difference.max.ms":     {TypeLong, "9223372036854775807"},
	"message.timestamp.type":                  {TypeString, "CreateTime"},
	"min.cleanable.dirty.ratio":               {TypeDouble, "0.5"},
	"min.compaction.lag.ms":                   {TypeLong, "0"},
	"min.insync.replicas":                     {TypeInt, "1"},
	"preallocate":                             {TypeBoolean, "false"},
	"remote.log.copy.disable":                 {TypeBoolean, "false"},
	"remote.log.delete.on.disable":            {TypeBoolean, "false"},
	"remote.storage.enable":                   {TypeBoolean, "false"},
	"retention.bytes":                         {TypeLong, "-1"},
	"retention.ms":                            {TypeLong, "604800000"},
	"segment.bytes":                           {TypeInt, "1073741824"},
	"segment.index.bytes":                     {TypeInt, "10485760"},
	"segment.jitter.ms":                       {TypeLong, "0"},
	"segment.ms":                              {TypeLong, "604800000"},
	"unclean.leader.election.enable":          {TypeBoolean, "false"},
}

// TestTopicConfigEveryKafkaKey: every key of Kafka's LogConfig is known,
// described with Kafka's type and default, from DEFAULT_CONFIG, and
// nothing else is described.
func TestTopicConfigEveryKafkaKey(t *testing.T) {
	entries := DefaultLogConfig().Entries(nil, nil)
	seen := map[string]bool{}
	for _, e := range entries {
		seen[e.Name] = true
		want, ok := kafkaTopicKeys[e.Name]
		if !ok {
			t.Errorf("described %q, which is not a Kafka topic key", e.Name)
			continue
		}
		if e.Value != want.def || e.Type != want.typ || e.Source != SourceDefault || !e.IsDefault {
			t.Errorf("%s = %q type %d source %d default %v; want %q type %d DEFAULT_CONFIG",
				e.Name, e.Value, e.Type, e.Source, e.IsDefault, want.def, want.typ)
		}
	}
	for name := range kafkaTopicKeys {
		if !seen[name] {
			t.Errorf("%s is not described", name)
		}
		if !IsTopicConfigKey(name) {
			t.Errorf("%s is not a known key", name)
		}
	}
}

// TestTopicConfigValues: each key takes the values Kafka's validators
// accept and refuses the others with ErrInvalidConfig naming the key.
func TestTopicConfigValues(t *testing.T) {
	good := map[string][]string{
		"cleanup.policy":                          {"delete", " delete ", ""},
		"compression.gzip.level":                  {"-1", "1", "9"},
		"compression.lz4.level":                   {"1", "17"},
		"compression.zstd.level":                  {"-131072", "22"},
		"delete.retention.ms":                     {"0", "1000"},
		"file.delete.delay.ms":                    {"0"},
		"follower.replication.throttled.replicas": {"", "*", "0:1,1:2", "0:1, 1:2"},
		"leader.replication.throttled.replicas":   {"*"},
		"local.retention.bytes":                   {"-2", "100"},
		"local.retention.ms":                      {"-2", "100"},
		"max.compaction.lag.ms":                   {"1"},
		"message.downconversion.enable":           {"false", "TRUE"},
		"message.format.version":                  {"0.10.0", "0.10.0-IV1", "2.8", "2.8-IV1", "3.0-IV1", "3.0.1", "3.9-IV0"},
		"message.timestamp.difference.max.ms":     {"0", "3600000"},
		"message.timestamp.before.max.ms":         {"0"},
		"message.timestamp.after.max.ms":          {"0"},
		"min.cleanable.dirty.ratio":               {"0", "0.01", "1", "1e-3"},
		"min.compaction.lag.ms":                   {"0", "100"},
		"preallocate":                             {"true", "false"},
		"remote.log.copy.disable":                 {"false"},
		"remote.log.delete.on.disable":            {"false"},
		"remote.storage.enable":                   {"false"},
		"retention.bytes":                         {"-5", "100"},
		"segment.index.bytes":                     {"4", "2147483647"},
		"segment.jitter.ms":                       {"0", "1000"},
	}
	bad := map[string][]string{
		"cleanup.policy":                          {"forever", "delete,,delete"},
		"compression.gzip.level":                  {"0", "10", "-2"},
		"compression.lz4.level":                   {"0", "18"},
		"compression.zstd.level":                  {"-131073", "23"},
		"delete.retention.ms":                     {"-1", "soon"},
		"file.delete.delay.ms":                    {"-1"},
		"follower.replication.throttled.replicas": {"0", "a:b", "*,0:1"},
		"local.retention.ms":                      {"-3"},
		"max.compaction.lag.ms":                   {"0"},
		"message.downconversion.enable":           {"yes"},
		"message.format.version":                  {"3.10", "0.7.0", "x"},
		"message.timestamp.difference.max.ms":     {"-1"},
		"min.cleanable.dirty.ratio":               {"-0.1", "1.5", "half", "NaN"},
		"min.compaction.lag.ms":                   {"-1"},
		"preallocate":                             {"1"},
		"remote.log.copy.disable":                 {"true"},
		"remote.log.delete.on.disable":            {"true"},
		"remote.storage.enable":                   {"true"},
		"segment.bytes":                           {"13", "2147483648"},
		"segment.index.bytes":                     {"3", "2147483648"},
		"segment.jitter.ms":                       {"-1"},
	}
	for name, vals := range good {
		for _, v := range vals {
			if _, err := DefaultLogConfig().WithOverrides(map[string]string{name: v}); err != nil {
				t.Errorf("%s=%q refused: %v", name, v, err)
			}
		}
	}
	for name, vals := range bad {
		for _, v := range vals {
			_, err := DefaultLogConfig().WithOverrides(map[string]string{name: v})
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), name) {
				t.Errorf("%s=%q: got %v, want ErrInvalidConfig naming the key", name, v, err)
			}
		}
	}
	if _, err := DefaultLogConfig().WithOverrides(map[string]string{"no.such.key": "1"}); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "no.such.key") {
		t.Errorf("unknown key: %v", err)
	}
	_, err := DefaultLogConfig().WithOverrides(map[string]string{"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "min.compaction.lag.ms") {
		t.Errorf("min.compaction.lag.ms > max.compaction.lag.ms: %v", err)
	}
}

// TestTopicConfigParsed: the values reach LogConfig's fields.
func TestTopicConfigParsed(t *testing.T) {
	c, err := DefaultLogConfig().WithOverrides(map[string]string{
		"delete.retention.ms": "1000", "min.compaction.lag.ms": "10", "max.compaction.lag.ms": "20",
		"min.cleanable.dirty.ratio": "0.25", "segment.jitter.ms": "7", "segment.index.bytes": "4096",
		"file.delete.delay.ms": "5", "preallocate": "true", "message.timestamp.difference.max.ms": "3600000",
		"message.downconversion.enable": "false", "message.format.version": "2.8",
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.DeleteRetentionMs != 1000 || c.MinCompactionLagMs != 10 || c.MaxCompactionLagMs != 20 ||
		c.MinCleanableDirtyRatio != 0.25 || c.SegmentJitterMs != 7 || c.SegmentIndexBytes != 4096 ||
		c.FileDeleteDelayMs != 5 || !c.Preallocate || c.MessageTimestampDifferenceMaxMs != 3600000 ||
		c.MessageDownconversionEnable || c.MessageFormatVersion != "2.8" {
		t.Fatalf("fields not set: %+v", c)
	}
	if !c.Delete || c.Compact {
		t.Fatalf("default policy: delete %v compact %v", c.Delete, c.Compact)
	}
	// message.timestamp.before/after.max.ms fall back to the difference
	// while at their defaults, as Kafka 3.6+'s LogConfig does.
	if c.TimestampBeforeMaxMs() != 3600000 || c.TimestampAfterMaxMs() != 3600000 {
		t.Fatalf("before %d after %d", c.TimestampBeforeMaxMs(), c.TimestampAfterMaxMs())
	}
	c, _ = c.WithOverrides(map[string]string{"message.timestamp.after.max.ms": "5"})
	if c.TimestampBeforeMaxMs() != 3600000 || c.TimestampAfterMaxMs() != 5 {
		t.Fatalf("after set: before %d after %d", c.TimestampBeforeMaxMs(), c.TimestampAfterMaxMs())
	}
	if d := DefaultLogConfig(); d.TimestampBeforeMaxMs() != math.MaxInt64 {
		t.Fatalf("default before %d", d.TimestampBeforeMaxMs())
	}
	c, _ = DefaultLogConfig().WithOverrides(map[string]string{"cleanup.policy": ""})
	if c.Delete || c.Compact || c.CleanupPolicy != "" {
		t.Fatalf("empty policy: %+v", c)
	}
}

// TestTopicConfigSources: DescribeConfigs' source and synonyms, as
// Kafka's ConfigHelper.createTopicConfigEntry builds them: a topic
// override is DYNAMIC_TOPIC_CONFIG; a broker synonym set in
// server.properties STATIC_BROKER_CONFIG; then the broker default.
func TestTopicConfigSources(t *testing.T) {
	static := map[string]string{"log.cleaner.delete.retention.ms": "1000", "log.retention.hours": "24"}
	c := DefaultLogConfig()
	c.DeleteRetentionMs = 1000
	c.RetentionMs = 24 * 3600 * 1000
	overrides := map[string]string{"segment.jitter.ms": "5"}
	c, err := c.WithOverrides(overrides)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]ConfigEntry{}
	for _, e := range c.Entries(overrides, static) {
		byName[e.Name] = e
	}
	dr := byName["delete.retention.ms"]
	if dr.Source != SourceStaticBroker || dr.Value != "1000" || dr.IsDefault {
		t.Errorf("delete.retention.ms: %+v", dr)
	}
	want := []ConfigSynonym{{"log.cleaner.delete.retention.ms", "1000", SourceStaticBroker}, {"log.cleaner.delete.retention.ms", "86400000", SourceDefault}}
	if !equalSynonyms(dr.Synonyms, want) {
		t.Errorf("delete.retention.ms synonyms %+v, want %+v", dr.Synonyms, want)
	}
	sj := byName["segment.jitter.ms"]
	want = []ConfigSynonym{{"segment.jitter.ms", "5", SourceDynamicTopic}}
	if sj.Source != SourceDynamicTopic || sj.Value != "5" || !equalSynonyms(sj.Synonyms, want) {
		t.Errorf("segment.jitter.ms: %+v", sj)
	}
	// Kafka lists synonyms from the first broker synonym on: with only
	// log.retention.hours set, log.retention.ms heads nothing, so the
	// source is DEFAULT_CONFIG and there are no synonyms (dropWhile in
	// ConfigHelper.configSynonyms).
	if rm := byName["retention.ms"]; rm.Source != SourceDefault || rm.Value != "86400000" || len(rm.Synonyms) != 0 {
		t.Errorf("retention.ms: %+v", rm)
	}
	sb := byName["segment.bytes"]
	want = []ConfigSynonym{{"log.segment.bytes", "1073741824", SourceDefault}}
	if sb.Source != SourceDefault || !equalSynonyms(sb.Synonyms, want) {
		t.Errorf("segment.bytes: %+v", sb)
	}
	if th := byName["leader.replication.throttled.replicas"]; th.Source != SourceDefault || len(th.Synonyms) != 0 {
		t.Errorf("a key without a broker synonym: %+v", th)
	}
	if r := byName["min.cleanable.dirty.ratio"]; r.Value != "0.5" || r.Synonyms[0].Name != "log.cleaner.min.cleanable.ratio" {
		t.Errorf("min.cleanable.dirty.ratio: %+v", r)
	}
}

func equalSynonyms(a, b []ConfigSynonym) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestTopicConfigCompactPolicy: cleanup.policy takes compact, delete or
// both in either order, as Kafka's ValidList, and sets Compact and Delete.
func TestTopicConfigCompactPolicy(t *testing.T) {
	for v, want := range map[string]struct {
		policy          string
		compact, delete bool
	}{
		"compact":         {"compact", true, false},
		"compact,delete":  {"compact,delete", true, true},
		"delete, compact": {"delete,compact", true, true},
		"delete":          {"delete", false, true},
	} {
		c, err := DefaultLogConfig().WithOverrides(map[string]string{"cleanup.policy": v})
		if err != nil {
			t.Errorf("cleanup.policy=%q: %v", v, err)
			continue
		}
		if c.CleanupPolicy != want.policy || c.Compact != want.compact || c.Delete != want.delete {
			t.Errorf("cleanup.policy=%q: %q compact %v delete %v", v, c.CleanupPolicy, c.Compact, c.Delete)
		}
	}
}
