package test

// Helpers of the cluster-operation tests of issue 15 (reassignment,
// throttles, ElectLeaders, rolling restarts): the topic znode with its
// adding and removing replicas, reassignments submitted and awaited through
// kadm, an ISR sampler reading every partition state znode from ZooKeeper,
// replica directory listings, a live consumer, produce-latency percentiles
// and the figures' JSON line.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// topicZnode is /brokers/topics/<topic>, version 2 of Kafka's JSON.
type topicZnode struct {
	Version    int                `json:"version"`
	Partitions map[string][]int32 `json:"partitions"`
	Adding     map[string][]int32 `json:"adding_replicas"`
	Removing   map[string][]int32 `json:"removing_replicas"`
}

func (z topicZnode) replicas(p int32) []int32 { return z.Partitions[strconv.Itoa(int(p))] }
func (z topicZnode) adding(p int32) []int32   { return z.Adding[strconv.Itoa(int(p))] }
func (z topicZnode) removing(p int32) []int32 { return z.Removing[strconv.Itoa(int(p))] }

// topicZnode reads /brokers/topics/<topic>.
func (c *Cluster) topicZnode(topic string) (topicZnode, error) {
	path := "/brokers/topics/" + topic
	data, _, err := c.Get(path)
	if err != nil {
		return topicZnode{}, fmt.Errorf("get %s: %w", path, err)
	}
	var z topicZnode
	if err := json.Unmarshal(data, &z); err != nil {
		return topicZnode{}, fmt.Errorf("%s: %w: %q", path, err, data)
	}
	return z, nil
}

// assignment is partition -> replicas, in order (element 0 is preferred).
type assignment map[int32][]int32

func (a assignment) String() string {
	ps := make([]int32, 0, len(a))
	for p := range a {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%d:%v", p, a[p])
	}
	return b.String()
}

// currentAssignment reads topic's assignment from its znode.
func (c *Cluster) currentAssignment(t *testing.T, topic string) assignment {
	t.Helper()
	z, err := c.topicZnode(topic)
	if err != nil {
		t.Fatal(err)
	}
	out := assignment{}
	for k, r := range z.Partitions {
		p, err := strconv.Atoi(k)
		if err != nil {
			t.Fatalf("topic znode of %s: partition key %q", topic, k)
		}
		out[int32(p)] = r
	}
	return out
}

