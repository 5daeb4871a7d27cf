package protocol

import (
	"context"
	"fmt"
	"sync"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/group"
	"github.com/kafkazk/broker/internal/recordcodec"
	"github.com/kafkazk/broker/partition"
	"github.com/kafkazk/broker/txn"
)

// testTxnPartitions is transaction.state.log.num.partitions of test
// brokers.
const testTxnPartitions = 3

// makeTxnBatch is makeBatch with the producer's id, epoch and base
// sequence set and, when transactional, attribute bit 0x10.
func makeTxnBatch(transactional bool, producerID int64, producerEpoch int16, baseSequence int32, values ...string) []byte {
	b := recordcodec.NewBatch(0)
	for i, v := range values {
		b.Records = append(b.Records, recordcodec.Record{Value: []byte(v), TimestampDelta: int64(i)})
	}
	if transactional {
		b.Attributes = 0x10
	}
	b.ProducerID, b.ProducerEpoch, b.BaseSequence = producerID, producerEpoch, baseSequence
	return recordcodec.MustBatch(b)
}

// fakeTxnReplicas adds the TxnPartitions capability to fakeReplicas with
// the rules that matter to protocol: a guard is needed until the producer
// has an ongoing transaction on the partition, an append must carry the
// stored guard, and a marker ends the transaction and clears the guard.
// A marker is appended as a batch, so the high watermark (and
// fakeReplicas.holdHW) decides when it is committed.
type fakeTxnReplicas struct {
	*fakeReplicas

	tmu         sync.Mutex
	ongoing     map[cluster.TopicPartition]map[int64]bool
	guards      map[cluster.TopicPartition]map[int64]uint64
	nextGuard   uint64
	guardErr    map[cluster.TopicPartition]error
	guardCalls  []cluster.TopicPartition
	markerErr   map[cluster.TopicPartition]error
	markers     []fakeMarkerCall
	appends     []fakeAppendWith
	producers   map[cluster.TopicPartition][]partition.ProducerInfo
	describeErr map[cluster.TopicPartition]error
	// verificationOff starts a transaction without a guard, as the
	// replica does with transaction.partition.verification.enable=false.
	verificationOff bool
}

type fakeMarkerCall struct {
	tp     cluster.TopicPartition
	marker partition.TxnMarker
}

type fakeAppendWith struct {
	tp   cluster.TopicPartition
	opts partition.AppendOptions
}

func newFakeTxnReplicas(r *fakeReplicas) *fakeTxnReplicas {
	return &fakeTxnReplicas{fakeReplicas: r,
		ongoing:     map[cluster.TopicPartition]map[int64]bool{},
		guards:      map[cluster.TopicPartition]map[int64]uint64{},
		guardErr:    map[cluster.TopicPartition]error{},
		markerErr:   map[cluster.TopicPartition]error{},
		producers:   map[cluster.TopicPartition][]partition.ProducerInfo{},
		describeErr: map[cluster.TopicPartition]error{},
	}
}

var _ TxnPartitions = (*fakeTxnReplicas)(nil)

func (f *fakeTxnReplicas) exists(tp cluster.TopicPartition) bool {
	f.fakeReplicas.mu.Lock()
	defer f.fakeReplicas.mu.Unlock()
	return f.parts[tp] != nil
}

func (f *fakeTxnReplicas) WriteTxnMarker(tp cluster.TopicPartition, mk partition.TxnMarker) (partition.AppendResult, error) {
	f.tmu.Lock()
	f.markers = append(f.markers, fakeMarkerCall{tp, mk})
	err := f.markerErr[tp]
	if err == nil && f.exists(tp) {
		delete(f.ongoing[tp], mk.ProducerID)
		delete(f.guards[tp], mk.ProducerID)
	}
	f.tmu.Unlock()
	if err != nil {
		return partition.AppendResult{}, err
	}
	return f.fakeReplicas.Append(tp, makeTxnBatch(true, mk.ProducerID, mk.ProducerEpoch, -1, "marker"), -1)
}

func (f *fakeTxnReplicas) AppendWith(tp cluster.TopicPartition, records []byte, opts partition.AppendOptions) (partition.AppendResult, error) {
	bp := scanBatches(records)
	f.tmu.Lock()
	f.appends = append(f.appends, fakeAppendWith{tp, opts})
	if bp.transactional && f.exists(tp) && !f.ongoing[tp][bp.producerID] {
		if !f.verificationOff && (opts.VerificationGuard == 0 || opts.VerificationGuard != f.guards[tp][bp.producerID]) {
			f.tmu.Unlock()
			return partition.AppendResult{}, fmt.Errorf("append to %s: %w", tp, partition.ErrInvalidTxnState)
		}
		if f.ongoing[tp] == nil {
			f.ongoing[tp] = map[int64]bool{}
		}
		f.ongoing[tp][bp.producerID] = true
	}
	f.tmu.Unlock()
	return f.fakeReplicas.Append(tp, records, opts.Acks)
}

