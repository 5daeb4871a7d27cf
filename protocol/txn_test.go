package protocol

// Tests of the transaction keys and of transactional produce, fetch and
// offsets, over the fakes of txn_fakes_test.go: each handler's happy path
// and errors with Kafka's codes, version gating, what ApiVersions
// advertises in each configuration, KIP-890 verification (local, remote,
// and a marker racing it), WriteTxnMarkers completing offsets only after
// the marker commits, and hostile inputs.

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/group"
	"github.com/kafkazk/broker/partition"
	"github.com/kafkazk/broker/txn"
)

// eventually polls cond until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(time.Millisecond)
	}
}

// txnKeys are the keys served only with transaction support.
var txnKeys = []int16{24, 25, 26, 27, 28, 61, 65, 66}

// advertised returns ApiVersions' table as key -> [min, max].
func advertised(t *testing.T, b *testBroker) map[int16][2]int16 {
	t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
	resp := b.dial(t).roundTrip(req).(*kmsg.ApiVersionsResponse)
	out := map[int16][2]int16{}
	for _, k := range resp.ApiKeys {
		out[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	return out
}

// TestTxnApiVersionsRows: the transaction keys are advertised with
// exactly the ranges we implement when configured, and each capability
// gates only its own keys.
func TestTxnApiVersionsRows(t *testing.T) {
	want := map[int16][2]int16{22: {0, 4}, 24: {0, 4}, 25: {0, 3}, 26: {0, 3}, 27: {0, 1}, 28: {0, 3}, 61: {0, 0}, 65: {0, 0}, 66: {0, 0}}
	full := advertised(t, startBroker(t))
	for k, r := range want {
		if full[k] != r {
			t.Errorf("key %d advertised %v, want %v", k, full[k], r)
		}
	}
	cases := []struct {
		name   string
		opt    brokerOption
		absent []int16
	}{
		{"no transactions", withoutTransactions(), txnKeys},
		{"coordinator without partition capability", func(c *Config) { c.Replicas = c.Replicas.(*fakeTxnReplicas).fakeReplicas }, []int16{27, 61}},
		{"partitions without coordinator", func(c *Config) { c.Transactions = nil }, []int16{24, 25, 26, 28, 65, 66}},
		{"groups without transaction offsets", func(c *Config) { c.Groups = groupsOnly{c.Groups} }, []int16{28}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := advertised(t, startBroker(t, tc.opt))
			for _, k := range txnKeys {
				_, has := got[k]
				absent := false
				for _, a := range tc.absent {
					absent = absent || a == k
				}
				if has == absent {
					t.Errorf("key %d advertised %v, want absent %v", k, has, absent)
				}
			}
			if _, ok := got[22]; !ok {
				t.Error("InitProducerId not advertised")
			}
		})
	}
}

// groupsOnly hides every capability of a Groups beyond the interface.
type groupsOnly struct{ Groups }

// TestTxnVersionGating: a served key above its range, or a key not
// configured, closes the connection without an answer, as Kafka does.
func TestTxnVersionGating(t *testing.T) {
	b := startBroker(t)
	for _, kv := range []struct{ key, version int16 }{{22, 5}, {24, 5}, {25, 4}, {26, 4}, {26, 5}, {27, 2}, {28, 4}, {61, 1}, {65, 1}, {66, 1}} {
		req := kmsg.RequestForKey(kv.key)
		req.SetVersion(kv.version)
		c := b.dial(t)
		c.send(req)
		c.expectClosed()
	}
	without := startBroker(t, withoutTransactions())
	for _, key := range txnKeys {
		req := kmsg.RequestForKey(key)
		req.SetVersion(0)
		c := without.dial(t)
		c.send(req)
		c.expectClosed()
	}
}

func TestInitProducerIDTransactional(t *testing.T) {
	b := startBroker(t)
	c := b.dial(t)
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = 4
	req.TransactionalID = kmsg.StringPtr("tx")
	req.TransactionTimeoutMillis = 60000
	resp := c.roundTrip(req).(*kmsg.InitProducerIDResponse)
	if resp.ErrorCode != 0 || resp.ProducerID != 5001 || resp.ProducerEpoch != 0 {
		t.Fatalf("%+v", resp)
	}
	// KIP-360 bump: both fields go to the coordinator.
	req.ProducerID, req.ProducerEpoch = 5001, 0
	c.roundTrip(req)
	b.txn.mu.Lock()
	got := append([]txn.InitRequest(nil), b.txn.inits...)
	b.txn.mu.Unlock()
	wantInits := []txn.InitRequest{
		{TransactionalID: "tx", TransactionTimeoutMs: 60000, ProducerID: -1, ProducerEpoch: -1},
		{TransactionalID: "tx", TransactionTimeoutMs: 60000, ProducerID: 5001, ProducerEpoch: 0},
	}
	if !reflect.DeepEqual(got, wantInits) {
		t.Fatalf("coordinator got %+v, want %+v", got, wantInits)
	}

	cases := []struct {
		name    string
		version int16
		id      *string
		pid     int64
		epoch   int16
		err     error
		want    *kerr.Error
	}{
		{"empty id", 4, kmsg.StringPtr(""), -1, -1, nil, kerr.InvalidRequest},
		{"producer id without epoch", 4, kmsg.StringPtr("tx"), 7, -1, nil, kerr.InvalidRequest},
		{"epoch without producer id", 3, nil, -1, 3, nil, kerr.InvalidRequest},
		{"fenced v4", 4, kmsg.StringPtr("tx"), -1, -1, txn.ErrProducerFenced, kerr.ProducerFenced},
		{"fenced v3 is an old epoch", 3, kmsg.StringPtr("tx"), -1, -1, txn.ErrProducerFenced, kerr.InvalidProducerEpoch},
		{"concurrent", 4, kmsg.StringPtr("tx"), -1, -1, txn.ErrConcurrentTransactions, kerr.ConcurrentTransactions},
		{"bad timeout", 1, kmsg.StringPtr("tx"), -1, -1, fmt.Errorf("timeout -1: %w", txn.ErrInvalidTransactionTimeout), kerr.InvalidTransactionTimeout},
		{"not coordinator", 0, kmsg.StringPtr("tx"), -1, -1, txn.ErrNotCoordinator, kerr.NotCoordinator},
		{"loading", 2, kmsg.StringPtr("tx"), -1, -1, txn.ErrCoordinatorLoadInProgress, kerr.CoordinatorLoadInProgress},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b.txn.mu.Lock()
			b.txn.initErr = tc.err
			b.txn.mu.Unlock()
			req := kmsg.NewPtrInitProducerIDRequest()
			req.Version, req.TransactionalID, req.TransactionTimeoutMillis = tc.version, tc.id, -1
			if tc.version >= 3 {
				req.ProducerID, req.ProducerEpoch = tc.pid, tc.epoch
			}
			resp := c.roundTrip(req).(*kmsg.InitProducerIDResponse)
			if resp.ErrorCode != tc.want.Code || resp.ProducerID != -1 || resp.ProducerEpoch != -1 {
				t.Fatalf("%+v, want %s", resp, tc.want.Message)
			}
		})
	}
}

func TestFindCoordinatorTransaction(t *testing.T) {
	b := startBroker(t)
	c := b.dial(t)
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorType, fc.CoordinatorKey = 3, 1, "tx"
	r := c.roundTrip(fc).(*kmsg.FindCoordinatorResponse)
	if r.ErrorCode != 0 || r.NodeID != 1 || r.Port != b.port {
		t.Fatalf("%+v", r)
	}
	info, ok := b.cluster.Topic(txn.Topic)
	if !ok || len(info.Partitions) != testTxnPartitions {
		t.Fatalf("__transaction_state: %+v %v", info, ok)
	}
	wantCfg := map[string]string{"cleanup.policy": "compact", "min.insync.replicas": "1", "segment.bytes": "1048576",
		"unclean.leader.election.enable": "false", "compression.type": "producer"}
	if !reflect.DeepEqual(info.Config, wantCfg) {
		t.Errorf("configs %v, want %v", info.Config, wantCfg)
	}
	fc.Version, fc.CoordinatorKeys = 4, []string{"a", "b"}
	r = c.roundTrip(fc).(*kmsg.FindCoordinatorResponse)
	if len(r.Coordinators) != 2 || r.Coordinators[0].ErrorCode != 0 || r.Coordinators[1].NodeID != 1 {
		t.Fatalf("batched: %+v", r)
	}

	// More replicas than live brokers: not created, retriable error.
	b2 := startBroker(t, func(c *Config) { c.TransactionTopic.ReplicationFactor = 3 })
	fc.Version = 1
	r = b2.dial(t).roundTrip(fc).(*kmsg.FindCoordinatorResponse)
	if r.ErrorCode != kerr.CoordinatorNotAvailable.Code || r.ErrorMessage == nil {
		t.Fatalf("too few brokers: %+v", r)
	}
	if _, ok := b2.cluster.Topic(txn.Topic); ok {
		t.Fatal("__transaction_state created with too few brokers")
	}
	// Key type 0 still finds the group coordinator; an unknown type is refused.
	fc.CoordinatorType = 2
	if r := b2.dial(t).roundTrip(fc).(*kmsg.FindCoordinatorResponse); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("type 2: %+v", r)
	}
}

