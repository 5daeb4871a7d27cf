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

// readTopic reads topic t: its assignment from /brokers/topics/<t>, then
// the state znode of each partition the context has no state for. It
// changes nothing, so a failure leaves the context as it was and the
// retry reads the topic again.
func (c *controller) readTopic(t string) (loadedTopic, error) {
	full, ok, err := c.readAssignmentFull(t)
	if err != nil {
		return loadedTopic{}, err
	}
	if !ok {
		return loadedTopic{gone: true}, nil
	}
	a := full.Replicas
	lt := loadedTopic{assignment: a, full: full, states: map[cluster.TopicPartition]cluster.LeaderAndIsr{}}
	for _, p := range slices.Sorted(maps.Keys(a)) {
		tp := cluster.TopicPartition{Topic: t, Partition: p}
		if _, known := c.states[tp]; known {
			continue
		}
		st, ok, err := c.readState(tp)
		if c.skipState(tp, err) {
			continue
		}
		if err != nil {
			return loadedTopic{}, err
		}
		if ok {
			lt.states[tp] = st
		} else {
			lt.fresh = append(lt.fresh, tp)
		}
	}
	return lt, nil
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
	for _, t := range names {
		lt, err := c.readTopic(t)
		if err != nil {
			return err
		}
		c.commitTopic(t, lt)
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
	for _, k := range kids {
		p := isrChangeNotificationNodePath(k)
		data, _, err := c.store.Get(p)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return fmt.Errorf("get %s: %w", p, err)
		}
		tps, err := decodeIsrChangeNotification(data)
		if err != nil {
			c.log.Error().Err(err).Str("zk_path", p).Msg("ignoring isr change notification")
			continue
		}
		for _, tp := range tps {
			set[tp] = true
		}
	}
	var tps []cluster.TopicPartition
	for _, tp := range slices.SortedFunc(maps.Keys(set), compareTP) {
		if c.replicas(tp) == nil {
			continue
		}
		st, ok, err := c.readState(tp)
		if c.skipState(tp, err) {
			continue
		}
		if err != nil {
			return err
		}
		if ok {
			c.states[tp] = st
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
	for _, k := range names {
		if c.stopped() {
			return fmt.Errorf("delete isr change notifications: %w", errControllerStopped)
		}
		p := isrChangeNotificationNodePath(k)
		res, err := c.multi(&zk.DeleteRequest{Path: p, Version: -1})
		switch {
		case err == nil:
		case errors.Is(err, ErrNotController):
			return err
		case len(res) > 1 && errors.Is(res[1].Error, zk.ErrNoNode):
		case zkConnectionLost(err):
			// Unknown outcome; the retry lists the notifications again.
			return fmt.Errorf("delete %s: %w", p, err)
		default:
			return fmt.Errorf("delete %s: %w", p, err)
		}
	}
	return nil
}

// ---- topic configs ----

// onTopicConfigChange re-runs elections for the offline partitions of
// topics whose config now allows unclean leader election, so that setting
// the override revives them without waiting for another event.
func (c *controller) onTopicConfigChange(topics map[string]bool) error {
	n := 0
	for _, t := range slices.Sorted(maps.Keys(topics)) {
		if _, known := c.assignments[t]; !known {
			continue
		}
		u, err := c.readUncleanAllowed(t)
		if err != nil {
			return err
		}
		if !u {
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
