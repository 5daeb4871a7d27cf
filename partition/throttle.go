package partition

// Replication throttles (KIP-73), as Kafka's ReplicationQuotaManager:
//
//   - Two broker-wide quotas: the leader's (leader.replication.throttled.rate)
//     bounds what this broker sends to followers of the partitions its
//     topics' leader.replication.throttled.replicas names on this broker;
//     the follower's (follower.replication.throttled.rate) bounds what it
//     fetches for the partitions follower.replication.throttled.replicas
//     names on it. Throttled replicas share their quota; others are never
//     slowed. Unlimited by default (Long.MaxValue), set with
//     Manager.SetReplicationQuotas at any time.
//   - Each quota measures its throttled bytes over a sliding window of
//     replication.quota.window.num (11) samples of
//     replication.quota.window.size.seconds (1 s), as Kafka's SimpleRate:
//     the bytes in the samples kept over the time since the oldest one
//     began, at least one sample's span. The quota is exceeded while that
//     rate is above the bound.
//   - Leader side (Manager.Read): a follower's read of a throttled
//     partition returns no records while the quota is exceeded, unless the
//     follower is in the ISR. The caller records the bytes it sends for
//     throttled partitions (ReadResult.Throttled) once the response is
//     final, with RecordLeaderReplication, as Kafka's KafkaApis records the
//     size of the throttled partitions of a follower's fetch response.
//   - Follower side (fetcher): a throttled partition that is not in sync
//     (its LEO below the leader's HW of the last response) is left out of
//     the Fetch while the quota is exceeded; the bytes appended for
//     throttled partitions are recorded, in sync or not.
//
// Nothing runs in the background: a quota is a few counters behind a
// mutex, read and written by the fetch paths.

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Kafka's replication.quota.window.num and
// replication.quota.window.size.seconds defaults.
const (
	quotaWindowSamples = 11
	quotaWindowSpan    = time.Second
)

// rateWindow is a sliding-window byte rate: Kafka's SampledStat of
// quotaWindowSamples samples measured as a SimpleRate. A sample begins at
// the first record after the previous one's span ended; samples older than
// the whole window are reset. Not safe for concurrent use.
type rateWindow struct {
	samples []rateSample // at most quotaWindowSamples
	cur     int          // index of the current sample
}

type rateSample struct {
	start time.Time
	bytes int64
}

// record adds n bytes at now.
func (w *rateWindow) record(now time.Time, n int64) {
	w.purge(now)
	if len(w.samples) == 0 {
		w.samples = append(w.samples, rateSample{start: now})
		w.cur = 0
	}
	if now.Sub(w.samples[w.cur].start) >= quotaWindowSpan {
		w.cur = (w.cur + 1) % quotaWindowSamples
		if w.cur == len(w.samples) {
			w.samples = append(w.samples, rateSample{})
		}
		w.samples[w.cur] = rateSample{start: now}
	}
	w.samples[w.cur].bytes += n
}

// purge resets the samples that began a whole window or more before now.
func (w *rateWindow) purge(now time.Time) {
	for i := range w.samples {
		if now.Sub(w.samples[i].start) >= quotaWindowSamples*quotaWindowSpan {
			w.samples[i] = rateSample{start: now}
		}
	}
}

// rate is the bytes per second at now.
func (w *rateWindow) rate(now time.Time) float64 {
	w.purge(now)
	oldest := now
	var total int64
	for _, s := range w.samples {
		if s.start.Before(oldest) {
			oldest = s.start
		}
		total += s.bytes
	}
	elapsed := max(now.Sub(oldest), quotaWindowSpan)
	return float64(total) / elapsed.Seconds()
}

// replicationQuota is one of the two broker-wide quotas. Safe for
// concurrent use.
type replicationQuota struct {
	bound atomic.Int64 // bytes per second; math.MaxInt64 is unlimited
	mu    sync.Mutex
	w     rateWindow
}

// quotaBound normalises a configured rate: negative or math.MaxInt64 is
// unlimited; 0 is Kafka's zero bytes per second.
func quotaBound(rate int64) int64 {
	if rate < 0 {
		return math.MaxInt64
	}
	return rate
}