// addPartitionsV3 builds a producer's AddPartitionsToTxn.
func addPartitionsV3(version int16, id string, topics map[string][]int32) *kmsg.AddPartitionsToTxnRequest {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch = version, id, 5001, 0
	names := make([]string, 0, len(topics))
	for n := range topics {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		rt := kmsg.NewAddPartitionsToTxnRequestTopic()
		rt.Topic, rt.Partitions = n, topics[n]
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// codesV3 flattens a v0-3 answer to "topic-partition" -> code.
func codesV3(resp *kmsg.AddPartitionsToTxnResponse) map[string]int16 {
	out := map[string]int16{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[fmt.Sprintf("%s-%d", t.Topic, p.Partition)] = p.ErrorCode
		}
	}
	return out
}

func TestAddPartitionsToTxn(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "t", 2)
	c := b.dial(t)

	resp := c.roundTrip(addPartitionsV3(3, "tx", map[string][]int32{"t": {0, 1, 0}})).(*kmsg.AddPartitionsToTxnResponse)
	if got, want := codesV3(resp), map[string]int16{"t-0": 0, "t-1": 0}; !reflect.DeepEqual(got, want) {
		t.Fatalf("codes %v, want %v", got, want)
	}
	if n := len(resp.Topics[0].Partitions); n != 2 {
		t.Fatalf("a partition listed twice answered %d times in all", n)
	}
	if !b.txn.added["tx"][cluster.TopicPartition{Topic: "t", Partition: 1}] {
		t.Fatal("partition not added")
	}

	// One unknown partition fails the whole request; nothing is added.
	calls := b.txn.addCalls
	resp = c.roundTrip(addPartitionsV3(3, "tx", map[string][]int32{"t": {0, 9}, "missing": {0}})).(*kmsg.AddPartitionsToTxnResponse)
	want := map[string]int16{"t-0": kerr.OperationNotAttempted.Code, "t-9": kerr.UnknownTopicOrPartition.Code, "missing-0": kerr.UnknownTopicOrPartition.Code}
	if got := codesV3(resp); !reflect.DeepEqual(got, want) {
		t.Fatalf("codes %v, want %v", got, want)
	}
	if b.txn.addCalls != calls {
		t.Fatal("the coordinator was called despite an unknown partition")
	}

	// Empty transactional id.
	resp = c.roundTrip(addPartitionsV3(3, "", map[string][]int32{"t": {0}})).(*kmsg.AddPartitionsToTxnResponse)
	if got := codesV3(resp); got["t-0"] != kerr.InvalidRequest.Code {
		t.Fatalf("empty id: %v", got)
	}

	// Coordinator errors: one for all, or per partition; fenced by version.
	b.txn.mu.Lock()
	b.txn.addErr = txn.ErrProducerFenced
	b.txn.mu.Unlock()
	for v, want := range map[int16]int16{1: kerr.InvalidProducerEpoch.Code, 2: kerr.ProducerFenced.Code} {
		resp = c.roundTrip(addPartitionsV3(v, "tx", map[string][]int32{"t": {0, 1}})).(*kmsg.AddPartitionsToTxnResponse)
		if got := codesV3(resp); got["t-0"] != want || got["t-1"] != want {
			t.Fatalf("v%d fenced: %v, want %d", v, got, want)
		}
	}
	b.txn.mu.Lock()
	b.txn.addErr = nil
	b.txn.addPartErrs[cluster.TopicPartition{Topic: "t", Partition: 1}] = txn.ErrConcurrentTransactions
	b.txn.mu.Unlock()
	resp = c.roundTrip(addPartitionsV3(0, "tx", map[string][]int32{"t": {0, 1}})).(*kmsg.AddPartitionsToTxnResponse)
	if got := codesV3(resp); got["t-0"] != 0 || got["t-1"] != kerr.ConcurrentTransactions.Code {
		t.Fatalf("per partition: %v", got)
	}
}

func TestAddPartitionsToTxnV4(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "t", 2)
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 4
	for _, tr := range []struct {
		id     string
		verify bool
		parts  []int32
	}{{"a", false, []int32{0}}, {"a", true, []int32{0, 1}}, {"b", true, []int32{0}}} {
		t := kmsg.NewAddPartitionsToTxnRequestTransaction()
		t.TransactionalID, t.ProducerID, t.ProducerEpoch, t.VerifyOnly = tr.id, 1, 0, tr.verify
		rt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
		rt.Topic, rt.Partitions = "t", tr.parts
		t.Topics = append(t.Topics, rt)
		req.Transactions = append(req.Transactions, t)
	}
	resp := b.dial(t).roundTrip(req).(*kmsg.AddPartitionsToTxnResponse)
	if resp.ErrorCode != 0 || len(resp.Transactions) != 3 {
		t.Fatalf("%+v", resp)
	}
	codes := func(i int) []int16 {
		var out []int16
		for _, p := range resp.Transactions[i].Topics[0].Partitions {
			out = append(out, p.ErrorCode)
		}
		return out
	}
	// "a" adds t-0, then verifies t-0 (in) and t-1 (not in); "b" has nothing.
	if got := [][]int16{codes(0), codes(1), codes(2)}; !reflect.DeepEqual(got, [][]int16{{0}, {0, kerr.InvalidTxnState.Code}, {kerr.InvalidTxnState.Code}}) {
		t.Fatalf("codes %v", got)
	}
	if len(b.txn.added["b"]) != 0 || len(b.txn.added["a"]) != 1 {
		t.Fatalf("VerifyOnly added partitions: %v", b.txn.added)
	}
}

func TestAddOffsetsAndEndTxn(t *testing.T) {
	b := startBroker(t)
	c := b.dial(t)
	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.Version, ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = 3, "tx", 5001, 0, "g"
	if r := c.roundTrip(ao).(*kmsg.AddOffsetsToTxnResponse); r.ErrorCode != 0 || !reflect.DeepEqual(b.txn.offsets, []string{"tx/g"}) {
		t.Fatalf("%+v %v", r, b.txn.offsets)
	}
	et := kmsg.NewPtrEndTxnRequest()
	et.Version, et.TransactionalID, et.ProducerID, et.ProducerEpoch, et.Commit = 3, "tx", 5001, 0, true
	if r := c.roundTrip(et).(*kmsg.EndTxnResponse); r.ErrorCode != 0 || !reflect.DeepEqual(b.txn.ends, []fakeEnd{{"tx", true}}) {
		t.Fatalf("%+v %v", r, b.txn.ends)
	}

	b.txn.mu.Lock()
	b.txn.offsetsErr, b.txn.endErr = txn.ErrProducerFenced, fmt.Errorf("end: %w", txn.ErrInvalidTxnState)
	b.txn.mu.Unlock()
	for v, want := range map[int16]int16{0: kerr.InvalidProducerEpoch.Code, 1: kerr.InvalidProducerEpoch.Code, 2: kerr.ProducerFenced.Code, 3: kerr.ProducerFenced.Code} {
		ao.Version = v
		if r := c.roundTrip(ao).(*kmsg.AddOffsetsToTxnResponse); r.ErrorCode != want {
			t.Errorf("AddOffsetsToTxn v%d fenced: %d, want %d", v, r.ErrorCode, want)
		}
		et.Version = v
		if r := c.roundTrip(et).(*kmsg.EndTxnResponse); r.ErrorCode != kerr.InvalidTxnState.Code {
			t.Errorf("EndTxn v%d: %d, want INVALID_TXN_STATE", v, r.ErrorCode)
		}
	}
	ao.TransactionalID, et.TransactionalID = "", ""
	if r := c.roundTrip(ao).(*kmsg.AddOffsetsToTxnResponse); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("AddOffsetsToTxn empty id: %d", r.ErrorCode)
	}
	if r := c.roundTrip(et).(*kmsg.EndTxnResponse); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("EndTxn empty id: %d", r.ErrorCode)
	}
}

// writeMarkers builds a WriteTxnMarkers v1 of one marker.
func writeMarkers(pid int64, commit bool, tps ...cluster.TopicPartition) *kmsg.WriteTxnMarkersRequest {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Version = 1
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = pid, 3, commit, 7
	topics, byTopic := topicOrder(tps, func(tp cluster.TopicPartition) string { return tp.Topic })
	for _, t := range topics {
		mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		mt.Topic = t
		for _, tp := range byTopic[t] {
			mt.Partitions = append(mt.Partitions, tp.Partition)
		}
		m.Topics = append(m.Topics, mt)
	}
	req.Markers = append(req.Markers, m)
	return req
}

func markerCodes(resp *kmsg.WriteTxnMarkersResponse) map[string]int16 {
	out := map[string]int16{}
	for _, m := range resp.Markers {
		for _, t := range m.Topics {
			for _, p := range t.Partitions {
				out[fmt.Sprintf("%d/%s-%d", m.ProducerID, t.Topic, p.Partition)] = p.ErrorCode
			}
		}
	}
	return out
}

