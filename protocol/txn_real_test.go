package protocol

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

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

// TestKgoTransactionsRealCoordinators runs kgo's transactional producer and
// its GroupTransactSession against the real transaction and group
// coordinators over the fake replicas: FindCoordinator creates
// __transaction_state, EndTxn's markers come back to this server as
// WriteTxnMarkers, and the offsets a TxnOffsetCommit wrote become visible
// once the marker on __consumer_offsets is committed.
func TestKgoTransactionsRealCoordinators(t *testing.T) {
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
	listed, err := adm.ListTransactions(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]string{}
	for _, s := range listed.Sorted() {
		states[s.TxnID] = s.State
	}
	if states["p"] != "CompleteAbort" || states["eos"] != "CompleteCommit" {
		t.Fatalf("transaction states %v", states)
	}
}
