package zkcoord

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/internal/zktest"
)

// These tests run against a real ZooKeeper (internal/zktest) and read back
// what zkcoord wrote with a raw client, byte for byte.

const testSessionTimeout = 4 * time.Second

func testConfig(t *testing.T, connect string, id int32) Config {
	return Config{
		Connect:           connect,
		SessionTimeout:    testSessionTimeout,
		ConnectionTimeout: 45 * time.Second, // a loaded 2-core machine can be slow to hand out a session
		BrokerID:          id,
		Endpoints: []cluster.Endpoint{{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT",
			Host: "localhost", Port: 9000 + id}},
		Log: zerolog.New(zerolog.NewTestWriter(t)).With().Timestamp().Logger(),
	}
}

func connect(t *testing.T, cfg Config) *Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := Connect(ctx, cfg)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func startBroker(t *testing.T, connectStr string, id int32) *Session {
	t.Helper()
	return startBrokerWith(t, connectStr, id, nil)
}

// startBrokerWith starts a broker whose controller sends through sender.
func startBrokerWith(t *testing.T, connectStr string, id int32, sender BrokerSender) *Session {
	t.Helper()
	cfg := testConfig(t, connectStr, id)
	cfg.Sender = sender
	s := connect(t, cfg)
	if err := s.Register(context.Background()); err != nil {
		t.Fatalf("Register %d: %v", id, err)
	}
	return s
}