// TestWriteTxnMarkersCompletesOffsetsAfterCommit: the response, and the
// group coordinator's CompleteTxn, wait until the marker is below the
// high watermark; CompleteTxn is called for the __consumer_offsets
// partition only.
func TestWriteTxnMarkersCompletesOffsetsAfterCommit(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "t", 1)
	createTopic(t, b, group.Topic, 3)
	offsetsTP := cluster.TopicPartition{Topic: group.Topic, Partition: 1}
	b.txnGroups.checkCommitted = func(p int32) bool {
		b.replicas.mu.Lock()
		defer b.replicas.mu.Unlock()
		l := b.replicas.parts[cluster.TopicPartition{Topic: group.Topic, Partition: p}]
		return l != nil && l.hw == l.leo
	}
	b.replicas.setHoldHW(true)
	c := b.dial(t)
	c.send(writeMarkers(42, true, cluster.TopicPartition{Topic: "t", Partition: 0}, offsetsTP))
	eventually(t, 5*time.Second, func() bool { return len(b.txnReplicas.markerCalls()) == 2 })
	if got := b.txnGroups.completed(); len(got) != 0 {
		t.Fatalf("CompleteTxn before the marker committed: %+v", got)
	}
	b.replicas.setHoldHW(false)
	_, body, err := c.readFrame(true)
	if err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrWriteTxnMarkersResponse()
	resp.Version = 1
	if err := resp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	if got := markerCodes(resp); !reflect.DeepEqual(got, map[string]int16{"42/t-0": 0, "42/__consumer_offsets-1": 0}) {
		t.Fatalf("codes %v", got)
	}
	b.replicas.mu.Lock()
	markerAt := b.replicas.parts[offsetsTP].batches[0].base
	b.replicas.mu.Unlock()
	if got := b.txnGroups.completed(); !reflect.DeepEqual(got, []fakeComplete{{partition: 1, producerID: 42, markerOffset: markerAt, commit: true, committed: true}}) {
		t.Fatalf("CompleteTxn calls %+v, want the marker's offset %d", got, markerAt)
	}
	mk := b.txnReplicas.markerCalls()[0].marker
	if mk != (partition.TxnMarker{ProducerID: 42, ProducerEpoch: 3, CoordinatorEpoch: 7, Commit: true}) {
		t.Fatalf("marker %+v", mk)
	}

	// An abort whose wait fails (leadership lost) completes nothing.
	b.replicas.setHoldHW(true)
	c.send(writeMarkers(43, false, offsetsTP))
	eventually(t, 5*time.Second, func() bool { return len(b.txnReplicas.markerCalls()) == 3 })
	b.replicas.removeTopic(group.Topic)
	b.replicas.setHoldHW(false)
	_, body, err = c.readFrame(true)
	if err != nil {
		t.Fatal(err)
	}
	if err := resp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	if got := markerCodes(resp); got["43/__consumer_offsets-1"] != kerr.NotLeaderForPartition.Code {
		t.Fatalf("codes after a lost leadership %v", got)
	}
	if got := b.txnGroups.completed(); len(got) != 1 {
		t.Fatalf("CompleteTxn after a failed wait: %+v", got)
	}
}

// TestWriteTxnMarkersCompletesEachPartitionOnItsOwn: CompleteTxn for a
// __consumer_offsets partition comes as soon as its own marker is
// committed, with the marker's offset, while another partition of the
// request still waits for its high watermark.
func TestWriteTxnMarkersCompletesEachPartitionOnItsOwn(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "t", 1)
	createTopic(t, b, group.Topic, 3)
	tp0 := cluster.TopicPartition{Topic: "t", Partition: 0}
	offsetsTP := cluster.TopicPartition{Topic: group.Topic, Partition: 2}
	// Something in the offsets partition first, so the marker's offset
	// is not 0.
	if _, err := b.replicas.Append(offsetsTP, makeBatch(0, "x", "y"), -1); err != nil {
		t.Fatal(err)
	}
	b.replicas.setHoldHW(true)
	c := b.dial(t)
	c.send(writeMarkers(42, false, tp0, offsetsTP))
	eventually(t, 5*time.Second, func() bool { return len(b.txnReplicas.markerCalls()) == 2 })
	// Only the offsets partition's marker commits.
	b.replicas.mu.Lock()
	l := b.replicas.parts[offsetsTP]
	l.hw = l.leo
	markerAt := l.batches[len(l.batches)-1].base
	b.replicas.signalLocked()
	b.replicas.mu.Unlock()
	eventually(t, 5*time.Second, func() bool { return len(b.txnGroups.completed()) == 1 })
	if got := b.txnGroups.completed()[0]; got != (fakeComplete{partition: 2, producerID: 42, markerOffset: markerAt}) || markerAt != 2 {
		t.Fatalf("CompleteTxn %+v, want partition 2 at the marker's offset %d", got, markerAt)
	}
	b.replicas.setHoldHW(false)
	_, body, err := c.readFrame(true)
	if err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrWriteTxnMarkersResponse()
	resp.Version = 1
	if err := resp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	if got := markerCodes(resp); !reflect.DeepEqual(got, map[string]int16{"42/t-0": 0, "42/__consumer_offsets-2": 0}) {
		t.Fatalf("codes %v", got)
	}
}

func TestWriteTxnMarkersErrors(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "t", 3)
	tp := func(p int32) cluster.TopicPartition { return cluster.TopicPartition{Topic: "t", Partition: p} }
	b.txnReplicas.tmu.Lock()
	b.txnReplicas.markerErr[tp(0)] = fmt.Errorf("marker: %w", partition.ErrInvalidProducerEpoch)
	b.txnReplicas.markerErr[tp(1)] = partition.ErrTransactionCoordinatorFenced
	b.txnReplicas.markerErr[tp(2)] = partition.ErrNotEnoughReplicas
	b.txnReplicas.tmu.Unlock()
	// t-5 is not in the metadata; "known" is known but not hosted here.
	b.cluster.mu.Lock()
	b.cluster.topics["known"] = cluster.TopicInfo{Name: "known", Partitions: []cluster.PartitionInfo{{Partition: 0, Replicas: []int32{2}, State: cluster.LeaderAndIsr{Leader: 2}}}}
	b.cluster.mu.Unlock()
	resp := b.dial(t).roundTrip(writeMarkers(9, false, tp(0), tp(1), tp(2), tp(5), tp(2),
		cluster.TopicPartition{Topic: "known", Partition: 0}, cluster.TopicPartition{Topic: "gone", Partition: 0})).(*kmsg.WriteTxnMarkersResponse)
	want := map[string]int16{
		"9/t-0": kerr.InvalidProducerEpoch.Code, "9/t-1": kerr.TransactionCoordinatorFenced.Code,
		"9/t-2": kerr.NotEnoughReplicas.Code, "9/t-5": kerr.UnknownTopicOrPartition.Code,
		"9/known-0": kerr.NotLeaderForPartition.Code, "9/gone-0": kerr.UnknownTopicOrPartition.Code,
	}
	if got := markerCodes(resp); !reflect.DeepEqual(got, want) {
		t.Fatalf("codes %v, want %v", got, want)
	}
	if n := len(b.txnReplicas.markerCalls()); n != 6 {
		t.Fatalf("%d marker writes, want 6 (t-2 listed twice is written once)", n)
	}
	// No markers: an empty answer.
	empty := kmsg.NewPtrWriteTxnMarkersRequest()
	empty.Version = 0
	if r := b.dial(t).roundTrip(empty).(*kmsg.WriteTxnMarkersResponse); len(r.Markers) != 0 {
		t.Fatalf("%+v", r)
	}
}

