package zkcoord

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/internal/zktest"
)

func TestPlanPartitions(t *testing.T) {
	live := []cluster.BrokerRack{{ID: 1}, {ID: 2}, {ID: 3}}
	existing := map[int32][]int32{0: {2, 3, 1}, 1: {3, 1, 2}, 2: {1, 2, 3}}
	// Kafka's addPartitions: start index 1 (broker 2, partition 0's first
	// replica), numbering from 3, shift 1 growing to 2 at partition 3.
	got, err := planPartitions(existing, PartitionSpec{Topic: "t", Count: 5}, live)
	if want := map[int32][]int32{3: {2, 3, 1}, 4: {3, 1, 2}}; err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("automatic: %v %v, want %v", got, err, want)
	}
	got, err = planPartitions(existing, PartitionSpec{Topic: "t", Count: 4, Assignment: [][]int32{{3, 2, 1}}}, live)
	if want := map[int32][]int32{3: {3, 2, 1}}; err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("explicit: %v %v, want %v", got, err, want)
	}
	// Rack-aware: brokers 1-6 in racks r1 r2 r3 r1 r2 r3 alternate as
	// 1 2 3 4 5 6; start index 1 (broker 2), the followers' shift 1 times
	// 3 racks.
	racked := []cluster.BrokerRack{{ID: 1, Rack: "r1"}, {ID: 2, Rack: "r2"}, {ID: 3, Rack: "r3"},
		{ID: 4, Rack: "r1"}, {ID: 5, Rack: "r2"}, {ID: 6, Rack: "r3"}}
	got, err = planPartitions(existing, PartitionSpec{Topic: "t", Count: 5}, racked)
	if want := map[int32][]int32{3: {5, 3, 4}, 4: {6, 4, 5}}; err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("rack aware: %v %v, want %v", got, err, want)
	}
	for _, c := range []struct {
		name string
		spec PartitionSpec
		live []cluster.BrokerRack
		want error
	}{
		{"fewer", PartitionSpec{Count: 2}, live, cluster.ErrInvalidPartitions},
		{"same", PartitionSpec{Count: 3}, live, cluster.ErrInvalidPartitions},
		{"assignment count", PartitionSpec{Count: 5, Assignment: [][]int32{{1, 2, 3}}}, live, cluster.ErrInvalidReplicaAssignment},
		{"assignment rf", PartitionSpec{Count: 4, Assignment: [][]int32{{1, 2}}}, live, cluster.ErrInvalidReplicaAssignment},
		{"assignment duplicate", PartitionSpec{Count: 4, Assignment: [][]int32{{1, 1, 2}}}, live, cluster.ErrInvalidReplicaAssignment},
		{"assignment unknown broker", PartitionSpec{Count: 4, Assignment: [][]int32{{1, 2, 9}}}, live, cluster.ErrInvalidReplicaAssignment},
		{"too few brokers", PartitionSpec{Count: 4}, live[:2], cluster.ErrInvalidReplicationFactor},
		{"some brokers without rack", PartitionSpec{Count: 4}, []cluster.BrokerRack{{ID: 1, Rack: "a"}, {ID: 2, Rack: "b"}, {ID: 3}}, cluster.ErrIncompleteRackInfo},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := planPartitions(existing, c.spec, c.live); !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
}

