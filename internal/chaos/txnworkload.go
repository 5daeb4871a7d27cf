package chaos

import (
	"context"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The transactional workload's topics and group; each topic has
// Partitions partitions at RF 3, as Topic does.
const (
	TxnTopic  = "chaos-txn"     // written by the transactional producers
	CTPInput  = "chaos-ctp-in"  // consume-transform-produce input (idempotent producer)
	CTPOutput = "chaos-ctp-out" // its output, written in transactions
	CTPGroup  = "chaos-ctp"     // its consumer group, offsets committed in the transactions
)

// TxnProducers is how many transactional producers write TxnTopic.
const TxnProducers = 2

// txnTimeout is the producers' transaction.timeout.ms: short, so that a
// transaction left open by a failed EndTxn is aborted by the coordinator
// before the final read.
const txnTimeout = 10 * time.Second

// TxnWorkload is the transactional workload of issue 18 beside the main
// workload: TxnProducers kgo transactional producers, each transaction
// writing 2-4 values to random partitions of TxnTopic and then committing
// (70%) or aborting at random (always aborting when a produce failed); an
// idempotent producer feeding CTPInput; a consume-transform-produce loop
// (kgo's GroupTransactSession, group CTPGroup) copying each input record
// to the same partition of CTPOutput with its offsets committed in the
// transaction; a read_committed consumer of TxnTopic and CTPOutput; and a
// sampler of the group's committed offsets (OffsetFetch with
// require_stable) every 250 ms.
type TxnWorkload struct {
	h     *History
	seeds []string
	parts int32
	seed  int64
	logf  func(string, ...any)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	cons   context.CancelFunc
	consWG sync.WaitGroup
	adm    *kgo.Client
}

// StartTxnWorkload creates the topics with create and starts the
// workload against the brokers at seeds.
func StartTxnWorkload(h *History, seeds []string, create func(topic string, partitions int32) error, parts int32, seed int64, logf func(string, ...any)) (*TxnWorkload, error) {
	for _, t := range []string{TxnTopic, CTPInput, CTPOutput} {
		if err := create(t, parts); err != nil {
			return nil, err
		}
	}
	adm, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ClientID("chaos-txn-admin"), kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		return nil, err
	}
	w := &TxnWorkload{h: h, seeds: seeds, parts: parts, seed: seed, logf: logf, adm: adm}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	for i := range TxnProducers {
		w.wg.Add(1)
		go w.txnProducer(i)
	}
	w.wg.Add(3)
	go w.inputProducer()
	go w.transform()
	go w.sampleOffsets()
	offsets := map[int32]kgo.Offset{}
	for p := int32(0); p < parts; p++ {
		offsets[p] = kgo.NewOffset().At(0)
	}
	ccl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ClientID("chaos-txn-consumer"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{TxnTopic: offsets, CTPOutput: maps.Clone(offsets)}),
		kgo.FetchMaxWait(500*time.Millisecond), kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		w.cancel()
		w.wg.Wait()
		adm.Close()
		return nil, err
	}
	cctx, ccancel := context.WithCancel(context.Background())
	w.cons = ccancel
	w.consWG.Add(1)
	go w.consume(cctx, ccl, "rc0", func(p Poll) { w.h.addTxnPoll(p) })
	return w, nil
}

// clientOpts are the settings every producing client shares with the
// main workload's producer.
func (w *TxnWorkload) clientOpts(clientID string) []kgo.Opt {
	return []kgo.Opt{
		kgo.SeedBrokers(w.seeds...), kgo.ClientID(clientID),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
		kgo.RecordDeliveryTimeout(20 * time.Second),
		kgo.ProduceRequestTimeout(10 * time.Second),
		kgo.RequestTimeoutOverhead(5 * time.Second),
	}
}

