package protocol

// Tests of the BROKER and BROKER_LOGGER resources through kadm and raw
// requests, over in-memory fakes of BrokerConfigs and BrokerLoggers.

import (
	"context"
	"errors"
	"maps"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
)

type fakeBrokerConfigs struct {
	mu     sync.Mutex
	layers cluster.BrokerConfigLayers
	writes int
}

func (f *fakeBrokerConfigs) DescribeBroker(perBroker bool) []cluster.BrokerConfigEntry {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.layers.BrokerEntries(perBroker)
}

func (f *fakeBrokerConfigs) AlterBroker(_ context.Context, perBroker bool, alter func(map[string]string) (map[string]string, error), validateOnly bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	layer := &f.layers.DynamicDefault
	if perBroker {
		layer = &f.layers.DynamicBroker
	}
	next, err := alter(maps.Clone(*layer))
	if err != nil {
		return err
	}
	if next == nil {
		next = map[string]string{}
	}
	if err := cluster.CheckBrokerConfigUpdate(next); err != nil {
		return err
	}
	if !validateOnly {
		*layer = next
		f.writes++
	}
	return nil
}

func (f *fakeBrokerConfigs) layer(perBroker bool) map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if perBroker {
		return maps.Clone(f.layers.DynamicBroker)
	}
	return maps.Clone(f.layers.DynamicDefault)
}

type fakeLoggers struct {
	mu     sync.Mutex
	levels map[string]string // "" follows root
}

