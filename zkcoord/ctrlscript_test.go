package zkcoord

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
)

// Scripted controller scenarios, in the style of etcd-io/raft's
// interaction tests. Each file in testdata/controller is a list of
// commands (the cluster's events: brokers registering and dying, topics
// created and deleted, leaders writing ISRs, a controlled shutdown, a
// controller election), each followed by "----" and what the controller
// did in response: every ZooKeeper write it applied ("zk ...") and every
// request it sent ("-> <broker> ..."), in order. The controller runs on
// the test goroutine against memStore, with requests delivered at once
// and watch events delivered after each step, so a run is deterministic.
//
// Then every scenario is run again once per ZooKeeper call of the
// controller and per fault (connection lost before or after the write is
// applied, after it and again at the read-back, session expiry, a
// concurrent writer), with the fault injected
// at that call: the expected output is not compared (retries change it),
// but the end must be the same: the same znodes with the same leaders and
// ISRs, and every live broker must have been told the final state of each
// of its partitions (LeaderAndIsr naming the final leader at the final
// leader epoch, UpdateMetadata with the final leader and ISR). After a
// session expiry the controller must resign, and a new controller (a new
// controller epoch) must converge.
//
// go test ./zkcoord -run TestControllerScript -update rewrites the
// expected output; review the diff before committing it.

var updateScripts = flag.Bool("update", false, "rewrite testdata/controller expected output")

// ctrlHarness drives one controller (and its successors) over a memStore.
type ctrlHarness struct {
	t testing.TB
	// uncleanDefault is the cluster-wide unclean.leader.election.enable.
	uncleanDefault bool
	store          *memStore
	ctrl           *controller
	ctrlID         int32
	lines          *[]string // the output of the current command
	sent           []sentRequest
	topics         map[string]map[int32][]int32 // every topic the script created, by its last assignment
	// zombies are deposed controllers that have not noticed, by broker id.
	zombies map[int32]*controller
	// fencedAt is len(sent) when each controller resigned: it must send
	// nothing after that.
	fencedAt map[*controller]int
	// verbose logs the controller (set CTRL_SCRIPT_LOG=1).
	log zerolog.Logger
	// offlineDirs are, per broker, the replicas of its failed log dirs,
	// which its LeaderAndIsr answers KAFKA_STORAGE_ERROR for until it
	// restarts (ctrllogdir_test.go).
	offlineDirs map[int32]map[cluster.TopicPartition]bool
}

type sentRequest struct {
	to  cluster.Broker
	lai *cluster.LeaderAndIsrRequest
	um  *cluster.UpdateMetadataRequest
	stp *cluster.StopReplicaRequest
}

func newCtrlHarness(t testing.TB) *ctrlHarness {
	h := &ctrlHarness{t: t, store: newMemStore(), topics: map[string]map[int32][]int32{}, zombies: map[int32]*controller{}, fencedAt: map[*controller]int{}, log: zerolog.Nop()}
	h.lines = h.store.trace
	if os.Getenv("CTRL_SCRIPT_LOG") != "" {
		h.log = zerolog.New(zerolog.NewTestWriter(t))
	}
	return h
}

func (h *ctrlHarness) printf(format string, args ...any) {
	*h.lines = append(*h.lines, fmt.Sprintf(format, args...))
}

// ---- the recording sender ----

// recQueue delivers each request at once, in order, on the test goroutine.
type recQueue struct {
	to     cluster.Broker
	send   BrokerSender
	closed bool
}

func (q *recQueue) enqueue(r ctrlRequest) {
	if !q.closed {
		_ = r.send(context.Background(), q.to)
	}
}

func (q *recQueue) close() { q.closed = true }

func ints(xs []int32) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(int(x))
	}
	return strings.Join(s, ",")
}

// brokerIDs lists the ids of bs.
func brokerIDs(bs []cluster.Broker) []int32 {
	var ids []int32
	for _, b := range bs {
		ids = append(ids, b.ID)
	}
	return ids
}

func (h *ctrlHarness) LeaderAndIsr(_ context.Context, to cluster.Broker, req cluster.LeaderAndIsrRequest) error {
	h.sent = append(h.sent, sentRequest{to: to, lai: &req})
	h.printf("-> %d LeaderAndIsr controller_epoch=%d broker_epoch=%d live_leaders=%s", to.ID, req.ControllerEpoch, req.BrokerEpoch, ints(brokerIDs(req.LiveLeaders)))
	for _, pa := range req.Partitions {
		isNew := ""
		if pa.IsNew {
			isNew = " new"
		}
		if len(pa.AddingReplicas)+len(pa.RemovingReplicas) > 0 {
			isNew += fmt.Sprintf(" adding=%s removing=%s", ints(pa.AddingReplicas), ints(pa.RemovingReplicas))
		}
		s := pa.LeaderAndIsr
		h.printf("   %s/%d leader=%d leader_epoch=%d isr=%s zk_version=%d replicas=%s%s", pa.TopicPartition.Topic, pa.TopicPartition.Partition,
			s.Leader, s.LeaderEpoch, ints(s.Isr), s.ZkVersion, ints(pa.Replicas), isNew)
	}
	return nil
}

func (h *ctrlHarness) UpdateMetadata(_ context.Context, to cluster.Broker, req cluster.UpdateMetadataRequest) error {
	h.sent = append(h.sent, sentRequest{to: to, um: &req})
	h.printf("-> %d UpdateMetadata controller_epoch=%d broker_epoch=%d live=%s", to.ID, req.ControllerEpoch, req.BrokerEpoch, ints(brokerIDs(req.LiveBrokers)))
	for _, pi := range req.Partitions {
		s := pi.State
		h.printf("   %s/%d leader=%d leader_epoch=%d isr=%s replicas=%s offline=%s", pi.Topic, pi.Partition,
			s.Leader, s.LeaderEpoch, ints(s.Isr), ints(pi.Replicas), ints(pi.Offline))
	}
	return nil
}

func (h *ctrlHarness) StopReplica(_ context.Context, to cluster.Broker, req cluster.StopReplicaRequest) error {
	h.sent = append(h.sent, sentRequest{to: to, stp: &req})
	h.printf("-> %d StopReplica controller_epoch=%d broker_epoch=%d delete=%t", to.ID, req.ControllerEpoch, req.BrokerEpoch, req.DeletePartitions)
	for _, tp := range req.Partitions {
		h.printf("   %s/%d leader_epoch=%d", tp.Topic, tp.Partition, req.LeaderEpochs[tp])
	}
	return nil
}

// ---- the controller's life ----

// elect makes broker id the controller, as its campaign would: bump
// /controller_epoch, create /controller, start a controller and let it
// run its failover.
func (h *ctrlHarness) elect(id int32) {
	h.newController(id)
	h.settle()
}

