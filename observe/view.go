package observe

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/kafkazk/broker/partition"
)

// View is what /v1/partitions serves: this broker's picture of every
// replica it holds, in the seed documents' terms (AR, ISR, OSR, LEO, HW).
type View struct {
	BrokerID   int32 `json:"broker_id"`
	Controller bool  `json:"controller"`
	// ReplicaLagTimeMaxMs is replica.lag.time.max.ms.
	ReplicaLagTimeMaxMs int64     `json:"replica_lag_time_max_ms"`
	Time                time.Time `json:"time"`
	// ReplicationThrottle is the broker's replication quotas (KIP-73);
	// nil when the broker does not report them.
	ReplicationThrottle *ThrottleView   `json:"replication_throttle,omitempty"`
	Partitions          []PartitionView `json:"partitions"`
}

// ThrottleView is the two replication quotas: the configured bounds
// (leader.replication.throttled.rate, follower.replication.throttled.rate,
// nil when unlimited) and the throttled byte rates measured over the
// quota window (Kafka's LeaderReplication and FollowerReplication
// byte-rate).
type ThrottleView struct {
	LeaderRate       *int64  `json:"leader_replication_throttled_rate"`
	FollowerRate     *int64  `json:"follower_replication_throttled_rate"`
	LeaderByteRate   float64 `json:"leader_replication_byte_rate"`
	FollowerByteRate float64 `json:"follower_replication_byte_rate"`
}

// ReassignmentView is a reassignment in progress of one partition
// (KIP-455), as the controller's LeaderAndIsr gave it to this broker.
type ReassignmentView struct {
	AddingReplicas   []int32 `json:"adding_replicas"`
	RemovingReplicas []int32 `json:"removing_replicas"`
	// Adding is set on the leader: how far each adding replica has to go.
	Adding []AddingReplicaView `json:"adding,omitempty"`
}

// AddingReplicaView is one replica a reassignment adds, as its leader sees
// it.
type AddingReplicaView struct {
	BrokerID int32 `json:"broker_id"`
	InISR    bool  `json:"in_isr"`
	// RecordsLeft is the leader's LEO minus the replica's (the log from
	// its start before the replica's first fetch).
	RecordsLeft int64 `json:"records_left"`
	// BytesLeft estimates the bytes left: RecordsLeft at the log's
	// average bytes per record (its size over LEO - log start), the
	// whole log before the replica's first fetch.
	BytesLeft int64 `json:"bytes_left"`
	// Throttled: the leader throttles what it sends the replica (the
	// partition is leader-throttled here and the replica is outside
	// the ISR).
	Throttled bool `json:"throttled"`
}

// PartitionView is one replica on this broker.
type PartitionView struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	Role        string `json:"role"` // "leader" or "follower"
	Leader      int32  `json:"leader"`
	LeaderEpoch int32  `json:"leader_epoch"`
	// Replicas is the assignment (AR), ISR the in-sync replicas, OSR the
	// out-of-sync ones: AR - ISR, in assignment order.
	Replicas       []int32 `json:"replicas"`
	ISR            []int32 `json:"isr"`
	OSR            []int32 `json:"osr"`
	LogStartOffset int64   `json:"log_start_offset"`
	LogEndOffset   int64   `json:"log_end_offset"`
	HighWatermark  int64   `json:"high_watermark"`
	// LastStableOffset is min(first offset of an open transaction, HW):
	// read_committed consumers read below it.
	LastStableOffset int64 `json:"last_stable_offset"`
	// OngoingTxns are the replica's open transactions, by first offset
	// (never nil).
	OngoingTxns []OngoingTxnView `json:"ongoing_transactions"`
	// UnderReplicated: this broker leads and the ISR is smaller than AR.
	UnderReplicated bool `json:"under_replicated"`
	// Followers is set on a leader: what it knows of each follower.
	Followers []FollowerView `json:"followers,omitempty"`
	// LeaderHighWatermark is set on a follower that has fetched in this
	// epoch: the leader's HW in its last fetch response.
	LeaderHighWatermark *int64 `json:"leader_high_watermark,omitempty"`
	// DirtyRatio is set for a compacted log (cleanup.policy includes
	// compact): the share of its cleanable bytes not yet cleaned, which
	// the cleaner compares with min.cleanable.dirty.ratio.
	DirtyRatio *float64 `json:"dirty_ratio,omitempty"`
	// LeaderThrottled and FollowerThrottled: the topic's
	// leader.replication.throttled.replicas and
	// follower.replication.throttled.replicas name this replica.
	LeaderThrottled   bool `json:"leader_throttled"`
	FollowerThrottled bool `json:"follower_throttled"`
	// Reassignment is set while a reassignment of the partition is in
	// progress.
	Reassignment *ReassignmentView `json:"reassignment,omitempty"`
}