func (f *fakeTxnReplicas) TxnVerificationGuard(tp cluster.TopicPartition, producerID int64) (uint64, bool, error) {
	f.tmu.Lock()
	defer f.tmu.Unlock()
	f.guardCalls = append(f.guardCalls, tp)
	if err := f.guardErr[tp]; err != nil {
		return 0, false, err
	}
	if !f.exists(tp) {
		return 0, false, fmt.Errorf("guard for %s: %w", tp, partition.ErrUnknownTopicOrPartition)
	}
	if f.ongoing[tp][producerID] {
		return 0, false, nil
	}
	f.nextGuard++
	if f.guards[tp] == nil {
		f.guards[tp] = map[int64]uint64{}
	}
	f.guards[tp][producerID] = f.nextGuard
	return f.nextGuard, true, nil
}

func (f *fakeTxnReplicas) DescribeProducers(tp cluster.TopicPartition) ([]partition.ProducerInfo, error) {
	f.tmu.Lock()
	defer f.tmu.Unlock()
	if err := f.describeErr[tp]; err != nil {
		return nil, err
	}
	if !f.exists(tp) {
		return nil, fmt.Errorf("describe producers of %s: %w", tp, partition.ErrUnknownTopicOrPartition)
	}
	return f.producers[tp], nil
}

func (f *fakeTxnReplicas) markerCalls() []fakeMarkerCall {
	f.tmu.Lock()
	defer f.tmu.Unlock()
	return append([]fakeMarkerCall(nil), f.markers...)
}

func (f *fakeTxnReplicas) appendCalls() []fakeAppendWith {
	f.tmu.Lock()
	defer f.tmu.Unlock()
	return append([]fakeAppendWith(nil), f.appends...)
}

// fakeTxn is a Transactions that keeps, per transactional id, the
// partitions added, and answers VerifyPartitions from them as the real
// coordinator does. Each call is recorded; the *Err fields fail calls.
type fakeTxn struct {
	mu sync.Mutex

	inits   []txn.InitRequest
	initErr error
	nextPID int64

	added        map[string]map[cluster.TopicPartition]bool
	addErr       error
	addPartErrs  map[cluster.TopicPartition]error
	addCalls     int
	verifyCalls  []fakeVerifyCall
	verifyErr    error
	onVerify     func() // runs inside VerifyPartitions, before it answers
	offsets      []string
	offsetsErr   error
	ends         []fakeEnd
	endErr       error
	listCalls    [][]string
	listing      []txn.Listing
	listErr      error
	descriptions map[string]txn.Description
}

type fakeVerifyCall struct {
	id    string
	pid   int64
	epoch int16
	tps   []cluster.TopicPartition
}

type fakeEnd struct {
	id     string
	commit bool
}

func newFakeTxn() *fakeTxn {
	return &fakeTxn{nextPID: 5000, added: map[string]map[cluster.TopicPartition]bool{},
		addPartErrs: map[cluster.TopicPartition]error{}, descriptions: map[string]txn.Description{}}
}

var _ Transactions = (*fakeTxn)(nil)

func (f *fakeTxn) PartitionFor(id string) int32 { return txn.PartitionFor(id, testTxnPartitions) }

func (f *fakeTxn) InitProducerID(_ context.Context, req txn.InitRequest) (int64, int16, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inits = append(f.inits, req)
	if f.initErr != nil {
		return -1, -1, f.initErr
	}
	f.nextPID++
	return f.nextPID, 0, nil
}

func (f *fakeTxn) AddPartitions(_ context.Context, id string, _ int64, _ int16, tps []cluster.TopicPartition) (map[cluster.TopicPartition]error, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.addCalls++
	if f.addErr != nil {
		return nil, f.addErr
	}
	errs := map[cluster.TopicPartition]error{}
	for _, tp := range tps {
		if err := f.addPartErrs[tp]; err != nil {
			errs[tp] = err
			continue
		}
		if f.added[id] == nil {
			f.added[id] = map[cluster.TopicPartition]bool{}
		}
		f.added[id][tp] = true
	}
	return errs, nil
}