func (w *TxnWorkload) pause(d time.Duration) bool {
	select {
	case <-w.ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// txnProducer runs transactions until stopped. After an EndTxn error it
// starts a new client with the same transactional.id: its InitProducerId
// fences the old one and aborts whatever it left open.
func (w *TxnWorkload) txnProducer(i int) {
	defer w.wg.Done()
	id := fmt.Sprintf("chaos-txn-%d", i)
	rng := rand.New(rand.NewSource(w.seed + int64(i)))
	var cl *kgo.Client
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	reset := func() {
		if cl != nil {
			cl.Close()
			cl = nil
		}
	}
	for seq := int64(0); w.ctx.Err() == nil; seq++ {
		if cl == nil {
			var err error
			opts := append(w.clientOpts("chaos-txn"), kgo.TransactionalID(id), kgo.TransactionTimeout(txnTimeout))
			if cl, err = kgo.NewClient(opts...); err != nil {
				w.logf("%s: new client: %v", id, err)
				if !w.pause(time.Second) {
					return
				}
				continue
			}
		}
		t := Txn{Producer: id, Seq: seq, Invoke: w.h.Now()}
		if err := cl.BeginTransaction(); err != nil {
			reset()
			continue
		}
		recs := make([]*kgo.Record, 2+rng.Intn(3))
		for j := range recs {
			p := rng.Int31n(w.parts)
			v := fmt.Sprintf("%s-%06d-%d", id, seq, j)
			recs[j] = &kgo.Record{Topic: TxnTopic, Partition: p, Value: []byte(v)}
			t.Writes = append(t.Writes, TxnWrite{Topic: TxnTopic, Partition: p, Value: v, Offset: -1})
		}
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		allOK := true
		// ProduceSync's results come in the order the promises ran.
		for _, r := range cl.ProduceSync(ctx, recs...) {
			if r.Err != nil {
				allOK, t.Err = false, r.Err.Error()
			} else if j := slices.Index(recs, r.Record); j >= 0 {
				t.Writes[j].Offset = r.Record.Offset
			}
		}
		t.Commit = allOK && rng.Float64() < 0.7
		t.End = w.h.Now()
		err := cl.EndTransaction(ctx, kgo.TransactionEndTry(t.Commit))
		t.Complete = w.h.Now()
		cancel()
		if err == nil {
			t.Outcome = OK
		} else {
			t.Outcome, t.Err = Info, err.Error()
			reset()
		}
		w.h.addTxn(t)
		if !w.pause(20 * time.Millisecond) {
			return
		}
	}
}

// inputProducer feeds CTPInput round-robin, a record every 10 ms.
func (w *TxnWorkload) inputProducer() {
	defer w.wg.Done()
	cl, err := kgo.NewClient(w.clientOpts("chaos-ctp-input")...)
	if err != nil {
		w.logf("ctp input producer: %v", err)
		return
	}
	defer cl.Close()
	for seq := int64(0); w.pause(10 * time.Millisecond); seq++ {
		p := int32(seq % int64(w.parts))
		cl.Produce(context.Background(), &kgo.Record{Topic: CTPInput, Partition: p, Value: []byte(fmt.Sprintf("in-%d-%08d", p, seq))}, func(*kgo.Record, error) {})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = cl.Flush(ctx) // what is not acknowledged still counts once in the final log
}

// transform is the consume-transform-produce loop. An output value is
// the input value, "@", the transactional id and the transaction's
// sequence, so that a record processed again after an abort is told
// apart from its first attempt.
func (w *TxnWorkload) transform() {
	defer w.wg.Done()
	const id = "chaos-ctp-0"
	var sess *kgo.GroupTransactSession
	defer func() {
		if sess != nil {
			sess.Close()
		}
	}()
	for seq := int64(0); w.ctx.Err() == nil; {
		if sess == nil {
			var err error
			opts := append(w.clientOpts("chaos-ctp"), kgo.TransactionalID(id), kgo.TransactionTimeout(txnTimeout),
				kgo.ConsumerGroup(CTPGroup), kgo.ConsumeTopics(CTPInput), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
				kgo.RequireStableFetchOffsets(), kgo.FetchMaxWait(500*time.Millisecond))
			if sess, err = kgo.NewGroupTransactSession(opts...); err != nil {
				w.logf("%s: new session: %v", id, err)
				if !w.pause(time.Second) {
					return
				}
				continue
			}
		}
		pctx, pcancel := context.WithTimeout(w.ctx, 2*time.Second)
		fs := sess.PollFetches(pctx)
		pcancel()
		recs := fs.Records()
		if len(recs) == 0 || w.ctx.Err() != nil {
			continue
		}
		t := Txn{Producer: id, Seq: seq, Group: CTPGroup, Invoke: w.h.Now()}
		seq++
		if err := sess.Begin(); err != nil {
			sess.Close()
			sess = nil
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		var mu sync.Mutex // the promises run on kgo's goroutine
		t.Writes = make([]TxnWrite, len(recs))
		for j, r := range recs {
			v := fmt.Sprintf("%s@%s/%d", r.Value, id, t.Seq)
			t.Writes[j] = TxnWrite{Topic: CTPOutput, Partition: r.Partition, Value: v, Offset: -1}
			sess.Produce(ctx, &kgo.Record{Topic: CTPOutput, Partition: r.Partition, Value: []byte(v)}, func(r *kgo.Record, err error) {
				if err == nil {
					mu.Lock()
					t.Writes[j].Offset = r.Offset
					mu.Unlock()
				}
			})
		}
		// What End commits in the transaction: the session's uncommitted
		// offsets, the position after what it has polled.
		t.Offsets = map[int32]int64{}
		for p, eo := range sess.Client().UncommittedOffsets()[CTPInput] {
			t.Offsets[p] = eo.Offset
		}
		t.End = w.h.Now()
		committed, err := sess.End(ctx, kgo.TryCommit)
		t.Complete = w.h.Now()
		cancel()
		mu.Lock() // End flushed: every promise has run
		t.Writes = slices.Clone(t.Writes)
		mu.Unlock()
		if err != nil {
			// Whether it committed is unknown.
			t.Commit, t.Outcome, t.Err = true, Info, err.Error()
			sess.Close()
			sess = nil
		} else {
			// Not committed without an error: the session aborted
			// (a rebalance or a failed produce).
			t.Commit, t.Outcome = committed, OK
		}
		w.h.addTxn(t)
	}
}

// sampleOffsets records the group's committed offsets every 250 ms.
func (w *TxnWorkload) sampleOffsets() {
	defer w.wg.Done()
	for w.pause(250 * time.Millisecond) {
		w.sampleOnce(w.ctx)
	}
}

// sampleOnce records one OffsetFetch with require_stable; it reports
// whether every partition answered (none pending).
func (w *TxnWorkload) sampleOnce(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	at := w.h.Now()
	resp, err := kadm.NewClient(w.adm).FetchOffsets(kadm.RequireStable(ctx), CTPGroup)
	if err != nil {
		return false
	}
	n := 0
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Topic != CTPInput || o.Err != nil {
			return
		}
		n++
		w.h.addGroupOffset(GroupOffset{At: at, Group: CTPGroup, Partition: o.Partition, Offset: o.At})
	})
	return n == int(w.parts)
}

func (w *TxnWorkload) consume(ctx context.Context, cl *kgo.Client, name string, add func(Poll)) {
	defer w.consWG.Done()
	defer cl.Close()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		at := w.h.Now()
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			if len(fp.Records) == 0 {
				return
			}
			pl := Poll{Consumer: name, Topic: fp.Topic, Partition: fp.Partition, At: at, HW: fp.HighWatermark}
			for _, r := range fp.Records {
				pl.Offsets = append(pl.Offsets, r.Offset)
				pl.Values = append(pl.Values, string(r.Value))
			}
			add(pl)
		})
	}
}

