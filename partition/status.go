package partition

import (
	"slices"
	"strings"
	"time"

	"github.com/kafkazk/broker/cluster"
)

// Role is a replica's part in its partition.
type Role string

// The roles of a replica. A follower of leader -1 (no live leader) is a
// follower that does not fetch.
const (
	RoleLeader   Role = "leader"
	RoleFollower Role = "follower"
)

// FollowerStatus is what a leader knows of one follower.
type FollowerStatus struct {
	BrokerID int32
	// LogEndOffset is the follower's last fetch offset in this leader
	// epoch, -1 before its first fetch.
	LogEndOffset     int64
	LastCaughtUpTime time.Time // zero if never caught up in this epoch
}

// UntilOutOfSync is how long the follower, as of now, may stay in the ISR
// of a leader at leaderLEO before the leader removes it: lag while it is
// at the leader's LEO, below zero once it is out of sync.
func (f FollowerStatus) UntilOutOfSync(leaderLEO int64, lag time.Duration, now time.Time) time.Duration {
	return untilOutOfSync(f.LogEndOffset, leaderLEO, f.LastCaughtUpTime, now, lag)
}

// ReplicaStatus is a snapshot of one replica, for status tools and tests.
type ReplicaStatus struct {
	TopicPartition cluster.TopicPartition
	Role           Role
	Leader         int32
	LeaderEpoch    int32
	ZkVersion      int32
	Replicas       []int32
	// AddingReplicas and RemovingReplicas are those of a reassignment in
	// progress, as the controller last told this replica.
	AddingReplicas   []int32
	RemovingReplicas []int32
	Isr              []int32
	LogEndOffset     int64
	HighWatermark    int64
	LogStartOffset   int64
	// LastStableOffset is min(first offset of an unstable transaction,
	// HW); see ReadResult.LastStableOffset.
	LastStableOffset int64
	// OngoingTxns are the open transactions (leader and follower alike),
	// by first offset.
	OngoingTxns []OngoingTxn
	// Followers is set on a leader only, in broker id order.
	Followers []FollowerStatus
	// LeaderHighWatermark is set on a follower only: the leader's HW in
	// its last fetch response of this epoch, -1 before one. Kafka's
	// follower lag (FetcherLagMetrics ConsumerLag) is this minus
	// LogEndOffset.
	LeaderHighWatermark int64
	// Compacted is set when the topic's cleanup.policy includes compact;
	// DirtyRatio is then the log's dirty ratio as the cleaner sees it
	// (bytes not yet cleaned over the cleanable bytes, Kafka's
	// cleanableRatio).
	Compacted  bool
	DirtyRatio float64
	// LeaderThrottled and FollowerThrottled say whether the topic's
	// leader.replication.throttled.replicas and
	// follower.replication.throttled.replicas name this replica (KIP-73).
	LeaderThrottled, FollowerThrottled bool
	// SizeBytes is the log's size on disk (Kafka's Log Size).
	SizeBytes int64
}

// status snapshots the replica.
func (r *Replica) status() ReplicaStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := ReplicaStatus{
		TopicPartition: r.tp, Role: RoleFollower, Leader: r.leader, LeaderEpoch: r.leaderEpoch,
		ZkVersion: r.zkVersion, Replicas: slices.Clone(r.replicas), Isr: slices.Clone(r.isr),
		AddingReplicas: slices.Clone(r.adding), RemovingReplicas: slices.Clone(r.removing),
		LogEndOffset: r.log.LogEndOffset(), HighWatermark: r.hw, LogStartOffset: r.log.LogStartOffset(),
		LastStableOffset: r.lsoLocked(), OngoingTxns: r.ongoingTxnsLocked(),
		LeaderHighWatermark: -1,
		LeaderThrottled:     r.leaderThrottled, FollowerThrottled: r.followerThrottled, SizeBytes: r.log.Size(),
	}
	if r.isLeaderLocked() {
		st.Role = RoleLeader
		for id, f := range r.followers {
			st.Followers = append(st.Followers, FollowerStatus{BrokerID: id, LogEndOffset: f.logEndOffset,
				LastCaughtUpTime: f.lastCaughtUpTime})
		}
		slices.SortFunc(st.Followers, func(a, b FollowerStatus) int { return int(a.BrokerID - b.BrokerID) })
	} else {
		st.LeaderHighWatermark = r.leaderHW
	}
	return st
}

// PartitionStatus returns a snapshot of every replica this broker holds,
// ordered by topic and partition.
func (m *Manager) PartitionStatus() []ReplicaStatus {
	rs := m.all()
	out := make([]ReplicaStatus, 0, len(rs))
	now := m.cfg.Now()
	for _, r := range rs {
		st := r.status()
		st.DirtyRatio, st.Compacted = m.dirtyRatio(r, now)
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b ReplicaStatus) int {
		if c := strings.Compare(a.TopicPartition.Topic, b.TopicPartition.Topic); c != 0 {
			return c
		}
		return int(a.TopicPartition.Partition - b.TopicPartition.Partition)
	})
	return out
}
