package test

// TestBrokerConfig drives dynamic broker configs (KIP-226) against a
// 2-broker cluster with three real clients: kadm, sarama and librdkafka
// (confluent-kafka-python) describe a BROKER resource with its sources
// (STATIC_BROKER_CONFIG, DEFAULT_CONFIG, DYNAMIC_BROKER_CONFIG,
// DYNAMIC_DEFAULT_BROKER_CONFIG) and synonyms in Kafka's order; a change
// of the cluster default log.retention.ms through kadm makes both brokers
// delete old segments without a restart (the log start offset moves, the
// topic's retention.ms is reported from the new source), and one of
// message.max.bytes refuses a larger batch, then takes it again once
// deleted; an alteration of
// a key that needs a restart is refused with INVALID_REQUEST and Kafka's
// message, and leaves /config/brokers untouched; a BROKER_LOGGER level
// changes what a broker logs.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// brokerSyn is one synonym as every client reports it.
type brokerSyn struct {
	Name   string `json:"name"`
	Value  string `json:"value"`
	Source int    `json:"source"`
}

// brokerEntry is one described broker setting, client-neutral.
type brokerEntry struct {
	Value     *string     `json:"value"`
	Source    int         `json:"source"`
	ReadOnly  bool        `json:"read_only"`
	Sensitive bool        `json:"sensitive"`
	Synonyms  []brokerSyn `json:"synonyms"`
}

func (e brokerEntry) String() string {
	v := "null"
	if e.Value != nil {
		v = *e.Value
	}
	return fmt.Sprintf("%s (source %d, read-only %v) synonyms %v", v, e.Source, e.ReadOnly, e.Synonyms)
}

// The sources, Kafka's ConfigSource ids.
const (
	srcDynamicBroker  = 2
	srcDynamicDefault = 3
	srcStatic         = 4
	srcDefault        = 5
)

// wantBrokerEntries is what broker 1 must report once the test has set
// max.connections on broker 1 and log.cleaner.backoff.ms as the cluster
// default, on top of log.retention.hours=1 in server.properties.
var wantBrokerEntries = map[string]brokerEntry{
	"log.retention.hours": {Value: strp("1"), Source: srcStatic, ReadOnly: true,
		Synonyms: []brokerSyn{{"log.retention.hours", "1", srcStatic}, {"log.retention.hours", "168", srcDefault}}},
	"log.retention.ms": {Source: srcDefault}, // unset, no default: null, and Kafka lists no synonym
	"max.connections": {Value: strp("1000"), Source: srcDynamicBroker,
		Synonyms: []brokerSyn{{"max.connections", "1000", srcDynamicBroker}, {"max.connections", "2147483647", srcDefault}}},
	"log.cleaner.backoff.ms": {Value: strp("20000"), Source: srcDynamicDefault,
		Synonyms: []brokerSyn{{"log.cleaner.backoff.ms", "20000", srcDynamicDefault}, {"log.cleaner.backoff.ms", "15000", srcDefault}}},
	"num.partitions": {Value: strp("1"), Source: srcDefault, ReadOnly: true,
		Synonyms: []brokerSyn{{"num.partitions", "1", srcDefault}}},
}

func strp(s string) *string { return &s }

// derefStr is *s, "" for nil.
func derefStr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// byName is synonyms as confluent-kafka-python hands them: a dict by
// name, so a name listed twice (once per source) keeps its first place
// and its last entry.
func byName(syns []brokerSyn) []brokerSyn {
	var out []brokerSyn
	at := map[string]int{}
	for _, s := range syns {
		if i, ok := at[s.Name]; ok {
			out[i] = s
			continue
		}
		at[s.Name] = len(out)
		out = append(out, s)
	}
	return out
}