// newController is elect without running anything: the new controller
// has its failover still to do.
func (h *ctrlHarness) newController(id int32) *controller {
	m := h.store
	epoch, err := decodeControllerEpoch(m.nodes[controllerEpochPath].data)
	if err != nil {
		h.t.Fatal(err)
	}
	epoch++
	st := m.put(controllerEpochPath, encodeControllerEpoch(epoch), 0)
	m.remove(controllerPath)
	m.put(controllerPath, encodeController(id, 0), int64(id))
	if h.ctrl != nil {
		if h.ctrl.id == id {
			h.ctrl.stop()
			h.ctrl.closeQueues()
		} else {
			h.zombies[h.ctrl.id] = h.ctrl // deposed, and it does not know
		}
	}
	h.ctrlID = id
	c := newControllerWith(controllerConfig{
		BrokerID: id, Epoch: epoch, EpochZkVersion: st.Version,
		Store: m, Sender: h, Log: h.log,
		NewQueue: func(b cluster.Broker) requestQueue { return &recQueue{to: b, send: h} },
		Done:     make(chan struct{}),
		Resign: func(c *controller, _ string) { // the harness looks at c.fenced
			if _, ok := h.fencedAt[c]; !ok {
				h.fencedAt[c] = len(h.sent)
			}
		},
		Now:            func() time.Time { return time.Unix(0, 0) },
		UncleanDefault: func() bool { return h.uncleanDefault },
	})
	h.ctrl = c
	m.takeEvents() // the failover reads everything
	return c
}

// settle lets the controller run until it has no events and no work
// left: watch events are delivered after each step, and unfinished work
// is retried (the loop's retry timer, without the wait). A controller
// that resigned after its session expired is followed by a new session
// and a new controller, as the session goroutine would do.
func (h *ctrlHarness) settle() {
	for i := 0; i < 200; i++ {
		if h.ctrl == nil {
			h.store.takeEvents()
			return
		}
		if h.store.stolen {
			// Another broker won an election (faultNewEpoch); this one
			// wins the next: the deposed controller stops, a fresh one
			// (a newer epoch still) takes over.
			h.store.stolen = false
			h.printf("(controller epoch moved: controller %d deposed)", h.ctrlID)
			h.newController(h.ctrlID)
			continue
		}
		if h.ctrl.fenced {
			if !h.store.expired {
				return // fenced by a newer controller: the script goes on without it
			}
			h.printf("(session expired: controller %d resigned)", h.ctrlID)
			h.store.expired = false
			h.elect(h.ctrlID)
			return
		}
		ev := h.store.takeEvents()
		ev.merge(h.ctrl.takePending()) // posted by the send queues (LeaderAndIsr outcomes)
		if ev.empty() && !h.ctrl.hasWork() {
			if len(h.ctrl.unknown) > 0 {
				// Nothing would wake the controller again for them.
				h.t.Errorf("controller settled with writes of unknown outcome: %v", slices.Collect(maps.Keys(h.ctrl.unknown)))
			}
			return
		}
		h.ctrl.step(ev)
	}
	h.t.Fatalf("controller did not converge: work left %+v", h.ctrl.work)
}

// ---- commands ----

func (h *ctrlHarness) registerBroker(id int32) {
	ep := []cluster.Endpoint{{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: fmt.Sprintf("b%d", id), Port: 9092}}
	h.store.put(brokerPath(id), encodeBrokerRegistration(ep, "", 0), int64(id))
}

func parseTP(s string) (cluster.TopicPartition, error) {
	t, p, ok := strings.Cut(s, "/")
	if !ok {
		return cluster.TopicPartition{}, fmt.Errorf("want topic/partition, got %q", s)
	}
	n, err := strconv.ParseInt(p, 10, 32)
	return cluster.TopicPartition{Topic: t, Partition: int32(n)}, err
}

func parseInts(s string) ([]int32, error) {
	if s == "" {
		return nil, nil
	}
	var out []int32
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.ParseInt(f, 10, 32)
		if err != nil {
			return nil, err
		}
		out = append(out, int32(n))
	}
	return out, nil
}

