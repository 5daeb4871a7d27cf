package zkcoord

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
)

// The controller (Kafka's KafkaController in ZooKeeper mode). While this
// broker holds /controller, one goroutine (controller.run) owns the
// controller context: live brokers with their epochs, every topic's
// assignment and every partition's last known state. It reads ZooKeeper
// itself and writes every partition state conditionally (zkVersion of the
// state plus a check of /controller_epoch's zkVersion in the same multi),
// decides with the pure functions of election.go, and sends requests
// through one queue per broker (sender.go).
//
// The session goroutine's watches feed it: a fired watch re-arms and then
// posts a coalesced event (brokers, topics, deletions, ISR changes), so
// posting never blocks; the loop re-reads what the event covers and diffs
// it with its context. ControlledShutdown runs on the loop through calls.
// A multi whose epoch check fails means another controller was elected:
// the loop stops and asks the session goroutine to resign.

const (
	// maxStateWriteAttempts bounds the re-read-and-retry loop of one
	// partition state write that keeps meeting BADVERSION (a leader
	// changing the ISR at the same time).
	maxStateWriteAttempts = 10
	// firstRebalanceDelay is when the first auto leader rebalance check
	// runs after failover (Kafka: 5 s), unless the interval is shorter.
	firstRebalanceDelay = 5 * time.Second
	// uncleanConfigKey is the topic override read at election time.
	uncleanConfigKey = "unclean.leader.election.enable"
)

// pendingEvents are the coalesced events waiting for the controller loop.
type pendingEvents struct {
	brokers    bool            // /brokers/ids children or a registration changed
	topicList  bool            // /brokers/topics children changed
	topics     map[string]bool // /brokers/topics/<t> data changed
	deletions  bool            // /admin/delete_topics children changed
	isrChanges bool            // /isr_change_notification children changed
	// configs lists topics whose /config/topics/<t> changed: enabling
	// unclean.leader.election.enable must elect for their offline
	// partitions at once (Kafka's TopicUncleanLeaderElectionEnable).
	configs map[string]bool
}

func (p *pendingEvents) merge(o pendingEvents) {
	p.brokers = p.brokers || o.brokers
	p.topicList = p.topicList || o.topicList
	p.deletions = p.deletions || o.deletions
	p.isrChanges = p.isrChanges || o.isrChanges
	for t := range o.topics {
		if p.topics == nil {
			p.topics = map[string]bool{}
		}
		p.topics[t] = true
	}
	for t := range o.configs {
		if p.configs == nil {
			p.configs = map[string]bool{}
		}
		p.configs[t] = true
	}
}

func (p *pendingEvents) empty() bool {
	return !p.brokers && !p.topicList && !p.deletions && !p.isrChanges && len(p.topics) == 0 && len(p.configs) == 0
}

type controller struct {
	s              *Session
	zk             *zkConn
	sender         BrokerSender
	log            zerolog.Logger
	id             int32
	epoch          int32
	epochZkVersion int32

	quit     chan struct{} // closed by stop
	stopOnce sync.Once
	exited   chan struct{} // closed when run returns
	wake     chan struct{} // buffer 1: pending has events
	calls    chan func()   // work to run on the loop

	evMu    sync.Mutex // guards pending; a leaf
	pending pendingEvents

	// Owned by the loop goroutine.
	alive        map[int32]cluster.Broker // registered brokers, with epochs
	shuttingDown map[int32]bool
	assignments  map[string]map[int32][]int32
	states       map[cluster.TopicPartition]cluster.LeaderAndIsr
	queues       map[int32]*brokerQueue
	fenced       bool
	// elected counts the partitions given a new live leader by the event
	// being handled (see afterEvent).
	elected int

	// offline is the offline partitions count, written by the loop and
	// read by Session.OfflinePartitionsCount.
	offline atomic.Int32
}

func newController(s *Session, epoch, epochZkVersion int32) *controller {
	sender := s.cfg.Sender
	if sender == nil {
		sender = discardSender{}
	}
	return &controller{
		s:              s,
		zk:             s.zk,
		sender:         sender,
		log:            s.log.With().Str("component", "controller").Int32("controller_epoch", epoch).Logger(),
		id:             s.cfg.BrokerID,
		epoch:          epoch,
		epochZkVersion: epochZkVersion,
		quit:           make(chan struct{}),
		exited:         make(chan struct{}),
		wake:           make(chan struct{}, 1),
		calls:          make(chan func()),
		alive:          map[int32]cluster.Broker{},
		shuttingDown:   map[int32]bool{},
		assignments:    map[string]map[int32][]int32{},
		states:         map[cluster.TopicPartition]cluster.LeaderAndIsr{},
		queues:         map[int32]*brokerQueue{},
	}
}

