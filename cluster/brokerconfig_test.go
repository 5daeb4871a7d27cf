package cluster

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func strp(s string) *string { return &s }

func TestBrokerKeyTableModes(t *testing.T) {
	cases := map[string]BrokerKeyMode{
		"log.retention.ms":                    ModeClusterWide,
		"log.retention.minutes":               ModeReadOnly, // only the first synonym is dynamic in Kafka
		"log.retention.hours":                 ModeReadOnly,
		"log.roll.ms":                         ModeClusterWide,
		"log.roll.hours":                      ModeReadOnly,
		"log.retention.bytes":                 ModeClusterWide,
		"message.max.bytes":                   ModeClusterWide,
		"log.cleanup.policy":                  ModeClusterWide,
		"log.cleaner.min.cleanable.ratio":     ModeClusterWide,
		"log.cleaner.threads":                 ModeClusterWide,
		"num.recovery.threads.per.data.dir":   ModeClusterWide,
		"log.cleaner.backoff.ms":              ModeClusterWide,
		"log.cleaner.enable":                  ModeReadOnly,
		"log.cleaner.dedupe.buffer.size":      ModeClusterWide,
		"log.cleaner.io.buffer.size":          ModeReadOnly, // dynamic in Kafka, but fixed in this cleaner
		"log.cleaner.io.buffer.load.factor":   ModeReadOnly,
		"log.message.format.version":          ModeReadOnly, // NonReconfigrableLogConfigs
		"max.connections":                     ModeClusterWide,
		"max.connections.per.ip":              ModeClusterWide,
		"broker.id":                           ModeReadOnly,
		"log.dirs":                            ModeReadOnly,
		"listeners":                           ModeReadOnly,
		"leader.replication.throttled.rate":   ModeQuota,
		"follower.replication.throttled.rate": ModeQuota,
		"compression.type":                    ModeClusterWide,
		"min.insync.replicas":                 ModeClusterWide,
		"unclean.leader.election.enable":      ModeClusterWide,
	}
	for name, want := range cases {
		k, ok := LookupBrokerKey(name)
		if !ok {
			t.Errorf("%s: not in the table", name)
			continue
		}
		if k.Mode != want {
			t.Errorf("%s: mode %d, want %d", name, k.Mode, want)
		}
	}
	// Every topic key's first broker synonym is a row of the table.
	for _, tk := range topicKeyTable {
		if len(tk.broker) == 0 {
			continue
		}
		if _, ok := LookupBrokerKey(tk.broker[0].name); !ok {
			t.Errorf("topic key %s: broker synonym %s missing from the broker table", tk.name, tk.broker[0].name)
		}
	}
	static := StaticBrokerKeyDefaults()
	if _, ok := static["leader.replication.throttled.rate"]; ok {
		t.Error("quota keys must not be accepted in server.properties")
	}
	if static["log.retention.hours"] != "168" || static["log.retention.ms"] != "" {
		t.Errorf("static defaults: hours %q ms %q", static["log.retention.hours"], static["log.retention.ms"])
	}
}

