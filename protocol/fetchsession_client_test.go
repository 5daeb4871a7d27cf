package protocol

// The follower's session handler (Kafka's FetchSessionHandlerTest, in
// short) and BrokerClient.Fetch recovering from session errors.

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
)

func wish(offsets map[int32]int64) []partition.FetchPartition {
	var out []partition.FetchPartition
	for _, p := range slices.Sorted(mapKeys(offsets)) {
		out = append(out, partition.FetchPartition{TopicPartition: cluster.TopicPartition{Topic: "h", Partition: p},
			FetchOffset: offsets[p], CurrentLeaderEpoch: 3, LogStartOffset: 0, MaxBytes: 100})
	}
	return out
}

// requested is kreq's partitions with their fetch offsets, and its
// forgotten partitions.
func requested(kreq *kmsg.FetchRequest) (map[int32]int64, []int32) {
	named := map[int32]int64{}
	for _, t := range kreq.Topics {
		for _, p := range t.Partitions {
			named[p.Partition] = p.FetchOffset
		}
	}
	var forgotten []int32
	for _, t := range kreq.ForgottenTopics {
		forgotten = append(forgotten, t.Partitions...)
	}
	slices.Sort(forgotten)
	return named, forgotten
}

func TestFetchSessionHandler(t *testing.T) {
	h := newFetchSessionHandler()
	build := func(want map[int32]int64) (*kmsg.FetchRequest, bool) {
		kreq := kmsg.NewPtrFetchRequest()
		inc := h.build(kreq, wish(want))
		return kreq, inc
	}
	// The first fetch is full and asks for a session.
	kreq, inc := build(map[int32]int64{0: 5, 1: 7, 2: 9})
	if named, _ := requested(kreq); inc || kreq.SessionID != 0 || kreq.SessionEpoch != 0 || len(named) != 3 {
		t.Fatalf("first fetch: incremental %v, session %d epoch %d, %d partitions", inc, kreq.SessionID, kreq.SessionEpoch, len(named))
	}
	if !h.handled(inc, 42) {
		t.Fatal("full fetch's answer refused")
	}
	// Unchanged: an empty incremental fetch at epoch 1.
	kreq, inc = build(map[int32]int64{0: 5, 1: 7, 2: 9})
	if named, gone := requested(kreq); !inc || kreq.SessionID != 42 || kreq.SessionEpoch != 1 || len(named) != 0 || len(gone) != 0 {
		t.Fatalf("idle fetch: incremental %v, session %d epoch %d, named %v, forgotten %v", inc, kreq.SessionID, kreq.SessionEpoch, named, gone)
	}
	h.handled(inc, 42)
	// Partition 1 moved, 2 is gone, 3 is new.
	kreq, inc = build(map[int32]int64{0: 5, 1: 8, 3: 0})
	named, gone := requested(kreq)
	if !inc || kreq.SessionEpoch != 2 || len(named) != 2 || named[1] != 8 || named[3] != 0 || !slices.Equal(gone, []int32{2}) {
		t.Fatalf("changed fetch: epoch %d, named %v, forgotten %v; want epoch 2, {1:8 3:0}, [2]", kreq.SessionEpoch, named, gone)
	}
	h.handled(inc, 42)
	kreq, _ = build(map[int32]int64{0: 5, 1: 8, 3: 0})
	if named, gone := requested(kreq); kreq.SessionEpoch != 3 || len(named) != 0 || len(gone) != 0 {
		t.Fatalf("after the change took: epoch %d, named %v, forgotten %v; want an empty fetch at 3", kreq.SessionEpoch, named, gone)
	}
	// A lost answer: the next fetch is full, naming the old session to close.
	h.failed(false)
	kreq, inc = build(map[int32]int64{0: 5, 1: 8, 3: 0})
	if named, _ := requested(kreq); inc || kreq.SessionID != 42 || kreq.SessionEpoch != 0 || len(named) != 3 {
		t.Fatalf("after a failure: incremental %v, session %d epoch %d, %d partitions; want a full fetch closing 42", inc, kreq.SessionID, kreq.SessionEpoch, len(named))
	}
	h.handled(inc, 43)
	// Unknown session: full, asking for a new one without naming it.
	build(map[int32]int64{0: 5})
	h.failed(true)
	kreq, inc = build(map[int32]int64{0: 5})
	if inc || kreq.SessionID != 0 || kreq.SessionEpoch != 0 {
		t.Fatalf("after FETCH_SESSION_ID_NOT_FOUND: incremental %v session %d epoch %d", inc, kreq.SessionID, kreq.SessionEpoch)
	}
	// No slot on the leader: every fetch stays full.
	h.handled(inc, 0)
	kreq, inc = build(map[int32]int64{0: 5})
	if inc || kreq.SessionID != 0 || kreq.SessionEpoch != 0 {
		t.Fatalf("without a session: incremental %v session %d epoch %d", inc, kreq.SessionID, kreq.SessionEpoch)
	}
	// An incremental fetch answered for another session is refused.
	h.handled(inc, 50)
	_, inc = build(map[int32]int64{0: 5})
	if h.handled(inc, 51) {
		t.Fatal("incremental fetch of session 50 answered for 51 was accepted")
	}
}

