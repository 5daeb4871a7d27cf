package protocol

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
)

// fakeControl is the fake cluster's controller operations: it records the
// requests and answers with the errors set per partition.
type fakeControl struct {
	notController bool
	errs          map[cluster.TopicPartition]error
	list          []cluster.PartitionReassignment
	gotAlter      map[cluster.TopicPartition][]int32
	gotList       []cluster.TopicPartition
	gotListAll    bool
	gotElect      []cluster.TopicPartition
	gotElectAll   bool
	gotType       cluster.ElectionType
}

func (c *fakeCluster) AlterPartitionReassignments(_ context.Context, reqs map[cluster.TopicPartition][]int32) (map[cluster.TopicPartition]error, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.control.notController {
		return nil, fmt.Errorf("alter: %w", cluster.ErrNotController)
	}
	c.control.gotAlter = reqs
	out := map[cluster.TopicPartition]error{}
	for tp := range reqs {
		out[tp] = c.control.errs[tp]
	}
	return out, nil
}

func (c *fakeCluster) ListPartitionReassignments(_ context.Context, tps []cluster.TopicPartition) ([]cluster.PartitionReassignment, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.control.notController {
		return nil, fmt.Errorf("list: %w", cluster.ErrNotController)
	}
	c.control.gotList, c.control.gotListAll = tps, tps == nil
	return c.control.list, nil
}

func (c *fakeCluster) ElectLeaders(_ context.Context, typ cluster.ElectionType, tps []cluster.TopicPartition) (map[cluster.TopicPartition]error, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.control.notController {
		return nil, fmt.Errorf("elect: %w", cluster.ErrNotController)
	}
	c.control.gotElect, c.control.gotElectAll, c.control.gotType = tps, tps == nil, typ
	if tps == nil {
		tps = []cluster.TopicPartition{{Topic: "a", Partition: 0}, {Topic: "b", Partition: 1}}
	}
	out := map[cluster.TopicPartition]error{}
	for _, tp := range tps {
		out[tp] = c.control.errs[tp]
	}
	return out, nil
}

var _ ClusterControl = (*fakeCluster)(nil)

func tpOf(t string, p int32) cluster.TopicPartition {
	return cluster.TopicPartition{Topic: t, Partition: p}
}

// TestAlterPartitionReassignmentsKadm: kadm's request reaches the
// controller with targets and cancels (null replicas) told apart, and
// per-partition errors come back with their codes.
func TestAlterPartitionReassignmentsKadm(t *testing.T) {
	b := startBroker(t)
	b.cluster.control.errs = map[cluster.TopicPartition]error{
		tpOf("t", 1): fmt.Errorf("x: %w", cluster.ErrInvalidReplicaAssignment),
		tpOf("t", 2): fmt.Errorf("x: %w", cluster.ErrNoReassignmentInProgress),
		tpOf("u", 0): fmt.Errorf("x: %w", cluster.ErrUnknownTopic),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, b))
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("t", 0, []int32{1, 2, 3})
	req.Assign("t", 1, []int32{})
	req.CancelAssign("t", 2)
	req.Assign("u", 0, []int32{1})
	res, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	got := b.cluster.control.gotAlter
	if !slices.Equal(got[tpOf("t", 0)], []int32{1, 2, 3}) || got[tpOf("t", 1)] == nil || len(got[tpOf("t", 1)]) != 0 ||
		got[tpOf("t", 2)] != nil || len(got) != 4 {
		t.Fatalf("controller got %v", got)
	}
	want := map[cluster.TopicPartition]*kerr.Error{tpOf("t", 0): nil, tpOf("t", 1): kerr.InvalidReplicaAssignment,
		tpOf("t", 2): kerr.NoReassignmentInProgress, tpOf("u", 0): kerr.UnknownTopicOrPartition}
	n := 0
	res.Each(func(r kadm.AlterPartitionAssignmentsResponse) {
		n++
		w := want[tpOf(r.Topic, r.Partition)]
		if (w == nil) != (r.Err == nil) || (w != nil && !errors.Is(r.Err, w)) {
			t.Errorf("%s/%d: err %v, want %v", r.Topic, r.Partition, r.Err, w)
		}
		if w != nil && r.ErrMessage == "" {
			t.Errorf("%s/%d: no error message", r.Topic, r.Partition)
		}
	})
	if n != 4 {
		t.Errorf("%d partitions answered, want 4", n)
	}
}

