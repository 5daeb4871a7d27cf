package zkcoord

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/kafkazk/broker/cluster"
)

// The controller's handlers of broker events (KafkaController
// onControllerFailover, BrokerChange, ControlledShutdown and the auto
// leader rebalance). Each updates the context, records what is left to do
// in c.work and drains it; a failure leaves the rest to the next retry.

// failover is KC onControllerFailover: drop stale ISR notifications, read
// everything, tell every live broker the whole metadata and then its
// own partitions, and leave as work the partitions that have no state yet,
// elections for partitions whose leader is gone, and pending topic
// deletions. The context is replaced only once every read succeeded; a
// failure is retried from scratch.
func (c *controller) failover() error {
	// Stale notifications go first, before any state is read (Kafka
	// deletes them before initializeControllerContext): a leader's ISR
	// write after this point leaves a notification that is kept and
	// handled, one before it is in the states read below.
	if err := c.deleteIsrNotifications(nil); err != nil {
		return err
	}
	if err := c.deleteLogDirNotifications(nil); err != nil {
		return err
	}
	brokers, err := c.readBrokers()
	if err != nil {
		return err
	}
	topics, _, err := c.store.Children(topicsPath)
	if err != nil {
		return fmt.Errorf("children %s: %w", topicsPath, err)
	}
	loaded := make(map[string]loadedTopic, len(topics))
	for _, t := range topics {
		lt, err := c.readTopic(t)
		if err != nil {
			return err
		}
		loaded[t] = lt
	}
	for _, q := range c.queues {
		q.close()
	}
	clear(c.queues)
	clear(c.alive)
	clear(c.shuttingDown)
	for _, id := range slices.Sorted(maps.Keys(brokers)) {
		c.setAlive(brokers[id])
	}
	clear(c.assignments)
	clear(c.states)
	clear(c.reassigning)
	clear(c.adding)
	clear(c.removing)
	clear(c.work.reassign)
	for _, t := range slices.Sorted(maps.Keys(loaded)) {
		c.commitTopic(t, loaded[t])
		if !loaded[t].gone {
			c.resumeReassignments(t, loaded[t].full)
		}
	}
	c.log.Info().Int("brokers", len(c.alive)).Int("topics", len(c.assignments)).Int("partitions", len(c.states)).
		Msg("controller failover: context loaded")
	all := c.partitionsWithState()
	c.sendUpdateMetadata(c.aliveIDs(), all)
	for _, id := range c.aliveIDs() {
		c.sendLeaderAndIsr(all, false, id)
	}
	for _, tp := range all {
		c.work.reconcile[tp] = true
	}
	c.work.events.deletions = true
	c.work.events.reassign = true
	c.work.events.preferredElection = true
	return nil
}

// onBrokerChange diffs /brokers/ids with the context (KC BrokerChange): a
// broker whose registration czxid changed bounced and counts as failed and
// started again (KIP-380). The failure is handled first and must finish
// before the startup: a bounced broker is dead for the elections that move
// leadership away from its old incarnation.
func (c *controller) onBrokerChange() error {
	now, err := c.readBrokers()
	if err != nil {
		return err
	}
	var dead, born []int32
	for _, id := range c.aliveIDs() {
		nb, ok := now[id]
		switch {
		case !ok || nb.Epoch != c.alive[id].Epoch:
			dead = append(dead, id)
		case !slices.Equal(nb.Endpoints, c.alive[id].Endpoints):
			c.work.metadataAll = true // owed until sent, whatever fails below
			c.setAlive(nb)
		}
	}
	for id, nb := range now {
		if ob, ok := c.alive[id]; !ok || ob.Epoch != nb.Epoch || slices.Contains(dead, id) {
			born = append(born, id)
		}
	}
	slices.Sort(born)
	if len(dead) > 0 {
		if err := c.onBrokerFailure(dead); err != nil {
			return err
		}
	}
	if len(born) > 0 {
		bs := make([]cluster.Broker, 0, len(born))
		for _, id := range born {
			bs = append(bs, now[id])
		}
		return c.onBrokerStartup(bs)
	}
	c.flushMetadataAll()
	return nil
}