func TestTxnOffsetCommit(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "t", 2)
	createTopic(t, b, group.Topic, testOffsetsPartitions)
	b.cluster.setTxnLeader(1)
	offsetsTP := cluster.TopicPartition{Topic: group.Topic, Partition: group.PartitionFor("g", testOffsetsPartitions)}
	b.txn.added["tx"] = map[cluster.TopicPartition]bool{offsetsTP: true}
	c := b.dial(t)
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = "tx", "g", 5001, 2
	req.Generation, req.MemberID, req.InstanceID = 4, "m", kmsg.StringPtr("i")
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = "t"
	for _, p := range []int32{0, 7} {
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = p, 10, 3, kmsg.StringPtr("md")
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	codes := func(r *kmsg.TxnOffsetCommitResponse) []int16 {
		var out []int16
		for _, p := range r.Topics[0].Partitions {
			out = append(out, p.ErrorCode)
		}
		return out
	}
	tp0 := cluster.TopicPartition{Topic: "t", Partition: 0}
	for _, v := range []int16{0, 2, 3} {
		req.Version = v
		r := c.roundTrip(req).(*kmsg.TxnOffsetCommitResponse)
		if got := codes(r); !reflect.DeepEqual(got, []int16{0, kerr.UnknownTopicOrPartition.Code}) {
			t.Fatalf("v%d codes %v", v, got)
		}
		b.txnGroups.mu.Lock()
		got := b.txnGroups.commits[len(b.txnGroups.commits)-1]
		b.txnGroups.mu.Unlock()
		want := group.TxnCommitRequest{TransactionalID: "tx", ProducerID: 5001, ProducerEpoch: 2, Group: "g", Generation: -1,
			Offsets: map[cluster.TopicPartition]group.CommitOffset{tp0: {Offset: 10, LeaderEpoch: -1, Metadata: "md"}}}
		if v >= 2 {
			want.Offsets[tp0] = group.CommitOffset{Offset: 10, LeaderEpoch: 3, Metadata: "md"}
		}
		if v >= 3 {
			want.Generation, want.MemberID, want.InstanceID = 4, "m", kmsg.StringPtr("i")
		}
		// Verified (KIP-890): committed with the guard of the group's
		// partition of __consumer_offsets.
		b.txnReplicas.tmu.Lock()
		want.VerificationGuard = b.txnReplicas.guards[offsetsTP][5001]
		b.txnReplicas.tmu.Unlock()
		if want.VerificationGuard == 0 {
			t.Fatalf("v%d: no guard for %s", v, offsetsTP)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("v%d: coordinator got %+v, want %+v", v, got, want)
		}
	}
	b.txnGroups.mu.Lock()
	b.txnGroups.commitErr = group.ErrCoordinatorLoadInProgress
	b.txnGroups.mu.Unlock()
	for v, want := range map[int16]int16{1: kerr.CoordinatorNotAvailable.Code, 2: kerr.CoordinatorLoadInProgress.Code} {
		req.Version = v
		if got := codes(c.roundTrip(req).(*kmsg.TxnOffsetCommitResponse)); got[0] != want || got[1] != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("v%d loading: %v, want %d", v, got, want)
		}
	}
	b.txnGroups.mu.Lock()
	b.txnGroups.commitErr = nil
	b.txnGroups.commitPartErrs = map[cluster.TopicPartition]error{tp0: group.ErrIllegalGeneration}
	b.txnGroups.mu.Unlock()
	req.Version = 3
	if got := codes(c.roundTrip(req).(*kmsg.TxnOffsetCommitResponse)); got[0] != kerr.IllegalGeneration.Code {
		t.Errorf("per partition: %v", got)
	}
}

// txnOffsetCommitReq is a TxnOffsetCommit of t-0 for producer pid, epoch 2.
func txnOffsetCommitReq(version int16, groupID string, pid int64) *kmsg.TxnOffsetCommitRequest {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version = version
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = "tx", groupID, pid, 2, -1
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, 10
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// TestTxnOffsetCommitVerification: KIP-890 for TxnOffsetCommit, as Kafka
// 3.6+'s handleTxnCommitOffsets: the group's __consumer_offsets
// partition is verified with the transaction coordinator (local or
// remote, the path Produce uses) unless the producer already has a
// transaction there, the commit carries the guard, and a partition not in
// the producer's transaction (a late or zombie request of a transaction
// already ended) is refused before anything is written. Failures map as
// Kafka's maybeConvertOffsetCommitError.
func TestTxnOffsetCommitVerification(t *testing.T) {
	offsetsTP := cluster.TopicPartition{Topic: group.Topic, Partition: group.PartitionFor("g", testOffsetsPartitions)}
	const pid = 7
	remote := func(answer map[cluster.TopicPartition]error, err error) func(b *testBroker) {
		return func(b *testBroker) {
			b.cluster.setTxnLeader(2)
			b.verifier.answer, b.verifier.err = answer, err
		}
	}
	cases := []struct {
		name    string
		version int16
		group   string
		pid     int64
		opt     brokerOption
		setup   func(b *testBroker)
		want    *kerr.Error
		guard   bool // committed with a guard (else with none)
		verify  bool // asked a coordinator
	}{
		{name: "in the transaction", setup: func(b *testBroker) { b.txn.added["tx"] = map[cluster.TopicPartition]bool{offsetsTP: true} },
			guard: true, verify: true},
		{name: "transaction ended (late or zombie request)", want: kerr.InvalidTxnState, verify: true},
		{name: "ongoing transaction on the partition", setup: func(b *testBroker) {
			b.txnReplicas.ongoing[offsetsTP] = map[int64]bool{pid: true}
		}},
		{name: "verification off", opt: func(c *Config) { c.TxnVerification = false }},
		{name: "remote verified", setup: remote(map[cluster.TopicPartition]error{offsetsTP: nil}, nil), guard: true, verify: true},
		{name: "remote fenced", setup: remote(map[cluster.TopicPartition]error{offsetsTP: txn.ErrProducerFenced}, nil),
			want: kerr.InvalidProducerEpoch, verify: true},
		{name: "remote not in the transaction", setup: remote(map[cluster.TopicPartition]error{offsetsTP: fmt.Errorf("x: %w", txn.ErrInvalidTxnState)}, nil),
			want: kerr.InvalidTxnState, verify: true},
		{name: "remote concurrent", setup: remote(map[cluster.TopicPartition]error{offsetsTP: txn.ErrConcurrentTransactions}, nil),
			want: kerr.ConcurrentTransactions, verify: true},
		{name: "remote moved", setup: remote(nil, fmt.Errorf("verify: %w", txn.ErrNotCoordinator)), want: kerr.NotCoordinator, verify: true},
		{name: "remote unreachable", setup: remote(nil, fmt.Errorf("dial: %w", cluster.ErrBrokerNotAvailable)),
			want: kerr.CoordinatorLoadInProgress, verify: true},
		{name: "remote unreachable v1", version: 1, setup: remote(nil, fmt.Errorf("dial: %w", cluster.ErrBrokerNotAvailable)),
			want: kerr.CoordinatorNotAvailable, verify: true},
		{name: "remote timed out", setup: remote(nil, context.DeadlineExceeded), want: kerr.CoordinatorLoadInProgress, verify: true},
		{name: "no transaction coordinator", setup: func(b *testBroker) {
			b.cluster.mu.Lock()
			delete(b.cluster.topics, txn.Topic)
			b.cluster.mu.Unlock()
		}, want: kerr.CoordinatorNotAvailable},
		{name: "group partition not led here", setup: func(b *testBroker) { b.txnReplicas.guardErr[offsetsTP] = partition.ErrNotLeader },
			want: kerr.NotCoordinator},
		{name: "no replica of the group partition", setup: func(b *testBroker) { b.replicas.removeTopic(group.Topic) },
			want: kerr.CoordinatorNotAvailable},
		{name: "empty group id: the group coordinator answers", group: "-"},
		{name: "negative producer id: the group coordinator answers", pid: -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var opts []brokerOption
			if tc.opt != nil {
				opts = append(opts, tc.opt)
			}
			b := startBroker(t, opts...)
			createTopic(t, b, "t", 1)
			createTopic(t, b, group.Topic, testOffsetsPartitions)
			b.cluster.setTxnLeader(1)
			if tc.setup != nil {
				tc.setup(b) // before any request: no lock needed
			}
			version, groupID, producerID := tc.version, tc.group, tc.pid
			if version == 0 {
				version = 3
			}
			if groupID == "" {
				groupID = "g"
			} else if groupID == "-" {
				groupID = ""
			}
			if producerID == 0 {
				producerID = pid
			}
			resp := b.dial(t).roundTrip(txnOffsetCommitReq(version, groupID, producerID)).(*kmsg.TxnOffsetCommitResponse)
			want := int16(0)
			if tc.want != nil {
				want = tc.want.Code
			}
			if got := resp.Topics[0].Partitions[0].ErrorCode; got != want {
				t.Fatalf("code %d, want %d", got, want)
			}
			b.txnGroups.mu.Lock()
			commits := append([]group.TxnCommitRequest(nil), b.txnGroups.commits...)
			b.txnGroups.mu.Unlock()
			if committed := len(commits) == 1; committed != (want == 0) {
				t.Fatalf("committed %v with code %d", committed, want)
			}
			b.txnReplicas.tmu.Lock()
			stored := b.txnReplicas.guards[offsetsTP][pid]
			guardCalls := len(b.txnReplicas.guardCalls)
			b.txnReplicas.tmu.Unlock()
			if want == 0 {
				if g := commits[0].VerificationGuard; (g != 0) != tc.guard || (tc.guard && g != stored) {
					t.Fatalf("committed with guard %d (stored %d), want guard %v", g, stored, tc.guard)
				}
			}
			asked := len(b.txn.verifications()) + len(b.remoteCalls())
			if asked != map[bool]int{true: 1, false: 0}[tc.verify] {
				t.Fatalf("%d verifications, want %v", asked, tc.verify)
			}
			if v := b.txn.verifications(); len(v) == 1 && (v[0].id != "tx" || v[0].pid != pid || v[0].epoch != 2 ||
				!reflect.DeepEqual(v[0].tps, []cluster.TopicPartition{offsetsTP})) {
				t.Fatalf("verification %+v, want tx's %s", v[0], offsetsTP)
			}
			if r := b.remoteCalls(); len(r) == 1 && (r[0].to != 2 || !reflect.DeepEqual(r[0].tps, []cluster.TopicPartition{offsetsTP})) {
				t.Fatalf("remote verification %+v", r[0])
			}
			if (groupID == "" || producerID < 0 || tc.opt != nil) && guardCalls != 0 {
				t.Fatalf("%d guard calls for a request not verified", guardCalls)
			}
		})
	}
}

