package observe

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/group"
	"github.com/kafkazk/broker/partition"
)

type fakePartitions []partition.ReplicaStatus

func (f fakePartitions) PartitionStatus() []partition.ReplicaStatus { return f }

type fakeController struct {
	active  bool
	offline int
}

func (f fakeController) IsController() bool          { return f.active }
func (f fakeController) OfflinePartitionsCount() int { return f.offline }

type fakeGroups map[string]map[cluster.TopicPartition]group.Offset

func (f fakeGroups) ListGroups() ([]group.GroupListing, error) {
	var out []group.GroupListing
	for g := range f {
		out = append(out, group.GroupListing{Group: g})
	}
	return out, nil
}

func (f fakeGroups) FetchOffsets(g string, _ []cluster.TopicPartition, _ bool) (map[cluster.TopicPartition]group.Offset, error) {
	return f[g], nil
}

var now = time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)

// seed000 is the picture of seed 000: the leader (1) at LEO 5, follower 2
// caught up at 5, follower 3 at 4, all in the ISR, so HW = 4; broker 4 is
// assigned but out of sync.
func seed000() fakePartitions {
	return fakePartitions{
		{TopicPartition: cluster.TopicPartition{Topic: "seed", Partition: 0}, Role: partition.RoleLeader,
			Leader: 1, LeaderEpoch: 3, Replicas: []int32{1, 2, 3, 4}, Isr: []int32{1, 2, 3},
			LogEndOffset: 5, HighWatermark: 4, LastStableOffset: 2, LogStartOffset: 0, LeaderHighWatermark: -1,
			OngoingTxns: []partition.OngoingTxn{
				{ProducerID: 9, ProducerEpoch: 1, FirstOffset: 3, LastTimestamp: 1700000000000},
				{ProducerID: 7, ProducerEpoch: 4, FirstOffset: 2, LastTimestamp: 1700000000001},
			},
			Followers: []partition.FollowerStatus{
				{BrokerID: 2, LogEndOffset: 5, LastCaughtUpTime: now.Add(-100 * time.Millisecond)},
				{BrokerID: 3, LogEndOffset: 4, LastCaughtUpTime: now.Add(-7 * time.Second)},
				{BrokerID: 4, LogEndOffset: -1},
			}},
		{TopicPartition: cluster.TopicPartition{Topic: "seed", Partition: 1}, Role: partition.RoleFollower,
			Leader: 2, LeaderEpoch: 1, Replicas: []int32{2, 1}, Isr: []int32{2, 1},
			LogEndOffset: 7, HighWatermark: 7, LastStableOffset: 7, LeaderHighWatermark: 9, Compacted: true, DirtyRatio: 0.25},
	}
}

type fakeCleaner partition.CleanerStatus

func (f fakeCleaner) CleanerStatus() partition.CleanerStatus { return partition.CleanerStatus(f) }

func newTestObserver() *Observer {
	o := New(Config{BrokerID: 1, ReplicaLagTimeMax: 10 * time.Second, Now: func() time.Time { return now }})
	o.SetSources(Sources{Partitions: seed000(), Controller: fakeController{active: true, offline: 2},
		ProduceWaits: func() int64 { return 3 }, Groups: fakeGroups{"g": {{Topic: "seed", Partition: 1}: {Offset: 2}}},
		Cleaner: fakeCleaner{MaxDirtyPercent: 25, RecopyPercent: 40, MaxCleanTimeSecs: 2, MaxBufferUtilizationPercent: 9,
			DeadThreadCount: 1, Uncleanable: map[string]int{"/data/a": 1}}})
	return o
}

