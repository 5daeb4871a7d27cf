package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestParseAddConfig(t *testing.T) {
	got, err := parseAddConfig("k1=v1, k2=[v1,v2,v2],k3=,leader.replication.throttled.replicas=[0:1,1:2]")
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]string{{"k1", "v1"}, {"k2", "v1,v2,v2"}, {"k3", ""}, {"leader.replication.throttled.replicas", "0:1,1:2"}}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got, _ := parseAddConfig("a=1,b=2,a=3"); !slices.Equal(got, [][2]string{{"a", "3"}, {"b", "2"}}) {
		t.Fatalf("repeated key: got %q, want a=3 once, then b=2", got)
	}
	for in, msg := range map[string]string{
		"k1":      `all configs to be added must be in the format "key=val"`,
		"a=b=c":   `"key=val"`,
		"k$y=1":   "Invalid character found for config key: k$y",
		"k=1,,j=": `"key=val"`,
	} {
		if _, err := parseAddConfig(in); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: %v, want %q", in, err, msg)
		}
	}
}

func TestConfigsArgumentValidation(t *testing.T) {
	bs := []string{"--bootstrap-server", "x:1"}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--entity-type", "topics"}, "Command must include exactly one action: --describe, --alter"},
		{[]string{"--describe"}, "At least one entity type must be specified"},
		{[]string{"--describe", "--entity-type", "clients"}, "Invalid entity type clients, the entity type must be one of topics, brokers, broker-loggers, users"},
		{[]string{"--describe", "--entity-type", "brokers", "--entity-name", "b1"}, "The entity name for brokers must be a valid integer broker id, but it is: b1"},
		{[]string{"--describe", "--entity-type", "topics", "--entity-default"}, "--entity-default must not be specified with --describe of topics"},
		{[]string{"--describe", "--entity-type", "broker-loggers"}, "An entity name must be specified with --describe of broker-loggers"},
		{[]string{"--describe", "--entity-type", "topics", "--add-config", "a=b"}, `Option "--add-config" can't be used with action "--describe"`},
		{[]string{"--alter", "--entity-type", "brokers", "--add-config", "a=b"}, "An entity-name or default entity must be specified with --alter of users, clients, brokers or ips"},
		{[]string{"--alter", "--entity-type", "topics", "--add-config", "a=b"}, "An entity name must be specified with --alter of topics"},
		{[]string{"--alter", "--entity-type", "topics", "--entity-name", "t"}, "At least one of --add-config, --add-config-file, or --delete-config must be specified with --alter"},
		{[]string{"--alter", "--entity-type", "topics", "--entity-name", "t", "--all", "--delete-config", "x"}, `Option "--all" can't be used with action "--alter"`},
	}
	for _, c := range cases {
		code, _, errOut := runAdmin(t, append(append([]string{"configs"}, bs...), c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", c.args, code, errOut, c.want)
		}
	}
}

// describeAnswer answers DescribeConfigs for BROKER 1 and the broker
// default with a static, a dynamic and a defaulted key and their synonyms.
func describeAnswer(req kmsg.Request) kmsg.Response {
	r := req.(*kmsg.DescribeConfigsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeConfigsResponse)
	entry := func(name, value string, src kmsg.ConfigSource, syn ...kmsg.DescribeConfigsResponseResourceConfigConfigSynonym) kmsg.DescribeConfigsResponseResourceConfig {
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name, c.Value, c.Source, c.ConfigSynonyms = name, kadm.StringPtr(value), src, syn
		return c
	}
	syn := func(name, value string, src kmsg.ConfigSource) kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
		s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
		s.Name, s.Value, s.Source = name, kadm.StringPtr(value), src
		return s
	}
	for _, rr := range r.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		if rr.ResourceName == "" {
			sr.Configs = append(sr.Configs, entry("log.retention.ms", "3600000", kmsg.ConfigSourceDynamicDefaultBrokerConfig,
				syn("log.retention.ms", "3600000", kmsg.ConfigSourceDynamicDefaultBrokerConfig)))
		} else {
			pw := entry("ssl.key.password", "", kmsg.ConfigSourceDynamicBrokerConfig)
			pw.Value, pw.IsSensitive = nil, true
			sr.Configs = append(sr.Configs,
				entry("log.retention.ms", "60000", kmsg.ConfigSourceDynamicBrokerConfig,
					syn("log.retention.ms", "60000", kmsg.ConfigSourceDynamicBrokerConfig),
					syn("log.retention.ms", "3600000", kmsg.ConfigSourceDynamicDefaultBrokerConfig),
					syn("log.retention.hours", "168", kmsg.ConfigSourceDefaultConfig)),
				entry("broker.id", "1", kmsg.ConfigSourceStaticBrokerConfig, syn("broker.id", "1", kmsg.ConfigSourceStaticBrokerConfig)),
				pw,
			)
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return resp
}

