package protocol

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
)

// fakeReplicas keeps record batches in memory per partition. It assigns
// offsets by rewriting each batch's 8-byte base offset, moves the high
// watermark to the log end offset on every append unless told to hold it
// back, and signals Changed on every move.
type fakeReplicas struct {
	mu      sync.Mutex
	parts   map[cluster.TopicPartition]*fakeLog
	holdHW  bool
	changed chan struct{}
	// panicTopic makes Read panic for that topic, to test recovery.
	panicTopic string
	// readErr makes Read of a partition fail with that error.
	readErr map[cluster.TopicPartition]error
	// appendErr makes Append to a partition fail with that error.
	appendErr map[cluster.TopicPartition]error
	// reads records every Read's partition and request.
	reads []fakeRead
	// lagging makes ListOffset answer a consumer's latest with
	// ErrOffsetNotAvailable, as a new leader whose HW lags its epoch does.
	lagging bool
	// askers records who each ListOffset call was for.
	askers []partition.OffsetsAsker
	// lso overrides a partition's last stable offset (else the HW);
	// aborted are the aborted transactions a read_committed read returns.
	lso     map[cluster.TopicPartition]int64
	aborted map[cluster.TopicPartition][]partition.AbortedTransaction
}

type fakeRead struct {
	tp  cluster.TopicPartition
	req partition.ReadRequest
}

type fakeBatch struct {
	base, last, maxTimestamp int64
	data                     []byte
}

type fakeLog struct {
	batches []fakeBatch
	leo, hw int64
	start   int64 // log start offset, reported only
}

func newFakeReplicas() *fakeReplicas {
	return &fakeReplicas{parts: map[cluster.TopicPartition]*fakeLog{}, changed: make(chan struct{})}
}

func (f *fakeReplicas) addPartition(tp cluster.TopicPartition) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.parts[tp] == nil {
		f.parts[tp] = &fakeLog{}
	}
}

func (f *fakeReplicas) removeTopic(topic string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for tp := range f.parts {
		if tp.Topic == topic {
			delete(f.parts, tp)
		}
	}
}

// signalLocked wakes everyone waiting on Changed. Caller holds f.mu.
func (f *fakeReplicas) signalLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// setHoldHW holds the high watermark back (true) or releases it to the
// log end offset (false).
func (f *fakeReplicas) setHoldHW(hold bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.holdHW = hold
	if !hold {
		for _, l := range f.parts {
			l.hw = l.leo
		}
		f.signalLocked()
	}
}

func (f *fakeReplicas) Append(tp cluster.TopicPartition, records []byte, acks int16) (partition.AppendResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.parts[tp]
	if l == nil {
		return partition.AppendResult{}, fmt.Errorf("append %s: %w", tp, partition.ErrUnknownTopicOrPartition)
	}
	if err := f.appendErr[tp]; err != nil {
		return partition.AppendResult{}, err
	}
	if len(records) == 0 {
		return partition.AppendResult{}, fmt.Errorf("append %s: no batches: %w", tp, partition.ErrInvalidRecord)
	}
	var batches []fakeBatch
	next := l.leo
	for rest := records; len(rest) > 0; {
		if len(rest) < 61 {
			return partition.AppendResult{}, partition.ErrCorruptMessage
		}
		size := 12 + int(int32(binary.BigEndian.Uint32(rest[8:12])))
		if size < 61 || size > len(rest) {
			return partition.AppendResult{}, partition.ErrCorruptMessage
		}
		if rest[16] != 2 {
			return partition.AppendResult{}, partition.ErrInvalidRecord
		}
		data := append([]byte(nil), rest[:size]...)
		delta := int64(int32(binary.BigEndian.Uint32(data[23:27])))
		binary.BigEndian.PutUint64(data[0:8], uint64(next))
		b := fakeBatch{base: next, last: next + delta, maxTimestamp: int64(binary.BigEndian.Uint64(data[35:43])), data: data}
		batches = append(batches, b)
		next = b.last + 1
		rest = rest[size:]
	}
	base := l.leo
	l.batches = append(l.batches, batches...)
	l.leo = next
	if !f.holdHW {
		l.hw = l.leo
	}
	f.signalLocked()
	return partition.AppendResult{BaseOffset: base, LastOffset: next - 1, LogAppendTime: -1, LogStartOffset: 0}, nil
}

func (f *fakeReplicas) WaitCommitted(ctx context.Context, tp cluster.TopicPartition, lastOffset int64, _ int32) error {
	for {
		f.mu.Lock()
		l := f.parts[tp]
		if l == nil {
			f.mu.Unlock()
			return partition.ErrNotLeader
		}
		if l.hw > lastOffset {
			f.mu.Unlock()
			return nil
		}
		ch := f.changed
		f.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return partition.ErrRequestTimedOut
		}
	}
}

