package test

// TestClientTopicConfigKeys sets every topic-level key of Kafka 3.x
// (cluster's one table, read through cluster.DefaultLogConfig().Entries)
// through two real clients against a 3-broker cluster: librdkafka
// (confluent-kafka-python) creates a topic per key with a valid
// non-default value, DescribeConfigs reports it from DYNAMIC_TOPIC_CONFIG,
// AlterConfigs (IncrementalAlterConfigs where the installed
// confluent-kafka has it) changes it and DescribeConfigs reports the new
// value; a bad value and an unknown key fail with INVALID_CONFIG naming
// the key. Then kadm creates one topic with every key at once, changes
// them all with IncrementalAlterConfigs and describes them.

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

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
)

// configKeyCase is one topic key with the values the test sets: Create
// at creation (not the default, unless the key takes nothing else), Alter
// afterwards (another value, the default only for a key with one other),
// Bad one the key refuses; the Want values are how DescribeConfigs reports the first two.
type configKeyCase struct {
	Name       string `json:"name"`
	Default    string `json:"default"`
	Create     string `json:"create"`
	WantCreate string `json:"want_create"`
	Alter      string `json:"alter"`
	WantAlter  string `json:"want_alter"`
	Bad        string `json:"bad"`
}

// candidateValues are the values tried for a key of each type, in order;
// the key's own default is tried last, for keys (compression.type,
// remote.storage.enable) that take nothing else here.
var candidateValues = map[cluster.ConfigType][]string{
	cluster.TypeBoolean: {"true", "false"},
	cluster.TypeInt:     {"1000", "60000", "5", "7", "2"},
	cluster.TypeLong:    {"1000", "60000", "5", "7", "2"},
	cluster.TypeDouble:  {"0.1", "0.9"},
	cluster.TypeList:    {"compact", "compact,delete", "*", "0:1,1:2"},
	cluster.TypeString:  {"LogAppendTime", "2.8-IV1", "3.5-IV0", "producer", "CreateTime"},
}

var badValues = []string{"not-a-value", "-3", "1.5"}

// noOtherValue are the keys that take only their default on this broker
// (Kafka refuses true for the remote.* keys in ZooKeeper mode;
// compression.type=producer is the only one that needs no recompression).
var noOtherValue = map[string]bool{
	"compression.type":             true,
	"remote.storage.enable":        true,
	"remote.log.copy.disable":      true,
	"remote.log.delete.on.disable": true,
}

// topicConfigKeyCases builds a case for every row of cluster's table,
// checking each value with the broker's own validation (WithOverrides).
func topicConfigKeyCases(t *testing.T) []configKeyCase {
	t.Helper()
	def := cluster.DefaultLogConfig()
	described := func(name, v string) (string, bool) {
		over := map[string]string{name: v}
		cfg, err := def.WithOverrides(over)
		if err != nil {
			return "", false
		}
		for _, e := range cfg.Entries(over, nil) {
			if e.Name == name {
				return e.Value, true
			}
		}
		return "", false
	}
	var out []configKeyCase
	for _, e := range def.Entries(nil, nil) {
		// good: the valid non-default values, then the default, which
		// Alter takes when the key has one other value (a boolean).
		var good []string
		for _, v := range candidateValues[e.Type] {
			if d, ok := described(e.Name, v); ok && d != e.Value {
				good = append(good, v)
			}
		}
		if len(good) == 0 && !noOtherValue[e.Name] {
			t.Fatalf("%s (type %d, default %q): no candidate value is valid and non-default; add one to candidateValues", e.Name, e.Type, e.Value)
		}
		good = append(good, e.Value)
		kc := configKeyCase{Name: e.Name, Default: e.Value, Create: good[0], Alter: good[min(1, len(good)-1)]}
		kc.WantCreate, _ = described(e.Name, kc.Create)
		kc.WantAlter, _ = described(e.Name, kc.Alter)
		for _, v := range badValues {
			if _, ok := described(e.Name, v); !ok {
				kc.Bad = v
				break
			}
		}
		if kc.Bad == "" {
			t.Fatalf("%s: every bad candidate %v is valid; add one to badValues", e.Name, badValues)
		}
		out = append(out, kc)
	}
	if len(out) < 36 {
		t.Fatalf("only %d topic keys in cluster's table", len(out))
	}
	return out
}

