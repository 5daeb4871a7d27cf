package zkcoord

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/go-zookeeper/zk"

	"github.com/kafkazk/broker/cluster"
)

// Partition reassignment (KIP-455), as Kafka's KafkaController runs it in
// ZooKeeper mode (onPartitionReassignment). With RS the replicas, ORS the
// original ones, TRS the target, AR = TRS − ORS and RR = ORS − TRS:
//
//   - U: the drop of replicas an earlier reassignment of the partition was
//     adding and the new one does not want (out of the ISR first), then
//     RS = TRS ++ (ORS − TRS) with AR and RR into the topic znode (version
//     2's adding_replicas and removing_replicas), then into the context,
//     then StopReplica(delete) to the dropped replicas.
//   - A, while TRS ⊄ ISR: the leader epoch goes up once and RS learns the
//     new replica set from LeaderAndIsr (with AddingReplicas and
//     RemovingReplicas); the new replicas start from it. Then the
//     reassignment waits for ISR changes (/isr_change_notification).
//   - B, once TRS ⊆ ISR: the leader moves to the first live in-sync replica
//     of TRS if it is not in TRS or not alive, RR leave the ISR, and the
//     leader epoch goes up, in one write (Kafka makes two: the election and
//     the OfflineReplica ISR shrink); then RS = TRS in the context,
//     LeaderAndIsr to TRS, StopReplica(delete) to RR, the topic znode with
//     RS = TRS and no AR or RR, the partition out of
//     /admin/reassign_partitions, UpdateMetadata to every broker. Once
//     B's state write landed the partition is no longer being reassigned
//     (Kafka's context after B2): a cancel finds nothing to cancel, a new
//     target starts from TRS, and only the znode write is retried.
//
// A cancel or new target that would take every live in-sync replica out
// of the replica set is refused (INVALID_REPLICA_ASSIGNMENT), and no
// replica still in the stored ISR is ever told to delete its log. A
// request is answered NONE only once its topic znode write landed; one
// still failing when the request's time is up is answered
// REQUEST_TIMED_OUT and dropped.
//
// Every step is idempotent on what is stored: a failed step is retried from
// the reassignment's phase (ctrlWork.reassign), writes re-read what they
// change, and an epoch bump is skipped when the stored epoch is past the
// one the phase started from. A new controller resumes every reassignment
// from the topic znodes' adding and removing replicas, and from
// /admin/reassign_partitions (2.x tools), which is watched too.

// reassignment is a partition's reassignment in progress: the assignment
// it wants (RS, AR, RR) and how far this controller has taken it.
type reassignment struct {
	replicas, adding, removing []int32
	// legacy: the partition is in /admin/reassign_partitions.
	legacy bool
	// written: the topic znode and the context hold replicas, adding and
	// removing (U done).
	written bool
	// unneeded are replicas of an earlier RS that this one drops: they
	// leave the ISR before the znode is written and are then stopped.
	unneeded []int32
	// started: A's epoch bump and LeaderAndIsr were done.
	started bool
	// completing: B has begun (the context's RS may already be TRS).
	completing bool
	// finishing: B's state write landed (leader in TRS, RR out of the
	// ISR, RR told to delete): the partition is no longer being
	// reassigned (replicas is TRS, no AR or RR, as Kafka's context after
	// B2); only the topic znode write is left.
	finishing bool
	// base is the stored leader epoch when the current write phase (U's
	// ISR shrink, A or B) began, -1 before; a stored epoch above it means
	// the phase's bump landed.
	base int32
}

func (r *reassignment) target() []int32 { return without(r.replicas, r.removing) }
func (r *reassignment) origin() []int32 { return without(r.replicas, r.adding) }

