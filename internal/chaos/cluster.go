package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/internal/harness"
)

// SessionTimeout is zookeeper.session.timeout.ms of every chaos broker:
// the pre-2.5 default, as reliability.md §5 asks, so runs stay short.
const SessionTimeout = 6 * time.Second

// LagTime is replica.lag.time.max.ms of every chaos broker.
const LagTime = 5 * time.Second

// Cluster is three broker processes in one ZooKeeper chroot, each behind a
// Kafka proxy (its advertised listener, used by clients and by the other
// brokers) and a ZooKeeper proxy (its zookeeper.connect).
type Cluster struct {
	// Brokers grows only through AddBroker, on the nemesis's goroutine;
	// brokersMu orders that with Broker, which the workload calls.
	Brokers   []*Broker
	brokersMu sync.Mutex
	Chroot    string
	ZK        *zk.Conn // direct to ZooKeeper (not through a proxy), at the root
	zkAddr    string
	bin       string
	dir       string
	props     map[string]string // every broker's overrides (ClusterConfig.Props)
	size      int               // brokers at start (ClusterConfig.Brokers)
	mounts    []string          // tmpfs data dirs to unmount on Close
	logf      func(string, ...any)
	// clientOpts are added to every kgo client of the cluster and its
	// workload (the compose cluster's SASL_SSL settings).
	clientOpts []kgo.Opt
}

// Broker is one broker process handle with its two proxies.
type Broker struct {
	ID      int32
	Listen  string // the broker's own listener
	Proxy   *Proxy // its advertised listener
	ZKProxy *Proxy // its zookeeper.connect
	Dir     string
	DataDir string
	LogPath string
	Props   map[string]string
	// HTTPAddr is its http.listener (/metrics); Env are extra
	// environment variables of its process.
	HTTPAddr string
	Env      []string
	c        *Cluster
	proc     *harness.Process
}

// ClusterConfig describes a cluster to start.
type ClusterConfig struct {
	Binary  string            // the broker binary
	ZKAddr  string            // ZooKeeper host:port
	ZK      *zk.Conn          // a session to it
	Dir     string            // scratch directory (data, logs)
	Brokers int               // how many (ids 1..n)
	Props   map[string]string // server.properties overrides for all
	// Env adds environment variables to chosen brokers (by id).
	Env map[int32][]string
	// Tmpfs puts chosen brokers' data dirs (by id) on a tmpfs of that
	// many bytes, mounted before the first start (diskfull.go).
	Tmpfs map[int32]int64
	Logf  func(string, ...any)
}

var chrootSeq int64
var chrootMu sync.Mutex

