package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/internal/recordcodec"
)

// Profile is a client and topic configuration from reliability.md §5.
type Profile struct {
	Name string
	// Acks is -1 (all) or 1.
	Acks int16
	// Idempotent selects franz-go's default idempotent producer.
	Idempotent bool
	// BrokerProps are server.properties overrides.
	BrokerProps map[string]string
	// Safe says the profile is covered by Kafka's promise: every anomaly
	// is a failure. Otherwise it is a negative control.
	Safe bool
	// Expect is the anomaly (Anomalies.ByName) a negative control must
	// show; "" means lost.
	Expect string
	// DeliveryTimeout is the kgo producers' delivery.timeout (0: 30 s).
	DeliveryTimeout time.Duration
}

// Profiles by name.
var (
	SAFE = Profile{Name: "SAFE", Acks: -1, Idempotent: true, Safe: true,
		BrokerProps: map[string]string{"min.insync.replicas": "2", "unclean.leader.election.enable": "false"}}
	// TXNSAFE is SAFE for the transactional scenario: __transaction_state
	// at RF 3 with min ISR 2 (Kafka's defaults, set so the run does not
	// depend on them) and 10 partitions instead of 50, so that a
	// coordinator failover loads fewer.
	TXNSAFE = Profile{Name: "SAFE", Acks: -1, Idempotent: true, Safe: true,
		BrokerProps: map[string]string{"min.insync.replicas": "2", "unclean.leader.election.enable": "false",
			"transaction.state.log.replication.factor": "3", "transaction.state.log.min.isr": "2",
			"transaction.state.log.num.partitions": "10"}}
	ACK1 = Profile{Name: "ACK1", Acks: 1, Idempotent: false,
		BrokerProps: map[string]string{"min.insync.replicas": "2", "unclean.leader.election.enable": "false"}}
	UNCLEAN = Profile{Name: "UNCLEAN", Acks: -1, Idempotent: true,
		BrokerProps: map[string]string{"min.insync.replicas": "1", "unclean.leader.election.enable": "true"}}
	// NONIDEM is SAFE with idempotence off and retries on: duplicates of
	// retried writes are allowed, and the negative control is caught when
	// the checker reports one. Its delivery timeout is Kafka's default
	// (120 s), so records outlive a 60 s client cut and are retried after
	// it while their first attempts, held in the cut, land too.
	NONIDEM = Profile{Name: "NONIDEM", Acks: -1, Idempotent: false, Expect: "duplicate", DeliveryTimeout: 120 * time.Second,
		BrokerProps: map[string]string{"min.insync.replicas": "2", "unclean.leader.election.enable": "false"}}
	// EPOCH is the profile of Kafka's epoch acceptance tests
	// (EpochDrivenReplicationProtocolAcceptanceTest, reliability.md §2.6):
	// acks=1, min.insync.replicas=1, unclean election on. Acknowledged
	// writes may be lost; replicas must still agree.
	EPOCH = Profile{Name: "EPOCH", Acks: 1, Idempotent: false, Safe: true,
		BrokerProps: map[string]string{"min.insync.replicas": "1", "unclean.leader.election.enable": "true"}}
)

// Workload is the producers, raw writers and consumer of one run.
type Workload struct {
	h       *History
	c       *Cluster
	topic   string
	parts   int32
	profile Profile
	leaders func(p int32) int32
	logf    func(string, ...any)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	prodWG sync.WaitGroup
	cons   context.CancelFunc
	consWG sync.WaitGroup
	pcls   []*kgo.Client

	members   []*groupMember
	adm       *kgo.Client
	groupStop context.CancelFunc
	groupWG   sync.WaitGroup
}

// Producers is how many kgo producers the workload runs, each writing to
// every partition.
const Producers = 3