// run executes one command and returns its output.
func (h *ctrlHarness) run(cmd string) (string, error) {
	*h.lines = (*h.lines)[:0]
	f := strings.Fields(cmd)
	// "hold CMD" makes the change of CMD without letting the controller
	// see it: its events wait for the next command that settles.
	hold := len(f) > 1 && f[0] == "hold"
	if hold {
		f = f[1:]
	}
	if len(f) == 0 {
		return "", fmt.Errorf("empty command")
	}
	args := f[1:]
	ids := func() ([]int32, error) { return parseInts(strings.Join(args, ",")) }
	switch f[0] {
	case "brokers", "restart":
		bs, err := ids()
		if err != nil {
			return "", err
		}
		for _, id := range bs {
			if f[0] == "restart" {
				h.store.remove(brokerPath(id))
				delete(h.offlineDirs, id) // its disk was replaced
			}
			h.registerBroker(id)
		}
	case "endpoint":
		// endpoint ID HOST: the broker rewrites its registration with a
		// new host (same session, same czxid).
		if len(args) != 2 {
			return "", fmt.Errorf("endpoint ID HOST")
		}
		id, err := strconv.ParseInt(args[0], 10, 32)
		if err != nil || h.store.nodes[brokerPath(int32(id))] == nil {
			return "", fmt.Errorf("endpoint: no broker %s", args[0])
		}
		ep := []cluster.Endpoint{{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: args[1], Port: 9092}}
		h.store.put(brokerPath(int32(id)), encodeBrokerRegistration(ep, "", 0), 0)
	case "kill":
		bs, err := ids()
		if err != nil {
			return "", err
		}
		for _, id := range bs {
			h.store.remove(brokerPath(id))
			delete(h.offlineDirs, id) // it comes back with its disk replaced
			if h.ctrl != nil && h.ctrl.id == id {
				// The controller dies with its broker (and its session's
				// /controller with it): nobody handles events until the
				// next election.
				h.ctrl.stop()
				h.ctrl.closeQueues()
				h.ctrl = nil
				h.store.remove(controllerPath)
				h.printf("(controller %d died)", id)
			}
		}
	case "topic":
		if len(args) < 2 {
			return "", fmt.Errorf("topic NAME P=R,R... [unclean=BOOL]")
		}
		a := map[int32][]int32{}
		cfg := map[string]string{}
		for _, kv := range args[1:] {
			k, v, _ := strings.Cut(kv, "=")
			if k == "unclean" {
				cfg[uncleanConfigKey] = v
				continue
			}
			p, err := strconv.ParseInt(k, 10, 32)
			if err != nil {
				return "", err
			}
			if a[int32(p)], err = parseInts(v); err != nil {
				return "", err
			}
		}
		h.topics[args[0]] = a
		h.store.put(configTopicPath(args[0]), encodeTopicConfig(cfg), 0)
		h.store.put(topicPath(args[0]), encodeTopicAssignment(a), 0)
	case "unclean_default":
		// unclean_default BOOL: the cluster-wide unclean.leader.election.enable
		// changes (Session.SetUncleanLeaderElectionDefault).
		if len(args) != 1 {
			return "", fmt.Errorf("unclean_default BOOL")
		}
		was := h.uncleanDefault
		h.uncleanDefault = args[0] == "true"
		if h.ctrl != nil && h.uncleanDefault && !was {
			h.ctrl.step(pendingEvents{uncleanDefault: true})
		}
	case "config":
		if len(args) != 2 {
			return "", fmt.Errorf("config TOPIC unclean=BOOL")
		}
		_, v, _ := strings.Cut(args[1], "=")
		h.store.put(configTopicPath(args[0]), encodeTopicConfig(map[string]string{uncleanConfigKey: v}), 0)
	case "state":
		// state T/P leader=L leader_epoch=E isr=A,B controller_epoch=C
		if len(args) < 1 {
			return "", fmt.Errorf("state T/P leader=L leader_epoch=E isr=A,B controller_epoch=C")
		}
		tp, err := parseTP(args[0])
		if err != nil {
			return "", err
		}
		var st cluster.LeaderAndIsr
		for _, kv := range args[1:] {
			k, v, _ := strings.Cut(kv, "=")
			var n int64
			if k != "isr" {
				if n, err = strconv.ParseInt(v, 10, 32); err != nil {
					return "", err
				}
			}
			switch k {
			case "leader":
				st.Leader = int32(n)
			case "leader_epoch":
				st.LeaderEpoch = int32(n)
			case "controller_epoch":
				st.ControllerEpoch = int32(n)
			case "isr":
				if st.Isr, err = parseInts(v); err != nil {
					return "", err
				}
			default:
				return "", fmt.Errorf("state: unknown field %q", k)
			}
		}
		h.store.put(partitionStatePath(tp.Topic, tp.Partition), encodePartitionState(st), 0)
	case "corrupt":
		// corrupt T/P: the state znode holds something unreadable.
		if len(args) != 1 {
			return "", fmt.Errorf("corrupt T/P")
		}
		tp, err := parseTP(args[0])
		if err != nil {
			return "", err
		}
		h.store.put(partitionStatePath(tp.Topic, tp.Partition), []byte("{not json"), 0)
	case "delete":
		for _, t := range args {
			h.store.put(deleteTopicsPath(t), nil, 0)
		}
	case "isr":
		// isr T/P A,B: the leader writes a new ISR and notifies.
		if len(args) != 2 {
			return "", fmt.Errorf("isr T/P A,B")
		}
		tp, err := parseTP(args[0])
		if err != nil {
			return "", err
		}
		if h.store.nodes[partitionStatePath(tp.Topic, tp.Partition)] == nil {
			return "", fmt.Errorf("isr: no state for %s", args[0])
		}
		isr, err := parseInts(args[1])
		if err != nil {
			return "", err
		}
		h.leaderWritesIsr(tp, isr)
	case "elect":
		bs, err := ids()
		if err != nil || len(bs) != 1 {
			return "", fmt.Errorf("elect ID")
		}
		h.elect(bs[0])
		return strings.Join(*h.lines, "\n"), nil
	case "shutdown":
		bs, err := ids()
		if err != nil || len(bs) != 1 {
			return "", fmt.Errorf("shutdown ID")
		}
		h.shutdown(bs[0])
	case "zombie":
		// zombie ID: the deposed controller of broker ID handles a late
		// event of every kind. Its writes must be fenced and it must
		// resign. It has its own session, so no fault is injected in it.
		bs, err := ids()
		if err != nil || len(bs) != 1 || h.zombies[bs[0]] == nil {
			return "", fmt.Errorf("zombie ID: no deposed controller %v", args)
		}
		z := h.zombies[bs[0]]
		fault := h.store.fault
		h.store.fault = memFault{}
		held := h.store.takeEvents() // held changes are for the current controller
		z.step(pendingEvents{brokers: true, topicList: true, deletions: true, isrChanges: true})
		h.store.fault = fault
		h.printf("(controller %d fenced: %t)", z.id, z.fenced)
		delete(h.zombies, bs[0])
		held.merge(h.store.takeEvents())
		h.store.events = held
		if err := h.checkSilentAfterFence(); err != nil {
			return "", err
		}
	case "rebalance":
		// The auto leader rebalance timer fires.
		if h.ctrl == nil {
			return "", fmt.Errorf("rebalance: no controller")
		}
		// A tick that failed, or whose controller resigned, is followed by
		// the next tick (Kafka checks every leader.imbalance.check.interval).
		for tick := 0; tick < 3 && h.ctrl != nil; tick++ {
			c := h.ctrl
			err := c.checkRebalance()
			if err != nil && !c.checkFenced(err) {
				h.printf("rebalance error: %v", err)
			}
			c.afterEvent(c.now())
			h.settle()
			if err == nil && h.ctrl == c && !c.fenced {
				break
			}
		}
		return strings.Join(*h.lines, "\n"), nil
	case "dump":
		h.dump()
		return strings.Join(*h.lines, "\n"), nil
	case "reassign", "cancel", "leaders", "list":
		if err := h.adminCall(f[0], args); err != nil {
			return "", err
		}
		return strings.Join(*h.lines, "\n"), h.checkSilentAfterFence()
	case "legacy":
		// legacy T/P=R,R ...: a 2.x tool writes /admin/reassign_partitions.
		m := map[cluster.TopicPartition][]int32{}
		for _, a := range args {
			k, v, _ := strings.Cut(a, "=")
			tp, err := parseTP(k)
			if err != nil {
				return "", err
			}
			if m[tp], err = parseInts(v); err != nil {
				return "", err
			}
		}
		h.store.put(reassignPartitionsPath, encodeLegacyReassignment(m), 0)
	case "preferred":
		// preferred T/P ...: a 2.x tool writes /admin/preferred_replica_election.
		var tps []cluster.TopicPartition
		for _, a := range args {
			tp, err := parseTP(a)
			if err != nil {
				return "", err
			}
			tps = append(tps, tp)
		}
		h.store.put(preferredReplicaElectionPath, encodePreferredElection(tps), 0)
	case "logdir_fail":
		// logdir_fail ID T/P,...: broker ID's log dir holding those
		// replicas failed (ctrllogdir_test.go).
		if err := h.logDirFail(args); err != nil {
			return "", err
		}
	default:
		return "", fmt.Errorf("unknown command %q", f[0])
	}
	if !hold {
		h.settle()
	}
	return strings.Join(*h.lines, "\n"), h.checkSilentAfterFence()
}

