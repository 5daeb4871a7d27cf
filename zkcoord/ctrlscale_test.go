package zkcoord

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/internal/zktest"
)

// The controller at scale: a lean harness (no trace, requests counted, not
// printed) that drives one controller over a store with thousands of
// partitions through the events issue 16 times: loading the context on
// failover, creating topics, a broker failure and a controlled shutdown.
// Each event reports the store's calls and round trips (a batch is one
// round trip, however many calls it pipelines), and the requests sent.

// countSender counts the requests sent, per kind and destination.
type countSender struct {
	mu    sync.Mutex
	reqs  map[string]map[int32]int // kind -> broker -> requests
	parts map[string]int           // kind -> partitions carried
}

func newCountSender() *countSender {
	return &countSender{reqs: map[string]map[int32]int{}, parts: map[string]int{}}
}

func (s *countSender) add(kind string, to int32, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reqs[kind] == nil {
		s.reqs[kind] = map[int32]int{}
	}
	s.reqs[kind][to]++
	s.parts[kind] += n
}

func (s *countSender) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = map[string]map[int32]int{}
	s.parts = map[string]int{}
}

func (s *countSender) count(kind string) (reqs int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.reqs[kind] {
		reqs += n
	}
	return reqs
}

func (s *countSender) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("LeaderAndIsr %v (%d partitions), UpdateMetadata %v (%d), StopReplica %v (%d)",
		s.reqs["LeaderAndIsr"], s.parts["LeaderAndIsr"], s.reqs["UpdateMetadata"], s.parts["UpdateMetadata"],
		s.reqs["StopReplica"], s.parts["StopReplica"])
}

func (s *countSender) LeaderAndIsr(_ context.Context, to cluster.Broker, req cluster.LeaderAndIsrRequest) error {
	s.add("LeaderAndIsr", to.ID, len(req.Partitions))
	return nil
}

func (s *countSender) UpdateMetadata(_ context.Context, to cluster.Broker, req cluster.UpdateMetadataRequest) error {
	s.add("UpdateMetadata", to.ID, len(req.Partitions))
	return nil
}

func (s *countSender) StopReplica(_ context.Context, to cluster.Broker, req cluster.StopReplicaRequest) error {
	s.add("StopReplica", to.ID, len(req.Partitions))
	return nil
}

// countStore counts the controller's calls and round trips: each call
// outside a batch is one round trip; a batch, whose calls are pipelined on
// a real connection, is one.
type countStore struct {
	ctrlStore
	calls, rounds int
}

func (s *countStore) Get(p string) ([]byte, *zk.Stat, error) {
	s.calls++
	s.rounds++
	return s.ctrlStore.Get(p)
}

func (s *countStore) Exists(p string) (bool, *zk.Stat, error) {
	s.calls++
	s.rounds++
	return s.ctrlStore.Exists(p)
}

func (s *countStore) Children(p string) ([]string, *zk.Stat, error) {
	s.calls++
	s.rounds++
	return s.ctrlStore.Children(p)
}

func (s *countStore) Create(p string, data []byte, flags int32) (string, error) {
	s.calls++
	s.rounds++
	return s.ctrlStore.Create(p, data, flags)
}

func (s *countStore) Delete(p string, version int32) error {
	s.calls++
	s.rounds++
	return s.ctrlStore.Delete(p, version)
}

func (s *countStore) Multi(ops ...any) ([]zk.MultiResponse, error) {
	s.calls++
	s.rounds++
	return s.ctrlStore.Multi(ops...)
}

func (s *countStore) Batch(calls []storeCall, stop func() bool) []storeResult {
	s.calls += len(calls)
	s.rounds++
	return s.ctrlStore.Batch(calls, stop)
}

// scaleBackend is where the scale harness's cluster lives: memStore, or a
// real ZooKeeper.
type scaleBackend interface {
	store() ctrlStore
	// put creates or overwrites p (parents must exist, except in memStore).
	put(p string, data []byte)
	remove(p string)
	epoch() (epoch, zkVersion int32)
	// events returns the watch events of the changes since the last call
	// (memStore records them; with ZooKeeper the harness names them).
	events(named pendingEvents) pendingEvents
	// pid is the ZooKeeper server's process (0: none).
	pid() int
}

