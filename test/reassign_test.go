package test

// Partition reassignment (issue 15, KIP-455) on broker processes with real
// ZooKeeper and kgo clients: growing a cluster from three brokers to five
// under acks=all load (with and without clean bounces during the move, as
// Kafka's reassign_partitions_test), replication-factor changes, a cancel
// mid-flight, a controller killed mid-reassignment and the legacy
// /admin/reassign_partitions znode. Every test checks the topic znode, the
// state znodes, ListPartitionReassignments, each broker's Metadata and the
// replicas' directories, and reads the log back through the history checker.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestReassignGrowThreeToFive: 3 -> 5 brokers, and every partition of a
// 12-partition RF=3 topic moves onto a replica set holding both new brokers
// while a kgo producer writes with acks=all (min.insync.replicas=2) and a
// consumer reads. Nothing acknowledged is lost, duplicated or divergent,
// no partition falls below min.insync.replicas, the topic ends at the
// target everywhere, and the removed replicas' directories are deleted.
func TestReassignGrowThreeToFive(t *testing.T) { testGrow(t, "grow", false) }

// TestReassignGrowWithBounces is TestReassignGrowThreeToFive with brokers
// cleanly bounced (SIGTERM, restart) one at a time during the move: Kafka's
// reassign_partitions_test with bounce_brokers.
func TestReassignGrowWithBounces(t *testing.T) { testGrow(t, "grow-bounce", true) }

