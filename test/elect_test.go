package test

// ElectLeaders (43, KIP-183 and KIP-460) through kadm on broker processes:
// a preferred election restores the preferred leader after it moved away
// and answers ELECTION_NOT_NEEDED where it already leads and
// PREFERRED_LEADER_NOT_AVAILABLE while it is down; with
// unclean.leader.election.enable=false an offline partition whose only live
// replica is out of sync gets a leader only through an UNCLEAN election,
// and only the partition that was asked for.

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

// electOne runs ElectLeaders of the given type for s and returns the
// per-partition results of topic.
func electOne(t *testing.T, adm *kadm.Client, how kadm.ElectLeadersHow, s kadm.TopicsSet, topic string) map[int32]kadm.ElectLeadersResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.ElectLeaders(ctx, how, s)
	if err != nil {
		t.Fatalf("ElectLeaders(%d, %v): %v", how, s, err)
	}
	return resp[topic]
}

func wantElect(t *testing.T, res map[int32]kadm.ElectLeadersResult, p int32, want error) {
	t.Helper()
	r, ok := res[p]
	if !ok {
		t.Errorf("ElectLeaders: no result for partition %d (results %+v)", p, res)
		return
	}
	if !errors.Is(r.Err, want) && !(want == nil && r.Err == nil) {
		t.Errorf("ElectLeaders partition %d: %v (%s), want %v", p, r.Err, r.ErrMessage, want)
	}
}

func partSet(topic string, ps ...int32) kadm.TopicsSet {
	var s kadm.TopicsSet
	s.Add(topic, ps...)
	return s
}

