package logstore

import (
	"errors"
	"fmt"
)

// Moving the log start offset forward on request, as Kafka's
// Log.maybeIncrementLogStartOffset does for DeleteRecords on a leader and
// for a follower that learns its leader's log start offset. Unlike
// retention, the new start need not be a segment boundary: records below it
// in the first remaining segment stay on disk but are out of range for
// Read, and the whole segments below it are deleted at once.

// IncrementLogStartOffset moves LogStartOffset up to offset. An offset at or
// below the current start does nothing; one above LogEndOffset returns
// ErrOffsetOutOfRange (callers bound it by the high watermark). Every
// segment that lies wholly below offset is deleted, never the active one,
// and the leader epoch cache loses the epochs before offset. It returns
// the number of segments deleted. The new start is not durable until the
// caller checkpoints it (log-start-offset-checkpoint): Open starts at the
// first segment's base offset, and the caller raises it again from its
// checkpoint with this method.
func (l *Log) IncrementLogStartOffset(offset int64) (deleted int, err error) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.writable(); err != nil {
		return 0, err
	}
	if offset <= l.logStartOffset.Load() {
		return 0, nil
	}
	if leo := l.logEndOffset.Load(); offset > leo {
		return 0, fmt.Errorf("move log start of %s to %d above log end offset %d: %w", l.dir, offset, leo, ErrOffsetOutOfRange)
	}
	n := 0
	for n < len(l.segments)-1 && l.segments[n+1].baseOffset <= offset {
		n++
	}
	deleted, _, err = l.deleteFirstSegmentsLocked(n, offset)
	errs := []error{err}
	errs = append(errs, l.failIf("move log start", l.epochs.TruncateFromStart(offset)))
	l.log.Info().Int64("log_start_offset", offset).Int("segments_deleted", deleted).Msg("log start offset moved")
	if err := errors.Join(errs...); err != nil {
		return deleted, fmt.Errorf("move log start of %s to %d: %w", l.dir, offset, err)
	}
	return deleted, nil
}

// Size is the number of bytes of record batches in the log's segments
// (Kafka's Log.size), indexes not counted.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var total int64
	for _, s := range l.segments {
		total += s.size
	}
	return total
}
