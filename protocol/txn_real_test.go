package protocol

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/group"
	"github.com/kafkazk/broker/partition"
	"github.com/kafkazk/broker/txn"
)

// selfMarkers is a txn.MarkerWriter sending WriteTxnMarkers to the test
// broker itself through BrokerClient, as cmd/broker's writer does to each
// leader (all partitions are led by broker 1 here).
type selfMarkers struct {
	b      *testBroker
	client *BrokerClient
}

func (m *selfMarkers) WriteMarkers(ctx context.Context, mk txn.Markers) map[cluster.TopicPartition]error {
	out := map[cluster.TopicPartition]error{}
	errs, err := m.client.WriteTxnMarkers(ctx, m.b.self(), []TxnMarkerFor{{
		TxnMarker:  partition.TxnMarker{ProducerID: mk.ProducerID, ProducerEpoch: mk.ProducerEpoch, CoordinatorEpoch: mk.CoordinatorEpoch, Commit: mk.Commit},
		Partitions: mk.Partitions,
	}})
	for _, tp := range mk.Partitions {
		if err != nil {
			out[tp] = err
		} else {
			out[tp] = errs[tp]
		}
	}
	return out
}

// startRealTxnBroker is a test broker with the real transaction and
// group coordinators over the fake replicas, the markers coming back to
// it as WriteTxnMarkers through BrokerClient.
func startRealTxnBroker(t *testing.T) (*testBroker, *txn.Coordinator) {
	markers := &selfMarkers{}
	var coord *txn.Coordinator
	b := startBroker(t, func(c *Config) {
		r := c.Replicas.(*fakeTxnReplicas).fakeReplicas
		coord = txn.New(txn.Config{BrokerID: 1, NumPartitions: testTxnPartitions, OffsetsTopicPartitions: testOffsetsPartitions,
			Log: fakeOffsetsLog{r}, ProducerIDs: c.ProducerIDs, Markers: markers,
			Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)})
		for p := int32(0); p < testTxnPartitions; p++ {
			coord.OnBecomeLeader(p, 0)
		}
		coord.Start()
		t.Cleanup(func() { coord.Close() })
		c.Transactions = coord
		c.Groups = c.Groups.(*fakeTxnGroups).Coordinator // the real CommitTxnOffsets and CompleteTxn
	})
	markers.b, markers.client = b, newBrokerClient(t, b)
	return b, coord
}

// TestKgoTransactionsRealCoordinators runs kgo's transactional producer and
// its GroupTransactSession against the real transaction and group
// coordinators over the fake replicas: FindCoordinator creates
// __transaction_state, EndTxn's markers come back to this server as
// WriteTxnMarkers, and the offsets a TxnOffsetCommit wrote become visible
// once the marker on __consumer_offsets is committed.
func TestKgoTransactionsRealCoordinators(t *testing.T) {
	b, _ := startRealTxnBroker(t)
	createTopic(t, b, "in", 2)
	createTopic(t, b, "out", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	prod := newClient(t, b, kgo.TransactionalID("p"), kgo.DefaultProduceTopic("in"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for round, end := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort} {
		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 4; i++ {
			if err := prod.ProduceSync(ctx, &kgo.Record{Partition: int32(i % 2), Value: []byte(fmt.Sprintf("r%d-%d", round, i))}).FirstErr(); err != nil {
				t.Fatalf("round %d produce %d: %v", round, i, err)
			}
		}
		if err := prod.EndTransaction(ctx, end); err != nil {
			t.Fatalf("round %d end: %v", round, err)
		}
	}
	// Each round's markers reach both partitions of "in".
	eventually(t, 10*time.Second, func() bool { return len(b.txnReplicas.markerCalls()) >= 4 })
	calls := b.txnReplicas.markerCalls()
	commits := 0
	for _, c := range calls[:4] {
		if c.tp.Topic != "in" {
			t.Fatalf("marker for %s", c.tp)
		}
		if c.marker.Commit {
			commits++
		}
	}
	if commits != 2 {
		t.Fatalf("markers %+v, want two commits then two aborts", calls)
	}

	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(b.addr), kgo.TransactionalID("eos"), kgo.ConsumerGroup("g"),
		kgo.ConsumeTopics("in"), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DefaultProduceTopic("out"), kgo.SessionTimeout(6*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	copied := 0
	for copied == 0 && ctx.Err() == nil {
		fs := sess.PollFetches(ctx)
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		n := fs.NumRecords()
		fs.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, &kgo.Record{Value: r.Value}, nil)
		})
		ok, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			t.Fatalf("end: %v", err)
		}
		if ok {
			copied += n
		}
	}
	if copied == 0 {
		t.Fatal("nothing copied")
	}
	// The group's offsets are committed only through the marker on its
	// __consumer_offsets partition.
	adm := kadm.NewClient(newClient(t, b))
	eventually(t, 10*time.Second, func() bool {
		offs, err := adm.FetchOffsets(ctx, "g")
		if err != nil {
			return false
		}
		total := int64(0)
		offs.Each(func(o kadm.OffsetResponse) { total += o.At })
		return total > 0
	})
	var onOffsets bool
	for _, c := range b.txnReplicas.markerCalls() {
		onOffsets = onOffsets || (c.tp.Topic == group.Topic && c.marker.Commit)
	}
	if !onOffsets {
		t.Fatal("no commit marker on __consumer_offsets")
	}
	// EndTxn is answered once PrepareCommit/PrepareAbort is replicated;
	// the Complete state follows the markers, so it is waited for.
	eventually(t, 10*time.Second, func() bool {
		listed, err := adm.ListTransactions(ctx, nil, nil)
		if err != nil {
			return false
		}
		states := map[string]string{}
		for _, s := range listed.Sorted() {
			states[s.TxnID] = s.State
		}
		return states["p"] == "CompleteAbort" && states["eos"] == "CompleteCommit"
	})
}