type memBackend struct{ m *memStore }

func (b memBackend) pid() int                  { return 0 }
func (b memBackend) store() ctrlStore          { return b.m }
func (b memBackend) put(p string, data []byte) { b.m.put(p, data, 0) }
func (b memBackend) remove(p string)           { b.m.remove(p) }
func (b memBackend) events(pendingEvents) pendingEvents {
	return b.m.takeEvents()
}

func (b memBackend) epoch() (int32, int32) {
	e, err := decodeControllerEpoch(b.m.nodes[controllerEpochPath].data)
	if err != nil {
		panic(err)
	}
	st := b.m.put(controllerEpochPath, encodeControllerEpoch(e+1), 0)
	return e + 1, st.Version
}

// scaleCluster is a cluster of brokers 1..3 and topics of perTopic
// partitions, RF 3, leaders spread evenly.
type scaleCluster struct {
	tb     testing.TB
	be     scaleBackend
	store  *countStore
	sender *countSender
	ctrl   *controller
	topics []string
}

func newScaleCluster(tb testing.TB, be scaleBackend) *scaleCluster {
	h := &scaleCluster{tb: tb, be: be, store: &countStore{ctrlStore: be.store()}, sender: newCountSender()}
	for id := int32(1); id <= 3; id++ {
		ep := []cluster.Endpoint{{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: fmt.Sprintf("b%d", id), Port: 9092}}
		be.put(brokerPath(id), encodeBrokerRegistration(ep, "", 0))
	}
	return h
}

// addTopics writes the assignments (and empty configs) of n partitions in
// topics of perTopic, as CreateTopics does, without the controller.
func (h *scaleCluster) addTopics(n, perTopic int) {
	for i := 0; n > 0; i++ {
		t := fmt.Sprintf("t%05d", len(h.topics))
		k := min(n, perTopic)
		a := make(map[int32][]int32, k)
		for p := 0; p < k; p++ {
			f := int32((p + i) % 3)
			a[int32(p)] = []int32{f + 1, (f+1)%3 + 1, (f+2)%3 + 1}
		}
		h.be.put(configTopicPath(t), encodeTopicConfig(map[string]string{}))
		h.be.put(topicPath(t), encodeTopicAssignment(a))
		h.topics = append(h.topics, t)
		n -= k
	}
}

// elect starts a controller on broker id (a new controller epoch) without
// running its failover.
func (h *scaleCluster) elect(id int32) {
	epoch, zkVersion := h.be.epoch()
	if h.ctrl != nil {
		h.ctrl.stop()
	}
	c := newControllerWith(controllerConfig{
		BrokerID: id, Epoch: epoch, EpochZkVersion: zkVersion,
		Store: h.store, Sender: h.sender, Log: zerolog.Nop(),
		NewQueue: func(b cluster.Broker) requestQueue { return &recQueue{to: b, send: h.sender} },
		Done:     make(chan struct{}),
		Now:      time.Now,
	})
	h.ctrl = c
	h.be.events(pendingEvents{})
}

// event is one measured controller event: its store calls and round
// trips, its duration, and the CPU time it took in this process and in
// the ZooKeeper server (zero with memStore): on a loaded machine the CPU
// times say more than the wall time.
type event struct {
	calls, rounds int
	took          time.Duration
	cpu, zkCPU    time.Duration
}

func (e event) String() string {
	return fmt.Sprintf("%d zk calls in %d round trips, %v (cpu: %v here, %v in zookeeper)", e.calls, e.rounds,
		e.took.Round(time.Millisecond), e.cpu.Round(time.Millisecond), e.zkCPU.Round(time.Millisecond))
}

// selfCPU is this process's user+system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU is the user+system CPU time of process pid, from /proc.
func procCPU(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond // USER_HZ 100
}