// onBrokerFailure is KC onBrokerFailure/onReplicasBecomeOffline: the dead
// brokers' queues are dropped, every partition they led gets a new leader
// (or goes offline), and they leave every ISR.
func (c *controller) onBrokerFailure(dead []int32) error {
	c.log.Info().Ints32("brokers", dead).Msg("brokers failed")
	for _, id := range dead {
		c.removeBroker(id)
	}
	for _, tp := range c.partitionsWithState() {
		st := c.states[tp]
		if st.Leader < 0 || hasAny(c.replicas(tp), dead) || hasAny(st.Isr, dead) {
			c.work.reconcile[tp] = true
		}
	}
	// Everyone learns the new live broker list: with the elections'
	// UpdateMetadata, or on its own (c.work.metadataAll), also when this
	// step fails and its retry finds nothing to elect.
	c.work.metadataAll = true
	changed, err := c.reconcile()
	if err != nil {
		return err
	}
	if len(changed) > 0 {
		c.work.metadataAll = false // announce carried the live brokers
	}
	c.flushMetadataAll()
	return nil
}

// onBrokerStartup is KC onBrokerStartup: everyone learns the new brokers,
// which are owed the whole metadata and LeaderAndIsr for all their
// replicas (c.work.sync), partitions without a state that they can host
// are created, and offline partitions they can now lead are elected.
func (c *controller) onBrokerStartup(born []cluster.Broker) error {
	ids := make([]int32, 0, len(born))
	for _, b := range born {
		c.setAlive(b)
		c.work.sync[b.ID] = b.Epoch
		ids = append(ids, b.ID)
	}
	c.log.Info().Ints32("brokers", ids).Msg("brokers started")
	var existing []int32
	for _, id := range c.aliveIDs() {
		if !slices.Contains(ids, id) {
			existing = append(existing, id)
		}
	}
	c.sendUpdateMetadata(existing, nil)
	// The started brokers get the whole metadata from c.work.sync.
	c.work.metadataAll = false
	for t, a := range c.assignments {
		for p, replicas := range a {
			tp := cluster.TopicPartition{Topic: t, Partition: p}
			if _, ok := c.states[tp]; !ok && hasAny(replicas, ids) {
				c.work.init[tp] = true
			}
		}
	}
	for _, tp := range c.partitionsWithState() {
		if _, ok := c.alive[c.states[tp].Leader]; !ok {
			c.work.reconcile[tp] = true
		}
	}
	// A reassignment with a replica on a started broker may go on
	// (Kafka's onBrokerStartup resumes them).
	for tp := range c.reassigning {
		if hasAny(c.replicas(tp), ids) {
			c.work.reassign[tp] = true
		}
	}
	return c.drain()
}

// ---- controlled shutdown ----