// StartCluster prepares a chroot, proxies and brokers, and starts every
// broker, waiting until each is registered and serving.
func StartCluster(cfg ClusterConfig) (*Cluster, error) {
	chrootMu.Lock()
	chrootSeq++
	seq := chrootSeq
	chrootMu.Unlock()
	c := &Cluster{Chroot: fmt.Sprintf("/chaos-%d-%d-%d", os.Getpid(), time.Now().UnixNano()%1e6, seq),
		ZK: cfg.ZK, zkAddr: cfg.ZKAddr, bin: cfg.Binary, dir: cfg.Dir, props: cfg.Props, size: cfg.Brokers, logf: cfg.Logf}
	if c.logf == nil {
		c.logf = func(string, ...any) {}
	}
	if _, err := c.ZK.Create(c.Chroot, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return nil, fmt.Errorf("create chroot %s: %w", c.Chroot, err)
	}
	for i := 1; i <= cfg.Brokers; i++ {
		b, err := c.addBroker(int32(i), cfg.Props)
		if err != nil {
			c.Close()
			return nil, err
		}
		b.Env = cfg.Env[b.ID]
		c.Brokers = append(c.Brokers, b)
		if size := cfg.Tmpfs[b.ID]; size > 0 {
			if err := mountTmpfs(b.DataDir, size); err != nil {
				c.Close()
				return nil, err
			}
			c.mounts = append(c.mounts, b.DataDir)
		}
	}
	errs := make(chan error, len(c.Brokers))
	for _, b := range c.Brokers {
		go func() { errs <- b.Start() }()
	}
	var first error
	for range c.Brokers {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		c.Close()
		return nil, first
	}
	return c, nil
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func (c *Cluster) addBroker(id int32, props map[string]string) (*Broker, error) {
	listen, err := freeAddr()
	if err != nil {
		return nil, err
	}
	px, err := NewProxy(listen, true)
	if err != nil {
		return nil, err
	}
	zpx, err := NewProxy(c.zkAddr, false)
	if err != nil {
		px.Close()
		return nil, err
	}
	dir := filepath.Join(c.dir, fmt.Sprintf("broker-%d", id))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	httpAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	b := &Broker{ID: id, Listen: listen, Proxy: px, ZKProxy: zpx, Dir: dir, HTTPAddr: httpAddr,
		DataDir: filepath.Join(dir, "data"), LogPath: filepath.Join(dir, "broker.log"), c: c}
	b.proc = &harness.Process{Bin: c.bin, PropsPath: filepath.Join(dir, "server.properties"), LogPath: b.LogPath,
		Banner: "chaos", ID: id}
	b.Props = map[string]string{
		"broker.id":                        strconv.Itoa(int(id)),
		"listeners":                        "PLAINTEXT://" + listen,
		"advertised.listeners":             "PLAINTEXT://" + px.Addr,
		"zookeeper.connect":                zpx.Addr + c.Chroot,
		"zookeeper.session.timeout.ms":     strconv.Itoa(int(SessionTimeout / time.Millisecond)),
		"log.dirs":                         b.DataDir,
		"replica.lag.time.max.ms":          strconv.Itoa(int(LagTime / time.Millisecond)),
		"replica.fetch.wait.max.ms":        "500",
		"auto.leader.rebalance.enable":     "false",
		"auto.create.topics.enable":        "false",
		"offsets.topic.replication.factor": strconv.Itoa(min(3, max(1, c.size))),
		"default.replication.factor":       strconv.Itoa(min(3, max(1, c.size))),
		// The consumer group's offsets: fewer than Kafka's 50 partitions,
		// so that a coordinator failover loads few.
		"offsets.topic.num.partitions":     "6",
		"group.initial.rebalance.delay.ms": "0",
		"http.listener":                    httpAddr,
	}
	for k, v := range props {
		b.Props[k] = v
	}
	return b, nil
}

// AddBroker prepares broker id (its proxies, directory and the cluster's
// properties), adds it to the cluster and starts it, as an operator adds a
// broker to a running cluster.
func (c *Cluster) AddBroker(id int32) (*Broker, error) {
	if c.Broker(id) != nil {
		return nil, fmt.Errorf("broker %d already in the cluster", id)
	}
	b, err := c.addBroker(id, c.props)
	if err != nil {
		return nil, err
	}
	c.brokersMu.Lock()
	c.Brokers = append(c.Brokers, b)
	c.brokersMu.Unlock()
	return b, b.Start()
}

// Seeds are the proxies' addresses: what clients bootstrap from.
func (c *Cluster) Seeds() []string {
	out := make([]string, len(c.Brokers))
	for i, b := range c.Brokers {
		out[i] = b.Proxy.Addr
	}
	return out
}

// Broker returns the broker with id, or nil.
func (c *Cluster) Broker(id int32) *Broker {
	c.brokersMu.Lock()
	defer c.brokersMu.Unlock()
	for _, b := range c.Brokers {
		if b.ID == id {
			return b
		}
	}
	return nil
}

// Path prefixes a Kafka znode path with the chroot.
func (c *Cluster) Path(p string) string { return c.Chroot + p }

// HealNetwork lets every proxy forward everything again.
func (c *Cluster) HealNetwork() {
	for _, b := range c.Brokers {
		b.Proxy.Heal()
		b.ZKProxy.Heal()
	}
}

// Close kills every broker, closes the proxies and unmounts any tmpfs.
func (c *Cluster) Close() {
	for _, b := range c.Brokers {
		b.Kill()
		b.Proxy.Close()
		b.ZKProxy.Close()
	}
	for _, m := range c.mounts {
		if err := unmount(m); err != nil {
			c.logf("%v", err)
		}
	}
	c.mounts = nil
}

// StopAll stops every broker with SIGTERM (SIGKILL after 15 s each), in
// parallel, after healing the network.
func (c *Cluster) StopAll() {
	c.HealNetwork()
	var wg sync.WaitGroup
	for _, b := range c.Brokers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := b.Term(15 * time.Second); err != nil {
				c.logf("broker %d: %v", b.ID, err)
			}
		}()
	}
	wg.Wait()
}

// Running reports whether the process is started and has not exited.
func (b *Broker) Running() bool { return b.proc != nil && b.proc.Running() }

// Paused reports whether the process is stopped by SIGSTOP.
func (b *Broker) Paused() bool { return b.proc != nil && b.proc.Paused() }