// measure runs fn and settles the controller (watch events delivered, work
// retried), and reports what it cost.
func (h *scaleCluster) measure(fn func()) event {
	calls, rounds := h.store.calls, h.store.rounds
	h.sender.reset()
	zkPid := h.be.pid()
	cpu, zkCPU := selfCPU(), procCPU(zkPid)
	start := time.Now()
	fn()
	h.settle()
	return event{calls: h.store.calls - calls, rounds: h.store.rounds - rounds, took: time.Since(start),
		cpu: selfCPU() - cpu, zkCPU: procCPU(zkPid) - zkCPU}
}

func (h *scaleCluster) settle() {
	for i := 0; i < 50; i++ {
		ev := h.be.events(pendingEvents{})
		if ev.empty() && !h.ctrl.hasWork() {
			return
		}
		h.ctrl.step(ev)
	}
	h.tb.Fatalf("controller did not converge: work left %+v", h.ctrl.work)
}

// leaders counts the partitions each broker leads in the context.
func (h *scaleCluster) leaders() map[int32]int {
	out := map[int32]int{}
	for _, st := range h.ctrl.states {
		out[st.Leader]++
	}
	return out
}

// scaleEvents runs the four events on n partitions and reports each.
func scaleEvents(tb testing.TB, be scaleBackend, n, perTopic int, report func(name string, e event, h *scaleCluster)) {
	h := newScaleCluster(tb, be)
	h.elect(1)
	h.settle()
	h.addTopics(n, perTopic)
	report("create", h.measure(func() {
		h.ctrl.step(h.be.events(pendingEvents{topicList: true}))
	}), h)
	if got := len(h.ctrl.states); got != n {
		tb.Fatalf("created %d partition states, want %d", got, n)
	}
	h.elect(2)
	report("failover", h.measure(func() { h.ctrl.step(pendingEvents{}) }), h)
	if got := len(h.ctrl.states); got != n {
		tb.Fatalf("new controller loaded %d partition states, want %d", got, n)
	}
	b3 := h.ctrl.alive[3]
	report("controlled-shutdown", h.measure(func() {
		if _, err := h.ctrl.controlledShutdown(3, b3.Epoch); err != nil {
			tb.Fatal(err)
		}
	}), h)
	if l := h.leaders(); l[3] != 0 {
		tb.Fatalf("broker 3 still leads %d partitions after its controlled shutdown", l[3])
	}
	// Broker 3 goes; broker 1 (leading about half now) dies.
	h.be.remove(brokerPath(3))
	h.ctrl.step(h.be.events(pendingEvents{brokers: true}))
	h.settle()
	report("broker-failure", h.measure(func() {
		h.be.remove(brokerPath(1))
		h.ctrl.step(h.be.events(pendingEvents{brokers: true}))
	}), h)
	if l := h.leaders(); l[1] != 0 || l[2] != n {
		tb.Fatalf("leaders after broker 1 died: %v, want all %d on broker 2", l, n)
	}
}

// BenchmarkControllerScale measures the controller's events over memStore
// at 10,000 and 100,000 partitions (RF 3, 3 brokers, 100 partitions a
// topic). Each iteration builds the cluster afresh; the reported figures
// are per event.
func BenchmarkControllerScale(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			times := map[string]time.Duration{}
			for i := 0; i < b.N; i++ {
				scaleEvents(b, memBackend{newMemStore()}, n, 100, func(name string, e event, h *scaleCluster) {
					times[name] += e.took
					if i == 0 {
						b.Logf("%s: %v; %v", name, e, h.sender)
					}
				})
			}
			for name, d := range times {
				b.ReportMetric(float64(d.Milliseconds())/float64(b.N), name+"-ms")
			}
		})
	}
}

// zkBackend is a real ZooKeeper (internal/zktest) under a chroot of its
// own. The test's own writes go through a second connection; the
// controller's through the zkConn it gets.
type zkBackend struct {
	tb    testing.TB
	zkPid int
	ctrl  *zkConn
	admin *zkConn
}

