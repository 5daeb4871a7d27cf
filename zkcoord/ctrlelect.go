package zkcoord

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/go-zookeeper/zk"

	"github.com/kafkazk/broker/cluster"
)

// ElectLeaders (KIP-460) on the controller: Kafka's
// processReplicaLeaderElection and onReplicaElection, with the preferred
// strategy (the first replica, if alive and in the ISR) or the unclean one
// (Kafka's OfflinePartitionLeaderElectionStrategy with unclean allowed, as
// an admin asked for it: a live in-sync replica first, else any live
// replica), among the replicas not on an offline log dir.
// /admin/preferred_replica_election (2.x tools) is watched and
// honoured the same way, then deleted.

// electLeaders runs an election of typ for tps (nil: every partition) and
// returns each partition's outcome: nil (elected), or an error wrapping
// cluster.ErrUnknownTopic, ErrTopicBeingDeleted, ErrElectionNotNeeded,
// ErrPreferredLeaderNotAvailable, ErrEligibleLeadersNotAvailable, or the
// ZooKeeper failure that stopped it (its write, if it landed, is
// announced when read back). The error is ErrNotController when this
// controller is finished.
func (c *controller) electLeaders(typ cluster.ElectionType, tps []cluster.TopicPartition) (map[cluster.TopicPartition]error, error) {
	if c.fenced || c.stopped() {
		return nil, ErrNotController
	}
	all := tps == nil
	if all {
		for t, a := range c.assignments {
			for p := range a {
				tps = append(tps, cluster.TopicPartition{Topic: t, Partition: p})
			}
		}
	}
	slices.SortFunc(tps, compareTP)
	tps = slices.Compact(tps)
	out := make(map[cluster.TopicPartition]error, len(tps))
	electable := c.electableIDs()
	var changed []cluster.TopicPartition
	defer func() { c.announce(changed, false) }()
	if all {
		// Every partition: those whose election was not needed are left
		// out of the answer (Kafka's KafkaApis).
		defer maps.DeleteFunc(out, func(_ cluster.TopicPartition, e error) bool { return errors.Is(e, cluster.ErrElectionNotNeeded) })
	}
	var todo []cluster.TopicPartition
	for _, tp := range tps {
		replicas := c.replicas(tp)
		st, has := c.states[tp]
		// A replica on an offline log dir is no candidate (ctrllogdir.go).
		electable := c.onlineFor(tp, electable)
		switch {
		case replicas == nil:
			out[tp] = fmt.Errorf("%w: the partition %s-%d does not exist", cluster.ErrUnknownTopic, tp.Topic, tp.Partition)
			continue
		case c.isDeleting(tp.Topic):
			out[tp] = fmt.Errorf("%w: %s", cluster.ErrTopicBeingDeleted, tp.Topic)
			continue
		case has && typ == cluster.ElectPreferred && st.Leader == replicas[0]:
			out[tp] = fmt.Errorf("%w: %s-%d", cluster.ErrElectionNotNeeded, tp.Topic, tp.Partition)
			continue
		case has && typ == cluster.ElectUnclean && st.Leader >= 0 && slices.Contains(electable, st.Leader):
			out[tp] = fmt.Errorf("%w: %s-%d", cluster.ErrElectionNotNeeded, tp.Topic, tp.Partition)
			continue
		case !has:
			out[tp] = electionFailed(typ, tp)
			continue
		}
		todo = append(todo, tp)
	}
	if c.stopped() {
		return nil, ErrNotController
	}
	// The elections go in pipelined batches (updateStates).
	failed, unclean := map[cluster.TopicPartition]bool{}, map[cluster.TopicPartition]bool{}
	res := c.updateStates(todo, nil, func(tp cluster.TopicPartition, st cluster.LeaderAndIsr) (cluster.LeaderAndIsr, bool) {
		replicas := c.replicas(tp)
		// A replica on an offline log dir is no candidate (ctrllogdir.go).
		electable := c.onlineFor(tp, electable)
		failed[tp], unclean[tp] = false, false
		if typ == cluster.ElectPreferred {
			l, ok := ElectPreferredLeader(replicas, st.Isr, electable)
			if !ok {
				failed[tp] = true
				return st, false
			}
			if l == st.Leader {
				return st, false
			}
			st.Leader = l
			st.LeaderEpoch++
			return st, true
		}
		if st.Leader >= 0 && slices.Contains(electable, st.Leader) {
			return st, false
		}
		l, isr, ok := ElectLeader(replicas, st.Isr, electable, true)
		if !ok {
			failed[tp] = true
			return st, false
		}
		unclean[tp] = !slices.Contains(st.Isr, l)
		st.Leader, st.Isr = l, isr
		st.LeaderEpoch++
		return st, true
	})
	for i, tp := range todo {
		r := res[i]
		if r.changed {
			changed = append(changed, tp)
		}
		switch err := r.err; {
		case err != nil:
			if errors.Is(err, ErrNotController) || zkSessionLost(err) || errors.Is(err, errControllerStopped) || c.fenced {
				c.checkFenced(err)
				return nil, fmt.Errorf("elect leaders: %w: %w", ErrNotController, err)
			}
			out[tp] = err
		case !r.ok:
			out[tp] = fmt.Errorf("%w: the partition %s-%d does not exist", cluster.ErrUnknownTopic, tp.Topic, tp.Partition)
		case failed[tp]:
			out[tp] = electionFailed(typ, tp)
		case !r.changed:
			out[tp] = fmt.Errorf("%w: %s-%d", cluster.ErrElectionNotNeeded, tp.Topic, tp.Partition)
		default:
			out[tp] = nil
			if unclean[tp] {
				c.metrics.UncleanLeaderElection(tp)
				c.log.Warn().Str("topic", tp.Topic).Int32("partition", tp.Partition).Int32("leader", c.states[tp].Leader).
					Msg("unclean leader election requested by an admin: records may be lost")
			}
		}
	}
	return out, nil
}

