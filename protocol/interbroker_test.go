package protocol

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
)

// newBrokerClient returns a client whose Resolve knows broker b as id 1
// on the PLAINTEXT listener.
func newBrokerClient(t *testing.T, b *testBroker) *BrokerClient {
	t.Helper()
	c := NewBrokerClient(ClientConfig{
		BrokerID:     2,
		ListenerName: "PLAINTEXT",
		Resolve: func(id int32) (cluster.Broker, bool) {
			if id != 1 {
				return cluster.Broker{}, false
			}
			return b.self(), true
		},
		RequestTimeout: 10 * time.Second,
		Log:            zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel),
	})
	t.Cleanup(c.Close)
	return c
}

// self is the test broker as the controller would address it.
func (b *testBroker) self() cluster.Broker {
	host, _, _ := net.SplitHostPort(b.addr)
	return cluster.Broker{ID: 1, Endpoints: []cluster.Endpoint{
		{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: host, Port: b.port},
	}}
}

func plaintext(id int32, host string, port int32) cluster.Broker {
	return cluster.Broker{ID: id, Endpoints: []cluster.Endpoint{{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: host, Port: port}}}
}

// sampleLeaderAndIsr uses every field the wire carries, grouped by topic
// (the order v2+ encodes in), and in the normal form decoding produces.
func sampleLeaderAndIsr(controllerEpoch int32, brokerEpoch int64) cluster.LeaderAndIsrRequest {
	return cluster.LeaderAndIsrRequest{
		ControllerID:    3,
		ControllerEpoch: controllerEpoch,
		BrokerEpoch:     brokerEpoch,
		Partitions: []cluster.PartitionAssignment{
			{
				TopicPartition: cluster.TopicPartition{Topic: "a", Partition: 0},
				Replicas:       []int32{1, 2, 3},
				LeaderAndIsr:   cluster.LeaderAndIsr{Leader: 1, LeaderEpoch: 7, Isr: []int32{1, 2}, ControllerEpoch: 4, ZkVersion: 11},
				IsNew:          true,
			},
			{
				TopicPartition: cluster.TopicPartition{Topic: "a", Partition: 2},
				Replicas:       []int32{2, 1},
				LeaderAndIsr:   cluster.LeaderAndIsr{Leader: 2, LeaderEpoch: 0, Isr: []int32{2}, ControllerEpoch: 3, ZkVersion: 0},
			},
			{
				TopicPartition: cluster.TopicPartition{Topic: "b", Partition: 1},
				Replicas:       []int32{1},
				LeaderAndIsr:   cluster.LeaderAndIsr{Leader: -1, LeaderEpoch: 9, Isr: []int32{1}, ControllerEpoch: 5, ZkVersion: 3},
			},
		},
		LiveLeaders: []cluster.Broker{plaintext(1, "h1", 9092), plaintext(2, "h2", 9093)},
	}
}

func rack(s string) *string { return &s }

func sampleUpdateMetadata(controllerEpoch int32, brokerEpoch int64) cluster.UpdateMetadataRequest {
	return cluster.UpdateMetadataRequest{
		ControllerID:    3,
		ControllerEpoch: controllerEpoch,
		BrokerEpoch:     brokerEpoch,
		Partitions: []cluster.TopicPartitionInfo{
			{Topic: "a", PartitionInfo: cluster.PartitionInfo{
				Partition: 0, Replicas: []int32{1, 2, 3},
				State:   cluster.LeaderAndIsr{Leader: 1, LeaderEpoch: 7, Isr: []int32{1, 2}, ControllerEpoch: 4, ZkVersion: 11},
				Offline: []int32{3},
			}},
			{Topic: "b", PartitionInfo: cluster.PartitionInfo{
				Partition: 5, Replicas: []int32{2},
				State: cluster.LeaderAndIsr{Leader: -2, LeaderEpoch: 1, Isr: []int32{2}, ControllerEpoch: 4, ZkVersion: 2},
			}},
		},
		LiveBrokers: []cluster.Broker{
			{ID: 1, Endpoints: []cluster.Endpoint{
				{Listener: "INTERNAL", SecurityProtocol: "PLAINTEXT", Host: "10.0.0.1", Port: 9091},
				{Listener: "EXTERNAL", SecurityProtocol: "SSL", Host: "broker1.example", Port: 9093},
			}, Rack: rack("r1")},
			{ID: 2, Endpoints: []cluster.Endpoint{{Listener: "INTERNAL", SecurityProtocol: "PLAINTEXT", Host: "10.0.0.2", Port: 9091}}},
		},
	}
}

func sampleStopReplica(controllerEpoch int32, brokerEpoch int64) cluster.StopReplicaRequest {
	return cluster.StopReplicaRequest{
		ControllerID:     3,
		ControllerEpoch:  controllerEpoch,
		BrokerEpoch:      brokerEpoch,
		DeletePartitions: true,
		Partitions:       []cluster.TopicPartition{{Topic: "a", Partition: 0}, {Topic: "a", Partition: 3}, {Topic: "c", Partition: 1}},
		LeaderEpochs:     map[cluster.TopicPartition]int32{{Topic: "a", Partition: 0}: 8, {Topic: "c", Partition: 1}: -2},
	}
}

