package zkcoord

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/kafkazk/broker/cluster"
)

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