// rawConn is a plain client rooted at the chroot of connectStr.
func rawConn(t *testing.T, connectStr string) *zkConn {
	t.Helper()
	servers, chroot, err := parseConnect(connectStr)
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := zk.Connect(servers, testSessionTimeout, zk.WithLogInfo(false), zk.WithLogger(zkLogger{zerolog.Nop()}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &zkConn{c: c, chroot: chroot}
}

func mustGet(t *testing.T, z *zkConn, p string) ([]byte, *zk.Stat) {
	t.Helper()
	var data []byte
	var st *zk.Stat
	eventually(t, 10*time.Second, func() error {
		var err error
		data, st, err = z.Get(p)
		return err
	})
	return data, st
}

// stateOf reads a partition state znode directly: no session caches
// partition states.
func stateOf(z *zkConn, topic string, p int32) (cluster.LeaderAndIsr, error) {
	data, stat, err := z.Get(partitionStatePath(topic, p))
	if err != nil {
		return cluster.LeaderAndIsr{}, fmt.Errorf("get %s: %w", partitionStatePath(topic, p), err)
	}
	return decodePartitionState(data, stat.Version)
}

// eventually polls fn until it returns nil or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not true within %v: %v", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestZKConnectCreatesPathsAndClusterID(t *testing.T) {
	srv := zktest.Start(t)
	connectStr := srv.Connect() + "/kafka/nested" // a chroot that does not exist yet
	s1 := connect(t, testConfig(t, connectStr, 1))
	id := s1.ClusterID()
	if len(id) != 22 {
		t.Fatalf("cluster id %q", id)
	}
	raw := rawConn(t, connectStr)
	for _, p := range persistentPaths {
		if ok, _, err := raw.Exists(p); err != nil || !ok {
			t.Errorf("%s missing: %v", p, err)
		}
	}
	data, st := mustGet(t, raw, clusterIDPath)
	if want := `{"version":"1","id":"` + id + `"}`; string(data) != want {
		t.Fatalf("/cluster/id = %s, want %s", data, want)
	}
	s1.Close()
	s1.Close() // safe twice

	s2 := connect(t, testConfig(t, connectStr, 2))
	if s2.ClusterID() != id {
		t.Fatalf("cluster id changed: %s then %s", id, s2.ClusterID())
	}
	if _, st2 := mustGet(t, raw, clusterIDPath); st2.Version != st.Version || st2.Czxid != st.Czxid {
		t.Fatalf("/cluster/id rewritten: %+v then %+v", st, st2)
	}
}

func TestZKConnectFailsClearly(t *testing.T) {
	cfg := testConfig(t, "127.0.0.1:1", 1)
	cfg.ConnectionTimeout = 1500 * time.Millisecond
	_, err := Connect(context.Background(), cfg)
	if !errors.Is(err, ErrNoSession) {
		t.Fatalf("got %v, want ErrNoSession", err)
	}
	if want := "127.0.0.1:1"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not name %s", err, want)
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || len(s) >= len(sub) && (s[:len(sub)] == sub || contains(s[1:], sub))
}

func TestZKRegister(t *testing.T) {
	srv := zktest.Start(t)
	cfg := testConfig(t, srv.Connect(), 1)
	cfg.Endpoints = append(cfg.Endpoints, cluster.Endpoint{Listener: "INTERNAL", SecurityProtocol: "PLAINTEXT", Host: "10.1.1.1", Port: 9999})
	cfg.Rack = "rack-a"
	s := connect(t, cfg)
	if err := s.Register(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Register(context.Background()); err != nil {
		t.Fatalf("second Register on the same session: %v", err)
	}
	raw := rawConn(t, srv.Connect())
	data, st := mustGet(t, raw, brokerPath(1))
	if st.EphemeralOwner != s.SessionID() {
		t.Fatalf("ephemeral owner 0x%x, session 0x%x", st.EphemeralOwner, s.SessionID())
	}
	if s.BrokerEpoch() != st.Czxid {
		t.Fatalf("broker epoch %d, czxid %d", s.BrokerEpoch(), st.Czxid)
	}
	want := string(encodeBrokerRegistration(cfg.Endpoints, "rack-a", 0))
	got := string(data)
	// The timestamp differs; compare everything else.
	if stripTimestamp(got) != stripTimestamp(want) {
		t.Fatalf("registration\n got %s\nwant %s", got, want)
	}
	eventually(t, 10*time.Second, func() error {
		bs := s.Brokers()
		if len(bs) != 1 || bs[0].ID != 1 || bs[0].Epoch != st.Czxid || len(bs[0].Endpoints) != 2 ||
			bs[0].Endpoints[1].Host != "10.1.1.1" || bs[0].Rack == nil || *bs[0].Rack != "rack-a" {
			return fmt.Errorf("brokers %+v", bs)
		}
		return nil
	})

	other := connect(t, testConfig(t, srv.Connect(), 1))
	err := other.Register(context.Background())
	if !errors.Is(err, ErrBrokerIDInUse) {
		t.Fatalf("second session with broker id 1: got %v, want ErrBrokerIDInUse", err)
	}
	t.Logf("as expected: %v", err)
}

// stripTimestamp removes the "timestamp" field, which differs per write.
var timestampField = regexp.MustCompile(`"timestamp":"[0-9]+",`)

func stripTimestamp(s string) string { return timestampField.ReplaceAllString(s, "") }

func TestZKControllerElection(t *testing.T) {
	srv := zktest.Start(t)
	type change struct {
		id    int32
		is    bool
		epoch int32
	}
	changes := make(chan change, 16)
	sessions := map[int32]*Session{}
	for _, id := range []int32{1, 2} {
		cfg := testConfig(t, srv.Connect(), id)
		cfg.OnControllerChange = func(is bool, epoch int32) { changes <- change{id, is, epoch} }
		s := connect(t, cfg)
		if err := s.Register(context.Background()); err != nil {
			t.Fatal(err)
		}
		sessions[id] = s
	}
	var first int32 = -1
	eventually(t, 10*time.Second, func() error {
		n := 0
		for id, s := range sessions {
			if s.IsController() {
				n++
				first = id
			}
		}
		if n != 1 {
			return fmt.Errorf("%d controllers", n)
		}
		for id, s := range sessions {
			if s.ControllerID() != first {
				return fmt.Errorf("broker %d sees controller %d, not %d", id, s.ControllerID(), first)
			}
		}
		return nil
	})
	raw := rawConn(t, srv.Connect())
	data, _ := mustGet(t, raw, controllerEpochPath)
	if string(data) != "1" || sessions[first].ControllerEpoch() != 1 {
		t.Fatalf("/controller_epoch = %q, ControllerEpoch %d, want 1", data, sessions[first].ControllerEpoch())
	}
	data, _ = mustGet(t, raw, controllerPath)
	if id, err := decodeController(data); err != nil || id != first || !strings.HasPrefix(string(data), `{"version":1,"brokerid":`+strconv.Itoa(int(first))+`,"timestamp":"`) {
		t.Fatalf("/controller = %s", data)
	}
	if c := <-changes; c.id != first || !c.is || c.epoch != 1 {
		t.Fatalf("callback %+v", c)
	}

	second := int32(3) - first
	sessions[first].Close()
	eventually(t, 15*time.Second, func() error {
		s := sessions[second]
		if !s.IsController() || s.ControllerEpoch() != 2 || s.ControllerID() != second {
			return fmt.Errorf("broker %d: controller=%v epoch=%d id=%d", second, s.IsController(), s.ControllerEpoch(), s.ControllerID())
		}
		return nil
	})
	if data, _ := mustGet(t, raw, controllerEpochPath); string(data) != "2" {
		t.Fatalf("/controller_epoch = %q after failover", data)
	}
}

// TestZKSessionExpiry cuts broker 1 off through a proxy until ZooKeeper
// expires its session, then heals: broker 1 must re-register with a new
// broker epoch, and its re-armed watches must keep the cache current.
func TestZKSessionExpiry(t *testing.T) {
	srv := zktest.Start(t)
	proxy := newZKFrameProxy(t, srv.Addr)
	cfg := testConfig(t, proxy.Addr()+srv.Chroot, 1)
	cfg.SessionTimeout = 2 * time.Second
	var mu sync.Mutex
	var calls []bool
	cfg.OnControllerChange = func(is bool, _ int32) { mu.Lock(); calls = append(calls, is); mu.Unlock() }
	s1 := connect(t, cfg)
	if err := s1.Register(context.Background()); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() error {
		if !s1.IsController() {
			return errors.New("broker 1 is not controller")
		}
		return nil
	})
	s2 := startBroker(t, srv.Connect(), 2)
	raw := rawConn(t, srv.Connect())
	_, st := mustGet(t, raw, brokerPath(1))
	oldEpoch, oldSession := s1.BrokerEpoch(), s1.SessionID()
	if oldEpoch != st.Czxid {
		t.Fatalf("epoch %d czxid %d", oldEpoch, st.Czxid)
	}

	proxy.Cut()
	eventually(t, 20*time.Second, func() error {
		if ok, _, err := raw.Exists(brokerPath(1)); err != nil || ok {
			return fmt.Errorf("/brokers/ids/1 still there (err %v)", err)
		}
		return nil
	})
	eventually(t, 10*time.Second, func() error {
		if !s2.IsController() {
			return errors.New("broker 2 did not take over")
		}
		return nil
	})
	proxy.Heal()

	eventually(t, 20*time.Second, func() error {
		_, st, err := raw.Get(brokerPath(1))
		if err != nil {
			return err
		}
		if s1.SessionID() == oldSession || st.EphemeralOwner != s1.SessionID() {
			return fmt.Errorf("not re-registered in a new session")
		}
		if st.Czxid == oldEpoch || s1.BrokerEpoch() != st.Czxid {
			return fmt.Errorf("broker epoch %d, czxid %d, old %d", s1.BrokerEpoch(), st.Czxid, oldEpoch)
		}
		return nil
	})
	eventually(t, 10*time.Second, func() error {
		if s1.IsController() || s1.ControllerID() != 2 {
			return fmt.Errorf("broker 1 controller=%v sees %d", s1.IsController(), s1.ControllerID())
		}
		return nil
	})
	mu.Lock()
	if len(calls) != 2 || !calls[0] || calls[1] {
		t.Fatalf("controller callbacks %v, want [true false]", calls)
	}
	mu.Unlock()

	// The cache of broker 1 still follows ZooKeeper through re-armed watches.
	if err := s2.CreateTopic(context.Background(), TopicSpec{Name: "after-expiry", NumPartitions: 2, ReplicationFactor: 2,
		Configs: map[string]string{"retention.ms": "1000"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() error {
		if cfg, ok := s1.TopicConfig("after-expiry"); !ok || cfg["retention.ms"] != "1000" {
			return fmt.Errorf("broker 1 sees config %v %v", cfg, ok)
		}
		if bs := s1.Brokers(); len(bs) != 2 || bs[0].Epoch != s1.BrokerEpoch() {
			return fmt.Errorf("broker 1 sees brokers %+v", bs)
		}
		return nil
	})
}

// TestZKCreateTopic: CreateTopic writes the config and the assignment; the
// controller then writes each partition's state and sends LeaderAndIsr
// (IsNew) to its replicas.
func TestZKCreateTopic(t *testing.T) {
	srv := zktest.Start(t)
	sender := &fakeSender{}
	s1 := startBrokerWith(t, srv.Connect(), 1, sender)
	startBrokerWith(t, srv.Connect(), 2, sender)
	startBrokerWith(t, srv.Connect(), 3, sender)
	eventually(t, 10*time.Second, func() error {
		if n := len(s1.Brokers()); n != 3 {
			return fmt.Errorf("%d brokers", n)
		}
		if s1.ControllerID() < 0 {
			return errors.New("no controller")
		}
		return nil
	})
	epoch := s1.ControllerEpoch()
	ctx := context.Background()
	changes := s1.Changes()
	for len(changes) > 0 {
		<-changes
	}
	cfgs := map[string]string{"min.insync.replicas": "2", "retention.ms": "60000"}
	if err := s1.CreateTopic(ctx, TopicSpec{Name: "orders", NumPartitions: 4, ReplicationFactor: 3, Configs: cfgs}); err != nil {
		t.Fatal(err)
	}
	raw := rawConn(t, srv.Connect())
	data, _ := mustGet(t, raw, topicPath("orders"))
	assignment, err := decodeTopicAssignment("orders", data)
	if err != nil || len(assignment) != 4 {
		t.Fatalf("assignment %s: %v", data, err)
	}
	if string(data) != string(encodeTopicAssignment(assignment)) {
		t.Fatalf("topic znode %s", data)
	}
	for p, replicas := range assignment {
		if len(replicas) != 3 {
			t.Fatalf("partition %d replicas %v", p, replicas)
		}
		data, st := mustGet(t, raw, partitionStatePath("orders", p))
		want := fmt.Sprintf(`{"controller_epoch":%d,"leader":%d,"version":1,"leader_epoch":0,"isr":[%d,%d,%d]}`,
			epoch, replicas[0], replicas[0], replicas[1], replicas[2])
		if string(data) != want || st.Version != 0 {
			t.Fatalf("state %d = %s, want %s", p, data, want)
		}
		for _, r := range replicas {
			eventually(t, 10*time.Second, func() error {
				return sender.findLAI(r, epoch, cluster.TopicPartition{Topic: "orders", Partition: p}, func(pa cluster.PartitionAssignment) bool {
					return pa.IsNew && pa.LeaderAndIsr.Leader == replicas[0]
				})
			})
		}
	}
	if data, _ := mustGet(t, raw, configTopicPath("orders")); string(data) != `{"version":1,"config":{"min.insync.replicas":"2","retention.ms":"60000"}}` {
		t.Fatalf("config %s", data)
	}
	kids, _, err := raw.Children(configChangesPath)
	if err != nil || len(kids) != 1 || !strings.HasPrefix(kids[0], "config_change_") {
		t.Fatalf("config changes %v %v", kids, err)
	}
	data, _ = mustGet(t, raw, configChangesPath+"/"+kids[0])
	if string(data) != `{"version":2,"entity_path":"topics/orders"}` {
		t.Fatalf("config change %s", data)
	}

	select {
	case <-changes:
	case <-time.After(10 * time.Second):
		t.Fatal("no Changes notification")
	}
	eventually(t, 10*time.Second, func() error {
		if cfg, ok := s1.TopicConfig("orders"); !ok || cfg["min.insync.replicas"] != "2" || cfg["retention.ms"] != "60000" {
			return fmt.Errorf("TopicConfig %v %v", cfg, ok)
		}
		return nil
	})

	// Explicit assignment naming a broker that then goes offline.
	if err := s1.CreateTopic(ctx, TopicSpec{Name: "manual", NumPartitions: -1, ReplicationFactor: -1,
		Assignment: map[int32][]int32{0: {3, 1}, 1: {2, 3}}}); err != nil {
		t.Fatal(err)
	}
	if data, _ := mustGet(t, raw, topicPath("manual")); string(data) != `{"version":2,"partitions":{"0":[3,1],"1":[2,3]},"adding_replicas":{},"removing_replicas":{}}` {
		t.Fatalf("manual topic %s", data)
	}
	if data, _ := mustGet(t, raw, partitionStatePath("manual", 0)); string(data) != fmt.Sprintf(`{"controller_epoch":%d,"leader":3,"version":1,"leader_epoch":0,"isr":[3,1]}`, epoch) {
		t.Fatalf("manual state %s", data)
	}

	errCases := []struct {
		name string
		spec TopicSpec
		want error
	}{
		{"empty name", TopicSpec{Name: "", NumPartitions: 1, ReplicationFactor: 1}, cluster.ErrInvalidTopic},
		{"dot", TopicSpec{Name: ".", NumPartitions: 1, ReplicationFactor: 1}, cluster.ErrInvalidTopic},
		{"slash", TopicSpec{Name: "a/b", NumPartitions: 1, ReplicationFactor: 1}, cluster.ErrInvalidTopic},
		{"too long", TopicSpec{Name: string(make([]byte, 250)), NumPartitions: 1, ReplicationFactor: 1}, cluster.ErrInvalidTopic},
		{"exists", TopicSpec{Name: "orders", NumPartitions: 1, ReplicationFactor: 1}, cluster.ErrTopicExists},
		{"zero partitions", TopicSpec{Name: "z", NumPartitions: 0, ReplicationFactor: 1}, cluster.ErrInvalidPartitions},
		{"zero rf", TopicSpec{Name: "z", NumPartitions: 1, ReplicationFactor: 0}, cluster.ErrInvalidReplicationFactor},
		{"rf above brokers", TopicSpec{Name: "z", NumPartitions: 1, ReplicationFactor: 4}, cluster.ErrInvalidReplicationFactor},
		{"unknown broker", TopicSpec{Name: "z", Assignment: map[int32][]int32{0: {1, 9}}}, cluster.ErrInvalidReplicaAssignment},
		{"uneven", TopicSpec{Name: "z", Assignment: map[int32][]int32{0: {1, 2}, 1: {1}}}, cluster.ErrInvalidReplicaAssignment},
		{"assignment and count", TopicSpec{Name: "z", NumPartitions: 3, Assignment: map[int32][]int32{0: {1}}}, cluster.ErrInvalidReplicaAssignment},
		{"unknown config", TopicSpec{Name: "z", NumPartitions: 1, ReplicationFactor: 1, Configs: map[string]string{"nope": "1"}}, cluster.ErrInvalidConfig},
		{"bad config value", TopicSpec{Name: "z", NumPartitions: 1, ReplicationFactor: 1, Configs: map[string]string{"min.insync.replicas": "0"}}, cluster.ErrInvalidConfig},
		// ZkAdminManager checks the metadata for the topic before its config.
		{"exists, bad config", TopicSpec{Name: "orders", NumPartitions: 1, ReplicationFactor: 1, Configs: map[string]string{"nope": "1"}}, cluster.ErrTopicExists},
	}
	for _, c := range errCases {
		t.Run(c.name, func(t *testing.T) {
			if err := s1.CreateTopic(ctx, c.spec); !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
	if err := s1.CreateTopic(ctx, TopicSpec{Name: "orders.x", NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	if err := s1.CreateTopic(ctx, TopicSpec{Name: "orders_x", NumPartitions: 1, ReplicationFactor: 1}); !errors.Is(err, cluster.ErrInvalidTopic) {
		t.Fatalf("colliding name: %v", err)
	}
	if err := s1.CreateTopic(ctx, TopicSpec{Name: "dry", NumPartitions: 1, ReplicationFactor: 1, ValidateOnly: true}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{topicPath("dry"), configTopicPath("dry")} {
		if ok, _, _ := raw.Exists(p); ok {
			t.Fatalf("ValidateOnly wrote %s", p)
		}
	}
}

// TestZKDeleteTopic: the controller sends StopReplica(delete) to the
// replicas, deletes the znodes and the request, then tells every broker
// to drop the partitions (UpdateMetadata with leader -2).
func TestZKDeleteTopic(t *testing.T) {
	srv := zktest.Start(t)
	sender := &fakeSender{}
	s1 := startBrokerWith(t, srv.Connect(), 1, sender)
	s2 := startBrokerWith(t, srv.Connect(), 2, sender)
	eventually(t, 10*time.Second, func() error {
		if len(s2.Brokers()) != 2 || s2.ControllerID() < 0 {
			return errors.New("cluster not up")
		}
		return nil
	})
	ctx := context.Background()
	if err := s2.DeleteTopic(ctx, "missing"); !errors.Is(err, cluster.ErrUnknownTopic) {
		t.Fatalf("delete unknown: %v", err)
	}
	if err := s2.CreateTopic(ctx, TopicSpec{Name: "doomed", NumPartitions: 3, ReplicationFactor: 2,
		Configs: map[string]string{"retention.ms": "1000"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() error {
		if _, ok := s1.TopicConfig("doomed"); !ok {
			return errors.New("not in the cache")
		}
		return nil
	})
	if err := s2.DeleteTopic(ctx, "doomed"); err != nil {
		t.Fatal(err)
	}
	raw := rawConn(t, srv.Connect())
	eventually(t, 10*time.Second, func() error {
		for _, p := range []string{topicPath("doomed"), configTopicPath("doomed"), deleteTopicsPath("doomed")} {
			if ok, _, err := raw.Exists(p); err != nil || ok {
				return fmt.Errorf("%s still exists (%v)", p, err)
			}
		}
		for _, s := range []*Session{s1, s2} {
			if _, ok := s.TopicConfig("doomed"); ok {
				return errors.New("still in a cache")
			}
		}
		return nil
	})
	eventually(t, 10*time.Second, func() error {
		for _, id := range []int32{1, 2} {
			if err := sender.findUM(id, 0, cluster.TopicPartition{Topic: "doomed", Partition: 2},
				func(pi cluster.TopicPartitionInfo, _ cluster.UpdateMetadataRequest) bool {
					return pi.State.Leader == LeaderDuringDelete
				}); err != nil {
				return err
			}
			sender.mu.Lock()
			n := 0
			for _, s := range sender.stop {
				if s.to.ID == id && s.req.DeletePartitions {
					n += len(s.req.Partitions)
				}
			}
			sender.mu.Unlock()
			if n != 3 { // 3 partitions x RF 2 over 2 brokers: each hosts all 3
				return fmt.Errorf("broker %d got StopReplica(delete) for %d partitions", id, n)
			}
		}
		return nil
	})
	// The name is free again.
	if err := s1.CreateTopic(ctx, TopicSpec{Name: "doomed", NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() error {
		cfg, ok := s2.TopicConfig("doomed")
		if !ok || len(cfg) != 0 {
			return fmt.Errorf("recreated topic: config %v %v", cfg, ok)
		}
		if st, err := stateOf(raw, "doomed", 0); err != nil || st.Leader < 0 {
			return fmt.Errorf("recreated topic: state %+v %v", st, err)
		}
		return nil
	})
}

func TestZKProducerIDBlocksNeverOverlap(t *testing.T) {
	srv := zktest.Start(t)
	s1 := connect(t, testConfig(t, srv.Connect(), 1))
	s2 := connect(t, testConfig(t, srv.Connect(), 2))
	const perManager = 2500
	var mu sync.Mutex
	seen := make(map[int64]int32)
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	for _, s := range []*Session{s1, s2, s1, s2} {
		m := s.ProducerIDs()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perManager; i++ {
				id, epoch, err := m.InitProducerID(context.Background())
				if err != nil || epoch != 0 {
					errc <- fmt.Errorf("InitProducerID: %d %v", epoch, err)
					return
				}
				mu.Lock()
				if other, dup := seen[id]; dup {
					mu.Unlock()
					errc <- fmt.Errorf("producer id %d handed out twice (broker %d and %d)", id, other, s.cfg.BrokerID)
					return
				}
				seen[id] = s.cfg.BrokerID
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	raw := rawConn(t, srv.Connect())
	data, _ := mustGet(t, raw, latestProducerIDBlockPath)
	start, end, err := decodeProducerIDBlock(data)
	// 4 managers x 3 blocks each = 12 blocks: the last is [11000, 11999].
	if err != nil || start != 11000 || end != 11999 {
		t.Fatalf("last block %s: %v", data, err)
	}
}
