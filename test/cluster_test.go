package test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkazk/broker/internal/harness"
)

const (
	// sessionTimeout is zookeeper.session.timeout.ms in every generated
	// config: Kafka's 2.x-era default. A killed broker's /brokers/ids/<id>
	// lasts this long.
	sessionTimeout = 6 * time.Second
	// readyTimeout bounds a broker start: process up, registered, serving.
	readyTimeout = 60 * time.Second
	// stopTimeout is how long Stop waits after SIGTERM before SIGKILL.
	stopTimeout  = 10 * time.Second
	logTailLines = 100
)

var chrootSeq atomic.Int64

// Cluster is a set of broker processes sharing one ZooKeeper chroot.
type Cluster struct {
	t       *testing.T
	Brokers []*Broker
	// Chroot is this cluster's ZooKeeper chroot; ZK is the package's shared
	// connection to the server root, so paths given to it must be prefixed
	// (see Path).
	Chroot string
	ZK     *zk.Conn
	dir    string
	base   map[string]string
}

// NewCluster starts n brokers with ids 1..n and waits until each is ready.
// overrides are server.properties entries applied on top of the generated
// ones (for every broker).
func NewCluster(t *testing.T, n int, overrides map[string]string) *Cluster {
	t.Helper()
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(i + 1)
	}
	return newCluster(t, ids, overrides)
}

// newCluster starts brokers with the given ids.
func newCluster(t *testing.T, ids []int32, overrides map[string]string) *Cluster {
	t.Helper()
	c := newStoppedCluster(t, overrides)
	for _, id := range ids {
		c.AddBroker(id)
	}
	for _, b := range c.Brokers {
		b.Start()
	}
	return c
}

// newStoppedCluster prepares the chroot and ZooKeeper connection but starts
// no broker: tests add brokers with AddBroker.
func newStoppedCluster(t *testing.T, overrides map[string]string) *Cluster {
	t.Helper()
	if zkSkip != "" {
		t.Skip(zkSkip)
	}
	c := &Cluster{
		t:      t,
		Chroot: fmt.Sprintf("/e2e-%d-%d", os.Getpid(), chrootSeq.Add(1)),
		dir:    t.TempDir(),
		base:   map[string]string{},
	}
	for k, v := range overrides {
		c.base[k] = v
	}
	c.ZK = zkConn
	conn := zkConn
	// Kafka creates a missing chroot itself; creating it here keeps the
	// harness independent of that.
	if _, err := conn.Create(c.Chroot, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		t.Fatalf("create chroot %s: %v", c.Chroot, err)
	}
	t.Cleanup(c.shutdown)
	return c
}

// connectZK opens the package's ZooKeeper session. A freshly started
// ZooKeeper on a loaded 2-core machine can take many seconds to grant the
// first session, so the wait is long and happens once, before any test.
func connectZK(addr string) (*zk.Conn, error) {
	conn, events, err := zk.Connect([]string{addr}, 20*time.Second, zk.WithLogger(quietLogger{}))
	if err != nil {
		return nil, err
	}
	if err := waitSession(events, 90*time.Second); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// waitSession waits for the connection's first session.
func waitSession(events <-chan zk.Event, timeout time.Duration) error {
	deadline := time.After(timeout)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return nil
			}
		case <-deadline:
			return fmt.Errorf("no session within %s", timeout)
		}
	}
}

type quietLogger struct{}

func (quietLogger) Printf(string, ...interface{}) {}

// AddBroker prepares (but does not start) a broker with id, its own port and
// data directory.
func (c *Cluster) AddBroker(id int32) *Broker {
	c.t.Helper()
	port := freePort(c.t)
	dir := filepath.Join(c.dir, fmt.Sprintf("broker-%d-%d", id, len(c.Brokers)))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		c.t.Fatal(err)
	}
	b := &Broker{
		c:       c,
		id:      id,
		addr:    fmt.Sprintf("127.0.0.1:%d", port),
		Dir:     dir,
		DataDir: filepath.Join(dir, "data"),
		p: &harness.Process{Bin: brokerBin, PropsPath: filepath.Join(dir, "server.properties"),
			LogPath: filepath.Join(dir, "broker.log"), Banner: "harness", ID: id},
	}
	b.Props = map[string]string{
		"broker.id":                    strconv.Itoa(int(id)),
		"listeners":                    "PLAINTEXT://" + b.addr,
		"advertised.listeners":         "PLAINTEXT://" + b.addr,
		"zookeeper.connect":            zkAddr + c.Chroot,
		"zookeeper.session.timeout.ms": strconv.Itoa(int(sessionTimeout / time.Millisecond)),
		"log.dirs":                     b.DataDir,
		// Kafka's default of 3 would leave a 1-broker cluster without
		// __consumer_offsets (FindCoordinator answers
		// COORDINATOR_NOT_AVAILABLE); 3-broker tests override it. A short
		// initial rebalance delay keeps group tests quick.
		"offsets.topic.replication.factor": "1",
		"group.initial.rebalance.delay.ms": "100",
	}
	for k, v := range c.base {
		b.Props[k] = v
	}
	c.Brokers = append(c.Brokers, b)
	return b
}