func TestDescribeProducers(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "t", 3)
	tp := func(p int32) cluster.TopicPartition { return cluster.TopicPartition{Topic: "t", Partition: p} }
	b.txnReplicas.tmu.Lock()
	b.txnReplicas.producers[tp(0)] = []partition.ProducerInfo{{ProducerID: 7, ProducerEpoch: 2, LastSequence: 9, LastTimestamp: 1234, CoordinatorEpoch: 5, CurrentTxnStartOffset: 40}}
	b.txnReplicas.describeErr[tp(1)] = partition.ErrNotLeader
	b.txnReplicas.tmu.Unlock()
	b.replicas.removeTopic("t") // then re-add only partitions 0 and 1: 2 is in the metadata only
	b.replicas.addPartition(tp(0))
	b.replicas.addPartition(tp(1))
	req := kmsg.NewPtrDescribeProducersRequest()
	for _, tt := range []struct {
		topic string
		parts []int32
	}{{"t", []int32{0, 1, 2}}, {"missing", []int32{0}}, {"bad/name", []int32{0}}, {"", []int32{0}}} {
		rt := kmsg.NewDescribeProducersRequestTopic()
		rt.Topic, rt.Partitions = tt.topic, tt.parts
		req.Topics = append(req.Topics, rt)
	}
	resp := b.dial(t).roundTrip(req).(*kmsg.DescribeProducersResponse)
	p := resp.Topics[0].Partitions
	if p[0].ErrorCode != 0 || len(p[0].ActiveProducers) != 1 {
		t.Fatalf("t-0: %+v", p[0])
	}
	if ap := p[0].ActiveProducers[0]; ap.ProducerID != 7 || ap.ProducerEpoch != 2 || ap.LastSequence != 9 || ap.LastTimestamp != 1234 ||
		ap.CoordinatorEpoch != 5 || ap.CurrentTxnStartOffset != 40 {
		t.Fatalf("producer %+v", ap)
	}
	for _, c := range []struct {
		got  kmsg.DescribeProducersResponseTopicPartition
		want *kerr.Error
	}{
		{p[1], kerr.NotLeaderForPartition}, {p[2], kerr.NotLeaderForPartition},
		{resp.Topics[1].Partitions[0], kerr.UnknownTopicOrPartition},
		{resp.Topics[2].Partitions[0], kerr.InvalidTopicException},
		{resp.Topics[3].Partitions[0], kerr.InvalidTopicException},
	} {
		if c.got.ErrorCode != c.want.Code || c.got.ErrorMessage == nil {
			t.Errorf("partition %+v, want %s with a message", c.got, c.want.Message)
		}
	}
}

func TestDescribeAndListTransactions(t *testing.T) {
	b := startBroker(t)
	b.txn.mu.Lock()
	b.txn.descriptions["a"] = txn.Description{TransactionalID: "a", State: "Ongoing", TimeoutMs: 60000, StartTimestamp: 99,
		ProducerID: 5, ProducerEpoch: 1, Partitions: []cluster.TopicPartition{{Topic: "u", Partition: 1}, {Topic: "t", Partition: 2}, {Topic: "t", Partition: 0}}}
	b.txn.descriptions["b"] = txn.Description{TransactionalID: "b", Err: txn.ErrCoordinatorLoadInProgress}
	b.txn.listing = []txn.Listing{{TransactionalID: "a", ProducerID: 5, State: "Ongoing"}, {TransactionalID: "c", ProducerID: 6, State: "CompleteCommit"}}
	b.txn.mu.Unlock()
	c := b.dial(t)

	dreq := kmsg.NewPtrDescribeTransactionsRequest()
	dreq.TransactionalIDs = []string{"a", "b", "nope", "a"}
	dresp := c.roundTrip(dreq).(*kmsg.DescribeTransactionsResponse)
	if len(dresp.TransactionStates) != 4 {
		t.Fatalf("%+v", dresp)
	}
	a := dresp.TransactionStates[0]
	if a.ErrorCode != 0 || a.State != "Ongoing" || a.TimeoutMillis != 60000 || a.StartTimestamp != 99 || a.ProducerID != 5 || a.ProducerEpoch != 1 {
		t.Fatalf("a: %+v", a)
	}
	topics := fmt.Sprint(a.Topics[0].Topic, a.Topics[0].Partitions, a.Topics[1].Topic, a.Topics[1].Partitions)
	if topics != "t[0 2]u[1]" {
		t.Fatalf("topics %s", topics)
	}
	if s := dresp.TransactionStates; s[1].ErrorCode != kerr.CoordinatorLoadInProgress.Code || s[2].ErrorCode != kerr.TransactionalIDNotFound.Code ||
		s[2].TransactionalID != "nope" || s[3].State != "Ongoing" {
		t.Fatalf("states %+v", s)
	}
	dreq.TransactionalIDs = nil
	if r := c.roundTrip(dreq).(*kmsg.DescribeTransactionsResponse); len(r.TransactionStates) != 0 {
		t.Fatalf("no ids: %+v", r)
	}

	lreq := kmsg.NewPtrListTransactionsRequest()
	lresp := c.roundTrip(lreq).(*kmsg.ListTransactionsResponse)
	if lresp.ErrorCode != 0 || len(lresp.TransactionStates) != 2 || len(lresp.UnknownStateFilters) != 0 {
		t.Fatalf("all: %+v", lresp)
	}
	lreq.StateFilters = []string{"Ongoing", "Bogus"}
	lresp = c.roundTrip(lreq).(*kmsg.ListTransactionsResponse)
	if len(lresp.TransactionStates) != 1 || lresp.TransactionStates[0].TransactionalID != "a" || lresp.TransactionStates[0].TransactionState != "Ongoing" ||
		!reflect.DeepEqual(lresp.UnknownStateFilters, []string{"Bogus"}) {
		t.Fatalf("filtered: %+v", lresp)
	}
	lreq.StateFilters = []string{"Bogus"}
	if lresp = c.roundTrip(lreq).(*kmsg.ListTransactionsResponse); len(lresp.TransactionStates) != 0 {
		t.Fatalf("unknown filters only must match nothing: %+v", lresp)
	}
	b.txn.mu.Lock()
	b.txn.listErr = txn.ErrCoordinatorLoadInProgress
	b.txn.mu.Unlock()
	if lresp = c.roundTrip(lreq).(*kmsg.ListTransactionsResponse); lresp.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("loading: %+v", lresp)
	}
}

// txnProduceRequest is a Produce v9 of one transactional batch per partition.
func txnProduceRequest(id *string, acks int16, topic string, pid int64, parts ...int32) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis, req.TransactionID = 9, acks, 1000, id
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	for _, p := range parts {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p, makeTxnBatch(true, pid, 0, 0, "v")
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

func produceCodes(resp *kmsg.ProduceResponse) []int16 {
	var out []int16
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out = append(out, p.ErrorCode)
		}
	}
	return out
}

func TestTransactionalProduceWithoutTransactionalID(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "t", 2)
	c := b.dial(t)
	resp := c.roundTrip(txnProduceRequest(nil, -1, "t", 7, 0, 1)).(*kmsg.ProduceResponse)
	if got := produceCodes(resp); !reflect.DeepEqual(got, []int16{kerr.TransactionalIDAuthorizationFailed.Code, kerr.TransactionalIDAuthorizationFailed.Code}) {
		t.Fatalf("codes %v", got)
	}
	if n := len(b.txnReplicas.appendCalls()); n != 0 {
		t.Fatalf("%d appends", n)
	}
	// Transactional batches of two producers in one request.
	req := txnProduceRequest(kmsg.StringPtr("tx"), -1, "t", 7, 0, 1)
	req.Topics[0].Partitions[1].Records = makeTxnBatch(true, 8, 0, 0, "w")
	if got := produceCodes(c.roundTrip(req).(*kmsg.ProduceResponse)); !reflect.DeepEqual(got, []int16{kerr.InvalidProducerIDMapping.Code, kerr.InvalidProducerIDMapping.Code}) {
		t.Fatalf("two producers: %v", got)
	}
	// acks=0 answers nothing and closes the connection.
	c.send(txnProduceRequest(nil, 0, "t", 7, 0))
	c.expectClosed()
	// An idempotent (non-transactional) batch needs no transactional id.
	c = b.dial(t)
	plain := produceRequest(9, -1, 1000, "t", 0, makeTxnBatch(false, 7, 0, 0, "x"))
	if got := produceCodes(c.roundTrip(plain).(*kmsg.ProduceResponse)); got[0] != 0 {
		t.Fatalf("idempotent: %v", got)
	}
}

