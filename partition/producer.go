package partition

import (
	"fmt"
	"math"
)

// producerBatchesKept is how many batches per producer are remembered for
// duplicate detection; Kafka keeps five because a producer has at most five
// requests in flight per partition.
const producerBatchesKept = 5

// producerBatch is the sequence range of one appended batch and where it landed.
type producerBatch struct {
	firstSeq, lastSeq       int32
	firstOffset, lastOffset int64
}

// producerState is what a replica remembers of one idempotent or
// transactional producer (Kafka's ProducerStateEntry).
type producerState struct {
	epoch   int16
	batches []producerBatch // oldest first, at most producerBatchesKept
	// coordinatorEpoch is the coordinator epoch of the producer's last
	// transaction marker, -1 before one.
	coordinatorEpoch int32
	// lastTimestamp is the max timestamp of the producer's last batch or
	// the timestamp of its last marker, -1 when unknown.
	lastTimestamp int64
	// txnFirstOffset is the offset of the first batch of the producer's
	// ongoing transaction, -1 when none is ongoing.
	txnFirstOffset int64
	// lastMarkerOffset is the offset of the producer's last marker, -1
	// before one: a truncation at or below it must rebuild the state.
	lastMarkerOffset int64
}

// newProducerState is the state of a producer first seen with epoch.
func newProducerState(epoch int16) *producerState {
	return &producerState{epoch: epoch, coordinatorEpoch: -1, lastTimestamp: -1, txnFirstOffset: -1, lastMarkerOffset: -1}
}

// setEpoch moves the producer to epoch, forgetting the batches of an
// older one (Kafka's maybeUpdateProducerEpoch).
func (s *producerState) setEpoch(epoch int16) {
	if epoch != s.epoch {
		s.epoch = epoch
		s.batches = s.batches[:0]
	}
}

// duplicate returns the remembered batch with exactly this epoch and
// sequence range, if any: a retry answered with its original offsets.
func (s *producerState) duplicate(epoch int16, firstSeq, lastSeq int32) (producerBatch, bool) {
	if s == nil || epoch != s.epoch {
		return producerBatch{}, false
	}
	for _, b := range s.batches {
		if b.firstSeq == firstSeq && b.lastSeq == lastSeq {
			return b, true
		}
	}
	return producerBatch{}, false
}

// lastSequence is the last sequence of the newest remembered batch, -1
// when none.
func (s *producerState) lastSequence() int32 {
	if len(s.batches) == 0 {
		return -1
	}
	return s.batches[len(s.batches)-1].lastSeq
}

// producerCheck is the outcome of checking one batch against the state.
type producerCheck int

const (
	producerAppend    producerCheck = iota // append the batch
	producerDuplicate                      // answer with the original offsets
)

// nextSeq is the sequence after seq, wrapping at MaxInt32 as Kafka does.
func nextSeq(seq int32, count int32) int32 {
	if seq > math.MaxInt32-count {
		return count - (math.MaxInt32 - seq) - 1
	}
	return seq + count
}

// check decides what to do with a batch from producer pid with the given
// epoch and sequence range. On a duplicate it returns the original batch.
func (s *producerState) check(epoch int16, firstSeq, lastSeq int32) (producerCheck, producerBatch, error) {
	if s == nil {
		// No state for this producer: only a first batch may start it.
		// Kafka (KIP-360) also accepts a non-zero sequence after the state
		// was lost to retention; we refuse it so the client resets.
		if firstSeq != 0 {
			return 0, producerBatch{}, fmt.Errorf("%w: first sequence %d", ErrUnknownProducerID, firstSeq)
		}
		return producerAppend, producerBatch{}, nil
	}
	if epoch < s.epoch {
		return 0, producerBatch{}, fmt.Errorf("%w: epoch %d < %d", ErrInvalidProducerEpoch, epoch, s.epoch)
	}
	if epoch > s.epoch {
		if firstSeq != 0 {
			return 0, producerBatch{}, fmt.Errorf("%w: new epoch %d must start at sequence 0, got %d", ErrOutOfOrderSequence, epoch, firstSeq)
		}
		return producerAppend, producerBatch{}, nil
	}
	if b, ok := s.duplicate(epoch, firstSeq, lastSeq); ok {
		return producerDuplicate, b, nil
	}
	if len(s.batches) == 0 {
		if firstSeq != 0 {
			return 0, producerBatch{}, fmt.Errorf("%w: expected sequence 0, got %d", ErrOutOfOrderSequence, firstSeq)
		}
		return producerAppend, producerBatch{}, nil
	}
	last := s.batches[len(s.batches)-1]
	if want := nextSeq(last.lastSeq, 1); firstSeq != want {
		return 0, producerBatch{}, fmt.Errorf("%w: expected sequence %d, got %d", ErrOutOfOrderSequence, want, firstSeq)
	}
	return producerAppend, producerBatch{}, nil
}

// record remembers an appended batch, resetting the history on a new epoch.
func (s *producerState) record(epoch int16, b producerBatch) {
	s.setEpoch(epoch)
	if len(s.batches) == producerBatchesKept {
		copy(s.batches, s.batches[1:])
		s.batches = s.batches[:producerBatchesKept-1]
	}
	s.batches = append(s.batches, b)
}
