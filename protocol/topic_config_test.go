package protocol

// Tests of the topic-level keys through the protocol: every key of Kafka
// 3.x's LogConfig can be set by CreateTopics, AlterConfigs and
// IncrementalAlterConfigs (driven by kadm), a bad value or an unknown key
// is INVALID_CONFIG naming it, and DescribeConfigs reports each key with
// Kafka's default, type and source.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
)

// topicKeyCases: a value Kafka accepts and one it refuses, per key.
var topicKeyCases = []struct{ name, good, bad string }{
	{"cleanup.policy", "delete", "forever"},
	{"compression.gzip.level", "5", "10"},
	{"compression.lz4.level", "10", "0"},
	{"compression.type", "producer", "brotli"},
	{"compression.zstd.level", "10", "23"},
	{"delete.retention.ms", "1000", "-1"},
	{"file.delete.delay.ms", "1000", "-1"},
	{"flush.messages", "100", "0"},
	{"flush.ms", "1000", "-1"},
	{"follower.replication.throttled.replicas", "0:1,1:2", "0"},
	{"index.interval.bytes", "100", "-1"},
	{"leader.replication.throttled.replicas", "*", "x"},
	{"local.retention.bytes", "-2", "-3"},
	{"local.retention.ms", "-2", "-3"},
	{"max.compaction.lag.ms", "100000", "0"},
	{"max.message.bytes", "100000", "-1"},
	{"message.downconversion.enable", "false", "maybe"},
	{"message.format.version", "2.8-IV1", "9.9"},
	{"message.timestamp.after.max.ms", "1000", "-1"},
	{"message.timestamp.before.max.ms", "1000", "-1"},
	{"message.timestamp.difference.max.ms", "3600000", "-1"},
	{"message.timestamp.type", "LogAppendTime", "Now"},
	{"min.cleanable.dirty.ratio", "0.1", "2"},
	{"min.compaction.lag.ms", "10", "-1"},
	{"min.insync.replicas", "1", "0"},
	{"preallocate", "true", "1"},
	{"remote.log.copy.disable", "false", "true"},
	{"remote.log.delete.on.disable", "false", "true"},
	{"remote.storage.enable", "false", "true"},
	{"retention.bytes", "1000000", "big"},
	{"retention.ms", "60000", "-2"},
	{"segment.bytes", "1000000", "13"},
	{"segment.index.bytes", "4096", "3"},
	{"segment.jitter.ms", "1000", "-1"},
	{"segment.ms", "60000", "0"},
	{"unclean.leader.election.enable", "true", "yes"},
}