// interBrokerSeeds are populated requests of the new keys, for the fuzzer.
func interBrokerSeeds() []kmsg.Request {
	var out []kmsg.Request
	for v := int16(0); v <= 4; v++ {
		r, _ := leaderAndIsrToKmsg(sampleLeaderAndIsr(5, 42), v, "PLAINTEXT")
		out = append(out, r)
	}
	for v := int16(0); v <= 3; v++ {
		out = append(out, stopReplicaToKmsg(sampleStopReplica(5, 42), v))
	}
	for v := int16(0); v <= 6; v++ {
		out = append(out, updateMetadataToKmsg(sampleUpdateMetadata(5, 42), v))
	}
	for v := int16(0); v <= 4; v++ {
		r := kmsg.NewPtrOffsetForLeaderEpochRequest()
		r.Version, r.ReplicaID = v, 2
		t := kmsg.NewOffsetForLeaderEpochRequestTopic()
		t.Topic = "a"
		t.Partitions = []kmsg.OffsetForLeaderEpochRequestTopicPartition{{Partition: 0, CurrentLeaderEpoch: 3, LeaderEpoch: 2}}
		r.Topics = append(r.Topics, t)
		out = append(out, r)
	}
	return out
}

// TestControlCodecsEveryVersion encodes the sample requests at every
// served version, decodes the bytes, and checks that what comes out is
// what was sent, less what the version cannot carry.
func TestControlCodecsEveryVersion(t *testing.T) {
	wire := func(t *testing.T, in, out kmsg.Request) {
		t.Helper()
		out.SetVersion(in.GetVersion())
		if err := out.ReadFrom(in.AppendTo(nil)); err != nil {
			t.Fatal(err)
		}
	}
	for v := int16(0); v <= 4; v++ {
		t.Run(fmt.Sprintf("LeaderAndIsr/v%d", v), func(t *testing.T) {
			want := sampleLeaderAndIsr(5, 42)
			kreq, err := leaderAndIsrToKmsg(want, v, "PLAINTEXT")
			if err != nil {
				t.Fatal(err)
			}
			got := kmsg.NewPtrLeaderAndISRRequest()
			wire(t, kreq, got)
			if v < 2 {
				want.BrokerEpoch = -1
			}
			if v < 1 {
				want.Partitions[0].IsNew = false
			}
			if dec := leaderAndIsrFromKmsg(got, "PLAINTEXT"); !reflect.DeepEqual(dec, want) {
				t.Fatalf("decoded\n%+v\nwant\n%+v", dec, want)
			}
		})
	}
	for v := int16(0); v <= 6; v++ {
		t.Run(fmt.Sprintf("UpdateMetadata/v%d", v), func(t *testing.T) {
			want := sampleUpdateMetadata(5, 42)
			got := kmsg.NewPtrUpdateMetadataRequest()
			wire(t, updateMetadataToKmsg(want, v), got)
			if v < 5 {
				want.BrokerEpoch = -1
			}
			if v < 4 {
				want.Partitions[0].Offline = nil
			}
			switch {
			case v == 0:
				want.LiveBrokers[0].Endpoints = []cluster.Endpoint{{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: "10.0.0.1", Port: 9091}}
				want.LiveBrokers[1].Endpoints = []cluster.Endpoint{{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: "10.0.0.2", Port: 9091}}
			case v < 3:
				for i := range want.LiveBrokers {
					for j := range want.LiveBrokers[i].Endpoints {
						e := &want.LiveBrokers[i].Endpoints[j]
						e.Listener = e.SecurityProtocol
					}
				}
			}
			if v < 2 {
				want.LiveBrokers[0].Rack = nil
			}
			if dec := updateMetadataFromKmsg(got); !reflect.DeepEqual(dec, want) {
				t.Fatalf("decoded\n%+v\nwant\n%+v", dec, want)
			}
		})
	}
	for v := int16(0); v <= 3; v++ {
		t.Run(fmt.Sprintf("StopReplica/v%d", v), func(t *testing.T) {
			want := sampleStopReplica(5, 42)
			got := kmsg.NewPtrStopReplicaRequest()
			wire(t, stopReplicaToKmsg(want, v), got)
			if v < 1 {
				want.BrokerEpoch = -1
			}
			if v < 3 {
				want.LeaderEpochs = nil
			}
			calls, order := stopReplicaFromKmsg(got)
			if len(calls) != 1 || !reflect.DeepEqual(calls[0], want) {
				t.Fatalf("decoded\n%+v\nwant\n%+v", calls, want)
			}
			if !reflect.DeepEqual(order, want.Partitions) {
				t.Fatalf("order %v", order)
			}
		})
	}
}

func TestLeaderAndIsrRoundTrip(t *testing.T) {
	b := startBroker(t)
	c := newBrokerClient(t, b)
	sent := sampleLeaderAndIsr(5, 42)
	sent.LiveLeaders = []cluster.Broker{b.self(), plaintext(2, "h2", 9093)}
	b.control.set(map[cluster.TopicPartition]error{{Topic: "a", Partition: 2}: partition.ErrStorage}, nil)
	if err := c.LeaderAndIsr(context.Background(), b.self(), sent); err != nil {
		t.Fatal(err)
	}
	if len(b.control.leaderAndIsr) != 1 {
		t.Fatalf("%d calls", len(b.control.leaderAndIsr))
	}
	if got := b.control.leaderAndIsr[0]; !reflect.DeepEqual(got, sent) {
		t.Fatalf("decoded\n%+v\nsent\n%+v", got, sent)
	}

	// The per-partition codes, by hand.
	raw := b.dial(t)
	kreq, _ := leaderAndIsrToKmsg(sent, 4, "PLAINTEXT")
	resp := raw.roundTrip(kreq).(*kmsg.LeaderAndISRResponse)
	codes := map[string]int16{}
	for _, p := range resp.Partitions {
		codes[fmt.Sprintf("%s-%d", p.Topic, p.Partition)] = p.ErrorCode
	}
	want := map[string]int16{"a-0": 0, "a-2": kerr.KafkaStorageError.Code, "b-1": 0}
	if resp.ErrorCode != 0 || !reflect.DeepEqual(codes, want) {
		t.Fatalf("top %d, partitions %v, want %v", resp.ErrorCode, codes, want)
	}
}

