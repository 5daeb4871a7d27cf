package group

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
)

// castagnoli is the CRC32C table, for tests that edit a batch.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// fakeLog is an in-memory Log: batches per partition, offsets assigned on
// append, the high watermark at the log end unless held back.
type fakeLog struct {
	mu      sync.Mutex
	batches map[cluster.TopicPartition][][]byte
	leo     map[cluster.TopicPartition]int64
	hw      map[cluster.TopicPartition]int64
	hold    bool
	failErr error // Append fails with it when set
	waitErr error // WaitCommitted fails with it when set
	// opts are the options of every AppendWith, in order.
	opts []partition.AppendOptions
	// leoCalls counts LogEndOffset calls (a load starts with one).
	leoCalls int
	changed  chan struct{}
	// gates hold back WaitCommitted of the appends ending at an offset
	// until closed, so tests can complete appends out of order.
	gates map[int64]chan struct{}
}

// gate holds back the wait for the append whose last offset is lastOffset
// until the returned function is called.
func (f *fakeLog) gate(lastOffset int64) (open func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gates == nil {
		f.gates = map[int64]chan struct{}{}
	}
	ch := make(chan struct{})
	f.gates[lastOffset] = ch
	return func() { close(ch) }
}

func newFakeLog() *fakeLog {
	return &fakeLog{batches: map[cluster.TopicPartition][][]byte{}, leo: map[cluster.TopicPartition]int64{},
		hw: map[cluster.TopicPartition]int64{}, changed: make(chan struct{})}
}

func (f *fakeLog) Append(tp cluster.TopicPartition, records []byte, acks int16) (partition.AppendResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failErr != nil {
		return partition.AppendResult{}, f.failErr
	}
	b := append([]byte(nil), records...)
	base := f.leo[tp]
	binary.BigEndian.PutUint64(b[0:8], uint64(base))
	last := base + int64(int32(binary.BigEndian.Uint32(b[23:27])))
	f.batches[tp] = append(f.batches[tp], b)
	f.leo[tp] = last + 1
	if !f.hold {
		f.hw[tp] = last + 1
	}
	close(f.changed)
	f.changed = make(chan struct{})
	return partition.AppendResult{BaseOffset: base, LastOffset: last}, nil
}

func (f *fakeLog) AppendWith(tp cluster.TopicPartition, records []byte, opts partition.AppendOptions) (partition.AppendResult, error) {
	f.mu.Lock()
	f.opts = append(f.opts, opts)
	f.mu.Unlock()
	return f.Append(tp, records, opts.Acks)
}

func (f *fakeLog) setHold(hold bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hold = hold
	if !hold {
		for tp, leo := range f.leo {
			f.hw[tp] = leo
		}
		close(f.changed)
		f.changed = make(chan struct{})
	}
}

func (f *fakeLog) WaitCommitted(ctx context.Context, tp cluster.TopicPartition, lastOffset int64, _ int32) error {
	for {
		f.mu.Lock()
		if f.waitErr != nil {
			err := f.waitErr
			f.mu.Unlock()
			return err
		}
		if f.hw[tp] > lastOffset {
			gate := f.gates[lastOffset]
			f.mu.Unlock()
			if gate != nil {
				select {
				case <-gate:
				case <-ctx.Done():
					return partition.ErrRequestTimedOut
				}
			}
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

func (f *fakeLog) Read(tp cluster.TopicPartition, req partition.ReadRequest) (partition.ReadResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	res := partition.ReadResult{Records: []byte{}, HighWatermark: f.hw[tp]}
	for _, b := range f.batches[tp] {
		base := int64(binary.BigEndian.Uint64(b[0:8]))
		last := base + int64(int32(binary.BigEndian.Uint32(b[23:27])))
		if last >= req.FetchOffset && last < f.hw[tp] {
			res.Records = append(res.Records, b...)
		}
	}
	return res, nil
}

func (f *fakeLog) LogEndOffset(tp cluster.TopicPartition) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leoCalls++
	return f.leo[tp], nil
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

const testPartitions = 4

// newTestCoordinator leads every partition, loaded; the background loop is
// not started: tests call Tick after moving the clock.
func newTestCoordinator(t *testing.T, log *fakeLog, clock *fakeClock, delay time.Duration) *Coordinator {
	t.Helper()
	return startTestCoordinator(t, testCoordinatorConfig(t, log, clock, delay))
}

// testCoordinatorConfig is newTestCoordinator's config.
func testCoordinatorConfig(t *testing.T, log *fakeLog, clock *fakeClock, delay time.Duration) Config {
	return Config{
		BrokerID: 1, NumPartitions: testPartitions, InitialRebalanceDelay: delay,
		MinSessionTimeout: time.Second, MaxSessionTimeout: time.Minute,
		Now: clock.Now, Log: log, Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
	}
}

// startTestCoordinator makes a Coordinator of cfg that leads every
// partition, loaded; the background loop is not started.
func startTestCoordinator(t *testing.T, cfg Config) *Coordinator {
	t.Helper()
	c := New(cfg)
	t.Cleanup(func() { c.Close() })
	for p := int32(0); p < testPartitions; p++ {
		c.OnBecomeLeader(p, 1)
	}
	waitLoaded(t, c)
	return c
}

func waitLoaded(t *testing.T, c *Coordinator) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c.mu.Lock()
		all := len(c.parts) > 0
		for _, ps := range c.parts {
			all = all && ps.loaded
		}
		c.mu.Unlock()
		if all {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("partitions not loaded within 5s")
		}
		time.Sleep(time.Millisecond)
	}
}

// joinAsync starts a JoinGroup and returns a channel with its outcome.
type joinOutcome struct {
	res JoinResult
	err error
}

func joinAsync(c *Coordinator, req JoinRequest) <-chan joinOutcome {
	ch := make(chan joinOutcome, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, err := c.JoinGroup(ctx, req)
		ch <- joinOutcome{res, err}
	}()
	return ch
}

func joinReq(group, member string) JoinRequest {
	return JoinRequest{Group: group, MemberID: member, ClientID: "c", ClientHost: "/h", ProtocolType: "consumer",
		Protocols:      []Protocol{{Name: "range", Metadata: []byte("m-" + member)}},
		SessionTimeout: 10 * time.Second, RebalanceTimeout: 20 * time.Second}
}

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatal("no answer within 5s")
	}
	var zero T
	return zero
}

func noAnswer[T any](t *testing.T, ch <-chan T) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("unexpected answer %+v", v)
	case <-time.After(50 * time.Millisecond):
	}
}