func TestTopicConfigEveryKeyThroughAdmin(t *testing.T) {
	b := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, b))
	str := func(s string) *string { return &s }
	createTopic(t, b, "alter", 1)
	for i, k := range topicKeyCases {
		t.Run(k.name, func(t *testing.T) {
			topic := fmt.Sprintf("create-%d", i)
			resp, err := adm.CreateTopics(ctx, 1, 1, map[string]*string{k.name: str(k.good)}, topic)
			if err != nil || resp[topic].Err != nil {
				t.Fatalf("CreateTopics %s=%s: %v %+v", k.name, k.good, err, resp[topic])
			}
			if ti, _ := b.cluster.Topic(topic); ti.Config[k.name] != k.good {
				t.Fatalf("created topic's overrides %v", ti.Config)
			}
			resp, err = adm.CreateTopics(ctx, 1, 1, map[string]*string{k.name: str(k.bad)}, topic+"-bad")
			if err != nil || !errors.Is(resp[topic+"-bad"].Err, kerr.InvalidConfig) || !strings.Contains(resp[topic+"-bad"].ErrMessage, k.name) {
				t.Fatalf("CreateTopics %s=%s: %v %+v, want INVALID_CONFIG naming the key", k.name, k.bad, err, resp[topic+"-bad"])
			}
			if _, ok := b.cluster.Topic(topic + "-bad"); ok {
				t.Fatal("a refused topic was created")
			}

			// IncrementalAlterConfigs.
			ar, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: k.name, Value: str(k.good)}}, "alter")
			if err != nil || ar[0].Err != nil {
				t.Fatalf("IncrementalAlterConfigs %s=%s: %v %+v", k.name, k.good, err, ar)
			}
			ar, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: k.name, Value: str(k.bad)}}, "alter")
			if err != nil || !errors.Is(ar[0].Err, kerr.InvalidConfig) || !strings.Contains(ar[0].ErrMessage, k.name) {
				t.Fatalf("IncrementalAlterConfigs %s=%s: %v %+v", k.name, k.bad, err, ar)
			}
			if ti, _ := b.cluster.Topic("alter"); ti.Config[k.name] != k.good {
				t.Fatalf("after a refused change: %v", ti.Config)
			}
			// AlterConfigs (legacy), which replaces every override.
			ar, err = adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: k.name, Value: str(k.good)}}, "alter")
			if err != nil || ar[0].Err != nil {
				t.Fatalf("AlterConfigs %s=%s: %v %+v", k.name, k.good, err, ar)
			}
			if ti, _ := b.cluster.Topic("alter"); len(ti.Config) != 1 || ti.Config[k.name] != k.good {
				t.Fatalf("AlterConfigs left %v", ti.Config)
			}
			ar, err = adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: k.name, Value: str(k.bad)}}, "alter")
			if err != nil || !errors.Is(ar[0].Err, kerr.InvalidConfig) || !strings.Contains(ar[0].ErrMessage, k.name) {
				t.Fatalf("AlterConfigs %s=%s: %v %+v", k.name, k.bad, err, ar)
			}
		})
	}
	for _, name := range []string{"no.such.key", "log.retention.hours"} {
		resp, err := adm.CreateTopics(ctx, 1, 1, map[string]*string{name: str("1")}, "unknown-key")
		if err != nil || !errors.Is(resp["unknown-key"].Err, kerr.InvalidConfig) || !strings.Contains(resp["unknown-key"].ErrMessage, name) {
			t.Errorf("CreateTopics with %s: %v %+v", name, err, resp["unknown-key"])
		}
		ar, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: name, Value: str("1")}}, "alter")
		if err != nil || !errors.Is(ar[0].Err, kerr.InvalidConfig) || !strings.Contains(ar[0].ErrMessage, name) {
			t.Errorf("IncrementalAlterConfigs with %s: %v %+v", name, err, ar)
		}
		ar, err = adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: name, Value: str("1")}}, "alter")
		if err != nil || !errors.Is(ar[0].Err, kerr.InvalidConfig) || !strings.Contains(ar[0].ErrMessage, name) {
			t.Errorf("AlterConfigs with %s: %v %+v", name, err, ar)
		}
	}
	// Compacted topics: compact, and compact with delete in either order.
	for i, policy := range []string{"compact", "compact,delete", "delete,compact"} {
		topic := fmt.Sprintf("compacted-%d", i)
		resp, err := adm.CreateTopics(ctx, 1, 1, map[string]*string{"cleanup.policy": str(policy)}, topic)
		if err != nil || resp[topic].Err != nil {
			t.Fatalf("CreateTopics cleanup.policy=%s: %v %+v", policy, err, resp[topic])
		}
		ar, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "cleanup.policy", Value: str(policy)}}, "alter")
		if err != nil || ar[0].Err != nil {
			t.Fatalf("IncrementalAlterConfigs cleanup.policy=%s: %v %+v", policy, err, ar)
		}
		ar, err = adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "cleanup.policy", Value: str(policy)}}, "alter")
		if err != nil || ar[0].Err != nil {
			t.Fatalf("AlterConfigs cleanup.policy=%s: %v %+v", policy, err, ar)
		}
	}
	ar, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SubtractConfig, Name: "cleanup.policy", Value: str("compact")}}, "alter")
	if err != nil || ar[0].Err != nil {
		t.Fatalf("subtract compact: %v %+v", err, ar)
	}
	if ti, _ := b.cluster.Topic("alter"); ti.Config["cleanup.policy"] != "delete" {
		t.Fatalf("subtract compact from delete,compact: %v", ti.Config)
	}

	// APPEND and SUBTRACT apply to every LIST key, not only cleanup.policy.
	ar, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "leader.replication.throttled.replicas", Value: str("0:1")}}, "alter")
	if err != nil || ar[0].Err != nil {
		t.Fatalf("append to a throttle list: %v %+v", err, ar)
	}
	if ti, _ := b.cluster.Topic("alter"); ti.Config["leader.replication.throttled.replicas"] != "0:1" {
		t.Fatalf("append: %v", ti.Config)
	}
}

