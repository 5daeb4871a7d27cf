package test

// Helpers of the failover tests: ZooKeeper readers for the partition state
// znode, /controller and /controller_epoch; topic creation with an explicit
// assignment; a paced, continuously running kgo producer that records every
// acknowledgement with its time; raw Produce and Metadata pinned to one
// broker; and a reader of Kafka's segment files for comparing replicas
// offline.

import (
	"context"
	"encoding/binary"
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
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/internal/recordcodec"
)

// failoverProps are the server.properties overrides of every failover
// cluster: RF=3 topics with min.insync.replicas=2, unclean election off, a
// short replica.lag.time.max.ms (with replica.fetch.wait.max.ms well below
// it) and no automatic preferred-leader rebalance, so that leadership moves
// only because a test made it move. extra is applied on top.
func failoverProps(extra map[string]string) map[string]string {
	m := map[string]string{
		"min.insync.replicas":            "2",
		"default.replication.factor":     "3",
		"unclean.leader.election.enable": "false",
		"replica.lag.time.max.ms":        strconv.Itoa(int(lagTime / time.Millisecond)),
		"replica.fetch.wait.max.ms":      "500",
		"auto.leader.rebalance.enable":   "false",
		"auto.create.topics.enable":      "false",
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// lagTime is replica.lag.time.max.ms of failoverProps.
const lagTime = 4 * time.Second

// partState is a partition state znode,
// /brokers/topics/<t>/partitions/<p>/state, in Kafka's JSON.
type partState struct {
	ControllerEpoch int32   `json:"controller_epoch"`
	Leader          int32   `json:"leader"`
	Version         int     `json:"version"`
	LeaderEpoch     int32   `json:"leader_epoch"`
	ISR             []int32 `json:"isr"`
	ZkVersion       int32   `json:"-"`
}

func (s partState) String() string {
	return fmt.Sprintf("leader=%d leader_epoch=%d isr=%v controller_epoch=%d zkVersion=%d", s.Leader, s.LeaderEpoch, s.ISR, s.ControllerEpoch, s.ZkVersion)
}

// inISR reports whether id is in the ISR.
func (s partState) inISR(id int32) bool { return slices.Contains(s.ISR, id) }

// State reads the state znode of topic-p.
func (c *Cluster) State(topic string, p int32) (partState, error) {
	path := fmt.Sprintf("/brokers/topics/%s/partitions/%d/state", topic, p)
	data, st, err := c.Get(path)
	if err != nil {
		return partState{}, fmt.Errorf("get %s: %w", path, err)
	}
	var s partState
	if err := json.Unmarshal(data, &s); err != nil {
		return partState{}, fmt.Errorf("%s: %w: %q", path, err, data)
	}
	s.ZkVersion = st.Version
	return s, nil
}

// mustState is State failing the test on error.
func (c *Cluster) mustState(t *testing.T, topic string, p int32) partState {
	t.Helper()
	s, err := c.State(topic, p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// waitState polls the state znode of topic-p until cond accepts it.
func (c *Cluster) waitState(t *testing.T, topic string, p int32, timeout time.Duration, cond func(partState) error) partState {
	t.Helper()
	var got partState
	eventually(t, timeout, func() error {
		s, err := c.State(topic, p)
		if err != nil {
			return err
		}
		if err := cond(s); err != nil {
			return fmt.Errorf("%s-%d: %w (state %v)", topic, p, err, s)
		}
		got = s
		return nil
	})
	return got
}

// ControllerID reads /controller ({"version":1,"brokerid":N,...}).
func (c *Cluster) ControllerID() (int32, error) {
	data, _, err := c.Get("/controller")
	if err != nil {
		return -1, fmt.Errorf("get /controller: %w", err)
	}
	var v struct {
		BrokerID *int32 `json:"brokerid"`
	}
	if err := json.Unmarshal(data, &v); err != nil || v.BrokerID == nil {
		return -1, fmt.Errorf("/controller = %q: no brokerid (%v)", data, err)
	}
	return *v.BrokerID, nil
}

// ControllerEpoch reads /controller_epoch (a plain integer).
func (c *Cluster) ControllerEpoch() (int32, error) {
	data, _, err := c.Get("/controller_epoch")
	if err != nil {
		return -1, fmt.Errorf("get /controller_epoch: %w", err)
	}
	n, err := strconv.Atoi(string(data))
	if err != nil {
		return -1, fmt.Errorf("/controller_epoch = %q: %w", data, err)
	}
	return int32(n), nil
}

// Registered reports whether /brokers/ids/<id> exists.
func (c *Cluster) Registered(id int32) (bool, error) {
	ok, _, err := c.ZK.Exists(c.Path(fmt.Sprintf("/brokers/ids/%d", id)))
	return ok, err
}

// liveSeeds are the addresses of the running brokers.
func (c *Cluster) liveSeeds() []string {
	var out []string
	for _, b := range c.Brokers {
		if b.Running() {
			out = append(out, b.Addr())
		}
	}
	return out
}

// others returns the ids of brokers other than the given ones, ascending.
func (c *Cluster) others(not ...int32) []int32 {
	var out []int32
	for _, b := range c.Brokers {
		if !slices.Contains(not, b.ID()) {
			out = append(out, b.ID())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// setTopicConfig writes /config/topics/<topic> in Kafka's JSON and the
// /config/changes/config_change_ sequential notification, as kafka-configs.sh
// --zookeeper does.
func (c *Cluster) setTopicConfig(t *testing.T, topic string, cfg map[string]string) {
	t.Helper()
	data, err := json.Marshal(map[string]any{"version": 1, "config": cfg})
	if err != nil {
		t.Fatal(err)
	}
	path := c.Path("/config/topics/" + topic)
	if _, err := c.ZK.Set(path, data, -1); errors.Is(err, zk.ErrNoNode) {
		_, err = c.ZK.Create(path, data, 0, zk.WorldACL(zk.PermAll))
		if err != nil {
			t.Fatalf("create %s: %v", path, err)
		}
	} else if err != nil {
		t.Fatalf("set %s: %v", path, err)
	}
	note, _ := json.Marshal(map[string]any{"version": 2, "entity_path": "topics/" + topic})
	if _, err := c.ZK.Create(c.Path("/config/changes/config_change_"), note, zk.FlagSequence, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("create config change notification: %v", err)
	}
}

// createTopic creates topic through CreateTopics, either with partitions
// and rf or (if assignment is set) with that replica assignment, and waits
// until every partition has a leader, a full ISR, and every running broker's
// Metadata names that leader.
func createTopic(t *testing.T, c *Cluster, topic string, partitions int32, rf int16, assignment [][]int32, configs map[string]string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = topic
	rt.NumPartitions, rt.ReplicationFactor = partitions, rf
	if assignment != nil {
		rt.NumPartitions, rt.ReplicationFactor = -1, -1
		for p, replicas := range assignment {
			a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			a.Partition, a.Replicas = int32(p), replicas
			rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
		}
		partitions, rf = int32(len(assignment)), int16(len(assignment[0]))
	}
	for k, v := range configs {
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, cfg)
	}
	req.Topics = append(req.Topics, rt)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.liveSeeds()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	for _, r := range resp.Topics {
		if r.ErrorCode != 0 {
			msg := ""
			if r.ErrorMessage != nil {
				msg = *r.ErrorMessage
			}
			t.Fatalf("create topic %s: error code %d %s", topic, r.ErrorCode, msg)
		}
	}
	for p := int32(0); p < partitions; p++ {
		c.waitState(t, topic, p, 30*time.Second, func(s partState) error {
			if s.Leader < 0 || len(s.ISR) != int(rf) {
				return fmt.Errorf("want a leader and %d in the ISR", rf)
			}
			return nil
		})
	}
	for _, b := range c.Brokers {
		if b.Running() {
			waitMetadataLeaders(t, c, b, topic, partitions)
		}
	}
}

// waitMetadataLeaders waits until b's Metadata for topic shows every one of
// its partitions without error and with the leader of its state znode.
func waitMetadataLeaders(t *testing.T, c *Cluster, b *Broker, topic string, partitions int32) {
	t.Helper()
	eventually(t, 30*time.Second, func() error {
		mt, err := topicMetadata(b, topic)
		if err != nil {
			return err
		}
		if len(mt.Partitions) != int(partitions) {
			return fmt.Errorf("broker %d: metadata for %s has %d partitions, want %d", b.ID(), topic, len(mt.Partitions), partitions)
		}
		for _, mp := range mt.Partitions {
			s, err := c.State(topic, mp.Partition)
			if err != nil {
				return err
			}
			if mp.ErrorCode != 0 || mp.Leader != s.Leader {
				return fmt.Errorf("broker %d: metadata %s-%d error %d leader %d, state znode %v", b.ID(), topic, mp.Partition, mp.ErrorCode, mp.Leader, s)
			}
		}
		return nil
	})
}

// topicMetadata asks b (and only b) for the metadata of topic.
func topicMetadata(b *Broker, topic string) (kmsg.MetadataResponseTopic, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.RequestRetries(0), kgo.DialTimeout(time.Second))
	if err != nil {
		return kmsg.MetadataResponseTopic{}, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	r, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		return kmsg.MetadataResponseTopic{}, fmt.Errorf("broker %d metadata: %w", b.ID(), err)
	}
	resp := r.(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 {
		return kmsg.MetadataResponseTopic{}, fmt.Errorf("broker %d metadata: %d topics", b.ID(), len(resp.Topics))
	}
	mt := resp.Topics[0]
	if mt.ErrorCode != 0 {
		return mt, fmt.Errorf("broker %d metadata: topic %s error code %d", b.ID(), topic, mt.ErrorCode)
	}
	return mt, nil
}

// rawProduce sends one acks=all Produce of recs (one uncompressed,
// non-idempotent v2 batch) for topic-p to broker b only, and returns the
// partition's error code and base offset.
func rawProduce(b *Broker, topic string, p int32, recs []Rec) (code int16, base int64, err error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.RequestRetries(0), kgo.DialTimeout(time.Second))
	if err != nil {
		return 0, 0, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = p
	rp.Records = buildBatch(recs)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	r, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		return 0, 0, fmt.Errorf("produce to broker %d: %w", b.ID(), err)
	}
	resp := r.(*kmsg.ProduceResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, 0, fmt.Errorf("produce to broker %d: response without the partition: %+v", b.ID(), resp)
	}
	pr := resp.Topics[0].Partitions[0]
	return pr.ErrorCode, pr.BaseOffset, nil
}

// buildBatch encodes recs as one uncompressed v2 record batch with no
// producer id.
func buildBatch(recs []Rec) []byte {
	return buildProducerBatch(recs, -1, -1, -1, 0)
}

// buildProducerBatch is buildBatch with the producer fields and attributes
// set (0x10: transactional), through recordcodec.AppendBatch.
func buildProducerBatch(recs []Rec, producerID int64, producerEpoch int16, firstSequence int32, attributes int16) []byte {
	b := recordcodec.NewBatch(time.Now().UnixMilli())
	for _, r := range recs {
		rr := recordcodec.Record{Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			rr.Headers = append(rr.Headers, recordcodec.Header{Key: h.Key, Value: h.Value})
		}
		b.Records = append(b.Records, rr)
	}
	b.ProducerID, b.ProducerEpoch, b.BaseSequence, b.Attributes = producerID, producerEpoch, firstSequence, attributes
	return recordcodec.MustBatch(b)
}

// readSegments reads every record of one replica from Kafka's segment files
// (<log.dirs>/<topic>-<p>/*.log) in offset order. A torn batch at the end of
// the last segment ends the read; a compressed batch is an error (the
// failover producers do not compress).
func readSegments(dir string, p int32) ([]Rec, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no segment files in %s", dir)
	}
	sort.Strings(files) // 20-digit base offsets sort as numbers
	var out []Rec
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for len(data) >= 12 {
			n := 12 + int(int32(binary.BigEndian.Uint32(data[8:12])))
			if n < 61 || n > len(data) {
				break // torn tail
			}
			var b kmsg.RecordBatch
			if err := b.ReadFrom(data[:n]); err != nil {
				return nil, fmt.Errorf("%s: batch at %d: %w", f, b.FirstOffset, err)
			}
			data = data[n:]
			if b.Attributes&0x07 != 0 {
				return nil, fmt.Errorf("%s: batch at %d is compressed (attributes %#x)", f, b.FirstOffset, b.Attributes)
			}
			if b.Attributes&0x20 != 0 {
				continue // control batch
			}
			recs := b.Records
			for i := int32(0); i < b.NumRecords; i++ {
				l, k := binary.Varint(recs)
				if k <= 0 || int(l)+k > len(recs) {
					return nil, fmt.Errorf("%s: batch at %d: bad record %d", f, b.FirstOffset, i)
				}
				var kr kmsg.Record
				if err := kr.ReadFrom(recs[:k+int(l)]); err != nil {
					return nil, fmt.Errorf("%s: batch at %d record %d: %w", f, b.FirstOffset, i, err)
				}
				recs = recs[k+int(l):]
				r := Rec{Partition: p, Offset: b.FirstOffset + int64(kr.OffsetDelta), Key: kr.Key, Value: kr.Value}
				for _, h := range kr.Headers {
					r.Headers = append(r.Headers, Header{Key: h.Key, Value: h.Value})
				}
				out = append(out, r)
			}
		}
	}
	return out, nil
}

// ackEvent is one acknowledged record with its send and acknowledgement
// times.
type ackEvent struct {
	Rec
	Sent, At time.Time
}

// liveProducer is a default kgo producer (idempotent, acks=all; no
// compression, so segment files can be read back) writing to topic
// continuously, round-robin over its partitions, one record every pace,
// until Stop. Keys are "<name>-<n>" and unique.
type liveProducer struct {
	t     *testing.T
	cl    *kgo.Client
	topic string
	name  string
	parts int32
	pace  time.Duration
	stop  chan struct{}
	done  chan struct{}

	mu   sync.Mutex
	acks []ackEvent // in acknowledgement order
	errs []error
	sent int
}

func startProducer(t *testing.T, c *Cluster, topic string, parts int32, name string) *liveProducer {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Seeds()...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		// Refresh metadata as soon as a leader moves: the figures measure
		// the broker, not the client's metadata throttle.
		kgo.MetadataMinAge(100*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
	)
	if err != nil {
		t.Fatal(err)
	}
	p := &liveProducer{t: t, cl: cl, topic: topic, name: name, parts: parts, pace: 2 * time.Millisecond,
		stop: make(chan struct{}), done: make(chan struct{})}
	t.Cleanup(func() {
		select {
		case <-p.stop:
		default:
			close(p.stop)
		}
		<-p.done
		cl.Close()
	})
	go p.run()
	return p
}

func (p *liveProducer) run() {
	defer close(p.done)
	pad := strings.Repeat("v", 80)
	for i := 0; ; i++ {
		select {
		case <-p.stop:
			return
		default:
		}
		key := fmt.Sprintf("%s-%07d", p.name, i)
		r := &kgo.Record{Topic: p.topic, Partition: int32(i) % p.parts, Key: []byte(key), Value: []byte(key + "-" + pad)}
		sent := time.Now()
		p.mu.Lock()
		p.sent++
		p.mu.Unlock()
		p.cl.Produce(context.Background(), r, func(r *kgo.Record, err error) {
			now := time.Now()
			p.mu.Lock()
			defer p.mu.Unlock()
			if err != nil {
				p.errs = append(p.errs, fmt.Errorf("%s: %w", r.Key, err))
				return
			}
			p.acks = append(p.acks, ackEvent{Rec: fromKgo(r), Sent: sent, At: now})
		})
		time.Sleep(p.pace) // pacing the load, not waiting for a condition
	}
}

// Stop ends production, waits for every outstanding record (up to a
// minute) and returns the acknowledgements. Produce errors fail the test
// unless allowErrors.
func (p *liveProducer) Stop(allowErrors bool) []ackEvent {
	p.t.Helper()
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.cl.Flush(ctx); err != nil {
		p.t.Errorf("producer %s: flush: %v (%d records outstanding)", p.name, err, p.cl.BufferedProduceRecords())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.t.Logf("producer %s: sent=%d acknowledged=%d failed=%d", p.name, p.sent, len(p.acks), len(p.errs))
	if len(p.errs) > 0 && !allowErrors {
		p.t.Errorf("producer %s: %d records failed, first: %v", p.name, len(p.errs), p.errs[0])
	}
	return append([]ackEvent(nil), p.acks...)
}

// count returns how many acknowledgements of partition part (-1: any) came
// after from.
func (p *liveProducer) count(part int32, from time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, a := range p.acks {
		if (part < 0 || a.Partition == part) && a.At.After(from) {
			n++
		}
	}
	return n
}

// firstAck returns the first acknowledgement of partition part after from.
func (p *liveProducer) firstAck(part int32, from time.Time) (ackEvent, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range p.acks {
		if a.Partition == part && a.At.After(from) {
			return a, true
		}
	}
	return ackEvent{}, false
}

// waitAcks waits until partition part (-1: any) has n acknowledgements after from.
func (p *liveProducer) waitAcks(part int32, n int, from time.Time, timeout time.Duration) {
	p.t.Helper()
	eventually(p.t, timeout, func() error {
		if got := p.count(part, from); got < n {
			p.mu.Lock()
			errs := len(p.errs)
			p.mu.Unlock()
			return fmt.Errorf("producer %s: %d of %d acknowledgements on partition %d since %s (%d produce errors)",
				p.name, got, n, part, from.Format("15:04:05.000"), errs)
		}
		return nil
	})
}

// snapshot returns the acknowledgements so far, production going on.
func (p *liveProducer) snapshot() []ackEvent {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]ackEvent(nil), p.acks...)
}

func recsOf(acks []ackEvent) []Rec {
	out := make([]Rec, len(acks))
	for i, a := range acks {
		out[i] = a.Rec
	}
	return out
}

// longestGap is the longest time between consecutive acknowledgements of
// partition part within [from, to], counting from from and to to.
func longestGap(acks []ackEvent, part int32, from, to time.Time) time.Duration {
	var ts []time.Time
	for _, a := range acks {
		if a.Partition == part && !a.At.Before(from) && !a.At.After(to) {
			ts = append(ts, a.At)
		}
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	prev, gap := from, time.Duration(0)
	for _, at := range append(ts, to) {
		gap = max(gap, at.Sub(prev))
		prev = at
	}
	return gap
}

// terminate sends SIGTERM without waiting and returns a channel closed when
// the process exits.
func (b *Broker) terminate() <-chan struct{} {
	b.c.t.Helper()
	done, ok := b.p.Terminate()
	if !ok {
		b.c.t.Fatalf("terminate broker %d: not running", b.id)
	}
	return done
}

// exitCode is the exit code of the last process (-1 if still running or
// killed by a signal).
func (b *Broker) exitCode() int { return b.p.ExitCode() }

// consistently polls fn every 100 ms for d and fails the test the first time
// it returns an error.
func consistently(t *testing.T, d time.Duration, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if err := fn(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