// without is a minus b, in a's order.
func without(a, b []int32) []int32 {
	var out []int32
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// reassignTo is Kafka's ReplicaAssignment.reassignTo: the assignment that
// takes a partition whose original replicas are origin to target.
func reassignTo(origin, target []int32) (rs, adding, removing []int32) {
	rs = slices.Clone(target)
	for _, r := range origin {
		if !slices.Contains(rs, r) {
			rs = append(rs, r)
		}
	}
	return rs, without(rs, origin), without(rs, target)
}

func subset(a, b []int32) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// ---- requests (run on the loop) ----

// validateTarget is Kafka's validateReplicas: a target replica list must be
// non-empty, without duplicates or negative ids, and the replicas it adds
// must be on live brokers.
func (c *controller) validateTarget(tp cluster.TopicPartition, target []int32) error {
	switch {
	case len(target) == 0:
		return fmt.Errorf("%w: empty replica list specified in partition reassignment", cluster.ErrInvalidReplicaAssignment)
	case len(slices.Compact(slices.Sorted(slices.Values(target)))) != len(target):
		return fmt.Errorf("%w: duplicate replica ids in partition reassignment replica list %v", cluster.ErrInvalidReplicaAssignment, target)
	case slices.ContainsFunc(target, func(r int32) bool { return r < 0 }):
		return fmt.Errorf("%w: invalid broker id in replica list %v", cluster.ErrInvalidReplicaAssignment, target)
	}
	// Kafka's liveBrokerIds: brokers shutting down are not alive.
	_, adding, _ := reassignTo(c.currentOrigin(tp), target)
	live := c.electableIDs()
	for _, r := range adding {
		if !slices.Contains(live, r) {
			return fmt.Errorf("%w: replica assignment %v has broker %d that is not alive, live brokers %v",
				cluster.ErrInvalidReplicaAssignment, target, r, live)
		}
	}
	return nil
}

// currentOrigin is ORS of tp: the replicas before any reassignment in
// progress (the one wanted, else the context's).
func (c *controller) currentOrigin(tp cluster.TopicPartition) []int32 {
	if r, ok := c.reassigning[tp]; ok {
		return r.origin()
	}
	return without(c.replicas(tp), c.adding[tp])
}

// beingReassigned is Kafka's ReplicaAssignment.isBeingReassigned.
func (c *controller) beingReassigned(tp cluster.TopicPartition) bool {
	if r, ok := c.reassigning[tp]; ok {
		return len(r.adding) > 0 || len(r.removing) > 0
	}
	return len(c.adding[tp]) > 0 || len(c.removing[tp]) > 0
}

// startReassignment records tp's new reassignment to target (nil: cancel,
// back to ORS) and returns an error for the partition only if it cannot
// start: unknown partition, topic being deleted, nothing to cancel.
func (c *controller) startReassignment(tp cluster.TopicPartition, target []int32, legacy bool) error {
	// A cancel of a partition not being reassigned, known or not, is
	// NO_REASSIGNMENT_IN_PROGRESS (Kafka checks this first).
	if target == nil && !c.beingReassigned(tp) {
		return fmt.Errorf("%w: %s-%d", cluster.ErrNoReassignmentInProgress, tp.Topic, tp.Partition)
	}
	if c.replicas(tp) == nil || c.isDeleting(tp.Topic) {
		return fmt.Errorf("%w: the partition %s-%d does not exist", cluster.ErrUnknownTopic, tp.Topic, tp.Partition)
	}
	origin := c.currentOrigin(tp)
	if target == nil {
		target = origin
	}
	rs, adding, removing := reassignTo(origin, target)
	old := c.reassigning[tp]
	r := &reassignment{replicas: rs, adding: adding, removing: removing, legacy: legacy, base: -1}
	// Kafka's U3: replicas of the context's RS (the last one written and
	// announced) that the new RS drops, and those an earlier request
	// still had to stop.
	r.unneeded = without(c.replicas(tp), rs)
	if old != nil {
		r.unneeded = append(r.unneeded, old.unneeded...)
	}
	r.unneeded = without(slices.Compact(slices.Sorted(slices.Values(r.unneeded))), rs)
	if err := c.checkDropSafe(tp, rs, r.unneeded); err != nil {
		return err
	}
	r.written = old == nil && slices.Equal(c.replicas(tp), rs) && slices.Equal(c.adding[tp], adding) &&
		slices.Equal(c.removing[tp], removing) && len(adding)+len(removing) > 0
	c.reassigning[tp] = r
	c.work.reassign[tp] = true
	c.log.Info().Str("topic", tp.Topic).Int32("partition", tp.Partition).Ints32("target_replicas", target).
		Ints32("replicas", rs).Ints32("adding_replicas", adding).Ints32("removing_replicas", removing).
		Bool("legacy_znode", legacy).Msg("partition reassignment")
	return nil
}

// checkDropSafe refuses a request whose new replica set rs drops
// replicas (unneeded) of the stored ISR while no live member of that ISR
// stays in rs: taking them out of the ISR and deleting their logs would
// lose acknowledged records.
func (c *controller) checkDropSafe(tp cluster.TopicPartition, rs, unneeded []int32) error {
	st, ok := c.states[tp]
	if !ok || !hasAny(st.Isr, unneeded) {
		return nil
	}
	electable := c.electableIDs()
	if slices.ContainsFunc(st.Isr, func(id int32) bool {
		return slices.Contains(rs, id) && slices.Contains(electable, id)
	}) {
		return nil
	}
	return fmt.Errorf("%w: partition %s-%d: the new replica set %v would drop in-sync replicas %v and keep no live in-sync replica (isr %v, live brokers %v)",
		cluster.ErrInvalidReplicaAssignment, tp.Topic, tp.Partition, rs, without(unneeded, without(unneeded, st.Isr)), st.Isr, electable)
}

func (c *controller) isDeleting(topic string) bool {
	_, ok := c.deleting[topic]
	return ok
}

// errUnreadableTopicZNode is a reassignment's topic znode that no longer
// decodes: the reassignment is dropped.
var errUnreadableTopicZNode = errors.New("unreadable topic znode")

// errReassignmentNotWritten is the outcome of a started reassignment whose
// topic znode write has not landed yet: the controller retries it, and the
// request waits (checkReassignments).
var errReassignmentNotWritten = errors.New("partition reassignment not yet in its topic znode")

// alterReassignments is AlterPartitionReassignments on the controller
// (Kafka's processApiPartitionReassignment): each partition is validated,
// any it names is taken out of /admin/reassign_partitions (the latest
// request wins), and the valid ones start (their U and A phases run before
// the answer). A nil target cancels. A started partition whose topic znode
// write failed is answered errReassignmentNotWritten and returned in
// pending, for checkReassignments.
func (c *controller) alterReassignments(reqs map[cluster.TopicPartition][]int32) (out map[cluster.TopicPartition]error, pending map[cluster.TopicPartition]*reassignment, err error) {
	if c.fenced || c.stopped() {
		return nil, nil, ErrNotController
	}
	out = make(map[cluster.TopicPartition]error, len(reqs))
	var started []cluster.TopicPartition
	for _, tp := range slices.SortedFunc(maps.Keys(reqs), compareTP) {
		target := reqs[tp]
		if target != nil {
			if err := c.validateTarget(tp, target); err != nil {
				out[tp] = err
				continue
			}
		}
		if err := c.startReassignment(tp, target, false); err != nil {
			out[tp] = err
			continue
		}
		started = append(started, tp)
	}
	for _, tp := range started {
		c.work.legacyDrop[tp] = true
	}
	pending = make(map[cluster.TopicPartition]*reassignment, len(started))
	for _, tp := range started {
		pending[tp] = c.reassigning[tp]
	}
	err = c.dropFromLegacy()
	if err == nil {
		err = c.reassignPartitions()
	}
	if err != nil && (errors.Is(err, ErrNotController) || zkSessionLost(err) || c.fenced) {
		return nil, nil, fmt.Errorf("reassign partitions: %w: %w", ErrNotController, err)
	}
	maps.Copy(out, c.checkReassignments(pending, false))
	maps.DeleteFunc(pending, func(tp cluster.TopicPartition, _ *reassignment) bool {
		return !errors.Is(out[tp], errReassignmentNotWritten)
	})
	return out, pending, nil
}

// checkReassignments answers the started reassignments of pending: nil
// once the topic znode holds it, errReassignmentNotWritten while the
// controller still retries the write. With final (the request's time is
// up) one not written is answered REQUEST_TIMED_OUT and dropped, unless
// the stored topic znode shows that the write landed after all (adopted)
// or cannot be read (kept: it may have landed, a retry finds out).
func (c *controller) checkReassignments(pending map[cluster.TopicPartition]*reassignment, final bool) map[cluster.TopicPartition]error {
	out := make(map[cluster.TopicPartition]error, len(pending))
	for tp, r := range pending {
		switch {
		case r == nil || r.written || r.finishing:
			out[tp] = nil
		case c.reassigning[tp] != r:
			out[tp] = fmt.Errorf("partition %s-%d: replaced by a later reassignment before it was written: %w", tp.Topic, tp.Partition, context.DeadlineExceeded)
		case !final:
			out[tp] = errReassignmentNotWritten
		default:
			if err := c.reassignStep(tp, r); err != nil {
				c.log.Warn().Err(err).Str("topic", tp.Topic).Int32("partition", tp.Partition).Msg("partition reassignment: last write attempt failed")
			}
			if r.written || r.finishing || c.reassigning[tp] != r {
				out[tp] = nil
				continue
			}
			a, err := c.readTopicAssignment(tp.Topic)
			switch {
			case err != nil:
				out[tp] = fmt.Errorf("partition %s-%d: reassignment not known to be written (%w): %w", tp.Topic, tp.Partition, err, context.DeadlineExceeded)
			case slices.Equal(a.Replicas[tp.Partition], r.replicas) && slices.Equal(a.Adding[tp.Partition], r.adding) && slices.Equal(a.Removing[tp.Partition], r.removing):
				c.setAssignment(tp, r.replicas, r.adding, r.removing)
				c.stopRemoved(tp, r.unneeded)
				r.unneeded, r.written, r.base = nil, true, -1
				c.work.reassign[tp] = true
				out[tp] = nil
			default:
				delete(c.reassigning, tp)
				delete(c.work.reassign, tp)
				c.log.Warn().Str("topic", tp.Topic).Int32("partition", tp.Partition).Msg("partition reassignment dropped: its topic znode write did not land in time")
				out[tp] = fmt.Errorf("partition %s-%d: reassignment not written in time: %w", tp.Topic, tp.Partition, context.DeadlineExceeded)
			}
		}
	}
	return out
}

// readTopicAssignment reads topic t's znode.
func (c *controller) readTopicAssignment(t string) (fullAssignment, error) {
	p := topicPath(t)
	data, _, err := c.store.Get(p)
	if err != nil {
		return fullAssignment{}, fmt.Errorf("get %s: %w", p, err)
	}
	return decodeTopicAssignmentFull(t, data)
}

// listReassignments is ListPartitionReassignments on the controller: the
// partitions of tps (nil: all) being reassigned, as the context holds them.
func (c *controller) listReassignments(tps []cluster.TopicPartition) ([]cluster.PartitionReassignment, error) {
	if c.fenced || c.stopped() {
		return nil, ErrNotController
	}
	if tps == nil {
		set := map[cluster.TopicPartition]bool{}
		for tp := range c.adding {
			set[tp] = true
		}
		for tp := range c.removing {
			set[tp] = true
		}
		tps = slices.SortedFunc(maps.Keys(set), compareTP)
	}
	var out []cluster.PartitionReassignment
	for _, tp := range tps {
		if c.replicas(tp) == nil || len(c.adding[tp])+len(c.removing[tp]) == 0 {
			continue
		}
		out = append(out, cluster.PartitionReassignment{TopicPartition: tp, Replicas: slices.Clone(c.replicas(tp)),
			AddingReplicas: slices.Clone(c.adding[tp]), RemovingReplicas: slices.Clone(c.removing[tp])})
	}
	return out, nil
}

// ---- the work ----

// reassignPartitions runs each reassignment in c.work.reassign as far as
// it can go; one that waits for its target to join the ISR leaves the work
// (an ISR change or a broker's startup puts it back).
func (c *controller) reassignPartitions() error {
	for _, tp := range slices.SortedFunc(maps.Keys(c.work.reassign), compareTP) {
		if c.stopped() {
			return errControllerStopped
		}
		r, ok := c.reassigning[tp]
		if !ok || c.replicas(tp) == nil {
			delete(c.work.reassign, tp)
			delete(c.reassigning, tp)
			continue
		}
		if err := c.reassignStep(tp, r); err != nil {
			if errors.Is(err, errUnreadableTopicZNode) {
				// The topic znode became unreadable: retrying cannot
				// help, the reassignment is dropped.
				c.log.Error().Err(err).Str("topic", tp.Topic).Int32("partition", tp.Partition).
					Msg("partition reassignment dropped: unreadable topic znode")
				delete(c.work.reassign, tp)
				delete(c.reassigning, tp)
				delete(c.adding, tp)
				delete(c.removing, tp)
				continue
			}
			if err := c.stepError(err); err != nil {
				return err
			}
			continue
		}
		delete(c.work.reassign, tp)
	}
	return nil
}

// reassignStep runs tp's reassignment from its phase until it waits or ends.
func (c *controller) reassignStep(tp cluster.TopicPartition, r *reassignment) error {
	if _, ok := c.states[tp]; !ok {
		return nil // no state yet (or unreadable): an event for it puts it back
	}
	if r.finishing {
		return c.reassignFinish(tp, r)
	}
	if !r.written && !r.completing {
		if err := c.reassignUpdate(tp, r); err != nil {
			return err
		}
	}
	trs := r.target()
	if !r.completing && !subset(trs, c.states[tp].Isr) {
		if r.started {
			return nil
		}
		// A: one epoch bump announces RS with AR and RR.
		if r.base < 0 {
			r.base = c.states[tp].LeaderEpoch
		}
		base := r.base
		_, _, ok, err := c.updateState(tp, nil, func(st cluster.LeaderAndIsr) (cluster.LeaderAndIsr, bool) {
			if st.LeaderEpoch > base {
				return st, false
			}
			st.Isr = slices.Clone(st.Isr)
			st.LeaderEpoch++
			return st, true
		})
		if err != nil || !ok {
			return err
		}
		c.announce([]cluster.TopicPartition{tp}, false)
		r.started, r.base = true, -1
		return nil
	}
	return c.reassignComplete(tp, r)
}

// reassignUpdate is phase U.
func (c *controller) reassignUpdate(tp cluster.TopicPartition, r *reassignment) error {
	if len(r.unneeded) > 0 {
		if r.base < 0 {
			r.base = c.states[tp].LeaderEpoch
		}
		unneeded, electable := r.unneeded, c.onlineFor(tp, c.electableIDs())
		_, ch, ok, err := c.updateState(tp, nil, func(st cluster.LeaderAndIsr) (cluster.LeaderAndIsr, bool) {
			if !hasAny(st.Isr, unneeded) && !slices.Contains(unneeded, st.Leader) {
				return st, false
			}
			isr := without(st.Isr, unneeded)
			if slices.Contains(unneeded, st.Leader) {
				if l, nisr, ok := ElectLeader(r.replicas, isr, electable, false); ok {
					st.Leader, isr = l, nisr
				} else {
					st.Leader = cluster.NoLeader
				}
			}
			if !hasAny(isr, electable) {
				// Never below one live member: the request was checked
				// (checkDropSafe) but brokers died since. The dropped
				// replicas stay in the ISR and are not deleted.
				return st, false
			}
			st.Isr = isr
			st.LeaderEpoch++
			return st, true
		})
		if err != nil || !ok {
			return err
		}
		if ch {
			c.announce([]cluster.TopicPartition{tp}, false)
		}
	}
	if err := c.writeAssignment(tp, r.replicas, r.adding, r.removing, false); err != nil {
		return err
	}
	c.setAssignment(tp, r.replicas, r.adding, r.removing)
	c.stopRemoved(tp, r.unneeded)
	r.unneeded, r.written, r.base = nil, true, -1
	return nil
}

// reassignComplete is phase B.
func (c *controller) reassignComplete(tp cluster.TopicPartition, r *reassignment) error {
	trs := r.target()
	removed := without(r.replicas, trs)
	if !r.completing {
		r.completing, r.base = true, c.states[tp].LeaderEpoch
	}
	base, electable := r.base, c.onlineFor(tp, c.electableIDs())
	behind := false
	_, _, ok, err := c.updateState(tp, nil, func(st cluster.LeaderAndIsr) (cluster.LeaderAndIsr, bool) {
		behind = false
		if st.LeaderEpoch > base && slices.Contains(trs, st.Leader) && !hasAny(st.Isr, removed) {
			return st, false // B's write landed (its reply may have been lost)
		}
		if !subset(trs, st.Isr) {
			behind = true // a leader shrank the ISR meanwhile: wait again
			return st, false
		}
		if !slices.Contains(trs, st.Leader) || !slices.Contains(electable, st.Leader) {
			// Kafka's ReassignPartitionLeaderElectionStrategy.
			i := slices.IndexFunc(trs, func(id int32) bool { return slices.Contains(electable, id) && slices.Contains(st.Isr, id) })
			if i < 0 {
				behind = true
				return st, false
			}
			st.Leader = trs[i]
		}
		st.Isr = without(st.Isr, removed)
		st.LeaderEpoch++
		return st, true
	})
	if err != nil || !ok {
		return err
	}
	if behind {
		r.completing, r.base = false, -1
		return nil
	}
	// Kafka's B2: from here on the partition is no longer being
	// reassigned; only the topic znode write is left.
	r.replicas, r.adding, r.removing, r.finishing = slices.Clone(trs), nil, nil, true
	c.setAssignment(tp, trs, nil, nil)
	c.sendLeaderAndIsr([]cluster.TopicPartition{tp}, false, -1)
	c.stopRemoved(tp, removed)
	return c.reassignFinish(tp, r)
}

// reassignFinish is the end of B once its state write landed: RS = TRS in
// the topic znode (and out of /admin/reassign_partitions), UpdateMetadata.
func (c *controller) reassignFinish(tp cluster.TopicPartition, r *reassignment) error {
	trs := r.replicas
	if err := c.writeAssignment(tp, trs, nil, nil, true); err != nil {
		return err
	}
	c.sendUpdateMetadata(c.aliveIDs(), []cluster.TopicPartition{tp})
	delete(c.reassigning, tp)
	c.log.Info().Str("topic", tp.Topic).Int32("partition", tp.Partition).Ints32("replicas", trs).
		Msg("partition reassignment completed")
	return nil
}

// setAssignment puts tp's RS, AR and RR into the context.
func (c *controller) setAssignment(tp cluster.TopicPartition, rs, adding, removing []int32) {
	if a := c.assignments[tp.Topic]; a != nil {
		a[tp.Partition] = slices.Clone(rs)
	}
	if len(adding) > 0 {
		c.adding[tp] = slices.Clone(adding)
	} else {
		delete(c.adding, tp)
	}
	if len(removing) > 0 {
		c.removing[tp] = slices.Clone(removing)
	} else {
		delete(c.removing, tp)
	}
}

// stopRemoved sends StopReplica(delete) for tp to the live brokers of ids,
// with the current leader epoch (Kafka's NonExistentReplica transition).
// A replica still in the stored ISR is never deleted.
func (c *controller) stopRemoved(tp cluster.TopicPartition, ids []int32) {
	st := c.states[tp]
	epoch := st.LeaderEpoch
	for _, id := range ids {
		if slices.Contains(st.Isr, id) {
			c.log.Warn().Str("topic", tp.Topic).Int32("partition", tp.Partition).Int32("replica", id).Ints32("isr", st.Isr).
				Msg("replica dropped by a reassignment is still in the ISR: not deleting it")
			continue
		}
		c.sendStopReplicaAt(id, []cluster.TopicPartition{tp}, true, epoch)
	}
}

// writeAssignment writes tp's RS, AR and RR into its topic znode, keeping
// every other partition as stored, in a multi fenced by /controller_epoch
// and conditional on the znode's version (a concurrent writer makes it
// re-read). With done, the partition also leaves /admin/reassign_partitions
// if it is there with target rs (deleting the znode when it empties), in
// the same multi. Rewriting what is stored already is harmless, so a write
// whose reply was lost is simply retried.
func (c *controller) writeAssignment(tp cluster.TopicPartition, rs, adding, removing []int32, done bool) error {
	p := topicPath(tp.Topic)
	for attempt := 0; attempt < maxStateWriteAttempts; attempt++ {
		data, stat, err := c.store.Get(p)
		if err != nil {
			return fmt.Errorf("get %s: %w", p, err)
		}
		a, err := decodeTopicAssignmentFull(tp.Topic, data)
		if err != nil {
			return fmt.Errorf("%w: %w", errUnreadableTopicZNode, err)
		}
		a.Replicas[tp.Partition] = slices.Clone(rs)
		a.Adding[tp.Partition], a.Removing[tp.Partition] = adding, removing
		ops := []any{&zk.SetDataRequest{Path: p, Data: encodeTopicAssignmentFull(a), Version: stat.Version}}
		var legacyVersion int32 = -1
		if done {
			op, err := c.legacyRemoval(func(t cluster.TopicPartition, target []int32) bool {
				return t == tp && slices.Equal(target, rs)
			})
			if err != nil {
				return err
			}
			if op != nil {
				ops = append(ops, op)
				legacyVersion = 0
			}
		}
		res, err := c.multi(ops...)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, ErrNotController):
			return err
		case len(res) > 1 && errors.Is(res[1].Error, zk.ErrBadVersion),
			legacyVersion >= 0 && len(res) > 2 && (errors.Is(res[2].Error, zk.ErrBadVersion) || errors.Is(res[2].Error, zk.ErrNoNode)):
			continue
		case zkConnectionLost(err):
			return fmt.Errorf("set %s: outcome unknown: %w", p, err)
		default:
			return fmt.Errorf("set %s at zk_version %d: %w", p, stat.Version, err)
		}
	}
	return fmt.Errorf("set %s: zk_version kept moving after %d attempts", p, maxStateWriteAttempts)
}