func TestUpdateMetadataRoundTrip(t *testing.T) {
	b := startBroker(t)
	c := newBrokerClient(t, b)
	sent := sampleUpdateMetadata(5, 42)
	if err := c.UpdateMetadata(context.Background(), b.self(), sent); err != nil {
		t.Fatal(err)
	}
	if got := b.control.updateMetadata[0]; !reflect.DeepEqual(got, sent) {
		t.Fatalf("decoded\n%+v\nsent\n%+v", got, sent)
	}
	// An error of the control plane is the response's code.
	b.control.set(nil, partition.ErrStorage)
	err := c.UpdateMetadata(context.Background(), b.self(), sent)
	if !errors.Is(err, kerr.KafkaStorageError) || !errors.Is(err, partition.ErrStorage) {
		t.Fatalf("err %v", err)
	}
}

func TestStopReplicaRoundTrip(t *testing.T) {
	b := startBroker(t)
	c := newBrokerClient(t, b)
	sent := sampleStopReplica(5, 42)
	if err := c.StopReplica(context.Background(), b.self(), sent); err != nil {
		t.Fatal(err)
	}
	if got := b.control.stopReplica[0]; !reflect.DeepEqual(got, sent) {
		t.Fatalf("decoded\n%+v\nsent\n%+v", got, sent)
	}

	// v3 mixing deletion and not: two calls, non-deleting first; fenced
	// epochs answer per partition.
	b.control.set(map[cluster.TopicPartition]error{{Topic: "x", Partition: 1}: partition.ErrFencedLeaderEpoch}, nil)
	req := kmsg.NewPtrStopReplicaRequest()
	req.Version, req.ControllerID, req.ControllerEpoch, req.BrokerEpoch = 3, 3, 5, -1
	kt := kmsg.NewStopReplicaRequestTopic()
	kt.Topic = "x"
	kt.PartitionStates = []kmsg.StopReplicaRequestTopicPartitionState{
		{Partition: 0, LeaderEpoch: -2, Delete: true},
		{Partition: 1, LeaderEpoch: 4, Delete: false},
	}
	req.Topics = append(req.Topics, kt)
	resp := b.dial(t).roundTrip(req).(*kmsg.StopReplicaResponse)
	if resp.ErrorCode != 0 || len(resp.Partitions) != 2 || resp.Partitions[0].ErrorCode != 0 || resp.Partitions[1].ErrorCode != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("response %+v", resp)
	}
	calls := b.control.stopReplica[1:]
	x0, x1 := cluster.TopicPartition{Topic: "x", Partition: 0}, cluster.TopicPartition{Topic: "x", Partition: 1}
	want := []cluster.StopReplicaRequest{
		{ControllerID: 3, ControllerEpoch: 5, BrokerEpoch: -1, Partitions: []cluster.TopicPartition{x1}, LeaderEpochs: map[cluster.TopicPartition]int32{x1: 4}},
		{ControllerID: 3, ControllerEpoch: 5, BrokerEpoch: -1, DeletePartitions: true, Partitions: []cluster.TopicPartition{x0}, LeaderEpochs: map[cluster.TopicPartition]int32{x0: -2}},
	}
	if !reflect.DeepEqual(calls, want) {
		t.Fatalf("calls\n%+v\nwant\n%+v", calls, want)
	}
}

func TestControlledShutdownRoundTrip(t *testing.T) {
	b := startBroker(t)
	c := newBrokerClient(t, b)
	b.control.remaining = []cluster.TopicPartition{{Topic: "a", Partition: 1}, {Topic: "b", Partition: 0}}
	got, err := c.ControlledShutdown(context.Background(), b.self(), 2, 77)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, b.control.remaining) {
		t.Fatalf("remaining %v", got)
	}
	if want := (fakeShutdown{2, 77}); b.control.shutdowns[0] != want {
		t.Fatalf("call %+v", b.control.shutdowns[0])
	}

	// v0 has a header without a client id; v0/v1 carry no broker epoch.
	for v := int16(0); v <= 1; v++ {
		req := kmsg.NewPtrControlledShutdownRequest()
		req.Version, req.BrokerID = v, 9
		resp := b.dial(t).roundTrip(req).(*kmsg.ControlledShutdownResponse)
		if resp.ErrorCode != 0 || len(resp.PartitionsRemaining) != 2 {
			t.Fatalf("v%d: %+v", v, resp)
		}
		if want := (fakeShutdown{9, -1}); b.control.shutdowns[len(b.control.shutdowns)-1] != want {
			t.Fatalf("v%d call %+v", v, b.control.shutdowns)
		}
	}

	for _, e := range []error{cluster.ErrNotController, cluster.ErrStaleBrokerEpoch, cluster.ErrBrokerNotAvailable} {
		b.control.set(nil, fmt.Errorf("wrapped: %w", e))
		if _, err := c.ControlledShutdown(context.Background(), b.self(), 2, 77); !errors.Is(err, e) {
			t.Errorf("%v: got %v", e, err)
		}
	}
}