// Start waits for an earlier session's registration to vanish, starts the
// process and waits until it is registered and answers Metadata naming
// itself.
func (b *Broker) Start() error {
	if b.Running() {
		return nil
	}
	path := b.c.Path(fmt.Sprintf("/brokers/ids/%d", b.ID))
	if err := harness.WaitUnregistered(b.c.ZK, path, SessionTimeout+30*time.Second); err != nil {
		return fmt.Errorf("broker %d: %w", b.ID, err)
	}
	for try := 1; ; try++ {
		err := b.startOnce(path)
		if err == nil || try == 3 || !errors.Is(err, errListenerTaken) {
			return err
		}
		// The port freeAddr reserved was taken (by any process's outgoing
		// connection, say) before the broker bound it: take another. The
		// proxy, which clients and peers use, keeps its address.
		listen, aerr := freeAddr()
		if aerr != nil {
			return err
		}
		b.Listen = listen
		b.Props["listeners"] = "PLAINTEXT://" + listen
		if h, herr := freeAddr(); herr == nil { // the http.listener may be the one taken
			b.HTTPAddr = h
			b.Props["http.listener"] = h
		}
		b.Proxy.SetTarget(listen)
	}
}

// errListenerTaken is a broker that exited while starting because its
// listener's address was in use.
var errListenerTaken = errors.New("listener address in use")

// startOnce writes the properties, starts the process and waits until it
// is ready (Start).
func (b *Broker) startOnce(path string) error {
	if err := b.proc.Start(b.Props, append([]string{"BROKER_LOG_LEVEL=info"}, b.Env...)); err != nil {
		return err
	}
	return b.waitReady(60*time.Second, path, b.proc.Done())
}

func (b *Broker) waitReady(timeout time.Duration, path string, done <-chan struct{}) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Listen), kgo.RequestRetries(0), kgo.DialTimeout(time.Second), kgo.ClientID("chaos-ready"))
	if err != nil {
		return err
	}
	defer cl.Close()
	return waitFor(timeout, func() error {
		select {
		case <-done:
			data, _ := os.ReadFile(b.LogPath)
			last := string(data[max(0, len(data)-1500):])
			if strings.Contains(last, "address already in use") {
				return &permanentError{fmt.Errorf("broker %d exited while starting (%w): %s", b.ID, errListenerTaken, b.Listen)}
			}
			return &permanentError{fmt.Errorf("broker %d exited while starting; %s ends: %s", b.ID, b.LogPath, last)}
		default:
		}
		if err := harness.Ready(b.c.ZK, path, cl, b.ID); err != nil {
			return fmt.Errorf("broker %d: %w", b.ID, err)
		}
		return nil
	})
}

// Kill sends SIGKILL and waits for the exit.
func (b *Broker) Kill() {
	if b.proc != nil {
		b.proc.Kill()
	}
}

// Pause sends SIGSTOP.
func (b *Broker) Pause() { _ = b.proc.Pause() }

// Resume sends SIGCONT.
func (b *Broker) Resume() {
	if b.proc != nil {
		_ = b.proc.Resume()
	}
}

// Term sends SIGTERM (after SIGCONT if paused) and waits up to timeout,
// then SIGKILLs and reports it; a non-zero exit is reported too.
func (b *Broker) Term(timeout time.Duration) error { return b.proc.Term(timeout) }

// Pid is the process id, 0 when never started.
func (b *Broker) Pid() int { return b.proc.Pid() }

// Metric reads one counter or gauge (summed over its label sets) from the
// broker's /metrics.
func (b *Broker) Metric(name string) (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+b.HTTPAddr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("broker %d /metrics: %w", b.ID, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("broker %d /metrics: %w", b.ID, err)
	}
	var sum float64
	found := false
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name) || len(line) == len(name) || (line[len(name)] != ' ' && line[len(name)] != '{') {
			continue
		}
		fs := strings.Fields(line)
		if v, err := strconv.ParseFloat(fs[len(fs)-1], 64); err == nil {
			sum += v
			found = true
		}
	}
	if !found {
		return 0, fmt.Errorf("broker %d: no %s in /metrics", b.ID, name)
	}
	return sum, nil
}

// LogContains reports whether the broker's log holds s.
func (b *Broker) LogContains(s string) bool {
	data, _ := os.ReadFile(b.LogPath)
	return bytes.Contains(data, []byte(s))
}

type permanentError struct{ error }