func (f *fakeLoggers) Loggers() []LoggerLevel {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []LoggerLevel
	for n, l := range f.levels {
		if l == "" {
			l = f.levels[rootLogger]
		}
		out = append(out, LoggerLevel{Name: n, Level: l})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (f *fakeLoggers) SetLogLevel(name, level string) {
	f.mu.Lock()
	f.levels[name] = level
	f.mu.Unlock()
}

func startConfigBroker(t *testing.T) (*testBroker, *fakeBrokerConfigs, *fakeLoggers) {
	bc := &fakeBrokerConfigs{layers: cluster.BrokerConfigLayers{
		Static:         map[string]string{"broker.id": "1", "log.retention.hours": "1", "my.secret.plugin": "hunter2"},
		DynamicDefault: map[string]string{"log.retention.ms": "60000"},
		DynamicBroker:  map[string]string{},
	}}
	fl := &fakeLoggers{levels: map[string]string{rootLogger: "INFO", "kafka.server.ReplicaManager": ""}}
	b := startBroker(t, func(c *Config) { c.BrokerConfigs, c.BrokerLoggers = bc, fl })
	return b, bc, fl
}

func configOf(t *testing.T, rc kadm.ResourceConfig, key string) kadm.Config {
	t.Helper()
	for _, c := range rc.Configs {
		if c.Key == key {
			return c
		}
	}
	t.Fatalf("%s not described for %q", key, rc.Name)
	return kadm.Config{}
}

func TestBrokerDescribeConfigsThroughKadm(t *testing.T) {
	b, bc, _ := startConfigBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, b))
	bc.mu.Lock()
	bc.layers.DynamicBroker["log.retention.ms"] = "30000"
	bc.mu.Unlock()

	rcs, err := adm.DescribeBrokerConfigs(ctx, 1)
	if err != nil || len(rcs) != 1 || rcs[0].Err != nil {
		t.Fatalf("DescribeBrokerConfigs: %v %+v", err, rcs)
	}
	ms := configOf(t, rcs[0], "log.retention.ms")
	wantSyn := []kadm.ConfigSynonym{
		{Key: "log.retention.ms", Value: kadm.StringPtr("30000"), Source: kmsg.ConfigSourceDynamicBrokerConfig},
		{Key: "log.retention.ms", Value: kadm.StringPtr("60000"), Source: kmsg.ConfigSourceDynamicDefaultBrokerConfig},
		{Key: "log.retention.hours", Value: kadm.StringPtr("1"), Source: kmsg.ConfigSourceStaticBrokerConfig},
		{Key: "log.retention.hours", Value: kadm.StringPtr("168"), Source: kmsg.ConfigSourceDefaultConfig},
	}
	if ms.MaybeValue() != "30000" || ms.Source != kmsg.ConfigSourceDynamicBrokerConfig || !reflect.DeepEqual(ms.Synonyms, wantSyn) {
		t.Errorf("log.retention.ms: %+v", ms)
	}
	secret := configOf(t, rcs[0], "my.secret.plugin")
	if secret.Value != nil || !secret.Sensitive || secret.Synonyms[0].Value != nil {
		t.Errorf("an unknown key's value was returned: %+v", secret)
	}
	if c := configOf(t, rcs[0], "broker.id"); c.MaybeValue() != "1" || c.Source != kmsg.ConfigSourceStaticBrokerConfig {
		t.Errorf("broker.id: %+v", c)
	}

	// The cluster default resource lists only /config/brokers/<default>.
	rcs, err = adm.DescribeBrokerConfigs(ctx)
	if err != nil || len(rcs) != 1 || rcs[0].Err != nil || len(rcs[0].Configs) != 1 {
		t.Fatalf("default: %v %+v", err, rcs)
	}
	if c := rcs[0].Configs[0]; c.Key != "log.retention.ms" || c.MaybeValue() != "60000" ||
		c.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig || len(c.Synonyms) != 1 {
		t.Errorf("default entry %+v", c)
	}

	// Raw: another broker's id, a name that is no id, v3 types and docs,
	// read-only flags, filtering by name, v0's IsDefault.
	conn := b.dial(t)
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.Version = 4
	req.IncludeDocumentation = true
	for _, name := range []string{"2", "x", "1"} {
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeBroker, name
		if name == "1" {
			r.ConfigNames = []string{"log.retention.ms", "log.dirs", "max.connections", "leader.replication.throttled.rate"}
		}
		req.Resources = append(req.Resources, r)
	}
	resp := conn.roundTrip(req).(*kmsg.DescribeConfigsResponse)
	if r := resp.Resources[0]; r.ErrorCode != kerr.InvalidRequest.Code || *r.ErrorMessage != "Unexpected broker id, expected 1 or empty string, but received 2" {
		t.Errorf("other broker: %d %v", r.ErrorCode, *r.ErrorMessage)
	}
	if r := resp.Resources[1]; r.ErrorCode != kerr.InvalidRequest.Code || *r.ErrorMessage != "Broker id must be an integer, but it is: x" {
		t.Errorf("bad name: %d %v", r.ErrorCode, *r.ErrorMessage)
	}
	r := resp.Resources[2]
	if r.ErrorCode != 0 || len(r.Configs) != 4 {
		t.Fatalf("filtered: %+v", r)
	}
	byName := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range r.Configs {
		byName[c.Name] = c
	}
	if c := byName["log.retention.ms"]; c.ReadOnly || c.ConfigType != kmsg.ConfigTypeLong || c.Documentation == nil || *c.Documentation == "" || len(c.ConfigSynonyms) != 0 {
		t.Errorf("log.retention.ms v4 without synonyms: %+v", c)
	}
	if c := byName["log.dirs"]; !c.ReadOnly || c.ConfigType != kmsg.ConfigTypeString || c.Value != nil || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("log.dirs: %+v", c)
	}
	if c := byName["max.connections"]; c.ReadOnly || c.ConfigType != kmsg.ConfigTypeInt || *c.Value != "2147483647" {
		t.Errorf("max.connections: %+v", c)
	}
	if c := byName["leader.replication.throttled.rate"]; !c.ReadOnly || c.ConfigType != kmsg.ConfigTypeLong {
		t.Errorf("throttled rate (read-only in Kafka's describe): %+v", c)
	}
	req0 := kmsg.NewPtrDescribeConfigsRequest()
	req0.Version = 0
	r0 := kmsg.NewDescribeConfigsRequestResource()
	r0.ResourceType, r0.ResourceName, r0.ConfigNames = kmsg.ConfigResourceTypeBroker, "1", []string{"log.retention.hours", "num.partitions"}
	req0.Resources = append(req0.Resources, r0)
	resp0 := conn.roundTrip(req0).(*kmsg.DescribeConfigsResponse)
	for _, c := range resp0.Resources[0].Configs {
		if c.IsDefault != (c.Name == "num.partitions") {
			t.Errorf("v0 %s is_default %v", c.Name, c.IsDefault)
		}
	}
}

