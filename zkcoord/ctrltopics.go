package zkcoord

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/go-zookeeper/zk"

	"github.com/kafkazk/broker/cluster"
)

// The controller's handlers of topic events (KafkaController TopicChange,
// PartitionModifications, TopicDeletion, IsrChangeNotification and
// TopicUncleanLeaderElectionEnable).

// loadedTopic is what readTopic read of one topic, for commitTopic.
type loadedTopic struct {
	gone       bool // no (readable) assignment: drop the topic
	assignment map[int32][]int32
	full       fullAssignment // with the reassignment state
	states     map[cluster.TopicPartition]cluster.LeaderAndIsr
	fresh      []cluster.TopicPartition // partitions without a state znode yet
}

// readTopics reads topics names: their assignments from
// /brokers/topics/<t> in one batch, then, in another, the state znode of
// each partition the context has no state for (Kafka's
// getTopicPartitionStates, pipelined). The partitions of a topic in
// unread are taken as new without reading their states (a topic created
// since the context was loaded, as Kafka's TopicChange does): should one
// have a state already, its create meets NODEEXISTS and reads it back. It changes nothing but dropping
// unreadable states from the context (skipState), so a failure leaves the
// context as it was and the retry reads the topics again. It returns what
// was read of each topic read whole, and the first error (in name order)
// of the others.
func (c *controller) readTopics(names []string, unread map[string]bool) (map[string]loadedTopic, error) {
	paths := make([]string, len(names))
	for i, t := range names {
		paths[i] = topicPath(t)
	}
	out := make(map[string]loadedTopic, len(names))
	errs := map[string]error{}
	var tps []cluster.TopicPartition
	for i, r := range c.batchGet(paths) {
		t := names[i]
		switch {
		case errors.Is(r.err, zk.ErrNoNode):
			out[t] = loadedTopic{gone: true}
			continue
		case r.err != nil:
			errs[t] = fmt.Errorf("get %s: %w", paths[i], r.err)
			continue
		}
		full, err := decodeTopicAssignmentFull(t, r.data)
		if err != nil {
			c.log.Error().Err(err).Str("topic", t).Msg("ignoring topic assignment")
			out[t] = loadedTopic{gone: true}
			continue
		}
		lt := loadedTopic{assignment: full.Replicas, full: full, states: map[cluster.TopicPartition]cluster.LeaderAndIsr{}}
		for _, p := range slices.Sorted(maps.Keys(full.Replicas)) {
			tp := cluster.TopicPartition{Topic: t, Partition: p}
			switch _, known := c.states[tp]; {
			case known:
			case unread[t]:
				lt.fresh = append(lt.fresh, tp)
			default:
				tps = append(tps, tp)
			}
		}
		out[t] = lt
	}
	for i, r := range c.readStates(tps) {
		tp := tps[i]
		lt := out[tp.Topic]
		switch {
		case c.skipState(tp, r.err):
		case r.err != nil:
			if errs[tp.Topic] == nil {
				errs[tp.Topic] = r.err
			}
		case r.exists:
			lt.states[tp] = r.st
		default:
			lt.fresh = append(lt.fresh, tp)
			out[tp.Topic] = lt
		}
	}
	var first error
	for _, t := range names {
		if err := errs[t]; err != nil {
			delete(out, t)
			if first == nil {
				first = err
			}
		}
	}
	return out, first
}

// commitTopic puts what readTopic read into the context; partitions
// without a state become work for initPartitions.
func (c *controller) commitTopic(t string, lt loadedTopic) {
	if lt.gone {
		c.dropTopic(t)
		return
	}
	// A partition being reassigned keeps the context's assignment: only
	// this controller changes it (the znode may lag its write).
	for tp := range c.reassigning {
		if old, ok := c.assignments[t][tp.Partition]; ok && tp.Topic == t {
			if _, still := lt.assignment[tp.Partition]; still {
				lt.assignment[tp.Partition] = old
			}
		}
	}
	c.assignments[t] = lt.assignment
	maps.Copy(c.states, lt.states)
	for _, tp := range lt.fresh {
		c.work.init[tp] = true
	}
}

