package test

// Helpers of the transaction tests (issue 18): the cluster properties with
// the transaction keys sized to the cluster, a kgo transactional producer
// of planned transactions, a reader of a transactional topic that keeps
// control records, the split of a read_uncommitted read by the outcome of
// each record's transaction (the marker of its producer that follows it),
// and the check of a read_committed read against that split.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnStatePartitions is transaction.state.log.num.partitions (and
// offsets.topic.num.partitions) of txnProps: fewer than Kafka's 50 so that
// the first FindCoordinator does not wait for 150 replicas on a small
// machine.
const txnStatePartitions = 10

// txnAbortInterval is
// transaction.abort.timed.out.transaction.cleanup.interval.ms of txnProps.
const txnAbortInterval = 500 * time.Millisecond

// txnProps are the server.properties of an n-broker transaction test
// cluster: __transaction_state and __consumer_offsets at replication factor
// n (min ISR 2 on 3 brokers), a short timed-out-transaction abort interval,
// and, for 3 brokers, failoverProps (RF=3 topics, min.insync.replicas=2,
// unclean election off). extra is applied on top.
func txnProps(n int, extra map[string]string) map[string]string {
	m := map[string]string{
		"offsets.topic.replication.factor":                            strconv.Itoa(n),
		"offsets.topic.num.partitions":                                strconv.Itoa(txnStatePartitions),
		"transaction.state.log.replication.factor":                    strconv.Itoa(n),
		"transaction.state.log.min.isr":                               strconv.Itoa(min(n, 2)),
		"transaction.state.log.num.partitions":                        strconv.Itoa(txnStatePartitions),
		"transaction.abort.timed.out.transaction.cleanup.interval.ms": strconv.Itoa(int(txnAbortInterval / time.Millisecond)),
		"group.initial.rebalance.delay.ms":                            "100",
		"auto.create.topics.enable":                                   "false",
	}
	if n >= 3 {
		m = failoverProps(m)
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// txnProducer is a kgo transactional producer with the given transactional
// id and transaction timeout, records placed by their Partition, no
// compression. It is closed when the test ends.
func txnProducer(c *Cluster, txid string, timeout time.Duration, opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	return c.Client(append([]kgo.Opt{
		kgo.TransactionalID(txid),
		kgo.TransactionTimeout(timeout),
		kgo.ClientID(txid),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.MetadataMinAge(200 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
	}, opts...)...)
}

// txnRecords are n records of topic keyed and valued "<prefix>-<i>",
// round-robin over parts partitions, with a header naming the prefix.
func txnRecords(topic, prefix string, n int, parts int32) []*kgo.Record {
	out := make([]*kgo.Record, n)
	for i := range out {
		k := fmt.Sprintf("%s-%04d", prefix, i)
		out[i] = &kgo.Record{Topic: topic, Partition: int32(i) % parts, Key: []byte(k), Value: []byte("v-" + k),
			Headers: []kgo.RecordHeader{{Key: "txn", Value: []byte(prefix)}}}
	}
	return out
}

// produceInTxn produces recs synchronously inside the client's open
// transaction (beginning one if begin) and returns them as acknowledged,
// with their offsets. Any produce error fails the test.
func produceInTxn(t *testing.T, cl *kgo.Client, begin bool, recs []*kgo.Record) []Rec {
	t.Helper()
	if begin {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatalf("BeginTransaction: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out []Rec
	for _, r := range cl.ProduceSync(ctx, recs...) {
		if r.Err != nil {
			t.Fatalf("transactional produce of %s: %v", r.Record.Key, r.Err)
		}
		out = append(out, fromKgo(r.Record))
	}
	return out
}

// endTxn ends the client's transaction, failing the test on error.
func endTxn(t *testing.T, cl *kgo.Client, commit bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatalf("EndTransaction(commit=%v): %v", commit, err)
	}
}

// txnStep is one planned transaction: its records and its outcome.
type txnStep struct {
	Prefix string
	N      int
	Commit bool
}

// produceTxns runs the plan with one transactional producer, each step a
// transaction flushed before it ends (so aborted records are in the log),
// and returns the acknowledged records of the committed and of the aborted
// transactions.
func produceTxns(t *testing.T, c *Cluster, topic, txid string, parts int32, plan []txnStep) (committed, aborted []Rec) {
	t.Helper()
	cl := txnProducer(c, txid, time.Minute)
	for _, s := range plan {
		acked := produceInTxn(t, cl, true, txnRecords(topic, s.Prefix, s.N, parts))
		endTxn(t, cl, s.Commit)
		if s.Commit {
			committed = append(committed, acked...)
		} else {
			aborted = append(aborted, acked...)
		}
	}
	return committed, aborted
}

// listOffsets returns each partition's end offset: the high watermark, or
// with committed the last stable offset (ListOffsets isolation level 1).
func listOffsets(seeds []string, topic string, committed bool) (map[int32]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var l kadm.ListedOffsets
	if committed {
		l, err = adm.ListCommittedOffsets(ctx, topic)
	} else {
		l, err = adm.ListEndOffsets(ctx, topic)
	}
	if err != nil {
		return nil, err
	}
	if err := l.Error(); err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	l.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	if len(out) == 0 {
		return nil, fmt.Errorf("no offsets listed for %s", topic)
	}
	return out, nil
}

// waitStable waits until every partition of topic has its last stable
// offset at its high watermark (no open transaction) and returns them.
func waitStable(t *testing.T, seeds []string, topic string, timeout time.Duration) map[int32]int64 {
	t.Helper()
	var hw map[int32]int64
	eventually(t, timeout, func() error {
		var err error
		if hw, err = listOffsets(seeds, topic, false); err != nil {
			return err
		}
		lso, err := listOffsets(seeds, topic, true)
		if err != nil {
			return err
		}
		for p, h := range hw {
			if lso[p] != h {
				return fmt.Errorf("%s-%d: last stable offset %d below the high watermark %d (a transaction is open)", topic, p, lso[p], h)
			}
		}
		return nil
	})
	return hw
}

// txnRead is one read of a transactional topic.
type txnRead struct {
	Records []*kgo.Record   // in delivery order, control records included
	HW, LSO map[int32]int64 // the last high watermark and last stable offset fetch responses gave
}

// readTxnTopic reads every partition of topic from offset 0 to its end
// offset when called (the last stable offset with committed, which reads
// with isolation_level read_committed, else the high watermark), keeping
// control records. It fails the test if a record at or above the fetch
// response's bound (LSO for read_committed, HW otherwise) is returned. The
// end must be reachable by records kgo returns: the last offset below it is
// a control record or a non-transactional record, which holds whenever no
// transaction is open and, with one open, for a topic of one producer.
func readTxnTopic(t *testing.T, seeds []string, topic string, committed bool, timeout time.Duration) txnRead {
	t.Helper()
	what := "read_uncommitted"
	iso := kgo.ReadUncommitted()
	if committed {
		what, iso = "read_committed", kgo.ReadCommitted()
	}
	var ends map[int32]int64
	eventually(t, 30*time.Second, func() (err error) {
		ends, err = listOffsets(seeds, topic, committed)
		return err
	})
	offsets := map[int32]kgo.Offset{}
	for p := range ends {
		offsets[p] = kgo.NewOffset().At(0)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchIsolationLevel(iso),
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	res := txnRead{HW: map[int32]int64{}, LSO: map[int32]int64{}}
	next := map[int32]int64{}
	done := func() bool {
		for p, end := range ends {
			if next[p] < end {
				return false
			}
		}
		return true
	}
	beyond := 0
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s %s: end offsets %v not reached within %s: reached %v", what, topic, ends, timeout, next)
		}
		fs.EachError(func(tp string, p int32, err error) {
			t.Logf("%s %s[%d]: fetch error (retried): %v", what, tp, p, err)
		})
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			res.HW[fp.Partition], res.LSO[fp.Partition] = fp.HighWatermark, fp.LastStableOffset
			bound := fp.HighWatermark
			if committed {
				bound = fp.LastStableOffset
			}
			for _, r := range fp.Records {
				if r.Offset >= bound {
					beyond++
				}
				if r.Offset >= ends[r.Partition] {
					continue // appended after the end offsets were listed
				}
				res.Records = append(res.Records, r)
				next[r.Partition] = r.Offset + 1
			}
		})
	}
	if beyond > 0 {
		t.Errorf("%s %s: %d records at or above the fetch response's %s", what, topic, beyond, map[bool]string{true: "last stable offset", false: "high watermark"}[committed])
	}
	return res
}

// controlType is the marker type of a control record (Kafka's
// EndTransactionMarker key: version int16, type int16; 0 ABORT, 1 COMMIT).
func controlType(r *kgo.Record) (int16, error) {
	if len(r.Key) < 4 {
		return -1, fmt.Errorf("control record p%d@%d: key %x too short", r.Partition, r.Offset, r.Key)
	}
	if v := int16(binary.BigEndian.Uint16(r.Key)); v != 0 {
		return -1, fmt.Errorf("control record p%d@%d: key version %d", r.Partition, r.Offset, v)
	}
	typ := int16(binary.BigEndian.Uint16(r.Key[2:]))
	if typ != 0 && typ != 1 {
		return -1, fmt.Errorf("control record p%d@%d: type %d is neither ABORT (0) nor COMMIT (1)", r.Partition, r.Offset, typ)
	}
	return typ, nil
}

// txnLog is a read_uncommitted read split by outcome: each transactional
// data record belongs to the transaction its producer id ends with the next
// marker of that producer id in its partition.
type txnLog struct {
	Committed, Aborted, Open, NonTxn []Rec
	Commits, Aborts                  int      // markers
	Problems                         []string // malformed control records, markers without data before them are fine
}

// splitByOutcome splits a read_uncommitted read (control records kept).
func splitByOutcome(recs []*kgo.Record) txnLog {
	var lg txnLog
	byPart := map[int32][]*kgo.Record{}
	for _, r := range recs {
		byPart[r.Partition] = append(byPart[r.Partition], r)
	}
	parts := make([]int32, 0, len(byPart))
	for p := range byPart {
		parts = append(parts, p)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	for _, p := range parts {
		rs := byPart[p]
		sort.Slice(rs, func(i, j int) bool { return rs[i].Offset < rs[j].Offset })
		pending := map[int64][]Rec{}
		for _, r := range rs {
			switch {
			case r.Attrs.IsControl():
				typ, err := controlType(r)
				if err != nil {
					lg.Problems = append(lg.Problems, err.Error())
					continue
				}
				if typ == 1 {
					lg.Commits++
					lg.Committed = append(lg.Committed, pending[r.ProducerID]...)
				} else {
					lg.Aborts++
					lg.Aborted = append(lg.Aborted, pending[r.ProducerID]...)
				}
				delete(pending, r.ProducerID)
			case r.Attrs.IsTransactional():
				pending[r.ProducerID] = append(pending[r.ProducerID], fromKgo(r))
			default:
				lg.NonTxn = append(lg.NonTxn, fromKgo(r))
			}
		}
		for _, rs := range pending {
			lg.Open = append(lg.Open, rs...)
		}
	}
	sortRecs(lg.Committed)
	sortRecs(lg.Aborted)
	sortRecs(lg.Open)
	return lg
}

// dataRecs are the non-control records of a read.
func dataRecs(recs []*kgo.Record) []Rec {
	var out []Rec
	for _, r := range recs {
		if !r.Attrs.IsControl() {
			out = append(out, fromKgo(r))
		}
	}
	return out
}

// txnCheck is the outcome of checkReadCommitted.
type txnCheck struct {
	History      CheckResult
	AbortedReads int // read_committed returned a record of an aborted transaction (G1a)
	OpenReads    int // ... of a transaction still open (a precommitted read)
	Unexplained  int // ... at an offset holding no committed record
}

// checkReadCommitted checks one read_committed read against the split of a
// read_uncommitted read of the same log: it returns exactly the committed
// (and non-transactional) records below the end it read to, at their
// offsets (the history checker without its dense-offsets rule, since
// markers and aborted records hold offsets), and no record of an aborted or
// open transaction. upTo (nil: no bound) is the read_committed end offset
// per partition, for a read taken while a transaction was open.
func checkReadCommitted(t *testing.T, what string, lg txnLog, read []*kgo.Record, upTo map[int32]int64) txnCheck {
	t.Helper()
	below := func(r Rec) bool { return upTo == nil || r.Offset < upTo[r.Partition] }
	type po struct {
		p int32
		o int64
	}
	var want []Rec
	ok := map[po]bool{}
	for _, r := range append(append([]Rec(nil), lg.Committed...), lg.NonTxn...) {
		if below(r) {
			want = append(want, r)
			ok[po{r.Partition, r.Offset}] = true
		}
	}
	aborted, open := map[po]bool{}, map[po]bool{}
	for _, r := range lg.Aborted {
		aborted[po{r.Partition, r.Offset}] = true
	}
	for _, r := range lg.Open {
		open[po{r.Partition, r.Offset}] = true
	}
	got := dataRecs(read)
	var res txnCheck
	var problems []string
	for _, r := range got {
		k := po{r.Partition, r.Offset}
		switch {
		case aborted[k]:
			res.AbortedReads++
			problems = append(problems, fmt.Sprintf("aborted record read: %v", r))
		case open[k]:
			res.OpenReads++
			problems = append(problems, fmt.Sprintf("record of an open transaction read: %v", r))
		case !ok[k]:
			res.Unexplained++
			problems = append(problems, fmt.Sprintf("record at an offset holding no committed record: %v", r))
		}
	}
	res.History = analyzeHistoryOffsets(want, got, true, false)
	t.Logf("%s: committed=%d aborted=%d open=%d non-transactional=%d commit-markers=%d abort-markers=%d; read_committed read=%d lost=%d mismatched=%d duplicated=%d inconsistent=%d unordered=%d aborted-reads=%d open-reads=%d unexplained=%d",
		what, len(lg.Committed), len(lg.Aborted), len(lg.Open), len(lg.NonTxn), lg.Commits, lg.Aborts, len(got),
		res.History.Lost, res.History.Mismatched, res.History.Duplicated, res.History.Inconsistent, res.History.Unordered,
		res.AbortedReads, res.OpenReads, res.Unexplained)
	if len(lg.Problems) > 0 {
		t.Errorf("%s: malformed control records: %s", what, strings.Join(lg.Problems[:min(len(lg.Problems), 10)], "; "))
	}
	if !res.History.OK(true) || len(problems) > 0 || len(got) != len(want) {
		problems = append(res.History.Problems, problems...)
		t.Errorf("%s: read_committed returned %d records, %d committed below its end:\n  %s", what, len(got), len(want), strings.Join(problems[:min(len(problems), 20)], "\n  "))
	}
	return res
}

// keysOf are the keys of recs.
func keysOf(recs []Rec) map[string]bool {
	out := map[string]bool{}
	for _, r := range recs {
		out[string(r.Key)] = true
	}
	return out
}

// fenced reports whether err is Kafka's answer to a fenced producer: the
// coordinator's PRODUCER_FENCED or a partition leader's
// INVALID_PRODUCER_EPOCH.
func fenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch)
}