// adminFor is a kadm client over the running brokers, closed at the end
// of the test.
func adminFor(t *testing.T, c *Cluster) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.liveSeeds()...), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// submitReassignment sends one AlterPartitionAssignments with target for
// topic and fails the test on any error, top-level or per partition.
func submitReassignment(t *testing.T, adm *kadm.Client, topic string, target assignment) {
	t.Helper()
	var req kadm.AlterPartitionAssignmentsReq
	for p, r := range target {
		req.Assign(topic, p, r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		t.Fatalf("AlterPartitionAssignments %s %v: %v", topic, target, err)
	}
	n := 0
	for _, r := range resp.Sorted() {
		n++
		if r.Err != nil {
			t.Fatalf("AlterPartitionAssignments %s-%d -> %v: %v (%s)", r.Topic, r.Partition, target[r.Partition], r.Err, r.ErrMessage)
		}
	}
	if n != len(target) {
		t.Fatalf("AlterPartitionAssignments answered %d partitions of the %d submitted: %+v", n, len(target), resp)
	}
}

// listReassigning returns ListPartitionReassignments' answer for topic.
func listReassigning(adm *kadm.Client, topic string, parts int32) (map[int32]kadm.ListPartitionReassignmentsResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var s kadm.TopicsSet
	ps := make([]int32, parts)
	for i := range ps {
		ps[i] = int32(i)
	}
	s.Add(topic, ps...)
	resp, err := adm.ListPartitionReassignments(ctx, s)
	if err != nil {
		return nil, fmt.Errorf("ListPartitionReassignments %s: %w", topic, err)
	}
	out := map[int32]kadm.ListPartitionReassignmentsResponse{}
	for p, r := range resp[topic] {
		out[p] = r
	}
	return out, nil
}

func sameSet(a, b []int32) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

// reassignedAt returns nil once topic sits at target everywhere a client or
// operator can look: the topic znode lists exactly target with
// adding_replicas and removing_replicas empty, ListPartitionReassignments
// lists none of its partitions, every state znode has a leader from target
// and ISR = target, and every running broker's Metadata shows target's
// replicas in order, that ISR and that leader.
func reassignedAt(c *Cluster, adm *kadm.Client, topic string, target assignment) error {
	z, err := c.topicZnode(topic)
	if err != nil {
		return err
	}
	if len(z.Partitions) != len(target) {
		return fmt.Errorf("topic znode of %s has %d partitions, want %d", topic, len(z.Partitions), len(target))
	}
	for p, want := range target {
		if got := z.replicas(p); !slices.Equal(got, want) {
			return fmt.Errorf("topic znode %s-%d: replicas %v, want %v (adding %v removing %v)", topic, p, got, want, z.adding(p), z.removing(p))
		}
		if len(z.adding(p)) > 0 || len(z.removing(p)) > 0 {
			return fmt.Errorf("topic znode %s-%d: adding %v removing %v, want both empty", topic, p, z.adding(p), z.removing(p))
		}
	}
	if z.Version != 2 {
		return fmt.Errorf("topic znode of %s: version %d, want 2", topic, z.Version)
	}
	if adm != nil {
		live, err := listReassigning(adm, topic, int32(len(target)))
		if err != nil {
			return err
		}
		if len(live) > 0 {
			return fmt.Errorf("ListPartitionReassignments still lists %d partitions of %s: %+v", len(live), topic, live)
		}
	}
	states := map[int32]partState{}
	for p, want := range target {
		s, err := c.State(topic, p)
		if err != nil {
			return err
		}
		if !slices.Contains(want, s.Leader) || !sameSet(s.ISR, want) {
			return fmt.Errorf("%s-%d state %v, want a leader from %v and that ISR", topic, p, s, want)
		}
		states[p] = s
	}
	for _, b := range c.Brokers {
		if !b.Running() {
			continue
		}
		mt, err := topicMetadata(b, topic)
		if err != nil {
			return err
		}
		for _, mp := range mt.Partitions {
			want := target[mp.Partition]
			if mp.ErrorCode != 0 || !slices.Equal(mp.Replicas, want) || !sameSet(mp.ISR, want) || mp.Leader != states[mp.Partition].Leader {
				return fmt.Errorf("broker %d Metadata %s-%d: error %d leader %d replicas %v isr %v, want replicas %v, leader %d",
					b.ID(), topic, mp.Partition, mp.ErrorCode, mp.Leader, mp.Replicas, mp.ISR, want, states[mp.Partition].Leader)
			}
		}
	}
	return nil
}

// waitReassigned polls reassignedAt until it holds and returns when it
// first did.
func waitReassigned(t *testing.T, c *Cluster, adm *kadm.Client, topic string, target assignment, timeout time.Duration) time.Time {
	t.Helper()
	eventually(t, timeout, func() error { return reassignedAt(c, adm, topic, target) })
	return time.Now()
}

// replicaDirs lists the entries of b's log.dirs that belong to topic-p:
// the live directory and any renamed for deletion (<topic>-<p>.<id>-delete).
func replicaDirs(b *Broker, topic string, p int32) []string {
	name := fmt.Sprintf("%s-%d", topic, p)
	ents, _ := os.ReadDir(b.DataDir)
	var out []string
	for _, e := range ents {
		if e.Name() == name || strings.HasPrefix(e.Name(), name+".") {
			out = append(out, e.Name())
		}
	}
	return out
}

// waitReplicaDirs waits until exactly target's replicas hold a directory
// of each partition, and no broker keeps one renamed for deletion. Brokers
// in mayKeep (bounced during the move) may keep a removed replica's
// directory: a replica removed while its broker is offline to the
// controller gets no StopReplica, in Kafka's ZooKeeper mode as here, and
// nothing deletes such a stray later. Those are returned.
func waitReplicaDirs(t *testing.T, c *Cluster, topic string, target assignment, timeout time.Duration, mayKeep ...int32) []string {
	t.Helper()
	var strays []string
	eventually(t, timeout, func() error {
		strays = nil
		for p, want := range target {
			for _, b := range c.Brokers {
				dirs := replicaDirs(b, topic, p)
				in := slices.Contains(want, b.ID())
				switch {
				case in && !slices.Equal(dirs, []string{fmt.Sprintf("%s-%d", topic, p)}):
					return fmt.Errorf("broker %d (a replica of %s-%d) has %v", b.ID(), topic, p, dirs)
				case !in && len(dirs) > 0 && slices.Contains(mayKeep, b.ID()):
					strays = append(strays, fmt.Sprintf("broker %d: %v", b.ID(), dirs))
				case !in && len(dirs) > 0:
					return fmt.Errorf("broker %d is not a replica of %s-%d but still has %v", b.ID(), topic, p, dirs)
				}
			}
		}
		return nil
	})
	return strays
}

// dirBytes is the size of the segment files (*.log) in b's directory of
// topic-p.
func dirBytes(b *Broker, topic string, p int32) int64 {
	files, _ := filepath.Glob(filepath.Join(b.DataDir, fmt.Sprintf("%s-%d", topic, p), "*.log"))
	var n int64
	for _, f := range files {
		if st, err := os.Stat(f); err == nil {
			n += st.Size()
		}
	}
	return n
}

// isrSampler reads every partition state znode of its topics every
// interval and keeps the smallest ISR seen per partition and every sample
// whose ISR was below min (a partition with no leader counts as ISR 0
// only if it had one before: creation and deletion are not sampled).
type isrSampler struct {
	c      *Cluster
	topics map[string]int32
	min    int
	stop   chan struct{}
	done   chan struct{}

	mu         sync.Mutex
	n          int
	smallestBy map[string]int
	below      []string
}

func startISRSampler(t *testing.T, c *Cluster, topics map[string]int32, min int, interval time.Duration) *isrSampler {
	s := &isrSampler{c: c, topics: topics, min: min, stop: make(chan struct{}), done: make(chan struct{}), smallestBy: map[string]int{}}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			s.sample()
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { s.Stop() })
	return s
}

