package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
	"github.com/kafkazk/broker/protocol"
	"github.com/kafkazk/broker/txn"
	"github.com/kafkazk/broker/zkcoord"
)

// TestTransactionConfig: the transaction.* keys are read with Kafka's
// defaults, reach txn.Config, and a bad value names its key.
func TestTransactionConfig(t *testing.T) {
	cfg, err := loadConfig([]string{writeProps(t, minimal)})
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"transaction.state.log.num.partitions", cfg.TransactionStateLogNumPartitions, int32(50)},
		{"transaction.state.log.replication.factor", cfg.TransactionStateLogReplicationFactor, int16(3)},
		{"transaction.state.log.min.isr", cfg.TransactionStateLogMinISR, int32(2)},
		{"transaction.state.log.segment.bytes", cfg.TransactionStateLogSegmentBytes, int64(104857600)},
		{"transaction.max.timeout.ms", cfg.TransactionMaxTimeout, 15 * time.Minute},
		{"transactional.id.expiration.ms", cfg.TransactionalIDExpiration, 7 * 24 * time.Hour},
		{"transaction.abort.timed.out.transaction.cleanup.interval.ms", cfg.TransactionAbortTimedOutInterval, 10 * time.Second},
		{"transaction.remove.expired.transaction.cleanup.interval.ms", cfg.TransactionRemoveExpiredInterval, time.Hour},
		{"transaction.partition.verification.enable", cfg.TransactionPartitionVerification, true},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
	tc := txnCoordinatorConfig(cfg, nil, nil, nil, zerolog.Nop())
	if tc.BrokerID != 3 || tc.NumPartitions != 50 || tc.OffsetsTopicPartitions != 50 || tc.MaxTimeout != 15*time.Minute ||
		tc.IDExpiration != 7*24*time.Hour || tc.AbortTimedOutInterval != 10*time.Second || tc.RemoveExpiredInterval != time.Hour {
		t.Fatalf("txn.Config %+v", tc)
	}

	cfg, err = loadConfig([]string{writeProps(t, minimal+"transaction.state.log.num.partitions=7\n"+
		"transaction.state.log.replication.factor=1\ntransaction.state.log.min.isr=1\ntransaction.max.timeout.ms=60000\n"+
		"transaction.partition.verification.enable=false\n")})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TransactionStateLogNumPartitions != 7 || cfg.TransactionStateLogReplicationFactor != 1 || cfg.TransactionStateLogMinISR != 1 ||
		cfg.TransactionMaxTimeout != time.Minute || cfg.TransactionPartitionVerification {
		t.Fatalf("set: %+v", cfg)
	}
	for _, bad := range []string{
		"transaction.state.log.num.partitions=0", "transaction.state.log.replication.factor=0",
		"transaction.state.log.replication.factor=40000", "transaction.state.log.min.isr=0",
		"transaction.state.log.segment.bytes=0", "transaction.max.timeout.ms=0", "transaction.max.timeout.ms=2147483648",
		"transactional.id.expiration.ms=-1", "transaction.abort.timed.out.transaction.cleanup.interval.ms=0",
		"transaction.remove.expired.transaction.cleanup.interval.ms=x", "transaction.partition.verification.enable=yes",
	} {
		_, err := loadConfig([]string{writeProps(t, minimal+bad+"\n")})
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Key+"=" != bad[:len(ce.Key)+1] {
			t.Errorf("%s: %v, want a ConfigError naming the key", bad, err)
		}
	}
}

