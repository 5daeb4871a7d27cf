package observe

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
)

type fakeQuotas struct {
	leaderRate, followerRate   int64
	leaderBytes, followerBytes float64
}

func (f fakeQuotas) ReplicationByteRates() (float64, float64) { return f.leaderBytes, f.followerBytes }
func (f fakeQuotas) ReplicationQuotas() (int64, int64)        { return f.leaderRate, f.followerRate }

// reassigning is a partition led here moving from [1 2 3] to [1 2 4 5]:
// 4 has fetched up to 2 of 10 records, 5 not yet; 3 is being removed.
func reassigning() fakePartitions {
	return fakePartitions{{TopicPartition: cluster.TopicPartition{Topic: "mv", Partition: 0}, Role: partition.RoleLeader,
		Leader: 1, LeaderEpoch: 2, Replicas: []int32{1, 2, 3, 4, 5}, Isr: []int32{1, 2, 3},
		LogEndOffset: 10, HighWatermark: 10, LogStartOffset: 0, LeaderHighWatermark: -1, SizeBytes: 1000,
		LeaderThrottled: true, AddingReplicas: []int32{4, 5}, RemovingReplicas: []int32{3},
		Followers: []partition.FollowerStatus{
			{BrokerID: 2, LogEndOffset: 10, LastCaughtUpTime: now},
			{BrokerID: 3, LogEndOffset: 10, LastCaughtUpTime: now},
			{BrokerID: 4, LogEndOffset: 2},
			{BrokerID: 5, LogEndOffset: -1},
		}},
		{TopicPartition: cluster.TopicPartition{Topic: "mv", Partition: 1}, Role: partition.RoleFollower,
			Leader: 2, LeaderEpoch: 1, Replicas: []int32{2, 1, 6}, Isr: []int32{2, 6}, FollowerThrottled: true,
			LogEndOffset: 3, HighWatermark: 3, LeaderHighWatermark: 9, AddingReplicas: []int32{1}, RemovingReplicas: []int32{6}},
		{TopicPartition: cluster.TopicPartition{Topic: "still", Partition: 0}, Role: partition.RoleLeader,
			Leader: 1, Replicas: []int32{1}, Isr: []int32{1}, LogEndOffset: 1, HighWatermark: 1, LeaderHighWatermark: -1},
	}
}

func newThrottleObserver() *Observer {
	o := New(Config{BrokerID: 1, ReplicaLagTimeMax: 10 * time.Second, Now: func() time.Time { return now }})
	o.SetSources(Sources{Partitions: reassigning(),
		Quotas: fakeQuotas{leaderRate: 1000, followerRate: math.MaxInt64, leaderBytes: 987.5, followerBytes: 12}})
	return o
}

func TestObserveReplicationThrottleMetrics(t *testing.T) {
	body := get(t, newThrottleObserver().Handler(), "/metrics")
	for _, line := range []string{
		"kafka_server_leaderreplication_byte_rate 987.5",
		"kafka_server_followerreplication_byte_rate 12",
	} {
		if !strings.Contains(body, "\n"+line+"\n") {
			t.Errorf("/metrics lacks %q", line)
		}
	}
	// Without a quota source the gauges are not exported.
	if body := get(t, newTestObserver().Handler(), "/metrics"); strings.Contains(body, "leaderreplication") {
		t.Error("replication byte rates exported without a source")
	}
}

func TestObserveReassignmentView(t *testing.T) {
	o := newThrottleObserver()
	var v View
	if err := json.Unmarshal([]byte(get(t, o.Handler(), "/v1/partitions")), &v); err != nil {
		t.Fatal(err)
	}
	th := v.ReplicationThrottle
	if th == nil || th.LeaderRate == nil || *th.LeaderRate != 1000 || th.FollowerRate != nil ||
		th.LeaderByteRate != 987.5 || th.FollowerByteRate != 12 {
		t.Fatalf("replication throttle %+v", th)
	}
	lead, follow, still := v.Partitions[0], v.Partitions[1], v.Partitions[2]
	r := lead.Reassignment
	if r == nil || len(r.Adding) != 2 || !lead.LeaderThrottled || lead.FollowerThrottled {
		t.Fatalf("leader partition %+v reassignment %+v", lead, r)
	}
	want := []AddingReplicaView{
		{BrokerID: 4, RecordsLeft: 8, BytesLeft: 800, Throttled: true},
		{BrokerID: 5, RecordsLeft: 10, BytesLeft: 1000, Throttled: true},
	}
	for i, w := range want {
		if r.Adding[i] != w {
			t.Errorf("adding[%d] = %+v, want %+v", i, r.Adding[i], w)
		}
	}
	if len(r.AddingReplicas) != 2 || len(r.RemovingReplicas) != 1 || r.RemovingReplicas[0] != 3 {
		t.Errorf("adding %v removing %v", r.AddingReplicas, r.RemovingReplicas)
	}
	if f := follow.Reassignment; f == nil || f.Adding != nil || !follow.FollowerThrottled || f.AddingReplicas[0] != 1 {
		t.Errorf("follower partition %+v reassignment %+v", follow, f)
	}
	if still.Reassignment != nil || still.LeaderThrottled {
		t.Errorf("partition without reassignment: %+v", still)
	}

	html := get(t, o.Handler(), "/")
	for _, s := range []string{
		`<th class="name">reassignment</th>`,
		`<td class="name reassignment">adding [4,5], removing [3]</td>`,
		`<td class="name throttled">leader</td>`,
		`<td class="name throttled">follower</td>`,
		`data-topic="mv" data-partition="0" data-broker="4"`,
		`adding replica 4: <span class="left">8 records, about 800 bytes left</span> <span class="throttled">(throttled by the leader)</span>`,
		`adding replica 5: <span class="left">10 records, about 1000 bytes left</span>`,
		`leader.replication.throttled.rate 1000 B/s, throttled bytes sent 988 B/s`,
		`follower.replication.throttled.rate unlimited`,
	} {
		if !strings.Contains(html, s) {
			t.Errorf("page lacks %q", s)
		}
	}
	if t.Failed() {
		t.Log(html)
	}
}
