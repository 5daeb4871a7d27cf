package zkcoord

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kafkazk/broker/cluster"
)

// readAllStates reads the state of every partition of topics (each of
// parts partitions) in one pipelined batch, as the controller does.
func readAllStates(z *zkConn, topics []string, parts int32) (map[cluster.TopicPartition]cluster.LeaderAndIsr, error) {
	var calls []storeCall
	var tps []cluster.TopicPartition
	for _, t := range topics {
		for p := int32(0); p < parts; p++ {
			tps = append(tps, cluster.TopicPartition{Topic: t, Partition: p})
			calls = append(calls, storeCall{path: partitionStatePath(t, p)})
		}
	}
	out := make(map[cluster.TopicPartition]cluster.LeaderAndIsr, len(tps))
	for i, r := range z.Batch(calls, nil) {
		if r.err != nil {
			return nil, fmt.Errorf("get %s: %w", calls[i].path, r.err)
		}
		st, err := decodePartitionState(r.data, r.stat.Version)
		if err != nil {
			return nil, err
		}
		out[tps[i]] = st
	}
	return out, nil
}

// TestZKControllerFailoverLoads2000: 2,000 partitions (RF 3 on three
// brokers) are created through the controller, whose broker then stops.
// The new controller loads every partition state (pipelined reads), tells
// each live broker all 2,000 in one UpdateMetadata, and elects for the
// partitions the dead broker led: in the end every state znode has a live
// leader and no dead ISR member, and the last UpdateMetadata each live
// broker got carries each partition's final state.
func TestZKControllerFailoverLoads2000(t *testing.T) {
	const topics, parts = 20, 100
	cc := newCtrlCluster(t, nil, 1, 2, 3)
	old := cc.controller()
	dead := old.cfg.BrokerID
	var names []string
	for i := 0; i < topics; i++ {
		name := fmt.Sprintf("s%02d", i)
		names = append(names, name)
		a := map[int32][]int32{}
		for p := int32(0); p < parts; p++ {
			f := (p + int32(i)) % 3
			a[p] = []int32{f + 1, (f+1)%3 + 1, (f+2)%3 + 1}
		}
		cc.create(TopicSpec{Name: name, Assignment: a})
	}
	eventually(t, 60*time.Second, func() error {
		_, err := readAllStates(cc.raw, names, parts)
		return err
	})
	cc.stop(dead)
	var next *Session
	eventually(t, 30*time.Second, func() error {
		if next = cc.controller(); next == nil {
			return errors.New("no new controller")
		}
		return nil
	})
	epoch := next.ControllerEpoch()
	live := slices.DeleteFunc([]int32{1, 2, 3}, func(id int32) bool { return id == dead })
	var final map[cluster.TopicPartition]cluster.LeaderAndIsr
	eventually(t, 60*time.Second, func() error {
		sts, err := readAllStates(cc.raw, names, parts)
		if err != nil {
			return err
		}
		for tp, st := range sts {
			if st.Leader == dead || slices.Contains(st.Isr, dead) || st.Leader < 0 {
				return fmt.Errorf("%s/%d still %+v", tp.Topic, tp.Partition, st)
			}
		}
		final = sts
		return nil
	})
	for _, id := range live {
		eventually(t, 30*time.Second, func() error {
			cc.sender.mu.Lock()
			defer cc.sender.mu.Unlock()
			full, last := false, map[cluster.TopicPartition]cluster.LeaderAndIsr{}
			for _, um := range cc.sender.um {
				if um.to.ID != id || um.req.ControllerEpoch != epoch || um.req.ControllerID != next.cfg.BrokerID {
					continue
				}
				if len(um.req.Partitions) == topics*parts {
					full = true // the failover's: every state loaded
				}
				for _, pi := range um.req.Partitions {
					last[cluster.TopicPartition{Topic: pi.Topic, Partition: pi.Partition}] = pi.State
				}
			}
			if !full {
				return fmt.Errorf("broker %d: no UpdateMetadata of epoch %d with all %d partitions", id, epoch, topics*parts)
			}
			for tp, st := range final {
				got, ok := last[tp]
				if !ok || got.Leader != st.Leader || got.LeaderEpoch != st.LeaderEpoch || !slices.Equal(got.Isr, st.Isr) {
					return fmt.Errorf("broker %d: %s/%d last told %+v, znode has %+v", id, tp.Topic, tp.Partition, got, st)
				}
			}
			return nil
		})
	}
}