// checkSilentAfterFence checks that no controller sent a request after it
// resigned (its epoch check failed or its session expired).
func (h *ctrlHarness) checkSilentAfterFence() error {
	for c, at := range h.fencedAt {
		for _, s := range h.sent[at:] {
			var ce int32
			switch {
			case s.lai != nil:
				ce = s.lai.ControllerEpoch
			case s.um != nil:
				ce = s.um.ControllerEpoch
			case s.stp != nil:
				ce = s.stp.ControllerEpoch
			}
			if ce == c.epoch {
				return fmt.Errorf("controller %d (epoch %d) sent %+v to broker %d after it resigned", c.id, c.epoch, s, s.to.ID)
			}
		}
	}
	return nil
}

// shutdown is broker id's ControlledShutdown request, retried on error as
// the broker does (controlled.shutdown.max.retries), each time against the
// current controller.
func (h *ctrlHarness) shutdown(id int32) {
	n := h.store.nodes[brokerPath(id)]
	if n == nil {
		h.printf("shutdown: broker %d is not registered", id)
		return
	}
	led := map[cluster.TopicPartition]bool{} // what broker id led before
	for t, a := range h.topics {
		for p := range a {
			if sn := h.store.nodes[partitionStatePath(t, p)]; sn != nil {
				if st, err := decodePartitionState(sn.data, sn.stat.Version); err == nil && st.Leader == id {
					led[cluster.TopicPartition{Topic: t, Partition: p}] = true
				}
			}
		}
	}
	for attempt := 0; attempt < 5; attempt++ {
		c := h.ctrl
		remaining, err := c.controlledShutdown(id, n.stat.Czxid)
		c.afterEvent(c.now())
		if err == nil {
			var s []string
			for _, tp := range remaining {
				s = append(s, fmt.Sprintf("%s/%d", tp.Topic, tp.Partition))
			}
			h.printf("remaining: %s", strings.Join(s, ","))
			h.checkShutdownStopped(id, n.stat.Czxid, led)
			return
		}
		h.printf("shutdown error: %v", err)
		h.settle()
	}
	h.t.Fatalf("controlled shutdown of broker %d never succeeded", id)
}

// checkShutdownStopped checks, after broker id's controlled shutdown
// succeeded, that for each replicated partition of it that it no longer
// leads and is out of the ISR of, it was told to stop fetching: a
// StopReplica without delete if it followed, or (a former leader, in led)
// a LeaderAndIsr naming the new leader at the current leader epoch, from
// the current controller.
func (h *ctrlHarness) checkShutdownStopped(id int32, epoch int64, led map[cluster.TopicPartition]bool) {
	c := h.ctrl
	for t, a := range h.topics {
		for p, replicas := range a {
			n := h.store.nodes[partitionStatePath(t, p)]
			if len(replicas) < 2 || !slices.Contains(replicas, id) || n == nil {
				continue
			}
			st, err := decodePartitionState(n.data, n.stat.Version)
			if err != nil {
				h.t.Fatal(err)
			}
			if st.Leader == id || slices.Contains(st.Isr, id) {
				continue
			}
			tp := cluster.TopicPartition{Topic: t, Partition: p}
			told := false
			for _, s := range h.sent {
				if s.to.ID != id || s.to.Epoch != epoch {
					continue
				}
				if s.stp != nil && !s.stp.DeletePartitions && s.stp.ControllerEpoch == c.epoch && slices.Contains(s.stp.Partitions, tp) &&
					s.stp.LeaderEpochs[tp] == st.LeaderEpoch {
					told = true
				}
				if s.lai != nil && s.lai.ControllerEpoch == c.epoch && led[tp] {
					for _, pa := range s.lai.Partitions {
						if pa.TopicPartition == tp && pa.LeaderAndIsr.Leader == st.Leader && pa.LeaderAndIsr.LeaderEpoch == st.LeaderEpoch {
							told = true
						}
					}
				}
			}
			if !told {
				h.t.Errorf("controlled shutdown of broker %d: not told to stop %s/%d (leader %d leader_epoch %d)", id, t, p, st.Leader, st.LeaderEpoch)
			}
		}
	}
}

// dump prints every partition state znode and pending request.
func (h *ctrlHarness) dump() {
	for _, line := range h.snapshot(true) {
		h.printf("%s", line)
	}
}

// snapshot lists the znodes the scenarios are about: partition states
// (with versions when full), topics, deletion requests, notifications.
func (h *ctrlHarness) snapshot(full bool) []string {
	var out []string
	for _, p := range slices.Sorted(maps.Keys(h.store.nodes)) {
		n := h.store.nodes[p]
		switch {
		case strings.HasPrefix(p, topicsPath+"/") && strings.HasSuffix(p, "/state"):
			st, err := decodePartitionState(n.data, n.stat.Version)
			if err != nil {
				out = append(out, fmt.Sprintf("%s: %v", p, err))
				continue
			}
			line := fmt.Sprintf("%s leader=%d isr=%s", p, st.Leader, ints(st.Isr))
			if full {
				line = fmt.Sprintf("%s leader=%d leader_epoch=%d isr=%s controller_epoch=%d zk_version=%d",
					p, st.Leader, st.LeaderEpoch, ints(st.Isr), st.ControllerEpoch, st.ZkVersion)
			}
			out = append(out, line)
		case parent(p) == topicsPath:
			out = append(out, p+h.assignmentNote(p[len(topicsPath)+1:], n.data))
		case parent(p) == deleteTopicsRootPath, parent(p) == isrChangeNotificationPath:
			out = append(out, p)
		case p == reassignPartitionsPath, p == preferredReplicaElectionPath:
			out = append(out, fmt.Sprintf("%s %s", p, n.data))
		}
	}
	return out
}

// assignmentNote shows a topic znode's assignment when it is not the one
// the script created (a reassignment changed it), with its adding and
// removing replicas.
func (h *ctrlHarness) assignmentNote(t string, data []byte) string {
	a, err := decodeTopicAssignmentFull(t, data)
	if err != nil {
		return " " + err.Error()
	}
	if maps.EqualFunc(a.Replicas, h.topics[t], slices.Equal[[]int32]) && len(a.Adding)+len(a.Removing) == 0 {
		return ""
	}
	show := func(m map[int32][]int32) string {
		var s []string
		for _, p := range slices.Sorted(maps.Keys(m)) {
			s = append(s, fmt.Sprintf("%d:%s", p, ints(m[p])))
		}
		return strings.Join(s, ";")
	}
	return fmt.Sprintf(" replicas=%s adding=%s removing=%s", show(a.Replicas), show(a.Adding), show(a.Removing))
}