func TestBrokerAlterConfigsThroughKadm(t *testing.T) {
	b, bc, _ := startConfigBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, b))
	set := func(k, v string) kadm.AlterConfig { return kadm.AlterConfig{Name: k, Value: kadm.StringPtr(v)} }

	resp, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{set("log.retention.ms", "1000"), set("max.connections", "100")}, 1)
	if err != nil || resp[0].Err != nil {
		t.Fatalf("alter: %v %+v", err, resp)
	}
	if got := bc.layer(true); got["log.retention.ms"] != "1000" || got["max.connections"] != "100" {
		t.Errorf("broker layer %v", got)
	}
	// An incremental change keeps the other keys; DELETE removes one.
	resp, _ = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "max.connections"}}, 1)
	if resp[0].Err != nil || !reflect.DeepEqual(bc.layer(true), map[string]string{"log.retention.ms": "1000"}) {
		t.Errorf("delete: %+v %v", resp, bc.layer(true))
	}
	// The cluster default resource.
	resp, _ = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{set("message.max.bytes", "2000000")})
	if resp[0].Err != nil || bc.layer(false)["message.max.bytes"] != "2000000" || bc.layer(false)["log.retention.ms"] != "60000" {
		t.Errorf("default: %+v %v", resp, bc.layer(false))
	}
	// APPEND to the LIST key starts from its default.
	resp, _ = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "log.cleanup.policy", Value: kadm.StringPtr("compact")}}, 1)
	if resp[0].Err != nil || bc.layer(true)["log.cleanup.policy"] != "delete,compact" {
		t.Errorf("append: %+v %v", resp, bc.layer(true))
	}
	before := bc.layer(true)
	writes := bc.writes
	cases := []struct {
		ops  []kadm.AlterConfig
		code *kerr.Error
		msg  string
	}{
		{[]kadm.AlterConfig{set("log.dirs", "/tmp/x")}, kerr.InvalidRequest, "Cannot update these configs dynamically: Set(log.dirs)"},
		{[]kadm.AlterConfig{set("log.retention.hours", "2")}, kerr.InvalidRequest, "Cannot update these configs dynamically: Set(log.retention.hours)"},
		{[]kadm.AlterConfig{set("log.retention.ms", "soon")}, kerr.InvalidRequest, "Invalid value soon for configuration log.retention.ms: Not a number of type LONG"},
		{[]kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "log.retention.ms", Value: kadm.StringPtr("1")}}, kerr.InvalidConfig, "Config value append is not allowed for config key: log.retention.ms"},
		{[]kadm.AlterConfig{{Op: kadm.SubtractConfig, Name: "no.such.key", Value: kadm.StringPtr("1")}}, kerr.InvalidConfig, "Unknown config name: no.such.key"},
		{[]kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log.retention.ms"}}, kerr.InvalidRequest, "Null value not supported for : log.retention.ms"},
		{[]kadm.AlterConfig{set("log.retention.ms", "1"), set("log.retention.ms", "2")}, kerr.InvalidRequest, "Error due to duplicate config keys"},
	}
	for _, c := range cases {
		resp, err := adm.AlterBrokerConfigs(ctx, c.ops, 1)
		if err != nil || !errors.Is(resp[0].Err, c.code) || resp[0].ErrMessage != c.msg {
			t.Errorf("%+v: %v %v %q, want %v %q", c.ops, err, resp[0].Err, resp[0].ErrMessage, c.code, c.msg)
		}
	}
	// Another broker's id (kadm would route it to broker 2: sent raw).
	for name, msg := range map[string]string{"2": "Unexpected broker id, expected 1, but received 2", "b": "Node id must be an integer, but it is: b"} {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeBroker, name
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = "log.retention.ms", kadm.StringPtr("5")
		r.Configs = append(r.Configs, c)
		req.Resources = append(req.Resources, r)
		rr := b.dial(t).roundTrip(req).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]
		if rr.ErrorCode != kerr.InvalidRequest.Code || *rr.ErrorMessage != msg {
			t.Errorf("broker %q: %d %v", name, rr.ErrorCode, *rr.ErrorMessage)
		}
	}
	// ValidateOnly checks, writes nothing.
	resp, _ = adm.ValidateAlterBrokerConfigs(ctx, []kadm.AlterConfig{set("log.retention.ms", "77")}, 1)
	if resp[0].Err != nil {
		t.Errorf("validate: %+v", resp)
	}
	if bc.writes != writes || !reflect.DeepEqual(bc.layer(true), before) {
		t.Errorf("refused or validate-only changes were written: %v", bc.layer(true))
	}

	// The legacy AlterConfigs replaces the whole layer.
	resp, err = adm.AlterBrokerConfigsState(ctx, []kadm.AlterConfig{set("log.retention.bytes", "1000")}, 1)
	if err != nil || resp[0].Err != nil || !reflect.DeepEqual(bc.layer(true), map[string]string{"log.retention.bytes": "1000"}) {
		t.Errorf("AlterConfigs: %v %+v %v", err, resp, bc.layer(true))
	}
	resp, _ = adm.AlterBrokerConfigsState(ctx, []kadm.AlterConfig{set("broker.id", "7")}, 1)
	if !errors.Is(resp[0].Err, kerr.InvalidRequest) || !strings.Contains(resp[0].ErrMessage, "Set(broker.id)") {
		t.Errorf("AlterConfigs of a static key: %+v", resp)
	}
}