func (s *isrSampler) sample() {
	at := time.Now()
	for topic, parts := range s.topics {
		for p := int32(0); p < parts; p++ {
			st, err := s.c.State(topic, p)
			if err != nil {
				continue // ZooKeeper hiccup: the next sample will tell
			}
			key := fmt.Sprintf("%s-%d", topic, p)
			size := len(st.ISR)
			if st.Leader < 0 {
				size = 0
			}
			s.mu.Lock()
			if old, ok := s.smallestBy[key]; !ok || size < old {
				s.smallestBy[key] = size
			}
			if size < s.min && len(s.below) < 20 {
				s.below = append(s.below, fmt.Sprintf("%s at %s: %v", key, at.Format("15:04:05.000"), st))
			}
			s.mu.Unlock()
		}
	}
	s.mu.Lock()
	s.n++
	s.mu.Unlock()
}

// Stop ends sampling; it returns the number of samples, the smallest ISR
// seen over all partitions and the samples below min.
func (s *isrSampler) Stop() (samples, smallest int, below []string) {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	smallest = -1
	for _, v := range s.smallestBy {
		if smallest < 0 || v < smallest {
			smallest = v
		}
	}
	return s.n, smallest, slices.Clone(s.below)
}

// checkMinISR stops s and fails the test if any sample was below its min.
func (s *isrSampler) check(t *testing.T, what string) {
	t.Helper()
	n, smallest, below := s.Stop()
	t.Logf("%s: %d ZooKeeper samples of every state znode, smallest ISR seen %d (min.insync.replicas %d)", what, n, smallest, s.min)
	if n < 2 {
		t.Errorf("%s: only %d ISR samples", what, n)
	}
	if len(below) > 0 {
		t.Errorf("%s: a partition fell below min.insync.replicas=%d:\n  %s", what, s.min, strings.Join(below, "\n  "))
	}
}

