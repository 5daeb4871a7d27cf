package zkcoord

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
)

// TestControllerOneRequestPerBroker: at 3,000 partitions (RF 3 on three
// brokers), creating them, a controlled shutdown and a broker failure
// each send exactly one LeaderAndIsr and one UpdateMetadata to each live
// broker that needs one (ControllerChannelManager's batch), and pipeline
// their ZooKeeper calls in a handful of round trips.
func TestControllerOneRequestPerBroker(t *testing.T) {
	const n = 3000
	h := newScaleCluster(t, memBackend{newMemStore()})
	h.elect(2)
	h.settle()
	h.addTopics(n, 100)
	one := func(event string, kind string, to []int32, parts int) {
		t.Helper()
		h.sender.mu.Lock()
		defer h.sender.mu.Unlock()
		got := h.sender.reqs[kind]
		want := map[int32]int{}
		for _, id := range to {
			want[id] = 1
		}
		if !maps.Equal(got, want) {
			t.Errorf("%s: %s requests per broker %v, want one to each of %v", event, kind, got, to)
		}
		if parts >= 0 && h.sender.parts[kind] != parts {
			t.Errorf("%s: %s carried %d partitions, want %d", event, kind, h.sender.parts[kind], parts)
		}
	}
	rounds := func(event string, e event, max int) {
		t.Helper()
		if e.rounds > max {
			t.Errorf("%s: %d ZooKeeper round trips (%d calls), want at most %d", event, e.rounds, e.calls, max)
		}
	}
	e := h.measure(func() { h.ctrl.step(h.be.events(pendingEvents{topicList: true})) })
	one("create", "LeaderAndIsr", []int32{1, 2, 3}, 3*n)
	one("create", "UpdateMetadata", []int32{1, 2, 3}, 3*n)
	// /brokers/topics, the assignments, the topics' partitions znodes, the
	// partitions with their states, and (memStore posts the new topics'
	// config znodes as config changes) their configs.
	rounds("create", e, 5+1)

	led := h.leaders()[3]
	e = h.measure(func() {
		if _, err := h.ctrl.controlledShutdown(3, h.ctrl.alive[3].Epoch); err != nil {
			t.Fatal(err)
		}
	})
	one("controlled shutdown", "LeaderAndIsr", []int32{1, 2, 3}, 3*n)
	one("controlled shutdown", "UpdateMetadata", []int32{1, 2, 3}, 3*n)
	one("controlled shutdown", "StopReplica", []int32{3}, n-led)
	rounds("controlled shutdown", e, 1) // the writes, decided on the cached states

	h.be.remove(brokerPath(3))
	h.ctrl.step(h.be.events(pendingEvents{brokers: true}))
	h.settle()
	// Broker 1 dies: every partition loses an ISR member, and those it
	// led (about half) get a new leader.
	e = h.measure(func() {
		h.be.remove(brokerPath(1))
		h.ctrl.step(h.be.events(pendingEvents{brokers: true}))
	})
	one("broker failure", "LeaderAndIsr", []int32{2}, n)
	one("broker failure", "UpdateMetadata", []int32{2}, n)
	// /brokers/ids and the registrations, the topics'
	// unclean.leader.election.enable, the writes (decided on the cached
	// states).
	rounds("broker failure", e, 4)
	if l := h.leaders(); l[2] != n {
		t.Fatalf("leaders after broker 1 died: %v, want all %d on broker 2", l, n)
	}
}