func (f *fakeTxn) VerifyPartitions(_ context.Context, id string, pid int64, epoch int16, tps []cluster.TopicPartition) (map[cluster.TopicPartition]error, error) {
	f.mu.Lock()
	f.verifyCalls = append(f.verifyCalls, fakeVerifyCall{id, pid, epoch, append([]cluster.TopicPartition(nil), tps...)})
	hook := f.onVerify
	f.mu.Unlock()
	if hook != nil {
		hook()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.verifyErr != nil {
		return nil, f.verifyErr
	}
	errs := map[cluster.TopicPartition]error{}
	for _, tp := range tps {
		if !f.added[id][tp] {
			errs[tp] = fmt.Errorf("%s not in the transaction of %s: %w", tp, id, txn.ErrInvalidTxnState)
		}
	}
	return errs, nil
}

func (f *fakeTxn) AddOffsets(_ context.Context, id string, _ int64, _ int16, groupID string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.offsets = append(f.offsets, id+"/"+groupID)
	return f.offsetsErr
}

func (f *fakeTxn) EndTxn(_ context.Context, id string, _ int64, _ int16, commit bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ends = append(f.ends, fakeEnd{id, commit})
	return f.endErr
}

func (f *fakeTxn) ListTransactions(states []string, _ []int64) ([]txn.Listing, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listCalls = append(f.listCalls, states)
	if f.listErr != nil {
		return nil, f.listErr
	}
	var out []txn.Listing
	for _, l := range f.listing {
		match := len(states) == 0
		for _, s := range states {
			match = match || s == l.State
		}
		if match {
			out = append(out, l)
		}
	}
	return out, nil
}

func (f *fakeTxn) DescribeTransactions(ids []string) []txn.Description {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []txn.Description
	for _, id := range ids {
		if d, ok := f.descriptions[id]; ok {
			out = append(out, d)
		}
	}
	return out
}

func (f *fakeTxn) verifications() []fakeVerifyCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeVerifyCall(nil), f.verifyCalls...)
}

// fakeTxnGroups is the real group coordinator of the test broker with the
// TxnGroups capability faked: CommitTxnOffsets records the request and
// answers from commitErr; CompleteTxn records the call and, when
// checkCommitted is set, whether the marker was committed then.
type fakeTxnGroups struct {
	*group.Coordinator

	mu             sync.Mutex
	commits        []group.TxnCommitRequest
	commitErr      error
	commitPartErrs map[cluster.TopicPartition]error
	completes      []fakeComplete
	checkCommitted func(p int32) bool
}

type fakeComplete struct {
	partition    int32
	producerID   int64
	markerOffset int64
	commit       bool
	committed    bool // the marker was below the HW when CompleteTxn ran
}

var _ TxnGroups = (*fakeTxnGroups)(nil)

func (f *fakeTxnGroups) CommitTxnOffsets(_ context.Context, req group.TxnCommitRequest) (map[cluster.TopicPartition]error, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.commits = append(f.commits, req)
	return f.commitPartErrs, f.commitErr
}

func (f *fakeTxnGroups) CompleteTxn(p int32, producerID int64, markerOffset int64, commit bool) {
	c := fakeComplete{partition: p, producerID: producerID, markerOffset: markerOffset, commit: commit}
	if f.checkCommitted != nil {
		c.committed = f.checkCommitted(p)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.completes = append(f.completes, c)
}

func (f *fakeTxnGroups) completed() []fakeComplete {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeComplete(nil), f.completes...)
}

// fakeVerifier is a TxnVerifier standing for the coordinator on another
// broker: it records each call and answers with answer (per partition)
// or err.
type fakeVerifier struct {
	mu     sync.Mutex
	calls  []fakeRemoteVerify
	answer map[cluster.TopicPartition]error
	err    error
}

type fakeRemoteVerify struct {
	to  int32
	id  string
	tps []cluster.TopicPartition
}

func (f *fakeVerifier) VerifyPartitionsInTxn(_ context.Context, to cluster.Broker, id string, _ int64, _ int16, tps []cluster.TopicPartition) (map[cluster.TopicPartition]error, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fakeRemoteVerify{to.ID, id, append([]cluster.TopicPartition(nil), tps...)})
	return f.answer, f.err
}

func (f *fakeVerifier) remoteCalls() []fakeRemoteVerify {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeRemoteVerify(nil), f.calls...)
}

// setTxnLeader puts __transaction_state in the fake metadata with every
// partition led by broker leader (added to the live brokers if new).
func (c *fakeCluster) setTxnLeader(leader int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	known := false
	for _, b := range c.brokers {
		known = known || b.ID == leader
	}
	if !known {
		c.brokers = append(c.brokers, cluster.Broker{ID: leader, Endpoints: []cluster.Endpoint{
			{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: "broker.invalid", Port: 9092}}})
	}
	info := cluster.TopicInfo{Name: txn.Topic}
	for p := int32(0); p < testTxnPartitions; p++ {
		info.Partitions = append(info.Partitions, cluster.PartitionInfo{Partition: p, Replicas: []int32{leader},
			State: cluster.LeaderAndIsr{Leader: leader, Isr: []int32{leader}}})
	}
	c.topics[txn.Topic] = info
}