// ---- /admin/reassign_partitions ----

// legacyRemoval reads /admin/reassign_partitions and returns the op that
// takes out the partitions drop selects (a set of what is left, or a
// delete when nothing is), conditional on the version read; nil when the
// znode is missing or drop selects nothing.
func (c *controller) legacyRemoval(drop func(cluster.TopicPartition, []int32) bool) (any, error) {
	data, stat, err := c.store.Get(reassignPartitionsPath)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", reassignPartitionsPath, err)
	}
	m, err := decodeLegacyReassignment(data)
	if err != nil {
		c.log.Error().Err(err).Msg("unreadable partition reassignment znode: deleting it")
		return &zk.DeleteRequest{Path: reassignPartitionsPath, Version: stat.Version}, nil
	}
	n := len(m)
	maps.DeleteFunc(m, drop)
	switch {
	case len(m) == n:
		return nil, nil
	case len(m) == 0:
		return &zk.DeleteRequest{Path: reassignPartitionsPath, Version: stat.Version}, nil
	default:
		return &zk.SetDataRequest{Path: reassignPartitionsPath, Data: encodeLegacyReassignment(m), Version: stat.Version}, nil
	}
}

// dropFromLegacy takes the partitions of c.work.legacyDrop (reassigned
// through the API since) out of /admin/reassign_partitions.
func (c *controller) dropFromLegacy() error {
	if len(c.work.legacyDrop) == 0 {
		return nil
	}
	if err := c.removeFromLegacy(func(tp cluster.TopicPartition, _ []int32) bool { return c.work.legacyDrop[tp] }); err != nil {
		return err
	}
	clear(c.work.legacyDrop)
	return nil
}

