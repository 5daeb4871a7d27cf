package test

// Transaction tests (issue 18), multi-process with real clients:
//
//   - TestTxnExactlyOnceFailover: two kgo GroupTransactSession workers copy
//     an input topic to an output topic (consume-transform-produce, offsets
//     committed in the transaction) while the input is produced with unique
//     values and the broker leading input and output partitions, then the
//     transaction coordinator of a worker, are killed with kill -9 and
//     restarted. read_committed of the output holds every input record
//     exactly once; read_uncommitted holds in addition only records of
//     aborted transactions.
//   - TestTxnFencedProducer: a second producer with the same transactional
//     id fences the first, whose writes fail and never become visible.
//   - TestTxnAbortReadCommitted: aborted records are never returned to
//     read_committed consumers (kgo, librdkafka through
//     confluent-kafka-python and kcat), an open transaction bounds
//     read_committed reads and ListOffsets at the LSO.
//   - TestTxnTimeoutAborted: a transaction left open past
//     transaction.timeout.ms is aborted by the coordinator.

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// eosWorker is one exactly-once worker: a kgo GroupTransactSession reading
// in (read_committed, group eosGroup) and writing, per input record, one
// output record to out with the input's key and the value
// "<key>|<input partition>|<input offset>", all in one transaction with the
// input offsets. An error from Begin or End (kgo: not retryable) closes the
// session and starts a new one with the same transactional id, as a crashed
// and restarted application would: its InitProducerId fences the old
// incarnation and aborts whatever it left open.
type eosWorker struct {
	t       *testing.T
	seeds   []string
	txid    string
	in, out string
	stop    chan struct{}
	done    chan struct{}

	mu          sync.Mutex
	sessions    int
	commits     int // transactions End reported committed
	aborts      int // transactions End reported aborted (a rebalance)
	committed   int // records in committed transactions
	produceErrs int
	restarts    []string // the errors that ended a session
}

const eosGroup = "eos-group"

func startEOSWorker(t *testing.T, seeds []string, txid, in, out string) *eosWorker {
	w := &eosWorker{t: t, seeds: seeds, txid: txid, in: in, out: out, stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	t.Cleanup(w.Stop)
	return w
}

func (w *eosWorker) stopped() bool {
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
}

func (w *eosWorker) run() {
	defer close(w.done)
	for !w.stopped() {
		s, err := kgo.NewGroupTransactSession(
			kgo.SeedBrokers(w.seeds...),
			kgo.ClientID(w.txid),
			kgo.TransactionalID(w.txid),
			kgo.TransactionTimeout(20*time.Second),
			kgo.ConsumerGroup(eosGroup),
			kgo.ConsumeTopics(w.in),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.RequireStableFetchOffsets(),
			kgo.SessionTimeout(10*time.Second),
			kgo.HeartbeatInterval(time.Second),
			kgo.FetchMaxWait(500*time.Millisecond),
			kgo.ProducerBatchCompression(kgo.NoCompression()),
			kgo.MetadataMinAge(200*time.Millisecond),
			kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
		)
		if err != nil {
			w.t.Errorf("worker %s: NewGroupTransactSession: %v", w.txid, err)
			return
		}
		w.mu.Lock()
		w.sessions++
		w.mu.Unlock()
		w.loop(s)
		s.Close()
	}
}

// loop runs transactions until the worker is stopped (between two
// transactions) or a session error.
func (w *eosWorker) loop(s *kgo.GroupTransactSession) {
	for !w.stopped() {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		fs := s.PollRecords(ctx, 1000)
		cancel()
		if fs.IsClientClosed() {
			return
		}
		if fs.NumRecords() == 0 {
			continue
		}
		if err := s.Begin(); err != nil {
			w.restart("begin", err)
			return
		}
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			n++
			out := &kgo.Record{Topic: w.out, Key: bytes.Clone(r.Key),
				Value: []byte(fmt.Sprintf("%s|%d|%d", r.Key, r.Partition, r.Offset))}
			s.Produce(context.Background(), out, func(_ *kgo.Record, err error) {
				if err != nil {
					w.mu.Lock()
					w.produceErrs++
					w.mu.Unlock()
				}
			})
		})
		ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
		committed, err := s.End(ctx, kgo.TryCommit)
		cancel()
		if err != nil {
			w.restart("end", err)
			return
		}
		w.mu.Lock()
		if committed {
			w.commits++
			w.committed += n
		} else {
			w.aborts++
		}
		w.mu.Unlock()
	}
}