// TestControllerEpochFencing: the highest controller epoch seen is shared
// by LeaderAndIsr, StopReplica and UpdateMetadata.
func TestControllerEpochFencing(t *testing.T) {
	b := startBroker(t)
	c := newBrokerClient(t, b)
	ctx := context.Background()
	if err := c.LeaderAndIsr(ctx, b.self(), sampleLeaderAndIsr(5, 42)); err != nil {
		t.Fatal(err)
	}
	if err := c.UpdateMetadata(ctx, b.self(), sampleUpdateMetadata(4, 42)); !errors.Is(err, cluster.ErrStaleControllerEpoch) {
		t.Fatalf("UpdateMetadata epoch 4 after 5: %v", err)
	}
	if err := c.StopReplica(ctx, b.self(), sampleStopReplica(4, 42)); !errors.Is(err, cluster.ErrStaleControllerEpoch) {
		t.Fatalf("StopReplica epoch 4 after 5: %v", err)
	}
	if err := c.LeaderAndIsr(ctx, b.self(), sampleLeaderAndIsr(4, 42)); !errors.Is(err, cluster.ErrStaleControllerEpoch) {
		t.Fatalf("LeaderAndIsr epoch 4 after 5: %v", err)
	}
	// Every partition of a refused LeaderAndIsr carries the error too.
	kreq, _ := leaderAndIsrToKmsg(sampleLeaderAndIsr(4, 42), 1, "PLAINTEXT")
	resp := b.dial(t).roundTrip(kreq).(*kmsg.LeaderAndISRResponse)
	if resp.ErrorCode != kerr.StaleControllerEpoch.Code || len(resp.Partitions) != 3 {
		t.Fatalf("response %+v", resp)
	}
	for _, p := range resp.Partitions {
		if p.ErrorCode != kerr.StaleControllerEpoch.Code {
			t.Fatalf("partition %+v", p)
		}
	}
	if err := c.UpdateMetadata(ctx, b.self(), sampleUpdateMetadata(6, 42)); err != nil {
		t.Fatalf("newer epoch: %v", err)
	}
	if err := c.StopReplica(ctx, b.self(), sampleStopReplica(5, 42)); !errors.Is(err, cluster.ErrStaleControllerEpoch) {
		t.Fatalf("StopReplica epoch 5 after 6: %v", err)
	}
	if n, m, s := len(b.control.leaderAndIsr), len(b.control.updateMetadata), len(b.control.stopReplica); n != 1 || m != 1 || s != 0 {
		t.Fatalf("refused requests reached the control plane: %d %d %d", n, m, s)
	}
}

func TestBrokerEpochFencing(t *testing.T) {
	b := startBroker(t) // current broker epoch 42
	c := newBrokerClient(t, b)
	ctx := context.Background()
	for _, tc := range []struct {
		epoch int64
		stale bool
	}{{41, true}, {42, false}, {43, false}, {-1, false}} {
		err := c.LeaderAndIsr(ctx, b.self(), sampleLeaderAndIsr(5, tc.epoch))
		if tc.stale != errors.Is(err, cluster.ErrStaleBrokerEpoch) || !tc.stale && err != nil {
			t.Errorf("LeaderAndIsr broker epoch %d: %v", tc.epoch, err)
		}
		err = c.UpdateMetadata(ctx, b.self(), sampleUpdateMetadata(5, tc.epoch))
		if tc.stale != errors.Is(err, cluster.ErrStaleBrokerEpoch) || !tc.stale && err != nil {
			t.Errorf("UpdateMetadata broker epoch %d: %v", tc.epoch, err)
		}
		err = c.StopReplica(ctx, b.self(), sampleStopReplica(5, tc.epoch))
		if tc.stale != errors.Is(err, cluster.ErrStaleBrokerEpoch) || !tc.stale && err != nil {
			t.Errorf("StopReplica broker epoch %d: %v", tc.epoch, err)
		}
	}
	// Versions without a broker epoch are not checked.
	kreq, _ := leaderAndIsrToKmsg(sampleLeaderAndIsr(5, 41), 1, "PLAINTEXT")
	if resp := b.dial(t).roundTrip(kreq).(*kmsg.LeaderAndISRResponse); resp.ErrorCode != 0 {
		t.Fatalf("v1: %d", resp.ErrorCode)
	}
	// The broker re-registered: the old epoch is now stale.
	b.brokerEpoch.Store(50)
	if err := c.UpdateMetadata(ctx, b.self(), sampleUpdateMetadata(5, 42)); !errors.Is(err, cluster.ErrStaleBrokerEpoch) {
		t.Fatalf("after re-registration: %v", err)
	}
}

// TestControlBeforeRegistration: before this broker has registered
// (broker epoch 0) no controller request can be meant for it, whatever
// epoch it carries, and in Kafka none is even read (the socket server
// starts after registerBroker). They answer BROKER_NOT_AVAILABLE, which the
// controller retries: a controller that saw the new registration before
// this broker learnt its epoch gets through on a later attempt.
func TestControlBeforeRegistration(t *testing.T) {
	b := startBroker(t)
	b.brokerEpoch.Store(0)
	c := newBrokerClient(t, b)
	ctx := context.Background()
	for _, epoch := range []int64{42, -1, 0} {
		if err := c.LeaderAndIsr(ctx, b.self(), sampleLeaderAndIsr(5, epoch)); !errors.Is(err, cluster.ErrBrokerNotAvailable) {
			t.Errorf("LeaderAndIsr broker epoch %d before registration: %v", epoch, err)
		}
		if err := c.UpdateMetadata(ctx, b.self(), sampleUpdateMetadata(5, epoch)); !errors.Is(err, cluster.ErrBrokerNotAvailable) {
			t.Errorf("UpdateMetadata broker epoch %d before registration: %v", epoch, err)
		}
		if err := c.StopReplica(ctx, b.self(), sampleStopReplica(5, epoch)); !errors.Is(err, cluster.ErrBrokerNotAvailable) {
			t.Errorf("StopReplica broker epoch %d before registration: %v", epoch, err)
		}
	}
	// Versions without a broker epoch too.
	kreq, _ := leaderAndIsrToKmsg(sampleLeaderAndIsr(5, 42), 1, "PLAINTEXT")
	resp := b.dial(t).roundTrip(kreq).(*kmsg.LeaderAndISRResponse)
	if resp.ErrorCode != kerr.BrokerNotAvailable.Code || len(resp.Partitions) != 3 || resp.Partitions[0].ErrorCode != kerr.BrokerNotAvailable.Code {
		t.Fatalf("LeaderAndIsr v1 before registration: %+v", resp)
	}
	if n, m, s := len(b.control.leaderAndIsr), len(b.control.updateMetadata), len(b.control.stopReplica); n != 0 || m != 0 || s != 0 {
		t.Fatalf("requests before registration reached the control plane: %d %d %d", n, m, s)
	}
	b.brokerEpoch.Store(42)
	if err := c.LeaderAndIsr(ctx, b.self(), sampleLeaderAndIsr(5, 42)); err != nil {
		t.Fatalf("after registration: %v", err)
	}
}

