package test

// `scripts/cluster.sh roll` (issue 15) on a producing three-broker cluster
// that the script itself started (its own layout: CLUSTER_DIR, ids 0..2,
// BASE_PORT+id), sharing the test's ZooKeeper under a chroot of its own:
// every broker is restarted with a controlled shutdown, under-replicated
// partitions back to 0 between brokers, the controller last; nothing
// acknowledged is lost and, sampled from ZooKeeper throughout, no partition
// ever has fewer than min.insync.replicas in its ISR.

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kadm"
)

// freePortRange returns base such that base..base+n-1 are free loopback
// ports no other broker of this binary was given.
func freePortRange(t *testing.T, n int) int {
	t.Helper()
	portMu.Lock()
	defer portMu.Unlock()
	for try := 0; try < 200; try++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		base := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if base+n > 65535 {
			continue
		}
		ok := true
		for p := base; p < base+n && ok; p++ {
			if portsUsed[p] {
				ok = false
				break
			}
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		if ok {
			for p := base; p < base+n; p++ {
				portsUsed[p] = true
			}
			return base
		}
	}
	t.Fatal("no free port range")
	return 0
}

// scriptCluster is a cluster that scripts/cluster.sh started in its own
// layout; Cluster gives the ZooKeeper readers and clients (Brokers hold
// only ids, addresses and data dirs: the script owns the processes).
type scriptCluster struct {
	*Cluster
	run func(timeout time.Duration, args ...string) (string, error)
}

// startScriptCluster runs `cluster.sh up` for n brokers (ids 0..n-1) in a
// temporary CLUSTER_DIR on free ports, with the test's ZooKeeper under a
// new chroot, and `cluster.sh down` at the end.
func startScriptCluster(t *testing.T, n int) *scriptCluster {
	t.Helper()
	if zkSkip != "" {
		t.Skip(zkSkip)
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	_, zkPort, err := net.SplitHostPort(zkAddr)
	if err != nil {
		t.Fatal(err)
	}
	// BROKER_TEST_CLUSTER_SH runs another copy of the script (for a branch
	// whose cluster.sh is not merged yet); it must sit in a tree with
	// config/ (and cmd/, for kafka-admin) beside scripts/.
	clusterSh := filepath.Join(root, "scripts", "cluster.sh")
	if alt := os.Getenv("BROKER_TEST_CLUSTER_SH"); alt != "" {
		clusterSh = alt
	}
	c := &Cluster{t: t, Chroot: fmt.Sprintf("/sh-%d-%d", os.Getpid(), chrootSeq.Add(1)), ZK: zkConn, dir: t.TempDir()}
	if _, err := c.ZK.Create(c.Chroot, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("create chroot %s: %v", c.Chroot, err)
	}
	base, httpBase := freePortRange(t, n), freePortRange(t, n)
	for id := int32(0); id < int32(n); id++ {
		c.Brokers = append(c.Brokers, &Broker{c: c, id: id, addr: fmt.Sprintf("127.0.0.1:%d", base+int(id)),
			DataDir: filepath.Join(c.dir, fmt.Sprintf("broker-%d", id), "data")})
	}
	overrides := []string{
		"min.insync.replicas=2", "unclean.leader.election.enable=false", "auto.create.topics.enable=false",
		"auto.leader.rebalance.enable=false", "replica.lag.time.max.ms=4000", "replica.fetch.wait.max.ms=500",
		"zookeeper.session.timeout.ms=6000", "group.initial.rebalance.delay.ms=100",
	}
	env := append(os.Environ(),
		"CLUSTER_DIR="+c.dir, fmt.Sprintf("BROKERS=%d", n), fmt.Sprintf("BASE_PORT=%d", base),
		fmt.Sprintf("HTTP_BASE_PORT=%d", httpBase), "ZK_PORT="+zkPort, "ZK_CHROOT="+c.Chroot,
		"BROKER_BIN="+brokerBin, "BROKER_OVERRIDES="+strings.Join(overrides, " "), "READY_TIMEOUT=90")
	sc := &scriptCluster{Cluster: c}
	sc.run = func(timeout time.Duration, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, clusterSh, args...)
		cmd.Env, cmd.Dir = env, root
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := sc.run(3*time.Minute, "up"); err != nil {
		t.Fatalf("cluster.sh up: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := sc.run(2*time.Minute, "down"); err != nil {
			t.Errorf("cluster.sh down: %v\n%s", err, out)
		}
		if t.Failed() {
			for id := 0; id < n; id++ {
				data, _ := os.ReadFile(filepath.Join(c.dir, fmt.Sprintf("broker-%d", id), "broker.log"))
				t.Logf("---- broker %d log tail ----\n%s", id, tailLines(string(data), logTailLines))
			}
		}
	})
	return sc
}

// createScriptTopic creates topic with RF 3 through kadm and waits for full
// ISRs.
func createScriptTopic(t *testing.T, c *Cluster, topic string, parts int32) {
	t.Helper()
	adm := kadm.NewClient(c.Client())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, parts, 3, nil, topic); err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	for p := int32(0); p < parts; p++ {
		c.waitState(t, topic, p, 30*time.Second, func(s partState) error {
			if s.Leader < 0 || len(s.ISR) != 3 {
				return fmt.Errorf("want a leader and 3 in the ISR")
			}
			return nil
		})
	}
}