// removeFromLegacy takes the partitions drop selects out of
// /admin/reassign_partitions (Kafka's maybeRemoveFromZkReassignment).
func (c *controller) removeFromLegacy(drop func(cluster.TopicPartition, []int32) bool) error {
	for attempt := 0; attempt < maxStateWriteAttempts; attempt++ {
		op, err := c.legacyRemoval(drop)
		if err != nil || op == nil {
			return err
		}
		res, err := c.multi(op)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, ErrNotController):
			return err
		case len(res) > 1 && (errors.Is(res[1].Error, zk.ErrBadVersion) || errors.Is(res[1].Error, zk.ErrNoNode)):
			continue
		default:
			return fmt.Errorf("update %s: %w", reassignPartitionsPath, err)
		}
	}
	return fmt.Errorf("update %s: zk_version kept moving after %d attempts", reassignPartitionsPath, maxStateWriteAttempts)
}

// onLegacyReassignment is Kafka's processZkPartitionReassignment: each
// partition of /admin/reassign_partitions starts reassigning to its
// replicas, unless it already is (this controller's own write of the
// znode fires the watch again); those that cannot start are taken out of
// the znode.
func (c *controller) onLegacyReassignment() error {
	data, _, err := c.store.Get(reassignPartitionsPath)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get %s: %w", reassignPartitionsPath, err)
	}
	m, err := decodeLegacyReassignment(data)
	if err != nil {
		return c.removeFromLegacy(func(cluster.TopicPartition, []int32) bool { return true })
	}
	failed := map[cluster.TopicPartition]bool{}
	for _, tp := range slices.SortedFunc(maps.Keys(m), compareTP) {
		target := m[tp]
		if c.work.legacyDrop[tp] {
			continue // an API reassignment replaced it; it leaves the znode
		}
		if r, ok := c.reassigning[tp]; ok && slices.Equal(r.target(), target) {
			r.legacy = true
			continue
		}
		if target == nil {
			target = []int32{}
		}
		err := c.validateTarget(tp, target)
		if err == nil {
			err = c.startReassignment(tp, target, true)
		}
		if err != nil {
			c.log.Warn().Err(err).Str("topic", tp.Topic).Int32("partition", tp.Partition).
				Msg("partition reassignment from znode refused")
			failed[tp] = true
		}
	}
	if len(failed) > 0 {
		if err := c.removeFromLegacy(func(tp cluster.TopicPartition, _ []int32) bool { return failed[tp] }); err != nil {
			return err
		}
	}
	return c.reassignPartitions()
}

// resumeReassignments is the failover's part (Kafka's
// initializePartitionReassignments): every partition whose topic znode has
// adding or removing replicas resumes.
func (c *controller) resumeReassignments(t string, a fullAssignment) {
	for _, p := range slices.Sorted(maps.Keys(a.Replicas)) {
		if len(a.Adding[p])+len(a.Removing[p]) == 0 {
			continue
		}
		tp := cluster.TopicPartition{Topic: t, Partition: p}
		c.adding[tp], c.removing[tp] = a.Adding[p], a.Removing[p]
		c.reassigning[tp] = &reassignment{replicas: slices.Clone(a.Replicas[p]), adding: a.Adding[p], removing: a.Removing[p],
			written: true, base: -1}
		c.work.reassign[tp] = true
	}
}