// TestTransactionKeysAreStatic: a transaction key set in server.properties
// survives the dynamic layers being applied, and one set only in a
// dynamic layer is not applied (Kafka's keys are read-only).
func TestTransactionKeysAreStatic(t *testing.T) {
	d, store, _ := newTestDynamic(t, "transaction.state.log.replication.factor=1\n")
	store.set(cluster.BrokerDefaultEntity, map[string]string{"transaction.state.log.num.partitions": "5", "log.retention.ms": "60000"})
	cfg := d.attach(store)
	if cfg.TransactionStateLogReplicationFactor != 1 {
		t.Errorf("static replication factor lost: %d", cfg.TransactionStateLogReplicationFactor)
	}
	if cfg.TransactionStateLogNumPartitions != 50 {
		t.Errorf("a dynamic layer set transaction.state.log.num.partitions to %d", cfg.TransactionStateLogNumPartitions)
	}
	if cfg.LogDefaults.RetentionMs != 60000 {
		t.Errorf("dynamic defaults not applied: %d", cfg.LogDefaults.RetentionMs)
	}
}

// fakeMarkerSender records each WriteTxnMarkers and answers from a table.
type fakeMarkerSender struct {
	mu      sync.Mutex
	calls   map[int32][]protocol.TxnMarkerFor
	answers map[cluster.TopicPartition]error
	failTo  map[int32]error
}

func (f *fakeMarkerSender) WriteTxnMarkers(_ context.Context, to cluster.Broker, markers []protocol.TxnMarkerFor) (map[cluster.TopicPartition]error, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls == nil {
		f.calls = map[int32][]protocol.TxnMarkerFor{}
	}
	f.calls[to.ID] = append(f.calls[to.ID], markers...)
	if err := f.failTo[to.ID]; err != nil {
		return nil, err
	}
	out := map[cluster.TopicPartition]error{}
	for _, m := range markers {
		for _, tp := range m.Partitions {
			out[tp] = f.answers[tp]
		}
	}
	return out, nil
}

// fakeMarkerMetadata is a metadata cache: topics and live brokers.
type fakeMarkerMetadata struct {
	topics  map[string]cluster.TopicInfo
	brokers map[int32]bool
}

func (f *fakeMarkerMetadata) Topic(name string) (cluster.TopicInfo, bool) {
	t, ok := f.topics[name]
	return t, ok
}

func (f *fakeMarkerMetadata) Broker(id int32) (cluster.Broker, bool) {
	return cluster.Broker{ID: id}, f.brokers[id]
}