// liveConsumer reads every partition of topic from offset 0 while the test
// runs, as an application would, keeping what it read in order.
type liveConsumer struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	read   []Rec
	errs   int
}

func startLiveConsumer(t *testing.T, c *Cluster, topic string, parts int32) *liveConsumer {
	t.Helper()
	offsets := map[int32]kgo.Offset{}
	for p := int32(0); p < parts; p++ {
		offsets[p] = kgo.NewOffset().At(0)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Seeds()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxWait(500*time.Millisecond), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	lc := &liveConsumer{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(lc.done)
		defer cl.Close()
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			lc.mu.Lock()
			fs.EachError(func(string, int32, error) { lc.errs++ })
			fs.EachRecord(func(r *kgo.Record) { lc.read = append(lc.read, fromKgo(r)) })
			lc.mu.Unlock()
		}
	}()
	t.Cleanup(func() { lc.Stop() })
	return lc
}

// Stop ends the consumer and returns what it read.
func (lc *liveConsumer) Stop() []Rec {
	lc.cancel()
	<-lc.done
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return slices.Clone(lc.read)
}

// checkLiveRead runs the history checker on a live consumer's read: its
// own order (no offset twice, increasing, dense from 0, no key twice) and
// every record it read at the same offset with the same content in the
// final read.
func checkLiveRead(t *testing.T, live, final []Rec) {
	t.Helper()
	checkHistory(t, "live consumer's read, on its own", nil, live, true)
	checkHistory(t, "live consumer's read against the final read", live, final, true)
}

// latencyPercentiles returns the p50 and p99 produce latency
// (acknowledgement time minus send time) of the records sent in
// [from, to), and how many there were.
func latencyPercentiles(acks []ackEvent, from, to time.Time) (p50, p99 time.Duration, n int) {
	var ls []time.Duration
	for _, a := range acks {
		if !a.Sent.Before(from) && a.Sent.Before(to) {
			ls = append(ls, a.At.Sub(a.Sent))
		}
	}
	if len(ls) == 0 {
		return 0, 0, 0
	}
	sort.Slice(ls, func(i, j int) bool { return ls[i] < ls[j] })
	pick := func(q float64) time.Duration { return ls[min(len(ls)-1, int(q*float64(len(ls))))] }
	return pick(0.50), pick(0.99), len(ls)
}

// logFigures prints figures as one JSON line with a fixed prefix, for the
// closing note.
func logFigures(t *testing.T, name string, figures map[string]any) {
	t.Helper()
	figures["test"] = name
	data, err := json.Marshal(figures)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("FIGURES %s", data)
}

// compareReplicaFiles stops every broker and reads each target replica's
// segment files of topic: each must hold every acknowledged record of its
// partition at its offset, and all replicas of a partition must hold the
// same records (no divergence).
func compareReplicaFiles(t *testing.T, c *Cluster, topic string, target assignment, acked []Rec) {
	t.Helper()
	for _, b := range c.Brokers {
		if b.Running() {
			b.Stop()
		}
	}
	for p, reps := range target {
		var ackedHere []Rec
		for _, r := range acked {
			if r.Partition == p {
				ackedHere = append(ackedHere, r)
			}
		}
		var first []Rec
		for i, id := range reps {
			recs, err := readSegments(filepath.Join(c.Broker(id).DataDir, fmt.Sprintf("%s-%d", topic, p)), p)
			if err != nil {
				t.Errorf("broker %d: %v", id, err)
				continue
			}
			res := analyzeHistory(ackedHere, recs, true)
			if !res.OK(true) {
				t.Errorf("segment files of %s-%d on broker %d: %+v", topic, p, id, res.Problems)
			}
			if i == 0 {
				first = recs
			} else if !slices.EqualFunc(first, recs, func(a, b Rec) bool { return a.Offset == b.Offset && sameContent(a, b) }) {
				t.Errorf("%s-%d: replicas diverge: %d records on broker %d, %d on broker %d", topic, p, len(first), reps[0], len(recs), id)
			}
		}
	}
}

