package chaos

import (
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Outcome is a write's result in Jepsen's terms.
type Outcome string

const (
	// OK: acknowledged, with an offset.
	OK Outcome = "ok"
	// Fail: definitely not written (a pre-append refusal on the only
	// attempt).
	Fail Outcome = "fail"
	// Info: indeterminate (timeouts, disconnects, retried sends that
	// failed, NOT_ENOUGH_REPLICAS_AFTER_APPEND).
	Info Outcome = "info"
)

// Write is one write attempt. Invoke and Complete are monotonic times since
// the run started.
type Write struct {
	Producer  string
	Seq       int64
	Partition int32
	Value     string
	Invoke    time.Duration
	Complete  time.Duration
	Outcome   Outcome
	Offset    int64
	Err       string
}

// Poll is what one consumer fetch returned for one partition.
type Poll struct {
	Consumer string
	// Topic is set for the transactional workload's read_committed
	// polls; the main workload reads one topic and leaves it empty.
	Topic     string
	Partition int32
	At        time.Duration
	Offsets   []int64
	Values    []string
	HW        int64
	// Group is set on a consumer group member's polls; AssignedAt is when
	// the member was assigned the partition (Consumer then names the
	// member and that assignment session, so continuity is checked within
	// one session).
	Group      string
	AssignedAt time.Duration
}

// FaultEvent is one fault of the nemesis.
type FaultEvent struct {
	Kind   string
	Target int32 // broker id, -1 for all
	Start  time.Duration
	End    time.Duration
	// Led are the partitions the target led at Start.
	Led []int32
}

// ProducerReset is a kgo producer giving up its producer id and epoch
// after a broker answered OUT_OF_ORDER_SEQUENCE_NUMBER or
// UNKNOWN_PRODUCER_ID (kgo's "failing the producer ID and resetting all
// sequence numbers", KIP-360's epoch bump): every record it still holds is
// then sent again under the bumped epoch from sequence 0, a new identity
// no broker can match to an earlier copy.
type ProducerReset struct {
	Producer      string
	At            time.Duration
	Broker        int32 // the broker that answered, -1 if unknown
	Partition     int32
	ProducerID    int64
	ProducerEpoch int16 // the epoch given up
	Err           string
}

// ConsumerRewind is a kgo consumer's reset after it reported data loss
// (kgo.ErrDataLoss): it had consumed up to ConsumedTo and resumes at
// ResetTo, below it.
type ConsumerRewind struct {
	Consumer                      string
	Partition                     int32
	At                            time.Duration
	ConsumedTo, ResetTo           int64
	ConsumedToEpoch, ResetToEpoch int32
}

// History is everything a run recorded, safe for concurrent appends.
type History struct {
	start  time.Time
	mu     sync.Mutex
	Writes []Write
	// Resets are the kgo producers' producer id resets.
	Resets []ProducerReset
	// Rewinds are the kgo consumers' resets after reported data loss.
	Rewinds []ConsumerRewind
	Polls   []Poll
	Faults  []FaultEvent
	// The transactional workload's (txn scenarios only).
	Txns         []Txn
	TxnPolls     []Poll
	GroupOffsets []GroupOffset
	// The main workload's consumer group: every commit and the OffsetFetch
	// samples.
	Commits       []GroupCommit
	CommitSamples []GroupOffset
}

func (h *History) addCommit(c GroupCommit) { record(h, &h.Commits, c) }

func (h *History) addCommitSample(g GroupOffset) { record(h, &h.CommitSamples, g) }

func (h *History) groupSnapshot() ([]GroupCommit, []GroupOffset) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]GroupCommit(nil), h.Commits...), append([]GroupOffset(nil), h.CommitSamples...)
}

// record appends v to *list, one of h's, under h.mu.
func record[T any](h *History, list *[]T, v T) {
	h.mu.Lock()
	*list = append(*list, v)
	h.mu.Unlock()
}

// copied is a copy of *list, one of h's, taken under h.mu.
func copied[T any](h *History, list *[]T) []T {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]T(nil), *list...)
}

// NewHistory starts the run's monotonic clock.
func NewHistory() *History { return &History{start: time.Now()} }

// Now is the monotonic time since the run started.
func (h *History) Now() time.Duration { return time.Since(h.start) }

func (h *History) addWrite(w Write) { record(h, &h.Writes, w) }

func (h *History) addReset(r ProducerReset) { record(h, &h.Resets, r) }

// resets copies the producer id resets.
func (h *History) resets() []ProducerReset { return copied(h, &h.Resets) }

func (h *History) addRewind(r ConsumerRewind) { record(h, &h.Rewinds, r) }

func (h *History) rewinds() []ConsumerRewind { return copied(h, &h.Rewinds) }

// recordRewinds adds to h the kgo.ErrDataLoss resets among fs's errors,
// for consumer (name(partition) names it per partition).
func (h *History) recordRewinds(fs kgo.Fetches, at time.Duration, name func(partition int32) string) {
	fs.EachError(func(_ string, p int32, err error) {
		var dl *kgo.ErrDataLoss
		if errors.As(err, &dl) {
			h.addRewind(ConsumerRewind{Consumer: name(p), Partition: p, At: at, ConsumedTo: dl.ConsumedTo, ResetTo: dl.ResetTo,
				ConsumedToEpoch: dl.ConsumedToEpoch, ResetToEpoch: dl.ResetToEpoch})
		}
	})
}

func (h *History) addPoll(p Poll) { record(h, &h.Polls, p) }

func (h *History) addTxn(t Txn) { record(h, &h.Txns, t) }

func (h *History) addTxnPoll(p Poll) { record(h, &h.TxnPolls, p) }

func (h *History) addGroupOffset(g GroupOffset) { record(h, &h.GroupOffsets, g) }

// txnSnapshot copies the transactional workload's records.
func (h *History) txnSnapshot() ([]Txn, []Poll, []GroupOffset) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Txn(nil), h.Txns...), append([]Poll(nil), h.TxnPolls...), append([]GroupOffset(nil), h.GroupOffsets...)
}

// Fault records the start of a fault and returns a func recording its end.
func (h *History) Fault(kind string, target int32, led []int32) func() {
	h.mu.Lock()
	i := len(h.Faults)
	h.Faults = append(h.Faults, FaultEvent{Kind: kind, Target: target, Start: h.Now(), Led: led})
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		h.Faults[i].End = h.Now()
		h.mu.Unlock()
	}
}

// lastOKBefore etc. are used by the figures; a snapshot keeps them simple.
func (h *History) snapshot() ([]Write, []Poll, []FaultEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Write(nil), h.Writes...), append([]Poll(nil), h.Polls...), append([]FaultEvent(nil), h.Faults...)
}