// BrokerClient.Fetch over the wire: the leader forgets the session (a
// restart, an eviction); the next Fetch is answered
// FETCH_SESSION_ID_NOT_FOUND, resent at once as a full fetch, and
// succeeds with a new session, in the one call.
func TestBrokerClientFetchSessionRecovers(t *testing.T) {
	m, b := sessionLeader(t, "r", 3)
	tp := func(p int32) cluster.TopicPartition { return cluster.TopicPartition{Topic: "r", Partition: p} }
	client := newBrokerClient(t, b)
	req := partition.FetchRequest{ReplicaID: 2, MaxBytes: 1 << 20}
	for p := range int32(3) {
		req.Partitions = append(req.Partitions, partition.FetchPartition{TopicPartition: tp(p), FetchOffset: 0, CurrentLeaderEpoch: 0, LogStartOffset: 0, MaxBytes: 1 << 20})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fetch := func() partition.FetchResponse {
		t.Helper()
		resp, err := client.Fetch(ctx, 1, req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Release != nil {
			resp.Release()
		}
		return resp
	}
	if resp := fetch(); len(resp.Partitions) != 3 {
		t.Fatalf("full fetch answered %d partitions, want 3", len(resp.Partitions))
	}
	first := onlySession(t, b)
	if resp := fetch(); len(resp.Partitions) != 0 {
		t.Fatalf("idle incremental fetch answered %v", resp.Partitions)
	}
	appendTo(t, m, tp(2), "x")
	if resp := fetch(); len(resp.Partitions) != 1 || len(resp.Partitions[tp(2)].Records) == 0 {
		t.Fatalf("after a produce to 2: answered %v", resp.Partitions)
	}
	b.srv.fetchSessions.remove(first.id)
	resp := fetch() // FETCH_SESSION_ID_NOT_FOUND, then a full fetch
	if len(resp.Partitions) != 3 || len(resp.Partitions[tp(2)].Records) == 0 {
		t.Fatalf("after the session was lost: answered %d partitions, want all 3 (a full fetch)", len(resp.Partitions))
	}
	if s := onlySession(t, b); s == first {
		t.Fatal("no new session after the old one was lost")
	}
	if resp := fetch(); len(resp.Partitions) != 1 {
		t.Fatalf("in the new session: answered %v, want partition 2 (still fetched at 0)", resp.Partitions)
	}
}

// TestFetchSessionHandlerSameOrder: a wish list naming the session's
// partitions in the order of the last fetch is compared position by
// position (no lookups), which must find exactly what the lookups find:
// the changed partition, also when the caller rewrote its previous slice
// in place; a reordered list, and one after a failure, take the other
// paths.
func TestFetchSessionHandlerSameOrder(t *testing.T) {
	h := newFetchSessionHandler()
	want := wish(map[int32]int64{0: 5, 1: 7, 2: 9})
	kreq := kmsg.NewPtrFetchRequest()
	h.build(kreq, want)
	h.handled(false, 42)
	// The caller reuses its slice: partition 1 moved to 8.
	want[1].FetchOffset = 8
	kreq = kmsg.NewPtrFetchRequest()
	if !h.build(kreq, want) {
		t.Fatal("not incremental")
	}
	if named, gone := requested(kreq); len(named) != 1 || named[1] != 8 || len(gone) != 0 {
		t.Fatalf("same order, one moved: named %v, forgotten %v; want {1:8}", named, gone)
	}
	h.handled(true, 42)
	// Reversed order, partition 0 moved: found by lookup, nothing gone.
	rev := slices.Clone(want)
	slices.Reverse(rev)
	rev[2].FetchOffset = 6
	kreq = kmsg.NewPtrFetchRequest()
	h.build(kreq, rev)
	if named, gone := requested(kreq); len(named) != 1 || named[0] != 6 || len(gone) != 0 {
		t.Fatalf("reversed, one moved: named %v, forgotten %v; want {0:6}", named, gone)
	}
	h.handled(true, 42)
	// Back to the first order: the session holds 0@6, 1@8, 2@9.
	kreq = kmsg.NewPtrFetchRequest()
	h.build(kreq, wish(map[int32]int64{0: 6, 1: 8, 2: 9}))
	if named, gone := requested(kreq); len(named) != 0 || len(gone) != 0 {
		t.Fatalf("unchanged after a reorder: named %v, forgotten %v; want an empty fetch", named, gone)
	}
	h.handled(true, 42)
	// The same partitions with one left out: the lookups name it gone.
	kreq = kmsg.NewPtrFetchRequest()
	h.build(kreq, wish(map[int32]int64{0: 6, 1: 8}))
	if named, gone := requested(kreq); len(named) != 0 || !slices.Equal(gone, []int32{2}) {
		t.Fatalf("one left out: named %v, forgotten %v; want [2] forgotten", named, gone)
	}
	// That fetch is lost: the next one is full, whatever the order.
	h.failed(false)
	kreq = kmsg.NewPtrFetchRequest()
	if h.build(kreq, wish(map[int32]int64{0: 6, 1: 8})) {
		t.Fatal("incremental after a failed fetch")
	}
}
