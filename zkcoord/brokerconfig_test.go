package zkcoord

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/internal/zktest"
)

func TestBrokerConfigJSON(t *testing.T) {
	if got := string(encodeBrokerConfig(map[string]string{"log.retention.ms": "1000"})); got != `{"version":1,"config":{"log.retention.ms":"1000"}}` {
		t.Errorf("config znode %s", got)
	}
	if got := string(encodeBrokerConfig(nil)); got != `{"version":1,"config":{}}` {
		t.Errorf("empty config znode %s", got)
	}
	if got := string(encodeBrokerConfigChange("<default>")); got != `{"version":2,"entity_path":"brokers/<default>"}` {
		t.Errorf("notification %s", got)
	}
	if got := string(encodeBrokerConfigChange("3")); got != `{"version":2,"entity_path":"brokers/3"}` {
		t.Errorf("notification %s", got)
	}
	cfg, err := decodeBrokerConfig("1", []byte(`{"version":1,"config":{"a":"b"}}`))
	if err != nil || cfg["a"] != "b" {
		t.Errorf("decode: %v %v", cfg, err)
	}
	if _, err := decodeBrokerConfig("1", []byte(`{"version":1,"config":`)); err == nil {
		t.Error("truncated payload decoded")
	}
	if configBrokerPath(cluster.BrokerDefaultEntity) != "/config/brokers/<default>" {
		t.Error(configBrokerPath(cluster.BrokerDefaultEntity))
	}
	for _, bad := range []string{"", "x", "-1", "01", "<defaults>"} {
		if err := checkBrokerEntity(bad); !errors.Is(err, ErrInvalidBrokerEntity) {
			t.Errorf("entity %q: %v", bad, err)
		}
	}
}

// changeRecorder collects the entities OnBrokerConfigChange names.
type changeRecorder struct {
	mu   sync.Mutex
	seen []string
}

func (r *changeRecorder) record(e string) { r.mu.Lock(); r.seen = append(r.seen, e); r.mu.Unlock() }
func (r *changeRecorder) count(e string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range r.seen {
		if s == e {
			n++
		}
	}
	return n
}

// TestZKBrokerConfigChangeReachesWatchers: a write by one broker to
// /config/brokers/<id> of another, and to <default>, reaches the other's
// watch and cache, in Kafka's znode format with a change notification;
// a change for a third broker does not concern it.
func TestZKBrokerConfigChangeReachesWatchers(t *testing.T) {
	srv := zktest.Start(t)
	raw := rawConn(t, srv.Connect())
	// A config written before the broker starts is read at Connect.
	for _, p := range []string{configPath, configBrokersPath} {
		if _, err := raw.Create(p, nil, 0); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
	}
	if _, err := raw.Create(configBrokerPath("2"), []byte(`{"version":1,"config":{"log.retention.ms":"100"}}`), 0); err != nil {
		t.Fatal(err)
	}
	rec := &changeRecorder{}
	cfg2 := testConfig(t, srv.Connect(), 2)
	cfg2.OnBrokerConfigChange = rec.record
	b2 := connect(t, cfg2)
	if got := b2.BrokerConfig("2"); got["log.retention.ms"] != "100" {
		t.Fatalf("config at startup: %v", got)
	}
	b1 := startBroker(t, srv.Connect(), 1)
	ctx := context.Background()

	set := func(k, v string) BrokerConfigAlter {
		return func(cur map[string]string) (map[string]string, error) { cur[k] = v; return cur, nil }
	}
	if err := b1.AlterBrokerConfig(ctx, "2", set("log.retention.ms", "5000"), false); err != nil {
		t.Fatal(err)
	}
	if err := b1.AlterBrokerConfig(ctx, cluster.BrokerDefaultEntity, set("max.connections", "50"), false); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() error {
		if got := b2.BrokerConfig("2")["log.retention.ms"]; got != "5000" {
			return fmt.Errorf("broker 2 sees log.retention.ms=%q", got)
		}
		if got := b2.BrokerConfig(cluster.BrokerDefaultEntity)["max.connections"]; got != "50" {
			return fmt.Errorf("broker 2 sees default max.connections=%q", got)
		}
		return nil
	})
	if rec.count("2") < 2 || rec.count(cluster.BrokerDefaultEntity) < 2 {
		t.Errorf("callbacks: %v", rec.seen)
	}
	// The writer's own cache has the default at once (it applies it too).
	if got := b1.BrokerConfig(cluster.BrokerDefaultEntity)["max.connections"]; got != "50" {
		t.Errorf("writer's default cache %q", got)
	}
	data, _ := mustGet(t, raw, configBrokerPath("2"))
	if string(data) != `{"version":1,"config":{"log.retention.ms":"5000"}}` {
		t.Errorf("znode %s", data)
	}
	kids, _, err := raw.Children(configChangesPath)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, k := range kids {
		d, _, err := raw.Get(configChangeNotificationPath(k))
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, string(d))
	}
	all := strings.Join(paths, " ")
	if !strings.Contains(all, `{"version":2,"entity_path":"brokers/2"}`) || !strings.Contains(all, `{"version":2,"entity_path":"brokers/<default>"}`) {
		t.Errorf("notifications: %v", paths)
	}

	// A raw write without notification (another tool) also reaches it:
	// the watch is on the znode itself.
	if _, err := raw.Set(configBrokerPath("2"), []byte(`{"version":1,"config":{}}`), -1); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() error {
		if got := b2.BrokerConfig("2"); len(got) != 0 {
			return fmt.Errorf("broker 2 still sees %v", got)
		}
		return nil
	})

	// Another broker's entity: written, not cached by broker 2.
	before := rec.count("3")
	if err := b1.AlterBrokerConfig(ctx, "3", set("log.retention.ms", "1"), false); err != nil {
		t.Fatal(err)
	}
	if b2.BrokerConfig("3") != nil || rec.count("3") != before {
		t.Error("broker 2 applied broker 3's config")
	}

	// validateOnly writes nothing; an error from alter is returned as is.
	if err := b1.AlterBrokerConfig(ctx, "2", set("log.retention.ms", "7"), true); err != nil {
		t.Fatal(err)
	}
	refusal := errors.New("refused")
	if err := b1.AlterBrokerConfig(ctx, "2", func(map[string]string) (map[string]string, error) { return nil, refusal }, false); !errors.Is(err, refusal) {
		t.Fatalf("alter error %v", err)
	}
	if data, _ := mustGet(t, raw, configBrokerPath("2")); string(data) != `{"version":1,"config":{}}` {
		t.Errorf("validateOnly or a refused alter wrote %s", data)
	}
	if err := b1.AlterBrokerConfig(ctx, "x", set("a", "b"), false); !errors.Is(err, ErrInvalidBrokerEntity) {
		t.Errorf("bad entity: %v", err)
	}
}