// checkBrokerEntries compares what a client reported with
// wantBrokerEntries; dictSynonyms folds the wanted synonyms by name.
func checkBrokerEntries(t *testing.T, client string, got map[string]brokerEntry, dictSynonyms bool) {
	t.Helper()
	for name, want := range wantBrokerEntries {
		if dictSynonyms {
			want.Synonyms = byName(want.Synonyms)
		}
		g, ok := got[name]
		if !ok {
			t.Errorf("%s: %s not described", client, name)
			continue
		}
		same := g.Source == want.Source && g.ReadOnly == want.ReadOnly && len(g.Synonyms) == len(want.Synonyms) &&
			(g.Value == nil) == (want.Value == nil) && (g.Value == nil || *g.Value == *want.Value)
		for i := range want.Synonyms {
			same = same && i < len(g.Synonyms) && g.Synonyms[i] == want.Synonyms[i]
		}
		if !same {
			t.Errorf("%s: %s = %v, want %v", client, name, g, want)
		}
	}
	if len(got) < 60 {
		t.Errorf("%s: only %d broker settings described", client, len(got))
	}
}

func kadmBrokerEntries(t *testing.T, cl *kgo.Client, id int32) map[string]brokerEntry {
	adm := kadm.NewClient(cl)
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rcs, err := adm.DescribeBrokerConfigs(ctx, id)
	if err != nil || len(rcs) != 1 || rcs[0].Err != nil {
		t.Fatalf("kadm DescribeBrokerConfigs(%d): %v %+v", id, err, rcs)
	}
	out := map[string]brokerEntry{}
	for _, c := range rcs[0].Configs {
		e := brokerEntry{Value: c.Value, Source: int(c.Source), Sensitive: c.Sensitive}
		for _, s := range c.Synonyms {
			e.Synonyms = append(e.Synonyms, brokerSyn{s.Key, derefStr(s.Value), int(s.Source)})
		}
		out[c.Key] = e
	}
	// kadm does not surface read-only: take it from a raw v4 request.
	req := kmsg.NewPtrDescribeConfigsRequest()
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeBroker, fmt.Sprint(id)
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(ctx, cl.Broker(int(id)))
	if err != nil || len(resp.Resources) != 1 {
		t.Fatalf("raw DescribeConfigs: %v", err)
	}
	for _, c := range resp.Resources[0].Configs {
		e := out[c.Name]
		e.ReadOnly = c.ReadOnly
		out[c.Name] = e
	}
	return out
}

func saramaBrokerEntries(t *testing.T, c *Cluster, id int32) map[string]brokerEntry {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.ClientID = "e2e-sarama-broker-config"
	admin, err := sarama.NewClusterAdmin(c.Seeds(), cfg)
	if err != nil {
		t.Fatalf("sarama cluster admin: %v", err)
	}
	defer admin.Close()
	res, err := admin.DescribeConfigs([]*sarama.ConfigResource{{Type: sarama.BrokerResource, Name: fmt.Sprint(id)}},
		sarama.DescribeConfigsOptions{IncludeSynonyms: true, IncludeDocumentation: true})
	if err != nil || len(res) != 1 || res[0].ErrorCode != 0 {
		t.Fatalf("sarama DescribeConfigs: %v %+v", err, res)
	}
	out := map[string]brokerEntry{}
	docs := 0
	for _, e := range res[0].Configs {
		be := brokerEntry{Source: int(e.Source), ReadOnly: e.ReadOnly, Sensitive: e.Sensitive}
		if e.Value != "" || e.Source != sarama.SourceDefault {
			v := e.Value
			be.Value = &v
		}
		for _, s := range e.Synonyms {
			be.Synonyms = append(be.Synonyms, brokerSyn{s.ConfigName, s.ConfigValue, int(s.Source)})
		}
		if e.Documentation != nil && *e.Documentation != "" {
			docs++
		}
		out[e.Name] = be
	}
	if docs < len(res[0].Configs) {
		t.Errorf("sarama: %d of %d entries have documentation", docs, len(res[0].Configs))
	}
	return out
}

// brokerConfigScript describes broker argv[2] on argv[1] with librdkafka
// and prints {name: entry} as JSON.
const brokerConfigScript = `
import json, sys
from confluent_kafka.admin import AdminClient, ConfigResource
a = AdminClient({'bootstrap.servers': sys.argv[1], 'client.id': 'e2e-broker-config'})
res = ConfigResource('broker', sys.argv[2])
entries = a.describe_configs([res], request_timeout=30)[res].result()
def src(s):
    return int(getattr(s, 'value', s))
out = {}
for name, e in entries.items():
    out[name] = {'value': e.value, 'source': src(e.source), 'read_only': bool(e.is_read_only),
                 'sensitive': bool(e.is_sensitive),
                 'synonyms': [{'name': s.name, 'value': s.value, 'source': src(s.source)} for s in e.synonyms.values()]}
print(json.dumps(out))
`