// TestElectLeadersPreferred: with auto.leader.rebalance.enable=false,
// leadership that moved away from the preferred replica (killed, then
// restarted and back in the ISR) stays away until a preferred ElectLeaders
// for all partitions moves it back; a partition led by its preferred
// replica answers ELECTION_NOT_NEEDED, one whose preferred replica is down
// PREFERRED_LEADER_NOT_AVAILABLE, and an unknown partition
// UNKNOWN_TOPIC_OR_PARTITION. The legacy /admin/preferred_replica_election
// znode does the same for the partition it names and is deleted.
func TestElectLeadersPreferred(t *testing.T) {
	c := NewCluster(t, 3, failoverProps(nil))
	keepLogs(t, c)
	const topic = "elect"
	createTopic(t, c, topic, 0, 0, [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}}, nil)
	adm := adminFor(t, c)
	start := time.Now()
	prod := startProducer(t, c, topic, 3, topic)
	prod.waitAcks(-1, 300, start, 30*time.Second)

	res := electOne(t, adm, kadm.ElectPreferredReplica, partSet(topic, 0, 1, 2, 7), topic)
	for p := int32(0); p < 3; p++ {
		wantElect(t, res, p, kerr.ElectionNotNeeded)
	}
	wantElect(t, res, 7, kerr.UnknownTopicOrPartition)

	c.Broker(1).Kill()
	moved := c.waitState(t, topic, 0, sessionTimeout+30*time.Second, func(s partState) error {
		if s.Leader == 1 || s.Leader < 0 {
			return fmt.Errorf("leader still %d", s.Leader)
		}
		return nil
	})
	wantElect(t, electOne(t, adm, kadm.ElectPreferredReplica, partSet(topic, 0), topic), 0, kerr.PreferredLeaderNotAvailable)
	c.Broker(1).Start()
	c.waitState(t, topic, 0, 60*time.Second, func(s partState) error {
		if !s.inISR(1) {
			return errors.New("1 not back in the ISR")
		}
		return nil
	})
	consistently(t, 2*time.Second, func() error {
		if s := c.mustState(t, topic, 0); s.Leader == 1 {
			return fmt.Errorf("leadership went back to 1 on its own with auto.leader.rebalance.enable=false: %v", s)
		}
		return nil
	})
	t.Logf("%s-0 led by %d after the preferred leader 1 was killed and restarted: %v", topic, moved.Leader, c.mustState(t, topic, 0))

	elected := time.Now()
	res = electOne(t, adm, kadm.ElectPreferredReplica, nil, topic) // every partition
	wantElect(t, res, 0, nil)
	for _, p := range []int32{1, 2} {
		if r, ok := res[p]; ok && r.Err != nil && !errors.Is(r.Err, kerr.ElectionNotNeeded) {
			t.Errorf("ElectLeaders (all partitions) %s-%d: %v, want none or ELECTION_NOT_NEEDED", topic, p, r.Err)
		}
	}
	back := c.mustState(t, topic, 0)
	if back.Leader != 1 {
		// The response comes once the controller has written the election.
		t.Errorf("after a successful preferred election %s-0 is led by %d: %v", topic, back.Leader, back)
	}
	if back.LeaderEpoch <= moved.LeaderEpoch || !slices.Contains(back.ISR, 1) {
		t.Errorf("preferred election: state %v after %v, want a higher leader_epoch", back, moved)
	}
	for _, b := range c.Brokers {
		waitMetadataLeaders(t, c, b, topic, 3)
	}
	t.Logf("preferred election answered and written %s after the request: %v", time.Since(elected).Round(time.Millisecond), back)

	// The 2.x path: /admin/preferred_replica_election written directly, as
	// kafka-preferred-replica-election.sh --zookeeper did, for p1 after its
	// preferred leader 2 was bounced.
	c.Broker(2).Restart()
	c.waitState(t, topic, 1, 60*time.Second, func(s partState) error {
		if s.Leader == 2 || !s.inISR(2) {
			return fmt.Errorf("want 2 back in the ISR, not leading")
		}
		return nil
	})
	data := fmt.Sprintf(`{"version":1,"partitions":[{"topic":%q,"partition":1}]}`, topic)
	if _, err := c.ZK.Create(c.Path("/admin/preferred_replica_election"), []byte(data), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("create /admin/preferred_replica_election: %v", err)
	}
	c.waitState(t, topic, 1, 20*time.Second, func(s partState) error {
		if s.Leader != 2 {
			return fmt.Errorf("leader %d after /admin/preferred_replica_election, want the preferred 2", s.Leader)
		}
		return nil
	})
	eventually(t, 20*time.Second, func() error {
		if _, _, err := c.Get("/admin/preferred_replica_election"); !errors.Is(err, zk.ErrNoNode) {
			return fmt.Errorf("/admin/preferred_replica_election still there (err %v)", err)
		}
		return nil
	})
	acked := prod.Stop(false)
	checkHistory(t, "after the preferred elections", recsOf(acked), readAll(t, c.liveSeeds(), topic, readTimeout), false)
}