func TestTransactionalProduceVerifiedLocally(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "t", 2)
	b.cluster.setTxnLeader(1)
	b.txn.added["tx"] = map[cluster.TopicPartition]bool{{Topic: "t", Partition: 0}: true}
	c := b.dial(t)

	resp := c.roundTrip(txnProduceRequest(kmsg.StringPtr("tx"), -1, "t", 7, 0, 1)).(*kmsg.ProduceResponse)
	if got := produceCodes(resp); !reflect.DeepEqual(got, []int16{0, kerr.InvalidTxnState.Code}) {
		t.Fatalf("codes %v", got)
	}
	if msg := resp.Topics[0].Partitions[1].ErrorMessage; msg == nil {
		t.Error("INVALID_TXN_STATE without a message")
	}
	v := b.txn.verifications()
	if len(v) != 1 || v[0].id != "tx" || v[0].pid != 7 || len(v[0].tps) != 2 {
		t.Fatalf("verifications %+v (want one for both partitions)", v)
	}
	appends := b.txnReplicas.appendCalls()
	if len(appends) != 1 || appends[0].opts.VerificationGuard == 0 || appends[0].opts.Origin != partition.OriginClient || appends[0].opts.Acks != -1 {
		t.Fatalf("appends %+v (want t-0 only, with its guard)", appends)
	}
	if len(b.remoteCalls()) != 0 {
		t.Fatal("asked a remote coordinator although this broker leads")
	}
	// The producer's next batch on t-0 needs no verification.
	if got := produceCodes(c.roundTrip(txnProduceRequest(kmsg.StringPtr("tx"), 1, "t", 7, 0)).(*kmsg.ProduceResponse)); got[0] != 0 {
		t.Fatalf("second batch: %v", got)
	}
	if n := len(b.txn.verifications()); n != 1 {
		t.Fatalf("%d verifications, want still 1", n)
	}
}

func (b *testBroker) remoteCalls() []fakeRemoteVerify { return b.verifier.remoteCalls() }

func TestTransactionalProduceVerifiedRemotely(t *testing.T) {
	tp0 := cluster.TopicPartition{Topic: "t", Partition: 0}
	cases := []struct {
		name   string
		answer map[cluster.TopicPartition]error
		err    error
		opt    brokerOption
		setup  func(b *testBroker)
		want   *kerr.Error
		remote bool
	}{
		{"verified", map[cluster.TopicPartition]error{tp0: nil}, nil, nil, nil, nil, true},
		{"not in the transaction", map[cluster.TopicPartition]error{tp0: fmt.Errorf("x: %w", txn.ErrInvalidTxnState)}, nil, nil, nil, kerr.InvalidTxnState, true},
		{"fenced", map[cluster.TopicPartition]error{tp0: txn.ErrProducerFenced}, nil, nil, nil, kerr.InvalidProducerEpoch, true},
		{"coordinator moved", nil, fmt.Errorf("verify: %w", txn.ErrNotCoordinator), nil, nil, kerr.NotEnoughReplicas, true},
		{"concurrent", map[cluster.TopicPartition]error{tp0: txn.ErrConcurrentTransactions}, nil, nil, nil, kerr.NotEnoughReplicas, true},
		{"unreachable", nil, fmt.Errorf("dial: %w", cluster.ErrBrokerNotAvailable), nil, nil, kerr.NotEnoughReplicas, true},
		{"timed out", nil, context.DeadlineExceeded, nil, nil, kerr.NotEnoughReplicas, true},
		{"no verifier", nil, nil, func(c *Config) { c.TxnVerifier = nil }, nil, kerr.NotEnoughReplicas, false},
		{"no txn topic", nil, nil, nil, func(b *testBroker) {
			b.cluster.mu.Lock()
			delete(b.cluster.topics, txn.Topic)
			b.cluster.mu.Unlock()
		}, kerr.NotEnoughReplicas, false},
		{"coordinator not alive", nil, nil, nil, func(b *testBroker) {
			b.cluster.mu.Lock()
			b.cluster.brokers = b.cluster.brokers[:1]
			b.cluster.mu.Unlock()
		}, kerr.NotEnoughReplicas, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var opts []brokerOption
			if tc.opt != nil {
				opts = append(opts, tc.opt)
			}
			b := startBroker(t, opts...)
			createTopic(t, b, "t", 1)
			b.cluster.setTxnLeader(2)
			b.verifier.answer, b.verifier.err = tc.answer, tc.err
			if tc.setup != nil {
				tc.setup(b)
			}
			resp := b.dial(t).roundTrip(txnProduceRequest(kmsg.StringPtr("tx"), -1, "t", 7, 0)).(*kmsg.ProduceResponse)
			want := int16(0)
			if tc.want != nil {
				want = tc.want.Code
			}
			if got := produceCodes(resp); got[0] != want {
				t.Fatalf("code %d, want %d (%v)", got[0], want, resp.Topics[0].Partitions[0].ErrorMessage)
			}
			calls := b.remoteCalls()
			if tc.remote && (len(calls) != 1 || calls[0].to != 2 || calls[0].id != "tx" || !reflect.DeepEqual(calls[0].tps, []cluster.TopicPartition{tp0})) {
				t.Fatalf("remote calls %+v", calls)
			}
			if n := len(b.txn.verifications()); n != 0 {
				t.Fatal("asked the local coordinator, which does not lead")
			}
			if appended := len(b.txnReplicas.appendCalls()) == 1; appended != (want == 0) {
				t.Fatalf("appended %v with code %d", appended, want)
			}
		})
	}
}

// TestTransactionalProduceMarkerClearsGuard: a marker written for the
// producer while its verification is in flight clears the guard, so the
// append that follows is refused (INVALID_TXN_STATE) rather than opening
// a transaction the coordinator has already ended.
func TestTransactionalProduceMarkerClearsGuard(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "t", 1)
	b.cluster.setTxnLeader(1)
	tp0 := cluster.TopicPartition{Topic: "t", Partition: 0}
	b.txn.added["tx"] = map[cluster.TopicPartition]bool{tp0: true}
	b.txn.onVerify = func() {
		if _, err := b.txnReplicas.WriteTxnMarker(tp0, partition.TxnMarker{ProducerID: 7, Commit: false}); err != nil {
			t.Error(err)
		}
	}
	resp := b.dial(t).roundTrip(txnProduceRequest(kmsg.StringPtr("tx"), -1, "t", 7, 0)).(*kmsg.ProduceResponse)
	if got := produceCodes(resp); got[0] != kerr.InvalidTxnState.Code {
		t.Fatalf("code %v, want INVALID_TXN_STATE", got)
	}
}

func TestTransactionalProduceVerificationOff(t *testing.T) {
	b := startBroker(t, func(c *Config) { c.TxnVerification = false })
	createTopic(t, b, "t", 1)
	b.txnReplicas.tmu.Lock()
	b.txnReplicas.verificationOff = true // as partition's Config.TxnVerification
	b.txnReplicas.tmu.Unlock()
	if got := produceCodes(b.dial(t).roundTrip(txnProduceRequest(kmsg.StringPtr("tx"), -1, "t", 7, 0)).(*kmsg.ProduceResponse)); got[0] != 0 {
		t.Fatalf("code %v", got)
	}
	b.txnReplicas.tmu.Lock()
	guards := len(b.txnReplicas.guardCalls)
	b.txnReplicas.tmu.Unlock()
	if a := b.txnReplicas.appendCalls(); guards != 0 || len(a) != 1 || a[0].opts.VerificationGuard != 0 || len(b.txn.verifications()) != 0 {
		t.Fatalf("verification off: %d guard calls, appends %+v", guards, a)
	}
}

// TestTransactionalProduceGuardErrors: the replica refusing a guard
// (not leader, no replica) answers as any produce error.
func TestTransactionalProduceGuardErrors(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "t", 2)
	b.cluster.setTxnLeader(1)
	b.txnReplicas.tmu.Lock()
	b.txnReplicas.guardErr[cluster.TopicPartition{Topic: "t", Partition: 0}] = partition.ErrNotLeader
	b.txnReplicas.tmu.Unlock()
	resp := b.dial(t).roundTrip(txnProduceRequest(kmsg.StringPtr("tx"), -1, "t", 7, 0, 1, 5)).(*kmsg.ProduceResponse)
	if got := produceCodes(resp); !reflect.DeepEqual(got, []int16{kerr.NotLeaderForPartition.Code, kerr.InvalidTxnState.Code, kerr.UnknownTopicOrPartition.Code}) {
		t.Fatalf("codes %v", got)
	}
}