func TestBrokerSynonymsOrder(t *testing.T) {
	for name, want := range map[string][]string{
		"log.retention.hours":   {"log.retention.ms", "log.retention.minutes", "log.retention.hours"},
		"log.roll.ms":           {"log.roll.ms", "log.roll.hours"},
		"log.flush.interval.ms": {"log.flush.interval.ms", "log.flush.scheduler.interval.ms"},
		"message.max.bytes":     {"message.max.bytes"},
	} {
		if got := BrokerSynonyms(name); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
}

func findEntry(t *testing.T, es []BrokerConfigEntry, name string) BrokerConfigEntry {
	t.Helper()
	for _, e := range es {
		if e.Name == name {
			return e
		}
	}
	t.Fatalf("%s not described", name)
	return BrokerConfigEntry{}
}

func TestBrokerEntriesSourcesAndSynonyms(t *testing.T) {
	l := BrokerConfigLayers{
		Static:         map[string]string{"log.retention.hours": "1", "broker.id": "3", "my.custom": "x"},
		DynamicDefault: map[string]string{"log.retention.ms": "1000", "message.max.bytes": "2000"},
		DynamicBroker:  map[string]string{"log.retention.ms": "500"},
	}
	es := l.BrokerEntries(true)
	ms := findEntry(t, es, "log.retention.ms")
	want := []BrokerConfigSynonym{
		{"log.retention.ms", strp("500"), SourceDynamicBroker},
		{"log.retention.ms", strp("1000"), SourceDynamicDefaultBroker},
		{"log.retention.hours", strp("1"), SourceStaticBroker},
		{"log.retention.hours", strp("168"), SourceDefault},
	}
	if !reflect.DeepEqual(ms.Synonyms, want) || ms.Source != SourceDynamicBroker || *ms.Value != "500" ||
		ms.ReadOnly || ms.Sensitive || ms.Type != TypeLong || ms.Documentation == "" {
		t.Errorf("log.retention.ms: %+v", ms)
	}
	hours := findEntry(t, es, "log.retention.hours")
	want = []BrokerConfigSynonym{{"log.retention.hours", strp("1"), SourceStaticBroker}, {"log.retention.hours", strp("168"), SourceDefault}}
	if !reflect.DeepEqual(hours.Synonyms, want) || hours.Source != SourceStaticBroker || !hours.ReadOnly || hours.Type != TypeInt {
		t.Errorf("log.retention.hours: %+v", hours)
	}
	mmb := findEntry(t, es, "message.max.bytes")
	if mmb.Source != SourceDynamicDefaultBroker || *mmb.Value != "2000" || len(mmb.Synonyms) != 2 || mmb.Synonyms[1].Source != SourceDefault {
		t.Errorf("message.max.bytes: %+v", mmb)
	}
	minutes := findEntry(t, es, "log.retention.minutes")
	if minutes.Value != nil || minutes.Source != SourceDefault || len(minutes.Synonyms) != 0 {
		t.Errorf("log.retention.minutes (unset, no default): %+v", minutes)
	}
	custom := findEntry(t, es, "my.custom")
	if custom.Value != nil || !custom.Sensitive || custom.Type != TypeUnknown || custom.Synonyms[0].Value != nil ||
		custom.Source != SourceStaticBroker || !custom.ReadOnly {
		t.Errorf("custom key must be sensitive with no value: %+v", custom)
	}
	rate := findEntry(t, es, "leader.replication.throttled.rate")
	if rate.Source != SourceDefault || *rate.Value != "9223372036854775807" || !rate.ReadOnly || rate.Type != TypeLong {
		t.Errorf("throttled rate: %+v", rate)
	}
	if n := len(es); n < len(brokerKeyTable) {
		t.Errorf("%d entries, want at least the %d keys", n, len(brokerKeyTable))
	}

	def := l.BrokerEntries(false)
	if len(def) != 2 || def[0].Name != "log.retention.ms" || def[1].Name != "message.max.bytes" {
		t.Fatalf("default resource lists %+v", def)
	}
	if !reflect.DeepEqual(def[0].Synonyms, []BrokerConfigSynonym{{"log.retention.ms", strp("1000"), SourceDynamicDefaultBroker}}) ||
		*def[0].Value != "1000" || def[0].Source != SourceDynamicDefaultBroker {
		t.Errorf("default log.retention.ms: %+v", def[0])
	}
}

func TestBrokerLayersMerged(t *testing.T) {
	l := BrokerConfigLayers{
		Static:         map[string]string{"log.retention.hours": "1", "log.roll.ms": "10", "num.partitions": "3"},
		DynamicDefault: map[string]string{"log.retention.ms": "1000", "log.roll.hours": "2"},
		DynamicBroker:  map[string]string{"log.retention.ms": "500"},
	}
	want := map[string]string{"log.retention.ms": "500", "log.roll.hours": "2", "num.partitions": "3"}
	if got := l.Merged(); !reflect.DeepEqual(got, want) {
		t.Errorf("merged %v, want %v", got, want)
	}
}

func TestCheckBrokerConfigUpdate(t *testing.T) {
	cases := []struct {
		props map[string]string
		msg   string // "" accepted
	}{
		{map[string]string{"log.retention.ms": "1000", "max.connections": "10"}, ""},
		{map[string]string{"sasl.jaas.config": "com.sun.security.auth.module.JndiLoginModule required;"},
			"Cannot update these configs dynamically: Set(sasl.jaas.config)"},
		{map[string]string{"log.retention.hours": "1", "log.dirs": "/x", "log.retention.ms": "5"},
			"Cannot update these configs dynamically: Set(log.dirs, log.retention.hours)"},
		{map[string]string{"log.retention.ms": "abc"}, "Invalid value abc for configuration log.retention.ms: Not a number of type LONG"},
		{map[string]string{"message.max.bytes": "99999999999"}, "Invalid value 99999999999 for configuration message.max.bytes: Not a number of type INT"},
		{map[string]string{"log.preallocate": "yes"}, "Invalid value yes for configuration log.preallocate: Expected value to be either true or false"},
		{map[string]string{"leader.replication.throttled.rate": "-1"}, "Invalid value -1 for configuration leader.replication.throttled.rate: Value must be at least 0"},
		{map[string]string{"log.cleaner.min.cleanable.ratio": "x"}, "Invalid value x for configuration log.cleaner.min.cleanable.ratio: Not a number of type DOUBLE"},
	}
	for _, c := range cases {
		err := CheckBrokerConfigUpdate(c.props)
		if c.msg == "" {
			if err != nil {
				t.Errorf("%v: %v", c.props, err)
			}
			continue
		}
		if err == nil || err.Error() != c.msg || !errors.Is(err, ErrBrokerConfigRefused) {
			t.Errorf("%v: got %v, want %q", c.props, err, c.msg)
		}
	}
}

func TestTopicEntriesWithBrokerLayers(t *testing.T) {
	l := BrokerConfigLayers{
		Static:        map[string]string{"log.retention.hours": "1"},
		DynamicBroker: map[string]string{"log.retention.ms": "500"},
	}
	c := DefaultLogConfig()
	c.RetentionMs = 500
	es := c.EntriesWithBrokerLayers(nil, l)
	for _, e := range es {
		if e.Name != "retention.ms" {
			continue
		}
		want := []ConfigSynonym{
			{"log.retention.ms", "500", SourceDynamicBroker},
			{"log.retention.hours", "1", SourceStaticBroker},
			{"log.retention.hours", "168", SourceDefault},
		}
		if e.Value != "500" || e.Source != SourceDynamicBroker || !reflect.DeepEqual(e.Synonyms, want) {
			t.Errorf("retention.ms: %+v", e)
		}
		return
	}
	t.Fatal("retention.ms not described")
}

func TestBrokerKeyDocs(t *testing.T) {
	for _, k := range BrokerKeys() {
		if strings.TrimSpace(k.Doc) == "" {
			t.Errorf("%s has no documentation", k.Name)
		}
	}
}