func librdkafkaBrokerEntries(t *testing.T, py string, c *Cluster, id int32) map[string]brokerEntry {
	t.Helper()
	script := filepath.Join(t.TempDir(), "broker_config.py")
	if err := os.WriteFile(script, []byte(brokerConfigScript), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, script, c.Bootstrap(), fmt.Sprint(id))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("python: %v\n%s", err, tailLines(stderr.String(), 30))
	}
	noProtocolErrors(t, "python broker config", stderr.String())
	out := map[string]brokerEntry{}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("python output %q: %v", tailLines(stdout.String(), 5), err)
	}
	return out
}

// startOffset is the log start offset of topic's partition 0.
func startOffset(ctx context.Context, adm *kadm.Client, topic string) (int64, error) {
	offs, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return -1, err
	}
	o, ok := offs.Lookup(topic, 0)
	if !ok {
		return -1, errors.New("partition 0 not listed")
	}
	if o.Err != nil {
		return -1, o.Err
	}
	return o.Offset, nil
}

func TestBrokerConfig(t *testing.T) {
	c := NewCluster(t, 2, map[string]string{
		"log.retention.hours":             "1",
		"log.retention.check.interval.ms": "300",
		"auto.create.topics.enable":       "false",
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := c.Client()
	adm := kadm.NewClient(cl)
	set := func(k, v string) kadm.AlterConfig { return kadm.AlterConfig{Name: k, Value: kadm.StringPtr(v)} }

	// One key per dynamic layer: broker 1's own, and the cluster default.
	if resp, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{set("max.connections", "1000")}, 1); err != nil || resp[0].Err != nil {
		t.Fatalf("alter broker 1: %v %+v", err, resp)
	}
	if resp, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{set("log.cleaner.backoff.ms", "20000")}); err != nil || resp[0].Err != nil {
		t.Fatalf("alter the cluster default: %v %+v", err, resp)
	}
	for _, p := range []struct{ path, want string }{
		{"/config/brokers/1", `{"version":1,"config":{"max.connections":"1000"}}`},
		{"/config/brokers/<default>", `{"version":1,"config":{"log.cleaner.backoff.ms":"20000"}}`},
	} {
		data, _, err := c.Get(p.path)
		if err != nil || string(data) != p.want {
			t.Fatalf("%s: %s %v, want %s", p.path, data, err, p.want)
		}
	}
	kids, _, err := c.ZK.Children(c.Path("/config/changes"))
	if err != nil {
		t.Fatal(err)
	}
	var notes []string
	for _, k := range kids {
		data, _, err := c.Get("/config/changes/" + k)
		if err == nil {
			notes = append(notes, string(data))
		}
	}
	for _, want := range []string{`{"version":2,"entity_path":"brokers/1"}`, `{"version":2,"entity_path":"brokers/<default>"}`} {
		if !strings.Contains(strings.Join(notes, " "), want) {
			t.Errorf("no change notification %s among %v", want, notes)
		}
	}

	t.Run("describe", func(t *testing.T) {
		checkBrokerEntries(t, "kadm", kadmBrokerEntries(t, cl, 1), false)
		checkBrokerEntries(t, "sarama", saramaBrokerEntries(t, c, 1), false)
		if py, err := pythonWithConfluentKafka(); err != nil {
			t.Errorf("librdkafka: %v", err)
		} else {
			checkBrokerEntries(t, "librdkafka", librdkafkaBrokerEntries(t, py, c, 1), true)
		}
		// Broker 2 read the default from its watch; broker 1's own
		// override is not its.
		eventually(t, 15*time.Second, func() error {
			got := kadmBrokerEntries(t, cl, 2)
			if e := got["log.cleaner.backoff.ms"]; e.Source != srcDynamicDefault {
				return fmt.Errorf("broker 2 log.cleaner.backoff.ms: %v", e)
			}
			if e := got["max.connections"]; e.Source != srcDefault {
				return fmt.Errorf("broker 2 max.connections: %v", e)
			}
			return nil
		})
		// The cluster default resource lists only the default layer.
		rcs, err := adm.DescribeBrokerConfigs(ctx)
		if err != nil || len(rcs) != 1 || len(rcs[0].Configs) != 1 || rcs[0].Configs[0].Key != "log.cleaner.backoff.ms" {
			t.Errorf("default resource: %v %+v", err, rcs)
		}
	})

	t.Run("retention", func(t *testing.T) {
		const topic = "dyn-retention"
		createTopic(t, c, topic, 1, 2, nil, map[string]string{"segment.bytes": "4096"})
		prod := c.Client(kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
		value := bytes.Repeat([]byte("r"), 200)
		const n = 300
		for i := range n {
			if err := prod.ProduceSync(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: value}).FirstErr(); err != nil {
				t.Fatalf("produce %d: %v", i, err)
			}
		}
		// log.retention.hours=1 keeps everything: the start stays at 0
		// over several retention checks.
		time.Sleep(1500 * time.Millisecond)
		if off, err := startOffset(ctx, adm, topic); err != nil || off != 0 {
			t.Fatalf("log start offset %d (%v) before the change, want 0", off, err)
		}
		changed := time.Now()
		if resp, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{set("log.retention.ms", "1000")}); err != nil || resp[0].Err != nil {
			t.Fatalf("alter log.retention.ms: %v %+v", err, resp)
		}
		var start int64
		eventually(t, 30*time.Second, func() error {
			off, err := startOffset(ctx, adm, topic)
			if err != nil {
				return err
			}
			if off <= 0 {
				return fmt.Errorf("log start offset still %d", off)
			}
			start = off
			return nil
		})
		t.Logf("log.retention.ms=1000 as the cluster default: log start offset 0 -> %d of %d records, %s after the change, no restart",
			start, n, time.Since(changed).Round(time.Millisecond))
		// Both replicas delete: the follower's segments go too.
		for _, b := range c.Brokers {
			dir := filepath.Join(b.DataDir, topic+"-0")
			eventually(t, 30*time.Second, func() error {
				segs, err := filepath.Glob(filepath.Join(dir, "*.log"))
				if err != nil {
					return err
				}
				if len(segs) > 2 {
					return fmt.Errorf("broker %d still has %d segments", b.ID(), len(segs))
				}
				return nil
			})
		}
		// The topic reports retention.ms from the new source.
		rcs, err := adm.DescribeTopicConfigs(ctx, topic)
		if err != nil || len(rcs) != 1 {
			t.Fatalf("describe topic: %v", err)
		}
		for _, cfg := range rcs[0].Configs {
			if cfg.Key != "retention.ms" {
				continue
			}
			if cfg.MaybeValue() != "1000" || cfg.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig ||
				len(cfg.Synonyms) < 2 || cfg.Synonyms[0].Key != "log.retention.ms" || cfg.Synonyms[1].Key != "log.retention.hours" {
				t.Errorf("topic retention.ms: %s from %v, synonyms %+v", cfg.MaybeValue(), cfg.Source, cfg.Synonyms)
			}
		}
	})

	t.Run("message.max.bytes", func(t *testing.T) {
		const topic = "dyn-max-bytes"
		createTopic(t, c, topic, 1, 2, nil, nil)
		prod := c.Client(kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(0),
			kgo.ProducerBatchCompression(kgo.NoCompression())) // the batch stays over the limit
		big := &kgo.Record{Value: bytes.Repeat([]byte("m"), 3000)}
		if err := prod.ProduceSync(ctx, big).FirstErr(); err != nil {
			t.Fatalf("3000-byte record under the default message.max.bytes: %v", err)
		}
		if resp, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{set("message.max.bytes", "2000")}); err != nil || resp[0].Err != nil {
			t.Fatalf("alter message.max.bytes: %v %+v", err, resp)
		}
		eventually(t, 15*time.Second, func() error {
			err := prod.ProduceSync(ctx, &kgo.Record{Value: bytes.Repeat([]byte("m"), 3000)}).FirstErr()
			if !errors.Is(err, kerr.MessageTooLarge) {
				return fmt.Errorf("3000-byte record with message.max.bytes=2000: %v, want MESSAGE_TOO_LARGE", err)
			}
			return nil
		})
		if resp, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "message.max.bytes"}}); err != nil || resp[0].Err != nil {
			t.Fatalf("delete message.max.bytes: %v %+v", err, resp)
		}
		eventually(t, 15*time.Second, func() error {
			return prod.ProduceSync(ctx, &kgo.Record{Value: bytes.Repeat([]byte("m"), 3000)}).FirstErr()
		})
	})

	t.Run("refused", func(t *testing.T) {
		before, _, _ := c.Get("/config/brokers/1")
		for _, k := range []struct{ name, value string }{{"num.partitions", "5"}, {"log.retention.hours", "2"}, {"log.dirs", "/tmp/elsewhere"}} {
			resp, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{set(k.name, k.value)}, 1)
			if err != nil {
				t.Fatal(err)
			}
			want := "Cannot update these configs dynamically: Set(" + k.name + ")"
			if !errors.Is(resp[0].Err, kerr.InvalidRequest) || resp[0].ErrMessage != want {
				t.Errorf("%s: %v %q, want INVALID_REQUEST %q", k.name, resp[0].Err, resp[0].ErrMessage, want)
			}
		}
		resp, _ := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{set("log.retention.ms", "soon")}, 1)
		if !errors.Is(resp[0].Err, kerr.InvalidRequest) || !strings.Contains(resp[0].ErrMessage, "log.retention.ms") {
			t.Errorf("bad value: %v %q", resp[0].Err, resp[0].ErrMessage)
		}
		if after, _, _ := c.Get("/config/brokers/1"); string(after) != string(before) {
			t.Errorf("refused alterations wrote %s (was %s)", after, before)
		}
	})

	t.Run("logger", func(t *testing.T) {
		b := c.Broker(2)
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeBrokerLogger, "2"
		op := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		op.Name, op.Value = "kafka.network.SocketServer", kmsg.StringPtr("DEBUG")
		r.Configs = append(r.Configs, op)
		req.Resources = append(req.Resources, r)
		resp, err := req.RequestWith(ctx, cl.Broker(2))
		if err != nil || resp.Resources[0].ErrorCode != 0 {
			t.Fatalf("set log level: %v %+v", err, resp)
		}
		// A request to broker 2 now logs at debug from its protocol
		// component. The Metadata request goes to broker 2 itself: kadm's
		// ListTopics may ask only the other broker (a CI run sent it none
		// in 15 s).
		eventually(t, 15*time.Second, func() error {
			if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl.Broker(2)); err != nil {
				return err
			}
			for _, l := range strings.Split(b.Log(), "\n") {
				if strings.Contains(l, `"level":"debug"`) && strings.Contains(l, `"component":"protocol"`) {
					return nil
				}
			}
			return errors.New("no debug line from the protocol component")
		})
		dreq := kmsg.NewPtrDescribeConfigsRequest()
		dr := kmsg.NewDescribeConfigsRequestResource()
		dr.ResourceType, dr.ResourceName, dr.ConfigNames = kmsg.ConfigResourceTypeBrokerLogger, "2", []string{"kafka.network.SocketServer", "root"}
		dreq.Resources = append(dreq.Resources, dr)
		dresp, err := dreq.RequestWith(ctx, cl.Broker(2))
		if err != nil || len(dresp.Resources[0].Configs) != 2 {
			t.Fatalf("describe loggers: %v %+v", err, dresp)
		}
		for _, cfg := range dresp.Resources[0].Configs {
			want := map[string]string{"kafka.network.SocketServer": "DEBUG", "root": "INFO"}[cfg.Name]
			if cfg.Value == nil || *cfg.Value != want || cfg.Source != kmsg.ConfigSourceDynamicBrokerLoggerConfig {
				t.Errorf("logger %s: %v from %v, want %s", cfg.Name, strPtrOr(cfg.Value), cfg.Source, want)
			}
		}
	})
}