func TestFetchReadCommitted(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "t", 1)
	tp0 := cluster.TopicPartition{Topic: "t", Partition: 0}
	c := b.dial(t)
	for i := 0; i < 3; i++ {
		c.roundTrip(produceRequest(9, 1, 1000, "t", 0, makeBatch(0, "a")))
	}
	b.replicas.mu.Lock()
	b.replicas.lso = map[cluster.TopicPartition]int64{tp0: 2}
	b.replicas.aborted = map[cluster.TopicPartition][]partition.AbortedTransaction{tp0: {{ProducerID: 7, FirstOffset: 1}}}
	b.replicas.mu.Unlock()
	for _, v := range []int16{4, 12} {
		for _, iso := range []int8{0, 1} {
			req := fetchRequest(v, 0, 0, "t", 0, 0)
			req.IsolationLevel, req.ReplicaID = iso, -1
			p := c.roundTrip(req).(*kmsg.FetchResponse).Topics[0].Partitions[0]
			if p.ErrorCode != 0 || p.HighWatermark != 3 || p.LastStableOffset != 2 {
				t.Fatalf("v%d iso %d: %+v", v, iso, p)
			}
			switch {
			case iso == 0 && p.AbortedTransactions != nil:
				t.Errorf("v%d read_uncommitted: aborted %+v, want null", v, p.AbortedTransactions)
			case iso == 1 && (len(p.AbortedTransactions) != 1 || p.AbortedTransactions[0].ProducerID != 7 || p.AbortedTransactions[0].FirstOffset != 1):
				t.Errorf("v%d read_committed: aborted %+v", v, p.AbortedTransactions)
			}
			b.replicas.mu.Lock()
			last := b.replicas.reads[len(b.replicas.reads)-1].req
			b.replicas.mu.Unlock()
			if last.IsolationLevel != iso {
				t.Errorf("v%d: read with isolation %d, want %d", v, last.IsolationLevel, iso)
			}
		}
	}
	// read_committed with nothing aborted: an empty list, not null.
	b.replicas.mu.Lock()
	b.replicas.aborted = nil
	b.replicas.mu.Unlock()
	req := fetchRequest(12, 0, 0, "t", 0, 0)
	req.IsolationLevel = 1
	if p := c.roundTrip(req).(*kmsg.FetchResponse).Topics[0].Partitions[0]; p.AbortedTransactions == nil || len(p.AbortedTransactions) != 0 {
		t.Errorf("read_committed without aborts: %#v, want an empty list", p.AbortedTransactions)
	}
	// A follower always reads uncommitted; a bogus level reads committed.
	req.ReplicaID = 2
	c.roundTrip(req)
	req.ReplicaID, req.IsolationLevel = -1, 9
	c.roundTrip(req)
	b.replicas.mu.Lock()
	reads := b.replicas.reads
	follower, bogus := reads[len(reads)-2].req.IsolationLevel, reads[len(reads)-1].req.IsolationLevel
	b.replicas.mu.Unlock()
	if follower != 0 || bogus != 1 {
		t.Errorf("follower read with isolation %d, level 9 with %d", follower, bogus)
	}
	// A failed partition has LSO -1.
	req = fetchRequest(12, 0, 0, "missing", 0, 0)
	if p := c.roundTrip(req).(*kmsg.FetchResponse).Topics[0].Partitions[0]; p.LastStableOffset != -1 || p.ErrorCode == 0 {
		t.Errorf("failed partition: %+v", p)
	}
}

func TestListOffsetsIsolation(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "t", 1)
	c := b.dial(t)
	cases := []struct {
		version   int16
		replicaID int32
		iso       int8
		want      partition.OffsetsAsker
	}{
		{2, -1, 1, partition.AskerCommittedConsumer},
		{7, -1, 1, partition.AskerCommittedConsumer},
		{2, -1, 0, partition.AskerConsumer},
		{1, -1, 0, partition.AskerConsumer},
		{0, -1, 0, partition.AskerLegacyConsumer},
		{5, 2, 1, partition.AskerReplica},
	}
	for _, tc := range cases {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version, req.ReplicaID, req.IsolationLevel = tc.version, tc.replicaID, tc.iso
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp, rp.MaxNumOffsets = -1, 1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		c.roundTrip(req)
		b.replicas.mu.Lock()
		got := b.replicas.askers[len(b.replicas.askers)-1]
		b.replicas.mu.Unlock()
		if got != tc.want {
			t.Errorf("v%d replica %d isolation %d: asker %v, want %v", tc.version, tc.replicaID, tc.iso, got, tc.want)
		}
	}
}

// TestOffsetFetchRequireStable: a commit still waiting for replication
// is unstable; with RequireStable (v7+) it answers
// UNSTABLE_OFFSET_COMMIT on the partition, without it offset -1.
func TestOffsetFetchRequireStable(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "t", 1)
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey = "g"
	b.dial(t).roundTrip(fc) // creates __consumer_offsets
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Version, oc.Group, oc.Generation = 8, "g", -1
	ot := kmsg.NewOffsetCommitRequestTopic()
	ot.Topic = "t"
	op := kmsg.NewOffsetCommitRequestTopicPartition()
	op.Offset = 5
	ot.Partitions = append(ot.Partitions, op)
	oc.Topics = append(oc.Topics, ot)
	committer := b.dial(t)

	fetch := func(version int16, stable bool) (int16, int64) {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version, req.RequireStable = version, stable
		if version >= 8 {
			g := kmsg.NewOffsetFetchRequestGroup()
			g.Group = "g"
			g.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}}
			req.Groups = append(req.Groups, g)
			g0 := b.dial(t).roundTrip(req).(*kmsg.OffsetFetchResponse).Groups[0]
			if len(g0.Topics) == 0 {
				return g0.ErrorCode, -1 // still loading
			}
			p := g0.Topics[0].Partitions[0]
			return p.ErrorCode, p.Offset
		}
		req.Group = "g"
		req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
		r := b.dial(t).roundTrip(req).(*kmsg.OffsetFetchResponse)
		if len(r.Topics) == 0 {
			return r.ErrorCode, -1
		}
		p := r.Topics[0].Partitions[0]
		return p.ErrorCode, p.Offset
	}
	// Once the coordinator has loaded the partition, a commit that waits
	// for replication is pending.
	eventually(t, 5*time.Second, func() bool { code, _ := fetch(7, true); return code == 0 })
	b.replicas.setHoldHW(true)
	committer.send(oc)
	eventually(t, 5*time.Second, func() bool { code, _ := fetch(7, true); return code == kerr.UnstableOffsetCommit.Code })
	if code, off := fetch(8, true); code != kerr.UnstableOffsetCommit.Code || off != -1 {
		t.Errorf("v8 stable: %d %d", code, off)
	}
	if code, off := fetch(7, false); code != 0 || off != -1 {
		t.Errorf("v7 without RequireStable: %d %d", code, off)
	}
	if code, _ := fetch(6, true); code != 0 {
		t.Errorf("v6 has no RequireStable: %d", code)
	}
	b.replicas.setHoldHW(false)
	if _, _, err := committer.readFrame(true); err != nil {
		t.Fatal(err)
	}
	if code, off := fetch(7, true); code != 0 || off != 5 {
		t.Errorf("after replication: %d %d", code, off)
	}
}

// TestTxnHostileInputs: null and empty ids, negative timeouts and huge
// partition lists answer Kafka's codes, and the connection stays usable.
func TestTxnHostileInputs(t *testing.T) {
	b := startBroker(t, func(c *Config) { c.MaxRequestBytes = 8 << 20 })
	createTopic(t, b, "t", 1)
	c := b.dial(t)
	huge := make([]int32, 200000)
	for i := range huge {
		huge[i] = int32(i)
	}
	ap := addPartitionsV3(3, "tx", map[string][]int32{"t": huge})
	resp := c.roundTrip(ap).(*kmsg.AddPartitionsToTxnResponse)
	if codes := codesV3(resp); len(codes) != len(huge) || codes["t-0"] != kerr.OperationNotAttempted.Code || codes["t-199999"] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("%d codes", len(codes))
	}
	wm := writeMarkers(1, true)
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = "nope", huge
	wm.Markers[0].Topics = append(wm.Markers[0].Topics, mt)
	if codes := markerCodes(c.roundTrip(wm).(*kmsg.WriteTxnMarkersResponse)); len(codes) != len(huge) || codes["1/nope-5"] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("markers: %d codes", len(codes))
	}
	dp := kmsg.NewPtrDescribeProducersRequest()
	dp.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "nope", Partitions: huge}}
	if r := c.roundTrip(dp).(*kmsg.DescribeProducersResponse); len(r.Topics[0].Partitions) != len(huge) {
		t.Fatalf("describe producers: %d", len(r.Topics[0].Partitions))
	}

	b.txn.mu.Lock()
	b.txn.initErr = txn.ErrInvalidTransactionTimeout
	b.txn.mu.Unlock()
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.Version, ip.TransactionalID, ip.TransactionTimeoutMillis = 4, kmsg.StringPtr("tx"), -5
	if r := c.roundTrip(ip).(*kmsg.InitProducerIDResponse); r.ErrorCode != kerr.InvalidTransactionTimeout.Code {
		t.Fatalf("negative timeout: %+v", r)
	}
	b.txn.mu.Lock()
	got := b.txn.inits[len(b.txn.inits)-1].TransactionTimeoutMs
	b.txn.mu.Unlock()
	if got != -5 {
		t.Fatalf("timeout %d passed, want -5 (the coordinator checks it)", got)
	}
	// A null id is an idempotent producer, whatever the timeout.
	ip.TransactionalID = nil
	if r := c.roundTrip(ip).(*kmsg.InitProducerIDResponse); r.ErrorCode != 0 || r.ProducerID < 0 {
		t.Fatalf("null id: %+v", r)
	}
	// Produce with a negative timeout and an empty transactional id.
	pr := txnProduceRequest(kmsg.StringPtr(""), -1, "t", 7, 0)
	pr.TimeoutMillis = -1
	if got := produceCodes(c.roundTrip(pr).(*kmsg.ProduceResponse)); got[0] == 0 {
		t.Fatalf("unverifiable produce appended: %v", got)
	}
	// TxnOffsetCommit with empty strings reaches the coordinator, which decides.
	tc := kmsg.NewPtrTxnOffsetCommitRequest()
	tc.Version = 3
	tc.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: -9}}}}
	if r := c.roundTrip(tc).(*kmsg.TxnOffsetCommitResponse); len(r.Topics) != 1 {
		t.Fatalf("%+v", r)
	}
	// The connection is still good.
	if r := c.roundTrip(kmsg.NewPtrListTransactionsRequest()).(*kmsg.ListTransactionsResponse); r.ErrorCode != 0 {
		t.Fatalf("after hostile input: %+v", r)
	}
}