func (w *eosWorker) restart(op string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.restarts = append(w.restarts, fmt.Sprintf("%s %s: %v", time.Now().Format("15:04:05.000"), op, err))
}

// Stop stops the worker after its current transaction and waits.
func (w *eosWorker) Stop() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

func (w *eosWorker) committedRecords() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.committed
}

func (w *eosWorker) report() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return fmt.Sprintf("worker %s: sessions=%d committed-txns=%d aborted-txns=%d committed-records=%d produce-errors=%d session-restarts=%d %v",
		w.txid, w.sessions, w.commits, w.aborts, w.committed, w.produceErrs, len(w.restarts), w.restarts)
}

// waitEOSProgress waits until the workers together committed n more
// records than from.
func waitEOSProgress(t *testing.T, ws []*eosWorker, from, n int, timeout time.Duration, what string) int {
	t.Helper()
	total := func() int {
		s := 0
		for _, w := range ws {
			s += w.committedRecords()
		}
		return s
	}
	eventually(t, timeout, func() error {
		if got := total() - from; got < n {
			return fmt.Errorf("%s: %d of %d records committed by the workers", what, got, n)
		}
		return nil
	})
	return total()
}

// killLeaderOf kills (SIGKILL) the broker leading partitions of the most
// topics, then the most partitions, waits for new leaders of what it led,
// runs progress, restarts the broker and returns progress's result.
func killLeaderOf(t *testing.T, c *Cluster, topics []string, parts int32, progress func() int) int {
	t.Helper()
	type tp struct {
		topic string
		p     int32
	}
	led := map[int32][]tp{}
	for _, topic := range topics {
		for p := int32(0); p < parts; p++ {
			s := c.mustState(t, topic, p)
			led[s.Leader] = append(led[s.Leader], tp{topic, p})
		}
	}
	spread := func(id int32) int {
		n := map[string]bool{}
		for _, x := range led[id] {
			n[x.topic] = true
		}
		return len(n)
	}
	victim := int32(-1)
	for id := range led {
		switch {
		case victim < 0,
			spread(id) > spread(victim),
			spread(id) == spread(victim) && len(led[id]) > len(led[victim]),
			spread(id) == spread(victim) && len(led[id]) == len(led[victim]) && id < victim:
			victim = id
		}
	}
	t.Logf("kill -9 broker %d, leader of %v", victim, led[victim])
	killed := time.Now()
	c.Broker(victim).Kill()
	for _, x := range led[victim] {
		c.waitState(t, x.topic, x.p, 3*sessionTimeout, func(s partState) error {
			if s.Leader < 0 || s.Leader == victim {
				return fmt.Errorf("no new leader yet")
			}
			return nil
		})
	}
	t.Logf("new leaders %s after killing broker %d", time.Since(killed).Round(time.Millisecond), victim)
	n := progress()
	c.Broker(victim).Start()
	return n
}