func (f *fakeReplicas) Read(tp cluster.TopicPartition, req partition.ReadRequest) (partition.ReadResult, error) {
	if tp.Topic == f.panicTopic && tp.Topic != "" {
		panic("fake read panic")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads = append(f.reads, fakeRead{tp, req})
	if err := f.readErr[tp]; err != nil {
		return partition.ReadResult{}, err
	}
	l := f.parts[tp]
	if l == nil {
		return partition.ReadResult{}, partition.ErrUnknownTopicOrPartition
	}
	if req.FetchOffset < 0 || req.FetchOffset > l.leo {
		return partition.ReadResult{}, partition.ErrOffsetOutOfRange
	}
	limit := l.hw
	if req.ReplicaID >= 0 {
		limit = l.leo
	}
	var out []byte
	for _, b := range l.batches {
		if b.last < req.FetchOffset || b.last >= limit {
			continue
		}
		if len(out) > 0 && len(out)+len(b.data) > int(req.MaxBytes) {
			break
		}
		out = append(out, b.data...)
	}
	res := partition.ReadResult{Records: out, HighWatermark: l.hw, LastStableOffset: l.hw, LogStartOffset: l.start}
	if lso, ok := f.lso[tp]; ok {
		res.LastStableOffset = lso
	}
	if req.IsolationLevel == 1 {
		res.AbortedTransactions = f.aborted[tp]
	}
	return res, nil
}

func (f *fakeReplicas) ListOffset(tp cluster.TopicPartition, timestamp int64, _ int32, asker partition.OffsetsAsker) (int64, int64, int32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.askers = append(f.askers, asker)
	l := f.parts[tp]
	if l == nil {
		return 0, 0, 0, partition.ErrUnknownTopicOrPartition
	}
	switch timestamp {
	case partition.LatestTimestamp:
		if f.lagging && asker == partition.AskerConsumer {
			return 0, 0, 0, partition.ErrOffsetNotAvailable
		}
		return l.hw, -1, 0, nil
	case partition.EarliestTimestamp:
		return l.start, -1, 0, nil
	}
	for _, b := range l.batches {
		if b.maxTimestamp >= timestamp && b.last < l.hw {
			return b.base, b.maxTimestamp, 0, nil
		}
	}
	return -1, -1, -1, nil
}

func (f *fakeReplicas) Changed(bool) <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

// fakeCluster is Metadata (with PartitionLookup), Admin and ProducerIDs
// over an in-memory topic map. Every partition is led by the first broker.
type fakeCluster struct {
	mu       sync.Mutex
	brokers  []cluster.Broker
	topics   map[string]cluster.TopicInfo
	replicas *fakeReplicas
	nextPID  int64
	// hideNew keeps newly created topics out of the metadata until
	// reveal, like a broker whose metadata cache lags the controller.
	hideNew bool
	hidden  map[string]cluster.TopicInfo
	// static are the broker keys "set in server.properties", with
	// defaults the topic defaults they give (DefaultLogConfig if unset).
	static   map[string]string
	defaults *cluster.LogConfig
	// control is the controller's admin operations (ClusterControl).
	control fakeControl
}

func newFakeCluster(r *fakeReplicas, brokers ...cluster.Broker) *fakeCluster {
	return &fakeCluster{brokers: brokers, topics: map[string]cluster.TopicInfo{}, hidden: map[string]cluster.TopicInfo{}, replicas: r, nextPID: 1000}
}

func (c *fakeCluster) ClusterID() string   { return "fake-cluster" }
func (c *fakeCluster) ControllerID() int32 { return c.brokers[0].ID }
func (c *fakeCluster) Brokers() []cluster.Broker {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]cluster.Broker(nil), c.brokers...)
}

func (c *fakeCluster) Topics() []cluster.TopicInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]cluster.TopicInfo, 0, len(c.topics))
	for _, t := range c.topics {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (c *fakeCluster) Topic(name string) (cluster.TopicInfo, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.topics[name]
	return t, ok
}

func (c *fakeCluster) HasPartition(tp cluster.TopicPartition) (topicExists, partitionExists bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.topics[tp.Topic]
	return ok, ok && hasPartition(t, tp.Partition)
}

func (c *fakeCluster) reveal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for n, t := range c.hidden {
		c.topics[n] = t
	}
	c.hidden = map[string]cluster.TopicInfo{}
}

