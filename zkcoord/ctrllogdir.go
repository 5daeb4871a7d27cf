package zkcoord

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/kafkazk/broker/cluster"
)

// The controller's side of log dir failures (KC processLogDirEventNotification,
// onBrokerLogDirFailure, processLeaderAndIsrResponseReceived and
// replicasOnOfflineDirs).
//
//   - A child of /log_dir_event_notification names a broker whose log dir
//     failed. The handler reads every notification, sends LeaderAndIsr
//     for all the replicas of each named live broker (the states of the
//     context, as KC's OnlineReplica transition does) and deletes the
//     notifications it read, each in a multi fenced by /controller_epoch's
//     zkVersion. A read that fails stops the step and is retried with the
//     notifications still there; a notification that does not parse is
//     logged and deleted. Failover deletes every notification first, as
//     Kafka does (a new controller sends LeaderAndIsr for every replica
//     anyway).
//   - The LeaderAndIsr responses (BrokerSender implementing
//     LeaderAndIsrOfflineSender) name the partitions answered
//     KAFKA_STORAGE_ERROR: the broker's offline replicas, kept per broker
//     incarnation (a restart or a death forgets them, as Kafka's
//     onBrokerStartup and onBrokerFailure do). Partitions answered without
//     error are online again. The responses come back on the send queues'
//     goroutines and are handed to the loop.
//   - Newly offline replicas are KC onReplicasBecomeOffline: an offline
//     replica is not alive for its partition, so the reconcile step elects
//     a new leader (from the ISR minus offline replicas, unclean only if
//     allowed) where the leader's replica is offline and removes offline
//     replicas from ISRs (leader epoch + 1 either way), and every live
//     broker is sent UpdateMetadata with the replica in offline_replicas.
//     Unlike Kafka, no StopReplica goes to the offline replica: its broker
//     stopped it already.

// LeaderAndIsrOfflineSender is a BrokerSender whose LeaderAndIsr also
// returns, from the response's per-partition errors, the partitions the
// broker answered KAFKA_STORAGE_ERROR (offline) and those it answered
// without error (online). protocol.BrokerClient implements it; without it
// the controller learns of no offline replica.
type LeaderAndIsrOfflineSender interface {
	LeaderAndIsrOffline(ctx context.Context, to cluster.Broker, req cluster.LeaderAndIsrRequest) (offline, online []cluster.TopicPartition, err error)
}

// ctrlLogDirs is the controller's offline replica state.
type ctrlLogDirs struct {
	// mu guards inbox: the outcomes the send goroutines hand to the loop.
	mu    sync.Mutex
	inbox []lairOutcome
	// known (under mu) lists the brokers with replicas known offline, a
	// hint for the send goroutines.
	known map[int32]bool
	// offline is owned by the loop: per broker, the incarnation (broker
	// epoch) and its replicas known offline.
	offline map[int32]offlineReplicas
}

type offlineReplicas struct {
	epoch int64
	tps   map[cluster.TopicPartition]bool
}

// lairOutcome is one LeaderAndIsr response as far as log dirs go.
type lairOutcome struct {
	to              cluster.Broker
	offline, online []cluster.TopicPartition
}

// sendLeaderAndIsrRequest sends req to broker to on its queue's goroutine;
// with a LeaderAndIsrOfflineSender the outcome goes back to the loop.
func (c *controller) sendLeaderAndIsrRequest(ctx context.Context, to cluster.Broker, req cluster.LeaderAndIsrRequest) error {
	s, ok := c.sender.(LeaderAndIsrOfflineSender)
	if !ok {
		return c.sender.LeaderAndIsr(ctx, to, req)
	}
	offline, online, err := s.LeaderAndIsrOffline(ctx, to, req)
	if err != nil {
		return err
	}
	if len(offline) == 0 && !c.hasOfflineOn(to.ID) {
		return nil // nothing offline before or now: nothing to tell the loop
	}
	c.logDirs.mu.Lock()
	c.logDirs.inbox = append(c.logDirs.inbox, lairOutcome{to: to, offline: offline, online: online})
	c.logDirs.mu.Unlock()
	c.post(pendingEvents{logDirOutcomes: true})
	return nil
}

// hasOfflineOn reports, from any goroutine, whether the loop may know
// offline replicas on broker id (a hint: the loop decides). It reads the
// inbox lock only; the map is the loop's.
func (c *controller) hasOfflineOn(id int32) bool {
	c.logDirs.mu.Lock()
	defer c.logDirs.mu.Unlock()
	return c.logDirs.known[id]
}

// replicaOffline reports whether broker id's replica of tp is known
// offline in its current incarnation. Loop only.
func (c *controller) replicaOffline(tp cluster.TopicPartition, id int32) bool {
	o, ok := c.logDirs.offline[id]
	if !ok {
		return false
	}
	b, alive := c.alive[id]
	return alive && b.Epoch == o.epoch && o.tps[tp]
}

// onlineFor is ids without the brokers whose replica of tp is offline.
// Loop only.
func (c *controller) onlineFor(tp cluster.TopicPartition, ids []int32) []int32 {
	if len(c.logDirs.offline) == 0 {
		return ids
	}
	out := make([]int32, 0, len(ids))
	for _, id := range ids {
		if !c.replicaOffline(tp, id) {
			out = append(out, id)
		}
	}
	return out
}