// ---- the end-state checks ----

// checkBrokersTold checks that every registered broker was told the final
// state of each partition: its replicas the LeaderAndIsr naming the final
// leader at the final leader epoch (for partitions with a leader), every
// broker an UpdateMetadata with the final leader, leader epoch and ISR,
// and for deleted topics StopReplica(delete) to the replicas and
// UpdateMetadata with leader -2. Only requests to a broker's current
// incarnation count.
func (h *ctrlHarness) checkBrokersTold() error {
	m := h.store
	live := map[int32]int64{}
	for _, k := range m.children(brokerIDsPath) {
		id, _ := strconv.ParseInt(k, 10, 32)
		live[int32(id)] = m.nodes[brokerPath(int32(id))].stat.Czxid
	}
	type key struct {
		to int32
		tp cluster.TopicPartition
	}
	lastLive := map[int32][]cluster.Broker{} // LiveBrokers of the last UpdateMetadata
	lastLAI := map[key]cluster.LeaderAndIsr{}
	lastUM := map[key]cluster.LeaderAndIsr{}
	stopped := map[key]bool{}
	// hosted: whether the last request about a partition to a broker
	// told it to host a replica (LeaderAndIsr) rather than delete it.
	hosted := map[key]bool{}
	maxEpoch := map[int32]int32{} // a broker refuses an older controller's requests
	for _, s := range h.sent {
		if live[s.to.ID] != s.to.Epoch {
			continue
		}
		var ce int32
		switch {
		case s.lai != nil:
			ce = s.lai.ControllerEpoch
		case s.um != nil:
			ce = s.um.ControllerEpoch
		case s.stp != nil:
			ce = s.stp.ControllerEpoch
		}
		if ce < maxEpoch[s.to.ID] {
			continue
		}
		maxEpoch[s.to.ID] = ce
		switch {
		case s.lai != nil:
			for _, pa := range s.lai.Partitions {
				lastLAI[key{s.to.ID, pa.TopicPartition}] = pa.LeaderAndIsr
				hosted[key{s.to.ID, pa.TopicPartition}] = true
			}
		case s.um != nil:
			lastLive[s.to.ID] = s.um.LiveBrokers
			for _, pi := range s.um.Partitions {
				lastUM[key{s.to.ID, cluster.TopicPartition{Topic: pi.Topic, Partition: pi.Partition}}] = pi.State
			}
		case s.stp != nil && s.stp.DeletePartitions:
			for _, tp := range s.stp.Partitions {
				stopped[key{s.to.ID, tp}] = true
				hosted[key{s.to.ID, tp}] = false
			}
		}
	}
	var errs []string
	// Every broker's last UpdateMetadata names the live brokers as
	// registered now, with their endpoints.
	var want []string
	for _, id := range slices.Sorted(maps.Keys(live)) {
		b, err := decodeBrokerRegistration(id, m.nodes[brokerPath(id)].data)
		if err != nil {
			return err
		}
		want = append(want, fmt.Sprintf("%d@%d%v", id, live[id], b.Endpoints))
	}
	for _, id := range slices.Sorted(maps.Keys(live)) {
		var got []string
		for _, b := range lastLive[id] {
			got = append(got, fmt.Sprintf("%d@%d%v", b.ID, b.Epoch, b.Endpoints))
		}
		if h.ctrl != nil && !slices.Equal(got, want) {
			errs = append(errs, fmt.Sprintf("broker %d: last UpdateMetadata has live brokers %v, registered %v", id, got, want))
		}
	}
	for _, t := range slices.Sorted(maps.Keys(h.topics)) {
		a := m.nodes[topicPath(t)]
		if a == nil {
			continue
		}
		assignment, err := decodeTopicAssignment(t, a.data)
		if err != nil {
			return err
		}
		for _, p := range slices.Sorted(maps.Keys(assignment)) {
			tp := cluster.TopicPartition{Topic: t, Partition: p}
			n := m.nodes[partitionStatePath(t, p)]
			if n == nil {
				continue
			}
			st, err := decodePartitionState(n.data, n.stat.Version)
			if err != nil {
				continue // unreadable: the controller leaves it out
			}
			for _, id := range slices.Sorted(maps.Keys(live)) {
				um, ok := lastUM[key{id, tp}]
				if !ok || um.Leader != st.Leader || um.LeaderEpoch != st.LeaderEpoch || !slices.Equal(um.Isr, st.Isr) {
					errs = append(errs, fmt.Sprintf("broker %d: last UpdateMetadata for %s/%d: %+v (sent: %t), znode %+v", id, t, p, um, ok, st))
				}
				if st.Leader < 0 || !slices.Contains(assignment[p], id) {
					continue
				}
				lai, ok := lastLAI[key{id, tp}]
				if !ok || lai.Leader != st.Leader || lai.LeaderEpoch != st.LeaderEpoch {
					errs = append(errs, fmt.Sprintf("broker %d: last LeaderAndIsr for %s/%d: leader %d leader_epoch %d (sent: %t), znode leader %d leader_epoch %d",
						id, t, p, lai.Leader, lai.LeaderEpoch, ok, st.Leader, st.LeaderEpoch))
					continue
				}
				// The ISR and zkVersion too (a leader's conditional ISR
				// write needs the current zkVersion), unless the leader
				// wrote the znode last: it knows its own write.
				if v, byLeader := h.store.leaderWrote[partitionStatePath(t, p)]; (!byLeader || v != n.stat.Version) &&
					(lai.ZkVersion != n.stat.Version || !slices.Equal(lai.Isr, st.Isr)) {
					errs = append(errs, fmt.Sprintf("broker %d: last LeaderAndIsr for %s/%d: isr %v zk_version %d, znode isr %v zk_version %d",
						id, t, p, lai.Isr, lai.ZkVersion, st.Isr, n.stat.Version))
				}
			}
		}
	}
	// A replica a reassignment removed was told to delete itself, if its
	// broker was ever told to host it.
	for k, host := range hosted {
		if !host || m.nodes[topicPath(k.tp.Topic)] == nil {
			continue
		}
		a, err := decodeTopicAssignment(k.tp.Topic, m.nodes[topicPath(k.tp.Topic)].data)
		if err != nil {
			return err
		}
		if !slices.Contains(a[k.tp.Partition], k.to) {
			errs = append(errs, fmt.Sprintf("broker %d: %s/%d was reassigned away from it without StopReplica(delete)", k.to, k.tp.Topic, k.tp.Partition))
		}
	}
	// Deleted topics: their live replicas were told to delete them, and
	// every broker that knew a partition learns it is gone.
	for _, t := range slices.Sorted(maps.Keys(h.topics)) {
		if m.nodes[topicPath(t)] != nil {
			continue
		}
		for p, replicas := range h.topics[t] {
			for _, r := range replicas {
				if _, ok := live[r]; ok && !stopped[key{r, cluster.TopicPartition{Topic: t, Partition: p}}] {
					errs = append(errs, fmt.Sprintf("broker %d: deleted %s/%d: no StopReplica(delete)", r, t, p))
				}
			}
		}
	}
	for k, um := range lastUM {
		if m.nodes[topicPath(k.tp.Topic)] == nil && um.Leader != LeaderDuringDelete {
			errs = append(errs, fmt.Sprintf("broker %d: deleted %s/%d: last UpdateMetadata has leader %d, not %d",
				k.to, k.tp.Topic, k.tp.Partition, um.Leader, LeaderDuringDelete))
		}
	}
	slices.Sort(errs)
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return nil
}

