package zkcoord

import (
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/go-zookeeper/zk"

	"github.com/kafkazk/broker/cluster"
)

// ctrlStore is the controller's access to ZooKeeper: reads that return the
// znode's version, and writes, of which the controller's own are always a
// fenced multi. *zkConn implements it on a live session; the scripted tests
// implement it in memory (memStore) with faults injected per call. Watches
// are not part of it: the session goroutine owns them and posts what fired
// to the controller loop as pendingEvents.
//
// Errors are go-zookeeper's: zk.ErrNoNode, zk.ErrNodeExists,
// zk.ErrBadVersion, zk.ErrNotEmpty for the request's own outcome;
// zk.ErrConnectionClosed (and kin, see zkConnectionLost) when the outcome
// of the request is unknown; zk.ErrSessionExpired when the session is gone.
type ctrlStore interface {
	Get(p string) ([]byte, *zk.Stat, error)
	Exists(p string) (bool, *zk.Stat, error)
	Children(p string) ([]string, *zk.Stat, error)
	Create(p string, data []byte, flags int32) (string, error)
	Delete(p string, version int32) error
	// Multi applies ops atomically. On failure err is the first failing
	// op's error and res (when the server answered) holds each op's.
	Multi(ops ...any) ([]zk.MultiResponse, error)
	// Batch runs independent Gets and Multis, pipelined (ctrlbatch.go),
	// and returns their results indexed as calls. Each call has its own
	// outcome, with the errors above, or errNotSent for a call never
	// handed out: after stop (nil: never) reported true, or after a call
	// met a lost connection, a lost session or a failed /controller_epoch
	// check (batchAborts).
	Batch(calls []storeCall, stop func() bool) []storeResult
}

var _ ctrlStore = (*zkConn)(nil)

// zkConnectionLost reports whether err means the request may or may not
// have been applied: the connection broke (or was never there) while it
// was in flight. Such errors are retryable: the client reconnects within
// the session, and the controller retries until it does (Kafka's
// retryRequestsUntilConnected). A write that failed so has an unknown
// outcome and must be read back. (zk.ErrSessionMoved means the server
// ignored the request, as the session moved to another server; reading
// back is merely unnecessary then, and the retry is the same.)
func zkConnectionLost(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) ||
		errors.Is(err, zk.ErrSessionMoved) || errors.Is(err, zk.ErrUnknown)
}

// zkSessionLost reports whether err means the ZooKeeper session is gone:
// its ephemerals (our /controller) are deleted, so the controller must
// resign; the session goroutine re-registers and re-elects.
func zkSessionLost(err error) bool {
	return errors.Is(err, zk.ErrSessionExpired) || errors.Is(err, zk.ErrClosing)
}

// sameLeaderAndIsr reports whether a state read back is the one written:
// leader, leader epoch, ISR and controller epoch match (Kafka's
// checkLeaderAndIsrZkData compares the same fields, ignoring zkVersion).
func sameLeaderAndIsr(a, b cluster.LeaderAndIsr) bool {
	return a.Leader == b.Leader && a.LeaderEpoch == b.LeaderEpoch &&
		a.ControllerEpoch == b.ControllerEpoch && slices.Equal(a.Isr, b.Isr)
}

// ---- the controller's reads ----

// multi runs ops after a check of /controller_epoch's zkVersion, so a
// deposed controller cannot write (KZC controllerZkVersionCheck). A failed
// check returns an error wrapping ErrNotController; res is indexed with
// the check at 0. A failed check or a lost session fences the controller
// before multi returns (checkFenced).
func (c *controller) multi(ops ...any) ([]zk.MultiResponse, error) {
	all := append([]any{&zk.CheckVersionRequest{Path: controllerEpochPath, Version: c.epochZkVersion}}, ops...)
	res, err := c.store.Multi(all...)
	if err != nil && len(res) > 0 && errors.Is(res[0].Error, zk.ErrBadVersion) {
		err = fmt.Errorf("check %s zk_version %d: %w", controllerEpochPath, c.epochZkVersion, ErrNotController)
	}
	// Fenced at once, so that nothing this call's caller still has to
	// announce is sent (announce is a no-op from here).
	c.checkFenced(err)
	return res, err
}

func (c *controller) readBrokers() (map[int32]cluster.Broker, error) {
	kids, _, err := c.store.Children(brokerIDsPath)
	if err != nil {
		return nil, fmt.Errorf("children %s: %w", brokerIDsPath, err)
	}
	out := make(map[int32]cluster.Broker, len(kids))
	for _, k := range kids {
		id, err := strconv.ParseInt(k, 10, 32)
		if err != nil {
			continue
		}
		data, stat, err := c.store.Get(brokerPath(int32(id)))
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("get %s: %w", brokerPath(int32(id)), err)
		}
		b, err := decodeBrokerRegistration(int32(id), data)
		if err != nil {
			c.log.Error().Err(err).Str("zk_path", brokerPath(int32(id))).Msg("ignoring broker registration")
			continue
		}
		b.Epoch = stat.Czxid
		out[b.ID] = b
	}
	return out, nil
}