// discardSender is the BrokerSender of a Session configured without one:
// the controller still keeps the znodes right, but tells no broker.
type discardSender struct{}

func (discardSender) LeaderAndIsr(context.Context, cluster.Broker, cluster.LeaderAndIsrRequest) error {
	return nil
}

func (discardSender) UpdateMetadata(context.Context, cluster.Broker, cluster.UpdateMetadataRequest) error {
	return nil
}

func (discardSender) StopReplica(context.Context, cluster.Broker, cluster.StopReplicaRequest) error {
	return nil
}

// stop ends the loop without waiting for it: the loop may be inside a
// ZooKeeper call, and any write it still attempts is fenced.
func (c *controller) stop() { c.stopOnce.Do(func() { close(c.quit) }) }

// post records events for the loop and wakes it. It never blocks.
func (c *controller) post(ev pendingEvents) {
	c.evMu.Lock()
	c.pending.merge(ev)
	c.evMu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *controller) stopped() bool {
	select {
	case <-c.quit:
		return true
	case <-c.s.done:
		return true
	default:
		return c.fenced
	}
}

// run is the controller loop.
func (c *controller) run() {
	defer close(c.exited)
	defer func() {
		for _, q := range c.queues {
			q.close()
		}
	}()
	for {
		start := time.Now()
		err := c.failover()
		c.afterEvent(start)
		if err == nil {
			break
		}
		if c.checkFenced(err) {
			return
		}
		c.log.Warn().Err(err).Msg("controller failover failed; retrying")
		select {
		case <-c.quit:
			return
		case <-c.s.done:
			return
		case <-time.After(retryInterval):
		}
	}
	var rebalance <-chan time.Time // nil: never fires
	var timer *time.Timer
	if c.s.cfg.AutoLeaderRebalance {
		timer = time.NewTimer(min(firstRebalanceDelay, c.s.cfg.LeaderImbalanceCheckInterval))
		defer timer.Stop()
		rebalance = timer.C
	}
	for !c.stopped() {
		select {
		case <-c.quit:
			return
		case <-c.s.done:
			return
		case <-c.wake:
			start := time.Now()
			c.processPending()
			c.afterEvent(start)
		case call := <-c.calls:
			start := time.Now()
			call()
			c.afterEvent(start)
		case <-rebalance:
			start := time.Now()
			if err := c.checkRebalance(); err != nil && !c.checkFenced(err) {
				c.log.Warn().Err(err).Msg("auto leader rebalance failed")
			}
			c.afterEvent(start)
			timer.Reset(c.s.cfg.LeaderImbalanceCheckInterval)
		}
	}
}

// processPending handles the coalesced events in Kafka's order of
// concern: brokers, topics, deletions, ISR changes. A failed step is put
// back and retried after retryInterval.
func (c *controller) processPending() {
	c.evMu.Lock()
	ev := c.pending
	c.pending = pendingEvents{}
	c.evMu.Unlock()
	var retry pendingEvents
	step := func(ok bool, fn func() error, put pendingEvents) {
		if !ok || c.stopped() {
			return
		}
		if err := fn(); err != nil {
			if c.checkFenced(err) {
				return
			}
			c.log.Warn().Err(err).Msg("controller event failed; will retry")
			retry.merge(put)
		}
	}
	step(ev.brokers, c.onBrokerChange, pendingEvents{brokers: true})
	step(ev.topicList || len(ev.topics) > 0, func() error { return c.onTopicChange(ev.topicList, ev.topics) },
		pendingEvents{topicList: ev.topicList, topics: ev.topics})
	step(ev.deletions, c.onDeleteTopics, pendingEvents{deletions: true})
	step(ev.isrChanges, c.onIsrChange, pendingEvents{isrChanges: true})
	step(len(ev.configs) > 0, func() error { return c.onTopicConfigChange(ev.configs) }, pendingEvents{configs: ev.configs})
	if !retry.empty() && !c.stopped() {
		time.AfterFunc(retryInterval, func() { c.post(retry) })
	}
}