// txnCoordinatorOf asks a live broker for the transaction coordinator of
// txid (FindCoordinator key type 1).
func txnCoordinatorOf(c *Cluster, txid string) (int32, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.liveSeeds()...), kgo.RequestRetries(0))
	if err != nil {
		return -1, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, ok := kadm.NewClient(cl).FindTxnCoordinators(ctx, txid)[txid]
	if !ok {
		return -1, fmt.Errorf("FindCoordinator (transaction) %s: no answer for the key", txid)
	}
	if r.Err != nil {
		return -1, r.Err
	}
	return r.NodeID, nil
}

// rawTxnProduce sends one acks=all transactional Produce (TransactionalID
// set, one batch with attributes 0x10) of recs for topic-p to broker b
// only, and returns the partition's error code.
func rawTxnProduce(b *Broker, txid, topic string, p int32, producerID int64, epoch int16, seq int32, recs []Rec) (int16, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.RequestRetries(0), kgo.DialTimeout(time.Second))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req := kmsg.NewPtrProduceRequest()
	req.TransactionID = kmsg.StringPtr(txid)
	req.Acks = -1
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = p
	rp.Records = buildProducerBatch(recs, producerID, epoch, seq, 0x10)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	r, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		return 0, fmt.Errorf("produce to broker %d: %w", b.ID(), err)
	}
	resp := r.(*kmsg.ProduceResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, fmt.Errorf("produce to broker %d: response without the partition: %+v", b.ID(), resp)
	}
	return resp.Topics[0].Partitions[0].ErrorCode, nil
}

// waitFullISR waits until every partition of topic has n replicas in its
// ISR (a restarted broker caught up), so that the next kill leaves
// min.insync.replicas.
func waitFullISR(t *testing.T, c *Cluster, topic string, partitions int32, n int, timeout time.Duration) {
	t.Helper()
	for p := int32(0); p < partitions; p++ {
		c.waitState(t, topic, p, timeout, func(s partState) error {
			if s.Leader < 0 || len(s.ISR) != n {
				return fmt.Errorf("want a leader and %d in the ISR", n)
			}
			return nil
		})
	}
}
