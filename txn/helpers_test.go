package txn

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
)

// fakeClock is a manual clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.t
}

func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	f.t = f.t.Add(d)
	f.mu.Unlock()
}

// logRecord is one record appended to the fake log.
type logRecord struct {
	offset     int64
	key, value []byte
	committed  bool // WaitCommitted returned nil for it
}

// fakeLog is an in-memory Log: every partition of Topic is one list of
// batches, with the high watermark at the log end (a failed wait leaves
// the records in, as a real log may). fail, if set, is asked before every
// call: op is "append" or "wait", n the number of Log calls of any kind so
// far (from 1).
type fakeLog struct {
	mu      sync.Mutex
	batches map[int32][][]byte
	records map[int32][]*logRecord
	leo     map[int32]int64
	calls   int
	fail    func(op string, n int) error
	// block, if set, makes a WaitCommitted signal on waiting and wait for
	// release (or its context).
	block   bool
	waiting chan struct{}
	release chan struct{}
	// readErr fails every Read while set.
	readErr error
}

func newFakeLog() *fakeLog {
	return &fakeLog{
		batches: make(map[int32][][]byte), records: make(map[int32][]*logRecord), leo: make(map[int32]int64),
		waiting: make(chan struct{}, 16), release: make(chan struct{}, 16),
	}
}

func (f *fakeLog) Append(tp cluster.TopicPartition, records []byte, acks int16) (partition.AppendResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if tp.Topic != Topic || acks != -1 {
		return partition.AppendResult{}, fmt.Errorf("fake log: append to %s with acks %d", tp, acks)
	}
	if f.fail != nil {
		if err := f.fail("append", f.calls); err != nil {
			return partition.AppendResult{}, err
		}
	}
	p := tp.Partition
	base := f.leo[p]
	b := append([]byte(nil), records...)
	binary.BigEndian.PutUint64(b[0:8], uint64(base))
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(b); err != nil {
		return partition.AppendResult{}, fmt.Errorf("fake log: %w", err)
	}
	if _, err := parseBatches(b, func(off int64, k, v []byte) {
		f.records[p] = append(f.records[p], &logRecord{offset: off, key: k, value: v})
	}); err != nil {
		return partition.AppendResult{}, fmt.Errorf("fake log: %w", err)
	}
	f.batches[p] = append(f.batches[p], b)
	last := base + int64(rb.LastOffsetDelta)
	f.leo[p] = last + 1
	return partition.AppendResult{BaseOffset: base, LastOffset: last, LeaderEpoch: 1}, nil
}