// ---- the script files ----

type scriptBlock struct {
	comments []string
	cmd      string
	want     string
}

func parseScript(data string) ([]scriptBlock, error) {
	var blocks []scriptBlock
	for i, chunk := range strings.Split(strings.TrimSpace(data), "\n\n") {
		var b scriptBlock
		lines := strings.Split(strings.Trim(chunk, "\n"), "\n")
		j := 0
		for ; j < len(lines) && strings.HasPrefix(lines[j], "#"); j++ {
			b.comments = append(b.comments, lines[j])
		}
		if j == len(lines) {
			blocks = append(blocks, b) // comments only
			continue
		}
		b.cmd = lines[j]
		j++
		if j < len(lines) {
			if lines[j] != "----" {
				return nil, fmt.Errorf("block %d (%q): want ---- after the command, got %q", i+1, b.cmd, lines[j])
			}
			b.want = strings.Join(lines[j+1:], "\n")
		}
		blocks = append(blocks, b)
	}
	return blocks, nil
}

func formatScript(blocks []scriptBlock) string {
	var sb strings.Builder
	for i, b := range blocks {
		if i > 0 {
			sb.WriteString("\n")
		}
		for _, c := range b.comments {
			sb.WriteString(c + "\n")
		}
		if b.cmd == "" {
			continue
		}
		sb.WriteString(b.cmd + "\n----\n")
		if b.want != "" {
			sb.WriteString(b.want + "\n")
		}
	}
	return sb.String()
}

// runScript runs blocks on a new harness with fault f. With check, each
// output is compared with the expected one (or recorded, with -update).
func runScript(t testing.TB, blocks []scriptBlock, f memFault, check bool) *ctrlHarness {
	h := newCtrlHarness(t)
	h.store.fault = f
	for i := range blocks {
		b := &blocks[i]
		if b.cmd == "" {
			continue
		}
		got, err := h.run(b.cmd)
		if err != nil {
			t.Fatalf("%s: %v", b.cmd, err)
		}
		if !check {
			continue
		}
		if *updateScripts {
			b.want = got
			continue
		}
		if got != b.want {
			t.Errorf("%s: output differs\n--- got\n%s\n--- want\n%s", b.cmd, got, b.want)
		}
	}
	return h
}

// forEachScript runs test as a subtest for each scenario in
// testdata/controller, with the scenario's file and parsed blocks.
func forEachScript(t *testing.T, test func(t *testing.T, file string, blocks []scriptBlock)) {
	files, err := filepath.Glob(filepath.Join("testdata", "controller", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios in testdata/controller: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			blocks, err := parseScript(string(data))
			if err != nil {
				t.Fatal(err)
			}
			test(t, file, blocks)
		})
	}
}