// checkFenced reports whether err means this controller was deposed and,
// if so, stops the loop and asks the session goroutine to resign.
func (c *controller) checkFenced(err error) bool {
	if !errors.Is(err, ErrNotController) {
		return false
	}
	if !c.fenced {
		c.fenced = true
		c.log.Warn().Err(err).Msg("controller fenced: another controller has a newer epoch; resigning")
		c.s.goFunc(func() {
			_ = c.s.do(context.Background(), func() error {
				c.s.controllerFenced(c)
				return nil
			})
		})
	}
	return true
}

// multi runs ops after a check of /controller_epoch's zkVersion, so a
// deposed controller cannot write (KZC controllerZkVersionCheck). A failed
// check returns an error wrapping ErrNotController; res is indexed with
// the check at 0.
func (c *controller) multi(ops ...any) ([]zk.MultiResponse, error) {
	all := append([]any{&zk.CheckVersionRequest{Path: controllerEpochPath, Version: c.epochZkVersion}}, ops...)
	res, err := c.zk.Multi(all...)
	if err != nil && len(res) > 0 && errors.Is(res[0].Error, zk.ErrBadVersion) {
		return res, fmt.Errorf("check %s zk_version %d: %w", controllerEpochPath, c.epochZkVersion, ErrNotController)
	}
	return res, err
}

// ---- reading ZooKeeper ----

