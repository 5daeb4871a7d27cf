package zkcoord

import (
	"context"
	"maps"
	"slices"

	"github.com/kafkazk/broker/cluster"
)

// The controller context's helpers and the requests it sends (Kafka's
// ControllerChannelManager batch). Requests are built from the context and
// queued per broker incarnation; queuing never blocks and never fails, so
// a request is only ever owed (ctrlWork) while the ZooKeeper reads it
// depends on are not done. A stopped or fenced controller (c.stopped)
// queues nothing: its requests would carry a stale controller epoch, and a
// successor's may already be on their way. Brokers and partitions are visited in sorted
// order, so what is sent is deterministic.

func (c *controller) aliveIDs() []int32 {
	ids := slices.Collect(maps.Keys(c.alive))
	slices.Sort(ids)
	return ids
}

// electableIDs are the brokers that may lead: alive and not shutting down
// (KC liveBrokerIds excludes shuttingDownBrokerIds).
func (c *controller) electableIDs() []int32 {
	var ids []int32
	for _, id := range c.aliveIDs() {
		if !c.shuttingDown[id] {
			ids = append(ids, id)
		}
	}
	return ids
}

func (c *controller) replicas(tp cluster.TopicPartition) []int32 {
	return c.assignments[tp.Topic][tp.Partition]
}

// partitionsWithState lists every partition that has a state, sorted.
func (c *controller) partitionsWithState() []cluster.TopicPartition {
	tps := slices.Collect(maps.Keys(c.states))
	slices.SortFunc(tps, compareTP)
	return tps
}

func (c *controller) setAlive(b cluster.Broker) {
	if q, ok := c.queues[b.ID]; ok {
		if c.alive[b.ID].Epoch == b.Epoch {
			c.alive[b.ID] = b // endpoints may have changed; the epoch did not
			return
		}
		q.close()
	}
	c.alive[b.ID] = b
	c.queues[b.ID] = c.cfg.NewQueue(b)
}

func (c *controller) removeBroker(id int32) {
	delete(c.alive, id)
	delete(c.shuttingDown, id)
	delete(c.work.sync, id)
	if q, ok := c.queues[id]; ok {
		q.close()
		delete(c.queues, id)
	}
}

func (c *controller) partitionInfo(tp cluster.TopicPartition) cluster.TopicPartitionInfo {
	replicas := slices.Clone(c.replicas(tp))
	st := c.states[tp]
	st.Isr = slices.Clone(st.Isr)
	pi := cluster.TopicPartitionInfo{Topic: tp.Topic, PartitionInfo: cluster.PartitionInfo{
		Partition: tp.Partition, Replicas: replicas, State: st}}
	for _, r := range replicas {
		if _, ok := c.alive[r]; !ok || c.replicaOffline(tp, r) {
			pi.Offline = append(pi.Offline, r)
		}
	}
	return pi
}

func (c *controller) liveBrokers() []cluster.Broker {
	out := make([]cluster.Broker, 0, len(c.alive))
	for _, id := range c.aliveIDs() {
		out = append(out, c.alive[id])
	}
	return out
}

// announce tells the brokers about tps, whose leader-and-ISR state
// changed: LeaderAndIsr to their replicas (isNew for partitions just
// created), then UpdateMetadata to every live broker. Nothing for none.
func (c *controller) announce(tps []cluster.TopicPartition, isNew bool) {
	if len(tps) == 0 || c.stopped() {
		return
	}
	c.sendLeaderAndIsr(tps, isNew, -1)
	c.sendUpdateMetadata(c.aliveIDs(), tps)
}

// sendUpdateMetadata queues UpdateMetadata for tps (any may be missing
// from the context and is then skipped) to each broker in to.
func (c *controller) sendUpdateMetadata(to []int32, tps []cluster.TopicPartition) {
	infos := make([]cluster.TopicPartitionInfo, 0, len(tps))
	for _, tp := range tps {
		if _, ok := c.states[tp]; ok && c.replicas(tp) != nil {
			infos = append(infos, c.partitionInfo(tp))
		}
	}
	c.sendUpdateMetadataInfos(to, infos)
}