// TestControllerScript runs each scenario without faults and compares
// every command's output with the expected one.
func TestControllerScript(t *testing.T) {
	forEachScript(t, func(t *testing.T, file string, blocks []scriptBlock) {
		h := runScript(t, blocks, memFault{}, true)
		if err := h.checkBrokersTold(); err != nil {
			t.Errorf("brokers not told the final state:\n%v", err)
		}
		if *updateScripts {
			if err := os.WriteFile(file, []byte(formatScript(blocks)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestControllerScriptFaults runs each scenario once per ZooKeeper call of
// the controller and fault kind, with the fault injected at that call, and
// checks that the end is the fault-free one.
func TestControllerScriptFaults(t *testing.T) {
	forEachScript(t, func(t *testing.T, file string, blocks []scriptBlock) {
		ref := runScript(t, blocks, memFault{}, false)
		want, wantRelaxed := ref.snapshot(true), ref.snapshot(false)
		calls := ref.store.calls
		kinds := []faultKind{faultLossBefore, faultLossAfter, faultLossAfterTwice, faultLossThrice, faultExpiry,
			faultBadVersion, faultIsrShrink, faultNewEpoch}
		for _, kind := range kinds {
			for i := range calls {
				f := memFault{at: i, kind: kind}
				h := runScript(t, blocks, f, false)
				got, exp := h.snapshot(true), want
				if kind == faultExpiry || kind == faultNewEpoch {
					// A new controller epoch rewrites controller_epoch
					// and zkVersions, and cannot see a bounce that
					// happened without a controller (a new controller
					// keeps a bounced broker's leadership at its leader
					// epoch, as Kafka's does): leaders and ISRs must agree.
					got, exp = h.snapshot(false), wantRelaxed
				}
				if kind == faultBadVersion {
					got, exp = stripVersions(got), stripVersions(want)
				}
				if kind == faultIsrShrink {
					// A leader changed an ISR: the end differs from
					// the fault-free one; the same znodes must exist,
					// and brokers must have been told what they hold.
					// A reassignment may not complete (its target left
					// the ISR): its legacy znode entry may remain, if
					// the topic znode still shows it reassigning.
					got, exp = pathsOnly(got), pathsOnly(want)
					if err := h.checkLegacyPending(); err != nil {
						t.Errorf("%s at call %d: %v", kind, i, err)
					}
					got = slices.DeleteFunc(got, func(p string) bool { return p == reassignPartitionsPath })
					exp = slices.DeleteFunc(exp, func(p string) bool { return p == reassignPartitionsPath })
				}
				if !slices.Equal(got, exp) {
					t.Errorf("%s at call %d: znodes differ\n--- got\n%s\n--- want\n%s", kind, i, strings.Join(got, "\n"), strings.Join(exp, "\n"))
					continue
				}
				if err := h.checkBrokersTold(); err != nil {
					t.Errorf("%s at call %d: brokers not told the final state:\n%v", kind, i, err)
				}
			}
		}
		t.Logf("%d controller calls of the fault-free run, each with %d fault kinds (a fault past the last call of a run with more calls is not injected)", calls, len(kinds))
	})
}

// checkLegacyPending checks that every partition left in
// /admin/reassign_partitions is still being reassigned to its replicas in
// its topic znode.
func (h *ctrlHarness) checkLegacyPending() error {
	n := h.store.nodes[reassignPartitionsPath]
	if n == nil {
		return nil
	}
	m, err := decodeLegacyReassignment(n.data)
	if err != nil {
		return err
	}
	for tp, target := range m {
		tn := h.store.nodes[topicPath(tp.Topic)]
		if tn == nil {
			return fmt.Errorf("%s lists %v for a topic that does not exist", reassignPartitionsPath, tp)
		}
		a, err := decodeTopicAssignmentFull(tp.Topic, tn.data)
		if err != nil {
			return err
		}
		if !slices.Equal(without(a.Replicas[tp.Partition], a.Removing[tp.Partition]), target) || len(a.Adding[tp.Partition])+len(a.Removing[tp.Partition]) == 0 {
			return fmt.Errorf("%s lists %v -> %v, topic znode has replicas %v adding %v removing %v", reassignPartitionsPath, tp, target,
				a.Replicas[tp.Partition], a.Adding[tp.Partition], a.Removing[tp.Partition])
		}
	}
	return nil
}

// pathsOnly keeps the znode paths of snapshot lines.
func pathsOnly(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i], _, _ = strings.Cut(l, " ")
	}
	return out
}

// stripVersions drops the zk_version fields, which a concurrent writer
// bumps.
func stripVersions(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		if j := strings.Index(l, " zk_version="); j >= 0 {
			l = l[:j]
		}
		out[i] = l
	}
	return out
}

// leaderWritesIsr is a leader's ISR write and its notification (the
// "isr" command), as another client makes it.
func (h *ctrlHarness) leaderWritesIsr(tp cluster.TopicPartition, isr []int32) {
	n := h.store.nodes[partitionStatePath(tp.Topic, tp.Partition)]
	st, err := decodePartitionState(n.data, n.stat.Version)
	if err != nil {
		h.t.Fatal(err)
	}
	st.Isr = isr
	h.store.leaderWrote[partitionStatePath(tp.Topic, tp.Partition)] = h.store.put(partitionStatePath(tp.Topic, tp.Partition), encodePartitionState(st), 0).Version
	h.store.putSequential(isrChangeNotificationSeqPrefix, encodeIsrChangeNotification([]cluster.TopicPartition{tp}))
}

// TestControllerFailoverKeepsLateIsrNotification lands a leader's ISR
// write and notification before each ZooKeeper call of a failover: the
// notification must survive (stale ones are deleted before any state is
// read, as Kafka does) so that every broker learns the new ISR.
func TestControllerFailoverKeepsLateIsrNotification(t *testing.T) {
	setup := func(h *ctrlHarness) {
		for _, cmd := range []string{"brokers 1 2 3", "topic t 0=1,2,3 1=2,3,1",
			"state t/0 leader=1 leader_epoch=0 isr=1,2,3 controller_epoch=0",
			"state t/1 leader=2 leader_epoch=0 isr=2,3,1 controller_epoch=0", "isr t/1 2,3"} {
			if _, err := h.run(cmd); err != nil {
				t.Fatal(err)
			}
		}
	}
	ref := newCtrlHarness(t)
	setup(ref)
	ref.newController(1)
	if err := ref.ctrl.failover(); err != nil {
		t.Fatal(err)
	}
	calls := ref.store.calls
	for k := 0; k <= calls; k++ {
		h := newCtrlHarness(t)
		setup(h)
		h.store.before = func(i int) {
			if i == k {
				h.leaderWritesIsr(cluster.TopicPartition{Topic: "t", Partition: 0}, []int32{1, 2})
			}
		}
		h.elect(1)
		if err := h.checkBrokersTold(); err != nil {
			t.Errorf("ISR write before call %d of the failover: brokers not told:\n%v", k, err)
		}
	}
}

// TestControllerCreateStateAfterTwoLostReplies: a partition's first state
// lands with its reply and read-back lost; a controlled shutdown then
// changes who may lead, and the retry's create is lost too. The stored
// state, written by this controller, is still its own and must be
// announced as new to the replicas.
func TestControllerCreateStateAfterTwoLostReplies(t *testing.T) {
	h := newCtrlHarness(t)
	for _, cmd := range []string{"brokers 1 2 3", "elect 1", "hold topic t 0=2,1,3"} {
		if _, err := h.run(cmd); err != nil {
			t.Fatal(err)
		}
	}
	sp := partitionStatePath("t", 0)
	h.store.writeFaults = map[string][]faultKind{sp: {faultLossAfterTwice, faultLossBefore}}
	h.ctrl.step(h.store.takeEvents())
	n := h.store.nodes[sp]
	if n == nil {
		t.Fatal("first create did not land")
	}
	if _, err := h.ctrl.controlledShutdown(2, h.store.nodes[brokerPath(2)].stat.Czxid); err != nil {
		t.Fatal(err)
	}
	h.settle()
	if err := h.checkBrokersTold(); err != nil {
		t.Fatalf("brokers not told the state this controller created:\n%v", err)
	}
	for _, s := range h.sent {
		if s.lai != nil && s.to.ID == 2 {
			for _, pa := range s.lai.Partitions {
				if pa.TopicPartition.Topic == "t" && !pa.IsNew {
					t.Errorf("LeaderAndIsr for t/0 to broker 2 not IsNew: %+v", pa)
				}
			}
		}
	}
}

// TestControllerFencedSendsNothing: controller 1's ISR removal for t/0
// lands with its reply and read-back lost (and its t/1 write keeps
// meeting a leader's ISR writes); controller 2 takes over before
// 1 retries. 1's retry finds its t/0 write landed, then is fenced on t/1:
// it must announce nothing after the fence (the successor owns the
// brokers now), and its broker queues' context is cancelled.
func TestControllerFencedSendsNothing(t *testing.T) {
	h := newCtrlHarness(t)
	for _, cmd := range []string{"brokers 1 2 3", "topic t 0=1,2,3 1=2,3,1", "elect 1", "hold kill 3"} {
		if _, err := h.run(cmd); err != nil {
			t.Fatal(err)
		}
	}
	// t/1's write, in the same batch, meets a leader's ISR write at every
	// attempt: it is left to controller 2.
	moving := slices.Repeat([]faultKind{faultBadVersion}, maxStateWriteAttempts)
	h.store.writeFaults = map[string][]faultKind{partitionStatePath("t", 0): {faultLossAfterTwice}, partitionStatePath("t", 1): moving}
	z := h.ctrl
	z.step(h.store.takeEvents())
	if len(z.unknown) != 1 {
		t.Fatalf("want t/0's write unknown, have %v", z.unknown)
	}
	h.newController(2)
	h.settle()
	spy := &fenceSpy{memStore: h.store, epoch: z.epoch, at: -1, sent: &h.sent}
	z.store = spy
	z.step(pendingEvents{})
	if spy.at < 0 {
		t.Fatal("controller 1 never met a newer controller")
	}
	for _, s := range h.sent[spy.at:] {
		if (s.lai != nil && s.lai.ControllerEpoch == z.epoch) || (s.um != nil && s.um.ControllerEpoch == z.epoch) {
			t.Errorf("controller 1 sent to broker %d after it met controller 2: %+v", s.to.ID, s)
		}
	}
	if !z.fenced {
		t.Fatal("controller 1 not fenced")
	}
	if err := h.checkSilentAfterFence(); err != nil {
		t.Fatal(err)
	}
	if z.ctx.Err() == nil {
		t.Error("fenced controller's queue context not cancelled")
	}
}

// fenceSpy is a deposed controller's view of the store: it records
// len(sent) when a reply first shows a newer controller (a failed epoch
// check or a state written with a newer epoch).
type fenceSpy struct {
	*memStore
	epoch int32
	at    int
	sent  *[]sentRequest
}

func (f *fenceSpy) mark() {
	if f.at < 0 {
		f.at = len(*f.sent)
	}
}

func (f *fenceSpy) Get(p string) ([]byte, *zk.Stat, error) {
	data, st, err := f.memStore.Get(p)
	if err == nil && strings.HasSuffix(p, "/state") {
		if s, derr := decodePartitionState(data, st.Version); derr == nil && s.ControllerEpoch > f.epoch {
			f.mark()
		}
	}
	return data, st, err
}

// Batch runs calls one by one through the spy.
func (f *fenceSpy) Batch(calls []storeCall, stop func() bool) []storeResult {
	return seqBatch(f, calls, stop, f.sentAhead)
}

func (f *fenceSpy) Multi(ops ...any) ([]zk.MultiResponse, error) {
	res, err := f.memStore.Multi(ops...)
	if err != nil && len(res) > 0 && errors.Is(res[0].Error, zk.ErrBadVersion) {
		f.mark()
	}
	return res, err
}

// adminCall runs an admin request on the controller, as a client would:
// retried against the current controller while it answers NOT_CONTROLLER
// (kadm refreshes the controller and retries).
//
//	reassign T/P R,R,... [T/P R,R,...]  AlterPartitionReassignments
//	cancel T/P ...                      AlterPartitionReassignments, null replicas
//	list [T/P ...]                      ListPartitionReassignments (none: all)
//	leaders preferred|unclean [T/P ...] ElectLeaders (none: all partitions)
func (h *ctrlHarness) adminCall(cmd string, args []string) error {
	var tps []cluster.TopicPartition
	reqs := map[cluster.TopicPartition][]int32{}
	typ := cluster.ElectPreferred
	if cmd == "leaders" {
		if len(args) == 0 {
			return fmt.Errorf("leaders preferred|unclean [T/P ...]")
		}
		if args[0] == "unclean" {
			typ = cluster.ElectUnclean
		}
		args = args[1:]
	}
	for i := 0; i < len(args); i++ {
		tp, err := parseTP(args[i])
		if err != nil {
			return err
		}
		tps = append(tps, tp)
		if cmd == "reassign" {
			if i+1 >= len(args) {
				return fmt.Errorf("reassign T/P R,R,...")
			}
			i++
			r, err := parseInts(args[i])
			if err != nil {
				return err
			}
			if r == nil {
				r = []int32{}
			}
			reqs[tp] = r
		} else {
			reqs[tp] = nil
		}
	}
	for attempt := 0; attempt < 5; attempt++ {
		c := h.ctrl
		if c == nil {
			h.printf("%s: no controller", cmd)
			return nil
		}
		var res map[cluster.TopicPartition]error
		var list []cluster.PartitionReassignment
		var err error
		switch cmd {
		case "reassign", "cancel":
			var pending map[cluster.TopicPartition]*reassignment
			res, pending, err = c.alterReassignments(reqs)
			if err == nil && len(pending) > 0 {
				// As the Session does: the retries run, then the
				// request's time is up.
				c.afterEvent(c.now())
				h.settle()
				if h.ctrl != c || c.fenced || c.stopped() {
					err = ErrNotController
				} else {
					maps.Copy(res, c.checkReassignments(pending, true))
				}
			}
		case "list":
			if len(tps) == 0 {
				tps = nil
			}
			list, err = c.listReassignments(tps)
		case "leaders":
			if len(tps) == 0 {
				tps = nil
			}
			res, err = c.electLeaders(typ, tps)
		}
		c.afterEvent(c.now())
		if err != nil {
			h.printf("%s error: %v", cmd, err)
			h.settle()
			continue
		}
		retry := false
		for _, tp := range slices.SortedFunc(maps.Keys(res), compareTP) {
			code := "NONE"
			if e := res[tp]; e != nil {
				code = adminErrName(e)
				// ZooKeeper failed under the request (UNKNOWN_SERVER_ERROR
				// to a client): the client asks again.
				retry = retry || strings.HasPrefix(code, "error: ") || code == "REQUEST_TIMED_OUT"
			}
			h.printf("result %s/%d %s", tp.Topic, tp.Partition, code)
		}
		if retry {
			h.settle()
			continue
		}
		for _, r := range list {
			h.printf("reassigning %s/%d replicas=%s adding=%s removing=%s", r.TopicPartition.Topic, r.TopicPartition.Partition,
				ints(r.Replicas), ints(r.AddingReplicas), ints(r.RemovingReplicas))
		}
		h.settle()
		return nil
	}
	h.t.Fatalf("%s never succeeded", cmd)
	return nil
}

// adminErrName is the Kafka error name of a controller operation's error.
func adminErrName(err error) string {
	for _, x := range []struct {
		err  error
		name string
	}{
		{cluster.ErrUnknownTopic, "UNKNOWN_TOPIC_OR_PARTITION"},
		{cluster.ErrInvalidReplicaAssignment, "INVALID_REPLICA_ASSIGNMENT"},
		{cluster.ErrNoReassignmentInProgress, "NO_REASSIGNMENT_IN_PROGRESS"},
		{cluster.ErrElectionNotNeeded, "ELECTION_NOT_NEEDED"},
		{cluster.ErrPreferredLeaderNotAvailable, "PREFERRED_LEADER_NOT_AVAILABLE"},
		{cluster.ErrEligibleLeadersNotAvailable, "ELIGIBLE_LEADERS_NOT_AVAILABLE"},
		{cluster.ErrTopicBeingDeleted, "INVALID_TOPIC_EXCEPTION"},
		{context.DeadlineExceeded, "REQUEST_TIMED_OUT"},
	} {
		if errors.Is(err, x.err) {
			return x.name
		}
	}
	return "error: " + err.Error()
}