// controlledShutdown is KC ControlledShutdown, run on the loop: for every
// replicated partition on the broker, move leadership away if it leads
// (ControlledShutdown election), or take it out of the ISR and stop its
// replica if it follows. It returns the partitions it still leads. On an
// error the broker retries (controlled.shutdown.max.retries); writes whose
// reply was lost are found and announced then, or by the elections after
// the broker stops.
func (c *controller) controlledShutdown(id int32, brokerEpoch int64) ([]cluster.TopicPartition, error) {
	b, ok := c.alive[id]
	if !ok {
		return nil, fmt.Errorf("controlled shutdown of broker %d: %w", id, cluster.ErrBrokerNotAvailable)
	}
	if b.Epoch != brokerEpoch {
		return nil, fmt.Errorf("controlled shutdown of broker %d: epoch %d, current %d: %w",
			id, brokerEpoch, b.Epoch, cluster.ErrStaleBrokerEpoch)
	}
	if c.fenced {
		return nil, fmt.Errorf("controlled shutdown of broker %d: %w", id, ErrNotController)
	}
	c.shuttingDown[id] = true
	c.log.Info().Int32("broker", id).Msg("controlled shutdown")
	electable := c.electableIDs()
	shutting := slices.Sorted(maps.Keys(c.shuttingDown))
	var changed, stopped, remaining []cluster.TopicPartition
	var first error
	for _, tp := range c.partitionsWithState() {
		replicas := c.replicas(tp)
		if len(replicas) < 2 || !slices.Contains(replicas, id) {
			continue // RF=1 partitions are never moved (Kafka)
		}
		if c.stopped() {
			return nil, fmt.Errorf("controlled shutdown of broker %d: %w", id, ErrNotController)
		}
		// Whether it led as the context knew before this call: a former
		// leader learns it follows from LeaderAndIsr, not StopReplica.
		wasLeader := c.states[tp].Leader == id
		st, ch, ok, err := c.updateState(tp, nil, func(st cluster.LeaderAndIsr) (cluster.LeaderAndIsr, bool) {
			if st.Leader == id {
				l, isr, ok := ElectControlledShutdownLeader(replicas, st.Isr, c.onlineFor(tp, electable), shutting)
				if !ok {
					return st, false
				}
				st.Leader, st.Isr = l, isr
				st.LeaderEpoch++
				return st, true
			}
			if slices.Contains(st.Isr, id) && len(st.Isr) > 1 {
				st.Isr = slices.DeleteFunc(slices.Clone(st.Isr), func(m int32) bool { return m == id })
				st.LeaderEpoch++
				return st, true
			}
			return st, false
		})
		if ch {
			changed = append(changed, tp)
		}
		if err != nil {
			if errors.Is(err, ErrNotController) || zkSessionLost(err) {
				c.checkFenced(err) // fenced: changed is left to the successor
				return nil, fmt.Errorf("controlled shutdown of broker %d: %w: %w", id, ErrNotController, err)
			}
			if first == nil {
				first = err
			}
			if c.states[tp].Leader == id {
				remaining = append(remaining, tp)
			}
			continue
		}
		if !ok {
			continue
		}
		switch {
		case st.Leader == id:
			remaining = append(remaining, tp)
		case !wasLeader:
			// A follower stops fetching (StopReplica without delete); a
			// former leader learns it follows from LeaderAndIsr instead.
			stopped = append(stopped, tp)
		}
	}
	c.announce(changed, false)
	c.sendStopReplica(id, stopped, false)
	return remaining, first
}

// ---- auto leader rebalance ----

// checkRebalance is KC checkAndTriggerAutoLeaderRebalance.
func (c *controller) checkRebalance() error {
	parts := make([]PartitionLeadership, 0, len(c.states))
	for _, tp := range c.partitionsWithState() {
		if _, moving := c.reassigning[tp]; moving {
			continue // Kafka leaves partitions being reassigned alone
		}
		st := c.states[tp]
		parts = append(parts, PartitionLeadership{TopicPartition: tp, Replicas: c.replicas(tp), Leader: st.Leader, Isr: st.Isr})
	}
	tps := PreferredElections(parts, c.electableIDs(), c.cfg.LeaderImbalancePerBrokerPercentage)
	if len(tps) == 0 {
		return nil
	}
	electable := c.electableIDs()
	var changed []cluster.TopicPartition
	var first error
	for _, tp := range tps {
		if c.stopped() {
			return errControllerStopped
		}
		replicas := c.replicas(tp)
		_, ch, _, err := c.updateState(tp, nil, func(st cluster.LeaderAndIsr) (cluster.LeaderAndIsr, bool) {
			l, ok := ElectPreferredLeader(replicas, st.Isr, c.onlineFor(tp, electable))
			if !ok || st.Leader == l {
				return st, false
			}
			st.Leader = l
			st.LeaderEpoch++
			return st, true
		})
		if ch {
			changed = append(changed, tp)
		}
		if err != nil {
			if errors.Is(err, ErrNotController) || zkSessionLost(err) {
				c.announce(changed, false)
				return err
			}
			if first == nil {
				first = err
			}
		}
	}
	if len(changed) > 0 {
		c.log.Info().Int("partitions", len(changed)).Msg("preferred replica leader election")
		c.announce(changed, false)
	}
	return first
}
