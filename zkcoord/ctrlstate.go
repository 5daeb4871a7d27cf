package zkcoord

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/go-zookeeper/zk"

	"github.com/kafkazk/broker/cluster"
)

// The controller's partition state writes and the work items that make
// them (Kafka's PartitionStateMachine): first states of new partitions,
// elections and ISR removals, and the LeaderAndIsr a started broker is
// owed. Every write is a multi fenced by /controller_epoch's zkVersion and,
// for updates, conditional on the state's zkVersion. A write whose reply
// was lost (zkConnectionLost) has an unknown outcome: it is read back at
// once and, if the read fails too, at the next read of that state
// (c.unknown); if the stored state is the one written, it landed and is
// announced like any other change (Kafka's checkLeaderAndIsrZkData).

// updateState re-reads tp's state znode (never trusting the context),
// runs prepare (reads the decision needs beyond the state, e.g. the
// topic's unclean.leader.election.enable; nil for none), asks decide for
// the new state and writes it conditionally on the state's zkVersion and
// /controller_epoch's zkVersion. BADVERSION on the state means a leader
// changed the ISR meanwhile: re-read and decide again. A state written by
// a newer controller, or a failed epoch check, returns an error wrapping
// ErrNotController. It returns the state now stored and whether it
// changed, by this call or by an earlier write of ours whose outcome was
// unknown (either way it must be announced); a missing state znode
// returns ok false.
func (c *controller) updateState(tp cluster.TopicPartition, prepare func(cluster.LeaderAndIsr) error,
	decide func(st cluster.LeaderAndIsr) (cluster.LeaderAndIsr, bool)) (st cluster.LeaderAndIsr, changed, ok bool, err error) {
	p := partitionStatePath(tp.Topic, tp.Partition)
	for attempt := 0; attempt < maxStateWriteAttempts; attempt++ {
		cur, exists, err := c.readState(tp)
		if c.skipState(tp, err) {
			return cur, changed, false, nil
		}
		if err != nil {
			return cur, changed, true, err
		}
		if !exists {
			delete(c.unknown, tp)
			return cur, changed, false, nil
		}
		if c.adoptUnknown(tp, cur) {
			changed = true
		}
		if cur.ControllerEpoch > c.epoch {
			err := fmt.Errorf("%s written by controller epoch %d, ours is %d: %w",
				p, cur.ControllerEpoch, c.epoch, ErrNotController)
			c.checkFenced(err)
			return cur, changed, true, err
		}
		if prepare != nil {
			if err := prepare(cur); err != nil {
				return cur, changed, true, err
			}
		}
		next, change := decide(cur)
		if !change {
			c.states[tp] = cur
			return cur, changed, true, nil
		}
		next.ControllerEpoch = c.epoch
		res, err := c.multi(&zk.SetDataRequest{Path: p, Data: encodePartitionState(next), Version: cur.ZkVersion})
		switch {
		case err == nil:
			next.ZkVersion = res[1].Stat.Version
			c.setState(tp, next, "partition state changed")
			return next, true, true, nil
		case errors.Is(err, ErrNotController):
			return cur, changed, true, err
		case errors.Is(err, zk.ErrBadVersion):
			continue
		case zkConnectionLost(err):
			c.unknown[tp] = next
			back, exists, rerr := c.readState(tp)
			if rerr != nil {
				return cur, changed, true, fmt.Errorf("set %s at zk_version %d: outcome unknown: %w; read back: %w", p, cur.ZkVersion, err, rerr)
			}
			if exists && c.adoptUnknown(tp, back) {
				return back, true, true, nil
			}
			delete(c.unknown, tp)
			continue // it did not land: decide again on what is there
		default:
			return cur, changed, true, fmt.Errorf("set %s at zk_version %d: %w", p, cur.ZkVersion, err)
		}
	}
	return cluster.LeaderAndIsr{}, changed, true, fmt.Errorf("set %s: zk_version kept moving after %d attempts", p, maxStateWriteAttempts)
}

// adoptUnknown reports whether cur, just read, is the state of an earlier
// write of ours whose outcome was unknown; it then becomes the context's.
// Any pending unknown write of tp is forgotten either way: what is stored
// now is the truth to decide on.
func (c *controller) adoptUnknown(tp cluster.TopicPartition, cur cluster.LeaderAndIsr) bool {
	w, had := c.unknown[tp]
	if !had {
		return false
	}
	delete(c.unknown, tp)
	if !sameLeaderAndIsr(cur, w) {
		return false
	}
	c.setState(tp, cur, "partition state write landed although its reply was lost")
	return true
}

// setState records a state this controller wrote; a new live leader of
// an existing partition counts as an election (afterEvent).
func (c *controller) setState(tp cluster.TopicPartition, st cluster.LeaderAndIsr, msg string) {
	old, had := c.states[tp]
	c.states[tp] = st
	if had && st.Leader >= 0 && old.Leader != st.Leader {
		c.elected++
	}
	c.log.Info().Str("topic", tp.Topic).Int32("partition", tp.Partition).Int32("leader", st.Leader).
		Int32("leader_epoch", st.LeaderEpoch).Ints32("isr", st.Isr).Int32("zk_version", st.ZkVersion).Msg(msg)
}

