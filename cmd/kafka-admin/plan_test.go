package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/kafkazk/broker/cluster"
)

func tp(t string, p int32) cluster.TopicPartition {
	return cluster.TopicPartition{Topic: t, Partition: p}
}

// The printed plan is compared byte for byte with what
// kafka-reassign-partitions.sh prints (Jackson, compact, sorted by topic
// then partition, "any" per replica).
func TestFormatPlanIsKafkasJSON(t *testing.T) {
	a := assignment{
		tp("foo", 10): {3, 1},
		tp("foo", 2):  {1, 2},
		tp("bar", 0):  {2},
	}
	want := `{"version":1,"partitions":[{"topic":"bar","partition":0,"replicas":[2],"log_dirs":["any"]},` +
		`{"topic":"foo","partition":2,"replicas":[1,2],"log_dirs":["any","any"]},` +
		`{"topic":"foo","partition":10,"replicas":[3,1],"log_dirs":["any","any"]}]}`
	if got := formatPlan(a); got != want {
		t.Fatalf("formatPlan:\n got %s\nwant %s", got, want)
	}
	if got := formatPlan(assignment{}); got != `{"version":1,"partitions":[]}` {
		t.Fatalf("empty plan: %s", got)
	}
}

func TestPlanRoundTrip(t *testing.T) {
	a := assignment{tp("t", 0): {1, 2, 3}, tp("t", 1): {2, 3, 4}, tp("u", 0): {5}}
	got, err := parseExecutePlan([]byte(formatPlan(a)))
	if err != nil {
		t.Fatal(err)
	}
	if formatPlan(got) != formatPlan(a) {
		t.Fatalf("round trip: %s != %s", formatPlan(got), formatPlan(a))
	}
}

func TestParseExecutePlan(t *testing.T) {
	cases := []struct {
		name, json string
		wantErr    string // "" for success
	}{
		{"kafka help example", `{"partitions":[{"topic": "foo","partition": 1,"replicas": [1,2,3],"log_dirs": ["any","any","any"] }],"version":1}`, ""},
		{"no log_dirs no version", `{"partitions":[{"topic":"foo","partition":0,"replicas":[1]}]}`, ""},
		{"bad json", `{"partitions":[`, "not valid"},
		{"version 2", `{"version":2,"partitions":[]}`, "Not supported version field value 2"},
		{"empty", `{"version":1,"partitions":[]}`, "Partition reassignment list cannot be empty"},
		{"empty replicas", `{"partitions":[{"topic":"foo","partition":0,"replicas":[]}]}`, "Partition replica list cannot be empty"},
		{"missing replicas", `{"partitions":[{"topic":"foo","partition":0}]}`, `needs "topic", "partition" and "replicas"`},
		{"duplicate partition", `{"partitions":[{"topic":"foo","partition":0,"replicas":[1]},{"topic":"foo","partition":0,"replicas":[2]}]}`,
			"Partition reassignment contains duplicate topic partitions: foo-0"},
		{"duplicate replica", `{"partitions":[{"topic":"foo","partition":0,"replicas":[1,2,1]}]}`,
			"Partition replica lists may not contain duplicate entries: foo-0 contains multiple entries for 1"},
		{"log dirs length", `{"partitions":[{"topic":"foo","partition":0,"replicas":[1,2],"log_dirs":["any"]}]}`,
			"Size of replicas list [1, 2] is different from size of log dirs list [any] for partition foo-0"},
		{"log dir path", `{"partitions":[{"topic":"foo","partition":0,"replicas":[1],"log_dirs":["/data"]}]}`, `only "any" is supported`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, err := parseExecutePlan([]byte(c.json))
			if c.wantErr == "" {
				if err != nil || len(a) != 1 {
					t.Fatalf("got %v, %v", a, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) || !errors.Is(err, errUsage) {
				t.Fatalf("err = %v, want a usage error containing %q", err, c.wantErr)
			}
		})
	}
}

func TestParseTopicsToMoveAndBrokerList(t *testing.T) {
	topics, err := parseTopicsToMove([]byte(`{"topics":[{"topic": "foo"},{"topic": "foo1"}],"version":1}`))
	if err != nil || strings.Join(topics, ",") != "foo,foo1" {
		t.Fatalf("topics = %v, %v", topics, err)
	}
	if _, err := parseTopicsToMove([]byte(`{"topics":[{"topic":"a"},{"topic":"a"}]}`)); err == nil ||
		!strings.Contains(err.Error(), "List of topics to reassign contains duplicate entries: a") {
		t.Fatalf("duplicate topics: %v", err)
	}
	if _, err := parseTopicsToMove([]byte(`{"topics":[]}`)); err == nil {
		t.Fatal("no topics accepted")
	}
	ids, err := parseBrokerList("3, 1,2")
	if err != nil || joinInts(ids, ",") != "3,1,2" {
		t.Fatalf("ids = %v, %v", ids, err)
	}
	for _, bad := range []string{"1,1", "1,x", "", "1,-2", "1,2.5"} {
		if _, err := parseBrokerList(bad); !errors.Is(err, errUsage) {
			t.Errorf("parseBrokerList(%q) = %v, want a usage error", bad, err)
		}
	}
	if _, err := parseBrokerList("1,1"); !strings.Contains(err.Error(), "Broker list contains duplicate entries: 1") {
		t.Errorf("duplicate: %v", err)
	}
}