// onLogDirEvent is KC processLogDirEventNotification.
func (c *controller) onLogDirEvent() error {
	kids, _, err := c.store.Children(logDirEventNotificationPath)
	if err != nil {
		return fmt.Errorf("children %s: %w", logDirEventNotificationPath, err)
	}
	if len(kids) == 0 {
		return nil
	}
	slices.Sort(kids)
	brokers := map[int32]bool{}
	for _, k := range kids {
		p := logDirEventNodePath(k)
		data, _, err := c.store.Get(p)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return fmt.Errorf("get %s: %w", p, err)
		}
		id, err := decodeLogDirEvent(data)
		if err != nil {
			c.log.Error().Err(err).Str("zk_path", p).Msg("ignoring log dir event notification")
			continue
		}
		brokers[id] = true
	}
	ids := slices.Sorted(maps.Keys(brokers))
	c.log.Info().Ints32("brokers", ids).Msg("handling log directory failure for brokers")
	c.onBrokerLogDirFailure(ids)
	return c.deleteLogDirNotifications(kids)
}

// onBrokerLogDirFailure is KC onBrokerLogDirFailure: LeaderAndIsr for
// every replica of each of the brokers (alive ones; a dead broker's
// replicas are offline anyway), whose answers say which are offline.
func (c *controller) onBrokerLogDirFailure(ids []int32) {
	for _, id := range ids {
		if _, ok := c.alive[id]; !ok {
			continue
		}
		var tps []cluster.TopicPartition
		for _, tp := range c.partitionsWithState() {
			if slices.Contains(c.replicas(tp), id) {
				tps = append(tps, tp)
			}
		}
		c.sendLeaderAndIsr(tps, false, id)
	}
}

// deleteLogDirNotifications deletes the named children of
// /log_dir_event_notification, or all of them when names is nil, each in
// a multi fenced by /controller_epoch's zkVersion (KZC
// deleteLogDirEventNotifications); one already gone is done.
func (c *controller) deleteLogDirNotifications(names []string) error {
	if names == nil {
		kids, _, err := c.store.Children(logDirEventNotificationPath)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("children %s: %w", logDirEventNotificationPath, err)
		}
		names = kids
		slices.Sort(names)
	}
	for _, k := range names {
		if c.stopped() {
			return fmt.Errorf("delete log dir event notifications: %w", errControllerStopped)
		}
		p := logDirEventNodePath(k)
		res, err := c.multi(&zk.DeleteRequest{Path: p, Version: -1})
		switch {
		case err == nil:
		case errors.Is(err, ErrNotController):
			return err
		case len(res) > 1 && errors.Is(res[1].Error, zk.ErrNoNode):
		default:
			// A lost connection has an unknown outcome; the retry lists
			// the notifications again.
			return fmt.Errorf("delete %s: %w", p, err)
		}
	}
	return nil
}

// onLogDirOutcomes is KC processLeaderAndIsrResponseReceived for the
// outcomes handed to the loop: the broker's offline set becomes
// previous - online + offline, and the replicas new in it go offline
// (onReplicasBecomeOffline).
func (c *controller) onLogDirOutcomes() error {
	c.logDirs.mu.Lock()
	outs := c.logDirs.inbox
	c.logDirs.inbox = nil
	c.logDirs.mu.Unlock()
	if c.logDirs.offline == nil {
		c.logDirs.offline = map[int32]offlineReplicas{}
	}
	var newly []cluster.TopicPartition
	for _, o := range outs {
		b, ok := c.alive[o.to.ID]
		if !ok || b.Epoch != o.to.Epoch {
			continue // an older incarnation's answer
		}
		prev := c.logDirs.offline[o.to.ID]
		if prev.epoch != b.Epoch {
			prev = offlineReplicas{epoch: b.Epoch}
		}
		cur := offlineReplicas{epoch: b.Epoch, tps: maps.Clone(prev.tps)}
		if cur.tps == nil {
			cur.tps = map[cluster.TopicPartition]bool{}
		}
		for _, tp := range o.online {
			delete(cur.tps, tp)
		}
		var added []cluster.TopicPartition
		for _, tp := range o.offline {
			if !cur.tps[tp] {
				cur.tps[tp] = true
				added = append(added, tp)
			}
		}
		c.logDirs.offline[o.to.ID] = cur
		c.setKnownOffline(o.to.ID, len(cur.tps) > 0)
		if len(added) > 0 {
			slices.SortFunc(added, compareTP)
			c.log.Info().Int32("broker", o.to.ID).Int("partitions", len(added)).
				Msg("mark replicas on broker as offline")
			newly = append(newly, added...)
		}
	}
	if len(newly) == 0 {
		return nil
	}
	for _, tp := range newly {
		if _, ok := c.states[tp]; ok {
			c.work.reconcile[tp] = true
		}
	}
	changed, err := c.reconcile()
	// Every live broker learns the offline replicas, also of partitions
	// whose state did not change (an offline follower outside the ISR).
	var rest []cluster.TopicPartition
	for _, tp := range newly {
		if !slices.Contains(changed, tp) {
			rest = append(rest, tp)
		}
	}
	if len(rest) > 0 {
		c.sendUpdateMetadata(c.aliveIDs(), rest)
	}
	return err
}

// setKnownOffline keeps the hint hasOfflineOn reads.
func (c *controller) setKnownOffline(id int32, known bool) {
	c.logDirs.mu.Lock()
	defer c.logDirs.mu.Unlock()
	if c.logDirs.known == nil {
		c.logDirs.known = map[int32]bool{}
	}
	if known {
		c.logDirs.known[id] = true
	} else {
		delete(c.logDirs.known, id)
	}
}