// TestLeaderAndIsrRefusesNoZkVersion: a partition state without a
// zkVersion (-1) would make the leader's conditional ISR write
// unconditional; it is refused with INVALID_REQUEST for that partition
// alone and never reaches the control plane.
func TestLeaderAndIsrRefusesNoZkVersion(t *testing.T) {
	b := startBroker(t)
	sent := sampleLeaderAndIsr(5, 42)
	sent.Partitions[1].LeaderAndIsr.ZkVersion = -1 // a-2
	kreq, _ := leaderAndIsrToKmsg(sent, 4, "PLAINTEXT")
	resp := b.dial(t).roundTrip(kreq).(*kmsg.LeaderAndISRResponse)
	codes := map[string]int16{}
	for _, p := range resp.Partitions {
		codes[fmt.Sprintf("%s-%d", p.Topic, p.Partition)] = p.ErrorCode
	}
	want := map[string]int16{"a-0": 0, "a-2": kerr.InvalidRequest.Code, "b-1": 0}
	if resp.ErrorCode != 0 || !reflect.DeepEqual(codes, want) {
		t.Fatalf("top %d, partitions %v, want %v", resp.ErrorCode, codes, want)
	}
	if len(b.control.leaderAndIsr) != 1 {
		t.Fatalf("%d calls", len(b.control.leaderAndIsr))
	}
	for _, p := range b.control.leaderAndIsr[0].Partitions {
		if p.LeaderAndIsr.ZkVersion < 0 {
			t.Fatalf("the control plane got %+v", p)
		}
	}
	if n := len(b.control.leaderAndIsr[0].Partitions); n != 2 {
		t.Fatalf("the control plane got %d partitions, want 2", n)
	}
}

