package zkcoord

import (
	"encoding/base64"
	"errors"
	"reflect"
	"testing"

	"github.com/kafkazk/broker/cluster"
)

// TestJSONGolden pins the exact bytes of every payload zkcoord writes.
func TestJSONGolden(t *testing.T) {
	cases := []struct {
		name string
		got  []byte
		want string
	}{
		{"broker", encodeBrokerRegistration([]cluster.Endpoint{
			{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: "h1", Port: 9092},
			{Listener: "INTERNAL", SecurityProtocol: "PLAINTEXT", Host: "10.0.0.1", Port: 9093},
		}, "", 1700000000000),
			`{"version":4,"host":"h1","port":9092,"jmx_port":-1,"timestamp":"1700000000000","endpoints":["PLAINTEXT://h1:9092","INTERNAL://10.0.0.1:9093"],"listener_security_protocol_map":{"INTERNAL":"PLAINTEXT","PLAINTEXT":"PLAINTEXT"}}`},
		{"broker rack", encodeBrokerRegistration([]cluster.Endpoint{
			{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: "h", Port: 9092},
		}, "r1", 5),
			`{"version":4,"host":"h","port":9092,"jmx_port":-1,"timestamp":"5","endpoints":["PLAINTEXT://h:9092"],"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"rack":"r1"}`},
		{"broker no plaintext", encodeBrokerRegistration([]cluster.Endpoint{
			{Listener: "SSL", SecurityProtocol: "SSL", Host: "::1", Port: 9094},
		}, "", 5),
			`{"version":4,"host":null,"port":-1,"jmx_port":-1,"timestamp":"5","endpoints":["SSL://[::1]:9094"],"listener_security_protocol_map":{"SSL":"SSL"}}`},
		{"controller", encodeController(3, 1700000000000), `{"version":1,"brokerid":3,"timestamp":"1700000000000"}`},
		{"controller_epoch", encodeControllerEpoch(5), `5`},
		{"topic", encodeTopicAssignment(map[int32][]int32{0: {1, 2, 3}, 10: {3, 1, 2}, 2: {2, 3, 1}}),
			`{"version":2,"partitions":{"0":[1,2,3],"2":[2,3,1],"10":[3,1,2]},"adding_replicas":{},"removing_replicas":{}}`},
		{"state", encodePartitionState(cluster.LeaderAndIsr{Leader: 1, LeaderEpoch: 4, Isr: []int32{1, 2}, ControllerEpoch: 7, ZkVersion: 9}),
			`{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":4,"isr":[1,2]}`},
		{"state empty isr", encodePartitionState(cluster.LeaderAndIsr{Leader: -1}),
			`{"controller_epoch":0,"leader":-1,"version":1,"leader_epoch":0,"isr":[]}`},
		{"config", encodeTopicConfig(map[string]string{"retention.ms": "1000", "min.insync.replicas": "2"}),
			`{"version":1,"config":{"min.insync.replicas":"2","retention.ms":"1000"}}`},
		{"config empty", encodeTopicConfig(nil), `{"version":1,"config":{}}`},
		{"config change", encodeTopicConfigChange("t1"), `{"version":2,"entity_path":"topics/t1"}`},
		{"cluster id", encodeClusterID("AAAAAAAAAAAAAAAAAAAAAA"), `{"version":"1","id":"AAAAAAAAAAAAAAAAAAAAAA"}`},
		{"isr change", encodeIsrChangeNotification([]cluster.TopicPartition{{Topic: "a", Partition: 0}, {Topic: "b", Partition: 3}}),
			`{"version":1,"partitions":[{"topic":"a","partition":0},{"topic":"b","partition":3}]}`},
		{"topic reassigning", encodeTopicAssignmentFull(fullAssignment{
			Replicas: map[int32][]int32{0: {3, 1, 2}, 1: {2, 3}},
			Adding:   map[int32][]int32{0: {3}, 1: {}},
			Removing: map[int32][]int32{0: {2}},
		}), `{"version":2,"partitions":{"0":[3,1,2],"1":[2,3]},"adding_replicas":{"0":[3]},"removing_replicas":{"0":[2]}}`},
		{"reassign partitions", encodeLegacyReassignment(map[cluster.TopicPartition][]int32{{Topic: "b", Partition: 0}: {1}, {Topic: "a", Partition: 2}: {2, 3}}),
			`{"version":1,"partitions":[{"topic":"a","partition":2,"replicas":[2,3]},{"topic":"b","partition":0,"replicas":[1]}]}`},
		{"preferred replica election", encodePreferredElection([]cluster.TopicPartition{{Topic: "a", Partition: 1}}),
			`{"version":1,"partitions":[{"topic":"a","partition":1}]}`},
		{"producer id block", encodeProducerIDBlock(2, 1000, 1999),
			`{"version":1,"broker":2,"block_start":"1000","block_end":"1999"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if string(c.got) != c.want {
				t.Fatalf("got  %s\nwant %s", c.got, c.want)
			}
		})
	}
}

func TestJSONDecode(t *testing.T) {
	b, err := decodeBrokerRegistration(1, []byte(`{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT","EXT":"SSL"},"endpoints":["PLAINTEXT://h:9092","EXT://[::1]:9093"],"jmx_port":-1,"host":"h","timestamp":"1","port":9092,"version":4,"rack":"r","features":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []cluster.Endpoint{{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: "h", Port: 9092}, {Listener: "EXT", SecurityProtocol: "SSL", Host: "::1", Port: 9093}}
	if !reflect.DeepEqual(b.Endpoints, want) || b.Rack == nil || *b.Rack != "r" || b.ID != 1 {
		t.Fatalf("got %+v", b)
	}
	b, err = decodeBrokerRegistration(2, []byte(`{"version":1,"host":"old","port":9092,"jmx_port":-1}`))
	if err != nil || len(b.Endpoints) != 1 || b.Endpoints[0].Host != "old" || b.Endpoints[0].Listener != "PLAINTEXT" {
		t.Fatalf("v1 registration: %+v %v", b, err)
	}

	a, err := decodeTopicAssignment("t", []byte(`{"version":1,"partitions":{"1":[2,3],"0":[1,2]}}`))
	if err != nil || !reflect.DeepEqual(a, map[int32][]int32{0: {1, 2}, 1: {2, 3}}) {
		t.Fatalf("topic v1: %v %v", a, err)
	}
	// Version 2 with a reassignment (Kafka 2.4+), and an empty list, as
	// Kafka writes for partitions not being reassigned.
	full, err := decodeTopicAssignmentFull("t", []byte(`{"version":2,"partitions":{"0":[3,1,2],"1":[1,2]},"adding_replicas":{"0":[3],"1":[]},"removing_replicas":{"0":[2]}}`))
	if err != nil || !reflect.DeepEqual(full, fullAssignment{Replicas: map[int32][]int32{0: {3, 1, 2}, 1: {1, 2}},
		Adding: map[int32][]int32{0: {3}}, Removing: map[int32][]int32{0: {2}}}) {
		t.Fatalf("topic v2 reassigning: %+v %v", full, err)
	}
	if _, err := decodeTopicAssignmentFull("t", []byte(`{"version":2,"partitions":{"0":[1]},"adding_replicas":{"5":[3]},"removing_replicas":{}}`)); !errors.Is(err, ErrBadZNode) {
		t.Fatalf("adding replicas of an unassigned partition: %v", err)
	}
	legacy, err := decodeLegacyReassignment([]byte(`{"version":1,"partitions":[{"topic":"a","partition":2,"replicas":[2,3]}]}`))
	if err != nil || !reflect.DeepEqual(legacy, map[cluster.TopicPartition][]int32{{Topic: "a", Partition: 2}: {2, 3}}) {
		t.Fatalf("reassign partitions: %v %v", legacy, err)
	}
	pref, err := decodePreferredElection([]byte(`{"version":1,"partitions":[{"topic":"a","partition":1}]}`))
	if err != nil || !reflect.DeepEqual(pref, []cluster.TopicPartition{{Topic: "a", Partition: 1}}) {
		t.Fatalf("preferred replica election: %v %v", pref, err)
	}
	st, err := decodePartitionState([]byte(`{"controller_epoch":3,"leader":2,"version":1,"leader_epoch":7,"isr":[2,1],"leader_recovery_state":0}`), 12)
	if err != nil || !reflect.DeepEqual(st, cluster.LeaderAndIsr{Leader: 2, LeaderEpoch: 7, Isr: []int32{2, 1}, ControllerEpoch: 3, ZkVersion: 12}) {
		t.Fatalf("state: %+v %v", st, err)
	}
	if _, err := decodePartitionState([]byte(`{"leader":2}`), 0); !errors.Is(err, ErrBadZNode) {
		t.Fatalf("state missing fields: %v", err)
	}
	if e, err := decodeControllerEpoch([]byte("42")); err != nil || e != 42 {
		t.Fatalf("epoch: %v %v", e, err)
	}
	if id, err := decodeController([]byte(`{"version":1,"brokerid":5,"timestamp":"1"}`)); err != nil || id != 5 {
		t.Fatalf("controller: %v %v", id, err)
	}
	if s, e, err := decodeProducerIDBlock([]byte(`{"version":1,"broker":1,"block_start":"0","block_end":"999"}`)); err != nil || s != 0 || e != 999 {
		t.Fatalf("pid block: %v %v %v", s, e, err)
	}
	tps, err := decodeIsrChangeNotification(encodeIsrChangeNotification([]cluster.TopicPartition{{Topic: "x", Partition: 1}}))
	if err != nil || len(tps) != 1 || tps[0].Topic != "x" || tps[0].Partition != 1 {
		t.Fatalf("isr change: %v %v", tps, err)
	}
}

func TestNewClusterID(t *testing.T) {
	id := newClusterID()
	if len(id) != 22 {
		t.Fatalf("cluster id %q is not 22 characters", id)
	}
	raw, err := base64.RawURLEncoding.DecodeString(id)
	if err != nil || len(raw) != 16 || raw[6]>>4 != 4 {
		t.Fatalf("cluster id %q is not a base64url v4 uuid: %v", id, err)
	}
	if newClusterID() == id {
		t.Fatal("two cluster ids are equal")
	}
}

func FuzzDecodePartitionState(f *testing.F) {
	f.Add([]byte(`{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1]}`))
	f.Add([]byte(`{"leader":-2}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"isr":null,"leader":1e99}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := decodePartitionState(data, 0)
		if err == nil {
			back, err := decodePartitionState(encodePartitionState(st), 0)
			if err != nil || back.Leader != st.Leader || len(back.Isr) != len(st.Isr) {
				t.Fatalf("round trip of %q: %+v %v", data, back, err)
			}
		}
	})
}

func FuzzDecodeBrokerRegistration(f *testing.F) {
	f.Add(encodeBrokerRegistration([]cluster.Endpoint{{Listener: "PLAINTEXT", Host: "h", Port: 1}}, "r", 1))
	f.Add([]byte(`{"endpoints":["://"],"host":null}`))
	f.Add([]byte(`{"endpoints":["A://[::1:9"]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = decodeBrokerRegistration(1, data)
	})
}

func FuzzDecodeTopicAssignment(f *testing.F) {
	f.Add(encodeTopicAssignment(map[int32][]int32{0: {1}}))
	f.Add([]byte(`{"partitions":{"-1":[1],"x":[2]}}`))
	f.Add([]byte(`{"partitions":{"99999999999":[1]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := decodeTopicAssignment("t", data)
		if err == nil {
			if _, err := decodeTopicAssignment("t", encodeTopicAssignment(a)); err != nil {
				t.Fatalf("round trip of %q: %v", data, err)
			}
		}
	})
}

func FuzzDecodeOthers(f *testing.F) {
	f.Add([]byte(`{"version":"1","id":"x"}`))
	f.Add([]byte(`{"version":1,"broker":1,"block_start":"9","block_end":"1"}`))
	f.Add([]byte(`{"version":1,"config":{"a":"b"}}`))
	f.Add([]byte(`7`))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = decodeClusterID(data)
		_, _, _ = decodeProducerIDBlock(data)
		_, _ = decodeTopicConfig("t", data)
		_, _ = decodeController(data)
		_, _ = decodeControllerEpoch(data)
		_, _ = decodeIsrChangeNotification(data)
	})
}
