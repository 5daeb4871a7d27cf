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
	if c.stopped() {
		return errControllerStopped
	}
	for i, r := range c.readStates(theirs) {
		tp := theirs[i]
		if c.skipState(tp, r.err) {
			continue
		}
		if r.err != nil {
			if err := c.stepError(r.err); err != nil {
				return err
			}
			continue // unreadable: the context's state is the best we have
		}
		if r.exists {
			c.states[tp] = r.st
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
// UpdateMetadata to every broker, one request per broker. A partition
// without a live replica stays without a state (a replica's startup puts
// it back in the work). The writes go in pipelined batches (createStates);
// a partition whose write failed stays in the work, and the first error
// that stops the step is returned once every result was applied.
func (c *controller) initPartitions() error {
	if len(c.work.init) == 0 {
		return nil
	}
	tps := slices.SortedFunc(maps.Keys(c.work.init), compareTP)
	electable := c.electableIDs()
	var created, adopted []cluster.TopicPartition
	defer func() {
		c.announce(created, true)
		c.announce(adopted, false)
	}()
	if c.stopped() {
		return errControllerStopped
	}
	var todo []cluster.TopicPartition
	var sts []cluster.LeaderAndIsr
	for _, tp := range tps {
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
		todo = append(todo, tp)
		sts = append(sts, st)
	}
	var first error
	for i, r := range c.createStates(todo, sts) {
		tp := todo[i]
		if r.err != nil {
			if err := c.stepError(r.err); err != nil && first == nil {
				first = err
			}
			continue
		}
		delete(c.work.init, tp)
		if r.ours {
			created = append(created, tp)
		}
		if r.adopted {
			// Announced as it is, not as new; reconcile elects if its
			// leader or an ISR member is gone.
			adopted = append(adopted, tp)
			c.work.reconcile[tp] = true
		}
		if _, moving := c.reassigning[tp]; moving {
			c.work.reassign[tp] = true // it waited for a state
		}
	}
	return first
}

// createResult is one partition's outcome of createStates: ours when
// this controller's create landed, adopted when another state was there
// and is now the context's.
type createResult struct {
	ours, adopted bool
	err           error
}

// createStates writes the first state sts[i] of each tps[i] (sorted) in
// pipelined batches of fenced multis (Kafka's createTopicPartitionStatesRaw
// with expectedControllerEpochZkVersion): first each topic's
// /brokers/topics/<t>/partitions, alone in its multi (NODEEXISTS is
// success, and a failing op fails a whole multi); then, per partition, one
// multi creating .../partitions/<p> and its state together, or, where
// .../partitions/<p> already exists (an earlier attempt), one creating the
// state alone. A state create whose outcome is unknown, or that met
// NODEEXISTS, is read back in one more batch. ours reports whether this
// controller created the state (now or in an earlier attempt whose reply
// was lost: c.unknown holds that attempt and it is what is stored), so it
// is announced as new; adopted means another state was there, which the
// context adopts. A stored state with this controller's epoch is adopted,
// not ours, unless c.unknown holds this term's attempt for it: the
// context may have held and announced it before its topic was dropped,
// and a state announced as new lets a broker whose log dir failed create
// an empty log.
func (c *controller) createStates(tps []cluster.TopicPartition, sts []cluster.LeaderAndIsr) []createResult {
	out := make([]createResult, len(tps))
	if len(tps) == 0 {
		return out
	}
	live := make([]int, len(tps)) // indices still going
	for i := range live {
		live[i] = i
	}
	stop := func(idx []int) bool {
		if !c.stopped() {
			return false
		}
		for _, i := range idx {
			out[i].err = errControllerStopped
		}
		return true
	}
	if stop(live) {
		return out
	}
	// The topics' partitions znodes: one create per topic.
	var paths []string
	of := map[string]int{}
	for _, i := range live {
		if p := partitionsPath(tps[i].Topic); len(paths) == 0 || paths[len(paths)-1] != p {
			of[p] = len(paths)
			paths = append(paths, p)
		}
	}
	writes := make([][]any, len(paths))
	for k, p := range paths {
		writes[k] = []any{&zk.CreateRequest{Path: p}}
	}
	res := c.batchMulti(writes)
	kept := live[:0]
	for _, i := range live {
		k := of[partitionsPath(tps[i].Topic)]
		switch r := res[k]; {
		case r.err == nil, len(r.res) > 1 && errors.Is(r.res[1].Error, zk.ErrNodeExists):
			kept = append(kept, i)
		case errors.Is(r.err, ErrNotController):
			out[i].err = r.err
		default:
			out[i].err = fmt.Errorf("create %s: %w", paths[k], r.err)
		}
	}
	live = kept
	var back []int
	var backErr []error
	// create writes the states of idx, with their partition znodes when
	// withParent, and sorts the outcomes; it returns those whose partition
	// znode was there already (withParent only).
	create := func(idx []int, withParent bool) (parentExists []int) {
		if len(idx) == 0 || stop(idx) {
			return nil
		}
		writes := make([][]any, len(idx))
		for k, i := range idx {
			tp := tps[i]
			st := &zk.CreateRequest{Path: partitionStatePath(tp.Topic, tp.Partition), Data: encodePartitionState(sts[i])}
			if withParent {
				writes[k] = []any{&zk.CreateRequest{Path: partitionPath(tp.Topic, tp.Partition)}, st}
			} else {
				writes[k] = []any{st}
			}
		}
		res := c.batchMulti(writes)
		stateOp := 1 // index of the state's create in res (the check is 0)
		if withParent {
			stateOp = 2
		}
		for k, i := range idx {
			tp, st, r := tps[i], sts[i], res[k]
			switch err := r.err; {
			case err == nil:
				delete(c.unknown, tp)
				st.ZkVersion = 0
				c.setState(tp, st, "partition created")
				out[i].ours = true
			case errors.Is(err, ErrNotController):
				out[i].err = err
			case withParent && len(r.res) > 1 && errors.Is(r.res[1].Error, zk.ErrNodeExists):
				parentExists = append(parentExists, i)
			case zkConnectionLost(err), len(r.res) > stateOp && errors.Is(r.res[stateOp].Error, zk.ErrNodeExists):
				if _, had := c.unknown[tp]; zkConnectionLost(err) && !had {
					// Keep an earlier attempt's entry: that one may have landed.
					c.unknown[tp] = st
				}
				back = append(back, i)
				backErr = append(backErr, err)
			default:
				out[i].err = fmt.Errorf("create %s: %w", partitionStatePath(tp.Topic, tp.Partition), err)
			}
		}
		return parentExists
	}
	create(create(live, true), false)
	if len(back) == 0 || stop(back) {
		return out
	}
	backTPs := make([]cluster.TopicPartition, len(back))
	for k, i := range back {
		backTPs[k] = tps[i]
	}
	for k, r := range c.readStates(backTPs) {
		i, tp, err := back[k], tps[back[k]], backErr[k]
		sp := partitionStatePath(tp.Topic, tp.Partition)
		if c.skipState(tp, r.err) {
			continue
		}
		if r.err != nil {
			out[i].err = fmt.Errorf("create %s: %w; read back: %w", sp, err, r.err)
			continue
		}
		if !r.exists {
			delete(c.unknown, tp)
			out[i].err = fmt.Errorf("create %s: %w", sp, err)
			continue
		}
		if c.adoptUnknown(tp, r.st) {
			out[i].ours = true // this term's attempt landed, its reply lost
			continue
		}
		// Not an attempt c.unknown holds, even with this controller's
		// epoch (a state written before its topic left the context, say):
		// it may have been announced and used already, so it is never
		// announced as new.
		c.states[tp] = r.st
		out[i].adopted = true
	}
	return out
}

// readBackUnknown re-reads the state of each partition with a write of
// unknown outcome that no work item will read again, and announces those
// whose write landed. A partition still owed its first state or an
// election is left to initPartitions or reconcile, which read it first.
func (c *controller) readBackUnknown() error {
	var tps []cluster.TopicPartition
	for _, tp := range slices.SortedFunc(maps.Keys(c.unknown), compareTP) {
		if c.work.init[tp] || c.work.reconcile[tp] {
			continue
		}
		if c.replicas(tp) == nil {
			delete(c.unknown, tp)
			continue
		}
		tps = append(tps, tp)
	}
	if len(tps) == 0 {
		return nil
	}
	if c.stopped() {
		return errControllerStopped
	}
	var changed []cluster.TopicPartition
	defer func() { c.announce(changed, false) }()
	res := c.updateStates(tps, nil, func(_ cluster.TopicPartition, st cluster.LeaderAndIsr) (cluster.LeaderAndIsr, bool) { return st, false })
	var first error
	for i, tp := range tps {
		if res[i].changed {
			changed = append(changed, tp)
		}
		if res[i].err != nil {
			if err := c.stepError(res[i].err); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}

// ---- offline partitions ----

// reconcile applies offlineTransition to each partition in c.work.reconcile:
// elect a leader where the leader is gone, drop dead replicas from ISRs.
// The states are read, decided and written in batches (updateStates). The
// changed partitions get LeaderAndIsr (to their live replicas) and
// UpdateMetadata (to every live broker), one request per broker; they are
// returned. A partition whose read or write failed stays in the work; the
// first error that stops the step is returned once every result was
// applied.
func (c *controller) reconcile() ([]cluster.TopicPartition, error) {
	if len(c.work.reconcile) == 0 {
		return nil, nil
	}
	tps := slices.SortedFunc(maps.Keys(c.work.reconcile), compareTP)
	alive, electable := c.aliveIDs(), c.electableIDs()
	var changed []cluster.TopicPartition
	defer func() { c.announce(changed, false) }()
	if c.stopped() {
		return nil, errControllerStopped
	}
	kept := tps[:0]
	for _, tp := range tps {
		if c.replicas(tp) == nil {
			delete(c.work.reconcile, tp)
			continue
		}
		kept = append(kept, tp)
	}
	tps = kept
	// The topic's unclean.leader.election.enable is read before the
	// decision (Kafka's collectUncleanLeaderElectionState), only when the
	// leader is gone, once per topic and pass, in one batch per round.
	unclean := map[string]bool{}
	prepare := func(tps []cluster.TopicPartition, cur []cluster.LeaderAndIsr) []error {
		var need []string
		for i, tp := range tps {
			if _, known := unclean[tp.Topic]; known || (cur[i].Leader >= 0 && slices.Contains(c.onlineFor(tp, alive), cur[i].Leader)) {
				continue
			}
			// tps is sorted: a topic's partitions are adjacent, so
			// comparing with the last topic added de-duplicates.
			if len(need) == 0 || need[len(need)-1] != tp.Topic {
				need = append(need, tp.Topic)
			}
		}
		if len(need) == 0 {
			return nil
		}
		got, failed := c.readUncleanAllowedMany(need)
		maps.Copy(unclean, got)
		if len(failed) == 0 {
			return nil
		}
		errs := make([]error, len(tps))
		for i, tp := range tps {
			if _, known := unclean[tp.Topic]; !known {
				errs[i] = failed[tp.Topic] // nil when the leader is alive
			}
		}
		return errs
	}
	wasUnclean := map[cluster.TopicPartition]bool{}
	res := c.updateStates(tps, prepare, func(tp cluster.TopicPartition, st cluster.LeaderAndIsr) (cluster.LeaderAndIsr, bool) {
		// A replica on an offline log dir is not alive for tp (ctrllogdir.go).
		next, ch, u := offlineTransition(c.replicas(tp), st, c.onlineFor(tp, alive), c.onlineFor(tp, electable), unclean[tp.Topic])
		wasUnclean[tp] = u
		if u {
			c.log.Warn().Str("topic", tp.Topic).Int32("partition", tp.Partition).Int32("leader", next.Leader).
				Ints32("old_isr", st.Isr).Msg("unclean leader election: records may be lost")
		}
		return next, ch
	})
	var first error
	for i, tp := range tps {
		r := res[i]
		if r.changed {
			// Even on an error: an earlier write found to have landed
			// is announced now.
			changed = append(changed, tp)
		}
		if r.err != nil {
			if err := c.stepError(r.err); err != nil && first == nil {
				first = err
			}
			continue
		}
		delete(c.work.reconcile, tp)
		if r.changed && wasUnclean[tp] {
			c.metrics.UncleanLeaderElection(tp)
		}
	}
	return changed, first
}