// Bootstrap is a comma-separated list of every broker's address.
func (c *Cluster) Bootstrap() string {
	addrs := make([]string, len(c.Brokers))
	for i, b := range c.Brokers {
		addrs[i] = b.Addr()
	}
	return strings.Join(addrs, ",")
}

// Seeds is Bootstrap as a slice.
func (c *Cluster) Seeds() []string { return strings.Split(c.Bootstrap(), ",") }

// Path prefixes a Kafka znode path with the cluster's chroot.
func (c *Cluster) Path(p string) string { return c.Chroot + p }

// Get reads a znode of this cluster (path without chroot).
func (c *Cluster) Get(p string) ([]byte, *zk.Stat, error) { return c.ZK.Get(c.Path(p)) }

// Broker returns the broker with id.
func (c *Cluster) Broker(id int32) *Broker {
	for _, b := range c.Brokers {
		if b.id == id {
			return b
		}
	}
	c.t.Fatalf("no broker %d", id)
	return nil
}

// Client returns a kgo client for the cluster, closed when the test ends.
func (c *Cluster) Client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Seeds()...)}, opts...)...)
	if err != nil {
		c.t.Fatalf("kgo client: %v", err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// shutdown stops every broker (SIGTERM, then SIGKILL) and, if the test
// failed, logs each broker's log tail. A broker that does not exit 0 on
// SIGTERM fails the test: SIGTERM is the documented clean stop.
func (c *Cluster) shutdown() {
	for _, b := range c.Brokers {
		if !b.Running() {
			continue
		}
		if err := b.stop(); err != nil {
			c.t.Errorf("broker %d: clean stop on SIGTERM failed: %v", b.id, err)
		}
	}
	if c.t.Failed() {
		for _, b := range c.Brokers {
			c.t.Logf("---- broker %d log tail (%s) ----\n%s", b.id, b.p.LogPath, b.LogTail(logTailLines))
		}
	}
}

// Broker is one broker process handle (an internal/harness Process). Its
// server.properties is rewritten from Props at every Start, so tests may
// change Props between runs.
type Broker struct {
	c       *Cluster
	id      int32
	addr    string
	Dir     string // everything of this broker: properties, log, data
	DataDir string // log.dirs
	Props   map[string]string
	// Env are extra environment entries of the process (KEY=value), e.g.
	// KAFKA_OPTS naming a JAAS file.
	Env []string
	p   *harness.Process
}

func (b *Broker) ID() int32    { return b.id }
func (b *Broker) Addr() string { return b.addr }

// Running reports whether the process was started and has not exited.
func (b *Broker) Running() bool { return b.p.Running() }

// Start starts the process and waits until it is ready: /brokers/ids/<id>
// is its registration and it answers ApiVersions and Metadata listing
// itself. If a previous (killed) process's ephemeral znode is still there,
// Start first waits for its ZooKeeper session to expire, as an operator
// restarting Kafka 2.x must: a broker cannot tell a dead session from a live
// duplicate and refuses to register over it.
func (b *Broker) Start() {
	b.c.t.Helper()
	path := b.c.Path(fmt.Sprintf("/brokers/ids/%d", b.id))
	if err := harness.WaitUnregistered(b.c.ZK, path, sessionTimeout+20*time.Second); err != nil {
		b.c.t.Fatal(err)
	}
	if err := b.StartProcess(); err != nil {
		b.c.t.Fatal(err)
	}
	b.WaitReady(readyTimeout)
}

// StartProcess starts the broker without waiting for it to be ready.
func (b *Broker) StartProcess() error {
	level := "info"
	if os.Getenv("BROKER_TEST_LOG") == "debug" {
		level = "debug"
	}
	return b.p.Start(b.Props, append([]string{"BROKER_LOG_LEVEL=" + level}, b.Env...))
}

// WaitReady waits until the running process is registered and serving. It
// fails at once if the process exits.
func (b *Broker) WaitReady(timeout time.Duration) {
	t := b.c.t
	t.Helper()
	done := b.p.Done()
	if done == nil {
		t.Fatalf("broker %d was never started", b.id)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.RequestRetries(0), kgo.DialTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	path := b.c.Path(fmt.Sprintf("/brokers/ids/%d", b.id))
	deadline := time.Now().Add(timeout)
	start := time.Now()
	var last error
	for {
		select {
		case <-done:
			t.Fatalf("broker %d exited while starting (%v); log tail:\n%s", b.id, b.p.Err(), b.LogTail(logTailLines))
		default:
		}
		last = harness.Ready(b.c.ZK, path, cl, b.id)
		if last == nil {
			t.Logf("broker %d ready at %s after %s", b.id, b.addr, time.Since(start).Round(time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker %d not ready within %s: %v (%s); log tail:\n%s", b.id, timeout, last, b.addr, b.LogTail(logTailLines))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Stop sends SIGTERM and waits for the exit (SIGKILL after 10 s). A
// non-zero exit or the SIGKILL fails the test.
func (b *Broker) Stop() {
	b.c.t.Helper()
	if err := b.stop(); err != nil {
		b.c.t.Fatalf("broker %d: %v; log tail:\n%s", b.id, err, b.LogTail(logTailLines))
	}
}

func (b *Broker) stop() error { return b.p.Term(stopTimeout) }

// Kill sends SIGKILL to the broker's process group and waits for the exit.
func (b *Broker) Kill() { b.p.Kill() }

// Pause freezes the process (SIGSTOP), as a long GC pause or a hung VM would.
func (b *Broker) Pause() {
	if err := b.p.Pause(); err != nil {
		b.c.t.Fatal(err)
	}
}

// Resume continues a paused process (SIGCONT).
func (b *Broker) Resume() {
	if err := b.p.Resume(); err != nil {
		b.c.t.Fatal(err)
	}
}

// Restart stops the broker cleanly and starts it again.
func (b *Broker) Restart() {
	b.c.t.Helper()
	b.Stop()
	b.Start()
}

// WaitExit waits for the process to exit on its own and returns its exit
// code; it kills the process and fails the test after timeout.
func (b *Broker) WaitExit(timeout time.Duration) int {
	b.c.t.Helper()
	select {
	case <-b.p.Done():
	case <-time.After(timeout):
		b.Kill()
		b.c.t.Fatalf("broker %d still running after %s; log tail:\n%s", b.id, timeout, b.LogTail(logTailLines))
	}
	return b.p.ExitCode()
}

// Log returns everything the broker wrote to stdout and stderr, over all
// its starts.
func (b *Broker) Log() string { return b.p.Log() }

// LogContains reports whether the broker's log contains substr.
func (b *Broker) LogContains(substr string) bool { return b.p.LogContains(substr) }

// LogTail returns the last n lines of the broker's log.
func (b *Broker) LogTail(n int) string { return b.p.LogTail(n) }

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

var portMu sync.Mutex
var portsUsed = map[int]bool{}

// freePort returns a loopback port that was free a moment ago and that no
// other broker of this test binary was given.
func freePort(t testing.TB) int {
	t.Helper()
	portMu.Lock()
	defer portMu.Unlock()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("free port: %v", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !portsUsed[port] {
			portsUsed[port] = true
			return port
		}
	}
	t.Fatal("no free port")
	return 0
}

// eventually polls fn every 100 ms until it returns nil, failing the test
// with fn's last error after timeout.
func eventually(t testing.TB, timeout time.Duration, fn func() error) {
	t.Helper()
	if err := poll(timeout, fn); err != nil {
		t.Fatal(err)
	}
}

// poll is eventually for callers that go on after a timeout: it returns
// fn's last error, or nil once fn succeeds.
func poll(timeout time.Duration, fn func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := fn()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s: %w", timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