func TestFollowerFetch(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "t", 2)
	c := newBrokerClient(t, b)
	rc := b.dial(t)
	rc.roundTrip(produceRequest(9, 1, 1000, "t", 0, makeBatch(0, "a", "b")))
	b.replicas.setHoldHW(true)
	rc.roundTrip(produceRequest(9, 1, 1000, "t", 0, makeBatch(0, "c")))
	b.replicas.mu.Lock()
	b.replicas.parts[cluster.TopicPartition{Topic: "t", Partition: 0}].start = 1
	b.replicas.readErr = map[cluster.TopicPartition]error{{Topic: "t", Partition: 1}: partition.ErrFencedLeaderEpoch}
	b.replicas.reads = nil
	b.replicas.mu.Unlock()

	t0, t1 := cluster.TopicPartition{Topic: "t", Partition: 0}, cluster.TopicPartition{Topic: "t", Partition: 1}
	gone := cluster.TopicPartition{Topic: "gone", Partition: 0}
	resp, err := c.Fetch(context.Background(), 1, partition.FetchRequest{
		ReplicaID: 2, MaxWait: 10 * time.Millisecond, MinBytes: 1, MaxBytes: 1 << 20,
		Partitions: []partition.FetchPartition{
			{TopicPartition: t0, FetchOffset: 0, CurrentLeaderEpoch: 3, LogStartOffset: 0, MaxBytes: 1 << 20},
			{TopicPartition: t1, FetchOffset: 0, CurrentLeaderEpoch: 2, LogStartOffset: 0, MaxBytes: 1 << 20},
			{TopicPartition: gone, FetchOffset: 0, CurrentLeaderEpoch: -1, MaxBytes: 1 << 20},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	r0 := resp.Partitions[t0]
	if r0.Err != nil || r0.HighWatermark != 2 || r0.LogStartOffset != 1 {
		t.Fatalf("t-0: %+v", r0)
	}
	// A follower reads past the high watermark, up to the log end.
	if n := countBatches(t, r0.Records); n != 2 {
		t.Fatalf("t-0: %d batches, want 2 (one above HW)", n)
	}
	if r1 := resp.Partitions[t1]; !errors.Is(r1.Err, partition.ErrFencedLeaderEpoch) || r1.HighWatermark != -1 {
		t.Fatalf("t-1: %+v", r1)
	}
	if rg := resp.Partitions[gone]; !errors.Is(rg.Err, partition.ErrUnknownTopicOrPartition) {
		t.Fatalf("gone-0: %+v", rg)
	}
	b.replicas.mu.Lock()
	reads := b.replicas.reads
	b.replicas.mu.Unlock()
	if len(reads) < 3 {
		t.Fatalf("%d reads", len(reads))
	}
	got := reads[0].req
	got.Buf = nil // the server's pooled read buffer
	if want := (partition.ReadRequest{FetchOffset: 0, MaxBytes: 1 << 20, ReplicaID: 2, CurrentLeaderEpoch: 3}); reads[0].tp != t0 || !reflect.DeepEqual(got, want) {
		t.Fatalf("read %+v, want %+v", reads[0], want)
	}

	// Offset out of range maps back.
	resp, err = c.Fetch(context.Background(), 1, partition.FetchRequest{ReplicaID: 2, MaxBytes: 1 << 20,
		Partitions: []partition.FetchPartition{{TopicPartition: t0, FetchOffset: 99, CurrentLeaderEpoch: -1, MaxBytes: 1 << 20}}})
	if err != nil || !errors.Is(resp.Partitions[t0].Err, partition.ErrOffsetOutOfRange) || !errors.Is(resp.Partitions[t0].Err, kerr.OffsetOutOfRange) {
		t.Fatalf("out of range: %v %+v", err, resp)
	}
	// An unknown leader.
	if _, err := c.Fetch(context.Background(), 7, partition.FetchRequest{}); !errors.Is(err, cluster.ErrBrokerNotAvailable) {
		t.Fatalf("unknown leader: %v", err)
	}
}

func countBatches(t *testing.T, b []byte) int {
	t.Helper()
	n := 0
	for len(b) > 0 {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b); err != nil {
			t.Fatal(err)
		}
		b = b[12+int(rb.Length):]
		n++
	}
	return n
}

func TestOffsetsForLeaderEpochRoundTrip(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "t", 1)
	c := newBrokerClient(t, b)
	tp := func(topic string, p int32) cluster.TopicPartition {
		return cluster.TopicPartition{Topic: topic, Partition: p}
	}
	b.epochs.answers[tp("a", 0)] = fakeEpochAnswer{epoch: 3, end: 120}
	b.epochs.answers[tp("a", 1)] = fakeEpochAnswer{err: partition.ErrFencedLeaderEpoch}
	b.epochs.answers[tp("b", 0)] = fakeEpochAnswer{err: partition.ErrUnknownLeaderEpoch}
	b.epochs.answers[tp("b", 1)] = fakeEpochAnswer{err: partition.ErrNotLeader}
	qs := []partition.EpochQuery{
		{TopicPartition: tp("a", 0), CurrentLeaderEpoch: 4, LeaderEpoch: 3},
		{TopicPartition: tp("b", 0), CurrentLeaderEpoch: 9, LeaderEpoch: 8},
		{TopicPartition: tp("a", 1), CurrentLeaderEpoch: 1, LeaderEpoch: 1},
		{TopicPartition: tp("b", 1), CurrentLeaderEpoch: -1, LeaderEpoch: 0},
		{TopicPartition: tp("t", 0), CurrentLeaderEpoch: -1, LeaderEpoch: 0}, // known, no replica here
		{TopicPartition: tp("zz", 0), CurrentLeaderEpoch: -1, LeaderEpoch: 0},
	}
	got, err := c.OffsetsForLeaderEpoch(context.Background(), 1, qs)
	if err != nil {
		t.Fatal(err)
	}
	wantErrs := []error{nil, partition.ErrUnknownLeaderEpoch, partition.ErrFencedLeaderEpoch, partition.ErrNotLeader, partition.ErrNotLeader, partition.ErrUnknownTopicOrPartition}
	for i, a := range got {
		if a.TopicPartition != qs[i].TopicPartition {
			t.Fatalf("answer %d for %v, want %v", i, a.TopicPartition, qs[i].TopicPartition)
		}
		if wantErrs[i] == nil {
			if a.Err != nil || a.LeaderEpoch != 3 || a.EndOffset != 120 {
				t.Fatalf("answer %d: %+v", i, a)
			}
			continue
		}
		if !errors.Is(a.Err, wantErrs[i]) || a.LeaderEpoch != -1 || a.EndOffset != -1 {
			t.Errorf("answer %d: %+v, want %v", i, a, wantErrs[i])
		}
	}
	b.epochs.mu.Lock()
	first := b.epochs.calls[0]
	b.epochs.mu.Unlock()
	if want := (fakeEpochCall{tp("a", 0), 4, 3}); first != want {
		t.Fatalf("call %+v, want %+v", first, want)
	}

	// v0/v1 carry no current epoch: no check (-1); v0 answers no epoch.
	for v := int16(0); v <= 1; v++ {
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.Version = v
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = "a"
		rt.Partitions = []kmsg.OffsetForLeaderEpochRequestTopicPartition{{Partition: 0, CurrentLeaderEpoch: 77, LeaderEpoch: 3}}
		req.Topics = append(req.Topics, rt)
		resp := b.dial(t).roundTrip(req).(*kmsg.OffsetForLeaderEpochResponse)
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.EndOffset != 120 || (v >= 1 && p.LeaderEpoch != 3) {
			t.Fatalf("v%d: %+v", v, p)
		}
		b.epochs.mu.Lock()
		last := b.epochs.calls[len(b.epochs.calls)-1]
		b.epochs.mu.Unlock()
		if last.current != -1 {
			t.Fatalf("v%d: current epoch %d passed", v, last.current)
		}
	}
}

// TestControlNotBehindFetch: a long-polling follower fetch does not delay
// a LeaderAndIsr to the same broker.
func TestControlNotBehindFetch(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "t", 1)
	c := newBrokerClient(t, b)
	done := make(chan error, 1)
	go func() {
		_, err := c.Fetch(context.Background(), 1, partition.FetchRequest{ReplicaID: 2, MaxWait: 3 * time.Second, MinBytes: 1, MaxBytes: 1 << 20,
			Partitions: []partition.FetchPartition{{TopicPartition: cluster.TopicPartition{Topic: "t", Partition: 0}, CurrentLeaderEpoch: -1, MaxBytes: 1 << 20}}})
		done <- err
	}()
	time.Sleep(100 * time.Millisecond) // let the fetch park on the server
	start := time.Now()
	if err := c.LeaderAndIsr(context.Background(), b.self(), sampleLeaderAndIsr(5, 42)); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("LeaderAndIsr took %v behind a long poll", d)
	}
	select {
	case err := <-done:
		t.Fatalf("fetch returned early: %v", err)
	default:
	}
	// Close ends the parked fetch.
	c.Close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrClientClosed) {
			t.Fatalf("fetch after Close: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not end the fetch")
	}
	if err := c.UpdateMetadata(context.Background(), b.self(), sampleUpdateMetadata(5, 42)); !errors.Is(err, ErrClientClosed) {
		t.Fatalf("after Close: %v", err)
	}
	c.Close()
}

