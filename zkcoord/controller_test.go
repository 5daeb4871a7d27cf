package zkcoord

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/internal/zktest"
	"github.com/kafkazk/broker/partition"
)

// Controller tests against a real ZooKeeper. Every broker of a test shares
// one fakeSender, so the requests of whichever broker is the controller
// are recorded per destination; the state znodes are read back with a raw
// client and compared byte for byte with Kafka's JSON.

type sentLAI struct {
	to  cluster.Broker
	req cluster.LeaderAndIsrRequest
}

type sentUM struct {
	to  cluster.Broker
	req cluster.UpdateMetadataRequest
}

type sentStop struct {
	to  cluster.Broker
	req cluster.StopReplicaRequest
}

// fakeSender records every request; it always succeeds.
type fakeSender struct {
	mu   sync.Mutex
	lai  []sentLAI
	um   []sentUM
	stop []sentStop
}

func (f *fakeSender) LeaderAndIsr(_ context.Context, to cluster.Broker, req cluster.LeaderAndIsrRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lai = append(f.lai, sentLAI{to, req})
	return nil
}

func (f *fakeSender) UpdateMetadata(_ context.Context, to cluster.Broker, req cluster.UpdateMetadataRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.um = append(f.um, sentUM{to, req})
	return nil
}

func (f *fakeSender) StopReplica(_ context.Context, to cluster.Broker, req cluster.StopReplicaRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stop = append(f.stop, sentStop{to, req})
	return nil
}

// findLAI returns an error unless broker to got a LeaderAndIsr (from
// controller epoch ctrlEpoch or later) whose entry for tp satisfies ok.
func (f *fakeSender) findLAI(to int32, ctrlEpoch int32, tp cluster.TopicPartition, ok func(cluster.PartitionAssignment) bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.lai {
		if s.to.ID != to || s.req.ControllerEpoch < ctrlEpoch || s.req.BrokerEpoch != s.to.Epoch {
			continue
		}
		for _, pa := range s.req.Partitions {
			if pa.TopicPartition == tp && ok(pa) {
				return nil
			}
		}
	}
	return fmt.Errorf("no matching LeaderAndIsr for %s to broker %d", tp, to)
}

// findUM is findLAI for UpdateMetadata; tp's zero value matches any
// request (for the live-broker list alone).
func (f *fakeSender) findUM(to int32, ctrlEpoch int32, tp cluster.TopicPartition, ok func(cluster.TopicPartitionInfo, cluster.UpdateMetadataRequest) bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.um {
		if s.to.ID != to || s.req.ControllerEpoch < ctrlEpoch {
			continue
		}
		for _, pi := range s.req.Partitions {
			if pi.Topic == tp.Topic && pi.Partition == tp.Partition && ok(pi, s.req) {
				return nil
			}
		}
	}
	return fmt.Errorf("no matching UpdateMetadata for %s to broker %d", tp, to)
}

type ctrlCluster struct {
	t       *testing.T
	srv     *zktest.Server
	sender  *fakeSender
	raw     *zkConn
	brokers map[int32]*Session
	mutate  func(*Config)
}

func newCtrlCluster(t *testing.T, mutate func(*Config), ids ...int32) *ctrlCluster {
	cc := &ctrlCluster{t: t, srv: zktest.Start(t), sender: &fakeSender{}, brokers: map[int32]*Session{}, mutate: mutate}
	cc.raw = rawConn(t, cc.srv.Connect())
	for _, id := range ids {
		cc.start(id)
	}
	cc.waitBrokers(ids...)
	return cc
}

// start connects and registers broker id (again, after a stop).
func (cc *ctrlCluster) start(id int32) *Session {
	cc.t.Helper()
	cfg := testConfig(cc.t, cc.srv.Connect(), id)
	cfg.Sender = cc.sender
	if cc.mutate != nil {
		cc.mutate(&cfg)
	}
	s := connect(cc.t, cfg)
	if err := s.Register(context.Background()); err != nil {
		cc.t.Fatalf("Register %d: %v", id, err)
	}
	cc.brokers[id] = s
	return s
}

