package protocol

import (
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
)

// TestFetchLeaderReplicationThrottle: a follower's Fetch of a throttled
// and an unthrottled partition from a real leader Manager over the wire.
// The bytes of the throttled one are recorded once per response (not per
// long-poll re-read); over quota, the throttled partition answers no
// records while the unthrottled one answers as usual.
func TestFetchLeaderReplicationThrottle(t *testing.T) {
	now := time.Unix(1000, 0) // a fixed clock: every record lands in one sample
	leader, err := partition.NewManager(partition.Config{
		BrokerID: 1, LogDirs: []string{filepath.Join(t.TempDir(), "logs")},
		HighWatermarkCheckpointInterval: time.Hour, RecoveryPointCheckpointInterval: time.Hour,
		RetentionCheckInterval: time.Hour, Now: func() time.Time { return now },
		Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = leader.Close() })
	throttledCfg := cluster.DefaultLogConfig()
	throttledCfg.LeaderReplicationThrottledReplicas = "0:1"
	tpT := cluster.TopicPartition{Topic: "t", Partition: 0}
	tpU := cluster.TopicPartition{Topic: "u", Partition: 0}
	lai := cluster.LeaderAndIsr{Leader: 1, LeaderEpoch: 0, Isr: []int32{1}}
	if err := leader.ApplyPartitionStates([]partition.PartitionState{
		{TopicPartition: tpT, Replicas: []int32{1, 2}, LeaderAndIsr: lai, Config: throttledCfg},
		{TopicPartition: tpU, Replicas: []int32{1, 2}, LeaderAndIsr: lai, Config: cluster.DefaultLogConfig()},
	}); err != nil {
		t.Fatal(err)
	}
	for _, tp := range []cluster.TopicPartition{tpT, tpU} {
		if _, err := leader.Append(tp, makeBatch(1, "a", "b", "c"), 1); err != nil {
			t.Fatal(err)
		}
	}
	b := startBroker(t, func(c *Config) { c.Replicas, c.LeaderEpochs = leader, leader })
	conn := b.dial(t)

	fetch := func(maxWait, minBytes int32) map[string]int {
		t.Helper()
		req := fetchRequest(12, maxWait, minBytes, "t", 0, 0)
		req.ReplicaID = 2
		req.MaxBytes = 1 << 20
		u := kmsg.NewFetchRequestTopic()
		u.Topic = "u"
		up := kmsg.NewFetchRequestTopicPartition()
		up.PartitionMaxBytes = 1 << 20
		u.Partitions = append(u.Partitions, up)
		req.Topics = append(req.Topics, u)
		resp := conn.roundTrip(req).(*kmsg.FetchResponse)
		got := map[string]int{}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode != 0 {
					t.Fatalf("%s-%d: error %d", rt.Topic, rp.Partition, rp.ErrorCode)
				}
				got[rt.Topic] = len(rp.RecordBatches)
			}
		}
		return got
	}

	// Unlimited: a long poll with MinBytes out of reach re-reads once
	// when its wait ends; the throttled bytes count once.
	got := fetch(100, 1<<20)
	if got["t"] == 0 || got["u"] == 0 {
		t.Fatalf("unthrottled fetch returned %v", got)
	}
	if l, _ := leader.ReplicationByteRates(); l != float64(got["t"]) {
		t.Fatalf("leader byte rate %v after one response carrying %d throttled bytes", l, got["t"])
	}

	// A bound below what was sent: the throttled partition waits, the
	// other does not, and nothing more is recorded.
	leader.SetReplicationQuotas(int64(got["t"])-1, 0)
	again := fetch(0, 1)
	if again["t"] != 0 || again["u"] != got["u"] {
		t.Fatalf("over quota: fetch returned %v, want t empty and u %d bytes", again, got["u"])
	}
	if l, _ := leader.ReplicationByteRates(); l != float64(got["t"]) {
		t.Fatalf("leader byte rate %v, want %d", l, got["t"])
	}

	// Raised at any time: the next fetch gets the throttled data.
	leader.SetReplicationQuotas(math.MaxInt64, 0)
	if again := fetch(0, 1); again["t"] != got["t"] {
		t.Fatalf("after the quota was raised: %v", again)
	}
}
