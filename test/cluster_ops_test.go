package test

// Cluster operations on three brokers that are not failures: topic
// deletion reaching every replica, and leadership returning to the
// preferred replica with auto.leader.rebalance.enable.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClusterDeleteTopic: deleting an RF=3 topic removes its partition
// directories on every broker and its znodes, and Metadata stops listing it.
func TestClusterDeleteTopic(t *testing.T) {
	c := NewCluster(t, 3, failoverProps(nil))
	const topic = "doomed"
	createTopic(t, c, topic, 2, 3, nil, nil)
	cl := c.Client(kgo.DefaultProduceTopic(topic))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < 20; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	dirs := func() []string {
		var out []string
		for _, b := range c.Brokers {
			for p := 0; p < 2; p++ {
				d := filepath.Join(b.DataDir, fmt.Sprintf("%s-%d", topic, p))
				if _, err := os.Stat(d); err == nil {
					out = append(out, d)
				}
			}
		}
		return out
	}
	eventually(t, 20*time.Second, func() error {
		if n := len(dirs()); n != 6 {
			return fmt.Errorf("%d of 6 replica directories exist", n)
		}
		return nil
	})

	adm := kadm.NewClient(cl)
	resp, err := adm.DeleteTopics(ctx, topic)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("delete topic: %v", err)
	}
	eventually(t, 30*time.Second, func() error {
		if left := dirs(); len(left) > 0 {
			return fmt.Errorf("replica directories still present: %v", left)
		}
		for _, p := range []string{"/brokers/topics/" + topic, "/config/topics/" + topic, "/admin/delete_topics/" + topic} {
			if _, _, err := c.Get(p); !errors.Is(err, zk.ErrNoNode) {
				return fmt.Errorf("%s still exists (err %v)", p, err)
			}
		}
		for _, b := range c.Brokers {
			md, err := topicMetadata(b, topic)
			if md.ErrorCode == 0 && err != nil {
				return err
			}
			if md.ErrorCode != 3 {
				return fmt.Errorf("broker %d still answers Metadata for %s with code %d", b.ID(), topic, md.ErrorCode)
			}
		}
		return nil
	})
}

// TestClusterPreferredLeaderReturns: after the preferred leader is killed
// and restarted, auto.leader.rebalance.enable moves leadership back to it
// once it is in the ISR.
func TestClusterPreferredLeaderReturns(t *testing.T) {
	c := NewCluster(t, 3, failoverProps(map[string]string{"auto.leader.rebalance.enable": "true"}))
	const topic = "pref"
	createTopic(t, c, topic, 1, 3, [][]int32{{1, 2, 3}}, nil)
	st := c.mustState(t, topic, 0)
	if st.Leader != 1 {
		t.Fatalf("preferred replica 1 should lead a new topic: %v", st)
	}
	c.Broker(1).Kill()
	moved := c.waitState(t, topic, 0, 30*time.Second, func(s partState) error {
		if s.Leader == 1 || s.Leader < 0 {
			return fmt.Errorf("leader still %d", s.Leader)
		}
		return nil
	})
	t.Logf("after killing the preferred leader: %v", moved)
	c.Broker(1).Start()
	// The controller checks the imbalance 5 s after failover and then every
	// leader.imbalance.check.interval.seconds (300 s). The controller did
	// not change, so wait for the preferred replica to be back in the ISR,
	// then bounce the controller role by killing the controller if it is
	// not broker 1, which runs a fresh check 5 s after the new failover.
	c.waitState(t, topic, 0, 30*time.Second, func(s partState) error {
		if !s.inISR(1) {
			return fmt.Errorf("1 not back in the ISR: %v", s)
		}
		return nil
	})
	ctrl, err := c.ControllerID()
	if err != nil {
		t.Fatal(err)
	}
	if ctrl != 1 {
		c.Broker(ctrl).Kill()
		defer c.Broker(ctrl).Start()
	}
	back := c.waitState(t, topic, 0, 45*time.Second, func(s partState) error {
		if s.Leader != 1 {
			return fmt.Errorf("leader %d, want the preferred replica 1", s.Leader)
		}
		return nil
	})
	if back.LeaderEpoch <= moved.LeaderEpoch {
		t.Fatalf("leader epoch did not grow: %v then %v", moved, back)
	}
	t.Logf("leadership back on the preferred replica: %v", back)
}