// stop closes broker id's session, which deletes its ephemerals at once.
func (cc *ctrlCluster) stop(id int32) {
	cc.brokers[id].Close()
	delete(cc.brokers, id)
}

// waitBrokers waits until some broker is controller and sees exactly ids.
func (cc *ctrlCluster) waitBrokers(ids ...int32) {
	cc.t.Helper()
	eventually(cc.t, 15*time.Second, func() error {
		c := cc.controller()
		if c == nil {
			return errors.New("no controller")
		}
		var got []int32
		for _, b := range c.Brokers() {
			got = append(got, b.ID)
		}
		if !slices.Equal(got, ids) {
			return fmt.Errorf("controller sees brokers %v, want %v", got, ids)
		}
		return nil
	})
}

func (cc *ctrlCluster) controller() *Session {
	for _, s := range cc.brokers {
		if s.IsController() {
			return s
		}
	}
	return nil
}

// others returns the running brokers other than the controller, sorted.
func (cc *ctrlCluster) others() []int32 {
	var ids []int32
	for id, s := range cc.brokers {
		if !s.IsController() {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// state reads a partition state znode raw: its bytes and decoded value.
func (cc *ctrlCluster) state(topic string, p int32) (string, cluster.LeaderAndIsr, error) {
	data, st, err := cc.raw.Get(partitionStatePath(topic, p))
	if err != nil {
		return "", cluster.LeaderAndIsr{}, err
	}
	v, err := decodePartitionState(data, st.Version)
	return string(data), v, err
}

// waitState waits until the state znode's bytes are exactly want.
func (cc *ctrlCluster) waitState(topic string, p int32, want string) cluster.LeaderAndIsr {
	cc.t.Helper()
	var got cluster.LeaderAndIsr
	eventually(cc.t, 15*time.Second, func() error {
		data, st, err := cc.state(topic, p)
		if err != nil {
			return err
		}
		if data != want {
			return fmt.Errorf("%s-%d state %s, want %s", topic, p, data, want)
		}
		got = st
		return nil
	})
	return got
}

func stateJSON(ctrlEpoch, leader, leaderEpoch int32, isr ...int32) string {
	return string(encodePartitionState(cluster.LeaderAndIsr{ControllerEpoch: ctrlEpoch, Leader: leader, LeaderEpoch: leaderEpoch, Isr: isr}))
}

func tpOf(topic string, p int32) cluster.TopicPartition {
	return cluster.TopicPartition{Topic: topic, Partition: p}
}

func (cc *ctrlCluster) create(spec TopicSpec) {
	cc.t.Helper()
	// The controller's cache has every broker (waitBrokers).
	if err := cc.controller().CreateTopic(context.Background(), spec); err != nil {
		cc.t.Fatalf("CreateTopic %s: %v", spec.Name, err)
	}
}

// TestZKControllerNewTopicBrokerFailureAndReturn: the controller (not
// CreateTopic) writes new partition states and tells the brokers; a dead
// broker's partitions get the next ISR member as leader with leader_epoch
// + 1 and it leaves every ISR; when it registers again it gets the
// metadata and LeaderAndIsr for its partitions.
func TestZKControllerNewTopicBrokerFailureAndReturn(t *testing.T) {
	cc := newCtrlCluster(t, nil, 1, 2, 3)
	ctrl := cc.controller()
	epoch := ctrl.ControllerEpoch()
	o := cc.others()
	v, a, c := o[0], o[1], ctrl.cfg.BrokerID // v will die
	cc.create(TopicSpec{Name: "orders", Assignment: map[int32][]int32{0: {v, a, c}, 1: {a, v, c}, 2: {c, a, v}}})

	cc.waitState("orders", 0, stateJSON(epoch, v, 0, v, a, c))
	cc.waitState("orders", 1, stateJSON(epoch, a, 0, a, v, c))
	cc.waitState("orders", 2, stateJSON(epoch, c, 0, c, a, v))
	for _, id := range []int32{v, a, c} {
		eventually(t, 10*time.Second, func() error {
			if err := cc.sender.findLAI(id, epoch, tpOf("orders", 0), func(pa cluster.PartitionAssignment) bool {
				return pa.IsNew && pa.LeaderAndIsr.Leader == v && pa.LeaderAndIsr.ZkVersion == 0 && slices.Equal(pa.Replicas, []int32{v, a, c})
			}); err != nil {
				return err
			}
			return cc.sender.findUM(id, epoch, tpOf("orders", 2), func(pi cluster.TopicPartitionInfo, req cluster.UpdateMetadataRequest) bool {
				return pi.State.Leader == c && len(req.LiveBrokers) == 3
			})
		})
	}

	cc.stop(v)
	st0 := cc.waitState("orders", 0, stateJSON(epoch, a, 1, a, c))
	cc.waitState("orders", 1, stateJSON(epoch, a, 1, a, c))
	cc.waitState("orders", 2, stateJSON(epoch, c, 1, c, a))
	eventually(t, 10*time.Second, func() error {
		if err := cc.sender.findLAI(a, epoch, tpOf("orders", 0), func(pa cluster.PartitionAssignment) bool {
			return pa.LeaderAndIsr.Leader == a && pa.LeaderAndIsr.LeaderEpoch == 1 && pa.LeaderAndIsr.ZkVersion == st0.ZkVersion
		}); err != nil {
			return err
		}
		return cc.sender.findUM(c, epoch, tpOf("orders", 0), func(pi cluster.TopicPartitionInfo, req cluster.UpdateMetadataRequest) bool {
			return pi.State.Leader == a && slices.Equal(pi.Offline, []int32{v}) && len(req.LiveBrokers) == 2
		})
	})

	back := cc.start(v)
	eventually(t, 10*time.Second, func() error {
		// The returning broker learns everything, then follows.
		if err := cc.sender.findUM(v, epoch, tpOf("orders", 1), func(pi cluster.TopicPartitionInfo, req cluster.UpdateMetadataRequest) bool {
			return len(req.LiveBrokers) == 3 && req.BrokerEpoch == back.BrokerEpoch()
		}); err != nil {
			return err
		}
		return cc.sender.findLAI(v, epoch, tpOf("orders", 0), func(pa cluster.PartitionAssignment) bool {
			return pa.LeaderAndIsr.Leader == a && pa.LeaderAndIsr.LeaderEpoch == 1
		})
	})
	// The controller never adds it back to the ISR; its leader does.
	if data, _, _ := cc.state("orders", 0); data != stateJSON(epoch, a, 1, a, c) {
		t.Fatalf("state after return %s", data)
	}
}

// TestZKControllerOfflineUncleanAndIsrWrites covers the leader-side
// conditional write, ISR change notifications, a partition going offline
// when its only ISR member dies (clean), an unclean election through the
// topic override, and an ISR member coming back to revive the offline one.
func TestZKControllerOfflineUncleanAndIsrWrites(t *testing.T) {
	cc := newCtrlCluster(t, nil, 1, 2)
	ctrl := cc.controller()
	epoch := ctrl.ControllerEpoch()
	c, o := ctrl.cfg.BrokerID, cc.others()[0]
	leader := cc.brokers[o]
	cc.create(TopicSpec{Name: "clean", Assignment: map[int32][]int32{0: {o, c}}})
	cc.create(TopicSpec{Name: "dirty", Assignment: map[int32][]int32{0: {o, c}},
		Configs: map[string]string{"unclean.leader.election.enable": "true"}})
	cc.waitState("clean", 0, stateJSON(epoch, o, 0, o, c))
	cc.waitState("dirty", 0, stateJSON(epoch, o, 0, o, c))

	// The leader shrinks both ISRs to itself.
	ctx := context.Background()
	shrunk := cluster.LeaderAndIsr{Leader: o, LeaderEpoch: 0, Isr: []int32{o}, ControllerEpoch: epoch, ZkVersion: 0}
	for _, topic := range []string{"clean", "dirty"} {
		v, err := leader.WriteLeaderAndIsr(ctx, tpOf(topic, 0), shrunk)
		if err != nil || v != 1 {
			t.Fatalf("%s: WriteLeaderAndIsr = %d, %v; want 1", topic, v, err)
		}
	}
	// A retry of a write that landed (BADVERSION, same content) succeeds.
	if v, err := leader.WriteLeaderAndIsr(ctx, tpOf("clean", 0), shrunk); err != nil || v != 1 {
		t.Fatalf("retried write = %d, %v; want 1, nil", v, err)
	}
	// A write from a stale version with other content conflicts.
	stale := shrunk
	stale.Isr = []int32{o, c}
	if _, err := leader.WriteLeaderAndIsr(ctx, tpOf("clean", 0), stale); !errors.Is(err, partition.ErrStateConflict) {
		t.Fatalf("stale write: %v, want ErrStateConflict", err)
	} else {
		t.Logf("as expected: %v", err)
	}
	if _, err := leader.WriteLeaderAndIsr(ctx, tpOf("missing", 0), shrunk); !errors.Is(err, partition.ErrStateConflict) {
		t.Fatalf("write to a missing partition: %v, want ErrStateConflict", err)
	}
	if data, _, _ := cc.state("clean", 0); data != stateJSON(epoch, o, 0, o) {
		t.Fatalf("state after leader writes: %s", data)
	}

	// The ISR change reaches every broker's metadata through the controller.
	leader.NotifyIsrChange(tpOf("clean", 0))
	leader.NotifyIsrChange(tpOf("dirty", 0))
	eventually(t, 10*time.Second, func() error {
		for _, id := range []int32{c, o} {
			for _, topic := range []string{"clean", "dirty"} {
				if err := cc.sender.findUM(id, epoch, tpOf(topic, 0), func(pi cluster.TopicPartitionInfo, _ cluster.UpdateMetadataRequest) bool {
					return slices.Equal(pi.State.Isr, []int32{o}) && pi.State.ZkVersion == 1
				}); err != nil {
					return err
				}
			}
		}
		kids, _, err := cc.raw.Children(isrChangeNotificationPath)
		if err != nil || len(kids) != 0 {
			return fmt.Errorf("notifications left: %v %v", kids, err)
		}
		return nil
	})

	// The only ISR member dies.
	cc.stop(o)
	cc.waitState("clean", 0, stateJSON(epoch, -1, 1, o)) // offline, ISR kept
	cc.waitState("dirty", 0, stateJSON(epoch, c, 1, c))  // unclean: out-of-ISR replica leads

	// It returns and leads the offline partition again, cleanly.
	cc.start(o)
	cc.waitState("clean", 0, stateJSON(epoch, o, 2, o))
	if data, _, _ := cc.state("dirty", 0); data != stateJSON(epoch, c, 1, c) {
		t.Fatalf("dirty after return: %s", data)
	}
	eventually(t, 10*time.Second, func() error {
		return cc.sender.findLAI(o, epoch, tpOf("clean", 0), func(pa cluster.PartitionAssignment) bool {
			return pa.LeaderAndIsr.Leader == o && pa.LeaderAndIsr.LeaderEpoch == 2
		})
	})
}

// TestZKControllerFailover closes the controller's session: another broker
// takes over with a higher epoch, re-sends metadata and LeaderAndIsr to the
// live brokers and elects for the partitions the old controller led.
func TestZKControllerFailover(t *testing.T) {
	cc := newCtrlCluster(t, nil, 1, 2, 3)
	old := cc.controller()
	epoch := old.ControllerEpoch()
	dead := old.cfg.BrokerID
	o := cc.others()
	cc.create(TopicSpec{Name: "t", Assignment: map[int32][]int32{0: {dead, o[0], o[1]}, 1: {o[0], o[1], dead}}})
	cc.waitState("t", 0, stateJSON(epoch, dead, 0, dead, o[0], o[1]))
	cc.waitState("t", 1, stateJSON(epoch, o[0], 0, o[0], o[1], dead))

	cc.stop(dead)
	var next *Session
	eventually(t, 15*time.Second, func() error {
		if next = cc.controller(); next == nil {
			return errors.New("no new controller")
		}
		return nil
	})
	newEpoch := next.ControllerEpoch()
	if newEpoch <= epoch {
		t.Fatalf("new controller epoch %d, old %d", newEpoch, epoch)
	}
	cc.waitState("t", 0, stateJSON(newEpoch, o[0], 1, o[0], o[1]))
	cc.waitState("t", 1, stateJSON(newEpoch, o[0], 1, o[0], o[1]))
	for _, id := range o {
		eventually(t, 10*time.Second, func() error {
			if err := cc.sender.findUM(id, newEpoch, tpOf("t", 1), func(_ cluster.TopicPartitionInfo, req cluster.UpdateMetadataRequest) bool {
				return req.ControllerID == next.cfg.BrokerID
			}); err != nil {
				return err
			}
			return cc.sender.findLAI(id, newEpoch, tpOf("t", 0), func(pa cluster.PartitionAssignment) bool {
				return pa.LeaderAndIsr.Leader == o[0] && pa.LeaderAndIsr.LeaderEpoch == 1
			})
		})
	}
}

// TestZKControllerZombieFenced bumps /controller_epoch behind the
// controller's back: its next write (a new topic's state) fails the epoch
// check, so it resigns; a new election follows and the state is written
// under the new epoch only.
func TestZKControllerZombieFenced(t *testing.T) {
	var mu sync.Mutex
	resigned := map[int32]bool{}
	cc := newCtrlCluster(t, func(cfg *Config) {
		id := cfg.BrokerID
		cfg.OnControllerChange = func(is bool, _ int32) {
			if !is {
				mu.Lock()
				resigned[id] = true
				mu.Unlock()
			}
		}
	}, 1, 2)
	zombie := cc.controller()
	epoch := zombie.ControllerEpoch()
	data, st := mustGet(t, cc.raw, controllerEpochPath)
	bumped := epoch + 5
	if string(data) != fmt.Sprint(epoch) {
		t.Fatalf("/controller_epoch %s, controller says %d", data, epoch)
	}
	if _, err := cc.raw.Set(controllerEpochPath, encodeControllerEpoch(bumped), st.Version); err != nil {
		t.Fatal(err)
	}
	cc.create(TopicSpec{Name: "z", Assignment: map[int32][]int32{0: {1, 2}}})
	eventually(t, 15*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if !resigned[zombie.cfg.BrokerID] {
			return errors.New("zombie did not resign")
		}
		return nil
	})
	// Whoever wins next has epoch bumped+1 and writes the state.
	cc.waitState("z", 0, stateJSON(bumped+1, 1, 0, 1, 2))
	eventually(t, 10*time.Second, func() error {
		c := cc.controller()
		if c == nil || c.ControllerEpoch() != bumped+1 {
			return fmt.Errorf("controller %v", c)
		}
		return nil
	})
}

// TestZKControlledShutdown moves leadership off a stopping broker, takes
// it out of the ISRs it follows in, and returns what it still leads.
func TestZKControlledShutdown(t *testing.T) {
	cc := newCtrlCluster(t, nil, 1, 2, 3)
	ctrl := cc.controller()
	epoch := ctrl.ControllerEpoch()
	o := cc.others()
	a, b, c := o[0], o[1], ctrl.cfg.BrokerID // a shuts down
	cc.create(TopicSpec{Name: "cs", Assignment: map[int32][]int32{0: {a, b, c}, 1: {b, a, c}, 2: {a, c, b}}})
	cc.create(TopicSpec{Name: "single", Assignment: map[int32][]int32{0: {a}}})
	cc.waitState("cs", 0, stateJSON(epoch, a, 0, a, b, c))
	cc.waitState("cs", 1, stateJSON(epoch, b, 0, b, a, c))
	cc.waitState("cs", 2, stateJSON(epoch, a, 0, a, c, b))
	cc.waitState("single", 0, stateJSON(epoch, a, 0, a))
	// Partition 2's leader a is alone in its ISR: it cannot move.
	if _, err := cc.brokers[a].WriteLeaderAndIsr(context.Background(), tpOf("cs", 2),
		cluster.LeaderAndIsr{Leader: a, Isr: []int32{a}, ControllerEpoch: epoch, ZkVersion: 0}); err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	aEpoch := cc.brokers[a].BrokerEpoch()
	if _, err := cc.brokers[b].ControlledShutdown(ctx, a, aEpoch); !errors.Is(err, cluster.ErrNotController) {
		t.Fatalf("on a non-controller: %v", err)
	}
	if _, err := ctrl.ControlledShutdown(ctx, a, aEpoch-1); !errors.Is(err, cluster.ErrStaleBrokerEpoch) {
		t.Fatalf("stale broker epoch: %v", err)
	}
	remaining, err := ctrl.ControlledShutdown(ctx, a, aEpoch)
	if err != nil {
		t.Fatal(err)
	}
	if want := []cluster.TopicPartition{tpOf("cs", 2)}; !slices.Equal(remaining, want) {
		t.Fatalf("remaining %v, want %v", remaining, want)
	}
	cc.waitState("cs", 0, stateJSON(epoch, b, 1, b, c))
	cc.waitState("cs", 1, stateJSON(epoch, b, 1, b, c))
	cc.waitState("cs", 2, stateJSON(epoch, a, 0, a))
	eventually(t, 10*time.Second, func() error {
		cc.sender.mu.Lock()
		defer cc.sender.mu.Unlock()
		for _, s := range cc.sender.stop {
			if s.to.ID == a && !s.req.DeletePartitions && slices.Equal(s.req.Partitions, []cluster.TopicPartition{tpOf("cs", 1)}) {
				return nil
			}
		}
		return errors.New("no StopReplica(delete=false) for cs-1 to the stopping broker")
	})
	if err := cc.sender.findLAI(a, epoch, tpOf("cs", 0), func(pa cluster.PartitionAssignment) bool {
		return pa.LeaderAndIsr.Leader == b && pa.LeaderAndIsr.LeaderEpoch == 1
	}); err != nil {
		t.Fatal(err)
	}
	// Asking again is harmless and gives the same answer.
	if again, err := ctrl.ControlledShutdown(ctx, a, aEpoch); err != nil || !slices.Equal(again, remaining) {
		t.Fatalf("second ControlledShutdown: %v %v", again, err)
	}
}

// TestZKAutoLeaderRebalance: after its preferred leader came back and
// rejoined the ISR, a partition's leadership moves back to it.
func TestZKAutoLeaderRebalance(t *testing.T) {
	cc := newCtrlCluster(t, func(cfg *Config) {
		cfg.AutoLeaderRebalance = true
		cfg.LeaderImbalanceCheckInterval = 300 * time.Millisecond
	}, 1, 2)
	ctrl := cc.controller()
	epoch := ctrl.ControllerEpoch()
	c, o := ctrl.cfg.BrokerID, cc.others()[0]
	cc.create(TopicSpec{Name: "r", Assignment: map[int32][]int32{0: {o, c}}})
	cc.waitState("r", 0, stateJSON(epoch, o, 0, o, c))
	cc.stop(o)
	st := cc.waitState("r", 0, stateJSON(epoch, c, 1, c))
	cc.start(o)
	cc.waitBrokers(1, 2)
	// Broker o is back but out of the ISR: no rebalance yet.
	time.Sleep(time.Second)
	if data, _, _ := cc.state("r", 0); data != stateJSON(epoch, c, 1, c) {
		t.Fatalf("moved before the preferred replica rejoined the ISR: %s", data)
	}
	// The leader adds it back and notifies the controller.
	st.Isr = []int32{c, o}
	if _, err := ctrl.WriteLeaderAndIsr(context.Background(), tpOf("r", 0), st); err != nil {
		t.Fatal(err)
	}
	ctrl.NotifyIsrChange(tpOf("r", 0))
	cc.waitState("r", 0, stateJSON(epoch, o, 2, c, o))
	eventually(t, 10*time.Second, func() error {
		return cc.sender.findLAI(o, epoch, tpOf("r", 0), func(pa cluster.PartitionAssignment) bool {
			return pa.LeaderAndIsr.Leader == o && pa.LeaderAndIsr.LeaderEpoch == 2
		})
	})
}