func TestBrokerLoggerConfigs(t *testing.T) {
	b, _, fl := startConfigBroker(t)
	conn := b.dial(t)
	describe := func(name string) kmsg.DescribeConfigsResponseResource {
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.Version = 4
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeBrokerLogger, name
		req.Resources = append(req.Resources, r)
		return conn.roundTrip(req).(*kmsg.DescribeConfigsResponse).Resources[0]
	}
	levels := func() map[string]string {
		out := map[string]string{}
		for _, c := range describe("1").Configs {
			out[c.Name] = *c.Value
			if c.Source != kmsg.ConfigSourceDynamicBrokerLoggerConfig || c.ReadOnly || c.IsSensitive {
				t.Errorf("logger entry %+v", c)
			}
		}
		return out
	}
	if got := levels(); !reflect.DeepEqual(got, map[string]string{"root": "INFO", "kafka.server.ReplicaManager": "INFO"}) {
		t.Errorf("loggers %v", got)
	}
	if r := describe(""); r.ErrorCode != kerr.InvalidRequest.Code || *r.ErrorMessage != "Broker id must not be empty" {
		t.Errorf("empty name: %+v", r)
	}
	if r := describe("3"); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("other broker: %+v", r)
	}
	alter := func(validateOnly bool, name string, ops ...kmsg.IncrementalAlterConfigsRequestResourceConfig) kmsg.IncrementalAlterConfigsResponseResource {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		req.ValidateOnly = validateOnly
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName, r.Configs = kmsg.ConfigResourceTypeBrokerLogger, name, ops
		req.Resources = append(req.Resources, r)
		return conn.roundTrip(req).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]
	}
	op := func(o kmsg.IncrementalAlterConfigOp, name string, value *string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Op, c.Name, c.Value = o, name, value
		return c
	}
	str := func(s string) *string { return &s }
	if r := alter(true, "1", op(kmsg.IncrementalAlterConfigOpSet, "kafka.server.ReplicaManager", str("DEBUG"))); r.ErrorCode != 0 || levels()["kafka.server.ReplicaManager"] != "INFO" {
		t.Errorf("validate only changed the level: %+v %v", r, levels())
	}
	if r := alter(false, "1", op(kmsg.IncrementalAlterConfigOpSet, "kafka.server.ReplicaManager", str("DEBUG"))); r.ErrorCode != 0 || levels()["kafka.server.ReplicaManager"] != "DEBUG" {
		t.Errorf("set: %+v %v", r, levels())
	}
	if r := alter(false, "1", op(kmsg.IncrementalAlterConfigOpDelete, "kafka.server.ReplicaManager", nil)); r.ErrorCode != 0 || levels()["kafka.server.ReplicaManager"] != "INFO" {
		t.Errorf("delete: %+v %v", r, levels())
	}
	cases := []struct {
		ops  []kmsg.IncrementalAlterConfigsRequestResourceConfig
		code int16
		msg  string
	}{
		{[]kmsg.IncrementalAlterConfigsRequestResourceConfig{op(kmsg.IncrementalAlterConfigOpSet, "nope", str("DEBUG"))}, kerr.InvalidConfig.Code, "Logger nope does not exist!"},
		{[]kmsg.IncrementalAlterConfigsRequestResourceConfig{op(kmsg.IncrementalAlterConfigOpSet, "root", str("LOUD"))}, kerr.InvalidConfig.Code,
			"Cannot set the log level of root to LOUD as it is not a supported log level. Valid log levels are ALL, DEBUG, ERROR, FATAL, INFO, OFF, TRACE, WARN"},
		{[]kmsg.IncrementalAlterConfigsRequestResourceConfig{op(kmsg.IncrementalAlterConfigOpDelete, "root", nil)}, kerr.InvalidRequest.Code, "Removing the log level of the root logger is not allowed"},
		{[]kmsg.IncrementalAlterConfigsRequestResourceConfig{op(kmsg.IncrementalAlterConfigOpAppend, "root", str("INFO"))}, kerr.InvalidRequest.Code, "APPEND operation is not allowed for the BROKER_LOGGER resource"},
		// All or nothing: a bad op after a good one changes nothing.
		{[]kmsg.IncrementalAlterConfigsRequestResourceConfig{op(kmsg.IncrementalAlterConfigOpSet, "root", str("WARN")), op(kmsg.IncrementalAlterConfigOpSet, "nope", str("WARN"))}, kerr.InvalidConfig.Code, "Logger nope does not exist!"},
	}
	for _, c := range cases {
		r := alter(false, "1", c.ops...)
		if r.ErrorCode != c.code || r.ErrorMessage == nil || *r.ErrorMessage != c.msg {
			t.Errorf("%+v: %d %v, want %d %q", c.ops, r.ErrorCode, r.ErrorMessage, c.code, c.msg)
		}
	}
	if levels()["root"] != "INFO" {
		t.Errorf("a refused request changed root: %v", fl.levels)
	}
	if r := alter(false, "2", op(kmsg.IncrementalAlterConfigOpSet, "root", str("WARN"))); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("other node: %+v", r)
	}
	// AlterConfigs does not serve broker loggers.
	req := kmsg.NewPtrAlterConfigsRequest()
	rr := kmsg.NewAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBrokerLogger, "1"
	req.Resources = append(req.Resources, rr)
	if r := conn.roundTrip(req).(*kmsg.AlterConfigsResponse).Resources[0]; r.ErrorCode != kerr.InvalidRequest.Code || *r.ErrorMessage != "Unknown resource type 8" {
		t.Errorf("AlterConfigs BROKER_LOGGER: %+v", r)
	}
}