// exceeded reports whether the throttled byte rate is above the bound.
func (q *replicationQuota) exceeded(now time.Time) bool {
	b := q.bound.Load()
	if b == math.MaxInt64 {
		return false
	}
	return q.rate(now) > float64(b)
}

// record counts n throttled bytes at now (also while unlimited, for the
// byte-rate metric).
func (q *replicationQuota) record(now time.Time, n int64) {
	if n <= 0 {
		return
	}
	q.mu.Lock()
	q.w.record(now, n)
	q.mu.Unlock()
}

func (q *replicationQuota) rate(now time.Time) float64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.w.rate(now)
}

// throttledHere reports whether a throttled-replicas list (the value of
// leader.replication.throttled.replicas or
// follower.replication.throttled.replicas, already validated by
// cluster's ThrottledReplicaListValidator rule) names partition on
// broker: "*" names every replica, "p:b,..." the replicas of partition p
// on broker b, as Kafka's TopicConfigHandler.parseThrottledPartitions.
// An item that does not parse names nothing.
func throttledHere(list string, partition, broker int32) bool {
	list = strings.TrimSpace(list)
	if list == "" {
		return false
	}
	if list == "*" {
		return true
	}
	for _, item := range strings.Split(list, ",") {
		p, b, ok := strings.Cut(strings.TrimSpace(item), ":")
		if !ok {
			continue
		}
		pi, err1 := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
		bi, err2 := strconv.ParseInt(strings.TrimSpace(b), 10, 32)
		if err1 == nil && err2 == nil && int32(pi) == partition && int32(bi) == broker {
			return true
		}
	}
	return false
}

// SetReplicationQuotas sets leader.replication.throttled.rate and
// follower.replication.throttled.rate, in bytes per second: 0 lets no
// throttled bytes through once the window holds any (as in Kafka), and a
// negative rate or math.MaxInt64 is unlimited. Safe at any time from any
// goroutine; the next fetch sees the new bounds, and the measured rates
// carry over.
func (m *Manager) SetReplicationQuotas(leaderRate, followerRate int64) {
	m.leaderQuota.bound.Store(quotaBound(leaderRate))
	m.followerQuota.bound.Store(quotaBound(followerRate))
	m.log.Info().Int64("leader_replication_throttled_rate", quotaBound(leaderRate)).
		Int64("follower_replication_throttled_rate", quotaBound(followerRate)).Msg("replication quotas set")
}

// ReplicationQuotas returns the leader and follower bounds in bytes per
// second, math.MaxInt64 when unlimited.
func (m *Manager) ReplicationQuotas() (leaderRate, followerRate int64) {
	return m.leaderQuota.bound.Load(), m.followerQuota.bound.Load()
}

// RecordLeaderReplication counts n bytes sent to a follower for
// partitions that read as ReadResult.Throttled against the leader quota.
// The Fetch handler calls it once per response with the throttled
// partitions' record bytes.
func (m *Manager) RecordLeaderReplication(n int64) {
	m.leaderQuota.record(m.cfg.Now(), n)
}

// ReplicationByteRates is the throttled byte rate of the leader and
// follower quotas, in bytes per second over the quota window: Kafka's
// LeaderReplication and FollowerReplication byte-rate.
func (m *Manager) ReplicationByteRates() (leader, follower float64) {
	now := m.cfg.Now()
	return m.leaderQuota.rate(now), m.followerQuota.rate(now)
}

// setThrottlesLocked caches whether the replica is throttled as leader
// and as follower under its config. Caller holds r.mu.
func (r *Replica) setThrottlesLocked() {
	r.leaderThrottled = throttledHere(r.cfg.LeaderReplicationThrottledReplicas, r.tp.Partition, r.brokerID)
	r.followerThrottled = throttledHere(r.cfg.FollowerReplicationThrottledReplicas, r.tp.Partition, r.brokerID)
}

// isAdding reports whether a reassignment in progress adds broker's
// replica (PartitionState.AddingReplicas of the last state).
func (r *Replica) isAdding(broker int32) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.adding, broker)
}