func newZKBackend(tb testing.TB, srv *zktest.Server) *zkBackend {
	tb.Helper()
	chroot := srv.Chroot
	if chroot == "" {
		chroot = fmt.Sprintf("/scale-%d", time.Now().UnixNano())
	}
	dial := func() *zk.Conn {
		c, _, err := zk.Connect([]string{srv.Addr}, 30*time.Second, zk.WithLogInfo(false), zk.WithLogger(zkLogger{zerolog.Nop()}))
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(c.Close)
		return c
	}
	b := &zkBackend{tb: tb, ctrl: &zkConn{c: dial(), chroot: chroot}, admin: &zkConn{c: dial(), chroot: chroot}}
	root := &zkConn{c: b.admin.c}
	for p := ""; p != chroot; {
		rest := strings.TrimPrefix(chroot, p+"/")
		next, _, _ := strings.Cut(rest, "/")
		p += "/" + next
		if err := root.createPersistent(p); err != nil {
			tb.Fatal(err)
		}
	}
	for _, p := range persistentPaths {
		if err := b.admin.createPersistent(p); err != nil {
			tb.Fatal(err)
		}
	}
	if _, err := b.admin.Create(controllerEpochPath, encodeControllerEpoch(0), 0); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		tb.Fatal(err)
	}
	return b
}

func (b *zkBackend) store() ctrlStore { return b.ctrl }
func (b *zkBackend) pid() int         { return b.zkPid }

// serverPid finds the ZooKeeper that zktest started for srv, by its
// config file on the command line (0 if none: BROKER_TEST_ZK).
func serverPid(srv *zktest.Server) int {
	if srv.DataDir == "" {
		return 0
	}
	cfg := filepath.Join(filepath.Dir(srv.DataDir), "zoo.cfg")
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && strings.Contains(string(b), cfg) {
			return pid
		}
	}
	return 0
}

func (b *zkBackend) put(p string, data []byte) {
	if _, err := b.admin.Create(p, data, 0); errors.Is(err, zk.ErrNodeExists) {
		_, err = b.admin.Set(p, data, -1)
		if err != nil {
			b.tb.Fatal(err)
		}
	} else if err != nil {
		b.tb.Fatalf("create %s: %v", p, err)
	}
}

func (b *zkBackend) remove(p string) {
	if err := b.admin.Delete(p, -1); err != nil {
		b.tb.Fatalf("delete %s: %v", p, err)
	}
}

func (b *zkBackend) epoch() (int32, int32) {
	data, _, err := b.admin.Get(controllerEpochPath)
	if err != nil {
		b.tb.Fatal(err)
	}
	e, err := decodeControllerEpoch(data)
	if err != nil {
		b.tb.Fatal(err)
	}
	st, err := b.admin.Set(controllerEpochPath, encodeControllerEpoch(e+1), -1)
	if err != nil {
		b.tb.Fatal(err)
	}
	return e + 1, st.Version
}

func (b *zkBackend) events(named pendingEvents) pendingEvents { return named }

// BenchmarkControllerScaleZK is BenchmarkControllerScale against a real
// ZooKeeper (started by internal/zktest, or BROKER_TEST_ZK), at 10,000
// partitions (SCALE_PARTITIONS overrides).
func BenchmarkControllerScaleZK(b *testing.B) {
	n := 10_000
	if s := os.Getenv("SCALE_PARTITIONS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			b.Fatal(err)
		}
	}
	srv := zktest.Start(b)
	zkPid := serverPid(srv)
	times := map[string]time.Duration{}
	for i := 0; i < b.N; i++ {
		be := newZKBackend(b, &zktest.Server{Addr: srv.Addr, Chroot: fmt.Sprintf("/scale-%d-%d", time.Now().UnixNano(), i)})
		be.zkPid = zkPid
		scaleEvents(b, be, n, 100, func(name string, e event, h *scaleCluster) {
			times[name] += e.took
			b.Logf("%s: %v; %v", name, e, h.sender)
		})
	}
	for name, d := range times {
		b.ReportMetric(float64(d.Milliseconds())/float64(b.N), name+"-ms")
	}
}