// StartWorkload starts Producers kgo producers (idempotent in the SAFE
// profiles), each writing round-robin to every partition (one record every
// 12 ms each), one raw writer per partition (a single-attempt,
// single-record Produce to the leader named by the latest ZooKeeper
// sample, every 50 ms; its outcome is exact, so failed writes are known),
// one assigned kgo consumer reading every partition from offset 0, and a
// consumer group of GroupMembers members committing manually after each
// poll (groupworkload.go).
func StartWorkload(h *History, c *Cluster, topic string, parts int32, profile Profile, leaders func(int32) int32, logf func(string, ...any)) (*Workload, error) {
	w := &Workload{h: h, c: c, topic: topic, parts: parts, profile: profile, leaders: leaders, logf: logf}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.Seeds()...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
		kgo.RecordDeliveryTimeout(cmp.Or(profile.DeliveryTimeout, 30*time.Second)),
		kgo.ProduceRequestTimeout(10 * time.Second),
		kgo.RequestTimeoutOverhead(5 * time.Second),
		kgo.MaxBufferedRecords(5000),
	}
	if profile.Acks == 1 {
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()))
	}
	if !profile.Idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	for i := 0; i < Producers; i++ {
		pcl, err := kgo.NewClient(append(append(opts, kgo.ClientID(fmt.Sprintf("chaos-producer-%d", i)),
			kgo.WithLogger(resetLogger{h: h, producer: fmt.Sprintf("kgo-%d", i)})), c.clientOpts...)...)
		if err != nil {
			w.closeProducers()
			return nil, err
		}
		w.pcls = append(w.pcls, pcl)
		w.prodWG.Add(1)
		go w.produce(i, pcl)
	}
	for p := int32(0); p < parts; p++ {
		w.prodWG.Add(1)
		go w.rawWriter(p)
	}
	offsets := map[int32]kgo.Offset{}
	for p := int32(0); p < parts; p++ {
		offsets[p] = kgo.NewOffset().At(0)
	}
	ccl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Seeds()...), kgo.ClientID("chaos-consumer"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxWait(500 * time.Millisecond), kgo.MetadataMinAge(250 * time.Millisecond)}, c.clientOpts...)...)
	if err != nil {
		w.cancel()
		w.prodWG.Wait()
		w.closeProducers()
		return nil, err
	}
	cctx, ccancel := context.WithCancel(context.Background())
	w.cons = ccancel
	w.consWG.Add(1)
	go w.consume(cctx, ccl)
	if err := w.startGroup(); err != nil {
		w.cancel()
		w.prodWG.Wait()
		w.closeProducers()
		w.StopConsumer()
		return nil, fmt.Errorf("consumer group: %w", err)
	}
	return w, nil
}

func (w *Workload) closeProducers() {
	for _, cl := range w.pcls {
		cl.Close()
	}
}

func (w *Workload) produce(i int, pcl *kgo.Client) {
	defer w.prodWG.Done()
	tick := time.NewTicker(12 * time.Millisecond)
	defer tick.Stop()
	for seq := int64(0); ; seq++ {
		select {
		case <-w.ctx.Done():
			return
		case <-tick.C:
		}
		p := int32(seq) % w.parts
		val := fmt.Sprintf("k%d-%d-%08d", i, p, seq)
		inv := w.h.Now()
		r := &kgo.Record{Topic: w.topic, Partition: p, Value: []byte(val)}
		pcl.Produce(context.Background(), r, func(r *kgo.Record, err error) {
			wr := Write{Producer: fmt.Sprintf("kgo-%d", i), Seq: seq, Partition: p, Value: val, Invoke: inv, Complete: w.h.Now(), Offset: -1}
			switch {
			case err == nil:
				wr.Outcome, wr.Offset = OK, r.Offset
			case isPreAppend(err):
				wr.Outcome, wr.Err = Fail, err.Error()
			default:
				wr.Outcome, wr.Err = Info, err.Error()
			}
			w.h.addWrite(wr)
		})
	}
}

// resetLogger is a kgo logger that records the producer's producer id
// resets (ProducerReset) and drops every other line.
type resetLogger struct {
	h        *History
	producer string
}

func (resetLogger) Level() kgo.LogLevel { return kgo.LogLevelInfo }

func (l resetLogger) Log(_ kgo.LogLevel, msg string, keyvals ...any) {
	if !strings.Contains(msg, "failing the producer ID") {
		return
	}
	r := ProducerReset{Producer: l.producer, At: l.h.Now(), Broker: -1, Partition: -1, ProducerID: -1, ProducerEpoch: -1}
	for i := 0; i+1 < len(keyvals); i += 2 {
		switch k, v := fmt.Sprint(keyvals[i]), keyvals[i+1]; k {
		case "broker":
			if id, err := strconv.ParseInt(fmt.Sprint(v), 10, 32); err == nil {
				r.Broker = int32(id)
			}
		case "partition":
			if p, ok := v.(int32); ok {
				r.Partition = p
			}
		case "producer_id":
			if id, ok := v.(int64); ok {
				r.ProducerID = id
			}
		case "producer_epoch":
			if e, ok := v.(int16); ok {
				r.ProducerEpoch = e
			}
		case "err":
			r.Err = fmt.Sprint(v)
		}
	}
	l.h.addReset(r)
}