// TestTxnExactlyOnceFailover is issue 18's consume-transform-produce test
// with kgo's GroupTransactSession under kill -9 of partition leaders and of
// the transaction coordinator.
func TestTxnExactlyOnceFailover(t *testing.T) {
	start := time.Now()
	c := NewCluster(t, 3, txnProps(3, nil))
	const in, out, parts = "eos-in", "eos-out", 6
	createTopic(t, c, in, parts, 3, nil, nil)
	createTopic(t, c, out, parts, 3, nil, nil)
	prod := startProducer(t, c, in, parts, "eos")
	workers := []*eosWorker{
		startEOSWorker(t, c.Seeds(), "eos-worker-0", in, out),
		startEOSWorker(t, c.Seeds(), "eos-worker-1", in, out),
	}
	progress := waitEOSProgress(t, workers, 0, 1000, 90*time.Second, "before any fault")
	t.Logf("%d records committed by the workers after %s", progress, time.Since(start).Round(time.Millisecond))

	// Fault 1: kill -9 a broker leading input and output partitions, and
	// restart it once the workers made progress without it.
	progress = killLeaderOf(t, c, []string{in, out}, parts, func() int {
		return waitEOSProgress(t, workers, progress, 300, 60*time.Second, "after killing the leader")
	})
	for _, topic := range []string{in, out} {
		waitFullISR(t, c, topic, parts, 3, 60*time.Second)
	}
	waitFullISR(t, c, "__consumer_offsets", txnStatePartitions, 3, 60*time.Second)
	waitFullISR(t, c, "__transaction_state", txnStatePartitions, 3, 60*time.Second)

	// Fault 2: kill -9 the transaction coordinator of worker 0, and
	// restart it.
	var coord int32
	eventually(t, 20*time.Second, func() (err error) {
		coord, err = txnCoordinatorOf(c, workers[0].txid)
		return err
	})
	other, err := txnCoordinatorOf(c, workers[1].txid)
	t.Logf("fault 2: kill -9 broker %d, transaction coordinator of %s (%s's: broker %d, %v)", coord, workers[0].txid, workers[1].txid, other, err)
	killed := time.Now()
	c.Broker(coord).Kill()
	eventually(t, 3*sessionTimeout, func() error {
		n, err := txnCoordinatorOf(c, workers[0].txid)
		if err == nil && n == coord {
			err = fmt.Errorf("still coordinated by the killed broker %d", coord)
		}
		return err
	})
	t.Logf("fault 2: new transaction coordinator after %s", time.Since(killed).Round(time.Millisecond))
	progress = waitEOSProgress(t, workers, progress, 300, 60*time.Second, "after killing the transaction coordinator")
	c.Broker(coord).Start()

	// Drain: the input stops, the workers commit everything, stop.
	acked := prod.Stop(true)
	checkCommittedAtEnd(t, c, eosGroup, in, 90*time.Second)
	for _, w := range workers {
		w.Stop()
		t.Log(w.report())
	}
	waitStable(t, c.liveSeeds(), out, 60*time.Second)

	input := readAll(t, c.Seeds(), in, readTimeout)
	checkHistory(t, "input", recsOf(acked), input, true)
	unc := readTxnTopic(t, c.liveSeeds(), out, false, readTimeout)
	com := readTxnTopic(t, c.liveSeeds(), out, true, readTimeout)
	lg := splitByOutcome(unc.Records)
	checkReadCommitted(t, "output", lg, com.Records, nil)
	if len(lg.Open) > 0 || len(lg.NonTxn) > 0 {
		t.Errorf("output: %d records of transactions without a marker, %d non-transactional records, want none: %v %v",
			len(lg.Open), len(lg.NonTxn), lg.Open[:min(len(lg.Open), 5)], lg.NonTxn[:min(len(lg.NonTxn), 5)])
	}

	// Exactly once: each input record is the source of exactly one
	// committed output record; every aborted one is an attempt at a real
	// input record.
	type po struct {
		p int32
		o int64
	}
	inputAt := map[po]string{}
	for _, r := range input {
		inputAt[po{r.Partition, r.Offset}] = string(r.Key)
	}
	source := func(r Rec) (po, error) {
		f := strings.Split(string(r.Value), "|")
		if len(f) != 3 || f[0] != string(r.Key) {
			return po{}, fmt.Errorf("output %v: value is not <key>|<partition>|<offset>", r)
		}
		p, err1 := strconv.Atoi(f[1])
		o, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil {
			return po{}, fmt.Errorf("output %v: value is not <key>|<partition>|<offset>", r)
		}
		k := po{int32(p), o}
		if key, ok := inputAt[k]; !ok || key != string(r.Key) {
			return po{}, fmt.Errorf("output %v names input p%d@%d, which holds key %q", r, p, o, key)
		}
		return k, nil
	}
	var bad []string
	copies := map[po]int{}
	for _, r := range dataRecs(com.Records) {
		k, err := source(r)
		if err != nil {
			bad = append(bad, err.Error())
			continue
		}
		copies[k]++
	}
	lost, dup := 0, 0
	for k, key := range inputAt {
		switch n := copies[k]; {
		case n == 0:
			lost++
			if lost <= 5 {
				bad = append(bad, fmt.Sprintf("input p%d@%d %s not in the committed output", k.p, k.o, key))
			}
		case n > 1:
			dup++
			if dup <= 5 {
				bad = append(bad, fmt.Sprintf("input p%d@%d %s in the committed output %d times", k.p, k.o, key, n))
			}
		}
	}
	retried := map[po]bool{}
	for _, r := range lg.Aborted {
		k, err := source(r)
		if err != nil {
			bad = append(bad, "aborted "+err.Error())
			continue
		}
		retried[k] = true
	}
	t.Logf("exactly-once: input=%d (acknowledged %d) committed-output=%d lost=%d duplicated=%d; read_uncommitted=%d of which aborted attempts=%d (of %d distinct inputs) in %d aborted transactions (abort markers); %s",
		len(input), len(acked), len(dataRecs(com.Records)), lost, dup, len(dataRecs(unc.Records)), len(lg.Aborted), len(retried), lg.Aborts,
		time.Since(start).Round(time.Millisecond))
	if len(bad) > 0 {
		t.Errorf("exactly-once violated:\n  %s", strings.Join(bad[:min(len(bad), 20)], "\n  "))
	}
	if len(input) < 2000 {
		t.Errorf("only %d input records: the run is too short to mean anything", len(input))
	}
}