// alterBrokerConfigs sets dynamic broker configs on each of ids
// (/config/brokers/<id>) through IncrementalAlterConfigs (kadm).
func alterBrokerConfigs(adm *kadm.Client, cfg map[string]string, ids ...int32) error {
	var alter []kadm.AlterConfig
	for k, v := range cfg {
		alter = append(alter, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: kmsg.StringPtr(v)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for _, id := range ids {
		resp, err := adm.AlterBrokerConfigs(ctx, alter, id)
		if err == nil {
			for _, r := range resp {
				if r.Err != nil {
					err = fmt.Errorf("%w (%s)", r.Err, r.ErrMessage)
				}
			}
		}
		if err != nil {
			return fmt.Errorf("IncrementalAlterConfigs broker %d %v: %w", id, cfg, err)
		}
	}
	return nil
}

// setBrokerConfigs sets broker configs on ids dynamically
// (alterBrokerConfigs, /config/brokers/<id>), failing the test if the
// cluster refuses.
func setBrokerConfigs(t *testing.T, adm *kadm.Client, cfg map[string]string, ids ...int32) {
	t.Helper()
	if err := alterBrokerConfigs(adm, cfg, ids...); err != nil {
		t.Fatal(err)
	}
}

// setTopicConfigs sets topic configs through IncrementalAlterConfigs (kadm).
func setTopicConfigs(t *testing.T, adm *kadm.Client, topic string, cfg map[string]*string) {
	t.Helper()
	var alter []kadm.AlterConfig
	for k, v := range cfg {
		op := kadm.SetConfig
		if v == nil {
			op = kadm.DeleteConfig
		}
		alter = append(alter, kadm.AlterConfig{Op: op, Name: k, Value: v})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := adm.AlterTopicConfigs(ctx, alter, topic)
	if err == nil {
		for _, r := range resp {
			if r.Err != nil {
				err = fmt.Errorf("%w (%s)", r.Err, r.ErrMessage)
			}
		}
	}
	if err != nil {
		t.Fatalf("IncrementalAlterConfigs topic %s: %v", topic, err)
	}
}

// writeLegacyReassignment writes /admin/reassign_partitions as a 2.x
// kafka-reassign-partitions.sh --zookeeper did.
func writeLegacyReassignment(t *testing.T, c *Cluster, topic string, target assignment) {
	t.Helper()
	type part struct {
		Topic     string  `json:"topic"`
		Partition int32   `json:"partition"`
		Replicas  []int32 `json:"replicas"`
	}
	v := struct {
		Version    int    `json:"version"`
		Partitions []part `json:"partitions"`
	}{Version: 1}
	for p, r := range target {
		v.Partitions = append(v.Partitions, part{topic, p, r})
	}
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ZK.Create(c.Path("/admin/reassign_partitions"), data, 0, zk.WorldACL(zk.PermAll)); err != nil {
		if errors.Is(err, zk.ErrNoNode) {
			// /admin is created by the first broker; make sure.
			_, _ = c.ZK.Create(c.Path("/admin"), nil, 0, zk.WorldACL(zk.PermAll))
			_, err = c.ZK.Create(c.Path("/admin/reassign_partitions"), data, 0, zk.WorldACL(zk.PermAll))
		}
		if err != nil {
			t.Fatalf("create /admin/reassign_partitions: %v", err)
		}
	}
}

// keepLogs copies every broker's log into $BROKER_TEST_KEEP_LOGS/<test>/
// when the test fails and that variable is set, for reading after the
// temporary directories are gone.
func keepLogs(t *testing.T, c *Cluster) {
	dir := os.Getenv("BROKER_TEST_KEEP_LOGS")
	if dir == "" {
		return
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		out := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_"))
		_ = os.MkdirAll(out, 0o755)
		for _, b := range c.Brokers {
			_ = os.WriteFile(filepath.Join(out, fmt.Sprintf("broker-%d.log", b.ID())), []byte(b.Log()), 0o644)
		}
		t.Logf("broker logs kept in %s", out)
	})
}