func (c *controller) sendUpdateMetadataInfos(to []int32, infos []cluster.TopicPartitionInfo) {
	if c.stopped() {
		return
	}
	live := c.liveBrokers()
	for _, id := range to {
		b, ok := c.alive[id]
		q := c.queues[id]
		if !ok || q == nil {
			continue
		}
		req := cluster.UpdateMetadataRequest{
			ControllerID: c.id, ControllerEpoch: c.epoch, BrokerEpoch: b.Epoch,
			Partitions: infos, LiveBrokers: live,
		}
		q.enqueue(ctrlRequest{kind: "UpdateMetadata", to: b, send: func(ctx context.Context, to cluster.Broker) error {
			return c.sender.UpdateMetadata(ctx, to, req)
		}})
	}
}

// sendLeaderAndIsr queues LeaderAndIsr for tps to each of their alive
// replicas, or only to broker only when only >= 0.
func (c *controller) sendLeaderAndIsr(tps []cluster.TopicPartition, isNew bool, only int32) {
	if c.stopped() {
		return
	}
	by := map[int32][]cluster.PartitionAssignment{}
	for _, tp := range tps {
		st, ok := c.states[tp]
		replicas := c.replicas(tp)
		if !ok || replicas == nil {
			continue
		}
		pa := cluster.PartitionAssignment{TopicPartition: tp, Replicas: slices.Clone(replicas), IsNew: isNew,
			AddingReplicas: slices.Clone(c.adding[tp]), RemovingReplicas: slices.Clone(c.removing[tp])}
		pa.LeaderAndIsr = st
		pa.LeaderAndIsr.Isr = slices.Clone(st.Isr)
		for _, r := range replicas {
			if _, alive := c.alive[r]; alive && (only < 0 || r == only) {
				by[r] = append(by[r], pa)
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(by)) {
		parts := by[id]
		b, q := c.alive[id], c.queues[id]
		if q == nil {
			continue
		}
		var leaders []cluster.Broker
		seen := map[int32]bool{}
		for _, pa := range parts {
			l := pa.LeaderAndIsr.Leader
			if lb, ok := c.alive[l]; ok && !seen[l] {
				seen[l] = true
				leaders = append(leaders, lb)
			}
		}
		req := cluster.LeaderAndIsrRequest{
			ControllerID: c.id, ControllerEpoch: c.epoch, BrokerEpoch: b.Epoch,
			Partitions: parts, LiveLeaders: leaders,
		}
		q.enqueue(ctrlRequest{kind: "LeaderAndIsr", to: b, send: func(ctx context.Context, to cluster.Broker) error {
			return c.sendLeaderAndIsrRequest(ctx, to, req)
		}})
	}
}

func (c *controller) sendStopReplica(to int32, tps []cluster.TopicPartition, del bool) {
	c.sendStopReplicaAt(to, tps, del, -1)
}

// sendStopReplicaAt is sendStopReplica with the leader epoch to send for
// every partition (epoch >= 0; -1: the default, LeaderDuringDelete for a
// deletion, the context's leader epoch otherwise).
func (c *controller) sendStopReplicaAt(to int32, tps []cluster.TopicPartition, del bool, epoch int32) {
	b, ok := c.alive[to]
	q := c.queues[to]
	if !ok || q == nil || len(tps) == 0 || c.stopped() {
		return
	}
	epochs := make(map[cluster.TopicPartition]int32, len(tps))
	for _, tp := range tps {
		if epoch >= 0 {
			epochs[tp] = epoch
		} else if del {
			epochs[tp] = LeaderDuringDelete
		} else {
			epochs[tp] = c.states[tp].LeaderEpoch
		}
	}
	req := cluster.StopReplicaRequest{
		ControllerID: c.id, ControllerEpoch: c.epoch, BrokerEpoch: b.Epoch,
		DeletePartitions: del, Partitions: slices.Clone(tps), LeaderEpochs: epochs,
	}
	q.enqueue(ctrlRequest{kind: "StopReplica", to: b, send: func(ctx context.Context, to cluster.Broker) error {
		return c.sender.StopReplica(ctx, to, req)
	}})
}