// TestTxnFencedProducer: producer b's InitProducerId with a's transactional
// id fences a (same producer id, higher epoch) and aborts a's open
// transaction; a's later produces and its commit fail with
// PRODUCER_FENCED or INVALID_PRODUCER_EPOCH, also when sent raw with a's
// epoch to the partition leader, and nothing a sent becomes visible.
func TestTxnFencedProducer(t *testing.T) {
	c := NewCluster(t, 3, txnProps(3, nil))
	const topic, txid = "txn-fence", "fence-tx"
	createTopic(t, c, topic, 2, 3, nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	a := txnProducer(c, txid, time.Minute, kgo.ClientID("fence-a"))
	aID, aEpoch, err := a.ProducerID(ctx)
	if err != nil {
		t.Fatalf("producer a: InitProducerId: %v", err)
	}
	produceInTxn(t, a, true, []*kgo.Record{{Topic: topic, Partition: 0, Key: []byte("a-before-fence"), Value: []byte("a")}})

	b := txnProducer(c, txid, time.Minute, kgo.ClientID("fence-b"))
	bID, bEpoch, err := b.ProducerID(ctx)
	if err != nil {
		t.Fatalf("producer b: InitProducerId: %v", err)
	}
	t.Logf("a: producer id %d epoch %d; b: producer id %d epoch %d", aID, aEpoch, bID, bEpoch)
	if bID != aID || bEpoch <= aEpoch {
		t.Errorf("b's InitProducerId gave (%d, %d) after a's (%d, %d): want the same producer id with a higher epoch", bID, bEpoch, aID, aEpoch)
	}
	committed := produceInTxn(t, b, true, []*kgo.Record{
		{Topic: topic, Partition: 0, Key: []byte("b-0"), Value: []byte("b")},
		{Topic: topic, Partition: 1, Key: []byte("b-1"), Value: []byte("b")},
	})
	endTxn(t, b, true)

	// a, fenced: a partition already in its transaction (the leader
	// checks the epoch), a new one (AddPartitionsToTxn), the commit.
	for _, r := range []*kgo.Record{
		{Topic: topic, Partition: 0, Key: []byte("a-after-fence-0"), Value: []byte("a")},
		{Topic: topic, Partition: 1, Key: []byte("a-after-fence-1"), Value: []byte("a")},
	} {
		err := a.ProduceSync(ctx, r).FirstErr()
		t.Logf("a: produce %s after the fence: %v", r.Key, err)
		if err == nil {
			t.Errorf("a: produce %s after b's InitProducerId succeeded", r.Key)
		} else if !fenced(err) {
			t.Logf("a: produce %s failed with %v (not PRODUCER_FENCED/INVALID_PRODUCER_EPOCH itself: kgo failed it after an earlier fenced answer)", r.Key, err)
		}
	}
	err = a.EndTransaction(ctx, kgo.TryCommit)
	t.Logf("a: EndTransaction(commit) after the fence: %v", err)
	if err == nil {
		t.Errorf("a: commit after b's InitProducerId succeeded")
	}
	// The broker, not only the client, refuses a's epoch: raw
	// transactional batches to each partition's leader.
	for p := int32(0); p < 2; p++ {
		leader := c.Broker(c.mustState(t, topic, p).Leader)
		seq := int32(1 - p) // p0 had a's first record at sequence 0
		code, err := rawTxnProduce(leader, txid, topic, p, aID, aEpoch, seq, []Rec{{Key: []byte(fmt.Sprintf("a-raw-%d", p)), Value: []byte("a")}})
		if err != nil {
			t.Fatalf("raw produce: %v", err)
		}
		t.Logf("raw produce with a's epoch to %s-%d on broker %d: error code %d (%v)", topic, p, leader.ID(), code, kerr.ErrorForCode(code))
		// Kafka answers a stale epoch on Produce with INVALID_PRODUCER_EPOCH,
		// also when the verification (KIP-890) got PRODUCER_FENCED from the
		// coordinator (AddPartitionsToTxnManager maps it).
		if code != kerr.InvalidProducerEpoch.Code {
			t.Errorf("raw produce with a's fenced epoch %d to %s-%d: error code %d (%v), want INVALID_PRODUCER_EPOCH (47)",
				aEpoch, topic, p, code, kerr.ErrorForCode(code))
		}
	}

	waitStable(t, c.liveSeeds(), topic, 30*time.Second)
	unc := readTxnTopic(t, c.liveSeeds(), topic, false, readTimeout)
	com := readTxnTopic(t, c.liveSeeds(), topic, true, readTimeout)
	lg := splitByOutcome(unc.Records)
	checkReadCommitted(t, "fence", lg, com.Records, nil)
	got := keysOf(dataRecs(com.Records))
	want := keysOf(committed)
	if len(got) != len(want) {
		t.Errorf("read_committed keys %v, want exactly b's %v", got, want)
	}
	for k := range want {
		if !got[k] {
			t.Errorf("read_committed lacks b's committed %s", k)
		}
	}
	if !keysOf(lg.Aborted)["a-before-fence"] {
		t.Errorf("a's record from before the fence is not in an aborted transaction (aborted: %v, open: %v)", lg.Aborted, lg.Open)
	}
	for k := range keysOf(dataRecs(unc.Records)) {
		if strings.HasPrefix(k, "a-after-fence") || strings.HasPrefix(k, "a-raw") {
			t.Errorf("%s, refused to the fenced producer, is in the log (read_uncommitted)", k)
		}
	}
}

// TestTxnAbortReadCommitted: one producer aborts a transaction, commits
// one, and leaves a third open. read_committed consumers (kgo, and
// librdkafka through confluent-kafka-python and kcat) read exactly the
// committed records and stop at the LSO, the first offset of the open
// transaction, which ListOffsets with isolation level 1 and Fetch report
// while ListOffsets with level 0 reports the HW; read_uncommitted reads
// everything. After the commit of the third the LSO is the HW again.
func TestTxnAbortReadCommitted(t *testing.T) {
	c := NewCluster(t, 3, txnProps(3, nil))
	const topic, parts = "txn-abort", 3
	createTopic(t, c, topic, parts, 3, nil, nil)
	cl := txnProducer(c, "abort-tx", time.Minute)
	aborted := produceInTxn(t, cl, true, txnRecords(topic, "aborted", 30, parts))
	endTxn(t, cl, false)
	committed := produceInTxn(t, cl, true, txnRecords(topic, "committed", 30, parts))
	endTxn(t, cl, true)
	waitStable(t, c.liveSeeds(), topic, 30*time.Second)

	open := produceInTxn(t, cl, true, txnRecords(topic, "open", 30, parts))
	firstOpen, lastOpen := map[int32]int64{}, map[int32]int64{}
	for _, r := range open {
		if f, ok := firstOpen[r.Partition]; !ok || r.Offset < f {
			firstOpen[r.Partition] = r.Offset
		}
		lastOpen[r.Partition] = max(lastOpen[r.Partition], r.Offset)
	}
	lso, err := listOffsets(c.liveSeeds(), topic, true)
	if err != nil {
		t.Fatalf("ListOffsets read_committed: %v", err)
	}
	hw, err := listOffsets(c.liveSeeds(), topic, false)
	if err != nil {
		t.Fatalf("ListOffsets read_uncommitted: %v", err)
	}
	for p := int32(0); p < parts; p++ {
		t.Logf("%s-%d with a transaction open at %d..%d: ListOffsets latest read_committed=%d read_uncommitted=%d", topic, p, firstOpen[p], lastOpen[p], lso[p], hw[p])
		if lso[p] != firstOpen[p] {
			t.Errorf("%s-%d: ListOffsets latest with read_committed = %d, want the LSO %d (first offset of the open transaction)", topic, p, lso[p], firstOpen[p])
		}
		if hw[p] != lastOpen[p]+1 {
			t.Errorf("%s-%d: ListOffsets latest with read_uncommitted = %d, want the HW %d", topic, p, hw[p], lastOpen[p]+1)
		}
	}

	unc := readTxnTopic(t, c.liveSeeds(), topic, false, readTimeout)
	com := readTxnTopic(t, c.liveSeeds(), topic, true, readTimeout)
	lg := splitByOutcome(unc.Records)
	checkReadCommitted(t, "open transaction", lg, com.Records, lso)
	for p := int32(0); p < parts; p++ {
		if com.LSO[p] != firstOpen[p] {
			t.Errorf("%s-%d: Fetch read_committed last_stable_offset %d, want %d", topic, p, com.LSO[p], firstOpen[p])
		}
	}
	checkHistoryOffsets(t, "read_uncommitted with the transaction open", append(append(append([]Rec(nil), aborted...), committed...), open...), dataRecs(unc.Records), false, false)
	if !sameKeys(keysOf(lg.Aborted), keysOf(aborted)) || !sameKeys(keysOf(lg.Committed), keysOf(committed)) || !sameKeys(keysOf(lg.Open), keysOf(open)) {
		t.Errorf("markers: aborted %d committed %d open %d records by the markers, want %d %d %d", len(lg.Aborted), len(lg.Committed), len(lg.Open), len(aborted), len(committed), len(open))
	}

	// librdkafka consumers, with the transaction still open: they must end
	// at the LSO (partition EOF) with the committed records only.
	t.Run("python", func(t *testing.T) {
		py, err := pythonWithConfluentKafka()
		if err != nil {
			t.Skip(err)
		}
		got := pythonConsumeEOF(t, py, c.Bootstrap(), topic, parts, "read_committed")
		compareReads(t, "confluent-kafka-python read_committed vs kgo", dataRecs(com.Records), got)
		got = pythonConsumeEOF(t, py, c.Bootstrap(), topic, parts, "read_uncommitted")
		compareReads(t, "confluent-kafka-python read_uncommitted vs kgo", dataRecs(unc.Records), got)
	})
	t.Run("kcat", func(t *testing.T) {
		if _, err := exec.LookPath("kcat"); err != nil {
			t.Skip("kcat not found: install Debian's kcat package")
		}
		got := kcatConsume(t, c.Bootstrap(), topic, "-X", "isolation.level=read_committed")
		compareReads(t, "kcat read_committed vs kgo", dataRecs(com.Records), got)
	})

	endTxn(t, cl, true)
	hw = waitStable(t, c.liveSeeds(), topic, 30*time.Second)
	for p := int32(0); p < parts; p++ {
		if hw[p] != lastOpen[p]+2 {
			t.Errorf("%s-%d: after the commit HW %d, want %d (the records and the COMMIT marker)", topic, p, hw[p], lastOpen[p]+2)
		}
	}
	unc = readTxnTopic(t, c.liveSeeds(), topic, false, readTimeout)
	com = readTxnTopic(t, c.liveSeeds(), topic, true, readTimeout)
	lg = splitByOutcome(unc.Records)
	checkReadCommitted(t, "after the commit", lg, com.Records, nil)
	if len(lg.Committed) != len(committed)+len(open) || len(lg.Aborted) != len(aborted) {
		t.Errorf("after the commit: %d committed and %d aborted records, want %d and %d", len(lg.Committed), len(lg.Aborted), len(committed)+len(open), len(aborted))
	}
}

func sameKeys(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// TestTxnTimeoutAborted: a transaction left open past its
// transaction.timeout.ms (3 s) is aborted by the coordinator (which looks
// every transaction.abort.timed.out.transaction.cleanup.interval.ms): not
// before the timeout, an ABORT marker ends it on each partition, the LSO
// moves to the HW past its records, read_committed never returns them,
// DescribeTransactions shows CompleteAbort with a bumped epoch, and the
// producer's late commit fails.
func TestTxnTimeoutAborted(t *testing.T) {
	c := NewCluster(t, 3, txnProps(3, nil))
	const topic, parts, txid = "txn-timeout", 2, "timeout-tx"
	const timeout = 3 * time.Second
	createTopic(t, c, topic, parts, 3, nil, nil)
	cl := txnProducer(c, txid, timeout)
	before := produceInTxn(t, cl, true, txnRecords(topic, "before", 10, parts))
	endTxn(t, cl, true)
	_, epoch, err := cl.ProducerID(context.Background())
	if err != nil {
		t.Fatal(err)
	}

	began := time.Now()
	doomed := produceInTxn(t, cl, true, txnRecords(topic, "doomed", 20, parts))
	first, last := map[int32]int64{}, map[int32]int64{}
	for _, r := range doomed {
		if f, ok := first[r.Partition]; !ok || r.Offset < f {
			first[r.Partition] = r.Offset
		}
		last[r.Partition] = max(last[r.Partition], r.Offset)
	}
	lso, err := listOffsets(c.liveSeeds(), topic, true)
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(began) < timeout {
		for p := int32(0); p < parts; p++ {
			if lso[p] != first[p] {
				t.Errorf("%s-%d: LSO %d with the transaction open, want its first offset %d", topic, p, lso[p], first[p])
			}
		}
	}
	hw := waitStable(t, c.liveSeeds(), topic, timeout+10*txnAbortInterval+20*time.Second)
	aborted := time.Since(began)
	t.Logf("transaction with timeout %s aborted by the coordinator, LSO at the HW %v, %s after it began", timeout, hw, aborted.Round(time.Millisecond))
	if aborted < timeout-200*time.Millisecond {
		t.Errorf("the LSO passed the open transaction %s after it began, before its timeout %s", aborted, timeout)
	}
	for p := int32(0); p < parts; p++ {
		if hw[p] <= last[p]+1 {
			t.Errorf("%s-%d: HW %d, want past the transaction's last record %d and its ABORT marker", topic, p, hw[p], last[p])
		}
	}

	unc := readTxnTopic(t, c.liveSeeds(), topic, false, readTimeout)
	com := readTxnTopic(t, c.liveSeeds(), topic, true, readTimeout)
	lg := splitByOutcome(unc.Records)
	checkReadCommitted(t, "timed out", lg, com.Records, nil)
	if !sameKeys(keysOf(lg.Aborted), keysOf(doomed)) || !sameKeys(keysOf(lg.Committed), keysOf(before)) {
		t.Errorf("by the markers: aborted %v committed %v, want the timed-out transaction's %d records aborted and the first's %d committed",
			keysOf(lg.Aborted), keysOf(lg.Committed), len(doomed), len(before))
	}

	adm := kadm.NewClient(c.Client())
	eventually(t, 20*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ds, err := adm.DescribeTransactions(ctx, txid)
		if err != nil {
			return err
		}
		d, err := ds.On(txid, nil)
		if err != nil {
			return err
		}
		if d.Err != nil {
			return d.Err
		}
		if d.State != "CompleteAbort" || d.ProducerEpoch <= epoch {
			return fmt.Errorf("DescribeTransactions %s: state %s epoch %d, want CompleteAbort with an epoch above %d", txid, d.State, d.ProducerEpoch, epoch)
		}
		return nil
	})

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = cl.EndTransaction(ctx, kgo.TryCommit)
	t.Logf("commit after the coordinator aborted the transaction: %v", err)
	// Kafka bumps the epoch when it aborts a timed-out transaction, so
	// EndTxn with the old one is PRODUCER_FENCED (INVALID_PRODUCER_EPOCH
	// before EndTxn v2).
	if err == nil {
		t.Errorf("the producer committed a transaction the coordinator aborted on timeout")
	} else if !fenced(err) {
		t.Errorf("commit after the timeout abort: %v, want PRODUCER_FENCED or INVALID_PRODUCER_EPOCH", err)
	}
	com = readTxnTopic(t, c.liveSeeds(), topic, true, readTimeout)
	if k := keysOf(dataRecs(com.Records)); !sameKeys(k, keysOf(before)) {
		t.Errorf("read_committed after the late commit: %d records, want the first transaction's %d only", len(k), len(before))
	}
}
