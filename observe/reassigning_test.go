package observe

import (
	"strings"
	"testing"
	"time"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
)

// TestObserveReassigningPartitions: Kafka's ReplicaManager
// ReassigningPartitions counts the partitions this broker leads whose
// adding or removing replicas are non-empty, and follows them.
func TestObserveReassigningPartitions(t *testing.T) {
	parts := seed000()
	o := New(Config{BrokerID: 1, Now: func() time.Time { return now }})
	src := &parts
	o.SetSources(Sources{Partitions: fakePartitionsPtr{src}})
	want := func(n string) {
		t.Helper()
		line := "\nkafka_server_replicamanager_reassigningpartitions " + n + "\n"
		if body := get(t, o.Handler(), "/metrics"); !strings.Contains(body, line) {
			t.Errorf("/metrics lacks %q", strings.TrimSpace(line))
		}
	}
	want("0")
	// A follower's reassignment is its leader's to count.
	(*src)[1].AddingReplicas = []int32{3}
	want("0")
	(*src)[0].AddingReplicas = []int32{5}
	want("1")
	*src = append(*src, partition.ReplicaStatus{TopicPartition: cluster.TopicPartition{Topic: "seed", Partition: 2},
		Role: partition.RoleLeader, Leader: 1, Replicas: []int32{1, 2}, Isr: []int32{1, 2}, RemovingReplicas: []int32{2}, LeaderHighWatermark: -1})
	want("2")
	(*src)[0].AddingReplicas = nil
	want("1")
}

type fakePartitionsPtr struct{ p *fakePartitions }

func (f fakePartitionsPtr) PartitionStatus() []partition.ReplicaStatus { return *f.p }