// kafkaTopicDefaults: Kafka 3.9's default and DescribeConfigs type of
// every topic key, with the broker key that is its first synonym ("" for
// the keys Kafka gives no broker default).
var kafkaTopicDefaults = map[string]struct {
	def    string
	typ    kmsg.ConfigType
	broker string
}{
	"cleanup.policy":                          {"delete", kmsg.ConfigTypeList, "log.cleanup.policy"},
	"compression.gzip.level":                  {"-1", kmsg.ConfigTypeInt, "compression.gzip.level"},
	"compression.lz4.level":                   {"9", kmsg.ConfigTypeInt, "compression.lz4.level"},
	"compression.type":                        {"producer", kmsg.ConfigTypeString, "compression.type"},
	"compression.zstd.level":                  {"3", kmsg.ConfigTypeInt, "compression.zstd.level"},
	"delete.retention.ms":                     {"86400000", kmsg.ConfigTypeLong, "log.cleaner.delete.retention.ms"},
	"file.delete.delay.ms":                    {"60000", kmsg.ConfigTypeLong, "log.segment.delete.delay.ms"},
	"flush.messages":                          {"9223372036854775807", kmsg.ConfigTypeLong, "log.flush.interval.messages"},
	"flush.ms":                                {"9223372036854775807", kmsg.ConfigTypeLong, ""},
	"follower.replication.throttled.replicas": {"", kmsg.ConfigTypeList, ""},
	"index.interval.bytes":                    {"4096", kmsg.ConfigTypeInt, "log.index.interval.bytes"},
	"leader.replication.throttled.replicas":   {"", kmsg.ConfigTypeList, ""},
	"local.retention.bytes":                   {"-2", kmsg.ConfigTypeLong, "log.local.retention.bytes"},
	"local.retention.ms":                      {"-2", kmsg.ConfigTypeLong, "log.local.retention.ms"},
	"max.compaction.lag.ms":                   {"9223372036854775807", kmsg.ConfigTypeLong, "log.cleaner.max.compaction.lag.ms"},
	"max.message.bytes":                       {"1048588", kmsg.ConfigTypeInt, "message.max.bytes"},
	"message.downconversion.enable":           {"true", kmsg.ConfigTypeBoolean, "log.message.downconversion.enable"},
	"message.format.version":                  {"3.0-IV1", kmsg.ConfigTypeString, "log.message.format.version"},
	"message.timestamp.after.max.ms":          {"9223372036854775807", kmsg.ConfigTypeLong, "log.message.timestamp.after.max.ms"},
	"message.timestamp.before.max.ms":         {"9223372036854775807", kmsg.ConfigTypeLong, "log.message.timestamp.before.max.ms"},
	"message.timestamp.difference.max.ms":     {"9223372036854775807", kmsg.ConfigTypeLong, "log.message.timestamp.difference.max.ms"},
	"message.timestamp.type":                  {"CreateTime", kmsg.ConfigTypeString, "log.message.timestamp.type"},
	"min.cleanable.dirty.ratio":               {"0.5", kmsg.ConfigTypeDouble, "log.cleaner.min.cleanable.ratio"},
	"min.compaction.lag.ms":                   {"0", kmsg.ConfigTypeLong, "log.cleaner.min.compaction.lag.ms"},
	"min.insync.replicas":                     {"1", kmsg.ConfigTypeInt, "min.insync.replicas"},
	"preallocate":                             {"false", kmsg.ConfigTypeBoolean, "log.preallocate"},
	"remote.log.copy.disable":                 {"false", kmsg.ConfigTypeBoolean, ""},
	"remote.log.delete.on.disable":            {"false", kmsg.ConfigTypeBoolean, ""},
	"remote.storage.enable":                   {"false", kmsg.ConfigTypeBoolean, ""},
	"retention.bytes":                         {"-1", kmsg.ConfigTypeLong, "log.retention.bytes"},
	"retention.ms":                            {"604800000", kmsg.ConfigTypeLong, ""},
	"segment.bytes":                           {"1073741824", kmsg.ConfigTypeInt, "log.segment.bytes"},
	"segment.index.bytes":                     {"10485760", kmsg.ConfigTypeInt, "log.index.size.max.bytes"},
	"segment.jitter.ms":                       {"0", kmsg.ConfigTypeLong, ""},
	"segment.ms":                              {"604800000", kmsg.ConfigTypeLong, ""},
	"unclean.leader.election.enable":          {"false", kmsg.ConfigTypeBoolean, "unclean.leader.election.enable"},
}