func (c *controller) readBrokers() (map[int32]cluster.Broker, error) {
	kids, _, err := c.zk.Children(brokerIDsPath)
	if err != nil {
		return nil, fmt.Errorf("children %s: %w", brokerIDsPath, err)
	}
	out := make(map[int32]cluster.Broker, len(kids))
	for _, k := range kids {
		id, err := strconv.ParseInt(k, 10, 32)
		if err != nil {
			continue
		}
		data, stat, err := c.zk.Get(brokerPath(int32(id)))
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
	data, _, err := c.zk.Get(topicPath(t))
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

// readState reads one state znode; ok is false if it does not exist.
func (c *controller) readState(tp cluster.TopicPartition) (cluster.LeaderAndIsr, bool, error) {
	p := partitionStatePath(tp.Topic, tp.Partition)
	data, stat, err := c.zk.Get(p)
	if errors.Is(err, zk.ErrNoNode) {
		return cluster.LeaderAndIsr{}, false, nil
	}
	if err != nil {
		return cluster.LeaderAndIsr{}, false, fmt.Errorf("get %s: %w", p, err)
	}
	st, err := decodePartitionState(data, stat.Version)
	if err != nil {
		return cluster.LeaderAndIsr{}, false, fmt.Errorf("%s: %w", p, err)
	}
	return st, true, nil
}

// uncleanAllowed reads unclean.leader.election.enable for topic t from
// /config/topics/<t> at election time, falling back to the broker default.
func (c *controller) uncleanAllowed(t string) bool {
	def := c.s.cfg.UncleanLeaderElection
	data, _, err := c.zk.Get(configTopicPath(t))
	if err != nil {
		return def
	}
	cfg, err := decodeTopicConfig(t, data)
	if err != nil {
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

// ---- context helpers ----

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
		if q.to.Epoch == b.Epoch {
			c.alive[b.ID] = b // endpoints may have changed; the epoch did not
			return
		}
		q.close()
	}
	c.alive[b.ID] = b
	c.queues[b.ID] = c.newBrokerQueue(b)
}

func (c *controller) removeBroker(id int32) {
	delete(c.alive, id)
	delete(c.shuttingDown, id)
	if q, ok := c.queues[id]; ok {
		q.close()
		delete(c.queues, id)
	}
}

// ---- requests ----

func (c *controller) partitionInfo(tp cluster.TopicPartition) cluster.TopicPartitionInfo {
	replicas := slices.Clone(c.replicas(tp))
	st := c.states[tp]
	st.Isr = slices.Clone(st.Isr)
	pi := cluster.TopicPartitionInfo{Topic: tp.Topic, PartitionInfo: cluster.PartitionInfo{
		Partition: tp.Partition, Replicas: replicas, State: st}}
	for _, r := range replicas {
		if _, ok := c.alive[r]; !ok {
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
	if len(tps) == 0 {
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
	by := map[int32][]cluster.PartitionAssignment{}
	for _, tp := range tps {
		st, ok := c.states[tp]
		replicas := c.replicas(tp)
		if !ok || replicas == nil {
			continue
		}
		pa := cluster.PartitionAssignment{TopicPartition: tp, Replicas: slices.Clone(replicas), IsNew: isNew}
		pa.LeaderAndIsr = st
		pa.LeaderAndIsr.Isr = slices.Clone(st.Isr)
		for _, r := range replicas {
			if _, alive := c.alive[r]; alive && (only < 0 || r == only) {
				by[r] = append(by[r], pa)
			}
		}
	}
	for id, parts := range by {
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
			return c.sender.LeaderAndIsr(ctx, to, req)
		}})
	}
}

func (c *controller) sendStopReplica(to int32, tps []cluster.TopicPartition, del bool) {
	b, ok := c.alive[to]
	q := c.queues[to]
	if !ok || q == nil || len(tps) == 0 {
		return
	}
	epochs := make(map[cluster.TopicPartition]int32, len(tps))
	for _, tp := range tps {
		if del {
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

// ---- state writes ----

// updateState re-reads tp's state znode (never trusting the context),
// asks decide for the new state and writes it conditionally on the state's
// zkVersion and /controller_epoch's zkVersion. BADVERSION on the state
// means a leader changed the ISR meanwhile: re-read and decide again. A
// state written by a newer controller, or a failed epoch check, returns an
// error wrapping ErrNotController. It returns the state now stored and
// whether it changed it; a missing state znode returns ok false.
func (c *controller) updateState(tp cluster.TopicPartition,
	decide func(st cluster.LeaderAndIsr) (cluster.LeaderAndIsr, bool)) (st cluster.LeaderAndIsr, changed, ok bool, err error) {
	p := partitionStatePath(tp.Topic, tp.Partition)
	for attempt := 0; attempt < maxStateWriteAttempts; attempt++ {
		cur, exists, err := c.readState(tp)
		if err != nil || !exists {
			return cur, false, false, err
		}
		if cur.ControllerEpoch > c.epoch {
			return cur, false, true, fmt.Errorf("%s written by controller epoch %d, ours is %d: %w",
				p, cur.ControllerEpoch, c.epoch, ErrNotController)
		}
		next, change := decide(cur)
		if !change {
			c.states[tp] = cur
			return cur, false, true, nil
		}
		next.ControllerEpoch = c.epoch
		res, err := c.multi(&zk.SetDataRequest{Path: p, Data: encodePartitionState(next), Version: cur.ZkVersion})
		switch {
		case err == nil:
			next.ZkVersion = res[1].Stat.Version
			c.states[tp] = next
			if next.Leader >= 0 && next.Leader != cur.Leader {
				c.elected++
			}
			c.log.Info().Str("topic", tp.Topic).Int32("partition", tp.Partition).Int32("leader", next.Leader).
				Int32("leader_epoch", next.LeaderEpoch).Ints32("isr", next.Isr).Int32("zk_version", next.ZkVersion).
				Msg("partition state changed")
			return next, true, true, nil
		case errors.Is(err, ErrNotController):
			return cur, false, true, err
		case errors.Is(err, zk.ErrBadVersion):
			continue
		default:
			return cur, false, true, fmt.Errorf("set %s at zk_version %d: %w", p, cur.ZkVersion, err)
		}
	}
	return cluster.LeaderAndIsr{}, false, true, fmt.Errorf("set %s: zk_version kept moving after %d attempts", p, maxStateWriteAttempts)
}

// ---- failover ----

// failover is KC onControllerFailover: read everything, drop stale ISR
// notifications, tell every live broker the whole metadata and then its
// own partitions, initialize partitions that have no state yet, elect
// leaders for partitions whose leader is gone, and finish pending topic
// deletions.
func (c *controller) failover() error {
	brokers, err := c.readBrokers()
	if err != nil {
		return err
	}
	for _, q := range c.queues {
		q.close()
	}
	clear(c.queues)
	clear(c.alive)
	clear(c.shuttingDown)
	for _, b := range brokers {
		c.setAlive(b)
	}
	topics, _, err := c.zk.Children(topicsPath)
	if err != nil {
		return fmt.Errorf("children %s: %w", topicsPath, err)
	}
	clear(c.assignments)
	clear(c.states)
	var fresh []cluster.TopicPartition
	for _, t := range topics {
		tps, err := c.loadTopic(t)
		if err != nil {
			return err
		}
		fresh = append(fresh, tps...)
	}
	if err := c.deleteIsrNotifications(nil); err != nil {
		return err
	}
	c.log.Info().Int("brokers", len(c.alive)).Int("topics", len(c.assignments)).Int("partitions", len(c.states)).
		Msg("controller failover: context loaded")
	all := c.partitionsWithState()
	c.sendUpdateMetadata(c.aliveIDs(), all)
	for _, id := range c.aliveIDs() {
		c.sendLeaderAndIsr(all, false, id)
	}
	if err := c.initPartitions(fresh); err != nil {
		return err
	}
	if _, err := c.reconcile(c.partitionsWithState()); err != nil {
		return err
	}
	return c.onDeleteTopics()
}

// deleteIsrNotifications deletes the named children of
// /isr_change_notification, or all of them when names is nil.
func (c *controller) deleteIsrNotifications(names []string) error {
	if names == nil {
		kids, _, err := c.zk.Children(isrChangeNotificationPath)
		if err != nil {
			return fmt.Errorf("children %s: %w", isrChangeNotificationPath, err)
		}
		names = kids
	}
	for _, k := range names {
		p := isrChangeNotificationNodePath(k)
		if err := c.zk.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return fmt.Errorf("delete %s: %w", p, err)
		}
	}
	return nil
}

// ---- new partitions ----

// initPartitions writes the first state of each new partition (PSM
// NewPartition -> OnlinePartition) with the epoch check, then sends
// LeaderAndIsr (IsNew) to its replicas and UpdateMetadata to every broker.
func (c *controller) initPartitions(tps []cluster.TopicPartition) error {
	slices.SortFunc(tps, compareTP)
	electable := c.electableIDs()
	var created []cluster.TopicPartition
	var first error
	for _, tp := range tps {
		replicas := c.replicas(tp)
		if replicas == nil {
			continue
		}
		st, ok := initialState(replicas, electable, c.epoch)
		if !ok {
			c.log.Error().Str("topic", tp.Topic).Int32("partition", tp.Partition).Ints32("replicas", replicas).
				Msg("no live replica for new partition: it stays without a leader")
			continue
		}
		for _, p := range []string{partitionsPath(tp.Topic), partitionPath(tp.Topic, tp.Partition)} {
			if err := c.zk.createPersistent(p); err != nil {
				return err
			}
		}
		sp := partitionStatePath(tp.Topic, tp.Partition)
		res, err := c.multi(&zk.CreateRequest{Path: sp, Data: encodePartitionState(st)})
		switch {
		case err == nil:
			st.ZkVersion = 0
			c.states[tp] = st
			created = append(created, tp)
			c.log.Info().Str("topic", tp.Topic).Int32("partition", tp.Partition).Int32("leader", st.Leader).
				Ints32("isr", st.Isr).Msg("partition created")
		case errors.Is(err, ErrNotController):
			return err
		case len(res) > 1 && errors.Is(res[1].Error, zk.ErrNodeExists):
			cur, ok, err := c.readState(tp)
			if err != nil {
				return err
			}
			if ok {
				c.states[tp] = cur
			}
		default:
			if first == nil {
				first = fmt.Errorf("create %s: %w", sp, err)
			}
		}
	}
	c.announce(created, true)
	return first
}

// ---- offline partitions ----

// reconcile applies offlineTransition to each partition in tps: elect a
// leader where the leader is gone, drop dead replicas from ISRs. The
// changed partitions get LeaderAndIsr (to their live replicas) and
// UpdateMetadata (to every live broker).
func (c *controller) reconcile(tps []cluster.TopicPartition) ([]cluster.TopicPartition, error) {
	alive, electable := c.aliveIDs(), c.electableIDs()
	unclean := map[string]bool{}
	var changed []cluster.TopicPartition
	var first error
	for _, tp := range tps {
		replicas := c.replicas(tp)
		if replicas == nil {
			continue
		}
		lastUnclean := false
		_, ch, _, err := c.updateState(tp, func(st cluster.LeaderAndIsr) (cluster.LeaderAndIsr, bool) {
			leaderGone := st.Leader < 0 || !slices.Contains(alive, st.Leader)
			u, known := unclean[tp.Topic]
			if leaderGone && !known {
				u = c.uncleanAllowed(tp.Topic)
				unclean[tp.Topic] = u
			}
			next, ch, wasUnclean := offlineTransition(replicas, st, alive, electable, u)
			lastUnclean = wasUnclean
			if wasUnclean {
				c.log.Warn().Str("topic", tp.Topic).Int32("partition", tp.Partition).Int32("leader", next.Leader).
					Ints32("old_isr", st.Isr).Msg("unclean leader election: records may be lost")
			}
			return next, ch
		})
		if err != nil {
			if errors.Is(err, ErrNotController) {
				return changed, err
			}
			if first == nil {
				first = err
			}
			continue
		}
		if ch {
			changed = append(changed, tp)
			if lastUnclean {
				c.s.metrics().UncleanLeaderElection(tp)
			}
		}
	}
	c.announce(changed, false)
	return changed, first
}

// onTopicConfigChange re-runs elections for the offline partitions of
// topics whose config now allows unclean leader election, so that setting
// the override revives them without waiting for another event.
func (c *controller) onTopicConfigChange(topics map[string]bool) error {
	var offline []cluster.TopicPartition
	alive := c.aliveIDs()
	for t := range topics {
		if !c.uncleanAllowed(t) {
			continue
		}
		for p := range c.assignments[t] {
			tp := cluster.TopicPartition{Topic: t, Partition: p}
			if st, ok := c.states[tp]; ok && (st.Leader < 0 || !slices.Contains(alive, st.Leader)) {
				offline = append(offline, tp)
			}
		}
	}
	if len(offline) == 0 {
		return nil
	}
	c.log.Info().Int("partitions", len(offline)).Msg("unclean leader election enabled by topic config; electing for offline partitions")
	_, err := c.reconcile(offline)
	return err
}

// ---- brokers ----

// onBrokerChange diffs /brokers/ids with the context (KC BrokerChange): a
// broker whose registration czxid changed bounced and counts as failed and
// started again (KIP-380).
func (c *controller) onBrokerChange() error {
	now, err := c.readBrokers()
	if err != nil {
		return err
	}
	var dead, born []int32
	endpointsChanged := false
	for _, id := range c.aliveIDs() {
		nb, ok := now[id]
		switch {
		case !ok || nb.Epoch != c.alive[id].Epoch:
			dead = append(dead, id)
		case !slices.Equal(nb.Endpoints, c.alive[id].Endpoints):
			endpointsChanged = true
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
	if endpointsChanged && len(dead) == 0 {
		c.sendUpdateMetadata(c.aliveIDs(), nil)
	}
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
	var cands []cluster.TopicPartition
	for _, tp := range c.partitionsWithState() {
		st := c.states[tp]
		if st.Leader < 0 || hasAny(c.replicas(tp), dead) || hasAny(st.Isr, dead) {
			cands = append(cands, tp)
		}
	}
	changed, err := c.reconcile(cands)
	if len(changed) == 0 && err == nil {
		// Everyone still learns the new live broker list.
		c.sendUpdateMetadata(c.aliveIDs(), nil)
	}
	return err
}

// onBrokerStartup is KC onBrokerStartup: everyone learns the new brokers
// (which get the whole metadata), the new brokers get LeaderAndIsr for all
// their replicas, partitions without a state that they can host are
// created, and offline partitions they can now lead are elected.
func (c *controller) onBrokerStartup(born []cluster.Broker) error {
	ids := make([]int32, 0, len(born))
	for _, b := range born {
		c.setAlive(b)
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
	var theirs, fresh, offline []cluster.TopicPartition
	for t, a := range c.assignments {
		for p, replicas := range a {
			tp := cluster.TopicPartition{Topic: t, Partition: p}
			if !hasAny(replicas, ids) {
				continue
			}
			if _, ok := c.states[tp]; ok {
				theirs = append(theirs, tp)
			} else {
				fresh = append(fresh, tp)
			}
		}
	}
	slices.SortFunc(theirs, compareTP)
	// Fresh states, so the zkVersion a new leader gets is current.
	for _, tp := range theirs {
		st, ok, err := c.readState(tp)
		if err != nil {
			return err
		}
		if ok {
			c.states[tp] = st
		}
	}
	c.sendUpdateMetadata(ids, c.partitionsWithState())
	for _, id := range ids {
		c.sendLeaderAndIsr(theirs, false, id)
	}
	if err := c.initPartitions(fresh); err != nil {
		return err
	}
	for _, tp := range c.partitionsWithState() {
		if _, ok := c.alive[c.states[tp].Leader]; !ok {
			offline = append(offline, tp)
		}
	}
	_, err := c.reconcile(offline)
	return err
}

// ---- topics ----

// onTopicChange re-reads /brokers/topics (if list) and the assignment of
// every new or touched topic, and creates the state of new partitions
// (KC TopicChange, PartitionModifications).
func (c *controller) onTopicChange(list bool, touched map[string]bool) error {
	names := slices.Collect(maps.Keys(touched))
	if list {
		kids, _, err := c.zk.Children(topicsPath)
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
	var fresh []cluster.TopicPartition
	for _, t := range names {
		tps, err := c.loadTopic(t)
		if err != nil {
			return err
		}
		fresh = append(fresh, tps...)
	}
	return c.initPartitions(fresh)
}

// loadTopic reads topic t into the context, for failover and for
// TopicChange and PartitionModifications alike: its assignment from
// /brokers/topics/<t>, then the state znode of each partition the context
// has no state for. It returns those of them without a state znode yet,
// for initPartitions. A topic whose assignment is gone or unreadable is
// dropped from the context.
func (c *controller) loadTopic(t string) ([]cluster.TopicPartition, error) {
	a, ok, err := c.readAssignment(t)
	if err != nil {
		return nil, err
	}
	if !ok {
		c.dropTopic(t)
		return nil, nil
	}
	c.assignments[t] = a
	var fresh []cluster.TopicPartition
	for p := range a {
		tp := cluster.TopicPartition{Topic: t, Partition: p}
		if _, known := c.states[tp]; known {
			continue
		}
		st, ok, err := c.readState(tp)
		if err != nil {
			return nil, err
		}
		if ok {
			c.states[tp] = st
		} else {
			fresh = append(fresh, tp)
		}
	}
	return fresh, nil
}

func (c *controller) dropTopic(t string) {
	delete(c.assignments, t)
	for tp := range c.states {
		if tp.Topic == t {
			delete(c.states, tp)
		}
	}
}

// onDeleteTopics completes every requested deletion (KC TopicDeletion):
// StopReplica(delete) to the live replicas, then the topic's znodes and
// the request in one fenced multi, then UpdateMetadata with leader -2 so
// every broker drops the partitions from its cache.
func (c *controller) onDeleteTopics() error {
	kids, _, err := c.zk.Children(deleteTopicsRootPath)
	if err != nil {
		return fmt.Errorf("children %s: %w", deleteTopicsRootPath, err)
	}
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
			for id, parts := range by {
				c.sendStopReplica(id, parts, true)
			}
		}
		if err := c.completeTopicDeletion(t); err != nil {
			if errors.Is(err, ErrNotController) {
				return err
			}
			if first == nil {
				first = err
			}
			continue
		}
		infos := make([]cluster.TopicPartitionInfo, 0, len(tps))
		for _, tp := range tps {
			pi := c.partitionInfo(tp)
			pi.State.Leader = LeaderDuringDelete
			infos = append(infos, pi)
		}
		if len(infos) > 0 {
			c.sendUpdateMetadataInfos(c.aliveIDs(), infos)
		}
		c.dropTopic(t)
	}
	return first
}

// completeTopicDeletion deletes every znode of topic t and then its
// /admin/delete_topics/<t> request, in one multi checked against our
// /controller_epoch zkVersion (KC TopicDeletionManager completeDeleteTopic).
func (c *controller) completeTopicDeletion(t string) error {
	var ops []any
	parts, _, err := c.zk.Children(partitionsPath(t))
	switch {
	case err == nil:
		for _, name := range parts {
			part, perr := strconv.ParseInt(name, 10, 32)
			if perr != nil {
				return fmt.Errorf("delete topic %s: unexpected znode %q under %s", t, name, partitionsPath(t))
			}
			kids, _, err := c.zk.Children(partitionPath(t, int32(part)))
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
		exists, _, err := c.zk.Exists(p)
		if err != nil {
			return fmt.Errorf("exists %s: %w", p, err)
		}
		if exists {
			ops = append(ops, &zk.DeleteRequest{Path: p, Version: -1})
		}
	}
	ops = append(ops, &zk.DeleteRequest{Path: deleteTopicsPath(t), Version: -1})
	if _, err := c.multi(ops...); err != nil {
		return fmt.Errorf("delete topic %s: multi of %d ops: %w", t, len(ops)+1, err)
	}
	c.log.Info().Str("topic", t).Msg("deleted topic")
	return nil
}

// ---- ISR change notifications ----

// onIsrChange is KC IsrChangeNotification: re-read the states of the
// partitions the notifications name, send UpdateMetadata for them to every
// live broker and delete the notifications.
func (c *controller) onIsrChange() error {
	kids, _, err := c.zk.Children(isrChangeNotificationPath)
	if err != nil {
		return fmt.Errorf("children %s: %w", isrChangeNotificationPath, err)
	}
	if len(kids) == 0 {
		return nil
	}
	set := map[cluster.TopicPartition]bool{}
	for _, k := range kids {
		p := isrChangeNotificationNodePath(k)
		data, _, err := c.zk.Get(p)
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
	for tp := range set {
		if c.replicas(tp) == nil {
			continue
		}
		st, ok, err := c.readState(tp)
		if err != nil {
			return err
		}
		if ok {
			c.states[tp] = st
			tps = append(tps, tp)
		}
	}
	slices.SortFunc(tps, compareTP)
	if len(tps) > 0 {
		c.sendUpdateMetadata(c.aliveIDs(), tps)
	}
	return c.deleteIsrNotifications(kids)
}

// ---- controlled shutdown ----

// controlledShutdown is KC ControlledShutdown, run on the loop: for every
// replicated partition on the broker, move leadership away if it leads
// (ControlledShutdown election), or take it out of the ISR and stop its
// replica if it follows. It returns the partitions it still leads.
func (c *controller) controlledShutdown(id int32, brokerEpoch int64) ([]cluster.TopicPartition, error) {
	b, ok := c.alive[id]
	if !ok {
		return nil, fmt.Errorf("controlled shutdown of broker %d: %w", id, cluster.ErrBrokerNotAvailable)
	}
	if b.Epoch != brokerEpoch {
		return nil, fmt.Errorf("controlled shutdown of broker %d: epoch %d, current %d: %w",
			id, brokerEpoch, b.Epoch, cluster.ErrStaleBrokerEpoch)
	}
	c.shuttingDown[id] = true
	c.log.Info().Int32("broker", id).Msg("controlled shutdown")
	electable := c.electableIDs()
	var shutting []int32
	for sid := range c.shuttingDown {
		shutting = append(shutting, sid)
	}
	var changed, stopped, remaining []cluster.TopicPartition
	var first error
	for _, tp := range c.partitionsWithState() {
		replicas := c.replicas(tp)
		if len(replicas) < 2 || !slices.Contains(replicas, id) {
			continue // RF=1 partitions are never moved (Kafka)
		}
		wasLeader := false
		st, ch, ok, err := c.updateState(tp, func(st cluster.LeaderAndIsr) (cluster.LeaderAndIsr, bool) {
			wasLeader = st.Leader == id
			if wasLeader {
				l, isr, ok := ElectControlledShutdownLeader(replicas, st.Isr, electable, shutting)
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
		if err != nil {
			if errors.Is(err, ErrNotController) {
				return nil, err
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
		if ch {
			changed = append(changed, tp)
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
		st := c.states[tp]
		parts = append(parts, PartitionLeadership{TopicPartition: tp, Replicas: c.replicas(tp), Leader: st.Leader, Isr: st.Isr})
	}
	tps := PreferredElections(parts, c.electableIDs(), c.s.cfg.LeaderImbalancePerBrokerPercentage)
	if len(tps) == 0 {
		return nil
	}
	electable := c.electableIDs()
	var changed []cluster.TopicPartition
	var first error
	for _, tp := range tps {
		replicas := c.replicas(tp)
		_, ch, _, err := c.updateState(tp, func(st cluster.LeaderAndIsr) (cluster.LeaderAndIsr, bool) {
			l, ok := ElectPreferredLeader(replicas, st.Isr, electable)
			if !ok || st.Leader == l {
				return st, false
			}
			st.Leader = l
			st.LeaderEpoch++
			return st, true
		})
		if err != nil {
			if errors.Is(err, ErrNotController) {
				return err
			}
			if first == nil {
				first = err
			}
			continue
		}
		if ch {
			changed = append(changed, tp)
		}
	}
	if len(changed) > 0 {
		c.log.Info().Int("partitions", len(changed)).Msg("preferred replica leader election")
		c.announce(changed, false)
	}
	return first
}