// TestClientRedials: after the peer restarts, the next request goes
// through on a fresh connection (the dead one is retried once), and a
// broker that moved is dialed at its new address.
func TestClientRedials(t *testing.T) {
	b := startBroker(t)
	current := b
	c := NewBrokerClient(ClientConfig{BrokerID: 2, ListenerName: "PLAINTEXT",
		Resolve: func(int32) (cluster.Broker, bool) { return current.self(), true }})
	defer c.Close()
	ctx := context.Background()
	if err := c.UpdateMetadata(ctx, b.self(), sampleUpdateMetadata(5, 42)); err != nil {
		t.Fatal(err)
	}
	// Restart on the same address.
	b.srv.Close()
	l, err := net.Listen("tcp", b.addr)
	if err != nil {
		t.Skipf("cannot listen again on %s: %v", b.addr, err)
	}
	srv2 := NewServer(Config{BrokerID: 1, Replicas: b.replicas, Metadata: b.cluster, ControlPlane: b.control, LeaderEpochs: b.epochs})
	go srv2.Serve(l, "PLAINTEXT")
	defer srv2.Close()
	if err := c.UpdateMetadata(ctx, b.self(), sampleUpdateMetadata(5, 42)); err != nil {
		t.Fatalf("after restart: %v", err)
	}
	if n := len(b.control.updateMetadata); n != 2 {
		t.Fatalf("%d updates", n)
	}
	// The broker moved.
	b2 := startBroker(t)
	b2.epochs.answers[cluster.TopicPartition{Topic: "a", Partition: 0}] = fakeEpochAnswer{epoch: 1, end: 5}
	b.epochs.answers[cluster.TopicPartition{Topic: "a", Partition: 0}] = fakeEpochAnswer{epoch: 1, end: 5}
	if _, err := c.OffsetsForLeaderEpoch(ctx, 1, []partition.EpochQuery{{TopicPartition: cluster.TopicPartition{Topic: "a", Partition: 0}, CurrentLeaderEpoch: -1, LeaderEpoch: 1}}); err != nil {
		t.Fatal(err)
	}
	current = b2
	if _, err := c.OffsetsForLeaderEpoch(ctx, 1, []partition.EpochQuery{{TopicPartition: cluster.TopicPartition{Topic: "a", Partition: 0}, CurrentLeaderEpoch: -1, LeaderEpoch: 1}}); err != nil {
		t.Fatal(err)
	}
	if len(b2.epochs.calls) != 1 {
		t.Fatalf("moved broker got %d calls", len(b2.epochs.calls))
	}
	// Nobody listening: broker not available.
	dead := plaintext(9, "127.0.0.1", 1)
	if err := c.LeaderAndIsr(ctx, dead, sampleLeaderAndIsr(5, 42)); !errors.Is(err, cluster.ErrBrokerNotAvailable) {
		t.Fatalf("dead broker: %v", err)
	}
	// A broker without our listener.
	if err := c.StopReplica(ctx, cluster.Broker{ID: 4}, sampleStopReplica(5, 42)); !errors.Is(err, cluster.ErrBrokerNotAvailable) {
		t.Fatalf("no endpoint: %v", err)
	}
}

// TestClientOnlyServer: without ControlPlane and LeaderEpochs the
// inter-broker keys are neither advertised nor served.
func TestClientOnlyServer(t *testing.T) {
	b := startBroker(t, clientOnly(), withoutTransactions())
	c := b.dial(t)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
	resp := c.roundTrip(req).(*kmsg.ApiVersionsResponse)
	var keys []int16
	for _, k := range resp.ApiKeys {
		keys = append(keys, k.ApiKey)
	}
	if want := []int16{0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 29, 30, 31, 32, 33, 35, 36, 37, 42, 43, 44, 45, 46, 47, 50, 51, 60}; !reflect.DeepEqual(keys, want) {
		t.Fatalf("keys %v, want %v", keys, want)
	}
	for _, r := range []kmsg.Request{kmsg.NewPtrLeaderAndISRRequest(), kmsg.NewPtrStopReplicaRequest(),
		kmsg.NewPtrUpdateMetadataRequest(), kmsg.NewPtrControlledShutdownRequest(), kmsg.NewPtrOffsetForLeaderEpochRequest()} {
		r.SetVersion(1)
		c := b.dial(t)
		c.send(r)
		c.expectClosed()
	}
}

