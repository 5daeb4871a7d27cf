package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The compose backend: the same workload, sampler, checker, figures and
// report as Run, against the docker-compose cluster (docker-compose.yml:
// ZooKeeper and brokers 1..3 on one user-defined network, each broker
// publishing its EXTERNAL listener on the host's loopback), with the
// faults of reliability.md §5's docker column: docker kill / stop / pause,
// docker network disconnect, and iptables and tc run in a container's
// network namespace through nsenter from the host (the broker image is
// FROM scratch, so it has neither; nsenter needs no NET_ADMIN on the
// container).

// ZKNode is one ZooKeeper server of the compose cluster.
type ZKNode struct {
	Name      string // compose service (zookeeper, zookeeper-2, ...)
	HostPort  string // its client port published on the host (127.0.0.1:N)
	Container string // container id
}

// ComposeConfig names a running compose cluster.
type ComposeConfig struct {
	// Brokers maps broker id to its host address (127.0.0.1:N, the
	// advertised EXTERNAL listener) and Containers to its container id.
	Brokers    map[int32]string
	Containers map[int32]string
	ZK         []ZKNode
	Network    string // the compose network (<project>_kafkazk)
	// ClientOpts are added to every kgo client (the secured variant's
	// SASL_SSL settings).
	ClientOpts []kgo.Opt
	Dir        string // scratch directory (copies of the data dirs)
	Seed       int64
	Logf       func(string, ...any)
	// Watch logs every change of the sampled cluster state as it happens
	// (the demo's timeline).
	Watch bool
}

// Docker runs the docker-column faults on one compose cluster.
type Docker struct {
	cfg ComposeConfig
	mu  sync.Mutex
	ips map[string]string // container -> address on the network
	// rules are the iptables rules added per container, removed on heal.
	rules map[string][][]string
	// shaped are the containers with a root qdisc added.
	shaped map[string]bool
	// netem is false once the kernel refused the netem qdisc.
	netem   bool
	checked bool
}

// NewDocker records every container's address on the network (to
// reconnect a disconnected container with the same one).
func NewDocker(cfg ComposeConfig) (*Docker, error) {
	d := &Docker{cfg: cfg, ips: map[string]string{}, rules: map[string][][]string{}, shaped: map[string]bool{}}
	var all []string
	for _, c := range cfg.Containers {
		all = append(all, c)
	}
	for _, z := range cfg.ZK {
		all = append(all, z.Container)
	}
	for _, c := range all {
		out, err := d.output("inspect", "-f", fmt.Sprintf(`{{with index .NetworkSettings.Networks %q}}{{.IPAddress}}{{end}}`, cfg.Network), c)
		if err != nil {
			return nil, err
		}
		ip := strings.TrimSpace(out)
		if ip == "" {
			return nil, fmt.Errorf("container %s has no address on network %s", c, cfg.Network)
		}
		d.ips[c] = ip
	}
	return d, nil
}