func TestConfigsDescribeBroker(t *testing.T) {
	fc := newFakeCluster(t)
	fc.answer(32, describeAnswer)
	code, out, errOut := runAdmin(t, "configs", "--bootstrap-server", fc.bootstrap, "--describe", "--entity-type", "brokers", "--entity-name", "1")
	want := "Dynamic configs for broker 1 are:\n" +
		"  log.retention.ms=60000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.ms=60000, DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=3600000, DEFAULT_CONFIG:log.retention.hours=168}\n" +
		"  ssl.key.password=null sensitive=true synonyms={}\n"
	if code != 0 || out != want {
		t.Fatalf("exit %d %s\n%s\nwant:\n%s", code, errOut, out, want)
	}
	code, out, _ = runAdmin(t, "configs", "--bootstrap-server", fc.bootstrap, "--describe", "--all", "--entity-type", "brokers", "--entity-name", "1")
	if code != 0 || !strings.HasPrefix(out, "All configs for broker 1 are:\n  broker.id=1 sensitive=false synonyms={STATIC_BROKER_CONFIG:broker.id=1}\n") || strings.Count(out, "\n") != 4 {
		t.Fatalf("--all: exit %d\n%s", code, out)
	}
	code, out, _ = runAdmin(t, "configs", "--bootstrap-server", fc.bootstrap, "--describe", "--entity-type", "brokers", "--entity-default")
	if code != 0 || out != "Default configs for brokers in the cluster are:\n  log.retention.ms=3600000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=3600000}\n" {
		t.Fatalf("--entity-default: exit %d\n%s", code, out)
	}
	// Without a name: every broker, then the default.
	code, out, _ = runAdmin(t, "configs", "--bootstrap-server", fc.bootstrap, "--describe", "--entity-type", "brokers")
	if code != 0 || !strings.Contains(out, "Dynamic configs for broker 0 are:") || !strings.Contains(out, "Dynamic configs for broker 2 are:") ||
		!strings.HasSuffix(strings.SplitAfterN(out, "Default configs for brokers in the cluster are:", 2)[1], "3600000}\n") {
		t.Fatalf("all brokers: exit %d\n%s", code, out)
	}
}

// --alter of a broker sends one IncrementalAlterConfigs with SET and
// DELETE, after checking that the keys to delete are set dynamically.
func TestConfigsAlterBroker(t *testing.T) {
	fc := newFakeCluster(t)
	fc.answer(32, describeAnswer)
	fc.answer(44, okAlterConfigs)
	code, out, errOut := runAdmin(t, "configs", "--bootstrap-server", fc.bootstrap, "--alter", "--entity-type", "brokers", "--entity-name", "1",
		"--add-config", "log.cleaner.threads=2,follower.replication.throttled.rate=1048576", "--delete-config", "log.retention.ms")
	if code != 0 || out != "Completed updating config for broker 1.\n" {
		t.Fatalf("exit %d %s\n%s", code, errOut, out)
	}
	want := []string{
		"BROKER 1 DELETE log.retention.ms=<nil>",
		"BROKER 1 SET follower.replication.throttled.rate=1048576",
		"BROKER 1 SET log.cleaner.threads=2",
	}
	if got := alterOps(fc.requests(44)); !slices.Equal(got, want) {
		t.Fatalf("ops %q, want %q", got, want)
	}
	code, out, _ = runAdmin(t, "configs", "--bootstrap-server", fc.bootstrap, "--alter", "--entity-type", "brokers", "--entity-default", "--add-config", "log.retention.ms=1000")
	if code != 0 || out != "Completed updating default config for brokers in the cluster.\n" {
		t.Fatalf("default: exit %d\n%s", code, out)
	}
	if got := alterOps(fc.requests(44)[1:]); !slices.Equal(got, []string{"BROKER  SET log.retention.ms=1000"}) {
		t.Fatalf("default ops %q", got)
	}
	code, _, errOut = runAdmin(t, "configs", "--bootstrap-server", fc.bootstrap, "--alter", "--entity-type", "brokers", "--entity-name", "1", "--delete-config", "broker.id")
	if code != 1 || !strings.Contains(errOut, "INVALID_CONFIG") || !strings.Contains(errOut, "Invalid config(s): broker.id") {
		t.Fatalf("delete of a static key: exit %d %s", code, errOut)
	}
	if n := len(fc.requests(44)); n != 2 {
		t.Fatalf("%d IncrementalAlterConfigs, want 2 (the refused delete sends none)", n)
	}
}

// Topic configs through kfake itself: set, describe, delete.
func TestConfigsTopicRoundTrip(t *testing.T) {
	fc := newFakeCluster(t, "foo")
	alter := func(args ...string) {
		t.Helper()
		code, out, errOut := runAdmin(t, append([]string{"configs", "--bootstrap-server", fc.bootstrap, "--alter", "--entity-type", "topics", "--entity-name", "foo"}, args...)...)
		if code != 0 || out != "Completed updating config for topic foo.\n" {
			t.Fatalf("alter %v: exit %d %s\n%s", args, code, errOut, out)
		}
	}
	alter("--add-config", "retention.ms=1000")
	code, out, _ := runAdmin(t, "configs", "--bootstrap-server", fc.bootstrap, "--describe", "--entity-type", "topics", "--entity-name", "foo")
	if code != 0 || !strings.HasPrefix(out, "Dynamic configs for topic foo are:\n  retention.ms=1000 sensitive=false synonyms={") {
		t.Fatalf("describe: exit %d\n%s", code, out)
	}
	alter("--delete-config", "retention.ms")
	code, out, _ = runAdmin(t, "configs", "--bootstrap-server", fc.bootstrap, "--describe", "--entity-type", "topics", "--entity-name", "foo")
	if code != 0 || out != "Dynamic configs for topic foo are:\n" {
		t.Fatalf("after delete: exit %d\n%s", code, out)
	}
	code, _, errOut := runAdmin(t, "configs", "--bootstrap-server", fc.bootstrap, "--describe", "--entity-type", "topics", "--entity-name", "nope")
	if code != 1 || !strings.Contains(errOut, "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Fatalf("unknown topic: exit %d %s", code, errOut)
	}
}