// TestDescribeConfigsEveryKey: DescribeConfigs v4 with synonyms lists
// every key with its default, type and DEFAULT_CONFIG source, the broker
// default as its synonym, never read-only or sensitive; a broker key set
// in server.properties makes the source STATIC_BROKER_CONFIG, a topic
// override DYNAMIC_TOPIC_CONFIG; v0 marks only true defaults IsDefault.
func TestDescribeConfigsEveryKey(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "plain", 1)
	describe := func(version int16, topic string) map[string]kmsg.DescribeConfigsResponseResourceConfig {
		t.Helper()
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.Version = version
		req.IncludeSynonyms = version >= 1
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
		req.Resources = append(req.Resources, rr)
		resp := b.dial(t).roundTrip(req).(*kmsg.DescribeConfigsResponse)
		if resp.Resources[0].ErrorCode != 0 {
			t.Fatalf("describe %s: %+v", topic, resp.Resources[0])
		}
		out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
		for _, c := range resp.Resources[0].Configs {
			out[c.Name] = c
		}
		return out
	}
	got := describe(4, "plain")
	if len(got) != len(kafkaTopicDefaults) {
		t.Errorf("described %d keys, want %d", len(got), len(kafkaTopicDefaults))
	}
	for name, want := range kafkaTopicDefaults {
		c, ok := got[name]
		if !ok {
			t.Errorf("%s not described", name)
			continue
		}
		if c.Value == nil || *c.Value != want.def || c.ConfigType != want.typ || c.Source != kmsg.ConfigSourceDefaultConfig || c.ReadOnly || c.IsSensitive {
			t.Errorf("%s: value %v type %v source %v ro %v sensitive %v; want %q %v DEFAULT_CONFIG",
				name, strPtr(c.Value), c.ConfigType, c.Source, c.ReadOnly, c.IsSensitive, want.def, want.typ)
		}
		if want.broker == "" {
			continue
		}
		if len(c.ConfigSynonyms) == 0 || c.ConfigSynonyms[0].Name != want.broker || c.ConfigSynonyms[0].Source != kmsg.ConfigSourceDefaultConfig {
			t.Errorf("%s synonyms %+v, want %s from DEFAULT_CONFIG first", name, c.ConfigSynonyms, want.broker)
		}
	}

	// server.properties sets log.cleaner.delete.retention.ms; the topic
	// overrides segment.jitter.ms.
	def := cluster.DefaultLogConfig()
	def.DeleteRetentionMs = 1000
	b.cluster.mu.Lock()
	b.cluster.defaults = &def
	b.cluster.static = map[string]string{"log.cleaner.delete.retention.ms": "1000"}
	b.cluster.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, b))
	jitter := "5"
	if resp, err := adm.CreateTopics(ctx, 1, 1, map[string]*string{"segment.jitter.ms": &jitter}, "tuned"); err != nil || resp["tuned"].Err != nil {
		t.Fatalf("create: %v %+v", err, resp)
	}
	got = describe(4, "tuned")
	dr := got["delete.retention.ms"]
	if *dr.Value != "1000" || dr.Source != kmsg.ConfigSourceStaticBrokerConfig || len(dr.ConfigSynonyms) != 2 ||
		dr.ConfigSynonyms[0].Source != kmsg.ConfigSourceStaticBrokerConfig || *dr.ConfigSynonyms[1].Value != "86400000" {
		t.Errorf("delete.retention.ms set in server.properties: %+v", dr)
	}
	sj := got["segment.jitter.ms"]
	if *sj.Value != "5" || sj.Source != kmsg.ConfigSourceDynamicTopicConfig || len(sj.ConfigSynonyms) != 1 || sj.ConfigSynonyms[0].Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Errorf("segment.jitter.ms override: %+v", sj)
	}
	v0 := describe(0, "tuned")
	if v0["delete.retention.ms"].IsDefault || v0["segment.jitter.ms"].IsDefault || !v0["segment.bytes"].IsDefault {
		t.Errorf("v0 is_default: delete.retention.ms %v segment.jitter.ms %v segment.bytes %v",
			v0["delete.retention.ms"].IsDefault, v0["segment.jitter.ms"].IsDefault, v0["segment.bytes"].IsDefault)
	}
}

