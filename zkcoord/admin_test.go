package zkcoord

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/kafkazk/broker/cluster"
)

// TestAssignReplicas checks Kafka's rack-unaware assignment against the
// outputs pinned in Kafka's own AdminTest.testReplicaAssignment.
func TestAssignReplicas(t *testing.T) {
	cases := []struct {
		name        string
		brokers     []int32
		partitions  int32
		rf          int16
		start, shft int
		want        map[int32][]int32
	}{
		{"kafka AdminTest 5 brokers 10x3", []int32{0, 1, 2, 3, 4}, 10, 3, 0, 0, map[int32][]int32{
			0: {0, 1, 2}, 1: {1, 2, 3}, 2: {2, 3, 4}, 3: {3, 4, 0}, 4: {4, 0, 1},
			5: {0, 2, 3}, 6: {1, 3, 4}, 7: {2, 4, 0}, 8: {3, 0, 1}, 9: {4, 1, 2}}},
		{"unsorted ids are sorted first", []int32{14, 10, 12, 13, 11}, 5, 3, 0, 0, map[int32][]int32{
			0: {10, 11, 12}, 1: {11, 12, 13}, 2: {12, 13, 14}, 3: {13, 14, 10}, 4: {14, 10, 11}}},
		{"single broker", []int32{7}, 3, 1, 0, 0, map[int32][]int32{0: {7}, 1: {7}, 2: {7}}},
		{"start and shift", []int32{1, 2, 3}, 4, 2, 2, 1, map[int32][]int32{
			0: {3, 2}, 1: {1, 3}, 2: {2, 1}, 3: {3, 1}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := AssignReplicas(c.brokers, c.partitions, c.rf, c.start, c.shft)
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %v\nwant %v", got, c.want)
			}
		})
	}
}

func TestValidateTopicName(t *testing.T) {
	for _, ok := range []string{"a", "A-b_c.9", strings.Repeat("x", 249), "__consumer_offsets"} {
		if err := ValidateTopicName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "..", strings.Repeat("x", 250), "a/b", "a b", "ü", "a\x00"} {
		if err := ValidateTopicName(bad); !errors.Is(err, cluster.ErrInvalidTopic) {
			t.Errorf("%q: got %v, want ErrInvalidTopic", bad, err)
		}
	}
}

func TestValidateAssignment(t *testing.T) {
	live := []int32{1, 2, 3}
	for name, a := range map[string]map[int32][]int32{
		"gap":       {0: {1}, 2: {2}},
		"empty":     {0: {}},
		"uneven":    {0: {1, 2}, 1: {1}},
		"duplicate": {0: {1, 1}},
		"unknown":   {0: {1, 9}},
	} {
		if err := validateAssignment(a, live); !errors.Is(err, cluster.ErrInvalidReplicaAssignment) {
			t.Errorf("%s: got %v", name, err)
		}
	}
	if err := validateAssignment(map[int32][]int32{0: {1, 2}, 1: {3, 1}}, live); err != nil {
		t.Fatal(err)
	}
}

func TestParseConnect(t *testing.T) {
	s, c, err := parseConnect("a:1,b:2/kafka/x")
	if err != nil || !reflect.DeepEqual(s, []string{"a:1", "b:2"}) || c != "/kafka/x" {
		t.Fatalf("%v %q %v", s, c, err)
	}
	s, c, err = parseConnect("a:1/")
	if err != nil || len(s) != 1 || c != "" {
		t.Fatalf("%v %q %v", s, c, err)
	}
	for _, bad := range []string{"", "a:1,,b:2", "/chroot", "a:1//x"} {
		if _, _, err := parseConnect(bad); !errors.Is(err, ErrBadConnect) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