// TestMarkerWriter: markers go to each partition's leader, one request per
// leader; a partition the metadata does not list comes back as a deleted
// topic (dropped by the coordinator); no leader, a dead leader, and a
// leader without the replica come back as retriable NOT_LEADER, never as
// the unknown partition the coordinator would drop.
func TestMarkerWriter(t *testing.T) {
	tp := func(topic string, p int32) cluster.TopicPartition {
		return cluster.TopicPartition{Topic: topic, Partition: p}
	}
	led := func(leaders ...int32) cluster.TopicInfo {
		var info cluster.TopicInfo
		for p, l := range leaders {
			info.Partitions = append(info.Partitions, cluster.PartitionInfo{Partition: int32(p), State: cluster.LeaderAndIsr{Leader: l}})
		}
		return info
	}
	meta := &fakeMarkerMetadata{
		topics:  map[string]cluster.TopicInfo{"a": led(1, 2, cluster.NoLeader, 9), "b": led(2, 3), "__consumer_offsets": led(1)},
		brokers: map[int32]bool{1: true, 2: true, 3: true},
	}
	sender := &fakeMarkerSender{
		answers: map[cluster.TopicPartition]error{
			tp("b", 0): fmt.Errorf("x: %w", partition.ErrUnknownTopicOrPartition),
			tp("a", 1): fmt.Errorf("x: %w", partition.ErrNotEnoughReplicas),
		},
		failTo: map[int32]error{3: fmt.Errorf("dial: %w", cluster.ErrBrokerNotAvailable)},
	}
	w := &markerWriter{client: sender, meta: meta, log: zerolog.Nop()}
	all := []cluster.TopicPartition{tp("a", 0), tp("a", 1), tp("a", 2), tp("a", 3), tp("a", 7), tp("b", 0), tp("b", 1), tp("gone", 0), tp("__consumer_offsets", 0)}
	got := w.WriteMarkers(context.Background(), txn.Markers{ProducerID: 5, ProducerEpoch: 2, CoordinatorEpoch: 9, Commit: true, Partitions: all})

	check := func(tp cluster.TopicPartition, want error, dropped bool) {
		t.Helper()
		err, ok := got[tp]
		if !ok {
			t.Errorf("%s: no answer", tp)
			return
		}
		if want == nil {
			if err != nil {
				t.Errorf("%s: %v, want written", tp, err)
			}
			return
		}
		if !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", tp, err, want)
		}
		isDropped := errors.Is(err, cluster.ErrUnknownTopic) || errors.Is(err, partition.ErrUnknownTopicOrPartition)
		if isDropped != dropped {
			t.Errorf("%s: %v would be dropped %v, want %v", tp, err, isDropped, dropped)
		}
	}
	check(tp("a", 0), nil, false)
	check(tp("__consumer_offsets", 0), nil, false)
	check(tp("a", 1), partition.ErrNotEnoughReplicas, false)
	check(tp("a", 2), partition.ErrNotLeader, false)        // no leader
	check(tp("a", 3), partition.ErrNotLeader, false)        // leader 9 not alive
	check(tp("b", 0), partition.ErrNotLeader, false)        // leader has no replica yet
	check(tp("b", 1), cluster.ErrBrokerNotAvailable, false) // request to broker 3 failed
	check(tp("a", 7), cluster.ErrUnknownTopic, true)        // partition not in the metadata
	check(tp("gone", 0), cluster.ErrUnknownTopic, true)     // topic deleted
	if len(got) != len(all) {
		t.Errorf("%d answers for %d partitions", len(got), len(all))
	}

	sender.mu.Lock()
	defer sender.mu.Unlock()
	perBroker := map[int32][]string{}
	for id, ms := range sender.calls {
		if len(ms) != 1 {
			t.Errorf("broker %d got %d markers, want one request's one marker", id, len(ms))
		}
		for _, m := range ms {
			if m.TxnMarker != (partition.TxnMarker{ProducerID: 5, ProducerEpoch: 2, CoordinatorEpoch: 9, Commit: true}) {
				t.Errorf("marker %+v", m.TxnMarker)
			}
			for _, p := range m.Partitions {
				perBroker[id] = append(perBroker[id], p.String())
			}
		}
		sort.Strings(perBroker[id])
	}
	want := map[int32][]string{1: {"__consumer_offsets-0", "a-0"}, 2: {"a-1", "b-0"}, 3: {"b-1"}}
	if fmt.Sprint(perBroker) != fmt.Sprint(want) {
		t.Errorf("per broker %v, want %v", perBroker, want)
	}
}

