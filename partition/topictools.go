package partition

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kafkazk/broker/cluster"
)

// The replica side of the topic tools: DeleteRecords (moving the log start
// offset on the leader and waiting for the low watermark, Kafka's
// DelayedDeleteRecords), a topic config change applied to live replicas,
// and the per-log-dir listing of DescribeLogDirs.

// DeleteRecordsHighWatermark asks DeleteRecords to delete up to the high
// watermark (Kafka's DeleteRecordsRequest.HIGH_WATERMARK).
const DeleteRecordsHighWatermark int64 = -1

// DeleteRecords moves the log start offset of tp, which this broker must
// lead, up to offset (DeleteRecordsHighWatermark: the high watermark),
// deleting the segments wholly below it, and checkpoints the new start.
// An offset below the current start changes nothing; one above the high
// watermark, or negative, returns ErrOffsetOutOfRange. It then waits, as
// Kafka's DelayedDeleteRecords does, until the low watermark (the smallest
// log start offset over this replica and the followers on brokers alive
// says are alive; a follower's is known from its fetches) reaches the
// offset, and returns it. A lost leadership returns ErrNotLeader, the end
// of ctx ErrRequestTimedOut. alive nil counts every follower.
func (m *Manager) DeleteRecords(ctx context.Context, tp cluster.TopicPartition, offset int64, alive func(brokerID int32) bool) (lowWatermark int64, err error) {
	r, err := m.get(tp)
	if err != nil {
		return -1, err
	}
	target, moved, err := r.moveLogStart(offset)
	if err != nil {
		return -1, err
	}
	if moved {
		// Durable at once: a start inside a segment is known only from
		// the checkpoint after a restart.
		m.writeCheckpoints(true)
	}
	return r.waitLowWatermark(ctx, target, alive)
}

// moveLogStart is the leader's part of DeleteRecords: it returns the
// offset the low watermark must reach and whether the start moved.
func (r *Replica) moveLogStart(offset int64) (target int64, moved bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.isLeaderLocked() {
		return -1, false, ErrNotLeader
	}
	if err := r.storageErr; err != nil {
		return -1, false, err
	}
	if offset == DeleteRecordsHighWatermark {
		offset = r.hw
	}
	if offset < 0 || offset > r.hw {
		return -1, false, fmt.Errorf("%w: delete records of %s below %d: high watermark %d", ErrOffsetOutOfRange, r.tp, offset, r.hw)
	}
	start := r.log.LogStartOffset()
	if offset <= start {
		return offset, false, nil
	}
	n, err := r.log.IncrementLogStartOffset(offset)
	if err != nil {
		err = fmt.Errorf("delete records of %s below %d: %w", r.tp, offset, mapLogError(err))
		r.logFailedLocked(err)
		return -1, false, err
	}
	r.logger.Info().Int64("log_start_offset", offset).Int64("old_log_start_offset", start).
		Int("segments_deleted", n).Msg("deleted records")
	r.signalLocked()
	return offset, true, nil
}

// applyRetention deletes the segments that time and size retention let go
// below the HW (Log.DeleteOldSegmentsBelow, without r.mu: it may fsync).
// A log start moved past an open transaction's first offset moves the LSO
// it held, which wakes read_committed consumers' long polls.
func (r *Replica) applyRetention(nowMs int64) (int, error) {
	hw, _, _ := r.snapshot()
	n, err := r.log.DeleteOldSegmentsBelow(nowMs, hw)
	if n > 0 {
		r.mu.Lock()
		if !r.closed && r.lsoLocked() != r.lsoSignalled {
			r.signalToLocked(wakeConsumers)
		}
		r.mu.Unlock()
	}
	return n, err
}

// lowWatermarkLocked is the smallest log start offset over this replica and
// the followers alive counts (Partition.lowWatermarkIfLeader). A follower
// that has not fetched in this leader epoch counts as -1. Caller holds r.mu.
func (r *Replica) lowWatermarkLocked(alive func(int32) bool) int64 {
	lw := r.log.LogStartOffset()
	for id, f := range r.followers {
		if (alive == nil || alive(id)) && f.logStartOffset < lw {
			lw = f.logStartOffset
		}
	}
	return lw
}