// topicConfigScript is the librdkafka side. It reads {"bootstrap",
// "keys": [configKeyCase...], "unknown": [names]} on stdin and prints one
// JSON object with what each step returned; the Go side judges it.
// describe polls (up to 10 s) until every topic reports its value from
// DYNAMIC_TOPIC_CONFIG, counting the rounds that did not yet.
const topicConfigScript = `
import json, sys, time
import confluent_kafka
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic, ConfigResource

req = json.load(sys.stdin)
keys = req['keys']
a = AdminClient({'bootstrap.servers': req['bootstrap'], 'client.id': 'e2e-topic-config'})
incremental = hasattr(a, 'incremental_alter_configs')
out = {'version': confluent_kafka.version()[0], 'librdkafka': confluent_kafka.libversion()[0],
       'incremental': incremental, 'keys': {}, 'unknown': {}}

def err_of(fut):
    try:
        fut.result()
        return None
    except KafkaException as e:
        ke = e.args[0]
        return {'code': ke.code(), 'name': ke.name(), 'message': ke.str()}

def topic(i):
    return 'rdcfg-%d' % i

def create(topics):
    futs = a.create_topics(topics, operation_timeout=30, request_timeout=45)
    return {t: err_of(f) for t, f in futs.items()}

def describe(want):
    # want: topic -> (name, value). Polls until each topic reports it.
    pending = dict(want)
    got = {}
    rounds = 0
    deadline = time.time() + 10
    while pending:
        rounds += 1
        futs = a.describe_configs([ConfigResource('topic', t) for t in pending], request_timeout=15)
        for res, f in futs.items():
            t = res.name
            name, value = pending[t]
            try:
                e = f.result().get(name)
                got[t] = {'value': None if e is None else e.value,
                          'source': None if e is None else int(getattr(e.source, 'value', e.source))}
            except KafkaException as ex:
                got[t] = {'error': ex.args[0].str()}
            got[t]['rounds'] = rounds
            if got[t].get('value') == value and got[t].get('source') == 1:
                del pending[t]
        if not pending or time.time() > deadline:
            break
        time.sleep(0.2)
    return got

def alter(items):
    # items: topic -> {name: value}
    if incremental:
        from confluent_kafka.admin import ConfigEntry, AlterConfigOpType
        rs = [ConfigResource('topic', t, incremental_configs=[
                  ConfigEntry(n, v, incremental_operation=AlterConfigOpType.SET) for n, v in cfg.items()])
              for t, cfg in items.items()]
        futs = a.incremental_alter_configs(rs, request_timeout=15)
    else:
        rs = [ConfigResource('topic', t, set_config=cfg) for t, cfg in items.items()]
        futs = a.alter_configs(rs, request_timeout=15)
    return {res.name: err_of(f) for res, f in futs.items()}

good = [NewTopic(topic(i), 1, 3, config={k['name']: k['create']}) for i, k in enumerate(keys)]
bad = [NewTopic(topic(i) + '-bad', 1, 3, config={k['name']: k['bad']}) for i, k in enumerate(keys)]
unknown = [NewTopic('rdcfg-unknown-%d' % i, 1, 3, config={n: '1'}) for i, n in enumerate(req['unknown'])]
created = create(good + bad + unknown)
d1 = describe({topic(i): (k['name'], k['want_create']) for i, k in enumerate(keys)})
altered = alter({topic(i): {k['name']: k['alter']} for i, k in enumerate(keys)})
d2 = describe({topic(i): (k['name'], k['want_alter']) for i, k in enumerate(keys)})
bad_altered = alter({topic(i): {k['name']: k['bad']} for i, k in enumerate(keys)})
unknown_altered = alter({topic(i): {n: '1'} for i, n in enumerate(req['unknown'])})
d3 = describe({topic(i): (k['name'], k['want_alter']) for i, k in enumerate(keys)})
for i, k in enumerate(keys):
    t = topic(i)
    out['keys'][k['name']] = {'create': created.get(t), 'describe_create': d1.get(t),
        'alter': altered.get(t), 'describe_alter': d2.get(t),
        'bad_create': created.get(t + '-bad'), 'bad_alter': bad_altered.get(t),
        'describe_after_bad': d3.get(t)}
for i, n in enumerate(req['unknown']):
    out['unknown'][n] = {'create': created.get('rdcfg-unknown-%d' % i), 'alter': unknown_altered.get(topic(i))}
print(json.dumps(out))
`

type pyErr struct {
	Code    int    `json:"code"`
	Name    string `json:"name"`
	Message string `json:"message"`
}

type pyDescribed struct {
	Value  *string `json:"value"`
	Source *int    `json:"source"`
	Error  string  `json:"error"`
	Rounds int     `json:"rounds"`
}

type pyKeyResult struct {
	Create, Alter, BadCreate, BadAlter *pyErr
	DescribeCreate, DescribeAlter      *pyDescribed
	DescribeAfterBad                   *pyDescribed
}