// OngoingTxnView is one open transaction on a replica: its producer and
// the offset of its first batch here, which holds the LSO back.
type OngoingTxnView struct {
	ProducerID    int64 `json:"producer_id"`
	ProducerEpoch int16 `json:"producer_epoch"`
	FirstOffset   int64 `json:"first_offset"`
	// LastTimestamp is the producer's last batch time (ms since the
	// epoch), as DescribeProducers reports it.
	LastTimestamp int64 `json:"last_timestamp"`
}

// FollowerView is one follower as its leader sees it.
type FollowerView struct {
	BrokerID int32 `json:"broker_id"`
	InISR    bool  `json:"in_isr"`
	// LogEndOffset is the follower's last fetch offset in this leader
	// epoch, -1 before its first fetch.
	LogEndOffset int64 `json:"log_end_offset"`
	// RecordsBehind is the leader's LEO minus the follower's; nil before
	// its first fetch.
	RecordsBehind *int64 `json:"records_behind"`
	// CaughtUpMsAgo is how long ago the follower last reached the
	// leader's LEO; nil if it has not in this epoch.
	CaughtUpMsAgo *int64 `json:"caught_up_ms_ago"`
	// MsUntilISRRemoval is, for an ISR follower, how long it may stay
	// behind before replica.lag.time.max.ms makes it out of sync (the
	// leader checks every replica.lag.time.max.ms / 2, so the removal
	// follows within that); 0 means it is due. A follower at the
	// leader's LEO is never removed: it has the full lag time. Nil for
	// a follower outside the ISR.
	MsUntilISRRemoval *int64 `json:"ms_until_isr_removal"`
}

// BuildView turns a status snapshot into the view at now.
func BuildView(brokerID int32, controller bool, lag time.Duration, sts []partition.ReplicaStatus, now time.Time) View {
	v := View{BrokerID: brokerID, Controller: controller, ReplicaLagTimeMaxMs: lag.Milliseconds(), Time: now,
		Partitions: make([]PartitionView, 0, len(sts))}
	for _, st := range sts {
		v.Partitions = append(v.Partitions, partitionView(st, lag, now))
	}
	return v
}