func (f *fakeLog) WaitCommitted(ctx context.Context, tp cluster.TopicPartition, lastOffset int64, leaderEpoch int32) error {
	f.mu.Lock()
	f.calls++
	var err error
	if f.fail != nil {
		err = f.fail("wait", f.calls)
	}
	block := f.block
	f.mu.Unlock()
	if block {
		f.waiting <- struct{}{}
		select {
		case <-f.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.records[tp.Partition] {
		if r.offset <= lastOffset {
			r.committed = true
		}
	}
	return nil
}

func (f *fakeLog) Read(tp cluster.TopicPartition, req partition.ReadRequest) (partition.ReadResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.readErr != nil {
		return partition.ReadResult{}, f.readErr
	}
	var out []byte
	for _, b := range f.batches[tp.Partition] {
		base := int64(binary.BigEndian.Uint64(b[0:8]))
		var rb kmsg.RecordBatch
		_ = rb.ReadFrom(b)
		if base+int64(rb.LastOffsetDelta) >= req.FetchOffset {
			out = append(out, b...)
		}
	}
	return partition.ReadResult{Records: out, HighWatermark: f.leo[tp.Partition]}, nil
}

func (f *fakeLog) LogEndOffset(tp cluster.TopicPartition) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leo[tp.Partition], nil
}

// appendRaw puts a batch of hand-made records into partition p.
func (f *fakeLog) appendRaw(t *testing.T, p int32, recs []kv) {
	t.Helper()
	if _, err := f.Append(cluster.TopicPartition{Topic: Topic, Partition: p}, encodeBatch(recs, 0), -1); err != nil {
		t.Fatal(err)
	}
}

// decoded is a record of the fake log, decoded.
type decoded struct {
	offset    int64
	id        string
	value     *kmsg.TxnMetadataValue // nil: tombstone
	committed bool
}

func (f *fakeLog) decoded(t *testing.T, p int32) []decoded {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []decoded
	for _, r := range f.records[p] {
		var k kmsg.TxnMetadataKey
		if err := k.ReadFrom(r.key); err != nil {
			t.Fatalf("key at %d: %v", r.offset, err)
		}
		d := decoded{offset: r.offset, id: k.TransactionalID, committed: r.committed}
		if r.value != nil {
			var v kmsg.TxnMetadataValue
			if err := v.ReadFrom(r.value); err != nil {
				t.Fatalf("value at %d: %v", r.offset, err)
			}
			d.value = &v
		}
		out = append(out, d)
	}
	return out
}

// lastCommitted is the last committed record of id, or nil.
func (f *fakeLog) lastCommitted(t *testing.T, p int32, id string) *decoded {
	t.Helper()
	var last *decoded
	for _, d := range f.decoded(t, p) {
		if d.id == id && d.committed {
			d := d
			last = &d
		}
	}
	return last
}

// fakePIDs allocates producer ids from next.
type fakePIDs struct {
	mu   sync.Mutex
	next int64
	err  error
	n    int
}

func (f *fakePIDs) InitProducerID(ctx context.Context) (int64, int16, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	if f.err != nil {
		return -1, -1, f.err
	}
	pid := f.next
	f.next++
	return pid, 0, nil
}

// fakeMarkers records every WriteMarkers; fail decides the error of each
// partition of each call (nil: written).
type fakeMarkers struct {
	mu    sync.Mutex
	calls []Markers
	fail  func(call int, tp cluster.TopicPartition) error
	// block, if set, makes a call signal on waiting and wait for release.
	block   bool
	waiting chan struct{}
	release chan struct{}
}

func newFakeMarkers() *fakeMarkers {
	return &fakeMarkers{waiting: make(chan struct{}, 16), release: make(chan struct{}, 16)}
}

func (f *fakeMarkers) WriteMarkers(ctx context.Context, m Markers) map[cluster.TopicPartition]error {
	f.mu.Lock()
	m.Partitions = append([]cluster.TopicPartition(nil), m.Partitions...)
	f.calls = append(f.calls, m)
	call := len(f.calls)
	fail, block := f.fail, f.block
	f.mu.Unlock()
	out := make(map[cluster.TopicPartition]error)
	if block {
		f.waiting <- struct{}{}
		select {
		case <-f.release:
		case <-ctx.Done():
			for _, tp := range m.Partitions {
				out[tp] = ctx.Err()
			}
			return out
		}
	}
	for _, tp := range m.Partitions {
		if fail != nil {
			if err := fail(call, tp); err != nil {
				out[tp] = err
			}
		}
	}
	return out
}

func (f *fakeMarkers) Calls() []Markers {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Markers(nil), f.calls...)
}

// harness is a coordinator over fakes leading every partition of Topic.
type harness struct {
	t       *testing.T
	c       *Coordinator
	log     *fakeLog
	pids    *fakePIDs
	markers *fakeMarkers
	clock   *fakeClock
	sleeps  []time.Duration
	loaded  chan int32
	mu      sync.Mutex
}

const (
	testPartitions  = 3
	testLeaderEpoch = 5
)

func newHarness(t *testing.T) *harness {
	h := newHarnessOn(t, newFakeLog(), &fakeClock{t: time.UnixMilli(1_700_000_000_000)})
	h.lead(testLeaderEpoch)
	return h
}

