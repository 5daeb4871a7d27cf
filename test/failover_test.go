package test

// Failover tests (issue 3): three broker processes, real ZooKeeper, RF=3
// topics with min.insync.replicas=2, acks=all idempotent kgo producers, and
// faults injected with signals: kill -9 of the leader and of the controller,
// SIGSTOP of a follower, two of three replicas down, an out-of-sync replica
// left as the only one alive (unclean election off and on), and SIGTERM of
// the leader (controlled shutdown). Cluster state is read from the state
// znodes, /controller and /controller_epoch, never from broker internals.

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// failoverTimeline is what watchFailover saw after a leader was killed.
type failoverTimeline struct {
	ZNodeGone, NewLeader time.Time
	// OldStateSeen is when the last poll that still read no new leader
	// began: the election came after it. NewLeader, when the first poll
	// that read one began, can be up to a poll interval after the election,
	// and acknowledgements from the new leader can come in between.
	OldStateSeen time.Time
	State        partState // the first state naming a new leader
	Seen         []partState
}

// watchFailover polls every 20 ms, from kill on, until /brokers/ids/<dead>
// is gone and the state znode of topic-p names a leader other than dead.
func watchFailover(t *testing.T, c *Cluster, topic string, p, dead int32, timeout time.Duration) failoverTimeline {
	t.Helper()
	var tl failoverTimeline
	deadline := time.Now().Add(timeout)
	for tl.ZNodeGone.IsZero() || tl.NewLeader.IsZero() {
		if time.Now().After(deadline) {
			t.Fatalf("within %s of the kill: znode gone at %v, new leader at %v; states seen: %v", timeout, tl.ZNodeGone, tl.NewLeader, tl.Seen)
		}
		now := time.Now()
		if tl.ZNodeGone.IsZero() {
			ok, err := c.Registered(dead)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				tl.ZNodeGone = now
			}
		}
		if tl.NewLeader.IsZero() {
			s, err := c.State(topic, p)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(tl.Seen); n == 0 || tl.Seen[n-1].ZkVersion != s.ZkVersion {
				tl.Seen = append(tl.Seen, s)
			}
			if s.Leader >= 0 && s.Leader != dead {
				tl.NewLeader, tl.State = now, s
			} else {
				tl.OldStateSeen = now
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return tl
}

// TestFailoverKillLeader: kill -9 the leader of partition 0 while an
// idempotent acks=all producer writes continuously to both partitions. A new
// leader from the ISR takes over with leader_epoch+1, production resumes,
// every acknowledged record is read back from the new leader at its offset;
// the old broker, restarted, rejoins as a follower until the ISR has 3
// members, and the three replicas' segment files then hold the same records.
func TestFailoverKillLeader(t *testing.T) {
	c := NewCluster(t, 3, failoverProps(nil))
	const topic = "fo-kill"
	createTopic(t, c, topic, 2, 3, nil, nil)
	start := time.Now()
	p := startProducer(t, c, topic, 2, "kill")
	p.waitAcks(0, 500, start, 60*time.Second)
	p.waitAcks(1, 500, start, 60*time.Second)

	before := c.mustState(t, topic, 0)
	other := c.mustState(t, topic, 1)
	t.Logf("before the kill: p0 %v; p1 %v", before, other)
	old := c.Broker(before.Leader)
	kill := time.Now()
	old.Kill()
	tl := watchFailover(t, c, topic, 0, old.ID(), sessionTimeout+30*time.Second)
	t.Logf("state znodes seen after the kill: %v", tl.Seen)
	st := tl.State
	if !before.inISR(st.Leader) {
		t.Errorf("new leader %d was not in the ISR %v before the kill", st.Leader, before.ISR)
	}
	if st.LeaderEpoch != before.LeaderEpoch+1 {
		t.Errorf("new leader's leader_epoch %d, want %d (old epoch + 1)", st.LeaderEpoch, before.LeaderEpoch+1)
	}
	if st.inISR(old.ID()) {
		t.Errorf("the dead broker %d is still in the new ISR %v", old.ID(), st.ISR)
	}
	if tl.NewLeader.Before(tl.ZNodeGone.Add(-100 * time.Millisecond)) {
		t.Errorf("a new leader was elected %s before /brokers/ids/%d vanished", tl.ZNodeGone.Sub(tl.NewLeader), old.ID())
	}
	// Nothing may be acknowledged on p0 while it has no leader (a killed
	// process's last responses may still arrive within a few ms): from
	// then to the last poll that still read the old state.
	if n := p.count(0, kill.Add(500*time.Millisecond)) - p.count(0, tl.OldStateSeen); n > 0 {
		t.Errorf("%d records of p0 acknowledged between the kill and the last poll (%s after it) that read no new leader",
			n, tl.OldStateSeen.Sub(kill).Round(time.Millisecond))
	}

	var first ackEvent
	eventually(t, 30*time.Second, func() error {
		var ok bool
		if first, ok = p.firstAck(0, tl.NewLeader); !ok {
			return fmt.Errorf("no acknowledgement on p0 since the new leader %d was elected", st.Leader)
		}
		return nil
	})
	p.waitAcks(0, 500, first.At, 60*time.Second)
	acked := p.Stop(false)
	read := readAll(t, c.liveSeeds(), topic, readTimeout)
	res := checkHistory(t, "after failover (read from the new leader)", recsOf(acked), read, false)
	t.Logf("failover figures (p0, leader %d killed): kill→/brokers/ids/%d gone %s; kill→new leader %d (leader_epoch %d→%d) in the state znode %s; kill→first acknowledged write after it %s; acknowledged=%d read-back=%d lost=%d",
		old.ID(), old.ID(), tl.ZNodeGone.Sub(kill).Round(time.Millisecond), st.Leader, before.LeaderEpoch, st.LeaderEpoch,
		tl.NewLeader.Sub(kill).Round(time.Millisecond), first.At.Sub(kill).Round(time.Millisecond), res.Acked, res.Read, res.Lost)
	t.Logf("longest gap between acknowledgements on p0 around the kill: %s; on p1: %s",
		longestGap(acked, 0, kill.Add(-time.Second), first.At).Round(time.Millisecond),
		longestGap(acked, 1, kill.Add(-time.Second), first.At).Round(time.Millisecond))

	// The old broker comes back while a second producer writes: it must
	// become a follower and re-enter the ISR, leadership staying put.
	p2 := startProducer(t, c, topic, 2, "rejoin")
	restart := time.Now()
	old.Start()
	for part := int32(0); part < 2; part++ {
		s := c.waitState(t, topic, part, 60*time.Second, func(s partState) error {
			if len(s.ISR) != 3 {
				return fmt.Errorf("ISR %v, want 3 members", s.ISR)
			}
			return nil
		})
		t.Logf("p%d ISR has 3 members again %s after the restart began: %v", part, time.Since(restart).Round(time.Millisecond), s)
		if part == 0 && s.Leader != st.Leader {
			t.Errorf("p0 leader moved from %d to %d when broker %d rejoined (auto.leader.rebalance.enable=false)", st.Leader, s.Leader, old.ID())
		}
	}
	waitMetadataLeaders(t, c, old, topic, 2)
	p2.waitAcks(-1, 500, time.Now(), 60*time.Second)
	acked2 := p2.Stop(false)
	all := append(recsOf(acked), recsOf(acked2)...)
	checkHistory(t, "after the old leader rejoined", all, readAll(t, c.liveSeeds(), topic, readTimeout), false)

	// Every acknowledgement is in (and so below the HW of) all three
	// replicas now: compare their segment files. SIGKILL leaves written
	// data in the page cache, readable.
	for _, b := range c.Brokers {
		b.Kill()
	}
	for part := int32(0); part < 2; part++ {
		var ackedHere []Rec
		for _, r := range all {
			if r.Partition == part {
				ackedHere = append(ackedHere, r)
			}
		}
		var logs [][]Rec
		for _, b := range c.Brokers {
			recs, err := readSegments(filepath.Join(b.DataDir, fmt.Sprintf("%s-%d", topic, part)), part)
			if err != nil {
				t.Errorf("broker %d: %v", b.ID(), err)
				continue
			}
			checkHistory(t, fmt.Sprintf("segment files of p%d on broker %d", part, b.ID()), ackedHere, recs, false)
			logs = append(logs, recs)
		}
		for i := 1; i < len(logs); i++ {
			if !slices.EqualFunc(logs[0], logs[i], func(a, b Rec) bool { return a.Offset == b.Offset && sameContent(a, b) }) {
				t.Errorf("p%d: replica logs differ: %d records on %d, %d on %d", part, len(logs[0]), c.Brokers[0].ID(), len(logs[i]), c.Brokers[i].ID())
			}
		}
	}
}

// TestFailoverFollowerPauseShrinksIsr: SIGSTOP a follower. The leader must
// drop it from the ISR in the state znode after replica.lag.time.max.ms (not
// well before), acks=all writes continue with two in-sync replicas, and
// after SIGCONT it is added back. The session timeout is long enough that
// the paused broker stays registered throughout.
func TestFailoverFollowerPauseShrinksIsr(t *testing.T) {
	c := NewCluster(t, 3, failoverProps(map[string]string{"zookeeper.session.timeout.ms": "30000"}))
	const topic = "fo-pause"
	createTopic(t, c, topic, 1, 3, nil, nil)
	start := time.Now()
	p := startProducer(t, c, topic, 1, "pause")
	p.waitAcks(0, 300, start, 60*time.Second)

	before := c.mustState(t, topic, 0)
	ctl, err := c.ControllerID()
	if err != nil {
		t.Fatal(err)
	}
	// A follower, the controller only if both followers are.
	followers := c.others(before.Leader)
	f := c.Broker(followers[0])
	if f.ID() == ctl {
		f = c.Broker(followers[1])
	}
	t.Logf("before: %v; controller %d; pausing follower %d", before, ctl, f.ID())

	paused := time.Now()
	f.Pause()
	var shrunk partState
	var shrunkAt time.Time
	for shrunkAt.IsZero() {
		s := c.mustState(t, topic, 0)
		now := time.Now()
		if !s.inISR(f.ID()) {
			shrunk, shrunkAt = s, now
			break
		}
		if now.Sub(paused) > lagTime+lagTime/2+10*time.Second {
			t.Fatalf("ISR still %v %s after pausing follower %d (replica.lag.time.max.ms=%s)", s.ISR, now.Sub(paused).Round(time.Millisecond), f.ID(), lagTime)
		}
		time.Sleep(20 * time.Millisecond)
	}
	took := shrunkAt.Sub(paused)
	t.Logf("ISR shrink: %s after SIGSTOP of %d (replica.lag.time.max.ms=%s): %v", took.Round(time.Millisecond), f.ID(), lagTime, shrunk)
	if took < lagTime*3/4 {
		t.Errorf("ISR shrank %s after the pause, well before replica.lag.time.max.ms=%s", took.Round(time.Millisecond), lagTime)
	}
	if shrunk.Leader != before.Leader || shrunk.LeaderEpoch != before.LeaderEpoch {
		t.Errorf("shrink changed the leader or its epoch: before %v, after %v", before, shrunk)
	}
	if len(shrunk.ISR) != 2 {
		t.Errorf("ISR after the shrink %v, want the leader and the running follower", shrunk.ISR)
	}

	// acks=all goes on with 2 in-sync replicas while the follower is frozen.
	p.waitAcks(0, 300, shrunkAt, 30*time.Second)
	if ok, err := c.Registered(f.ID()); err != nil || !ok {
		t.Fatalf("paused broker %d lost its registration (err %v): the session timeout is too short for this test", f.ID(), err)
	}
	t.Logf("acknowledged while %d was paused: %d after the shrink; longest gap between acknowledgements during the pause: %s",
		f.ID(), p.count(0, shrunkAt), longestGap(p.snapshot(), 0, paused, time.Now()).Round(time.Millisecond))

	resumed := time.Now()
	f.Resume()
	back := c.waitState(t, topic, 0, 30*time.Second, func(s partState) error {
		if !s.inISR(f.ID()) || len(s.ISR) != 3 {
			return fmt.Errorf("follower %d not back in the ISR", f.ID())
		}
		return nil
	})
	t.Logf("ISR expand: %s after SIGCONT: %v", time.Since(resumed).Round(time.Millisecond), back)
	if back.Leader != before.Leader {
		t.Errorf("leader moved from %d to %d during the pause", before.Leader, back.Leader)
	}
	p.waitAcks(0, 300, time.Now(), 30*time.Second)
	acked := p.Stop(false)
	checkHistory(t, "after pause and resume", recsOf(acked), readAll(t, c.liveSeeds(), topic, readTimeout), false)
}

// TestFailoverControllerKill: kill -9 the controller. Another broker becomes
// controller with a higher /controller_epoch, moves the dead broker's
// leaderships, and serves a topic created afterwards: every partition gets a
// leader that Metadata shows, and records written there read back.
func TestFailoverControllerKill(t *testing.T) {
	c := NewCluster(t, 3, failoverProps(nil))
	const before, after, later = "fo-ctl-before", "fo-ctl-after", "fo-ctl-rejoined"
	createTopic(t, c, before, 3, 3, nil, nil)
	oldID, err := c.ControllerID()
	if err != nil {
		t.Fatal(err)
	}
	oldEpoch, err := c.ControllerEpoch()
	if err != nil {
		t.Fatal(err)
	}
	old := c.Broker(oldID)
	kill := time.Now()
	old.Kill()
	var newID, newEpoch int32
	eventually(t, sessionTimeout+30*time.Second, func() error {
		id, err := c.ControllerID()
		if err != nil {
			return err
		}
		if id == oldID {
			return fmt.Errorf("/controller still names the killed broker %d", oldID)
		}
		e, err := c.ControllerEpoch()
		if err != nil {
			return err
		}
		newID, newEpoch = id, e
		return nil
	})
	t.Logf("controller %d (epoch %d) killed; broker %d is controller with epoch %d %s later", oldID, oldEpoch, newID, newEpoch, time.Since(kill).Round(time.Millisecond))
	if newEpoch <= oldEpoch {
		t.Errorf("/controller_epoch %d after failover, want > %d", newEpoch, oldEpoch)
	}
	if !slices.Contains(c.others(oldID), newID) {
		t.Errorf("new controller %d is not one of the live brokers %v", newID, c.others(oldID))
	}

	// The dead broker leaves every partition's leadership and ISR.
	for part := int32(0); part < 3; part++ {
		s := c.waitState(t, before, part, 30*time.Second, func(s partState) error {
			if s.Leader < 0 || s.Leader == oldID || s.inISR(oldID) {
				return fmt.Errorf("dead broker %d still leads or is in the ISR", oldID)
			}
			return nil
		})
		t.Logf("%s-%d after the controller's death: %v", before, part, s)
	}

	// A topic created now (RF=2: two brokers are alive) gets leaders from
	// the new controller.
	created := time.Now()
	createTopic(t, c, after, 3, 2, nil, nil)
	t.Logf("topic %s created and led on every partition %s after the request", after, time.Since(created).Round(time.Millisecond))
	for part := int32(0); part < 3; part++ {
		s := c.mustState(t, after, part)
		if s.ControllerEpoch != newEpoch {
			t.Errorf("%s-%d state written with controller_epoch %d, want the new controller's %d", after, part, s.ControllerEpoch, newEpoch)
		}
		if s.Leader == oldID || s.inISR(oldID) {
			t.Errorf("%s-%d assigned to the dead broker %d: %v", after, part, oldID, s)
		}
	}
	p := startProducer(t, c, after, 3, "ctl")
	p.waitAcks(-1, 300, created, 30*time.Second)
	acked := p.Stop(false)
	checkHistory(t, "topic created under the new controller", recsOf(acked), readAll(t, c.liveSeeds(), after, readTimeout), false)

	// The old controller returns as an ordinary broker; the controller
	// stays, and an RF=3 topic now spans all three.
	old.Start()
	if id, err := c.ControllerID(); err != nil || id != newID {
		t.Errorf("after broker %d restarted, /controller names %d (err %v), want %d", oldID, id, err, newID)
	}
	createTopic(t, c, later, 2, 3, nil, nil)
}

// TestFailoverTwoOfThreeDown: with RF=3 and min.insync.replicas=2, kill both
// followers. Once the ISR is the leader alone, an acks=all Produce gets
// NOT_ENOUGH_REPLICAS and is not written; reads of acknowledged data still
// work and nothing acknowledged is lost. With the two back, writes succeed.
func TestFailoverTwoOfThreeDown(t *testing.T) {
	c := NewCluster(t, 3, failoverProps(nil))
	const topic = "fo-two"
	createTopic(t, c, topic, 1, 3, nil, nil)
	start := time.Now()
	p := startProducer(t, c, topic, 1, "two")
	p.waitAcks(0, 1000, start, 60*time.Second)
	acked := recsOf(p.Stop(false))

	before := c.mustState(t, topic, 0)
	leader := c.Broker(before.Leader)
	down := c.others(before.Leader)
	kill := time.Now()
	for _, id := range down {
		c.Broker(id).Kill()
	}
	s := c.waitState(t, topic, 0, sessionTimeout+30*time.Second, func(s partState) error {
		if !slices.Equal(s.ISR, []int32{leader.ID()}) {
			return fmt.Errorf("ISR %v, want [%d]", s.ISR, leader.ID())
		}
		return nil
	})
	t.Logf("brokers %v killed; ISR shrank to the leader alone %s later: %v", down, time.Since(kill).Round(time.Millisecond), s)
	if s.Leader != leader.ID() {
		t.Errorf("leader moved from %d to %d although it stayed alive", leader.ID(), s.Leader)
	}

	rejected := Rec{Partition: 0, Key: []byte("rejected-1"), Value: []byte("must never be visible")}
	code, _, err := rawProduce(leader, topic, 0, []Rec{rejected})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("acks=all Produce with ISR [%d] and min.insync.replicas=2: error code %d (%v)", leader.ID(), code, kerr.ErrorForCode(code))
	if code != kerr.NotEnoughReplicas.Code {
		t.Errorf("acks=all Produce with ISR [%d]: error code %d (%v), want NOT_ENOUGH_REPLICAS (19)", leader.ID(), code, kerr.ErrorForCode(code))
	}
	checkHistory(t, "two of three down (read from the leader)", acked, readAll(t, c.liveSeeds(), topic, readTimeout), false)

	for _, id := range down {
		c.Broker(id).Start()
	}
	c.waitState(t, topic, 0, 60*time.Second, func(s partState) error {
		if len(s.ISR) < 2 {
			return fmt.Errorf("ISR %v, want 2 members at least", s.ISR)
		}
		return nil
	})
	// Writes succeed again. NOT_ENOUGH_REPLICAS is a refusal before the
	// append, so retrying it with a fresh record is safe; any other error is not.
	for i := 1; ; i++ {
		r := Rec{Partition: 0, Key: []byte(fmt.Sprintf("after-restart-%d", i)), Value: []byte("written with the followers back")}
		code, base, err := rawProduce(leader, topic, 0, []Rec{r})
		if err != nil {
			t.Fatal(err)
		}
		if code == 0 {
			r.Offset = base
			acked = append(acked, r)
			t.Logf("acks=all Produce succeeds again at offset %d (attempt %d)", base, i)
			break
		}
		if code != kerr.NotEnoughReplicas.Code || i == 50 {
			t.Fatalf("acks=all Produce with the followers back: error code %d (%v)", code, kerr.ErrorForCode(code))
		}
		time.Sleep(200 * time.Millisecond) // between retries of a refused write
	}
	c.waitState(t, topic, 0, 60*time.Second, func(s partState) error {
		if len(s.ISR) != 3 {
			return fmt.Errorf("ISR %v, want 3 members", s.ISR)
		}
		return nil
	})
	p2 := startProducer(t, c, topic, 1, "two-back")
	p2.waitAcks(0, 300, time.Now(), 30*time.Second)
	acked = append(acked, recsOf(p2.Stop(false))...)
	read := readAll(t, c.liveSeeds(), topic, readTimeout)
	checkHistory(t, "followers back", acked, read, false)
	for _, r := range read {
		if string(r.Key) == string(rejected.Key) {
			t.Errorf("the record refused with NOT_ENOUGH_REPLICAS is in the log at offset %d", r.Offset)
		}
	}
}

// TestFailoverUnclean: replica O is frozen until it leaves the ISR while
// writes go on, then the two in-sync replicas are killed and O resumes, the
// only replica alive. Topic u-off (unclean election off) must go offline:
// leader -1 in the state znode, Metadata LEADER_NOT_AVAILABLE, Produce
// refused. Topic u-on (created with unclean.leader.election.enable=true)
// must be led by O, losing what O never had. Then the override is set on
// u-off through ZooKeeper, as kafka-configs.sh --zookeeper does, and O must
// lead it too.
func TestFailoverUnclean(t *testing.T) {
	// O's pause lasts about replica.lag.time.max.ms and a half; the session
	// must outlive it so O stays registered and becomes the controller that
	// sees the others die.
	const lag, session = 3 * time.Second, 9 * time.Second
	c := NewCluster(t, 3, failoverProps(map[string]string{
		"zookeeper.session.timeout.ms": fmt.Sprint(session.Milliseconds()),
		"replica.lag.time.max.ms":      fmt.Sprint(lag.Milliseconds()),
	}))
	ctl, err := c.ControllerID()
	if err != nil {
		t.Fatal(err)
	}
	// O is the controller, so that the controller stays alive through the
	// deaths of the in-sync replicas; L leads and F follows.
	o := c.Broker(ctl)
	rest := c.others(ctl)
	l, f := c.Broker(rest[0]), c.Broker(rest[1])
	assign := [][]int32{{l.ID(), f.ID(), o.ID()}}
	const off, on = "u-off", "u-on"
	createTopic(t, c, off, 0, 0, assign, nil)
	createTopic(t, c, on, 0, 0, assign, map[string]string{"unclean.leader.election.enable": "true"})
	start := time.Now()
	prods := map[string]*liveProducer{off: startProducer(t, c, off, 1, off), on: startProducer(t, c, on, 1, on)}
	for _, p := range prods {
		p.waitAcks(0, 300, start, 60*time.Second)
	}
	initial := map[string]partState{off: c.mustState(t, off, 0), on: c.mustState(t, on, 0)}
	t.Logf("assignment %v, controller %d; before: %s %v, %s %v", assign, ctl, off, initial[off], on, initial[on])

	paused := time.Now()
	o.Pause()
	shrunkAt := time.Time{}
	for _, topic := range []string{off, on} {
		s := c.waitState(t, topic, 0, lag*2+15*time.Second, func(s partState) error {
			if s.inISR(o.ID()) {
				return fmt.Errorf("paused replica %d still in the ISR", o.ID())
			}
			return nil
		})
		t.Logf("%s: ISR without %d %s after its SIGSTOP: %v", topic, o.ID(), time.Since(paused).Round(time.Millisecond), s)
		shrunkAt = time.Now()
	}
	// Records sent after the shrink cannot be on the frozen O.
	missing := map[string]int{}
	for _, p := range prods {
		p.waitAcks(0, 100, shrunkAt, 20*time.Second)
	}
	acked := map[string][]ackEvent{}
	for topic, p := range prods {
		acked[topic] = p.Stop(false)
		for _, a := range acked[topic] {
			if a.Sent.After(shrunkAt) {
				missing[topic]++
			}
		}
	}

	kill := time.Now()
	l.Kill()
	f.Kill()
	o.Resume()
	if ok, err := c.Registered(o.ID()); err != nil || !ok {
		t.Fatalf("broker %d lost its registration while paused %s (err %v): the session timeout is too short for this test", o.ID(), time.Since(paused).Round(time.Millisecond), err)
	}
	t.Logf("in-sync replicas %d and %d killed; %d resumed after a %s pause", l.ID(), f.ID(), o.ID(), kill.Sub(paused).Round(time.Millisecond))

	// Unclean off: offline.
	sOff := c.waitState(t, off, 0, session+30*time.Second, func(s partState) error {
		if s.Leader != -1 {
			return fmt.Errorf("leader %d, want -1 (offline)", s.Leader)
		}
		return nil
	})
	t.Logf("%s offline %s after the kills: %v", off, time.Since(kill).Round(time.Millisecond), sOff)
	if sOff.inISR(o.ID()) {
		t.Errorf("%s: out-of-sync replica %d put back in the ISR %v", off, o.ID(), sOff.ISR)
	}
	if sOff.LeaderEpoch <= initial[off].LeaderEpoch {
		t.Errorf("%s: leader_epoch %d after going offline, want > %d", off, sOff.LeaderEpoch, initial[off].LeaderEpoch)
	}

	// Unclean on: O leads, with itself as the ISR.
	sOn := c.waitState(t, on, 0, 30*time.Second, func(s partState) error {
		if s.Leader != o.ID() {
			return fmt.Errorf("leader %d, want the out-of-sync replica %d (unclean election enabled)", s.Leader, o.ID())
		}
		return nil
	})
	t.Logf("%s led uncleanly by %d %s after the kills: %v", on, o.ID(), time.Since(kill).Round(time.Millisecond), sOn)
	if !slices.Equal(sOn.ISR, []int32{o.ID()}) || sOn.LeaderEpoch <= initial[on].LeaderEpoch {
		t.Errorf("%s after the unclean election: %v, want ISR [%d] and leader_epoch > %d", on, sOn, o.ID(), initial[on].LeaderEpoch)
	}

	// u-off stays offline (it does not drift into an unclean election) and
	// clients see it: Metadata and Produce.
	consistently(t, 3*time.Second, func() error {
		s, err := c.State(off, 0)
		if err != nil {
			return err
		}
		if s.Leader != -1 {
			return fmt.Errorf("%s with unclean election off got leader %d: %v", off, s.Leader, s)
		}
		return nil
	})
	var mdErr int16
	eventually(t, 15*time.Second, func() error {
		mt, err := topicMetadata(o, off)
		if err != nil {
			return err
		}
		if len(mt.Partitions) != 1 {
			return fmt.Errorf("metadata of %s from %d: %d partitions", off, o.ID(), len(mt.Partitions))
		}
		mp := mt.Partitions[0]
		if mp.Leader != -1 || mp.ErrorCode != kerr.LeaderNotAvailable.Code {
			return fmt.Errorf("metadata of %s-0 from %d: leader %d error %d, want -1 and LEADER_NOT_AVAILABLE (5)", off, o.ID(), mp.Leader, mp.ErrorCode)
		}
		mdErr = mp.ErrorCode
		return nil
	})
	code, _, err := rawProduce(o, off, 0, []Rec{{Key: []byte("to-offline"), Value: []byte("x")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s offline: Metadata error %d (%v); Produce to %d error %d (%v)", off, mdErr, kerr.ErrorForCode(mdErr), o.ID(), code, kerr.ErrorForCode(code))
	if code == 0 {
		t.Errorf("Produce to offline %s-0 on broker %d succeeded", off, o.ID())
	}

	// What O kept of u-on: a prefix of the history, missing at least what
	// was written after it left the ISR.
	lossFigure := func(topic string) {
		t.Helper()
		read := readAll(t, c.liveSeeds(), topic, readTimeout)
		res := analyzeHistory(recsOf(acked[topic]), read, false)
		t.Logf("%s after the unclean election: acknowledged=%d read-back=%d lost=%d (%.1f%%; %d sent after O left the ISR) mismatched=%d inconsistent=%d unacknowledged-read=%d",
			topic, res.Acked, res.Read, res.Lost, 100*float64(res.Lost)/float64(max(res.Acked, 1)), missing[topic], res.Mismatched, res.Inconsistent, res.Extra)
		if res.Lost < missing[topic] || missing[topic] == 0 {
			t.Errorf("%s: %d acknowledged records lost, want at least the %d sent after replica %d left the ISR: the replica was not out of sync",
				topic, res.Lost, missing[topic], o.ID())
		}
		if res.Mismatched+res.Inconsistent+res.Extra+res.Gaps+res.Unordered+res.Duplicated > 0 {
			t.Errorf("%s: the unclean leader's log is not a prefix of the history: %v", topic, res.Problems)
		}
	}
	lossFigure(on)

	// The override on u-off, written to ZooKeeper with a change notification.
	set := time.Now()
	c.setTopicConfig(t, off, map[string]string{"unclean.leader.election.enable": "true"})
	if err := poll(10*time.Second, func() error {
		s, err := c.State(off, 0)
		if err != nil {
			return err
		}
		if s.Leader != o.ID() {
			return fmt.Errorf("leader %d", s.Leader)
		}
		return nil
	}); err != nil {
		t.Errorf("%s: leader not elected within 10 s of setting unclean.leader.election.enable=true in /config/topics/%s (and a config change notification): %v", off, off, err)
		// Kafka reads the override at the next election in any case: a
		// broker change event (O bouncing) must elect it.
		o.Kill()
		o.Start()
	}
	sOff = c.waitState(t, off, 0, 30*time.Second, func(s partState) error {
		if s.Leader != o.ID() {
			return fmt.Errorf("leader %d, want %d after the override", s.Leader, o.ID())
		}
		return nil
	})
	t.Logf("%s led by %d %s after the override was written: %v", off, o.ID(), time.Since(set).Round(time.Millisecond), sOff)
	lossFigure(off)
}

// TestFailoverControlledShutdown: SIGTERM the leader. The state znode must
// name a new leader before the process exits (controlled shutdown), and the
// producer sees only a short gap, nothing acknowledged lost.
func TestFailoverControlledShutdown(t *testing.T) {
	c := NewCluster(t, 3, failoverProps(nil))
	const topic = "fo-term"
	createTopic(t, c, topic, 1, 3, nil, nil)
	start := time.Now()
	p := startProducer(t, c, topic, 1, "term")
	p.waitAcks(0, 300, start, 60*time.Second)
	before := c.mustState(t, topic, 0)
	leader := c.Broker(before.Leader)

	sig := time.Now()
	done := leader.terminate()
	var moved partState
	var movedAt, exited time.Time
	deadline := time.After(stopTimeout + 5*time.Second)
	for exited.IsZero() {
		select {
		case <-done:
			exited = time.Now()
		case <-deadline:
			leader.Kill()
			t.Fatalf("broker %d still running %s after SIGTERM", leader.ID(), stopTimeout+5*time.Second)
		default:
		}
		if movedAt.IsZero() {
			s := c.mustState(t, topic, 0)
			if s.Leader >= 0 && s.Leader != leader.ID() {
				moved, movedAt = s, time.Now()
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code := leader.exitCode(); code != 0 {
		t.Errorf("broker %d exited with code %d after SIGTERM, want 0", leader.ID(), code)
	}
	if movedAt.IsZero() {
		s := c.mustState(t, topic, 0)
		t.Fatalf("broker %d exited %s after SIGTERM while the state znode still named it leader (%v): no controlled shutdown",
			leader.ID(), exited.Sub(sig).Round(time.Millisecond), s)
	}
	t.Logf("SIGTERM to leader %d: new leader %d in the state znode after %s, process exit after %s: %v",
		leader.ID(), moved.Leader, movedAt.Sub(sig).Round(time.Millisecond), exited.Sub(sig).Round(time.Millisecond), moved)
	if !before.inISR(moved.Leader) || moved.LeaderEpoch != before.LeaderEpoch+1 {
		t.Errorf("after controlled shutdown: %v, want a leader from the ISR %v with leader_epoch %d", moved, before.ISR, before.LeaderEpoch+1)
	}
	p.waitAcks(0, 300, exited, 30*time.Second)
	acked := p.Stop(false)
	gap := longestGap(acked, 0, sig.Add(-time.Second), exited.Add(time.Second))
	t.Logf("longest gap between acknowledgements around the controlled shutdown: %s (budget: under 1 s)", gap.Round(time.Millisecond))
	// Well under the session timeout, the price of an uncontrolled failover.
	if gap > sessionTimeout/2 {
		t.Errorf("writes stalled %s across a controlled shutdown, want well under the session timeout %s", gap.Round(time.Millisecond), sessionTimeout)
	}
	checkHistory(t, "after controlled shutdown", recsOf(acked), readAll(t, c.liveSeeds(), topic, readTimeout), false)
}