func strPtr(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// TestProduceRecordErrors: a batch refused for some of its records (a
// keyless record on a compacted topic, a timestamp out of range) answers
// INVALID_RECORD or INVALID_TIMESTAMP with, from v8, the error message
// and the record errors (batch index and message), as Kafka's
// RecordValidationException becomes a PartitionResponse.
func TestProduceRecordErrors(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "t", 1)
	tp := cluster.TopicPartition{Topic: "t", Partition: 0}
	for _, c := range []struct {
		err  error
		code int16
	}{
		{&partition.RecordValidationError{Err: partition.ErrInvalidRecord, Records: []partition.RecordError{
			{BatchIndex: 1, Message: "Compacted topic cannot accept message without key in topic partition t-0."},
			{BatchIndex: 3, Message: "Compacted topic cannot accept message without key in topic partition t-0."}}}, kerr.InvalidRecord.Code},
		{&partition.RecordValidationError{Err: partition.ErrInvalidTimestamp, Records: []partition.RecordError{
			{BatchIndex: 0, Message: "Timestamp 0 of message with offset 0 is out of range."}}}, kerr.InvalidTimestamp.Code},
	} {
		b.replicas.mu.Lock()
		b.replicas.appendErr = map[cluster.TopicPartition]error{tp: fmt.Errorf("append %s: %w", tp, c.err)}
		b.replicas.mu.Unlock()
		var rve *partition.RecordValidationError
		errors.As(c.err, &rve)
		for _, v := range []int16{7, 8, 9} {
			resp := b.dial(t).roundTrip(produceRequest(v, 1, 1000, "t", 0, makeBatch(0, "a"))).(*kmsg.ProduceResponse)
			rp := resp.Topics[0].Partitions[0]
			if rp.ErrorCode != c.code {
				t.Fatalf("v%d: code %d, want %d", v, rp.ErrorCode, c.code)
			}
			if v < 8 {
				if len(rp.ErrorRecords) != 0 || rp.ErrorMessage != nil {
					t.Fatalf("v%d carries record errors: %+v", v, rp)
				}
				continue
			}
			if rp.ErrorMessage == nil || !strings.Contains(*rp.ErrorMessage, "One or more records have been rejected") {
				t.Fatalf("v%d: message %v", v, strPtr(rp.ErrorMessage))
			}
			if len(rp.ErrorRecords) != len(rve.Records) {
				t.Fatalf("v%d: record errors %+v", v, rp.ErrorRecords)
			}
			for i, re := range rp.ErrorRecords {
				if re.RelativeOffset != rve.Records[i].BatchIndex || strPtr(re.ErrorMessage) != rve.Records[i].Message {
					t.Fatalf("v%d: record error %d %+v, want %+v", v, i, re, rve.Records[i])
				}
			}
		}
	}
}

// TestDescribeTopicConfigsEmptyNames: an empty, non-null ConfigNames
// lists every key, as Kafka's ConfigHelper treats null and empty alike;
// a non-empty one filters.
func TestDescribeTopicConfigsEmptyNames(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "plain", 1)
	describe := func(names []string) int {
		t.Helper()
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.Version = 4
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName, rr.ConfigNames = kmsg.ConfigResourceTypeTopic, "plain", names
		req.Resources = append(req.Resources, rr)
		resp := b.dial(t).roundTrip(req).(*kmsg.DescribeConfigsResponse)
		if resp.Resources[0].ErrorCode != 0 {
			t.Fatalf("describe: %+v", resp.Resources[0])
		}
		return len(resp.Resources[0].Configs)
	}
	if n := describe([]string{}); n != len(kafkaTopicDefaults) {
		t.Errorf("empty ConfigNames: %d keys, want all %d", n, len(kafkaTopicDefaults))
	}
	if n := describe(nil); n != len(kafkaTopicDefaults) {
		t.Errorf("null ConfigNames: %d keys, want all %d", n, len(kafkaTopicDefaults))
	}
	if n := describe([]string{"retention.ms", "no.such.key"}); n != 1 {
		t.Errorf("ConfigNames [retention.ms no.such.key]: %d keys, want 1", n)
	}
}