// TestSetConnectionLimits: raising max.connections lets a waiting
// connection in at once, and max.connections.per.ip changes for new
// connections, without a restart.
func TestSetConnectionLimits(t *testing.T) {
	b := startBroker(t, func(c *Config) {
		c.MaxConnections = 1
		c.MaxConnectionsPerIP = 1
		c.InterBrokerListener = "REPLICATION"
	})
	first := b.dial(t)
	first.roundTrip(apiVersions())
	waiting := b.dial(t)
	waiting.send(apiVersions())
	waiting.c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	var one [1]byte
	if _, err := waiting.c.Read(one[:]); err == nil {
		t.Fatal("a connection beyond max.connections was served")
	}
	// max.connections 3 lets it be accepted, where max.connections.per.ip
	// 1 closes it; then per ip 3 serves new ones.
	b.srv.SetConnectionLimits(3, 1)
	waiting.expectClosed()
	b.srv.SetConnectionLimits(3, 3)
	second := b.dial(t)
	second.roundTrip(apiVersions())
	third := b.dial(t)
	third.roundTrip(apiVersions())
	first.roundTrip(apiVersions())
	// Lowering applies to new connections only: the open ones stay.
	b.srv.SetConnectionLimits(1, 1)
	late := b.dial(t)
	late.send(apiVersions())
	late.c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := late.c.Read(one[:]); err == nil {
		t.Fatal("a connection beyond the lowered max.connections was served")
	}
	second.roundTrip(apiVersions())
}