func TestObserveViewSeed000(t *testing.T) {
	v := BuildView(1, true, 10*time.Second, seed000(), now)
	if len(v.Partitions) != 2 {
		t.Fatalf("partitions: %d", len(v.Partitions))
	}
	p := v.Partitions[0]
	if got := formatIDs(p.OSR); got != "[4]" {
		t.Errorf("OSR = %s, want [4]", got)
	}
	if !p.UnderReplicated {
		t.Error("ISR < AR on the leader: want under-replicated")
	}
	type want struct {
		id                   int32
		inISR                bool
		behind, ago, removal string
	}
	wants := []want{
		{2, true, "0", "100", "10000"}, // at the leader's LEO: never removed
		{3, true, "1", "7000", "3000"}, // behind for 7 s of 10
		{4, false, "–", "–", "–"},
	}
	for i, w := range wants {
		f := p.Followers[i]
		got := want{f.BrokerID, f.InISR, optInt(f.RecordsBehind), optInt(f.CaughtUpMsAgo), optInt(f.MsUntilISRRemoval)}
		if got != w {
			t.Errorf("follower %d: got %+v, want %+v", w.id, got, w)
		}
	}
	// The LSO beside the HW, and the open transactions by first offset.
	if p.LastStableOffset != 2 || len(p.OngoingTxns) != 2 || p.OngoingTxns[0].ProducerID != 7 || p.OngoingTxns[0].FirstOffset != 2 ||
		p.OngoingTxns[1].ProducerID != 9 || p.OngoingTxns[1].ProducerEpoch != 1 {
		t.Errorf("LSO %d, ongoing transactions %+v: want 2 and pid 7 at 2, then pid 9 epoch 1 at 3", p.LastStableOffset, p.OngoingTxns)
	}
	if f := v.Partitions[1]; f.OngoingTxns == nil || len(f.OngoingTxns) != 0 || f.LastStableOffset != 7 {
		t.Errorf("follower without open transactions: LSO %d, %v; want 7 and an empty list", f.LastStableOffset, f.OngoingTxns)
	}
	if f := v.Partitions[1]; f.Followers != nil || f.LeaderHighWatermark == nil || *f.LeaderHighWatermark != 9 || len(f.OSR) != 0 {
		t.Errorf("follower view: %+v", f)
	}
}

func get(t *testing.T, h http.Handler, path string) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	if rec.Code != 200 {
		t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
	}
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

func TestObserveMetricNames(t *testing.T) {
	o := newTestObserver()
	o.IsrChanged(cluster.TopicPartition{Topic: "seed"}, false)
	o.IsrChanged(cluster.TopicPartition{Topic: "seed"}, true)
	o.IsrChanged(cluster.TopicPartition{Topic: "seed"}, false)
	o.BytesIn("seed", 100, 4)
	o.BytesOut("seed", 50, false)
	o.BytesOut("seed", 70, true)
	o.LeaderElection(3, 12*time.Millisecond)
	o.UncleanLeaderElection(cluster.TopicPartition{Topic: "seed"})
	o.RequestStart(0)
	o.RequestEnd(0, 3*time.Millisecond)
	o.RequestStart(1) // a Fetch still waiting
	body := get(t, o.Handler(), "/metrics")
	for _, line := range []string{
		"kafka_server_replicamanager_underreplicatedpartitions 1",
		"kafka_server_replicamanager_partitioncount 2",
		"kafka_server_replicamanager_leadercount 1",
		"kafka_server_replicamanager_isrshrinks_total 2",
		"kafka_server_replicamanager_isrexpands_total 1",
		"kafka_controller_kafkacontroller_activecontrollercount 1",
		"kafka_controller_kafkacontroller_offlinepartitionscount 2",
		"kafka_controller_controllerstats_leaderelectionrateandtimems_count 1",
		"kafka_controller_controllerstats_uncleanleaderelections_total 1",
		`kafka_server_brokertopicmetrics_bytesin_total{topic="seed"} 100`,
		`kafka_server_brokertopicmetrics_messagesin_total{topic="seed"} 4`,
		`kafka_server_brokertopicmetrics_bytesout_total{topic="seed"} 50`,
		`kafka_server_brokertopicmetrics_replicationbytesout_total{topic="seed"} 70`,
		`kafka_network_requestmetrics_requests_total{request="Produce"} 1`,
		`kafka_network_requestmetrics_totaltimems_count{request="Produce"} 1`,
		`kafka_network_requestmetrics_requestsinflight{request="Fetch"} 1`,
		`kafka_server_delayedoperationpurgatory_purgatorysize{delayedOperation="Produce"} 3`,
		`kafka_server_delayedoperationpurgatory_purgatorysize{delayedOperation="Fetch"} 1`,
		`kafka_server_fetcherlagmetrics_consumerlag{partition="1",topic="seed"} 2`,
		`kafka_cluster_partition_underreplicated{partition="0",topic="seed"} 1`,
		`kafka_cluster_partition_insyncreplicascount{partition="0",topic="seed"} 3`,
		`kafka_cluster_partition_replicascount{partition="0",topic="seed"} 4`,
		`kafka_log_log_logendoffset{partition="0",topic="seed"} 5`,
		`kafka_cluster_partition_laststableoffsetlag{partition="0",topic="seed"} 2`,
		`kafka_cluster_partition_laststableoffsetlag{partition="1",topic="seed"} 0`,
		`kafka_consumergroup_lag{consumergroup="g",partition="1",topic="seed"} 5`,
		"kafka_log_logcleanermanager_max_dirty_percent 25",
		`kafka_log_logcleanermanager_uncleanable_partitions_count{logDirectory="/data/a"} 1`,
		"kafka_log_logcleaner_cleaner_recopy_percent 40",
		"kafka_log_logcleaner_max_clean_time_secs 2",
		"kafka_log_logcleaner_max_buffer_utilization_percent 9",
		"kafka_log_logcleaner_deadthreadcount 1",
	} {
		if !strings.Contains(body, "\n"+line+"\n") {
			t.Errorf("/metrics lacks %q", line)
		}
	}
	if t.Failed() {
		t.Log(body)
	}
}