func partitionView(st partition.ReplicaStatus, lag time.Duration, now time.Time) PartitionView {
	p := PartitionView{
		Topic: st.TopicPartition.Topic, Partition: st.TopicPartition.Partition, Role: string(st.Role),
		Leader: st.Leader, LeaderEpoch: st.LeaderEpoch,
		Replicas: nonNil(st.Replicas), ISR: nonNil(st.Isr), OSR: osr(st.Replicas, st.Isr),
		LogStartOffset: st.LogStartOffset, LogEndOffset: st.LogEndOffset, HighWatermark: st.HighWatermark,
		LastStableOffset: st.LastStableOffset, OngoingTxns: ongoingTxns(st.OngoingTxns),
		UnderReplicated: underReplicated(st),
	}
	if st.Compacted {
		p.DirtyRatio = ptr(st.DirtyRatio)
	}
	p.LeaderThrottled, p.FollowerThrottled = st.LeaderThrottled, st.FollowerThrottled
	p.Reassignment = reassignmentView(st)
	if st.Role != partition.RoleLeader {
		if st.LeaderHighWatermark >= 0 {
			p.LeaderHighWatermark = ptr(st.LeaderHighWatermark)
		}
		return p
	}
	for _, f := range st.Followers {
		fv := FollowerView{BrokerID: f.BrokerID, InISR: slices.Contains(st.Isr, f.BrokerID), LogEndOffset: f.LogEndOffset}
		if f.LogEndOffset >= 0 {
			fv.RecordsBehind = ptr(st.LogEndOffset - f.LogEndOffset)
		}
		if !f.LastCaughtUpTime.IsZero() {
			fv.CaughtUpMsAgo = ptr(max(0, now.Sub(f.LastCaughtUpTime).Milliseconds()))
		}
		if fv.InISR {
			fv.MsUntilISRRemoval = ptr(max(0, f.UntilOutOfSync(st.LogEndOffset, lag, now).Milliseconds()))
		}
		p.Followers = append(p.Followers, fv)
	}
	return p
}

// reassignmentView is st's reassignment in progress, nil when none is.
func reassignmentView(st partition.ReplicaStatus) *ReassignmentView {
	if len(st.AddingReplicas) == 0 && len(st.RemovingReplicas) == 0 {
		return nil
	}
	v := &ReassignmentView{AddingReplicas: nonNil(st.AddingReplicas), RemovingReplicas: nonNil(st.RemovingReplicas)}
	if st.Role != partition.RoleLeader {
		return v
	}
	records := st.LogEndOffset - st.LogStartOffset
	for _, id := range st.AddingReplicas {
		a := AddingReplicaView{BrokerID: id, InISR: slices.Contains(st.Isr, id), RecordsLeft: records, BytesLeft: st.SizeBytes}
		for _, f := range st.Followers {
			if f.BrokerID == id && f.LogEndOffset >= 0 {
				a.RecordsLeft = max(0, st.LogEndOffset-f.LogEndOffset)
				a.BytesLeft = 0
				if records > 0 {
					a.BytesLeft = int64(math.Round(float64(a.RecordsLeft) * float64(st.SizeBytes) / float64(records)))
				}
			}
		}
		a.Throttled = st.LeaderThrottled && !a.InISR
		v.Adding = append(v.Adding, a)
	}
	return v
}

// ongoingTxns is the open transactions by first offset, never nil.
func ongoingTxns(txns []partition.OngoingTxn) []OngoingTxnView {
	out := make([]OngoingTxnView, 0, len(txns))
	for _, t := range txns {
		out = append(out, OngoingTxnView{ProducerID: t.ProducerID, ProducerEpoch: t.ProducerEpoch,
			FirstOffset: t.FirstOffset, LastTimestamp: t.LastTimestamp})
	}
	slices.SortFunc(out, func(a, b OngoingTxnView) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
	return out
}

// throttleView is the quotas' figures.
func throttleView(q ReplicationQuotas) *ThrottleView {
	l, f := q.ReplicationQuotas()
	v := &ThrottleView{}
	if l != math.MaxInt64 {
		v.LeaderRate = ptr(l)
	}
	if f != math.MaxInt64 {
		v.FollowerRate = ptr(f)
	}
	v.LeaderByteRate, v.FollowerByteRate = q.ReplicationByteRates()
	return v
}

// underReplicated is Kafka's rule: this broker leads and ISR < AR.
func underReplicated(st partition.ReplicaStatus) bool {
	return st.Role == partition.RoleLeader && len(st.Isr) < len(st.Replicas)
}

// osr is AR - ISR in assignment order, never nil.
func osr(ar, isr []int32) []int32 {
	out := []int32{}
	for _, id := range ar {
		if !slices.Contains(isr, id) {
			out = append(out, id)
		}
	}
	return out
}

func nonNil(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return slices.Clone(s)
}

func ptr[T any](v T) *T { return &v }