// TestTxnOffsetCommitZombieRealCoordinators: with the real transaction and
// group coordinators, a TxnOffsetCommit that arrives after its
// transaction was aborted (a delayed retry) is refused INVALID_TXN_STATE
// by the verification of the group's __consumer_offsets partition: it
// leaves nothing pending (requireStable answers the partition stable) and
// the producer's next COMMIT, which has no offset of that partition, does
// not make the stale offset visible.
func TestTxnOffsetCommitZombieRealCoordinators(t *testing.T) {
	b, coord := startRealTxnBroker(t)
	createTopic(t, b, "t", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := newClient(t, b)
	gc := b.txnGroups.Coordinator
	tp0 := cluster.TopicPartition{Topic: "t", Partition: 0}
	tp1 := cluster.TopicPartition{Topic: "t", Partition: 1}

	// untilOK retries a request while its coordinator is created or loads.
	untilOK := func(what string, send func() (int16, error)) {
		t.Helper()
		for {
			code, err := send()
			if err == nil && code == 0 {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("%s: code %d, %v", what, code, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	var pid int64
	var epoch int16
	untilOK("init", func() (int16, error) {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr("z"), 60000
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return -1, err
		}
		pid, epoch = resp.ProducerID, resp.ProducerEpoch
		return resp.ErrorCode, nil
	})
	addOffsets := func() {
		untilOK("add offsets", func() (int16, error) {
			req := kmsg.NewPtrAddOffsetsToTxnRequest()
			req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = "z", pid, epoch, "g"
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return -1, err
			}
			return resp.ErrorCode, nil
		})
	}
	txnCommit := func(tp cluster.TopicPartition, offset int64) (int16, error) {
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = "z", "g", pid, epoch
		req.Generation, req.MemberID = -1, ""
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = tp.Topic
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = tp.Partition, offset, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return -1, err
		}
		return resp.Topics[0].Partitions[0].ErrorCode, nil
	}
	endTxn := func(commit bool, state string) {
		untilOK("end", func() (int16, error) {
			req := kmsg.NewPtrEndTxnRequest()
			req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = "z", pid, epoch, commit
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return -1, err
			}
			return resp.ErrorCode, nil
		})
		eventually(t, 10*time.Second, func() bool {
			d := coord.DescribeTransactions([]string{"z"})
			return len(d) == 1 && d[0].State == state
		})
	}

	// Transaction N commits t-0 at 10, then aborts.
	addOffsets()
	untilOK("txn commit", func() (int16, error) { return txnCommit(tp0, 10) })
	endTxn(false, "CompleteAbort")
	// N's delayed TxnOffsetCommit.
	if code, err := txnCommit(tp0, 50); err != nil || code != kerr.InvalidTxnState.Code {
		t.Fatalf("late TxnOffsetCommit: code %d, %v; want INVALID_TXN_STATE", code, err)
	}
	offs, err := gc.FetchOffsets("g", []cluster.TopicPartition{tp0}, true)
	if err != nil || offs[tp0].Err != nil {
		t.Fatalf("t-0 after the refused commit: %+v %v, want stable", offs, err)
	}
	// Transaction N+1 commits t-1 only.
	addOffsets()
	untilOK("txn commit", func() (int16, error) { return txnCommit(tp1, 5) })
	endTxn(true, "CompleteCommit")
	offs, err = gc.FetchOffsets("g", nil, true)
	if err != nil || len(offs) != 1 || offs[tp1].Offset != 5 {
		t.Fatalf("offsets after N+1's COMMIT: %+v %v, want only t-1 at 5", offs, err)
	}
}