// waitLowWatermark blocks until the low watermark reaches target.
func (r *Replica) waitLowWatermark(ctx context.Context, target int64, alive func(int32) bool) (int64, error) {
	for {
		r.mu.Lock()
		if !r.isLeaderLocked() {
			r.mu.Unlock()
			return -1, ErrNotLeader
		}
		lw := r.lowWatermarkLocked(alive)
		ch := r.stateCh
		r.mu.Unlock()
		if lw >= target {
			return lw, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return -1, fmt.Errorf("%w: low watermark of %s at %d, waiting for %d", ErrRequestTimedOut, r.tp, lw, target)
		}
	}
}

// UpdateConfig gives every replica of topic this broker holds a new
// effective log config (a topic override changed in ZooKeeper). It takes
// effect for the next append (max.message.bytes, min.insync.replicas,
// message.timestamp.type), roll, flush and retention run (retention.ms,
// retention.bytes, segment.*). It returns how many replicas changed.
func (m *Manager) UpdateConfig(topic string, cfg cluster.LogConfig) int {
	n := 0
	for _, r := range m.all() {
		if r.tp.Topic == topic && r.setConfig(cfg) {
			n++
		}
	}
	return n
}

// setConfig replaces the replica's config; false if it was the same.
func (r *Replica) setConfig(cfg cluster.LogConfig) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || cfg == r.cfg {
		return false
	}
	r.cfg = cfg
	lc := logstoreConfig(cfg, r.logger)
	lc.FS = r.fs
	r.log.SetConfig(lc)
	r.setThrottlesLocked()
	r.logger.Info().Interface("config", cfg).Msg("topic config updated")
	return true
}

// LogDirInfo is one log dir of this broker and the replicas in it.
type LogDirInfo struct {
	Dir string // absolute path
	// Err is set for an offline dir (wrapping ErrStorage: Kafka's
	// KAFKA_STORAGE_ERROR), which lists no replicas.
	Err      error
	Replicas []ReplicaLogInfo
}

// ReplicaLogInfo is one replica in a log dir, for DescribeLogDirs.
type ReplicaLogInfo struct {
	TopicPartition cluster.TopicPartition
	// Size is the bytes of record batches in its segments.
	Size int64
	// OffsetLag is Kafka's max(HW - LEO, 0) of the local log: 0 on a
	// leader, and on a follower how far its log end trails the high
	// watermark it knows.
	OffsetLag int64
	// IsFuture is always false: replicas are never moved between dirs.
	IsFuture bool
}

// DescribeLogDirs lists every log dir with the replicas it holds, ordered
// by dir (as configured) and then by topic and partition.
func (m *Manager) DescribeLogDirs() []LogDirInfo {
	out := make([]LogDirInfo, len(m.cfg.LogDirs))
	index := make(map[string]int, len(m.cfg.LogDirs))
	for i, dir := range m.cfg.LogDirs {
		abs, err := filepath.Abs(dir)
		if err != nil {
			abs = dir
		}
		out[i] = LogDirInfo{Dir: abs, Replicas: []ReplicaLogInfo{}}
		if err := m.dirOffline(dir); err != nil {
			out[i].Err = fmt.Errorf("%w: log dir %s is offline: %w", ErrStorage, abs, err)
		}
		index[filepath.Clean(dir)] = i
	}
	for _, r := range m.all() {
		i, ok := index[filepath.Dir(r.dir)]
		if !ok {
			continue
		}
		r.mu.Lock()
		info := ReplicaLogInfo{TopicPartition: r.tp, Size: r.log.Size(), OffsetLag: max(r.hw-r.log.LogEndOffset(), 0)}
		r.mu.Unlock()
		out[i].Replicas = append(out[i].Replicas, info)
	}
	for _, d := range out {
		slices.SortFunc(d.Replicas, func(a, b ReplicaLogInfo) int {
			if c := strings.Compare(a.TopicPartition.Topic, b.TopicPartition.Topic); c != 0 {
				return c
			}
			return int(a.TopicPartition.Partition - b.TopicPartition.Partition)
		})
	}
	return out
}