func (c *fakeCluster) CreateTopic(_ context.Context, req CreateTopicRequest) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if req.Name == "" || len(req.Name) > 249 || strings.Trim(req.Name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != "" {
		return fmt.Errorf("create %q: %w", req.Name, cluster.ErrInvalidTopic)
	}
	if _, ok := c.topics[req.Name]; ok {
		return fmt.Errorf("create %q: %w", req.Name, cluster.ErrTopicExists)
	}
	if _, ok := c.hidden[req.Name]; ok {
		return fmt.Errorf("create %q: %w", req.Name, cluster.ErrTopicExists)
	}
	assignment := req.Assignment
	if assignment == nil {
		if req.NumPartitions < 1 {
			return cluster.ErrInvalidPartitions
		}
		if req.ReplicationFactor < 1 || int(req.ReplicationFactor) > len(c.brokers) {
			return fmt.Errorf("replication factor %d with %d brokers: %w", req.ReplicationFactor, len(c.brokers), cluster.ErrInvalidReplicationFactor)
		}
		assignment = map[int32][]int32{}
		for p := int32(0); p < req.NumPartitions; p++ {
			for r := int16(0); r < req.ReplicationFactor; r++ {
				assignment[p] = append(assignment[p], c.brokers[r].ID)
			}
		}
	}
	if _, err := cluster.DefaultLogConfig().WithOverrides(req.Configs); err != nil {
		return err
	}
	if req.ValidateOnly {
		return nil
	}
	info := cluster.TopicInfo{Name: req.Name, Config: req.Configs}
	for p := int32(0); p < int32(len(assignment)); p++ {
		replicas := assignment[p]
		info.Partitions = append(info.Partitions, cluster.PartitionInfo{
			Partition: p,
			Replicas:  replicas,
			State:     cluster.LeaderAndIsr{Leader: replicas[0], LeaderEpoch: 0, Isr: replicas, ZkVersion: 0},
		})
		c.replicas.addPartition(cluster.TopicPartition{Topic: req.Name, Partition: p})
	}
	if c.hideNew {
		c.hidden[req.Name] = info
	} else {
		c.topics[req.Name] = info
	}
	return nil
}

func (c *fakeCluster) DeleteTopic(_ context.Context, name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.topics[name]; !ok {
		return fmt.Errorf("delete %q: %w", name, cluster.ErrUnknownTopic)
	}
	delete(c.topics, name)
	c.replicas.removeTopic(name)
	return nil
}

func (c *fakeCluster) TopicConfig(name string) ([]cluster.ConfigEntry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.topics[name]
	if !ok {
		return nil, fmt.Errorf("config of %q: %w", name, cluster.ErrUnknownTopic)
	}
	defaults := cluster.DefaultLogConfig()
	if c.defaults != nil {
		defaults = *c.defaults
	}
	cfg, err := defaults.WithOverrides(t.Config)
	if err != nil {
		return nil, err
	}
	return cfg.Entries(t.Config, c.static), nil
}

func (c *fakeCluster) InitProducerID(context.Context) (int64, int16, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextPID++
	return c.nextPID, 0, nil
}

// fakeControlPlane records the controller requests it is given and
// answers with configured errors.
type fakeControlPlane struct {
	mu             sync.Mutex
	leaderAndIsr   []cluster.LeaderAndIsrRequest
	stopReplica    []cluster.StopReplicaRequest
	updateMetadata []cluster.UpdateMetadataRequest
	shutdowns      []fakeShutdown
	// partErrs are returned as per-partition errors; err fails every call.
	partErrs  map[cluster.TopicPartition]error
	err       error
	remaining []cluster.TopicPartition
}

type fakeShutdown struct {
	brokerID    int32
	brokerEpoch int64
}

func (f *fakeControlPlane) LeaderAndIsr(_ context.Context, req cluster.LeaderAndIsrRequest) (map[cluster.TopicPartition]error, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leaderAndIsr = append(f.leaderAndIsr, req)
	return f.partErrs, f.err
}

func (f *fakeControlPlane) StopReplica(_ context.Context, req cluster.StopReplicaRequest) (map[cluster.TopicPartition]error, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopReplica = append(f.stopReplica, req)
	return f.partErrs, f.err
}

func (f *fakeControlPlane) UpdateMetadata(_ context.Context, req cluster.UpdateMetadataRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.updateMetadata = append(f.updateMetadata, req)
	return f.err
}

func (f *fakeControlPlane) ControlledShutdown(_ context.Context, brokerID int32, brokerEpoch int64) ([]cluster.TopicPartition, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.shutdowns = append(f.shutdowns, fakeShutdown{brokerID, brokerEpoch})
	if f.err != nil {
		return nil, f.err
	}
	return f.remaining, nil
}

// set changes the configured answers.
func (f *fakeControlPlane) set(partErrs map[cluster.TopicPartition]error, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.partErrs, f.err = partErrs, err
}

// fakeLeaderEpochs answers OffsetForLeaderEpoch from a table; a partition
// not in it is unknown.
type fakeLeaderEpochs struct {
	mu      sync.Mutex
	answers map[cluster.TopicPartition]fakeEpochAnswer
	calls   []fakeEpochCall
}

type fakeEpochAnswer struct {
	epoch int32
	end   int64
	err   error
}

type fakeEpochCall struct {
	tp             cluster.TopicPartition
	current, asked int32
}

func (f *fakeLeaderEpochs) OffsetForLeaderEpoch(tp cluster.TopicPartition, current, leaderEpoch int32) (int32, int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fakeEpochCall{tp, current, leaderEpoch})
	a, ok := f.answers[tp]
	if !ok {
		return -1, -1, partition.ErrUnknownTopicOrPartition
	}
	return a.epoch, a.end, a.err
}