func (c *controller) dropTopic(t string) {
	delete(c.assignments, t)
	for tp := range c.states {
		if tp.Topic == t {
			delete(c.states, tp)
		}
	}
	for _, m := range []map[cluster.TopicPartition]bool{c.work.init, c.work.reconcile} {
		for tp := range m {
			if tp.Topic == t {
				delete(m, tp)
			}
		}
	}
	for tp := range c.unknown {
		if tp.Topic == t {
			delete(c.unknown, tp)
		}
	}
	for _, m := range []map[cluster.TopicPartition][]int32{c.adding, c.removing} {
		for tp := range m {
			if tp.Topic == t {
				delete(m, tp)
			}
		}
	}
	for tp, r := range c.reassigning {
		if tp.Topic == t {
			if r.legacy {
				c.work.legacyDrop[tp] = true // it can never complete
			}
			delete(c.reassigning, tp)
			delete(c.work.reassign, tp)
		}
	}
}

// onTopicChange re-reads /brokers/topics (if list) and the assignment of
// every new or touched topic, and creates the state of new partitions
// (KC TopicChange, PartitionModifications). A topic is known only once it
// was read whole, so a retry after a failure reads it again.
func (c *controller) onTopicChange(list bool, touched map[string]bool) error {
	names := slices.Collect(maps.Keys(touched))
	if list {
		kids, _, err := c.store.Children(topicsPath)
		if err != nil {
			return fmt.Errorf("children %s: %w", topicsPath, err)
		}
		for t := range c.assignments {
			if !slices.Contains(kids, t) {
				c.dropTopic(t)
			}
		}
		for _, t := range kids {
			if _, known := c.assignments[t]; !known {
				names = append(names, t)
			}
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	unread := map[string]bool{}
	for _, t := range names {
		if _, known := c.assignments[t]; !known && !c.isDeleting(t) {
			unread[t] = true
		}
	}
	loaded, err := c.readTopics(names, unread)
	for _, t := range names {
		if lt, ok := loaded[t]; ok {
			c.commitTopic(t, lt)
		}
	}
	if err != nil {
		return err
	}
	return c.initPartitions()
}

// onDeleteTopics completes every requested deletion (KC TopicDeletion):
// StopReplica(delete) to the live replicas, then the topic's znodes and
// the request in one fenced multi, then UpdateMetadata with leader -2 so
// every broker drops the partitions from its cache. A deletion is
// recorded in c.deleting when it starts, so that one whose multi landed
// with its reply lost is still announced: its request and its topic are
// gone at the next read.
func (c *controller) onDeleteTopics() error {
	kids, _, err := c.store.Children(deleteTopicsRootPath)
	if err != nil {
		return fmt.Errorf("children %s: %w", deleteTopicsRootPath, err)
	}
	for _, t := range slices.Sorted(maps.Keys(c.deleting)) {
		if slices.Contains(kids, t) {
			continue
		}
		// The request is gone: our multi landed, unless someone removed
		// the request by hand and the topic is still there.
		exists, _, err := c.store.Exists(topicPath(t))
		if err != nil {
			return fmt.Errorf("exists %s: %w", topicPath(t), err)
		}
		if exists {
			delete(c.deleting, t)
			continue
		}
		c.finishDeletion(t)
	}
	slices.Sort(kids)
	var first error
	for _, t := range kids {
		a, known := c.assignments[t]
		if !known {
			if a, known, err = c.readAssignment(t); err != nil {
				return err
			}
		}
		var tps []cluster.TopicPartition
		for p := range a {
			tps = append(tps, cluster.TopicPartition{Topic: t, Partition: p})
		}
		slices.SortFunc(tps, compareTP)
		if known {
			c.assignments[t] = a
			by := map[int32][]cluster.TopicPartition{}
			for _, tp := range tps {
				for _, r := range a[tp.Partition] {
					by[r] = append(by[r], tp)
				}
			}
			for _, id := range slices.Sorted(maps.Keys(by)) {
				c.sendStopReplica(id, by[id], true)
			}
		}
		if _, started := c.deleting[t]; !started {
			infos := make([]cluster.TopicPartitionInfo, 0, len(tps))
			for _, tp := range tps {
				pi := c.partitionInfo(tp)
				pi.State.Leader = LeaderDuringDelete
				infos = append(infos, pi)
			}
			c.deleting[t] = infos
		}
		if err := c.completeTopicDeletion(t); err != nil {
			if err := c.stepError(err); err != nil {
				return err
			}
			if first == nil {
				first = err
			}
			continue
		}
		c.finishDeletion(t)
	}
	return first
}

// finishDeletion announces the end of topic t's deletion and forgets it.
func (c *controller) finishDeletion(t string) {
	if infos := c.deleting[t]; len(infos) > 0 {
		c.sendUpdateMetadataInfos(c.aliveIDs(), infos)
	}
	delete(c.deleting, t)
	c.dropTopic(t)
	c.log.Info().Str("topic", t).Msg("deleted topic")
}

// completeTopicDeletion deletes every znode of topic t and then its
// /admin/delete_topics/<t> request, in one multi checked against our
// /controller_epoch zkVersion (KC TopicDeletionManager completeDeleteTopic).
// After a lost reply the request is read back: gone means it landed.
func (c *controller) completeTopicDeletion(t string) error {
	var ops []any
	parts, _, err := c.store.Children(partitionsPath(t))
	switch {
	case err == nil:
		slices.Sort(parts)
		for _, name := range parts {
			part, perr := strconv.ParseInt(name, 10, 32)
			if perr != nil {
				return fmt.Errorf("delete topic %s: unexpected znode %q under %s", t, name, partitionsPath(t))
			}
			kids, _, err := c.store.Children(partitionPath(t, int32(part)))
			if err != nil && !errors.Is(err, zk.ErrNoNode) {
				return fmt.Errorf("children %s: %w", partitionPath(t, int32(part)), err)
			}
			if len(kids) > 0 {
				ops = append(ops, &zk.DeleteRequest{Path: partitionStatePath(t, int32(part)), Version: -1})
			}
			ops = append(ops, &zk.DeleteRequest{Path: partitionPath(t, int32(part)), Version: -1})
		}
		ops = append(ops, &zk.DeleteRequest{Path: partitionsPath(t), Version: -1})
	case errors.Is(err, zk.ErrNoNode):
	default:
		return fmt.Errorf("children %s: %w", partitionsPath(t), err)
	}
	for _, p := range []string{topicPath(t), configTopicPath(t)} {
		exists, _, err := c.store.Exists(p)
		if err != nil {
			return fmt.Errorf("exists %s: %w", p, err)
		}
		if exists {
			ops = append(ops, &zk.DeleteRequest{Path: p, Version: -1})
		}
	}
	ops = append(ops, &zk.DeleteRequest{Path: deleteTopicsPath(t), Version: -1})
	_, err = c.multi(ops...)
	if zkConnectionLost(err) {
		exists, _, rerr := c.store.Exists(deleteTopicsPath(t))
		switch {
		case rerr != nil:
			return fmt.Errorf("delete topic %s: multi of %d ops: outcome unknown: %w; read back: %w", t, len(ops)+1, err, rerr)
		case !exists:
			err = nil // it landed
		}
	}
	if err != nil {
		return fmt.Errorf("delete topic %s: multi of %d ops: %w", t, len(ops)+1, err)
	}
	return nil
}

// ---- ISR change notifications ----

// onIsrChange is KC IsrChangeNotification: re-read the states of the
// partitions the notifications name, send UpdateMetadata for them to every
// live broker and delete the notifications. It is idempotent: a retry
// reads the notifications again, as they are deleted last.
func (c *controller) onIsrChange() error {
	kids, _, err := c.store.Children(isrChangeNotificationPath)
	if err != nil {
		return fmt.Errorf("children %s: %w", isrChangeNotificationPath, err)
	}
	if len(kids) == 0 {
		return nil
	}
	slices.Sort(kids)
	set := map[cluster.TopicPartition]bool{}
	paths := make([]string, len(kids))
	for i, k := range kids {
		paths[i] = isrChangeNotificationNodePath(k)
	}
	for i, r := range c.batchGet(paths) {
		p := paths[i]
		if errors.Is(r.err, zk.ErrNoNode) {
			continue
		}
		if r.err != nil {
			return fmt.Errorf("get %s: %w", p, r.err)
		}
		tps, err := decodeIsrChangeNotification(r.data)
		if err != nil {
			c.log.Error().Err(err).Str("zk_path", p).Msg("ignoring isr change notification")
			continue
		}
		for _, tp := range tps {
			set[tp] = true
		}
	}
	var known []cluster.TopicPartition
	for _, tp := range slices.SortedFunc(maps.Keys(set), compareTP) {
		if c.replicas(tp) != nil {
			known = append(known, tp)
		}
	}
	var tps []cluster.TopicPartition
	for i, r := range c.readStates(known) {
		tp := known[i]
		if c.skipState(tp, r.err) {
			continue
		}
		if r.err != nil {
			return r.err
		}
		if r.exists {
			c.states[tp] = r.st
			tps = append(tps, tp)
		}
	}
	if len(tps) > 0 {
		c.sendUpdateMetadata(c.aliveIDs(), tps)
	}
	// A reassignment waits for its target to join the ISR (Kafka's
	// PartitionReassignmentIsrChange).
	for _, tp := range tps {
		if _, ok := c.reassigning[tp]; ok {
			c.work.reassign[tp] = true
		}
	}
	if err := c.reassignPartitions(); err != nil {
		return err
	}
	return c.deleteIsrNotifications(kids)
}

// deleteIsrNotifications deletes the named children of
// /isr_change_notification, or all of them when names is nil, each in a
// multi fenced by /controller_epoch's zkVersion (Kafka's
// deleteIsrChangeNotifications with expectedControllerEpochZkVersion), so
// a deposed controller never deletes a notification its successor has not
// processed. One multi per notification: in a multi a failing op fails all,
// and a notification already gone (NONODE) is done.
func (c *controller) deleteIsrNotifications(names []string) error {
	if names == nil {
		kids, _, err := c.store.Children(isrChangeNotificationPath)
		if err != nil {
			return fmt.Errorf("children %s: %w", isrChangeNotificationPath, err)
		}
		names = kids
		slices.Sort(names)
	}
	if c.stopped() {
		return fmt.Errorf("delete isr change notifications: %w", errControllerStopped)
	}
	writes := make([][]any, len(names))
	for i, k := range names {
		writes[i] = []any{&zk.DeleteRequest{Path: isrChangeNotificationNodePath(k), Version: -1}}
	}
	var first error
	for i, r := range c.batchMulti(writes) {
		p := isrChangeNotificationNodePath(names[i])
		switch err := r.err; {
		case err == nil:
		case errors.Is(err, ErrNotController):
			return err
		case len(r.res) > 1 && errors.Is(r.res[1].Error, zk.ErrNoNode):
		case first == nil:
			// A lost connection leaves the outcome unknown; the retry
			// lists the notifications again.
			first = fmt.Errorf("delete %s: %w", p, err)
		}
	}
	return first
}

// ---- topic configs ----

// onTopicConfigChange re-runs elections for the offline partitions of
// topics whose config now allows unclean leader election, so that setting
// the override revives them without waiting for another event.
func (c *controller) onTopicConfigChange(topics map[string]bool) error {
	n := 0
	var names []string
	for _, t := range slices.Sorted(maps.Keys(topics)) {
		if _, known := c.assignments[t]; known {
			names = append(names, t)
		}
	}
	if len(names) == 0 {
		return nil
	}
	allowed, failed := c.readUncleanAllowedMany(names)
	for _, t := range names {
		if err := failed[t]; err != nil {
			return err
		}
	}
	for _, t := range names {
		if !allowed[t] {
			continue
		}
		for p := range c.assignments[t] {
			tp := cluster.TopicPartition{Topic: t, Partition: p}
			if st, ok := c.states[tp]; ok {
				if _, alive := c.alive[st.Leader]; st.Leader < 0 || !alive {
					c.work.reconcile[tp] = true
					n++
				}
			}
		}
	}
	if n == 0 {
		return nil
	}
	c.log.Info().Int("partitions", n).Msg("unclean leader election enabled by topic config; electing for offline partitions")
	_, err := c.reconcile()
	return err
}

// onUncleanDefaultEnabled is Kafka's UncleanLeaderElectionEnable event:
// the cluster-wide unclean.leader.election.enable was turned on, so every
// offline partition is elected for at once (each topic's override is
// still read first: one that forbids it stays offline).
func (c *controller) onUncleanDefaultEnabled() error {
	if !c.uncleanDefault() {
		return nil // turned off again meanwhile
	}
	n := 0
	for tp, st := range c.states {
		if _, alive := c.alive[st.Leader]; (st.Leader < 0 || !alive) && !c.isDeleting(tp.Topic) {
			c.work.reconcile[tp] = true
			n++
		}
	}
	if n == 0 {
		return nil
	}
	c.log.Info().Int("partitions", n).Msg("unclean leader election enabled by broker config; electing for offline partitions")
	_, err := c.reconcile()
	return err
}