// batchHarness is brokers 1 2 3 4 with controller 4 and topic t of eight
// partitions on 1 2 3, broker 1 leading t/0, t/3 and t/6.
func batchHarness(t *testing.T) *ctrlHarness {
	h := newCtrlHarness(t)
	for _, cmd := range []string{"brokers 1 2 3 4", "elect 4",
		"topic t 0=1,2,3 1=2,3,1 2=3,1,2 3=1,2,3 4=2,3,1 5=3,1,2 6=1,2,3 7=2,3,1"} {
		if _, err := h.run(cmd); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

func (h *ctrlHarness) stateOf(tp cluster.TopicPartition) cluster.LeaderAndIsr {
	n := h.store.nodes[partitionStatePath(tp.Topic, tp.Partition)]
	st, err := decodePartitionState(n.data, n.stat.Version)
	if err != nil {
		h.t.Fatal(err)
	}
	return st
}

func tpsOf(topic string, parts ...int32) []cluster.TopicPartition {
	var out []cluster.TopicPartition
	for _, p := range parts {
		out = append(out, cluster.TopicPartition{Topic: topic, Partition: p})
	}
	return out
}

// TestControllerBatchFaults: broker 1 dies and the eight state writes go
// in one batch, all in flight at once (sentAhead: a lost connection stops
// the batch, but what the client holds already still goes out), in which t/0's lands with its reply lost, t/2's is lost
// before it lands, t/4's lands with its reply and its read-back lost, and
// t/6's meets a leader's ISR write. The read-back settles t/0 (landed,
// announced), t/2 and t/6 are decided again and written in the next round,
// and only t/4 is left as work, with its write of unknown outcome; the
// retry reads it back and announces it.
func TestControllerBatchFaults(t *testing.T) {
	h := batchHarness(t)
	if _, err := h.run("hold kill 1"); err != nil {
		t.Fatal(err)
	}
	sp := func(p int32) string { return partitionStatePath("t", p) }
	h.store.writeFaults = map[string][]faultKind{
		sp(0): {faultLossAfter}, sp(2): {faultLossBefore}, sp(4): {faultLossAfterTwice}, sp(6): {faultBadVersion}}
	h.store.sentAhead = 8
	sent := len(h.sent)
	h.ctrl.step(h.store.takeEvents())
	if got, want := slices.SortedFunc(maps.Keys(h.ctrl.work.reconcile), compareTP), tpsOf("t", 4); !slices.Equal(got, want) {
		t.Fatalf("work left after the batch: %v, want %v", got, want)
	}
	if got, want := slices.SortedFunc(maps.Keys(h.ctrl.unknown), compareTP), tpsOf("t", 4); !slices.Equal(got, want) {
		t.Fatalf("writes of unknown outcome: %v, want %v", got, want)
	}
	for p := int32(0); p < 8; p++ {
		st := h.stateOf(cluster.TopicPartition{Topic: "t", Partition: p})
		if st.Leader == 1 || slices.Contains(st.Isr, 1) || st.LeaderEpoch != 1 {
			t.Errorf("t/%d after the batch: %+v, want broker 1 gone at leader epoch 1", p, st)
		}
	}
	// The announce of the step: one LeaderAndIsr to each of 2 and 3 with
	// every partition but t/4, whose outcome the controller does not know.
	var to []int32
	for _, s := range h.sent[sent:] {
		if s.lai == nil {
			continue
		}
		to = append(to, s.to.ID)
		var got []cluster.TopicPartition
		for _, pa := range s.lai.Partitions {
			got = append(got, pa.TopicPartition)
		}
		if want := tpsOf("t", 0, 1, 2, 3, 5, 6, 7); !slices.Equal(got, want) {
			t.Errorf("LeaderAndIsr to %d: %v, want %v", s.to.ID, got, want)
		}
	}
	if !slices.Equal(to, []int32{2, 3}) {
		t.Errorf("LeaderAndIsr sent to %v, want one each to 2 and 3", to)
	}
	h.settle()
	if len(h.ctrl.unknown) > 0 || h.ctrl.hasWork() {
		t.Fatalf("not settled: unknown %v, work %+v", h.ctrl.unknown, h.ctrl.work)
	}
	if err := h.checkBrokersTold(); err != nil {
		t.Fatal(err)
	}
}

// TestControllerBatchSessionLost: the session expires at the fourth state
// write of a batch. The three before it landed; the batch hands out no
// call after the one that met the expiry (later calls would run on the
// new session go-zookeeper opens: see TestControllerBatchAfterExpiry), so
// nothing after it was written. The controller is fenced at once and
// announces nothing (not even the three that landed: its successor reads
// and announces them), and the next controller converges.
func TestControllerBatchSessionLost(t *testing.T) {
	h := batchHarness(t)
	if _, err := h.run("hold kill 1"); err != nil {
		t.Fatal(err)
	}
	h.store.writeFaults = map[string][]faultKind{partitionStatePath("t", 3): {faultExpiry}}
	z := h.ctrl
	sent := len(h.sent)
	z.step(h.store.takeEvents())
	if !z.fenced {
		t.Fatal("controller not fenced by the expired session")
	}
	if len(h.sent) != sent {
		t.Errorf("fenced controller sent %d requests", len(h.sent)-sent)
	}
	for p := int32(0); p < 8; p++ {
		st := h.stateOf(cluster.TopicPartition{Topic: "t", Partition: p})
		if landed := st.LeaderEpoch == 1; landed != (p < 3) {
			t.Errorf("t/%d after the expiry: %+v (landed %t), want only t/0..t/2 written", p, st, landed)
		}
	}
	h.settle() // a new session, a new controller
	if h.ctrl == z || h.ctrl.epoch <= z.epoch {
		t.Fatal("no new controller after the expiry")
	}
	if err := h.checkSilentAfterFence(); err != nil {
		t.Fatal(err)
	}
	if err := h.checkBrokersTold(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for p := int32(0); p < 8; p++ {
		st := h.stateOf(cluster.TopicPartition{Topic: "t", Partition: p})
		if st.Leader == 1 || slices.Contains(st.Isr, 1) {
			lines = append(lines, fmt.Sprintf("t/%d %+v", p, st))
		}
	}
	if len(lines) > 0 {
		t.Fatalf("broker 1 still in states after the new controller settled:\n%s", strings.Join(lines, "\n"))
	}
}

// TestControllerBatchAfterExpiry: the session expires at t/3's write while
// two more writes are held by the client; go-zookeeper sends those on the
// new session, where a successor has already bumped /controller_epoch: the
// epoch check of each multi rejects them, and the calls never handed out
// are not sent at all.
func TestControllerBatchAfterExpiry(t *testing.T) {
	h := batchHarness(t)
	if _, err := h.run("hold kill 1"); err != nil {
		t.Fatal(err)
	}
	h.store.writeFaults = map[string][]faultKind{partitionStatePath("t", 3): {faultExpiry}}
	h.store.sentAhead = 2
	var after []int // calls made after the expiry
	h.store.before = func(i int) {
		if !h.store.expired {
			return
		}
		if len(after) == 0 { // a successor wins on its own session
			e, err := decodeControllerEpoch(h.store.nodes[controllerEpochPath].data)
			if err != nil {
				t.Fatal(err)
			}
			h.store.put(controllerEpochPath, encodeControllerEpoch(e+1), 0)
		}
		after = append(after, i)
	}
	z := h.ctrl
	z.step(h.store.takeEvents())
	h.store.before = nil
	if !z.fenced {
		t.Fatal("controller not fenced by the expired session")
	}
	if len(after) != 2 {
		t.Errorf("%d calls after the expiry, want the 2 the client held", len(after))
	}
	for p := int32(0); p < 8; p++ {
		st := h.stateOf(cluster.TopicPartition{Topic: "t", Partition: p})
		if landed := st.LeaderEpoch == 1; landed != (p < 3) {
			t.Errorf("t/%d after the expiry: %+v (landed %t), want only t/0..t/2 written", p, st, landed)
		}
	}
	if len(z.unknown) > 0 {
		t.Errorf("writes of unknown outcome after the expiry: %v", slices.Collect(maps.Keys(z.unknown)))
	}
	h.settle()
	if h.ctrl == z {
		t.Fatal("no new controller after the expiry")
	}
	if err := h.checkSilentAfterFence(); err != nil {
		t.Fatal(err)
	}
	if err := h.checkBrokersTold(); err != nil {
		t.Fatal(err)
	}
}

// TestControllerBatchNotSent: the connection drops before t/2's write of a
// batch reaches the server, and the batch hands out nothing after it: the
// writes never sent (t/3..t/7) need no read-back (only t/2's outcome is
// unknown, and it is read back), stay as work, and the retry writes them.
func TestControllerBatchNotSent(t *testing.T) {
	h := batchHarness(t)
	if _, err := h.run("hold kill 1"); err != nil {
		t.Fatal(err)
	}
	h.store.writeFaults = map[string][]faultKind{partitionStatePath("t", 2): {faultLossBefore}}
	reads := map[string]int{}
	h.store.reads = reads
	z := h.ctrl
	z.step(h.store.takeEvents())
	h.store.reads = nil
	// The step decides on the states the controller holds (no read
	// first: readStatesCached), so a state read is a read-back.
	for p := int32(3); p < 8; p++ {
		if n := reads[partitionStatePath("t", p)]; n != 0 {
			t.Errorf("t/%d's state read %d times by the step, want none (no read-back of a write never sent)", p, n)
		}
	}
	if n := reads[partitionStatePath("t", 2)]; n == 0 {
		t.Error("t/2's state never read back after its write's outcome was lost")
	}
	for p := int32(0); p < 8; p++ {
		st := h.stateOf(cluster.TopicPartition{Topic: "t", Partition: p})
		if landed := st.LeaderEpoch == 1; landed != (p <= 2) {
			t.Errorf("t/%d after the batch: %+v (landed %t), want t/0..t/2 written (t/2 on its retry)", p, st, landed)
		}
	}
	if got, want := slices.SortedFunc(maps.Keys(z.work.reconcile), compareTP), tpsOf("t", 3, 4, 5, 6, 7); !slices.Equal(got, want) {
		t.Errorf("work left: %v, want %v", got, want)
	}
	if len(z.unknown) > 0 {
		t.Errorf("writes of unknown outcome: %v, want none", slices.Collect(maps.Keys(z.unknown)))
	}
	h.settle()
	if err := h.checkBrokersTold(); err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 8; p++ {
		if st := h.stateOf(cluster.TopicPartition{Topic: "t", Partition: p}); st.Leader == 1 || slices.Contains(st.Isr, 1) {
			t.Errorf("t/%d after settling: %+v, want broker 1 gone", p, st)
		}
	}
}

// TestZkConnBatchNoServer: with no server reachable, a batch of 20,000
// Gets on a real go-zookeeper connection ends at the first ErrNoServer
// cycle (go-zookeeper fails the calls it holds about once a second, ~1,000
// each time: unaborted, the batch took 20 s), and the calls never handed
// out fail with errNotSent.
func TestZkConnBatchNoServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	conn, _, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(zkLogger{zerolog.Nop()}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	z := &zkConn{c: conn}
	const n = 20000
	calls := make([]storeCall, n)
	for i := range calls {
		calls[i] = storeCall{path: fmt.Sprintf("/brokers/topics/t%d/partitions/0/state", i)}
	}
	start := time.Now()
	out := z.Batch(calls, nil)
	took := time.Since(start)
	notSent := 0
	for i, r := range out {
		switch {
		case errors.Is(r.err, errNotSent):
			notSent++
		case !errors.Is(r.err, zk.ErrNoServer):
			t.Fatalf("call %d: %v, want zk.ErrNoServer or errNotSent", i, r.err)
		}
	}
	if took > 5*time.Second {
		t.Errorf("batch of %d Gets with no server took %v, want it aborted at the first ErrNoServer (~1 s)", n, took)
	}
	if notSent < n-2*maxInFlight {
		t.Errorf("%d of %d calls not sent, want all but those in flight (%d)", notSent, n, maxInFlight)
	}
	stopped := z.Batch(calls, func() bool { return true })
	for i, r := range stopped {
		if !errors.Is(r.err, errNotSent) {
			t.Fatalf("stopped batch: call %d: %v, want errNotSent", i, r.err)
		}
	}
	t.Logf("no server: %d Gets ended in %v, %d not sent", n, took, notSent)
}

// TestControllerNewTopicAdoptsOwnEpochState: a topic missing from the
// context whose states exist already, written by this controller's epoch
// (it held and announced them before the topic left its context), is not
// announced as new: its creates meet NODEEXISTS, the read-back finds no
// attempt of this term in c.unknown, so the states are adopted, announced
// with IsNew false, and reconciled.
func TestControllerNewTopicAdoptsOwnEpochState(t *testing.T) {
	h := batchHarness(t)
	z := h.ctrl
	z.dropTopic("t")
	h.store.events.topicList = true
	sent := len(h.sent)
	h.settle()
	if h.ctrl != z {
		t.Fatal("controller changed")
	}
	var lais int
	for _, s := range h.sent[sent:] {
		if s.lai == nil {
			continue
		}
		lais++
		for _, pa := range s.lai.Partitions {
			if pa.IsNew {
				t.Errorf("LeaderAndIsr to %d announces %v as new; its state was there already", s.to.ID, pa.TopicPartition)
			}
		}
	}
	if lais == 0 {
		t.Fatal("the adopted topic was not announced")
	}
	for p := int32(0); p < 8; p++ {
		tp := cluster.TopicPartition{Topic: "t", Partition: p}
		if got, want := z.states[tp], h.stateOf(tp); !sameLeaderAndIsr(got, want) || got.ZkVersion != want.ZkVersion {
			t.Errorf("%v in the context: %+v, stored %+v", tp, got, want)
		}
	}
	if err := h.checkBrokersTold(); err != nil {
		t.Fatal(err)
	}
}

// TestControllerStaleCachedStateReread: the controller decides on the
// states it holds without reading them first (readStatesCached), so a
// state a leader changed behind its back (the ISR change notification not
// yet seen) must meet BADVERSION and be read and decided again. Broker 2
// has shrunk t/1's ISR to 2,3; the controlled shutdown of broker 2 must
// elect 3 with ISR 3 from what is stored, not 3,1 from the stale copy,
// and the controller's copy must end equal to the znode.
func TestControllerStaleCachedStateReread(t *testing.T) {
	h := batchHarness(t)
	tp := cluster.TopicPartition{Topic: "t", Partition: 1}
	if _, err := h.run("hold state t/1 leader=2 leader_epoch=0 isr=2,3 controller_epoch=1"); err != nil {
		t.Fatal(err)
	}
	if cached := h.ctrl.states[tp]; !slices.Equal(cached.Isr, []int32{2, 3, 1}) {
		t.Fatalf("the controller already saw the ISR change: %+v", cached)
	}
	reads := map[string]int{}
	h.store.reads = reads
	remaining, err := h.ctrl.controlledShutdown(2, h.ctrl.alive[2].Epoch)
	h.store.reads = nil
	if err != nil || len(remaining) > 0 {
		t.Fatalf("controlled shutdown of 2: remaining %v, %v", remaining, err)
	}
	st := h.stateOf(tp)
	if st.Leader != 3 || !slices.Equal(st.Isr, []int32{3}) || st.LeaderEpoch != 1 {
		t.Fatalf("t/1 after the controlled shutdown: %+v, want leader 3, ISR [3], leader epoch 1", st)
	}
	if c := h.ctrl.states[tp]; c.Leader != st.Leader || !slices.Equal(c.Isr, st.Isr) || c.ZkVersion != st.ZkVersion {
		t.Fatalf("the controller holds %+v for t/1, the znode %+v", c, st)
	}
	if n := reads[partitionStatePath("t", 1)]; n != 1 {
		t.Errorf("t/1's state read %d times, want once (after its BADVERSION)", n)
	}
	if n := reads[partitionStatePath("t", 4)]; n != 0 {
		t.Errorf("t/4's state read %d times, want none (its cached state was current)", n)
	}
}

// TestControllerStaleCachedNoChangeReread: a decision on a cached state
// to write nothing checks no zkVersion, so it is made again on a read.
// Broker 1 is out of t/1's ISR as the controller knows it, but leader 2
// has just added it back; the controlled shutdown of broker 1 must take
// it out again (on the stale copy there was nothing to do), so that
// acks=all writes to t/1 do not wait for a broker that is going away.
func TestControllerStaleCachedNoChangeReread(t *testing.T) {
	h := batchHarness(t)
	tp := cluster.TopicPartition{Topic: "t", Partition: 1}
	if _, err := h.run("hold state t/1 leader=2 leader_epoch=1 isr=2,3 controller_epoch=1"); err != nil {
		t.Fatal(err)
	}
	h.ctrl.states[tp] = h.stateOf(tp) // learned, as from an ISR change notification
	if _, err := h.run("hold state t/1 leader=2 leader_epoch=1 isr=2,3,1 controller_epoch=1"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.ctrl.controlledShutdown(1, h.ctrl.alive[1].Epoch); err != nil {
		t.Fatal(err)
	}
	st := h.stateOf(tp)
	if st.Leader != 2 || !slices.Equal(st.Isr, []int32{2, 3}) || st.LeaderEpoch != 2 {
		t.Fatalf("t/1 after the controlled shutdown of 1: %+v, want leader 2, ISR [2 3], leader epoch 2", st)
	}
}