// waitFor polls fn every 100 ms until it returns nil or a permanent error,
// or timeout passes.
func waitFor(timeout time.Duration, fn func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := fn()
		if err == nil {
			return nil
		}
		var pe *permanentError
		if errors.As(err, &pe) {
			return pe.error
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s: %w", timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// PartState is a partition state znode in Kafka's JSON.
type PartState struct {
	ControllerEpoch int32   `json:"controller_epoch"`
	Leader          int32   `json:"leader"`
	LeaderEpoch     int32   `json:"leader_epoch"`
	ISR             []int32 `json:"isr"`
	ZkVersion       int32   `json:"-"`
}

// State reads /brokers/topics/<topic>/partitions/<p>/state.
func (c *Cluster) State(topic string, p int32) (PartState, error) {
	path := c.Path(fmt.Sprintf("/brokers/topics/%s/partitions/%d/state", topic, p))
	data, st, err := c.ZK.Get(path)
	if err != nil {
		return PartState{}, fmt.Errorf("get %s: %w", path, err)
	}
	var s PartState
	if err := json.Unmarshal(data, &s); err != nil {
		return PartState{}, fmt.Errorf("%s: %w", path, err)
	}
	s.ZkVersion = st.Version
	return s, nil
}

// Controller reads /controller's brokerid (-1 if none).
func (c *Cluster) Controller() int32 {
	data, _, err := c.ZK.Get(c.Path("/controller"))
	if err != nil {
		return -1
	}
	var v struct {
		BrokerID *int32 `json:"brokerid"`
	}
	if json.Unmarshal(data, &v) != nil || v.BrokerID == nil {
		return -1
	}
	return *v.BrokerID
}

// CreateTopic creates topic with partitions and RF 3 and waits until every
// partition has a leader and a full ISR.
func (c *Cluster) CreateTopic(topic string, partitions int32, configs map[string]string) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Seeds()...), kgo.ClientID("chaos-admin")}, c.clientOpts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, int16(len(c.Brokers))
	for k, v := range configs {
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, cfg)
	}
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	// INVALID_REPLICATION_FACTOR (38) right after start: the broker that
	// answered may not have every new broker in its metadata yet.
	for {
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return fmt.Errorf("create topic %s: %w", topic, err)
		}
		code := int16(0)
		for _, r := range resp.Topics {
			if r.ErrorCode != 0 {
				code = r.ErrorCode
			}
		}
		if code == 38 && ctx.Err() == nil {
			time.Sleep(500 * time.Millisecond)
			continue
		}
		if code != 0 {
			return fmt.Errorf("create topic %s: error code %d", topic, code)
		}
		break
	}
	return c.WaitFullISR(topic, partitions, 45*time.Second)
}

// ServesTransactions fails unless a broker advertises EndTxn (26) in
// ApiVersions: brokers without transactions leave the key out.
func (c *Cluster) ServesTransactions() error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Seeds()...), kgo.ClientID("chaos-admin"))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("ApiVersions: %w", err)
	}
	for _, k := range resp.ApiKeys {
		if k.ApiKey == 26 {
			return nil
		}
	}
	return fmt.Errorf("the broker does not serve transactions (no EndTxn in ApiVersions)")
}

// WaitFullISR waits until every partition has a leader and all of its
// assigned replicas (the topic znode's) in its ISR.
func (c *Cluster) WaitFullISR(topic string, partitions int32, timeout time.Duration) error {
	return waitFor(timeout, func() error {
		assigned, err := c.Assignment(topic)
		if err != nil {
			return err
		}
		for p := int32(0); p < partitions; p++ {
			s, err := c.State(topic, p)
			if err != nil {
				return err
			}
			if s.Leader < 0 || len(s.ISR) != len(assigned.Partitions[p]) {
				return fmt.Errorf("%s-%d: leader %d isr %v, replicas %v", topic, p, s.Leader, s.ISR, assigned.Partitions[p])
			}
		}
		return nil
	})
}

// TopicAssignment is /brokers/topics/<topic>: replicas, and the replicas
// being added and removed by a reassignment, by partition.
type TopicAssignment struct {
	Partitions, Adding, Removing map[int32][]int32
}

// Assignment reads /brokers/topics/<topic>.
func (c *Cluster) Assignment(topic string) (TopicAssignment, error) {
	path := c.Path("/brokers/topics/" + topic)
	data, _, err := c.ZK.Get(path)
	if err != nil {
		return TopicAssignment{}, fmt.Errorf("get %s: %w", path, err)
	}
	var z struct {
		Partitions map[string][]int32 `json:"partitions"`
		Adding     map[string][]int32 `json:"adding_replicas"`
		Removing   map[string][]int32 `json:"removing_replicas"`
	}
	if err := json.Unmarshal(data, &z); err != nil {
		return TopicAssignment{}, fmt.Errorf("%s: %w", path, err)
	}
	conv := func(m map[string][]int32) map[int32][]int32 {
		out := map[int32][]int32{}
		for k, v := range m {
			if p, err := strconv.Atoi(k); err == nil {
				out[int32(p)] = v
			}
		}
		return out
	}
	return TopicAssignment{Partitions: conv(z.Partitions), Adding: conv(z.Adding), Removing: conv(z.Removing)}, nil
}
