package coordlog

import (
	"context"
	"errors"
	"time"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
)

// Reader is how Load reads a partition: the Read and LogEndOffset of
// group.Log and txn.Log.
type Reader interface {
	// Read returns whole batches from req.FetchOffset, up to the high
	// watermark for ReplicaID -1.
	Read(tp cluster.TopicPartition, req partition.ReadRequest) (partition.ReadResult, error)
	// LogEndOffset is tp's log end offset on this broker.
	LogEndOffset(tp cluster.TopicPartition) (int64, error)
}

// Load reads one partition of an internal topic for a coordinator that
// just became its leader. Every field but Logger is required.
type Load struct {
	Log Reader
	TP  cluster.TopicPartition
	// What names the partition in log messages ("offsets partition").
	What   string
	Logger zerolog.Logger
	Walk   WalkOptions
	// Stale reports whether the coordinator no longer owns the
	// incarnation being loaded; it is asked before every read and ends
	// the load.
	Stale func() bool
	// Sleep waits d; false (the coordinator closed or unloaded the
	// partition) ends the load.
	Sleep func(d time.Duration) bool
	// Record is called for every record read, in offset order, with its
	// batch's header. A record of a batch that fails part way may be seen
	// again when the batch is re-read.
	Record func(h Header, offset int64, key, value []byte)
}

// Backoffs of Run: after a failed LogEndOffset or Read, after an
// unreadable batch (doubling up to readBackoffMax), and while the high
// watermark has not reached the end offset.
const (
	retryBackoff   = 100 * time.Millisecond
	readBackoffMax = time.Second
	hwPollInterval = 20 * time.Millisecond
)

// Run reads the partition from its log start up to the log end offset it
// has when Run starts, waiting for the high watermark to get there (so
// that everything it reads is committed), retrying failed reads. As
// Kafka's loaders, it never gets past a batch it cannot read: it keeps
// what was read whole and re-reads the failing batch, backing off, so a
// coordinator is never loaded without the records at and after it. It
// returns that end offset, and ok false if Stale or Sleep ended the load.
func (l Load) Run() (end int64, ok bool) {
	for {
		if l.Stale() {
			return 0, false
		}
		var err error
		if end, err = l.Log.LogEndOffset(l.TP); err == nil {
			break
		}
		l.Logger.Warn().Err(err).Int32("partition", l.TP.Partition).Msg(l.What + " end offset; retrying")
		if !l.Sleep(retryBackoff) {
			return 0, false
		}
	}
	offset := int64(0)
	backoff := retryBackoff
	for offset < end {
		if l.Stale() {
			return end, false
		}
		res, err := l.Log.Read(l.TP, partition.ReadRequest{FetchOffset: offset, MaxBytes: 4 << 20, ReplicaID: -1, CurrentLeaderEpoch: -1})
		if errors.Is(err, partition.ErrOffsetOutOfRange) && offset < res.LogStartOffset {
			offset = res.LogStartOffset
			continue
		}
		if err != nil {
			l.Logger.Warn().Err(err).Int32("partition", l.TP.Partition).Int64("offset", offset).Msg("reading " + l.What + "; retrying")
			if !l.Sleep(retryBackoff) {
				return end, false
			}
			continue
		}
		next, perr := Walk(res.Records, l.Walk, l.Record)
		if perr != nil {
			l.Logger.Error().Err(perr).Int32("partition", l.TP.Partition).Int64("offset", offset).Dur("retry_in", backoff).
				Msg(l.What + " unreadable at this point; load retrying")
			if next > offset {
				offset = next
			}
			if !l.Sleep(backoff) {
				return end, false
			}
			backoff = min(2*backoff, readBackoffMax)
			continue
		}
		backoff = retryBackoff
		if next <= offset {
			if res.HighWatermark >= end {
				// Everything up to end is committed and there is no
				// record past offset: compaction removed the tail between
				// the last batch and end (the cleaned segment before an
				// empty active one). Kafka's loaders, too, stop at the
				// first empty read.
				break
			}
			// Nothing committed past offset yet: the high watermark of a
			// new leader catches up when its followers fetch.
			if !l.Sleep(hwPollInterval) {
				return end, false
			}
			continue
		}
		offset = next
	}
	return end, true
}

// Sleep waits d or until ctx ends (false).
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