func testGrow(t *testing.T, topic string, bounce bool) {
	const parts = 12
	c := NewCluster(t, 3, failoverProps(nil))
	keepLogs(t, c)
	createTopic(t, c, topic, parts, 3, nil, nil)
	for _, id := range []int32{4, 5} {
		c.AddBroker(id).Start()
	}
	before := c.currentAssignment(t, topic)
	// Each partition gets both new brokers and keeps one old one; the
	// preferred replica rotates so leaders spread over all five.
	target := assignment{}
	for p := int32(0); p < parts; p++ {
		r := []int32{4, 5, 1 + p%3}
		k := int(p/3) % 3
		target[p] = append(slices.Clone(r[k:]), r[:k]...)
	}
	t.Logf("moving %s from %v to %v", topic, before, target)

	adm := adminFor(t, c)
	prod := startProducer(t, c, topic, parts, topic)
	cons := startLiveConsumer(t, c, topic, parts)
	samp := startISRSampler(t, c, map[string]int32{topic: parts}, 2, 100*time.Millisecond)
	// The window before the move, for the latency comparison.
	const pre = 8 * time.Second
	time.Sleep(pre)
	var sizeBefore int64
	for p := int32(0); p < parts; p++ {
		sizeBefore += dirBytes(c.Broker(c.mustState(t, topic, p).Leader), topic, p)
	}

	moveStart := time.Now()
	submitReassignment(t, adm, topic, target)
	checkInFlight(t, c, adm, topic, before, target)

	var bounced []int32
	if bounce {
		bounced = []int32{1, 4, 2}
		for _, id := range bounced {
			live, _ := listReassigning(adm, topic, parts)
			t.Logf("bouncing broker %d, %s into the move, %d partitions still reassigning", id, time.Since(moveStart).Round(time.Millisecond), len(live))
			c.Broker(id).Restart()
			waitBackInISR(t, c, topic, parts, id, 60*time.Second)
		}
	}
	moveEnd := waitReassigned(t, c, adm, topic, target, 120*time.Second)
	dur := moveEnd.Sub(moveStart)
	var moved int64
	for p, r := range target {
		for _, id := range r {
			if !slices.Contains(before[p], id) {
				moved += dirBytes(c.Broker(id), topic, p)
			}
		}
	}
	if strays := waitReplicaDirs(t, c, topic, target, 30*time.Second, bounced...); len(strays) > 0 {
		t.Logf("NOTE: removed replicas left on disk by bounced brokers (no StopReplica reached them): %v", strays)
	}
	time.Sleep(time.Second) // a little traffic on the final replica sets
	acked := prod.Stop(bounce)
	live := cons.Stop()
	samp.check(t, "during the move")

	window := min(dur, pre)
	b50, b99, bn := latencyPercentiles(acked, moveStart.Add(-window), moveStart)
	d50, d99, dn := latencyPercentiles(acked, moveStart, moveEnd)
	t.Logf("%s: moved %d partitions (%d new replicas) in %s; %d bytes copied to the new replicas (topic %d bytes at the start); produce latency p50/p99 %s/%s over %d records during the move, %s/%s over %d records in the %s before it",
		topic, parts, 2*parts, dur.Round(time.Millisecond), moved, sizeBefore, d50, d99, dn, b50, b99, bn, window.Round(time.Millisecond))
	logFigures(t, t.Name(), map[string]any{
		"partitions": parts, "new_replicas": 2 * parts, "bounces": bounce,
		"move_ms": dur.Milliseconds(), "bytes_moved": moved, "topic_bytes_at_start": sizeBefore,
		"p50_during_ms": ms(d50), "p99_during_ms": ms(d99), "records_during": dn,
		"p50_before_ms": ms(b50), "p99_before_ms": ms(b99), "records_before": bn, "before_window_ms": window.Milliseconds(),
	})

	final := readAll(t, c.liveSeeds(), topic, readTimeout)
	checkHistory(t, "after the move", recsOf(acked), final, bounce)
	checkLiveRead(t, live, final)
	compareReplicaFiles(t, c, topic, target, recsOf(acked))
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// checkInFlight reads ListPartitionReassignments and the topic znode right
// after a submission. Whatever is still reassigning must be described as
// KIP-455 does: replicas = target + (original - target), adding = target -
// original, removing = original - target.
func checkInFlight(t *testing.T, c *Cluster, adm *kadm.Client, topic string, before, target assignment) {
	t.Helper()
	live, err := listReassigning(adm, topic, int32(len(target)))
	if err != nil {
		t.Fatal(err)
	}
	for p, r := range live {
		adding, removing := minus(target[p], before[p]), minus(before[p], target[p])
		if !sameSet(r.Replicas, union(target[p], before[p])) || !sameSet(r.AddingReplicas, adding) || !sameSet(r.RemovingReplicas, removing) {
			t.Errorf("ListPartitionReassignments %s-%d: replicas %v adding %v removing %v; want replicas %v adding %v removing %v",
				topic, p, r.Replicas, r.AddingReplicas, r.RemovingReplicas, union(target[p], before[p]), adding, removing)
		}
	}
	z, err := c.topicZnode(topic)
	if err != nil {
		t.Fatal(err)
	}
	inZnode := 0
	for p := range target {
		if len(z.adding(p)) == 0 && len(z.removing(p)) == 0 {
			continue
		}
		inZnode++
		if !sameSet(z.adding(p), minus(target[p], before[p])) || !sameSet(z.removing(p), minus(before[p], target[p])) ||
			!sameSet(z.replicas(p), union(target[p], before[p])) {
			t.Errorf("topic znode %s-%d mid-move: replicas %v adding %v removing %v; want RS = %v adding %v removing %v",
				topic, p, z.replicas(p), z.adding(p), z.removing(p), union(target[p], before[p]), minus(target[p], before[p]), minus(before[p], target[p]))
		}
	}
	t.Logf("right after the submission: %d partitions listed by ListPartitionReassignments, %d with adding/removing replicas in the topic znode", len(live), inZnode)
}

func minus(a, b []int32) []int32 {
	var out []int32
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

func union(a, b []int32) []int32 { return append(slices.Clone(a), minus(b, a)...) }

// waitBackInISR waits until broker id is in the ISR of every partition of
// topic whose replica set names it, except where it is still being added.
func waitBackInISR(t *testing.T, c *Cluster, topic string, parts, id int32, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, func() error {
		z, err := c.topicZnode(topic)
		if err != nil {
			return err
		}
		for p := int32(0); p < parts; p++ {
			if !slices.Contains(z.replicas(p), id) || slices.Contains(z.adding(p), id) {
				continue
			}
			s, err := c.State(topic, p)
			if err != nil {
				return err
			}
			if !s.inISR(id) {
				return fmt.Errorf("broker %d not back in the ISR of %s-%d: %v", id, topic, p, s)
			}
		}
		return nil
	})
}

// TestReassignReplicationFactor: RF 1 -> 3 (the new followers copy the log
// and join the ISR) and RF 3 -> 2 with the leader among the removed (a new
// leader from the target is elected first, and the ISR never drops below
// min.insync.replicas=2), under load.
func TestReassignReplicationFactor(t *testing.T) {
	c := NewCluster(t, 3, failoverProps(nil))
	keepLogs(t, c)
	const up, down = "rf-up", "rf-down"
	createTopic(t, c, up, 0, 0, [][]int32{{1}}, map[string]string{"min.insync.replicas": "1"})
	createTopic(t, c, down, 0, 0, [][]int32{{1, 2, 3}}, nil)
	adm := adminFor(t, c)
	start := time.Now()
	pu, pd := startProducer(t, c, up, 1, up), startProducer(t, c, down, 1, down)
	pu.waitAcks(0, 300, start, 30*time.Second)
	pd.waitAcks(0, 300, start, 30*time.Second)
	samp := startISRSampler(t, c, map[string]int32{down: 1}, 2, 50*time.Millisecond)
	old := c.mustState(t, down, 0)
	targets := map[string]assignment{up: {0: {1, 2, 3}}, down: {0: {2, 3}}}
	moveStart := time.Now()
	submitReassignment(t, adm, up, targets[up])
	submitReassignment(t, adm, down, targets[down])
	for _, topic := range []string{up, down} {
		waitReassigned(t, c, adm, topic, targets[topic], 60*time.Second)
		t.Logf("%s at %v %s after the submission: %v", topic, targets[topic], time.Since(moveStart).Round(time.Millisecond), c.mustState(t, topic, 0))
		waitReplicaDirs(t, c, topic, targets[topic], 30*time.Second)
	}
	if s := c.mustState(t, down, 0); old.Leader == 1 && s.LeaderEpoch <= old.LeaderEpoch {
		t.Errorf("%s: leader 1 was removed but leader_epoch did not grow: %v then %v", down, old, s)
	}
	pu.waitAcks(0, 200, time.Now(), 30*time.Second)
	pd.waitAcks(0, 200, time.Now(), 30*time.Second)
	ackedUp, ackedDown := pu.Stop(false), pd.Stop(false)
	samp.check(t, down+" while shrinking")
	checkHistory(t, up+" after RF 1 -> 3", recsOf(ackedUp), readAll(t, c.liveSeeds(), up, readTimeout), false)
	checkHistory(t, down+" after RF 3 -> 2", recsOf(ackedDown), readAll(t, c.liveSeeds(), down, readTimeout), false)
	compareReplicaFiles(t, c, up, targets[up], recsOf(ackedUp))
	compareReplicaFiles(t, c, down, targets[down], recsOf(ackedDown))
}

// TestReassignCancel: a reassignment that cannot finish (its adding broker
// is frozen with SIGSTOP, within its session timeout) is cancelled through
// AlterPartitionAssignments with null replicas: the partition returns to
// its original replicas, the adding replica's directory is deleted once
// the broker runs again, and nothing acknowledged is lost.
func TestReassignCancel(t *testing.T) {
	c := NewCluster(t, 3, failoverProps(map[string]string{"zookeeper.session.timeout.ms": "15000"}))
	keepLogs(t, c)
	ctl, err := c.ControllerID()
	if err != nil {
		t.Fatal(err)
	}
	rest := c.others(ctl)
	frozen, kept := rest[0], rest[1]
	const topic = "cancel"
	orig := assignment{0: {kept, ctl}}
	createTopic(t, c, topic, 0, 0, [][]int32{orig[0]}, nil)
	adm := adminFor(t, c)
	start := time.Now()
	prod := startProducer(t, c, topic, 1, topic)
	prod.waitAcks(0, 300, start, 30*time.Second)

	// The admin client must not need a metadata request while a broker is
	// frozen (it could pick the frozen one and wait out its timeout): one
	// call now loads the metadata and the controller's connection.
	if _, err := listReassigning(adm, topic, 1); err != nil {
		t.Fatal(err)
	}
	c.Broker(frozen).Pause()
	paused := time.Now()
	target := assignment{0: {frozen, kept}}
	submitReassignment(t, adm, topic, target)
	eventually(t, 5*time.Second, func() error {
		live, err := listReassigning(adm, topic, 1)
		if err != nil {
			return err
		}
		r, ok := live[0]
		if !ok {
			return fmt.Errorf("%s-0 not listed as reassigning", topic)
		}
		if !sameSet(r.Replicas, []int32{frozen, kept, ctl}) || !slices.Equal(r.AddingReplicas, []int32{frozen}) || !slices.Equal(r.RemovingReplicas, []int32{ctl}) {
			return fmt.Errorf("ListPartitionReassignments %s-0: replicas %v adding %v removing %v; want [%d %d %d] adding [%d] removing [%d]",
				topic, r.Replicas, r.AddingReplicas, r.RemovingReplicas, frozen, kept, ctl, frozen, ctl)
		}
		z, err := c.topicZnode(topic)
		if err != nil {
			return err
		}
		if !slices.Equal(z.adding(0), []int32{frozen}) || !slices.Equal(z.removing(0), []int32{ctl}) {
			return fmt.Errorf("topic znode mid-move: %+v", z)
		}
		return nil
	})
	t.Logf("reassignment of %s-0 %v -> %v in flight, adding broker %d frozen", topic, orig[0], target[0], frozen)

	var req kadm.AlterPartitionAssignmentsReq
	req.CancelAssign(topic, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := adm.AlterPartitionAssignments(ctx, req)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("cancel: %v", err)
	}
	eventually(t, 5*time.Second, func() error {
		z, err := c.topicZnode(topic)
		if err != nil {
			return err
		}
		if !slices.Equal(z.replicas(0), orig[0]) || len(z.adding(0)) > 0 || len(z.removing(0)) > 0 {
			return fmt.Errorf("topic znode after the cancel: %+v, want %v with nothing adding or removing", z, orig[0])
		}
		return nil
	})
	t.Logf("topic znode back at %v %s after the freeze", orig[0], time.Since(paused).Round(time.Millisecond))
	c.Broker(frozen).Resume()
	if ok, _ := c.Registered(frozen); !ok {
		t.Fatalf("broker %d lost its registration while frozen %s: the test's session timeout is too short", frozen, time.Since(paused))
	}
	waitReassigned(t, c, adm, topic, orig, 30*time.Second)
	waitReplicaDirs(t, c, topic, orig, 30*time.Second)
	// A second cancel finds nothing to cancel: NO_REASSIGNMENT_IN_PROGRESS.
	resp, err = adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp[topic][0].Err; !errors.Is(got, kerr.NoReassignmentInProgress) {
		t.Errorf("cancelling a finished reassignment answered %v, want NO_REASSIGNMENT_IN_PROGRESS", got)
	}
	prod.waitAcks(0, 200, time.Now(), 30*time.Second)
	acked := prod.Stop(false)
	checkHistory(t, "after the cancel", recsOf(acked), readAll(t, c.liveSeeds(), topic, readTimeout), false)
	compareReplicaFiles(t, c, topic, orig, recsOf(acked))
}

// TestReassignControllerKill: the controller is killed with kill -9 while a
// reassignment is in flight (its adding broker briefly frozen so it cannot
// have finished); the next controller resumes it from the topic znode and
// finishes it, including a leader move for the partition whose leader is
// removed.
func TestReassignControllerKill(t *testing.T) {
	c := NewCluster(t, 4, failoverProps(nil))
	keepLogs(t, c)
	ctl, err := c.ControllerID()
	if err != nil {
		t.Fatal(err)
	}
	r := c.others(ctl)
	const topic = "ctl-kill"
	orig := assignment{0: {r[0], r[1]}, 1: {r[1], r[0]}}
	target := assignment{0: {r[0], r[2]}, 1: {r[2], r[0]}}
	createTopic(t, c, topic, 0, 0, [][]int32{orig[0], orig[1]}, nil)
	adm := adminFor(t, c)
	start := time.Now()
	prod := startProducer(t, c, topic, 2, topic)
	prod.waitAcks(-1, 300, start, 30*time.Second)
	epoch, err := c.ControllerEpoch()
	if err != nil {
		t.Fatal(err)
	}

	if _, err := listReassigning(adm, topic, 2); err != nil { // metadata loaded before the freeze
		t.Fatal(err)
	}
	c.Broker(r[2]).Pause()
	submitReassignment(t, adm, topic, target)
	eventually(t, 4*time.Second, func() error {
		z, err := c.topicZnode(topic)
		if err != nil {
			return err
		}
		for p := int32(0); p < 2; p++ {
			if !slices.Equal(z.adding(p), []int32{r[2]}) || !slices.Equal(z.removing(p), []int32{r[1]}) {
				return fmt.Errorf("topic znode %s-%d: adding %v removing %v, want [%d] and [%d]", topic, p, z.adding(p), z.removing(p), r[2], r[1])
			}
		}
		return nil
	})
	killed := time.Now()
	c.Broker(ctl).Kill()
	c.Broker(r[2]).Resume()
	t.Logf("controller %d killed with %s-0/1 reassigning %v -> %v; broker %d resumed", ctl, topic, orig, target, r[2])
	var next int32
	eventually(t, sessionTimeout+20*time.Second, func() error {
		id, err := c.ControllerID()
		if err != nil {
			return err
		}
		e, err := c.ControllerEpoch()
		if err != nil {
			return err
		}
		if id == ctl || e <= epoch {
			return fmt.Errorf("controller %d epoch %d", id, e)
		}
		next = id
		return nil
	})
	t.Logf("broker %d controller %s after the kill", next, time.Since(killed).Round(time.Millisecond))
	waitReassigned(t, c, adm, topic, target, 60*time.Second)
	t.Logf("reassignment finished by controller %d %s after the kill", next, time.Since(killed).Round(time.Millisecond))
	waitReplicaDirs(t, c, topic, target, 30*time.Second)
	prod.waitAcks(-1, 200, time.Now(), 30*time.Second)
	acked := prod.Stop(false)
	checkHistory(t, "after the controller failover", recsOf(acked), readAll(t, c.liveSeeds(), topic, readTimeout), false)
	compareReplicaFiles(t, c, topic, target, recsOf(acked))
}

// TestReassignLegacyZnode: a reassignment written straight to
// /admin/reassign_partitions, as kafka-reassign-partitions.sh --zookeeper
// of Kafka 2.x does, completes (one partition moving, one growing) and the
// znode is deleted.
func TestReassignLegacyZnode(t *testing.T) {
	c := NewCluster(t, 3, failoverProps(nil))
	keepLogs(t, c)
	const topic = "legacy"
	createTopic(t, c, topic, 0, 0, [][]int32{{1, 2}, {2, 3}}, nil)
	adm := adminFor(t, c)
	start := time.Now()
	prod := startProducer(t, c, topic, 2, topic)
	prod.waitAcks(-1, 300, start, 30*time.Second)
	target := assignment{0: {3, 1}, 1: {2, 3, 1}}
	writeLegacyReassignment(t, c, topic, target)
	written := time.Now()
	waitReassigned(t, c, adm, topic, target, 60*time.Second)
	eventually(t, 20*time.Second, func() error {
		if _, _, err := c.Get("/admin/reassign_partitions"); !errors.Is(err, zk.ErrNoNode) {
			return fmt.Errorf("/admin/reassign_partitions still there (err %v)", err)
		}
		return nil
	})
	t.Logf("legacy reassignment done and its znode deleted %s after it was written", time.Since(written).Round(time.Millisecond))
	waitReplicaDirs(t, c, topic, target, 30*time.Second)
	acked := prod.Stop(false)
	checkHistory(t, "after the legacy reassignment", recsOf(acked), readAll(t, c.liveSeeds(), topic, readTimeout), false)
}

// TestReassignBadInput: AlterPartitionAssignments answers Kafka's
// per-partition errors and changes nothing: INVALID_REPLICA_ASSIGNMENT for
// an empty replica list, a duplicate replica and a broker that does not
// exist, UNKNOWN_TOPIC_OR_PARTITION for a partition or topic that does not
// exist; a valid partition in the same request is still reassigned.
func TestReassignBadInput(t *testing.T) {
	c := NewCluster(t, 3, failoverProps(nil))
	keepLogs(t, c)
	const topic = "bad"
	createTopic(t, c, topic, 0, 0, [][]int32{{1, 2}, {2, 3}, {3, 1}, {1, 3}}, nil)
	adm := adminFor(t, c)
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, 0, []int32{})
	req.Assign(topic, 1, []int32{2, 2})
	req.Assign(topic, 2, []int32{3, 9})
	req.Assign(topic, 3, []int32{2, 3}) // valid
	req.Assign(topic, 7, []int32{1, 2})
	req.Assign("no-such-topic", 0, []int32{1, 2})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[int32]error{
		topic:           {0: kerr.InvalidReplicaAssignment, 1: kerr.InvalidReplicaAssignment, 2: kerr.InvalidReplicaAssignment, 3: nil, 7: kerr.UnknownTopicOrPartition},
		"no-such-topic": {0: kerr.UnknownTopicOrPartition},
	}
	for tp, ps := range want {
		for p, w := range ps {
			r, ok := resp[tp][p]
			switch {
			case !ok:
				t.Errorf("%s-%d: no result", tp, p)
			case w == nil && r.Err != nil, w != nil && !errors.Is(r.Err, w):
				t.Errorf("%s-%d: %v (%s), want %v", tp, p, r.Err, r.ErrMessage, w)
			default:
				t.Logf("%s-%d: %v %s", tp, p, r.Err, r.ErrMessage)
			}
		}
	}
	target := assignment{0: {1, 2}, 1: {2, 3}, 2: {3, 1}, 3: {2, 3}}
	waitReassigned(t, c, adm, topic, target, 30*time.Second)
	waitReplicaDirs(t, c, topic, target, 30*time.Second)
}