var nopLog = zerolog.Nop()

// TestBrokerClientTxn drives BrokerClient.WriteTxnMarkers and
// VerifyPartitionsInTxn against a server and checks that the errors come
// back as the sentinels the coordinator and the produce path test for.
func TestBrokerClientTxn(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "t", 3)
	cl := newBrokerClient(t, b)
	tp := func(p int32) cluster.TopicPartition { return cluster.TopicPartition{Topic: "t", Partition: p} }
	b.txnReplicas.tmu.Lock()
	b.txnReplicas.markerErr[tp(1)] = partition.ErrInvalidProducerEpoch
	b.txnReplicas.markerErr[tp(2)] = partition.ErrTransactionCoordinatorFenced
	b.txnReplicas.tmu.Unlock()
	ctx := context.Background()
	errs, err := cl.WriteTxnMarkers(ctx, b.self(), []TxnMarkerFor{{
		TxnMarker:  partition.TxnMarker{ProducerID: 7, ProducerEpoch: 1, CoordinatorEpoch: 3, Commit: true},
		Partitions: []cluster.TopicPartition{tp(0), tp(1), tp(2), {Topic: "gone", Partition: 0}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if errs[tp(0)] != nil || !errors.Is(errs[tp(1)], partition.ErrInvalidProducerEpoch) ||
		!errors.Is(errs[tp(2)], partition.ErrTransactionCoordinatorFenced) ||
		!errors.Is(errs[cluster.TopicPartition{Topic: "gone", Partition: 0}], partition.ErrUnknownTopicOrPartition) {
		t.Fatalf("marker errors %v", errs)
	}
	if mk := b.txnReplicas.markerCalls()[0]; mk.tp != tp(0) || mk.marker != (partition.TxnMarker{ProducerID: 7, ProducerEpoch: 1, CoordinatorEpoch: 3, Commit: true}) {
		t.Fatalf("marker written %+v", mk)
	}

	b.txn.added["tx"] = map[cluster.TopicPartition]bool{tp(0): true}
	verrs, err := cl.VerifyPartitionsInTxn(ctx, b.self(), "tx", 7, 1, []cluster.TopicPartition{tp(0), tp(1)})
	if err != nil {
		t.Fatal(err)
	}
	if verrs[tp(0)] != nil || !errors.Is(verrs[tp(1)], txn.ErrInvalidTxnState) || !errors.Is(verrs[tp(1)], partition.ErrInvalidTxnState) {
		t.Fatalf("verify errors %v", verrs)
	}
	if code := errorCode(&nopLog, verificationFailure(verrs[tp(1)])); code != kerr.InvalidTxnState.Code {
		t.Fatalf("produce code %d", code)
	}
	b.txn.mu.Lock()
	b.txn.verifyErr = txn.ErrNotCoordinator
	b.txn.mu.Unlock()
	verrs, _ = cl.VerifyPartitionsInTxn(ctx, b.self(), "tx", 7, 1, []cluster.TopicPartition{tp(0)})
	if !errors.Is(verrs[tp(0)], txn.ErrNotCoordinator) {
		t.Fatalf("not coordinator: %v", verrs)
	}
	if code := errorCode(&nopLog, verificationFailure(verrs[tp(0)])); code != kerr.NotEnoughReplicas.Code {
		t.Fatalf("produce code for a moved coordinator %d", code)
	}
	// A broker that cannot be reached.
	dead := cluster.Broker{ID: 9, Endpoints: []cluster.Endpoint{{Listener: "PLAINTEXT", Host: "127.0.0.1", Port: 1}}}
	if _, err := cl.VerifyPartitionsInTxn(ctx, dead, "tx", 7, 1, []cluster.TopicPartition{tp(0)}); !errors.Is(err, cluster.ErrBrokerNotAvailable) {
		t.Fatalf("unreachable: %v", err)
	}
	if _, err := cl.WriteTxnMarkers(ctx, dead, nil); !errors.Is(err, cluster.ErrBrokerNotAvailable) {
		t.Fatalf("unreachable markers: %v", err)
	}
}

// txnSeeds are filled requests of every transaction key at every served
// version, for the fuzz corpus and TestTxnSeedsAnswered.
func txnSeeds() []kmsg.Request {
	var out []kmsg.Request
	for v := int16(0); v <= 4; v++ {
		r := kmsg.NewPtrInitProducerIDRequest()
		r.Version, r.TransactionalID, r.TransactionTimeoutMillis = v, kmsg.StringPtr("tx"), 60000
		if v >= 3 {
			r.ProducerID, r.ProducerEpoch = 5, 1
		}
		out = append(out, r)
	}
	for v := int16(0); v <= 3; v++ {
		out = append(out, addPartitionsV3(v, "tx", map[string][]int32{"t": {0, 1}, "u": {2}}))
	}
	v4 := kmsg.NewPtrAddPartitionsToTxnRequest()
	v4.Version = 4
	v4.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{{TransactionalID: "tx", ProducerID: 5, ProducerEpoch: 1, VerifyOnly: true,
		Topics: []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: "t", Partitions: []int32{0}}}}}
	out = append(out, v4)
	for v := int16(0); v <= 3; v++ {
		ao := kmsg.NewPtrAddOffsetsToTxnRequest()
		ao.Version, ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = v, "tx", 5, 1, "g"
		et := kmsg.NewPtrEndTxnRequest()
		et.Version, et.TransactionalID, et.ProducerID, et.ProducerEpoch, et.Commit = v, "tx", 5, 1, true
		tc := kmsg.NewPtrTxnOffsetCommitRequest()
		tc.Version, tc.TransactionalID, tc.Group, tc.ProducerID, tc.ProducerEpoch = v, "tx", "g", 5, 1
		tc.Generation, tc.MemberID, tc.InstanceID = 3, "m", kmsg.StringPtr("i")
		tc.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 9, LeaderEpoch: 2, Metadata: kmsg.StringPtr("m")}}}}
		out = append(out, ao, et, tc)
	}
	for v := int16(0); v <= 1; v++ {
		wm := writeMarkers(5, true, cluster.TopicPartition{Topic: "t", Partition: 0}, cluster.TopicPartition{Topic: group.Topic, Partition: 1})
		wm.Version = v
		out = append(out, wm)
	}
	dp := kmsg.NewPtrDescribeProducersRequest()
	dp.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "t", Partitions: []int32{0, 1}}}
	dt := kmsg.NewPtrDescribeTransactionsRequest()
	dt.TransactionalIDs = []string{"tx", "other"}
	lt := kmsg.NewPtrListTransactionsRequest()
	lt.StateFilters, lt.ProducerIDFilters = []string{"Ongoing"}, []int64{5}
	pr := txnProduceRequest(kmsg.StringPtr("tx"), -1, "t", 5, 0)
	fr := fetchRequest(12, 0, 0, "t", 0, 0)
	fr.IsolationLevel = 1
	return append(out, dp, dt, lt, pr, fr)
}

// TestTxnSeedsAnswered sends every seed to a broker with the transaction
// fakes: each is answered at its version (no close, no panic).
func TestTxnSeedsAnswered(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "t", 2)
	createTopic(t, b, "u", 3)
	createTopic(t, b, group.Topic, 3)
	c := b.dial(t)
	for _, req := range txnSeeds() {
		resp := c.roundTrip(req)
		if resp.Key() != req.Key() || resp.GetVersion() != req.GetVersion() {
			t.Fatalf("key %d v%d answered as key %d v%d", req.Key(), req.GetVersion(), resp.Key(), resp.GetVersion())
		}
	}
}

// TestKgoTransactionalProducer runs kgo's transactional producer against
// the fakes: FindCoordinator key type 1, InitProducerId with the id,
// AddPartitionsToTxn, verified produce, AddOffsetsToTxn, TxnOffsetCommit
// and EndTxn at the versions kgo picks from our ApiVersions.
func TestKgoTransactionalProducer(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "t", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := newClient(t, b, kgo.TransactionalID("kgo-tx"), kgo.DefaultProduceTopic("t"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for round, commit := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for p := int32(0); p < 2; p++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte(fmt.Sprint(round))}).FirstErr(); err != nil {
				t.Fatalf("round %d produce: %v", round, err)
			}
		}
		if err := cl.EndTransaction(ctx, commit); err != nil {
			t.Fatalf("round %d end: %v", round, err)
		}
	}
	b.txn.mu.Lock()
	defer b.txn.mu.Unlock()
	if len(b.txn.inits) != 1 || b.txn.inits[0].TransactionalID != "kgo-tx" {
		t.Errorf("inits %+v", b.txn.inits)
	}
	if len(b.txn.added["kgo-tx"]) != 2 || !reflect.DeepEqual(b.txn.ends, []fakeEnd{{"kgo-tx", true}, {"kgo-tx", false}}) {
		t.Errorf("added %v, ends %+v", b.txn.added, b.txn.ends)
	}
	if len(b.txn.verifyCalls) == 0 {
		t.Error("the transactional batches were never verified")
	}
}