// TestMaxConnectionsZeroAdmitsNone: Kafka's max.connections=0 admits no
// client connection (ServerMaxConnections maps it to a negative limit);
// 0 in Config is the zero value, unbounded.
func TestMaxConnectionsZeroAdmitsNone(t *testing.T) {
	b := startBroker(t, func(c *Config) {
		c.MaxConnections = ServerMaxConnections(0)
		c.InterBrokerListener = "REPLICATION"
	})
	c := b.dial(t)
	c.send(apiVersions())
	c.c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	var one [1]byte
	if _, err := c.c.Read(one[:]); err == nil {
		t.Fatal("max.connections=0 served a client connection")
	}
	b.srv.SetConnectionLimits(0, 0) // unbounded: the waiting connection is served
	if _, _, err := c.readFrame(false); err != nil {
		t.Fatalf("after lifting the limit: %v", err)
	}
	if ServerMaxConnections(5) != 5 {
		t.Fatal("ServerMaxConnections changed a positive limit")
	}
}

// TestAlterConfigsDuplicateResource: a resource named twice in one
// IncrementalAlterConfigs or AlterConfigs answers INVALID_REQUEST "Each
// resource must appear at most once." for both copies and changes
// nothing of it, as Kafka's ConfigAdminManager.preprocess; the other
// resources of the request are served.
func TestAlterConfigsDuplicateResource(t *testing.T) {
	b, bc, _ := startConfigBroker(t)
	conn := b.dial(t)
	const msg = "Each resource must appear at most once."
	inc := kmsg.NewPtrIncrementalAlterConfigsRequest()
	for _, r := range []struct{ name, key, value string }{
		{"1", "log.retention.ms", "5"}, {"", "message.max.bytes", "2000000"}, {"1", "max.connections", "9"},
	} {
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, r.name
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = r.key, kadm.StringPtr(r.value)
		rr.Configs = append(rr.Configs, c)
		inc.Resources = append(inc.Resources, rr)
	}
	resp := conn.roundTrip(inc).(*kmsg.IncrementalAlterConfigsResponse)
	if len(resp.Resources) != 3 {
		t.Fatalf("%d resources answered, want 3", len(resp.Resources))
	}
	for _, i := range []int{0, 2} {
		if r := resp.Resources[i]; r.ErrorCode != kerr.InvalidRequest.Code || r.ErrorMessage == nil || *r.ErrorMessage != msg || r.ResourceName != "1" {
			t.Errorf("copy %d of broker 1: %+v", i, r)
		}
	}
	if r := resp.Resources[1]; r.ErrorCode != 0 {
		t.Errorf("the other resource: %+v", r)
	}
	if got := bc.layer(true); len(got) != 0 {
		t.Errorf("the duplicated resource was changed: %v", got)
	}
	if got := bc.layer(false); got["message.max.bytes"] != "2000000" {
		t.Errorf("the other resource was not changed: %v", got)
	}

	alt := kmsg.NewPtrAlterConfigsRequest()
	for range 2 {
		rr := kmsg.NewAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, ""
		c := kmsg.NewAlterConfigsRequestResourceConfig()
		c.Name, c.Value = "log.retention.bytes", kadm.StringPtr("1")
		rr.Configs = append(rr.Configs, c)
		alt.Resources = append(alt.Resources, rr)
	}
	aresp := conn.roundTrip(alt).(*kmsg.AlterConfigsResponse)
	for i, r := range aresp.Resources {
		if r.ErrorCode != kerr.InvalidRequest.Code || r.ErrorMessage == nil || *r.ErrorMessage != msg {
			t.Errorf("AlterConfigs copy %d: %+v", i, r)
		}
	}
	if len(aresp.Resources) != 2 || bc.layer(false)["log.retention.bytes"] != "" {
		t.Errorf("AlterConfigs of a duplicated resource: %+v, default layer %v", aresp.Resources, bc.layer(false))
	}
}