// TestListPartitionReassignmentsKadm: all (null topics) and named
// partitions, with replicas, adding and removing replicas.
func TestListPartitionReassignmentsKadm(t *testing.T) {
	b := startBroker(t)
	b.cluster.control.list = []cluster.PartitionReassignment{
		{TopicPartition: tpOf("t", 0), Replicas: []int32{3, 1, 2}, AddingReplicas: []int32{3}, RemovingReplicas: []int32{2}},
		{TopicPartition: tpOf("u", 4), Replicas: []int32{1, 2}, AddingReplicas: []int32{2}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Null topics (kafka-reassign-partitions.sh --list; kadm always names
	// partitions): every reassignment.
	c := b.dial(t)
	all := c.roundTrip(kmsg.NewPtrListPartitionReassignmentsRequest()).(*kmsg.ListPartitionReassignmentsResponse)
	if !b.cluster.control.gotListAll {
		t.Errorf("null topics not passed as all: %v", b.cluster.control.gotList)
	}
	if len(all.Topics) != 2 || all.Topics[1].Topic != "u" || len(all.Topics[1].Partitions[0].RemovingReplicas) != 0 {
		t.Errorf("all: %+v", all.Topics)
	}
	adm := kadm.NewClient(newClient(t, b))
	s := make(kadm.TopicsSet)
	s.Add("t", 0, 1)
	res, err := adm.ListPartitionReassignments(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.cluster.control.gotList; b.cluster.control.gotListAll || len(got) != 2 {
		t.Errorf("named partitions: got %v", got)
	}
	r := res["t"][0]
	if !slices.Equal(r.Replicas, []int32{3, 1, 2}) || !slices.Equal(r.AddingReplicas, []int32{3}) || !slices.Equal(r.RemovingReplicas, []int32{2}) {
		t.Errorf("t/0: %+v", r)
	}
}

// TestClusterControlNotController: a broker that is not the controller
// answers the top-level NOT_CONTROLLER (ElectLeaders: for each partition
// too), with no partitions for Alter and List.
func TestClusterControlNotController(t *testing.T) {
	b := startBroker(t)
	b.cluster.control.notController = true
	c := b.dial(t)
	alter := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	at := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	at.Topic = "t"
	ap := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
	ap.Replicas = []int32{1}
	at.Partitions = append(at.Partitions, ap)
	alter.Topics = append(alter.Topics, at)
	if r := c.roundTrip(alter).(*kmsg.AlterPartitionAssignmentsResponse); r.ErrorCode != kerr.NotController.Code || len(r.Topics) != 0 {
		t.Errorf("alter: %+v", r)
	}
	list := kmsg.NewPtrListPartitionReassignmentsRequest()
	if r := c.roundTrip(list).(*kmsg.ListPartitionReassignmentsResponse); r.ErrorCode != kerr.NotController.Code || len(r.Topics) != 0 {
		t.Errorf("list: %+v", r)
	}
	for v := int16(0); v <= 2; v++ {
		el := kmsg.NewPtrElectLeadersRequest()
		el.Version = v
		et := kmsg.NewElectLeadersRequestTopic()
		et.Topic, et.Partitions = "t", []int32{0, 1}
		el.Topics = append(el.Topics, et)
		r := c.roundTrip(el).(*kmsg.ElectLeadersResponse)
		if v >= 1 && r.ErrorCode != kerr.NotController.Code {
			t.Errorf("elect v%d: top-level %d", v, r.ErrorCode)
		}
		if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 2 || r.Topics[0].Partitions[1].ErrorCode != kerr.NotController.Code {
			t.Errorf("elect v%d: %+v", v, r.Topics)
		}
	}
}

// TestElectLeaders: v0 is preferred, v1+ carries the type; null topics
// means all; per-partition errors map to Kafka's codes; an unknown
// election type is INVALID_REQUEST without reaching the controller.
func TestElectLeaders(t *testing.T) {
	b := startBroker(t)
	b.cluster.control.errs = map[cluster.TopicPartition]error{
		tpOf("t", 1): fmt.Errorf("x: %w", cluster.ErrElectionNotNeeded),
		tpOf("t", 2): fmt.Errorf("x: %w", cluster.ErrPreferredLeaderNotAvailable),
		tpOf("t", 3): fmt.Errorf("x: %w", cluster.ErrEligibleLeadersNotAvailable),
		tpOf("t", 4): fmt.Errorf("x: %w", cluster.ErrUnknownTopic),
		tpOf("t", 5): fmt.Errorf("x: %w", cluster.ErrTopicBeingDeleted),
	}
	c := b.dial(t)
	for _, tc := range []struct {
		v   int16
		typ int8
	}{{0, 1}, {1, 1}, {2, 0}} {
		el := kmsg.NewPtrElectLeadersRequest()
		el.Version, el.ElectionType = tc.v, tc.typ
		et := kmsg.NewElectLeadersRequestTopic()
		et.Topic, et.Partitions = "t", []int32{0, 1, 2, 3, 4, 5}
		el.Topics = append(el.Topics, et)
		r := c.roundTrip(el).(*kmsg.ElectLeadersResponse)
		wantType := cluster.ElectionType(tc.typ)
		if tc.v == 0 {
			wantType = cluster.ElectPreferred
		}
		if b.cluster.control.gotType != wantType {
			t.Errorf("v%d: election type %d, want %d", tc.v, b.cluster.control.gotType, wantType)
		}
		want := []int16{0, kerr.ElectionNotNeeded.Code, kerr.PreferredLeaderNotAvailable.Code, kerr.EligibleLeadersNotAvailable.Code,
			kerr.UnknownTopicOrPartition.Code, kerr.InvalidTopicException.Code}
		if r.ErrorCode != 0 || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != len(want) {
			t.Fatalf("v%d: %+v", tc.v, r)
		}
		for i, p := range r.Topics[0].Partitions {
			if p.Partition != int32(i) || p.ErrorCode != want[i] || (want[i] != 0) != (p.ErrorMessage != nil) {
				t.Errorf("v%d: partition %+v, want code %d", tc.v, p, want[i])
			}
		}
	}
	// Null topics: all partitions, sorted.
	el := kmsg.NewPtrElectLeadersRequest()
	el.Version = 2
	r := c.roundTrip(el).(*kmsg.ElectLeadersResponse)
	if !b.cluster.control.gotElectAll || len(r.Topics) != 2 || r.Topics[0].Topic != "a" || r.Topics[1].Topic != "b" {
		t.Errorf("all partitions: got all=%t %+v", b.cluster.control.gotElectAll, r.Topics)
	}
	// An unknown election type.
	b.cluster.control.gotElect = nil
	el = kmsg.NewPtrElectLeadersRequest()
	el.Version, el.ElectionType = 2, 7
	et := kmsg.NewElectLeadersRequestTopic()
	et.Topic, et.Partitions = "t", []int32{0}
	el.Topics = append(el.Topics, et)
	r = c.roundTrip(el).(*kmsg.ElectLeadersResponse)
	if r.ErrorCode != kerr.InvalidRequest.Code || r.Topics[0].Partitions[0].ErrorCode != kerr.InvalidRequest.Code || b.cluster.control.gotElect != nil {
		t.Errorf("election type 7: %+v", r)
	}
}

// TestElectLeadersKadm: kadm's ElectLeaders (v2, to the controller).
func TestElectLeadersKadm(t *testing.T) {
	b := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, b))
	s := make(kadm.TopicsSet)
	s.Add("t", 0)
	res, err := adm.ElectLeaders(ctx, kadm.ElectLiveReplica, s)
	if err != nil {
		t.Fatal(err)
	}
	if r := res["t"][0]; r.Err != nil || b.cluster.control.gotType != cluster.ElectUnclean {
		t.Errorf("t/0: %+v, type %d", r, b.cluster.control.gotType)
	}
}

// TestLeaderAndIsrReassignmentFields: AddingReplicas and RemovingReplicas
// cross the wire from v3 and are dropped below.
func TestLeaderAndIsrReassignmentFields(t *testing.T) {
	for v := int16(0); v <= 4; v++ {
		want := sampleLeaderAndIsr(5, 42)
		want.Partitions[0].Replicas = []int32{3, 1, 2}
		want.Partitions[0].AddingReplicas, want.Partitions[0].RemovingReplicas = []int32{3}, []int32{2}
		kreq, err := leaderAndIsrToKmsg(want, v, "PLAINTEXT")
		if err != nil {
			t.Fatal(err)
		}
		got := kmsg.NewPtrLeaderAndISRRequest()
		got.SetVersion(v)
		if err := got.ReadFrom(kreq.AppendTo(nil)); err != nil {
			t.Fatal(err)
		}
		dec := leaderAndIsrFromKmsg(got, "PLAINTEXT").Partitions[0]
		if v >= 3 && (!slices.Equal(dec.AddingReplicas, []int32{3}) || !slices.Equal(dec.RemovingReplicas, []int32{2})) {
			t.Errorf("v%d: adding %v removing %v", v, dec.AddingReplicas, dec.RemovingReplicas)
		}
		if v < 3 && (dec.AddingReplicas != nil || dec.RemovingReplicas != nil) {
			t.Errorf("v%d carries adding %v removing %v", v, dec.AddingReplicas, dec.RemovingReplicas)
		}
		if other := leaderAndIsrFromKmsg(got, "PLAINTEXT").Partitions[1]; other.AddingReplicas != nil || other.RemovingReplicas != nil {
			t.Errorf("v%d: a partition not being reassigned decodes adding %v removing %v", v, other.AddingReplicas, other.RemovingReplicas)
		}
	}
}

// TestClusterControlAdvertised: ElectLeaders 0-2 and the reassignment keys
// at 0 are served only when Admin implements ClusterControl.
func TestClusterControlAdvertised(t *testing.T) {
	type adminOnly struct{ Admin }
	c := newFakeCluster(newFakeReplicas())
	for _, tc := range []struct {
		admin Admin
		want  bool
	}{{c, true}, {adminOnly{c}, false}} {
		apis := servedAPIs(&Config{Admin: tc.admin})
		for _, k := range []struct{ key, max int16 }{{43, 2}, {45, 0}, {46, 0}} {
			lo, hi, ok := findVersions(apis, k.key)
			if ok != tc.want || (ok && (lo != 0 || hi != k.max)) {
				t.Errorf("admin %T: key %d served %t %d-%d, want %t 0-%d", tc.admin, k.key, ok, lo, hi, tc.want, k.max)
			}
		}
	}
}