// StopWriters ends the producers and the transform loop; each ends its
// transaction in flight first.
func (w *TxnWorkload) StopWriters() {
	w.cancel()
	w.wg.Wait()
}

// Finish waits (up to timeout) until no transaction is open on TxnTopic
// and CTPOutput (LSO = HW on every partition) and the group has no
// pending offsets, takes the final offset samples, reads both topics
// from offset 0 with read_committed, stops the consumer and returns the
// history for the checker; Input is left to the caller, which reads it
// from the replicas' files.
func (w *TxnWorkload) Finish(timeout time.Duration) (TxnInput, []string) {
	defer w.adm.Close()
	var notes []string
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	adm := kadm.NewClient(w.adm)
	stable := func() error {
		hw, err := adm.ListEndOffsets(ctx, TxnTopic, CTPOutput)
		if err != nil {
			return err
		}
		lso, err := adm.ListCommittedOffsets(ctx, TxnTopic, CTPOutput)
		if err != nil {
			return err
		}
		var open error
		hw.Each(func(o kadm.ListedOffset) {
			if l, ok := lso.Lookup(o.Topic, o.Partition); o.Err != nil || !ok || l.Err != nil || l.Offset != o.Offset {
				open = fmt.Errorf("%s/%d: HW %d, LSO %d (%v)", o.Topic, o.Partition, o.Offset, l.Offset, o.Err)
			}
		})
		return open
	}
	for {
		err := stable()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			notes = append(notes, fmt.Sprintf("transactions still open at the final read: %v", err))
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	for !w.sampleOnce(ctx) && ctx.Err() == nil {
		time.Sleep(250 * time.Millisecond)
	}
	if ctx.Err() != nil {
		notes = append(notes, "the group's final offsets were still pending")
	}
	var final []Poll
	offsets := map[int32]kgo.Offset{}
	for p := int32(0); p < w.parts; p++ {
		offsets[p] = kgo.NewOffset().At(0)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(w.seeds...), kgo.ClientID("chaos-txn-final"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{TxnTopic: offsets, CTPOutput: maps.Clone(offsets)}),
		kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		notes = append(notes, fmt.Sprintf("final read: %v", err))
	} else {
		// A read_committed position skips aborted data and markers, so
		// the end offsets cannot tell when the read is done: it ends 3 s
		// after its last record once it has seen every value of every
		// acknowledged commit (or at timeout, with a note: the checker
		// then counts what it did not see as lost).
		txns, _, _ := w.h.txnSnapshot()
		missing := map[string]bool{}
		for _, t := range txns {
			if t.committed() {
				for _, wr := range t.Writes {
					missing[wr.Value] = true
				}
			}
		}
		quiet := time.Now()
		for (time.Since(quiet) < 3*time.Second || len(missing) > 0) && ctx.Err() == nil {
			pctx, pcancel := context.WithTimeout(ctx, time.Second)
			fs := cl.PollFetches(pctx)
			pcancel()
			fs.EachPartition(func(fp kgo.FetchTopicPartition) {
				if len(fp.Records) == 0 {
					return
				}
				quiet = time.Now()
				pl := Poll{Consumer: "final", Topic: fp.Topic, Partition: fp.Partition, At: w.h.Now(), HW: fp.HighWatermark}
				for _, r := range fp.Records {
					pl.Offsets = append(pl.Offsets, r.Offset)
					pl.Values = append(pl.Values, string(r.Value))
					delete(missing, string(r.Value))
				}
				final = append(final, pl)
			})
		}
		cl.Close()
		if len(missing) > 0 {
			notes = append(notes, fmt.Sprintf("the final read_committed read ended without %d values of acknowledged commits", len(missing)))
		}
	}
	w.cons()
	w.consWG.Wait()
	txns, polls, groups := w.h.txnSnapshot()
	return TxnInput{Txns: txns, Polls: polls, Final: final, GroupOffsets: groups, OutputTopic: CTPOutput}, notes
}