// newHarnessOn builds a coordinator over log and clock that leads nothing yet.
func newHarnessOn(t *testing.T, log *fakeLog, clock *fakeClock) *harness {
	t.Helper()
	h := &harness{t: t, log: log, pids: &fakePIDs{next: 1000}, markers: newFakeMarkers(), clock: clock, loaded: make(chan int32, 64)}
	h.c = New(Config{
		BrokerID:               1,
		NumPartitions:          testPartitions,
		OffsetsTopicPartitions: 50,
		MaxTimeout:             15 * time.Minute,
		IDExpiration:           7 * 24 * time.Hour,
		AbortTimedOutInterval:  10 * time.Second,
		RemoveExpiredInterval:  time.Hour,
		WriteTimeout:           5 * time.Second,
		Now:                    clock.Now,
		Log:                    log,
		ProducerIDs:            h.pids,
		Markers:                h.markers,
		Logger:                 zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
	})
	h.c.sleep = func(ctx context.Context, d time.Duration) bool {
		h.mu.Lock()
		h.sleeps = append(h.sleeps, d)
		h.mu.Unlock()
		return ctx.Err() == nil
	}
	h.c.onLoaded = func(p int32) { h.loaded <- p }
	t.Cleanup(func() { h.c.Close() })
	return h
}

// lead makes the coordinator leader of every partition and waits for the
// loads.
func (h *harness) lead(epoch int32) {
	h.t.Helper()
	for p := int32(0); p < testPartitions; p++ {
		h.c.OnBecomeLeader(p, epoch)
	}
	for i := 0; i < testPartitions; i++ {
		select {
		case <-h.loaded:
		case <-time.After(10 * time.Second):
			h.t.Fatal("partitions not loaded")
		}
	}
}

// idle waits for every marker fan-out to end. It may run while fan-outs
// start (the coordinator's counter allows that, a WaitGroup would not).
func (h *harness) idle() { h.c.markers.wait() }

func (h *harness) init(id string, timeoutMs int32) (int64, int16) {
	h.t.Helper()
	pid, epoch, err := h.c.InitProducerID(context.Background(), InitRequest{TransactionalID: id, TransactionTimeoutMs: timeoutMs, ProducerID: -1, ProducerEpoch: -1})
	if err != nil {
		h.t.Fatalf("InitProducerID(%q): %v", id, err)
	}
	return pid, epoch
}

func (h *harness) add(id string, pid int64, epoch int16, tps ...cluster.TopicPartition) {
	h.t.Helper()
	if _, err := h.c.AddPartitions(context.Background(), id, pid, epoch, tps); err != nil {
		h.t.Fatalf("AddPartitions(%q): %v", id, err)
	}
}

func (h *harness) describe(id string) Description {
	h.t.Helper()
	return h.c.DescribeTransactions([]string{id})[0]
}

func (h *harness) wantState(id, state string) Description {
	h.t.Helper()
	d := h.describe(id)
	if d.Err != nil || d.State != state {
		h.t.Fatalf("%q: state %q err %v, want %q", id, d.State, d.Err, state)
	}
	return d
}

// records returns id's records in its partition, decoded.
func (h *harness) records(id string) []decoded {
	h.t.Helper()
	var out []decoded
	for _, d := range h.log.decoded(h.t, PartitionFor(id, testPartitions)) {
		if d.id == id {
			out = append(out, d)
		}
	}
	return out
}

// states lists the states of id's records in the log ("-" a tombstone).
func (h *harness) states(id string) []string {
	var out []string
	for _, d := range h.records(id) {
		if d.value == nil {
			out = append(out, "-")
		} else {
			out = append(out, txnState(d.value.State).String())
		}
	}
	return out
}

func tp(topic string, p int32) cluster.TopicPartition {
	return cluster.TopicPartition{Topic: topic, Partition: p}
}

func sortedTPs(tps []cluster.TopicPartition) []cluster.TopicPartition {
	out := append([]cluster.TopicPartition(nil), tps...)
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}
