package main

import (
	"github.com/kafkazk/broker/cluster"
	"testing"
)

// The throttle values are Kafka's byte for byte: leader = every current
// replica of a moving partition, follower = every replica being added,
// "partition:broker" sorted as strings (so 10:x sorts before 1:y).
func TestThrottleBookkeeping(t *testing.T) {
	current := assignment{
		tp("foo", 0):  {1, 2, 3},
		tp("foo", 1):  {2, 3, 1},
		tp("foo", 10): {3, 1, 2},
		tp("bar", 0):  {1},
	}
	plan := assignment{
		tp("foo", 0):  {4, 5, 1},
		tp("foo", 1):  {2, 3, 1}, // reordered only
		tp("foo", 10): {3, 1, 4},
		tp("bar", 0):  {2},
	}
	moves, err := proposedMoves(nil, plan, current)
	if err != nil {
		t.Fatal(err)
	}
	leaders, followers := leaderThrottles(moves), followerThrottles(moves)
	wantLeader := map[string]string{
		"foo": "0:1,0:2,0:3,10:1,10:2,10:3,1:1,1:2,1:3",
		"bar": "0:1",
	}
	wantFollower := map[string]string{
		"foo": "0:4,0:5,10:4",
		"bar": "0:2",
	}
	for topic := range wantLeader {
		if leaders[topic] != wantLeader[topic] {
			t.Errorf("leader %s = %q, want %q", topic, leaders[topic], wantLeader[topic])
		}
		if followers[topic] != wantFollower[topic] {
			t.Errorf("follower %s = %q, want %q", topic, followers[topic], wantFollower[topic])
		}
	}
	if got := joinInts(reassigningBrokers(moves), ","); got != "1,2,3,4,5" {
		t.Errorf("reassigning brokers = %s, want 1,2,3,4,5", got)
	}
}

// A partition already moving keeps the sources of its ongoing move (its
// replicas minus those being added), as Kafka's calculateProposedMoveMap;
// unrelated ongoing moves are throttled too.
func TestProposedMovesKeepOngoingSources(t *testing.T) {
	ongoing := map[cluster.TopicPartition]reassignment{
		tp("foo", 0): {Replicas: []int32{1, 2, 3, 4}, Adding: []int32{4}, Removing: []int32{1}},
		tp("baz", 3): {Replicas: []int32{7, 8}, Adding: []int32{8}, Removing: []int32{6}},
	}
	plan := assignment{tp("foo", 0): {2, 3, 5}}
	moves, err := proposedMoves(ongoing, plan, assignment{tp("foo", 0): {1, 2, 3, 4}})
	if err != nil {
		t.Fatal(err)
	}
	if m := moves["foo"][0]; joinInts(m.Sources, ",") != "1,2,3" || joinInts(m.Destinations, ",") != "5" {
		t.Fatalf("foo-0 move = %+v, want sources 1,2,3 destinations 5", m)
	}
	if got := followerThrottles(moves)["baz"]; got != "3:8" {
		t.Fatalf("ongoing baz follower throttle = %q, want 3:8", got)
	}
	if _, err := proposedMoves(nil, plan, assignment{}); err == nil {
		t.Fatal("a partition without replicas was accepted")
	}
}