// TestTxnCoordinatorFollowsAppliedState: the transaction coordinator loads
// a partition of __transaction_state when its replica becomes leader and
// unloads it when it follows or stops, as the group coordinator does.
func TestTxnCoordinatorFollowsAppliedState(t *testing.T) {
	log := zerolog.New(zerolog.NewTestWriter(t))
	replicas, err := partition.NewManager(partition.Config{BrokerID: 1, LogDirs: []string{t.TempDir()}, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = replicas.Close() })
	txns := txn.New(txn.Config{BrokerID: 1, NumPartitions: 1, OffsetsTopicPartitions: 1, Log: offsetsLog{replicas},
		Markers: &markerWriter{client: &fakeMarkerSender{}, meta: &fakeMarkerMetadata{}}, Logger: log})
	txns.Start()
	t.Cleanup(func() { _ = txns.Close() })
	cp := &controlPlane{brokerID: 1, defaults: cluster.DefaultLogConfig(), session: &zkcoord.Session{},
		replicas: replicas, txns: txns, log: log}
	tp := cluster.TopicPartition{Topic: txn.Topic, Partition: 0}
	leaderAndIsr := func(leader, epoch, zkVersion int32) {
		t.Helper()
		errs, err := cp.LeaderAndIsr(context.Background(), cluster.LeaderAndIsrRequest{Partitions: []cluster.PartitionAssignment{{
			TopicPartition: tp, Replicas: []int32{1, 2},
			LeaderAndIsr: cluster.LeaderAndIsr{Leader: leader, LeaderEpoch: epoch, Isr: []int32{leader}, ZkVersion: zkVersion},
		}}})
		if err != nil || errs[tp] != nil {
			t.Fatalf("LeaderAndIsr leader %d epoch %d: %v, %v", leader, epoch, errs, err)
		}
	}
	// coordinating is DescribeTransactions' verdict on an id of the
	// partition once a load in progress has had time to finish.
	coordinating := func() error {
		deadline := time.Now().Add(2 * time.Second)
		for {
			err := txns.DescribeTransactions([]string{"tx"})[0].Err
			if !errors.Is(err, txn.ErrCoordinatorLoadInProgress) || time.Now().After(deadline) {
				return err
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if err := coordinating(); !errors.Is(err, txn.ErrNotCoordinator) {
		t.Fatalf("before any LeaderAndIsr: %v", err)
	}
	leaderAndIsr(1, 5, 0)
	if err := coordinating(); !errors.Is(err, txn.ErrTransactionalIDNotFound) {
		t.Fatalf("leader in epoch 5: %v, want to coordinate (an unknown id)", err)
	}
	leaderAndIsr(2, 4, 1) // stale
	if err := coordinating(); !errors.Is(err, txn.ErrTransactionalIDNotFound) {
		t.Fatalf("after a stale LeaderAndIsr: %v, want to coordinate still", err)
	}
	leaderAndIsr(2, 6, 2)
	if err := coordinating(); !errors.Is(err, txn.ErrNotCoordinator) {
		t.Fatalf("follower in epoch 6: %v", err)
	}
	leaderAndIsr(1, 7, 3)
	if err := coordinating(); !errors.Is(err, txn.ErrTransactionalIDNotFound) {
		t.Fatalf("leader in epoch 7: %v", err)
	}
	errs, err := cp.StopReplica(context.Background(), cluster.StopReplicaRequest{
		Partitions: []cluster.TopicPartition{tp}, LeaderEpochs: map[cluster.TopicPartition]int32{tp: 7}})
	if err != nil || errs[tp] != nil {
		t.Fatalf("StopReplica: %v %v", errs, err)
	}
	if err := coordinating(); !errors.Is(err, txn.ErrNotCoordinator) {
		t.Fatalf("after the replica stopped: %v", err)
	}
}

// TestServerPropertiesHasTransactionKeys: the example config names every
// transaction key, and parses into a valid config.
func TestServerPropertiesHasTransactionKeys(t *testing.T) {
	raw, err := os.ReadFile("../../config/server.properties")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range transactionKeys {
		if !strings.Contains(string(raw), k+"=") {
			t.Errorf("config/server.properties does not name %s", k)
		}
	}
	cfg, err := loadConfig([]string{"../../config/server.properties"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TransactionStateLogReplicationFactor != cfg.OffsetsTopicReplicationFactor {
		t.Errorf("example config: transaction.state.log.replication.factor %d, offsets.topic.replication.factor %d; want the same for one local broker",
			cfg.TransactionStateLogReplicationFactor, cfg.OffsetsTopicReplicationFactor)
	}
}

// transactionKeys are the transaction coordinator's broker keys.
var transactionKeys = []string{
	"transaction.state.log.num.partitions",
	"transaction.state.log.replication.factor",
	"transaction.state.log.min.isr",
	"transaction.state.log.segment.bytes",
	"transaction.max.timeout.ms",
	"transactional.id.expiration.ms",
	"transaction.abort.timed.out.transaction.cleanup.interval.ms",
	"transaction.remove.expired.transaction.cleanup.interval.ms",
	"transaction.partition.verification.enable",
}