// TestZKCreatePartitionsAndAlterConfig grows a topic and changes its config
// on a real ZooKeeper: the controller creates the new partitions' states
// and tells their replicas, the config znode and the change notification
// are Kafka's, and every broker's cache and OnTopicConfigChange see the
// new overrides.
func TestZKCreatePartitionsAndAlterConfig(t *testing.T) {
	srv := zktest.Start(t)
	sender := &fakeSender{}
	var mu sync.Mutex
	seen := map[int32][]string{}
	sessions := map[int32]*Session{}
	for id := int32(1); id <= 3; id++ {
		cfg := testConfig(t, srv.Connect(), id)
		cfg.Sender = sender
		cfg.OnTopicConfigChange = func(topic string) {
			mu.Lock()
			seen[id] = append(seen[id], topic)
			mu.Unlock()
		}
		s := connect(t, cfg)
		if err := s.Register(context.Background()); err != nil {
			t.Fatal(err)
		}
		sessions[id] = s
	}
	s1 := sessions[1]
	eventually(t, 10*time.Second, func() error {
		if n := len(s1.Brokers()); n != 3 || s1.ControllerID() < 0 {
			return fmt.Errorf("%d brokers, controller %d", n, s1.ControllerID())
		}
		return nil
	})
	ctx := context.Background()
	if err := s1.CreateTopic(ctx, TopicSpec{Name: "grow", NumPartitions: 2, ReplicationFactor: 3}); err != nil {
		t.Fatal(err)
	}
	raw := rawConn(t, srv.Connect())
	eventually(t, 10*time.Second, func() error {
		if st, err := stateOf(raw, "grow", 1); err != nil || st.Leader < 0 {
			return fmt.Errorf("partition 1: %+v %v", st, err)
		}
		return nil
	})

	if _, err := s1.CreatePartitions(ctx, PartitionSpec{Topic: "grow", Count: 4, ValidateOnly: true}); err != nil {
		t.Fatal(err)
	}
	if data, _ := mustGet(t, raw, topicPath("grow")); len(mustDecodeAssignment(t, data)) != 2 {
		t.Fatalf("validate only changed the topic: %s", data)
	}
	added, err := s1.CreatePartitions(ctx, PartitionSpec{Topic: "grow", Count: 4})
	if err != nil || len(added) != 2 {
		t.Fatalf("CreatePartitions: %v %v", added, err)
	}
	epoch := s1.ControllerEpoch()
	for p := int32(2); p < 4; p++ {
		replicas := added[p]
		data, _ := mustGet(t, raw, partitionStatePath("grow", p))
		want := fmt.Sprintf(`{"controller_epoch":%d,"leader":%d,"version":1,"leader_epoch":0,"isr":[%d,%d,%d]}`,
			epoch, replicas[0], replicas[0], replicas[1], replicas[2])
		if string(data) != want {
			t.Fatalf("state of new partition %d = %s, want %s", p, data, want)
		}
		for _, r := range replicas {
			eventually(t, 10*time.Second, func() error {
				return sender.findLAI(r, epoch, cluster.TopicPartition{Topic: "grow", Partition: p}, func(pa cluster.PartitionAssignment) bool {
					return pa.IsNew && pa.LeaderAndIsr.Leader == replicas[0]
				})
			})
		}
	}
	for _, c := range []struct {
		spec PartitionSpec
		want error
	}{
		{PartitionSpec{Topic: "grow", Count: 3}, cluster.ErrInvalidPartitions},
		{PartitionSpec{Topic: "missing", Count: 3}, cluster.ErrUnknownTopic},
		{PartitionSpec{Topic: "a/b", Count: 3}, cluster.ErrUnknownTopic},
	} {
		if _, err := s1.CreatePartitions(ctx, c.spec); !errors.Is(err, c.want) {
			t.Errorf("%+v: %v, want %v", c.spec, err, c.want)
		}
	}

	// Config: set two keys from broker 2, then delete one.
	kidsBefore, _, err := raw.Children(configChangesPath)
	if err != nil {
		t.Fatal(err)
	}
	set := func(cur map[string]string) (map[string]string, error) {
		cur["retention.ms"] = "1000"
		cur["max.message.bytes"] = "512"
		return cur, nil
	}
	if err := sessions[2].AlterTopicConfig(ctx, "grow", set, true); err != nil {
		t.Fatal(err)
	}
	if data, _ := mustGet(t, raw, configTopicPath("grow")); string(data) != `{"version":1,"config":{}}` {
		t.Fatalf("validate only wrote %s", data)
	}
	if err := sessions[2].AlterTopicConfig(ctx, "grow", set, false); err != nil {
		t.Fatal(err)
	}
	if data, _ := mustGet(t, raw, configTopicPath("grow")); string(data) != `{"version":1,"config":{"max.message.bytes":"512","retention.ms":"1000"}}` {
		t.Fatalf("config %s", data)
	}
	kids, _, err := raw.Children(configChangesPath)
	if err != nil || len(kids) != len(kidsBefore)+1 {
		t.Fatalf("config changes %v -> %v (%v)", kidsBefore, kids, err)
	}
	newest := ""
	for _, k := range kids {
		if strings.HasPrefix(k, "config_change_") && k > newest {
			newest = k
		}
	}
	if data, _ := mustGet(t, raw, configChangesPath+"/"+newest); string(data) != `{"version":2,"entity_path":"topics/grow"}` {
		t.Fatalf("config change %s", data)
	}
	// The writer's cache is current when AlterTopicConfig returns.
	if cfg, _ := sessions[2].TopicConfig("grow"); cfg["max.message.bytes"] != "512" {
		t.Fatalf("writer's cache %v", cfg)
	}
	eventually(t, 10*time.Second, func() error {
		for id, s := range sessions {
			if cfg, _ := s.TopicConfig("grow"); cfg["retention.ms"] != "1000" {
				return fmt.Errorf("broker %d cache %v", id, cfg)
			}
			mu.Lock()
			n := len(seen[id])
			mu.Unlock()
			if n < 2 { // the topic's first read, and the change
				return fmt.Errorf("broker %d saw %d config callbacks", id, n)
			}
		}
		return nil
	})
	del := func(cur map[string]string) (map[string]string, error) {
		delete(cur, "retention.ms")
		return cur, nil
	}
	if err := s1.AlterTopicConfig(ctx, "grow", del, false); err != nil {
		t.Fatal(err)
	}
	if data, _ := mustGet(t, raw, configTopicPath("grow")); string(data) != `{"version":1,"config":{"max.message.bytes":"512"}}` {
		t.Fatalf("config after delete %s", data)
	}
	bad := func(cur map[string]string) (map[string]string, error) {
		cur["no.such.key"] = "1"
		return cur, nil
	}
	if err := s1.AlterTopicConfig(ctx, "grow", bad, false); !errors.Is(err, cluster.ErrInvalidConfig) {
		t.Fatalf("unknown key: %v", err)
	}
	if err := s1.AlterTopicConfig(ctx, "missing", del, false); !errors.Is(err, cluster.ErrUnknownTopic) {
		t.Fatalf("unknown topic: %v", err)
	}
}