// isPreAppend reports whether a kgo produce error proves that no attempt
// was appended: only non-retriable validation refusals qualify, because
// kgo retries everything else, and an earlier attempt may have landed.
func isPreAppend(err error) bool {
	for _, e := range []error{kerr.MessageTooLarge, kerr.InvalidRecord, kerr.CorruptMessage, kerr.InvalidRequiredAcks, kerr.TopicAuthorizationFailed} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// rawWriter sends one single-record Produce at a time for partition p to
// the current leader, with no retry, so each attempt's outcome is exact:
// NOT_ENOUGH_REPLICAS, NOT_LEADER_OR_FOLLOWER and other refusals before
// the append are fail; NOT_ENOUGH_REPLICAS_AFTER_APPEND, timeouts and
// broken connections are info (rawOutcome). With acks=all,
// NOT_LEADER_OR_FOLLOWER is info too: a leader that loses leadership while
// the appended record waits for replication answers it after the append
// (as Kafka's DelayedProduce does), and the record may survive on the new
// leader. So is KAFKA_STORAGE_ERROR: the log dir may fail after the append.
func (w *Workload) rawWriter(p int32) {
	defer w.prodWG.Done()
	clients := map[int32]*kgo.Client{}
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()
	for seq := int64(0); ; seq++ {
		select {
		case <-w.ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
		leader := w.leaders(p)
		b := w.c.Broker(leader)
		val := fmt.Sprintf("r-%d-%08d", p, seq)
		wr := Write{Producer: fmt.Sprintf("raw-%d", p), Seq: seq, Partition: p, Value: val, Invoke: w.h.Now(), Offset: -1}
		if b == nil {
			wr.Outcome, wr.Err, wr.Complete = Fail, "no leader", w.h.Now()
			w.h.addWrite(wr)
			continue
		}
		cl := clients[leader]
		if cl == nil {
			var err error
			cl, err = kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Proxy.Addr), kgo.RequestRetries(0),
				kgo.DialTimeout(2 * time.Second), kgo.ClientID("chaos-raw")}, w.c.clientOpts...)...)
			if err != nil {
				continue
			}
			clients[leader] = cl
		}
		code, off, err := rawProduce(cl, w.topic, p, w.profile.Acks, []byte(val))
		wr.Complete = w.h.Now()
		switch {
		case err != nil:
			wr.Outcome, wr.Err = Info, err.Error()
		case code == 0:
			wr.Outcome, wr.Offset = OK, off
		default:
			wr.Outcome, wr.Err = rawOutcome(code, w.profile.Acks), kerr.ErrorForCode(code).Error()
		}
		w.h.addWrite(wr)
	}
}

// rawOutcome classifies a raw writer's single attempt answered with the
// non-zero error code: Fail only for refusals Kafka makes before it
// appends (NOT_ENOUGH_REPLICAS, NOT_LEADER_OR_FOLLOWER with acks=1, an
// unknown partition, no leader, a fenced epoch), Info for everything else.
// KAFKA_STORAGE_ERROR (56) is Info: a leader answers it when its log dir
// fails, which may be after the batch reached the log (an ENOSPC on a
// later write, a failed flush, a checkpoint), and the record can survive
// there or on a follower that fetched it; Kafka's producer retries it.
func rawOutcome(code, acks int16) Outcome {
	switch code {
	case kerr.NotLeaderForPartition.Code:
		if acks == -1 {
			return Info
		}
		return Fail
	case kerr.NotEnoughReplicas.Code, kerr.UnknownTopicOrPartition.Code,
		kerr.LeaderNotAvailable.Code, kerr.FencedLeaderEpoch.Code:
		return Fail
	}
	return Info
}

// BuildBatch encodes values as one uncompressed v2 record batch without a
// producer id (recordcodec.AppendBatch).
func BuildBatch(values ...[]byte) []byte {
	return recordcodec.MustBatch(recordcodec.NewBatch(time.Now().UnixMilli(), recordcodec.Values(values...)...))
}

func rawProduce(cl *kgo.Client, topic string, p int32, acks int16, val []byte) (int16, int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
	defer cancel()
	req := kmsg.NewPtrProduceRequest()
	req.Acks = acks
	req.TimeoutMillis = 4000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = p
	rp.Records = BuildBatch(val)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	r, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		return 0, 0, err
	}
	resp := r.(*kmsg.ProduceResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, 0, fmt.Errorf("produce response without the partition")
	}
	pr := resp.Topics[0].Partitions[0]
	return pr.ErrorCode, pr.BaseOffset, nil
}

func (w *Workload) consume(ctx context.Context, cl *kgo.Client) {
	defer w.consWG.Done()
	defer cl.Close()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		at := w.h.Now()
		w.h.recordRewinds(fs, at, func(int32) string { return "c0" })
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			if len(fp.Records) == 0 {
				return
			}
			pl := Poll{Consumer: "c0", Partition: fp.Partition, At: at, HW: fp.HighWatermark}
			for _, r := range fp.Records {
				pl.Offsets = append(pl.Offsets, r.Offset)
				pl.Values = append(pl.Values, string(r.Value))
			}
			w.h.addPoll(pl)
		})
	}
}

// StopWriters ends production and waits (up to flush) for every
// outstanding kgo record; records still unresolved then are info.
func (w *Workload) StopWriters(flush time.Duration) {
	w.cancel()
	w.prodWG.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), flush)
	defer cancel()
	for i, pcl := range w.pcls {
		if err := pcl.Flush(ctx); err != nil {
			w.logf("producer %d flush: %v (%d records outstanding; they end as info)", i, err, pcl.BufferedProduceRecords())
		}
	}
	w.closeProducers() // fails what is left (callbacks record info)
}

// StopConsumer ends the assigned consumer.
func (w *Workload) StopConsumer() {
	w.cons()
	w.consWG.Wait()
}

// StopGroup waits for the group's final rebalance to settle, records the
// assignment, stops the members and reads the committed offsets.
func (w *Workload) StopGroup() GroupInput { return w.stopGroup() }