func TestMetadataCache(t *testing.T) {
	tp := func(topic string, p int32, leader int32) cluster.TopicPartitionInfo {
		return cluster.TopicPartitionInfo{Topic: topic, PartitionInfo: cluster.PartitionInfo{
			Partition: p, Replicas: []int32{1, 2}, State: cluster.LeaderAndIsr{Leader: leader, LeaderEpoch: 1, Isr: []int32{1, 2}},
		}}
	}
	type snapshot struct {
		controller int32
		brokers    []int32
		topics     map[string][]int32 // topic -> partition leaders in partition order
	}
	steps := []struct {
		name string
		req  cluster.UpdateMetadataRequest
		want snapshot
	}{
		{"first", cluster.UpdateMetadataRequest{ControllerID: 1, LiveBrokers: []cluster.Broker{plaintext(2, "b", 2), plaintext(1, "a", 1)},
			Partitions: []cluster.TopicPartitionInfo{tp("t", 1, 2), tp("t", 0, 1), tp("u", 0, 1)}},
			snapshot{1, []int32{1, 2}, map[string][]int32{"t": {1, 2}, "u": {1}}}},
		{"partial update merges, brokers replaced", cluster.UpdateMetadataRequest{ControllerID: 2, LiveBrokers: []cluster.Broker{plaintext(2, "b", 2)},
			Partitions: []cluster.TopicPartitionInfo{tp("t", 0, 2)}},
			snapshot{2, []int32{2}, map[string][]int32{"t": {2, 2}, "u": {1}}}},
		{"no leader is kept", cluster.UpdateMetadataRequest{ControllerID: 2, LiveBrokers: []cluster.Broker{plaintext(2, "b", 2)},
			Partitions: []cluster.TopicPartitionInfo{tp("u", 0, -1)}},
			snapshot{2, []int32{2}, map[string][]int32{"t": {2, 2}, "u": {-1}}}},
		{"deleted partition removed, topic stays", cluster.UpdateMetadataRequest{ControllerID: 2, LiveBrokers: []cluster.Broker{plaintext(2, "b", 2)},
			Partitions: []cluster.TopicPartitionInfo{tp("t", 1, -2)}},
			snapshot{2, []int32{2}, map[string][]int32{"t": {2}, "u": {-1}}}},
		{"last partition deleted, topic gone", cluster.UpdateMetadataRequest{ControllerID: -1,
			Partitions: []cluster.TopicPartitionInfo{tp("u", 0, -2), tp("never", 0, -2)}},
			snapshot{-1, []int32{}, map[string][]int32{"t": {2}}}},
	}
	c := NewMetadataCache("cid")
	if c.ControllerID() != -1 || len(c.Brokers()) != 0 || len(c.Topics()) != 0 || c.ClusterID() != "cid" {
		t.Fatal("new cache not empty")
	}
	var _ Metadata = c
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			c.Apply(s.req)
			got := snapshot{controller: c.ControllerID(), brokers: []int32{}, topics: map[string][]int32{}}
			for _, b := range c.Brokers() {
				got.brokers = append(got.brokers, b.ID)
			}
			var names []string
			for _, ti := range c.Topics() {
				names = append(names, ti.Name)
				for _, p := range ti.Partitions {
					got.topics[ti.Name] = append(got.topics[ti.Name], p.State.Leader)
				}
				one, ok := c.Topic(ti.Name)
				if !ok || !reflect.DeepEqual(one, ti) {
					t.Fatalf("Topic(%s) = %+v, %v", ti.Name, one, ok)
				}
			}
			if !reflect.DeepEqual(got, s.want) {
				t.Fatalf("got %+v, want %+v", got, s.want)
			}
			for i := 1; i < len(names); i++ {
				if names[i-1] >= names[i] {
					t.Fatalf("topics not sorted: %v", names)
				}
			}
		})
	}

	// Copies out: mutating what is returned changes nothing.
	c2 := NewMetadataCache("x")
	c2.Apply(sampleUpdateMetadata(1, 1))
	b, ok := c2.Broker(1)
	if !ok || *b.Rack != "r1" || len(b.Endpoints) != 2 {
		t.Fatalf("broker 1: %+v %v", b, ok)
	}
	b.Endpoints[0].Host = "mutated"
	*b.Rack = "mutated"
	ti, _ := c2.Topic("a")
	ti.Partitions[0].Replicas[0] = 99
	ti.Partitions[0].State.Isr[0] = 99
	if b, _ := c2.Broker(1); b.Endpoints[0].Host != "10.0.0.1" || *b.Rack != "r1" {
		t.Fatal("broker shared with caller")
	}
	if ti, _ := c2.Topic("a"); ti.Partitions[0].Replicas[0] != 1 || ti.Partitions[0].State.Isr[0] != 1 || !reflect.DeepEqual(ti.Partitions[0].Offline, []int32{3}) {
		t.Fatalf("partition shared with caller: %+v", ti)
	}
	if _, ok := c2.Topic("b"); ok {
		t.Fatal("topic b arrived deleted (leader -2) but exists")
	}
	if _, ok := c2.Broker(7); ok {
		t.Fatal("unknown broker found")
	}
	internal := NewMetadataCache("")
	internal.Apply(cluster.UpdateMetadataRequest{Partitions: []cluster.TopicPartitionInfo{tp("__consumer_offsets", 0, 1)}})
	if ti, _ := internal.Topic("__consumer_offsets"); !ti.Internal {
		t.Fatal("__consumer_offsets not internal")
	}
}

// TestMetadataCacheConcurrent runs Apply against readers, for -race.
func TestMetadataCacheConcurrent(t *testing.T) {
	c := NewMetadataCache("x")
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 200; i++ {
			req := sampleUpdateMetadata(1, 1)
			req.Partitions[0].Partition = int32(i % 7)
			c.Apply(req)
		}
	}()
	for i := 0; i < 200; i++ {
		c.Topics()
		c.Brokers()
		c.Topic("a")
		c.Broker(1)
	}
	<-done
}

func TestErrorTableReverse(t *testing.T) {
	log := zerolog.Nop()
	for _, row := range codeErrors {
		if got := errorCode(&log, row.err); got != row.code.Code {
			t.Errorf("%v maps to %d, but the reverse table says %s", row.err, got, row.code.Message)
		}
		back := errorFromCode(row.code.Code)
		if !errors.Is(back, row.err) || !errors.Is(back, row.code) {
			t.Errorf("code %d came back as %v", row.code.Code, back)
		}
		if got := errorCode(&log, back); got != row.code.Code {
			t.Errorf("code %d round-trips to %d", row.code.Code, got)
		}
	}
	if errorFromCode(0) != nil {
		t.Error("code 0 is an error")
	}
	if err := errorFromCode(kerr.ThrottlingQuotaExceeded.Code); !errors.Is(err, kerr.ThrottlingQuotaExceeded) {
		t.Errorf("unmapped code: %v", err)
	}
	if err := errorFromCode(-12345); !errors.Is(err, kerr.UnknownServerError) {
		t.Errorf("unknown code: %v", err)
	}
}