// readAssignment returns the topic's assignment, or ok false if it is gone.
func (c *controller) readAssignment(t string) (map[int32][]int32, bool, error) {
	data, _, err := c.store.Get(topicPath(t))
	if errors.Is(err, zk.ErrNoNode) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("get %s: %w", topicPath(t), err)
	}
	a, err := decodeTopicAssignment(t, data)
	if err != nil {
		c.log.Error().Err(err).Str("topic", t).Msg("ignoring topic assignment")
		return nil, false, nil
	}
	return a, true, nil
}

// readAssignmentFull is readAssignment with the reassignment state.
func (c *controller) readAssignmentFull(t string) (fullAssignment, bool, error) {
	data, _, err := c.store.Get(topicPath(t))
	if errors.Is(err, zk.ErrNoNode) {
		return fullAssignment{}, false, nil
	}
	if err != nil {
		return fullAssignment{}, false, fmt.Errorf("get %s: %w", topicPath(t), err)
	}
	a, err := decodeTopicAssignmentFull(t, data)
	if err != nil {
		c.log.Error().Err(err).Str("topic", t).Msg("ignoring topic assignment")
		return fullAssignment{}, false, nil
	}
	return a, true, nil
}

// readState reads one state znode; ok is false if it does not exist.
func (c *controller) readState(tp cluster.TopicPartition) (cluster.LeaderAndIsr, bool, error) {
	p := partitionStatePath(tp.Topic, tp.Partition)
	data, stat, err := c.store.Get(p)
	if errors.Is(err, zk.ErrNoNode) {
		return cluster.LeaderAndIsr{}, false, nil
	}
	if err != nil {
		return cluster.LeaderAndIsr{}, false, fmt.Errorf("get %s: %w", p, err)
	}
	st, err := decodePartitionState(data, stat.Version)
	if err != nil {
		// Wraps ErrBadZNode: callers leave the partition out (skipState).
		return cluster.LeaderAndIsr{}, false, fmt.Errorf("%s: %w", p, err)
	}
	return st, true, nil
}

// skipState reports whether err, from readState, is an unreadable state
// znode, and if so logs it at Error: the partition is left out of the
// context (no leader, no requests) instead of stopping the controller; a
// later event of its topic reads it again.
func (c *controller) skipState(tp cluster.TopicPartition, err error) bool {
	if !errors.Is(err, ErrBadZNode) {
		return false
	}
	c.log.Error().Err(err).Str("topic", tp.Topic).Int32("partition", tp.Partition).
		Msg("unreadable partition state: leaving the partition out")
	delete(c.states, tp)
	delete(c.unknown, tp)
	delete(c.work.init, tp)
	delete(c.work.reconcile, tp)
	return true
}

// uncleanDefault is the cluster-wide unclean.leader.election.enable.
func (c *controller) uncleanDefault() bool {
	if c.cfg.UncleanDefault != nil {
		return c.cfg.UncleanDefault()
	}
	return c.cfg.UncleanLeaderElection
}

// readUncleanAllowed reads unclean.leader.election.enable for topic t from
// /config/topics/<t>, falling back to the broker default when the node or
// the key is missing or unreadable. A failed read is an error: deciding
// on the default instead could elect uncleanly against the topic's
// override. It is read before the election decision, never inside it.
func (c *controller) readUncleanAllowed(t string) (bool, error) {
	def := c.uncleanDefault()
	data, _, err := c.store.Get(configTopicPath(t))
	if errors.Is(err, zk.ErrNoNode) {
		return def, nil
	}
	if err != nil {
		return def, fmt.Errorf("get %s: %w", configTopicPath(t), err)
	}
	return uncleanSetting(c, t, data, def), nil
}

// readUncleanAllowedMany is readUncleanAllowed for many topics in one
// batch: the setting of each topic read, and the error of each that could
// not be.
func (c *controller) readUncleanAllowedMany(topics []string) (map[string]bool, map[string]error) {
	def := c.uncleanDefault()
	paths := make([]string, len(topics))
	for i, t := range topics {
		paths[i] = configTopicPath(t)
	}
	got, failed := map[string]bool{}, map[string]error{}
	for i, r := range c.batchGet(paths) {
		t := topics[i]
		switch {
		case errors.Is(r.err, zk.ErrNoNode):
			got[t] = def
		case r.err != nil:
			failed[t] = fmt.Errorf("get %s: %w", paths[i], r.err)
		default:
			got[t] = uncleanSetting(c, t, r.data, def)
		}
	}
	return got, failed
}

// uncleanSetting decodes unclean.leader.election.enable from the config
// data of topic t, def when absent or unreadable.
func uncleanSetting(c *controller, t string, data []byte, def bool) bool {
	cfg, err := decodeTopicConfig(t, data)
	if err != nil {
		c.log.Error().Err(err).Str("topic", t).Msg("ignoring unreadable topic config")
		return def
	}
	switch cfg[uncleanConfigKey] {
	case "true":
		return true
	case "false":
		return false
	}
	return def
}