// ---- started brokers ----

// syncBrokers gives each started broker in c.work.sync the whole metadata
// and LeaderAndIsr for all its replicas (KC onBrokerStartup), from states
// read fresh so that the zkVersion a new leader gets is current. A broker
// that died or re-registered since is dropped from the work.
func (c *controller) syncBrokers() error {
	if len(c.work.sync) == 0 {
		return nil
	}
	var ids []int32
	for _, id := range slices.Sorted(maps.Keys(c.work.sync)) {
		if b, ok := c.alive[id]; ok && b.Epoch == c.work.sync[id] {
			ids = append(ids, id)
		} else {
			delete(c.work.sync, id)
		}
	}
	var theirs []cluster.TopicPartition
	for _, tp := range c.partitionsWithState() {
		if hasAny(c.replicas(tp), ids) {
			theirs = append(theirs, tp)
		}
	}
	for _, tp := range theirs {
		if c.stopped() {
			return errControllerStopped
		}
		st, ok, err := c.readState(tp)
		if c.skipState(tp, err) {
			continue
		}
		if err != nil {
			if err := c.stepError(err); err != nil {
				return err
			}
			continue // unreadable: the context's state is the best we have
		}
		if ok {
			c.states[tp] = st
		}
	}
	c.sendUpdateMetadata(ids, c.partitionsWithState())
	for _, id := range ids {
		c.sendLeaderAndIsr(theirs, false, id)
		delete(c.work.sync, id)
	}
	return nil
}

// ---- new partitions ----

// initPartitions writes the first state of each partition in c.work.init
// (PSM NewPartition -> OnlinePartition) with the epoch check, then sends
// LeaderAndIsr (IsNew) to the replicas of those it created and
// UpdateMetadata to every broker. A partition without a live replica stays
// without a state (a replica's startup puts it back in the work).
func (c *controller) initPartitions() error {
	if len(c.work.init) == 0 {
		return nil
	}
	tps := slices.SortedFunc(maps.Keys(c.work.init), compareTP)
	electable := c.electableIDs()
	var created []cluster.TopicPartition
	defer func() { c.announce(created, true) }()
	for _, tp := range tps {
		if c.stopped() {
			return errControllerStopped
		}
		replicas := c.replicas(tp)
		if _, has := c.states[tp]; replicas == nil || has {
			delete(c.work.init, tp)
			continue
		}
		st, ok := initialState(replicas, electable, c.epoch)
		if !ok {
			c.log.Error().Str("topic", tp.Topic).Int32("partition", tp.Partition).Ints32("replicas", replicas).
				Msg("no live replica for new partition: it stays without a leader")
			delete(c.work.init, tp)
			delete(c.unknown, tp) // a create that landed is read when the partition is retried
			continue
		}
		ours, err := c.createState(tp, st)
		if err != nil {
			if err := c.stepError(err); err != nil {
				return err
			}
			continue
		}
		delete(c.work.init, tp)
		if ours {
			created = append(created, tp)
		}
		if _, moving := c.reassigning[tp]; moving {
			c.work.reassign[tp] = true // it waited for a state
		}
	}
	return nil
}

// createState writes tp's first state st. ours reports whether this
// controller created it (now or in an earlier attempt whose reply was
// lost), so it is announced as new; false means another state was there,
// which the context adopts. A stored state with this controller's epoch
// that the context does not hold is ours too, whatever it decided then:
// only this controller writes with its epoch, and initPartitions only
// creates partitions the context has no state for, so it was never
// announced. Announcing the state actually stored is always safe.
func (c *controller) createState(tp cluster.TopicPartition, st cluster.LeaderAndIsr) (ours bool, err error) {
	if err := c.createParents(tp); err != nil {
		return false, err
	}
	sp := partitionStatePath(tp.Topic, tp.Partition)
	res, err := c.multi(&zk.CreateRequest{Path: sp, Data: encodePartitionState(st)})
	switch {
	case err == nil:
		delete(c.unknown, tp)
		st.ZkVersion = 0
		c.setState(tp, st, "partition created")
		return true, nil
	case errors.Is(err, ErrNotController):
		return false, err
	case zkConnectionLost(err), len(res) > 1 && errors.Is(res[1].Error, zk.ErrNodeExists):
		if _, had := c.unknown[tp]; zkConnectionLost(err) && !had {
			// Keep an earlier attempt's entry: that one may have landed.
			c.unknown[tp] = st
		}
		cur, exists, rerr := c.readState(tp)
		if c.skipState(tp, rerr) {
			return false, nil
		}
		if rerr != nil {
			return false, fmt.Errorf("create %s: %w; read back: %w", sp, err, rerr)
		}
		if !exists {
			delete(c.unknown, tp)
			return false, fmt.Errorf("create %s: %w", sp, err)
		}
		_, announced := c.states[tp]
		if c.adoptUnknown(tp, cur) {
			return true, nil
		}
		if cur.ControllerEpoch == c.epoch && !announced {
			c.setState(tp, cur, "partition created by an earlier attempt whose reply was lost")
			return true, nil
		}
		c.states[tp] = cur
		return false, nil
	default:
		return false, fmt.Errorf("create %s: %w", sp, err)
	}
}