func TestObservePartitionsJSONAndPage(t *testing.T) {
	o := newTestObserver()
	var v View
	if err := json.Unmarshal([]byte(get(t, o.Handler(), "/v1/partitions")), &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Partitions) != 2 || v.Partitions[0].HighWatermark != 4 || !v.Controller {
		t.Fatalf("view: %+v", v)
	}
	if v.Partitions[0].DirtyRatio != nil || v.Partitions[1].DirtyRatio == nil || *v.Partitions[1].DirtyRatio != 0.25 {
		t.Errorf("dirty ratios %v, %v: want none for the delete-policy log, 0.25 for the compacted one",
			v.Partitions[0].DirtyRatio, v.Partitions[1].DirtyRatio)
	}
	html := get(t, o.Handler(), "/")
	for _, s := range []string{`<meta http-equiv="refresh"`, `<table id="partitions">`, `data-topic="seed" data-partition="0" data-role="leader"`,
		`<td class="name osr">[4]</td>`, `<td class="hw">4</td>`, `<td class="removal">3000</td>`, `(OSR)`,
		`<th>dirty ratio</th>`, `<td class="dirty">0.25</td>`,
		`<th>HW</th><th>LSO</th>`, `<td class="hw">4</td><td class="lso">2</td>`, `<td class="hw">7</td><td class="lso">7</td>`,
		`data-topic="seed" data-partition="0" data-producer-id="7"`,
		`producer id <span class="pid">7</span>, epoch <span class="pepoch">4</span>, first offset <span class="first">2</span>`,
		`producer id <span class="pid">9</span>, epoch <span class="pepoch">1</span>, first offset <span class="first">3</span>`} {
		if !strings.Contains(html, s) {
			t.Errorf("page lacks %q", s)
		}
	}
	if t.Failed() {
		t.Log(html)
	}
	rec := httptest.NewRecorder()
	o.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/nope", nil))
	if rec.Code != 404 {
		t.Errorf("GET /nope: %d", rec.Code)
	}
}

// stableGroups records the requireStable of each FetchOffsets.
type stableGroups struct {
	fakeGroups
	asked *[]bool
}

func (f stableGroups) FetchOffsets(g string, _ []cluster.TopicPartition, requireStable bool) (map[cluster.TopicPartition]group.Offset, error) {
	*f.asked = append(*f.asked, requireStable)
	return f.fakeGroups[g], nil
}

// TestObserveGroupLagNotRequireStable: the lag gauge asks for committed
// offsets without requiring them stable, so a pending transactional
// commit does not hide a group's lag.
func TestObserveGroupLagNotRequireStable(t *testing.T) {
	const lag = `kafka_consumergroup_lag{consumergroup="g",partition="1",topic="seed"} 5`
	var asked []bool
	o := New(Config{BrokerID: 1, ReplicaLagTimeMax: 10 * time.Second, Now: func() time.Time { return now }})
	o.SetSources(Sources{Partitions: seed000(), Groups: stableGroups{fakeGroups{"g": {{Topic: "seed", Partition: 1}: {Offset: 2}}}, &asked}})
	if !strings.Contains(get(t, o.Handler(), "/metrics"), "\n"+lag+"\n") {
		t.Errorf("lag %q not exported", lag)
	}
	if len(asked) != 1 || asked[0] {
		t.Errorf("requireStable asked %v, want one call with false", asked)
	}
}