// TestElectLeadersUnclean: the controller O is frozen until both topics'
// ISRs shrink to the two others; then both in-sync replicas are killed and
// O resumes as the only live replica, out of sync. With unclean election
// off both partitions stay offline, and a preferred election cannot help
// (PREFERRED_LEADER_NOT_AVAILABLE). An UNCLEAN ElectLeaders for one of them
// makes O its leader; the other stays offline. A partition that has a
// leader answers ELECTION_NOT_NEEDED to an unclean election.
func TestElectLeadersUnclean(t *testing.T) {
	const lag, session = 3 * time.Second, 9 * time.Second
	c := NewCluster(t, 3, failoverProps(map[string]string{
		"zookeeper.session.timeout.ms": fmt.Sprint(session.Milliseconds()),
		"replica.lag.time.max.ms":      fmt.Sprint(lag.Milliseconds()),
	}))
	keepLogs(t, c)
	ctl, err := c.ControllerID()
	if err != nil {
		t.Fatal(err)
	}
	o := c.Broker(ctl)
	rest := c.others(ctl)
	l, f := c.Broker(rest[0]), c.Broker(rest[1])
	assign := [][]int32{{l.ID(), f.ID(), o.ID()}}
	const asked, left, solo = "u-asked", "u-left", "u-solo"
	createTopic(t, c, asked, 0, 0, assign, nil)
	createTopic(t, c, left, 0, 0, assign, nil)
	createTopic(t, c, solo, 0, 0, [][]int32{{o.ID()}}, map[string]string{"min.insync.replicas": "1"})
	adm := adminFor(t, c)
	start := time.Now()
	prods := map[string]*liveProducer{asked: startProducer(t, c, asked, 1, asked), left: startProducer(t, c, left, 1, left)}
	for _, p := range prods {
		p.waitAcks(0, 300, start, 60*time.Second)
	}

	wantElect(t, electOne(t, adm, kadm.ElectLiveReplica, partSet(solo, 0), solo), 0, kerr.ElectionNotNeeded)

	o.Pause()
	for _, topic := range []string{asked, left} {
		c.waitState(t, topic, 0, lag*2+15*time.Second, func(s partState) error {
			if s.inISR(o.ID()) {
				return fmt.Errorf("paused replica %d still in the ISR", o.ID())
			}
			return nil
		})
	}
	shrunk := time.Now()
	for _, p := range prods {
		p.waitAcks(0, 100, shrunk, 20*time.Second)
	}
	acked := map[string][]ackEvent{}
	for topic, p := range prods {
		acked[topic] = p.Stop(false)
	}
	l.Kill()
	f.Kill()
	o.Resume()
	if ok, err := c.Registered(o.ID()); err != nil || !ok {
		t.Fatalf("broker %d lost its registration while paused (err %v): the session timeout is too short for this test", o.ID(), err)
	}
	for _, topic := range []string{asked, left} {
		c.waitState(t, topic, 0, session+30*time.Second, func(s partState) error {
			if s.Leader != -1 {
				return fmt.Errorf("leader %d, want -1 (offline)", s.Leader)
			}
			return nil
		})
	}
	consistently(t, 2*time.Second, func() error {
		for _, topic := range []string{asked, left} {
			if s := c.mustState(t, topic, 0); s.Leader != -1 {
				return fmt.Errorf("%s got leader %d without an unclean election: %v", topic, s.Leader, s)
			}
		}
		return nil
	})
	wantElect(t, electOne(t, adm, kadm.ElectPreferredReplica, partSet(asked, 0), asked), 0, kerr.PreferredLeaderNotAvailable)
	if s := c.mustState(t, asked, 0); s.Leader != -1 {
		t.Fatalf("a preferred election made %d leader of %s-0 although it is out of sync: %v", s.Leader, asked, s)
	}

	wantElect(t, electOne(t, adm, kadm.ElectLiveReplica, partSet(asked, 0), asked), 0, nil)
	s := c.waitState(t, asked, 0, 10*time.Second, func(s partState) error {
		if s.Leader != o.ID() || !slices.Equal(s.ISR, []int32{o.ID()}) {
			return fmt.Errorf("want leader %d and ISR [%d]", o.ID(), o.ID())
		}
		return nil
	})
	t.Logf("%s-0 after the unclean ElectLeaders: %v", asked, s)
	consistently(t, 3*time.Second, func() error {
		if s := c.mustState(t, left, 0); s.Leader != -1 {
			return fmt.Errorf("%s, not asked for, got leader %d: %v", left, s.Leader, s)
		}
		return nil
	})
	// What O kept is a prefix of the history of the partition it leads now.
	read := readAll(t, c.liveSeeds(), asked, readTimeout)
	res := analyzeHistory(recsOf(acked[asked]), read, false)
	t.Logf("%s after the unclean election: acknowledged=%d read-back=%d lost=%d", asked, res.Acked, res.Read, res.Lost)
	if res.Lost == 0 {
		t.Errorf("%s: nothing lost, so replica %d was not out of sync and the test proves nothing", asked, o.ID())
	}
	if res.Mismatched+res.Inconsistent+res.Extra+res.Gaps+res.Unordered+res.Duplicated > 0 {
		t.Errorf("%s: the unclean leader's log is not a prefix of the history: %v", asked, res.Problems)
	}
}