// createParents creates /brokers/topics/<t>/partitions and
// .../partitions/<p> if missing, each in its own multi fenced by
// /controller_epoch's zkVersion (Kafka's createTopicPartitions passes
// expectedControllerEpochZkVersion): one multi per parent, since a failing
// op fails a whole multi and NODEEXISTS is success here. After a lost
// reply the next attempt finds the parent or creates it.
func (c *controller) createParents(tp cluster.TopicPartition) error {
	for _, p := range []string{partitionsPath(tp.Topic), partitionPath(tp.Topic, tp.Partition)} {
		res, err := c.multi(&zk.CreateRequest{Path: p})
		switch {
		case err == nil:
		case errors.Is(err, ErrNotController):
			return err
		case len(res) > 1 && errors.Is(res[1].Error, zk.ErrNodeExists):
		default:
			return fmt.Errorf("create %s: %w", p, err)
		}
	}
	return nil
}

// readBackUnknown re-reads the state of each partition with a write of
// unknown outcome that no work item will read again, and announces those
// whose write landed. A partition still owed its first state or an
// election is left to initPartitions or reconcile, which read it first.
func (c *controller) readBackUnknown() error {
	var changed []cluster.TopicPartition
	defer func() { c.announce(changed, false) }()
	for _, tp := range slices.SortedFunc(maps.Keys(c.unknown), compareTP) {
		if c.work.init[tp] || c.work.reconcile[tp] {
			continue
		}
		if c.stopped() {
			return errControllerStopped
		}
		if c.replicas(tp) == nil {
			delete(c.unknown, tp)
			continue
		}
		_, ch, _, err := c.updateState(tp, nil, func(st cluster.LeaderAndIsr) (cluster.LeaderAndIsr, bool) { return st, false })
		if ch {
			changed = append(changed, tp)
		}
		if err != nil {
			if err := c.stepError(err); err != nil {
				return err
			}
		}
	}
	return nil
}

// ---- offline partitions ----

// reconcile applies offlineTransition to each partition in c.work.reconcile:
// elect a leader where the leader is gone, drop dead replicas from ISRs.
// The changed partitions get LeaderAndIsr (to their live replicas) and
// UpdateMetadata (to every live broker); they are returned.
func (c *controller) reconcile() ([]cluster.TopicPartition, error) {
	if len(c.work.reconcile) == 0 {
		return nil, nil
	}
	tps := slices.SortedFunc(maps.Keys(c.work.reconcile), compareTP)
	aliveAll, electableAll := c.aliveIDs(), c.electableIDs()
	unclean := map[string]bool{}
	var changed []cluster.TopicPartition
	defer func() { c.announce(changed, false) }()
	for _, tp := range tps {
		if c.stopped() {
			return changed, errControllerStopped
		}
		replicas := c.replicas(tp)
		if replicas == nil {
			delete(c.work.reconcile, tp)
			continue
		}
		// A replica on an offline log dir is not alive for tp (ctrllogdir.go).
		alive, electable := c.onlineFor(tp, aliveAll), c.onlineFor(tp, electableAll)
		// The topic's unclean.leader.election.enable is read before the
		// decision (Kafka's collectUncleanLeaderElectionState), only when
		// the leader is gone, once per topic and pass.
		prepare := func(st cluster.LeaderAndIsr) error {
			if _, known := unclean[tp.Topic]; known || (st.Leader >= 0 && slices.Contains(alive, st.Leader)) {
				return nil
			}
			u, err := c.readUncleanAllowed(tp.Topic)
			if err != nil {
				return err
			}
			unclean[tp.Topic] = u
			return nil
		}
		lastUnclean := false
		_, ch, _, err := c.updateState(tp, prepare, func(st cluster.LeaderAndIsr) (cluster.LeaderAndIsr, bool) {
			next, ch, wasUnclean := offlineTransition(replicas, st, alive, electable, unclean[tp.Topic])
			lastUnclean = wasUnclean
			if wasUnclean {
				c.log.Warn().Str("topic", tp.Topic).Int32("partition", tp.Partition).Int32("leader", next.Leader).
					Ints32("old_isr", st.Isr).Msg("unclean leader election: records may be lost")
			}
			return next, ch
		})
		if ch {
			// Even on an error: an earlier write found to have landed
			// is announced now.
			changed = append(changed, tp)
		}
		if err != nil {
			if err := c.stepError(err); err != nil {
				return changed, err
			}
			continue
		}
		delete(c.work.reconcile, tp)
		if ch && lastUnclean {
			c.metrics.UncleanLeaderElection(tp)
		}
	}
	return changed, nil
}