func electionFailed(typ cluster.ElectionType, tp cluster.TopicPartition) error {
	if typ == cluster.ElectPreferred {
		return fmt.Errorf("%w: failed to elect the preferred leader of %s-%d", cluster.ErrPreferredLeaderNotAvailable, tp.Topic, tp.Partition)
	}
	return fmt.Errorf("%w: no live replica of %s-%d", cluster.ErrEligibleLeadersNotAvailable, tp.Topic, tp.Partition)
}

// onPreferredElectionZnode is Kafka's ReplicaLeaderElection triggered by
// /admin/preferred_replica_election: a preferred election for the
// partitions it names, then its deletion (fenced). A failed election is
// logged, as Kafka does for a ZooKeeper-triggered one; a failure of
// ZooKeeper itself is retried with the znode still there.
func (c *controller) onPreferredElectionZnode() error {
	data, _, err := c.store.Get(preferredReplicaElectionPath)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get %s: %w", preferredReplicaElectionPath, err)
	}
	tps, err := decodePreferredElection(data)
	if err != nil {
		c.log.Error().Err(err).Msg("ignoring unreadable preferred replica election znode")
		tps = []cluster.TopicPartition{}
	}
	res, err := c.electLeaders(cluster.ElectPreferred, tps)
	if err != nil {
		return err
	}
	for _, tp := range slices.SortedFunc(maps.Keys(res), compareTP) {
		if e := res[tp]; e != nil && !errors.Is(e, cluster.ErrElectionNotNeeded) {
			if !errors.Is(e, cluster.ErrUnknownTopic) && !errors.Is(e, cluster.ErrPreferredLeaderNotAvailable) {
				return e // ZooKeeper failed: retry with the znode kept
			}
			c.log.Warn().Err(e).Msg("preferred replica election from znode failed")
		}
	}
	res2, err := c.multi(&zk.DeleteRequest{Path: preferredReplicaElectionPath, Version: -1})
	switch {
	case err == nil, len(res2) > 1 && errors.Is(res2[1].Error, zk.ErrNoNode):
		return nil
	default:
		return fmt.Errorf("delete %s: %w", preferredReplicaElectionPath, err)
	}
}