// TestClusterRollScript: see the file comment.
func TestClusterRollScript(t *testing.T) {
	const n = 3
	sc := startScriptCluster(t, n)
	c, script := sc.Cluster, sc.run
	const topic, parts = "roll", 6
	createScriptTopic(t, c, topic, parts)
	ctl, err := c.ControllerID()
	if err != nil {
		t.Fatal(err)
	}
	registered := func() map[int32]int64 {
		out := map[int32]int64{}
		for id := int32(0); id < n; id++ {
			if _, st, err := c.Get(fmt.Sprintf("/brokers/ids/%d", id)); err == nil {
				out[id] = st.Czxid
			}
		}
		return out
	}
	before := registered()

	start := time.Now()
	prod := startProducer(t, c, topic, parts, topic)
	prod.waitAcks(-1, 500, start, 30*time.Second)
	samp := startISRSampler(t, c, map[string]int32{topic: parts}, 2, 100*time.Millisecond)
	rollStart := time.Now()
	out, err := script(10*time.Minute, "roll")
	rollDur := time.Since(rollStart)
	t.Logf("cluster.sh roll (%s):\n%s", rollDur.Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("cluster.sh roll: %v", err)
	}
	after := registered()
	// Each broker re-registered (a new ephemeral znode has a new czxid),
	// and the controller of the start did so last.
	var order []int32
	for id := int32(0); id < n; id++ {
		if after[id] == before[id] || after[id] == 0 {
			t.Errorf("broker %d was not restarted: /brokers/ids/%d czxid %d before and %d after", id, id, before[id], after[id])
		}
		order = append(order, id)
	}
	slices.SortFunc(order, func(a, b int32) int { return int(after[a] - after[b]) })
	t.Logf("restart order (by re-registration): %v; controller at the start %d", order, ctl)
	if order[len(order)-1] != ctl {
		t.Errorf("the controller %d was not restarted last: order %v", ctl, order)
	}
	prod.waitAcks(-1, 300, time.Now(), 30*time.Second)
	acked := prod.Stop(false)
	samp.check(t, "during the roll")
	for p := int32(0); p < parts; p++ {
		c.waitState(t, topic, p, 30*time.Second, func(s partState) error {
			if len(s.ISR) != 3 {
				return fmt.Errorf("ISR %v after the roll", s.ISR)
			}
			return nil
		})
	}
	res := checkHistory(t, "after the roll", recsOf(acked), readAll(t, c.Seeds(), topic, readTimeout), false)
	b50, b99, bn := latencyPercentiles(acked, start, rollStart)
	d50, d99, dn := latencyPercentiles(acked, rollStart, rollStart.Add(rollDur))
	logFigures(t, t.Name(), map[string]any{"roll_ms": rollDur.Milliseconds(), "acked": res.Acked, "lost": res.Lost,
		"p50_during_ms": ms(d50), "p99_during_ms": ms(d99), "records_during": dn, "p50_before_ms": ms(b50), "p99_before_ms": ms(b99), "records_before": bn})
	t.Logf("longest gap between acknowledgements of p0 during the roll: %s", longestGap(acked, 0, rollStart, rollStart.Add(rollDur)).Round(time.Millisecond))
}

// TestClusterDecommissionScript: `scripts/cluster.sh decommission 3` on a
// producing four-broker cluster moves every replica off broker 3 (through
// kafka-admin's reassignment), then stops it: the topic znode names broker 3
// nowhere, /brokers/ids/3 is gone, its partition directories are deleted,
// nothing acknowledged is lost and no partition falls below
// min.insync.replicas on the way.
func TestClusterDecommissionScript(t *testing.T) {
	const n = 4
	sc := startScriptCluster(t, n)
	c := sc.Cluster
	const topic, parts = "decom", 8
	createScriptTopic(t, c, topic, parts)
	const gone = 3
	held := 0
	for _, r := range c.currentAssignment(t, topic) {
		if slices.Contains(r, gone) {
			held++
		}
	}
	if held == 0 {
		t.Fatalf("broker %d holds no replica of %s: nothing to decommission", gone, topic)
	}
	start := time.Now()
	prod := startProducer(t, c, topic, parts, topic)
	prod.waitAcks(-1, 500, start, 30*time.Second)
	samp := startISRSampler(t, c, map[string]int32{topic: parts}, 2, 100*time.Millisecond)
	began := time.Now()
	out, err := sc.run(5*time.Minute, "decommission", fmt.Sprint(gone))
	took := time.Since(began)
	t.Logf("cluster.sh decommission %d (%s):\n%s", gone, took.Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("cluster.sh decommission %d: %v", gone, err)
	}
	final := c.currentAssignment(t, topic)
	for p, r := range final {
		if slices.Contains(r, gone) || len(r) != 3 {
			t.Errorf("%s-%d after the decommission: replicas %v, want 3 without broker %d", topic, p, r, gone)
		}
	}
	if ok, _ := c.Registered(gone); ok {
		t.Errorf("/brokers/ids/%d still registered after the decommission", gone)
	}
	for p := range final {
		if dirs := replicaDirs(c.Broker(gone), topic, p); len(dirs) > 0 {
			t.Errorf("broker %d still has %v of %s-%d after the decommission", gone, dirs, topic, p)
		}
	}
	prod.waitAcks(-1, 300, time.Now(), 30*time.Second)
	acked := prod.Stop(false)
	samp.check(t, "during the decommission")
	var seeds []string
	for _, b := range c.Brokers {
		if b.ID() != gone {
			seeds = append(seeds, b.Addr())
		}
	}
	checkHistory(t, "after the decommission", recsOf(acked), readAll(t, seeds, topic, readTimeout), false)
	t.Logf("decommission of broker %d (%d of %d partitions held a replica there) took %s", gone, held, parts, took.Round(time.Millisecond))
}