// TestZKConfigChangeNotificationsPurged checks Kafka's purge of
// /config/changes (ZkNodeChangeNotificationListener): every broker deletes
// the config_change_<seq> notifications older than the expiration when it
// processes them, at startup and when one is added, and keeps younger ones
// so that every broker has the time to read them. Purging goes by the
// znodes' age, so the test lets time pass instead of polling for it.
func TestZKConfigChangeNotificationsPurged(t *testing.T) {
	const expiration = time.Second
	srv := zktest.Start(t)
	shortCfg := func(id int32) Config {
		cfg := testConfig(t, srv.Connect(), id)
		cfg.configChangeExpiration = expiration
		return cfg
	}
	connect(t, testConfig(t, srv.Connect(), 1)) // the default expiration; creates /config/changes
	raw := rawConn(t, srv.Connect())
	notify := func() string {
		t.Helper()
		p, err := raw.Create(configChangeSequencePrefix, encodeTopicConfigChange("t"), zk.FlagSequence)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	exists := func(p string) bool {
		t.Helper()
		ok, _, err := raw.Exists(p)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	age := func() { time.Sleep(expiration + 300*time.Millisecond) }

	foreign := configChangeNotificationPath("not_a_notification")
	if _, err := raw.Create(foreign, nil, 0); err != nil {
		t.Fatal(err)
	}
	old := notify()
	age()
	// Connect returns after the session's first sync, which processes the
	// notifications: a broker with the default 15 minutes keeps old, one
	// with a short expiration purges it.
	connect(t, testConfig(t, srv.Connect(), 2))
	if !exists(old) {
		t.Fatalf("%s purged by a broker with the default expiration", old)
	}
	connect(t, shortCfg(3))
	if exists(old) {
		t.Fatalf("%s, older than %v, not purged at startup", old, expiration)
	}

	// A new notification makes the brokers process them again.
	old = notify()
	age()
	before := time.Now()
	young := notify()
	eventually(t, 10*time.Second, func() error {
		if exists(old) {
			return fmt.Errorf("%s not purged after %s was added", old, young)
		}
		return nil
	})
	// Every purge so far ran before now, so if young is not yet expiration
	// old it must be there (a slow machine may age it past that).
	if time.Since(before) >= expiration {
		t.Logf("%s not checked for survival: the machine took over %v to get here, so it may rightly be purged", young, expiration)
	} else if !exists(young) {
		t.Fatalf("%s purged younger than %v", young, expiration)
	}
	if !exists(foreign) {
		t.Fatalf("%s purged: it is no config change notification", foreign)
	}
}

func mustDecodeAssignment(t *testing.T, data []byte) map[int32][]int32 {
	t.Helper()
	a, err := decodeTopicAssignment("grow", data)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
