package observe

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/internal/recordcodec"
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

// TestObserveReassignmentFromManager: a real replica manager leading a
// partition that a reassignment adds broker 2 to, throttled as leader:
// the view shows the adding replica's records and bytes left, and the
// metrics its reassignment bytes.
func TestObserveReassignmentFromManager(t *testing.T) {
	o := New(Config{BrokerID: 1, ReplicaLagTimeMax: 10 * time.Second, Now: func() time.Time { return now }})
	m, err := partition.NewManager(partition.Config{BrokerID: 1, LogDirs: []string{filepath.Join(t.TempDir(), "logs")},
		HighWatermarkCheckpointInterval: time.Hour, RecoveryPointCheckpointInterval: time.Hour,
		RetentionCheckInterval: time.Hour, Now: func() time.Time { return now }, Metrics: o,
		Log: zerolog.New(zerolog.NewTestWriter(t))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	o.SetSources(Sources{Partitions: m, Quotas: m})
	m.SetReplicationQuotas(5000, 0)
	tp := cluster.TopicPartition{Topic: "mv", Partition: 0}
	cfg := cluster.DefaultLogConfig()
	cfg.LeaderReplicationThrottledReplicas = "0:1"
	if err := m.ApplyPartitionStates([]partition.PartitionState{{TopicPartition: tp, Replicas: []int32{1, 3, 2},
		LeaderAndIsr: cluster.LeaderAndIsr{Leader: 1, Isr: []int32{1, 3}}, Config: cfg,
		AddingReplicas: []int32{2}, RemovingReplicas: []int32{3}}}); err != nil {
		t.Fatal(err)
	}
	batch := testBatch(4, 100)
	for range 4 {
		// A fresh batch each time: the append assigns offsets in place.
		if _, err := m.Append(tp, testBatch(4, 100), 1); err != nil {
			t.Fatal(err)
		}
	}
	// Broker 2 fetches the first batch (4 records): 12 records left.
	res, err := m.Read(tp, partition.ReadRequest{FetchOffset: 0, MaxBytes: 1, ReplicaID: 2, CurrentLeaderEpoch: -1})
	if err != nil || len(res.Records) != len(batch) || !res.Throttled {
		t.Fatalf("read: %d bytes, throttled %v, err %v", len(res.Records), res.Throttled, err)
	}
	m.RecordLeaderReplication(int64(len(res.Records)))
	// Its next fetch, at 4, tells the leader its LEO (and returns the
	// second batch, not recorded against the quota here).
	if _, err := m.Read(tp, partition.ReadRequest{FetchOffset: 4, MaxBytes: 0, ReplicaID: 2, CurrentLeaderEpoch: -1}); err != nil {
		t.Fatal(err)
	}
	v := o.View()
	r := v.Partitions[0].Reassignment
	if r == nil || len(r.Adding) != 1 {
		t.Fatalf("reassignment view %+v", r)
	}
	want := AddingReplicaView{BrokerID: 2, RecordsLeft: 12, BytesLeft: 3 * int64(len(batch)), Throttled: true}
	if r.Adding[0] != want || r.RemovingReplicas[0] != 3 {
		t.Fatalf("adding %+v removing %v, want %+v and [3]", r.Adding[0], r.RemovingReplicas, want)
	}
	if th := v.ReplicationThrottle; th == nil || th.LeaderRate == nil || *th.LeaderRate != 5000 || th.LeaderByteRate != float64(len(batch)) {
		t.Fatalf("throttle view %+v", th)
	}
	body := get(t, o.Handler(), "/metrics")
	for _, line := range []string{
		fmt.Sprintf("kafka_server_brokertopicmetrics_reassignmentbytesout_total %d", 2*len(batch)),
		"kafka_server_brokertopicmetrics_reassignmentbytesin_total 0",
		fmt.Sprintf("kafka_server_leaderreplication_byte_rate %d", len(batch)),
		"kafka_server_followerreplication_byte_rate 0",
	} {
		if !strings.Contains(body, "\n"+line+"\n") {
			t.Errorf("/metrics lacks %q", line)
		}
	}
	if t.Failed() {
		t.Log(body)
	}
}

// testBatch is a v2 record batch of n records of size-byte values, as a
// producer sends it (base offset 0), with its CRC-32C.
func testBatch(n, size int) []byte {
	b := recordcodec.NewBatch(0)
	for range n {
		b.Records = append(b.Records, recordcodec.Record{Value: make([]byte, size)})
	}
	return recordcodec.MustBatch(b)
}