func (d *Docker) output(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

func (d *Docker) docker(args ...string) error {
	_, err := d.output(args...)
	return err
}

// nsenter runs a command of the host (iptables, tc) in the network
// namespace of a running container.
func (d *Docker) nsenter(container string, args ...string) (string, error) {
	out, err := d.output("inspect", "-f", "{{.State.Pid}}", container)
	if err != nil {
		return "", err
	}
	pid := strings.TrimSpace(out)
	if pid == "" || pid == "0" {
		return "", fmt.Errorf("container %s is not running", container)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var b bytes.Buffer
	cmd := exec.CommandContext(ctx, "nsenter", append([]string{"-t", pid, "-n"}, args...)...)
	cmd.Stdout, cmd.Stderr = &b, &b
	if err := cmd.Run(); err != nil {
		return b.String(), fmt.Errorf("nsenter -t %s -n %s: %w: %s", pid, strings.Join(args, " "), err, strings.TrimSpace(b.String()))
	}
	return b.String(), nil
}

func (d *Docker) state(container, field string) string {
	out, err := d.output("inspect", "-f", "{{.State."+field+"}}", container)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(out)
}

// connected reports whether the container is attached to the network.
func (d *Docker) connected(container string) bool {
	out, err := d.output("inspect", "-f", fmt.Sprintf(`{{with index .NetworkSettings.Networks %q}}yes{{end}}`, d.cfg.Network), container)
	return err == nil && strings.TrimSpace(out) == "yes"
}

// Disconnect is docker network disconnect.
func (d *Docker) Disconnect(container string) error {
	return d.docker("network", "disconnect", "-f", d.cfg.Network, container)
}

// Connect is docker network connect with the container's old address and
// its service name as alias.
func (d *Docker) Connect(container, alias string) error {
	return d.docker("network", "connect", "--ip", d.ips[container], "--alias", alias, d.cfg.Network, container)
}

// DropPort adds iptables rules in the container's namespace dropping TCP
// to and from port (9092: broker to broker; 2181: broker to ZooKeeper).
func (d *Docker) DropPort(container string, port int) error {
	for _, r := range [][]string{
		{"INPUT", "-p", "tcp", "--dport", strconv.Itoa(port), "-j", "DROP"},
		{"OUTPUT", "-p", "tcp", "--dport", strconv.Itoa(port), "-j", "DROP"},
	} {
		if _, err := d.nsenter(container, append([]string{"iptables", "-w", "-I"}, r...)...); err != nil {
			return err
		}
		d.mu.Lock()
		d.rules[container] = append(d.rules[container], r)
		d.mu.Unlock()
	}
	return nil
}

// Shape adds a root qdisc on eth0 in the container's namespace: netem
// delay and rate; where the kernel has no netem (sch_netem not built), a
// tbf rate limit only, and the returned note says so.
func (d *Docker) Shape(container string, delay time.Duration, kbit int) (string, error) {
	d.mu.Lock()
	tryNetem := !d.checked || d.netem
	d.mu.Unlock()
	if tryNetem {
		_, err := d.nsenter(container, "tc", "qdisc", "replace", "dev", "eth0", "root", "netem",
			"delay", fmt.Sprintf("%dms", delay.Milliseconds()), "rate", fmt.Sprintf("%dkbit", kbit))
		d.mu.Lock()
		d.checked = true
		d.netem = err == nil
		d.mu.Unlock()
		if err == nil {
			d.mu.Lock()
			d.shaped[container] = true
			d.mu.Unlock()
			return "", nil
		}
		if !strings.Contains(err.Error(), "unknown") {
			return "", err
		}
	}
	if _, err := d.nsenter(container, "tc", "qdisc", "replace", "dev", "eth0", "root", "tbf",
		"rate", fmt.Sprintf("%dkbit", kbit), "burst", "32kbit", "latency", "400ms"); err != nil {
		return "", err
	}
	d.mu.Lock()
	d.shaped[container] = true
	d.mu.Unlock()
	return fmt.Sprintf("this kernel has no netem qdisc: %d kbit/s (tbf) without the %s delay", kbit, delay), nil
}

// Heal removes the iptables rules and qdiscs this Docker added, and
// reconnects containers to the network.
func (d *Docker) Heal(container, alias string) error {
	var errs []error
	d.mu.Lock()
	rules := d.rules[container]
	delete(d.rules, container)
	shaped := d.shaped[container]
	delete(d.shaped, container)
	d.mu.Unlock()
	for _, r := range rules {
		if _, err := d.nsenter(container, append([]string{"iptables", "-w", "-D"}, r...)...); err != nil {
			errs = append(errs, err)
		}
	}
	if shaped {
		if _, err := d.nsenter(container, "tc", "qdisc", "del", "dev", "eth0", "root"); err != nil {
			errs = append(errs, err)
		}
	}
	if !d.connected(container) {
		if err := d.Connect(container, alias); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// addrProxy is a Proxy that only names an address: a compose broker is
// reached directly on its published port, and its Block/Heal/Close do
// nothing to traffic.
func addrProxy(addr string) *Proxy {
	p := &Proxy{Addr: addr, blocked: map[string]bool{}, conns: map[net.Conn]struct{}{}, closed: true}
	p.cond = sync.NewCond(&p.mu)
	return p
}

// ConnectCompose builds a Cluster naming the compose cluster's brokers
// (no chroot: docker-compose.yml's brokers use ZooKeeper's root) and a
// ZooKeeper session to every server of cfg.ZK.
func ConnectCompose(cfg ComposeConfig) (*Cluster, error) {
	var hosts []string
	for _, z := range cfg.ZK {
		hosts = append(hosts, z.HostPort)
	}
	conn, events, err := zk.Connect(hosts, 20*time.Second, zk.WithLogger(quietZK{}))
	if err != nil {
		return nil, fmt.Errorf("ZooKeeper %v: %w", hosts, err)
	}
	deadline := time.After(60 * time.Second)
wait:
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				break wait
			}
		case <-deadline:
			conn.Close()
			return nil, fmt.Errorf("no ZooKeeper session to %v within 60 s", hosts)
		}
	}
	go func() {
		for range events {
		}
	}()
	c := &Cluster{ZK: conn, logf: cfg.Logf, clientOpts: cfg.ClientOpts}
	ids := make([]int32, 0, len(cfg.Brokers))
	for id := range cfg.Brokers {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		c.Brokers = append(c.Brokers, &Broker{ID: id, Listen: cfg.Brokers[id], Proxy: addrProxy(cfg.Brokers[id]), c: c})
	}
	return c, nil
}

// ComposeEnv is the nemesis's view of a compose cluster: Env's leader
// lookups and notes, with docker faults.
type ComposeEnv struct {
	*Env
	D   *Docker
	cfg ComposeConfig
}

func brokerAlias(id int32) string { return fmt.Sprintf("broker-%d", id) }

// WaitBroker waits until broker id is registered and answers Metadata
// naming itself on its host address.
func (e *ComposeEnv) WaitBroker(id int32, timeout time.Duration) error {
	opts := append([]kgo.Opt{kgo.SeedBrokers(e.cfg.Brokers[id]), kgo.RequestRetries(0), kgo.DialTimeout(2 * time.Second),
		kgo.ClientID("chaos-ready")}, e.cfg.ClientOpts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	return waitFor(timeout, func() error {
		ok, _, err := e.C.ZK.Exists(fmt.Sprintf("/brokers/ids/%d", id))
		if err != nil || !ok {
			return fmt.Errorf("broker %d not registered (%v)", id, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		req := kmsg.NewPtrMetadataRequest()
		req.Topics = []kmsg.MetadataRequestTopic{}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		for _, b := range resp.Brokers {
			if b.NodeID == id {
				return nil
			}
		}
		return fmt.Errorf("broker %d: metadata does not list itself", id)
	})
}

func (e *ComposeEnv) check(what string, err error) {
	if err != nil {
		e.note("%s: %v", what, err)
	}
}

func (e *ComposeEnv) startBroker(id int32) {
	e.check(fmt.Sprintf("docker start broker-%d", id), e.D.docker("start", e.cfg.Containers[id]))
	e.check(fmt.Sprintf("broker %d back", id), e.WaitBroker(id, 120*time.Second))
}

// Kill is docker kill (SIGKILL), down for d, then docker start.
func (e *ComposeEnv) Kill(id int32, d time.Duration) {
	end := e.H.Fault("docker-kill", id, e.Led(id))
	e.check("docker kill", e.D.docker("kill", e.cfg.Containers[id]))
	time.Sleep(d)
	e.startBroker(id)
	end()
}

// Stop is docker stop -t 30 (SIGTERM: controlled shutdown), down for d,
// then docker start.
func (e *ComposeEnv) Stop(id int32, d time.Duration) {
	end := e.H.Fault("docker-stop", id, e.Led(id))
	e.check("docker stop", e.D.docker("stop", "-t", "30", e.cfg.Containers[id]))
	time.Sleep(d)
	e.startBroker(id)
	end()
}

// Pause is docker pause (cgroup freezer) for d, then docker unpause.
func (e *ComposeEnv) Pause(id int32, d time.Duration) {
	kind := "docker-pause-short"
	if d > SessionTimeout {
		kind = "docker-pause-long"
	}
	end := e.H.Fault(kind, id, e.Led(id))
	e.check("docker pause", e.D.docker("pause", e.cfg.Containers[id]))
	time.Sleep(d)
	e.check("docker unpause", e.D.docker("unpause", e.cfg.Containers[id]))
	end()
}

// Partition is docker network disconnect (full isolation: peers,
// ZooKeeper and the host's clients) for d, then docker network connect.
func (e *ComposeEnv) Partition(id int32, d time.Duration) {
	end := e.H.Fault("network-disconnect", id, e.Led(id))
	c := e.cfg.Containers[id]
	e.check("docker network disconnect", e.D.Disconnect(c))
	time.Sleep(d)
	e.check("docker network connect", e.D.Connect(c, brokerAlias(id)))
	end()
}

// CutPort drops the broker's TCP on port (9092: its peers; 2181: ZooKeeper)
// in its namespace for d; the host's clients still reach it.
func (e *ComposeEnv) CutPort(id int32, port int, d time.Duration) {
	kind := "iptables-cut-from-brokers"
	if port == 2181 {
		kind = "iptables-zk-cut"
	}
	end := e.H.Fault(kind, id, e.Led(id))
	c := e.cfg.Containers[id]
	e.check("iptables", e.D.DropPort(c, port))
	time.Sleep(d)
	e.check("heal", e.D.Heal(c, brokerAlias(id)))
	end()
}

// Latency shapes every broker's and ZooKeeper server's eth0 (tc netem
// delay and rate) for d.
func (e *ComposeEnv) Latency(delay time.Duration, kbit int, d time.Duration) {
	end := e.H.Fault("tc-latency", -1, nil)
	noted := false
	shape := func(c string) {
		n, err := e.D.Shape(c, delay, kbit)
		e.check("tc", err)
		if n != "" && !noted {
			e.note("%s", n)
			noted = true
		}
	}
	for _, id := range e.ids() {
		shape(e.cfg.Containers[id])
	}
	for _, z := range e.cfg.ZK {
		shape(z.Container)
	}
	time.Sleep(d)
	for _, id := range e.ids() {
		e.check("heal", e.D.Heal(e.cfg.Containers[id], brokerAlias(id)))
	}
	for _, z := range e.cfg.ZK {
		e.check("heal", e.D.Heal(z.Container, z.Name))
	}
	end()
}

// ZKMode is a ZooKeeper server's srvr mode: leader, follower, standalone;
// "not serving" or "down".
func ZKMode(hostport string) string {
	c, err := net.DialTimeout("tcp", hostport, time.Second)
	if err != nil {
		return "down"
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("srvr")); err != nil {
		return "down"
	}
	var b bytes.Buffer
	_, _ = b.ReadFrom(c)
	for _, l := range strings.Split(b.String(), "\n") {
		if m, ok := strings.CutPrefix(l, "Mode: "); ok {
			return strings.TrimSpace(m)
		}
	}
	if b.Len() == 0 {
		return "down"
	}
	return "not serving"
}

// ZKLeader is the ensemble leader (or the standalone server).
func (e *ComposeEnv) ZKLeader() ZKNode {
	for _, z := range e.cfg.ZK {
		if m := ZKMode(z.HostPort); m == "leader" || m == "standalone" {
			return z
		}
	}
	return e.cfg.ZK[0]
}

// sessions are the ephemeral owners of /brokers/ids/<id>.
func (e *ComposeEnv) sessions() map[int32]int64 {
	out := map[int32]int64{}
	for _, id := range e.ids() {
		if _, st, err := e.C.ZK.Get(fmt.Sprintf("/brokers/ids/%d", id)); err == nil {
			out[id] = st.EphemeralOwner
		}
	}
	return out
}

// KillZK is docker kill of the ZooKeeper leader (the only server, or the
// ensemble's leader), down for d, then docker start, waiting until it
// serves again. With an ensemble it also creates a topic during the outage
// (a controller write only a quorum takes) and requires every broker to
// keep the ZooKeeper session it had: either failing is the run's error.
func (e *ComposeEnv) KillZK(d time.Duration) {
	z := e.ZKLeader()
	before := e.sessions()
	end := e.H.Fault("docker-kill-zookeeper", -1, nil)
	e.Logf("docker kill %s (%s)", z.Name, ZKMode(z.HostPort))
	e.check("docker kill "+z.Name, e.D.docker("kill", z.Container))
	if len(e.cfg.ZK) > 1 {
		topic := fmt.Sprintf("%s-during-zk-outage", e.Topic)
		if err := e.C.CreateTopic(topic, 1, map[string]string{"min.insync.replicas": "2"}); err != nil {
			e.fail("topic %s created during the ZooKeeper outage: %v", topic, err)
		} else {
			e.Logf("topic %s created during the outage: leader and full ISR", topic)
		}
	}
	time.Sleep(d)
	e.check("docker start "+z.Name, e.D.docker("start", z.Container))
	if err := waitFor(120*time.Second, func() error {
		if m := ZKMode(z.HostPort); m != "leader" && m != "follower" && m != "standalone" {
			return fmt.Errorf("%s: %s", z.Name, m)
		}
		return nil
	}); err != nil {
		e.fail("ZooKeeper %s not back in the ensemble: %v", z.Name, err)
	} else {
		e.Logf("%s back as %s", z.Name, ZKMode(z.HostPort))
		if len(e.cfg.ZK) > 1 {
			if err := waitFor(60*time.Second, func() error { return e.servesBrokers(z) }); err != nil {
				e.fail("ZooKeeper %s alone does not serve /brokers/ids: %v", z.Name, err)
			}
		}
	}
	end()
	if len(e.cfg.ZK) > 1 {
		after := e.sessions()
		for id, s := range before {
			if after[id] != s {
				e.fail("broker %d's ZooKeeper session changed across the outage (%#x -> %#x)", id, s, after[id])
			}
		}
	}
}

// servesBrokers checks that ZooKeeper node z, asked alone, lists every
// broker under /brokers/ids (it caught up with the ensemble).
func (e *ComposeEnv) servesBrokers(z ZKNode) error {
	conn, events, err := zk.Connect([]string{z.HostPort}, 10*time.Second, zk.WithLogger(quietZK{}))
	if err != nil {
		return err
	}
	defer conn.Close()
	timeout := time.After(10 * time.Second)
session:
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				break session
			}
		case <-timeout:
			return fmt.Errorf("no session with %s alone within 10 s", z.Name)
		}
	}
	go func() {
		for range events {
		}
	}()
	ids, _, err := conn.Children("/brokers/ids")
	if err != nil {
		return err
	}
	if len(ids) != len(e.cfg.Containers) {
		return fmt.Errorf("%s lists brokers %v", z.Name, ids)
	}
	return nil
}

func (e *ComposeEnv) fail(format string, args ...any) {
	e.note(format, args...)
	if e.Err == nil {
		e.Err = fmt.Errorf(format, args...)
	}
}

func (e *ComposeEnv) ids() []int32 {
	ids := make([]int32, 0, len(e.cfg.Containers))
	for id := range e.cfg.Containers {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// Recover unpauses, reconnects, removes iptables rules and qdiscs, and
// starts every container that is not running; then waits for every broker.
func (e *ComposeEnv) Recover() {
	for _, z := range e.cfg.ZK {
		if e.D.state(z.Container, "Running") != "true" {
			e.check("docker start "+z.Name, e.D.docker("start", z.Container))
		}
		e.check("heal "+z.Name, e.D.Heal(z.Container, z.Name))
	}
	for _, id := range e.ids() {
		c := e.cfg.Containers[id]
		if e.D.state(c, "Paused") == "true" {
			e.check("docker unpause", e.D.docker("unpause", c))
		}
		if e.D.state(c, "Running") != "true" {
			e.note("broker %d was not running at recovery; docker start", id)
			e.check("docker start", e.D.docker("start", c))
		} else {
			e.check("heal", e.D.Heal(c, brokerAlias(id)))
		}
	}
	for _, id := range e.ids() {
		e.check(fmt.Sprintf("broker %d ready", id), e.WaitBroker(id, 120*time.Second))
	}
}

// ComposeScenario is one docker-column nemesis, with bounds the run
// asserts besides the checker's zero anomalies.
type ComposeScenario struct {
	Name    string
	Desc    string
	Nemesis func(e *ComposeEnv)
	// AckWithin: after each fault's start, every partition is
	// acknowledged again within this long (0: not asserted).
	AckWithin time.Duration
	// MaxGap: no gap between acknowledgements of a partition longer than
	// this during the run (0: not asserted).
	MaxGap time.Duration
}

// ComposeScenarios are the scenarios of make chaos-compose, with the
// session timeout of the cluster (KAFKA_ZOOKEEPER_SESSION_TIMEOUT_MS) and
// the random mix's length. kill, pause, partition and zk-kill are also
// compose-test's failover variants (their bounds are those the Python
// checker asserted before: acknowledged again within 2 x session + 10 s;
// zk-kill: no gap over session + 5 s).
func ComposeScenarios(session, random time.Duration) []ComposeScenario {
	failover := 2*session + 10*time.Second
	return []ComposeScenario{
		{Name: "kill", Desc: "docker kill the leader, docker start after 2 x session timeout (§5 #3)", AckWithin: failover,
			Nemesis: func(e *ComposeEnv) { e.Kill(e.LeaderTarget(), 2*session); time.Sleep(5 * time.Second) }},
		{Name: "stop", Desc: "docker stop -t 30 the leader (controlled shutdown), docker start (§5 #2)", AckWithin: failover,
			Nemesis: func(e *ComposeEnv) { e.Stop(e.LeaderTarget(), 3*time.Second); time.Sleep(5 * time.Second) }},
		{Name: "pause", Desc: "docker pause the leader for 3 x session timeout, unpause (zombie, §5 #15)", AckWithin: failover,
			Nemesis: func(e *ComposeEnv) { e.Pause(e.LeaderTarget(), 3*session); time.Sleep(8 * time.Second) }},
		{Name: "partition", Desc: "docker network disconnect the leader for 3 x session timeout, reconnect (§5 #13)", AckWithin: failover,
			Nemesis: func(e *ComposeEnv) { e.Partition(e.LeaderTarget(), 3*session); time.Sleep(8 * time.Second) }},
		{Name: "cut-leader-from-brokers", Desc: "iptables DROP on 9092 in the leader's namespace past the lag time (§5 #10)", AckWithin: failover + LagTime,
			Nemesis: func(e *ComposeEnv) { e.CutPort(e.LeaderTarget(), 9092, 20*time.Second); time.Sleep(8 * time.Second) }},
		{Name: "zk-cut-leader", Desc: "iptables DROP on 2181 in the leader's namespace past the session timeout (§5 #12)", AckWithin: failover,
			Nemesis: func(e *ComposeEnv) {
				e.CutPort(e.LeaderTarget(), 2181, session+6*time.Second)
				time.Sleep(8 * time.Second)
			}},
		{Name: "zk-kill", Desc: "docker kill the ZooKeeper leader for 2 x session timeout (alone: §5 #18; in an ensemble: its election), docker start", MaxGap: session + 5*time.Second,
			Nemesis: func(e *ComposeEnv) { e.KillZK(2 * session); time.Sleep(5 * time.Second) }},
		{Name: "latency", Desc: "tc qdisc netem delay 100ms rate 3000kbit on every broker and ZooKeeper for 60 s (§5 #21)",
			Nemesis: func(e *ComposeEnv) {
				e.Latency(100*time.Millisecond, 3000, 60*time.Second)
				time.Sleep(5 * time.Second)
			}},
		{Name: "random-mix", Desc: fmt.Sprintf("a random docker fault (kill, stop, pause, disconnect, iptables cuts, ZooKeeper kill) every few seconds for %s", random),
			Nemesis: func(e *ComposeEnv) { e.Random(random, session) }},
	}
}

// Random applies one random docker fault at a time, aimed at the leader
// or any broker, with a few seconds between, for d.
func (e *ComposeEnv) Random(d, session time.Duration) {
	deadline := time.Now().Add(d)
	dur := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(e.Rand.Int63n(int64(hi-lo))) }
	for time.Now().Before(deadline) {
		target := e.LeaderTarget()
		if e.Rand.Intn(2) == 0 {
			target = e.ids()[e.Rand.Intn(len(e.ids()))]
		}
		switch e.Rand.Intn(7) {
		case 0:
			e.Kill(target, dur(time.Second, session+2*time.Second))
		case 1:
			e.Stop(target, dur(time.Second, 3*time.Second))
		case 2:
			e.Pause(target, dur(time.Second, 2*session))
		case 3:
			e.Partition(target, dur(2*time.Second, 2*session))
		case 4:
			e.CutPort(target, 9092, dur(2*time.Second, 2*LagTime))
		case 5:
			e.CutPort(target, 2181, dur(2*time.Second, 2*session))
		case 6:
			e.KillZK(dur(time.Second, session))
		}
		e.Recover()
		time.Sleep(dur(3*time.Second, 8*time.Second))
	}
}

// RunCompose runs one scenario on the compose cluster: a fresh topic of
// Partitions partitions at RF 3 with min.insync.replicas=2, the SAFE
// workload and the sampler, warm-up, the nemesis, recovery, the end of
// writes and a full ISR; then docker stop of every broker, a copy of each
// data dir (docker cp), docker start, and the same Check as Run.
func RunCompose(cfg ComposeConfig, c *Cluster, d *Docker, sc ComposeScenario) (res Result) {
	began := time.Now()
	res = Result{Scenario: sc.Name, Profile: SAFE.Name, Safe: true, Desc: sc.Desc}
	defer func() { res.Duration = time.Since(began) }()
	logf := func(format string, args ...any) { cfg.Logf("[%s] "+format, append([]any{sc.Name}, args...)...) }
	topic := fmt.Sprintf("chaos-%s-%d", sc.Name, time.Now().Unix())
	env := &ComposeEnv{Env: &Env{C: c, H: NewHistory(), Topic: topic, Parts: Partitions, Rand: rand.New(rand.NewSource(cfg.Seed)), Logf: logf}, D: d, cfg: cfg}
	h := env.H
	if err := c.CreateTopic(topic, Partitions, map[string]string{"min.insync.replicas": "2"}); err != nil {
		res.Err = err
		return res
	}
	s := StartSampler(c, h, topic, Partitions, 100*time.Millisecond)
	defer s.Stop()
	stopWatch := func() {}
	if cfg.Watch {
		stopWatch = watch(s, logf)
	}
	w, err := StartWorkload(h, c, topic, Partitions, SAFE, s.Leader, logf)
	if err != nil {
		stopWatch()
		res.Err = err
		return res
	}
	time.Sleep(3 * time.Second)
	logf("nemesis: %s", sc.Desc)
	sc.Nemesis(env)
	env.Recover()
	time.Sleep(3 * time.Second)
	w.StopWriters(40 * time.Second)
	writesEnd := h.Now()
	if err := c.WaitFullISR(topic, Partitions, 90*time.Second); err != nil {
		env.fail("ISR not full within 90 s of the end of writes: %v", err)
	}
	time.Sleep(3 * time.Second)
	group := w.StopGroup()
	w.StopConsumer()
	stopWatch()
	final := map[int32]int32{}
	for p := int32(0); p < Partitions; p++ {
		final[p] = env.Leader(p)
	}
	samples := s.Stop()
	reps, err := env.readReplicas(topic, filepath.Join(cfg.Dir, sc.Name))
	if err != nil {
		env.fail("final read: %v", err)
	}
	writes, polls, faults := h.snapshot()
	res.Check = Check(CheckInput{Writes: writes, Polls: polls, Samples: samples, Replicas: reps, FinalLeader: final, Group: group, Resets: h.resets(), Rewinds: h.rewinds()})
	res.Figures = ComputeFigures(writes, faults, samples, Partitions, writesEnd)
	for _, msg := range assertBounds(writes, faults, sc, writesEnd) {
		env.fail("%s", msg)
	}
	res.Notes, res.Err = env.Notes, env.Err
	logf("done in %s: %s; attempted=%d ok=%d fail=%d info=%d anomalies=%+v", time.Since(began).Round(time.Second),
		res.Verdict(), res.Check.Attempted, res.Check.OKs, res.Check.Fails, res.Check.Infos, res.Check.Anomalies)
	for name, ex := range res.Check.Examples {
		for _, x := range ex {
			logf("  %s: %s", name, x)
		}
	}
	return res
}

// assertBounds checks a scenario's availability bounds on the
// acknowledgements.
func assertBounds(writes []Write, faults []FaultEvent, sc ComposeScenario, end time.Duration) []string {
	oks := map[int32][]time.Duration{}
	for _, w := range writes {
		if w.Outcome == OK {
			oks[w.Partition] = append(oks[w.Partition], w.Complete)
		}
	}
	var out []string
	for p := int32(0); p < Partitions; p++ {
		ts := oks[p]
		sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
		if sc.AckWithin > 0 {
			for _, f := range faults {
				i := sort.Search(len(ts), func(k int) bool { return ts[k] >= f.Start })
				if i == len(ts) || ts[i]-f.Start > sc.AckWithin {
					out = append(out, fmt.Sprintf("p%d not acknowledged within %s of the %s at %s", p, sc.AckWithin, f.Kind, f.Start.Round(time.Millisecond)))
				}
			}
		}
		if sc.MaxGap > 0 {
			for i := 1; i < len(ts); i++ {
				if ts[i]-ts[i-1] > sc.MaxGap {
					out = append(out, fmt.Sprintf("p%d: %s without an acknowledgement (at %s; bound %s)", p,
						(ts[i]-ts[i-1]).Round(time.Millisecond), ts[i-1].Round(time.Millisecond), sc.MaxGap))
					break
				}
			}
		}
		if len(ts) == 0 {
			out = append(out, fmt.Sprintf("p%d: no acknowledgement at all", p))
		}
	}
	return out
}

// readReplicas stops every broker (docker stop: a controlled shutdown that
// writes the checkpoints), copies each data dir out with docker cp, reads
// the topic's replicas, and starts the brokers again.
func (e *ComposeEnv) readReplicas(topic, dir string) (map[int32][]Replica, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	errs := make([]error, len(e.ids()))
	for i, id := range e.ids() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = e.D.docker("stop", "-t", "30", e.cfg.Containers[id])
		}()
	}
	wg.Wait()
	reps := map[int32][]Replica{}
	for i, id := range e.ids() {
		dst := filepath.Join(dir, fmt.Sprintf("broker-%d", id))
		if err := e.D.docker("cp", e.cfg.Containers[id]+":/var/lib/kafkazk/data", dst); err != nil && errs[i] == nil {
			errs[i] = err
		}
		for p := int32(0); p < Partitions; p++ {
			r := ReadReplica(id, dst, topic, p)
			if r.Err != "" {
				e.note("broker %d p%d: %s", id, p, r.Err)
			}
			reps[p] = append(reps[p], r)
		}
	}
	for _, id := range e.ids() {
		if err := e.D.docker("start", e.cfg.Containers[id]); err != nil {
			errs = append(errs, err)
		}
	}
	for _, id := range e.ids() {
		if err := e.WaitBroker(id, 120*time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	return reps, errors.Join(errs...)
}

// watch logs each change of the sampled state: brokers registered, the
// controller, and each partition's leader, epoch and ISR.
func watch(s *Sampler, logf func(string, ...any)) func() {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var last string
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			sm := s.Latest()
			var ids []int
			for id := range sm.Brokers {
				ids = append(ids, int(id))
			}
			sort.Ints(ids)
			line := fmt.Sprintf("brokers %v controller %d", ids, sm.Controller)
			for p, st := range sm.States {
				if st.Leader == -2 {
					line += fmt.Sprintf(" | p%d ?", p)
					continue
				}
				line += fmt.Sprintf(" | p%d leader %d epoch %d isr %v", p, st.Leader, st.LeaderEpoch, st.ISR)
			}
			if line != last {
				logf("state: %s", line)
				last = line
			}
		}
	}()
	return func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-done
	}
}