func (r *pyKeyResult) UnmarshalJSON(b []byte) error {
	var raw struct {
		Create           *pyErr       `json:"create"`
		DescribeCreate   *pyDescribed `json:"describe_create"`
		Alter            *pyErr       `json:"alter"`
		DescribeAlter    *pyDescribed `json:"describe_alter"`
		BadCreate        *pyErr       `json:"bad_create"`
		BadAlter         *pyErr       `json:"bad_alter"`
		DescribeAfterBad *pyDescribed `json:"describe_after_bad"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*r = pyKeyResult{raw.Create, raw.Alter, raw.BadCreate, raw.BadAlter, raw.DescribeCreate, raw.DescribeAlter, raw.DescribeAfterBad}
	return nil
}

type pyConfigOutput struct {
	Version     string                 `json:"version"`
	Librdkafka  string                 `json:"librdkafka"`
	Incremental bool                   `json:"incremental"`
	Keys        map[string]pyKeyResult `json:"keys"`
	Unknown     map[string]struct {
		Create *pyErr `json:"create"`
		Alter  *pyErr `json:"alter"`
	} `json:"unknown"`
}

// unknownTopicKeys are names no topic takes: a made-up one and a broker
// key that sets a topic key's default.
var unknownTopicKeys = []string{"no.such.key", "log.retention.hours"}

func TestClientTopicConfigKeys(t *testing.T) {
	keys := topicConfigKeyCases(t)
	for _, n := range unknownTopicKeys {
		if cluster.IsTopicConfigKey(n) {
			t.Fatalf("%s is a topic key", n)
		}
	}
	py, err := pythonWithConfluentKafka()
	if err != nil {
		t.Skip(err)
	}
	start := time.Now()
	c := NewCluster(t, 3, map[string]string{"auto.create.topics.enable": "false"})
	t.Logf("3 brokers up in %s; %d topic keys", time.Since(start).Round(time.Millisecond), len(keys))

	t.Run("librdkafka", func(t *testing.T) {
		dir := t.TempDir()
		script := filepath.Join(dir, "topic_config.py")
		if err := os.WriteFile(script, []byte(topicConfigScript), 0o644); err != nil {
			t.Fatal(err)
		}
		in, err := json.Marshal(map[string]any{"bootstrap": c.Bootstrap(), "keys": keys, "unknown": unknownTopicKeys})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, py, script)
		var stdout, stderr bytes.Buffer
		cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(in), &stdout, &stderr
		began := time.Now()
		err = cmd.Run()
		if s := strings.TrimSpace(stderr.String()); s != "" {
			t.Logf("python stderr:\n%s", tailLines(s, 30))
		}
		if err != nil {
			t.Fatalf("python: %v\n%s", err, tailLines(stderr.String(), 30))
		}
		noProtocolErrors(t, "python topic config", stderr.String())
		var out pyConfigOutput
		if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
			t.Fatalf("python output %q: %v", tailLines(stdout.String(), 5), err)
		}
		alterAPI := "AlterConfigs"
		if out.Incremental {
			alterAPI = "IncrementalAlterConfigs"
		}
		t.Logf("confluent-kafka %s, librdkafka %s, altering with %s, in %s",
			out.Version, out.Librdkafka, alterAPI, time.Since(began).Round(time.Millisecond))
		checkDescribed := func(t *testing.T, what string, d *pyDescribed, want string) {
			t.Helper()
			switch {
			case d == nil:
				t.Errorf("%s: not described", what)
			case d.Error != "":
				t.Errorf("%s: DescribeConfigs: %s", what, d.Error)
			case d.Value == nil || *d.Value != want || d.Source == nil || *d.Source != int(cluster.SourceDynamicTopic):
				t.Errorf("%s: DescribeConfigs value %s source %v after %d rounds, want %q from DYNAMIC_TOPIC_CONFIG (1)",
					what, strPtrOr(d.Value), intPtrOr(d.Source), d.Rounds, want)
			case d.Rounds > 1:
				t.Logf("%s: DescribeConfigs reported it after %d rounds", what, d.Rounds)
			}
		}
		invalidConfig := func(t *testing.T, what string, e *pyErr, name string) {
			t.Helper()
			if e == nil || e.Code != int(kerr.InvalidConfig.Code) || !strings.Contains(e.Message, name) {
				t.Errorf("%s: %+v, want INVALID_CONFIG (%d) naming %s", what, e, kerr.InvalidConfig.Code, name)
			}
		}
		for _, k := range keys {
			t.Run(k.Name, func(t *testing.T) {
				t.Logf("default %q, created with %q, altered to %q, refused %q", k.Default, k.Create, k.Alter, k.Bad)
				r, ok := out.Keys[k.Name]
				if !ok {
					t.Fatal("no result")
				}
				if r.Create != nil {
					t.Fatalf("CreateTopics %s=%s: %+v", k.Name, k.Create, r.Create)
				}
				checkDescribed(t, fmt.Sprintf("created with %s=%s", k.Name, k.Create), r.DescribeCreate, k.WantCreate)
				if r.Alter != nil {
					t.Fatalf("%s %s=%s: %+v", alterAPI, k.Name, k.Alter, r.Alter)
				}
				checkDescribed(t, fmt.Sprintf("altered to %s=%s", k.Name, k.Alter), r.DescribeAlter, k.WantAlter)
				invalidConfig(t, fmt.Sprintf("CreateTopics %s=%s", k.Name, k.Bad), r.BadCreate, k.Name)
				invalidConfig(t, fmt.Sprintf("%s %s=%s", alterAPI, k.Name, k.Bad), r.BadAlter, k.Name)
				checkDescribed(t, fmt.Sprintf("after the refused %s=%s", k.Name, k.Bad), r.DescribeAfterBad, k.WantAlter)
			})
		}
		for _, n := range unknownTopicKeys {
			u := out.Unknown[n]
			invalidConfig(t, "CreateTopics with "+n, u.Create, n)
			invalidConfig(t, alterAPI+" with "+n, u.Alter, n)
		}
	})

	t.Run("kadm", func(t *testing.T) {
		began := time.Now()
		adm := kadm.NewClient(c.Client())
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		const topic = "kadm-every-key"
		all, create, alter := map[string]*string{}, map[string]string{}, map[string]string{}
		for _, k := range keys {
			all[k.Name] = kmsg.StringPtr(k.Create)
			create[k.Name], alter[k.Name] = k.Create, k.Alter
		}
		for what, set := range map[string]map[string]string{"created": create, "altered": alter} {
			if _, err := cluster.DefaultLogConfig().WithOverrides(set); err != nil {
				t.Fatalf("the values every key is %s with do not go together: %v", what, err)
			}
		}
		resp, err := adm.CreateTopics(ctx, 1, 3, all, topic)
		if err != nil || resp[topic].Err != nil {
			t.Fatalf("CreateTopics with every key: %v %+v", err, resp[topic])
		}
		describeAll := func(what string, want func(configKeyCase) string) {
			t.Helper()
			rounds := 0
			eventually(t, 20*time.Second, func() error {
				rounds++
				rc, err := adm.DescribeTopicConfigs(ctx, topic)
				if err != nil {
					return err
				}
				r, err := rc.On(topic, nil)
				if err != nil || r.Err != nil {
					return fmt.Errorf("describe %s: %v %v", topic, err, r.Err)
				}
				got := map[string]kadm.Config{}
				for _, cf := range r.Configs {
					got[cf.Key] = cf
				}
				var bad []string
				for _, k := range keys {
					cf, ok := got[k.Name]
					if !ok || cf.Value == nil || *cf.Value != want(k) || cf.Source != kmsg.ConfigSourceDynamicTopicConfig {
						bad = append(bad, fmt.Sprintf("%s=%s (%v), want %q", k.Name, strPtrOr(cf.Value), cf.Source, want(k)))
					}
				}
				if len(bad) > 0 {
					return fmt.Errorf("%s: %d keys differ: %s", what, len(bad), strings.Join(bad, "; "))
				}
				return nil
			})
			if rounds > 1 {
				t.Logf("%s: DescribeConfigs reported every key after %d rounds", what, rounds)
			}
		}
		describeAll("created", func(k configKeyCase) string { return k.WantCreate })

		var alters []kadm.AlterConfig
		for _, k := range keys {
			alters = append(alters, kadm.AlterConfig{Name: k.Name, Value: kmsg.StringPtr(k.Alter)})
		}
		ar, err := adm.AlterTopicConfigs(ctx, alters, topic)
		if err != nil || len(ar) != 1 || ar[0].Err != nil {
			t.Fatalf("IncrementalAlterConfigs of every key: %v %+v", err, ar)
		}
		describeAll("altered", func(k configKeyCase) string { return k.WantAlter })

		for _, n := range unknownTopicKeys {
			resp, err := adm.CreateTopics(ctx, 1, 3, map[string]*string{n: kmsg.StringPtr("1")}, "kadm-unknown")
			if err != nil || !errors.Is(resp["kadm-unknown"].Err, kerr.InvalidConfig) || !strings.Contains(resp["kadm-unknown"].ErrMessage, n) {
				t.Errorf("CreateTopics with %s: %v %+v, want INVALID_CONFIG naming it", n, err, resp["kadm-unknown"])
			}
			ar, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: n, Value: kmsg.StringPtr("1")}}, topic)
			if err != nil || len(ar) != 1 || !errors.Is(ar[0].Err, kerr.InvalidConfig) || !strings.Contains(ar[0].ErrMessage, n) {
				t.Errorf("IncrementalAlterConfigs with %s: %v %+v, want INVALID_CONFIG naming it", n, err, ar)
			}
		}
		t.Logf("kadm pass in %s", time.Since(began).Round(time.Millisecond))
	})
}

func strPtrOr(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%q", *s)
}

func intPtrOr(n *int) string {
	if n == nil {
		return "<nil>"
	}
	return fmt.Sprint(*n)
}
