package zkcoord

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
)

// The controller (Kafka's KafkaController in ZooKeeper mode). While this
// broker holds /controller, one goroutine (controller.run) owns the
// controller context: live brokers with their epochs, every topic's
// assignment and every partition's last known state. This file is the
// loop: its inputs (posted events, calls, timers) and the work it still
// has to do. ctrlstore.go is its ZooKeeper access, ctrlrequests.go the
// requests it sends, ctrlstate.go the partition state writes, and
// ctrlbrokers.go and ctrltopics.go the event handlers.
//
// The session goroutine's watches feed it: a fired watch re-arms and then
// posts a coalesced event (brokers, topics, deletions, ISR changes), so
// posting never blocks; the loop re-reads what the event covers and diffs
// it with its context. What an event leaves to do (elections, first
// states, LeaderAndIsr owed to a started broker, deletions to announce) is
// recorded as work and removed only when done, so a failed ZooKeeper call
// never loses it: a lost connection stops the step and the loop retries
// after a backoff until it succeeds. ControlledShutdown runs on the loop
// through calls. A multi whose epoch check fails, or an expired session,
// means this controller is finished: the loop stops and asks the session
// goroutine to resign.

const (
	// maxStateWriteAttempts bounds the re-read-and-retry loop of one
	// partition state write that keeps meeting BADVERSION (a leader
	// changing the ISR at the same time); the partition stays in the work
	// and is tried again at the next retry.
	maxStateWriteAttempts = 10
	// firstRebalanceDelay is when the first auto leader rebalance check
	// runs after failover (Kafka: 5 s), unless the interval is shorter.
	firstRebalanceDelay = 5 * time.Second
	// uncleanConfigKey is the topic override read before elections.
	uncleanConfigKey = "unclean.leader.election.enable"
	// ctrlRetryMin and ctrlRetryMax bound the backoff between retries of
	// unfinished work.
	ctrlRetryMin = 100 * time.Millisecond
	ctrlRetryMax = 5 * time.Second
)

// errControllerStopped stops a step of a controller that was stopped (or
// fenced) while the step ran: it writes and sends nothing more.
var errControllerStopped = errors.New("zkcoord: controller stopped")

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
	// reassign: /admin/reassign_partitions was created or changed.
	reassign bool
	// preferredElection: /admin/preferred_replica_election was created.
	preferredElection bool
	// uncleanDefault: the cluster-wide unclean.leader.election.enable was
	// turned on (a dynamic broker config): elect for every offline
	// partition at once (Kafka's UncleanLeaderElectionEnable).
	uncleanDefault bool
	// logDirEvents: /log_dir_event_notification children changed;
	// logDirOutcomes: LeaderAndIsr responses naming offline replicas
	// wait in c.logDirs (ctrllogdir.go).
	logDirEvents, logDirOutcomes bool
}

func (p *pendingEvents) merge(o pendingEvents) {
	p.brokers = p.brokers || o.brokers
	p.topicList = p.topicList || o.topicList
	p.deletions = p.deletions || o.deletions
	p.isrChanges = p.isrChanges || o.isrChanges
	p.reassign = p.reassign || o.reassign
	p.preferredElection = p.preferredElection || o.preferredElection
	p.uncleanDefault = p.uncleanDefault || o.uncleanDefault
	p.logDirEvents = p.logDirEvents || o.logDirEvents
	p.logDirOutcomes = p.logDirOutcomes || o.logDirOutcomes
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
	return !p.brokers && !p.topicList && !p.deletions && !p.isrChanges && len(p.topics) == 0 && len(p.configs) == 0 &&
		!p.reassign && !p.preferredElection && !p.uncleanDefault && !p.logDirEvents && !p.logDirOutcomes
}

// ctrlWork is what the controller still has to do. An item leaves only
// when it was done; the handlers add items and drain them at once, and
// what a failure leaves is drained again at the next retry, with the
// context as it is then.
type ctrlWork struct {
	// failover is set until the context was loaded (KC onControllerFailover).
	failover bool
	// events are handlers to run again; they re-read what they cover.
	events pendingEvents
	// sync lists started brokers (id -> broker epoch) still owed the full
	// UpdateMetadata and LeaderAndIsr for their replicas (KC onBrokerStartup).
	sync map[int32]int64
	// init lists new partitions whose first state is still to be written.
	init map[cluster.TopicPartition]bool
	// reconcile lists partitions to elect a leader for or drop dead
	// replicas from the ISR of (offlineTransition).
	reconcile map[cluster.TopicPartition]bool
	// metadataAll is set when the live brokers changed (a failure, an
	// endpoint change) until every live broker was sent UpdateMetadata
	// with the new list: a failed step must not lose it, as the retry
	// sees no change of brokers any more.
	metadataAll bool
	// reassign lists reassigning partitions (c.reassigning) with a step to
	// take; one waiting for its target to join the ISR is not here.
	reassign map[cluster.TopicPartition]bool
	// legacyDrop lists partitions reassigned through the API that are
	// still to leave /admin/reassign_partitions (the latest request wins).
	legacyDrop map[cluster.TopicPartition]bool
}

func (w *ctrlWork) pending() bool {
	return w.failover || !w.events.empty() || len(w.sync) > 0 || len(w.init) > 0 || len(w.reconcile) > 0 || w.metadataAll ||
		len(w.reassign) > 0 || len(w.legacyDrop) > 0
}

// hasWork reports whether the loop has work to retry: work items, or
// writes whose outcome is unknown (c.unknown), which must be read back
// even when no work item covers their partition any more (a preferred
// leader election of checkRebalance, say).
func (c *controller) hasWork() bool {
	return c.work.pending() || len(c.unknown) > 0
}

// controllerConfig is what a controller needs from its Session; tests
// build it directly (see newTestController).
type controllerConfig struct {
	BrokerID       int32
	Epoch          int32 // the controller epoch this controller won
	EpochZkVersion int32 // /controller_epoch's zkVersion after winning
	Store          ctrlStore
	Sender         BrokerSender // nil: send nothing
	// NewQueue starts the send queue of one broker incarnation.
	NewQueue func(cluster.Broker) requestQueue
	Log      zerolog.Logger
	Metrics  Metrics // nil discards

	UncleanLeaderElection bool
	// UncleanDefault, if set, is the cluster-wide
	// unclean.leader.election.enable as it is now (server.properties,
	// then a dynamic broker config); it replaces UncleanLeaderElection.
	UncleanDefault                     func() bool
	AutoLeaderRebalance                bool
	LeaderImbalanceCheckInterval       time.Duration
	LeaderImbalancePerBrokerPercentage int

	// Done is the Session's; closed, it stops the loop.
	Done <-chan struct{}
	// Resign is called once, on the loop, when this controller must stop
	// (fenced or its session lost; why says which). It must not block.
	Resign func(c *controller, why string)
	// Now is the clock (time.Now if nil); only durations are taken from it.
	Now func() time.Time
}

type controller struct {
	cfg            controllerConfig
	store          ctrlStore
	sender         BrokerSender
	log            zerolog.Logger
	metrics        Metrics
	id             int32
	epoch          int32
	epochZkVersion int32
	now            func() time.Time

	quit     chan struct{} // closed by stop
	stopOnce sync.Once
	// ctx is the parent of every broker queue's context; stop and a
	// fence cancel it, ending every send of this controller.
	ctx    context.Context
	cancel context.CancelFunc
	exited chan struct{} // closed when run returns
	wake   chan struct{} // buffer 1: pending has events
	calls  chan func()   // work to run on the loop

	evMu    sync.Mutex // guards pending; a leaf
	pending pendingEvents

	// Owned by the loop goroutine.
	alive        map[int32]cluster.Broker // registered brokers, with epochs
	shuttingDown map[int32]bool
	assignments  map[string]map[int32][]int32
	states       map[cluster.TopicPartition]cluster.LeaderAndIsr
	queues       map[int32]requestQueue
	work         ctrlWork
	// unknown holds state writes whose outcome is unknown (the connection
	// was lost with the write in flight). The next read of that state
	// compares with it: equal means the write landed and must be announced.
	unknown map[cluster.TopicPartition]cluster.LeaderAndIsr
	// deleting lists topics whose deletion was started, with the
	// UpdateMetadata (leader -2) that announces its end; an entry leaves
	// when that was sent.
	deleting map[string][]cluster.TopicPartitionInfo
	// reassigning holds the partitions being reassigned (ctrlreassign.go);
	// adding and removing are AR and RR of the context's assignment (as in
	// the topic znodes), for the partitions that have any.
	reassigning map[cluster.TopicPartition]*reassignment
	adding      map[cluster.TopicPartition][]int32
	removing    map[cluster.TopicPartition][]int32
	fenced      bool
	// elected counts the partitions given a new live leader by the event
	// being handled (see afterEvent).
	elected int

	// offline is the offline partitions count, written by the loop and
	// read by Session.OfflinePartitionsCount.
	offline atomic.Int32
	// logDirs holds the replicas on offline log dirs (ctrllogdir.go).
	logDirs ctrlLogDirs
}

// newController is the controller of Session s for the epoch it won.
func newController(s *Session, epoch, epochZkVersion int32) *controller {
	c := newControllerWith(controllerConfig{
		BrokerID:       s.cfg.BrokerID,
		Epoch:          epoch,
		EpochZkVersion: epochZkVersion,
		Store:          s.zk,
		Sender:         s.cfg.Sender,
		Log:            s.log,
		Metrics:        s.cfg.Metrics,
		UncleanDefault: func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.cfg.UncleanLeaderElection
		},
		AutoLeaderRebalance:                s.cfg.AutoLeaderRebalance,
		LeaderImbalanceCheckInterval:       s.cfg.LeaderImbalanceCheckInterval,
		LeaderImbalancePerBrokerPercentage: s.cfg.LeaderImbalancePerBrokerPercentage,
		Done:                               s.done,
		Resign: func(c *controller, why string) {
			s.goFunc(func() {
				_ = s.do(context.Background(), func() error {
					s.controllerFenced(c, why)
					return nil
				})
			})
		},
	})
	c.cfg.NewQueue = func(b cluster.Broker) requestQueue {
		return newBrokerQueue(c.ctx, b, s.goFunc, s.done, c.log)
	}
	return c
}

func newControllerWith(cfg controllerConfig) *controller {
	sender := cfg.Sender
	if sender == nil {
		sender = discardSender{}
	}
	m := cfg.Metrics
	if m == nil {
		m = noMetrics{}
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &controller{
		ctx:            ctx,
		cancel:         cancel,
		cfg:            cfg,
		store:          cfg.Store,
		sender:         sender,
		log:            cfg.Log.With().Str("component", "controller").Int32("controller_epoch", cfg.Epoch).Logger(),
		metrics:        m,
		id:             cfg.BrokerID,
		epoch:          cfg.Epoch,
		epochZkVersion: cfg.EpochZkVersion,
		now:            now,
		quit:           make(chan struct{}),
		exited:         make(chan struct{}),
		wake:           make(chan struct{}, 1),
		calls:          make(chan func()),
		alive:          map[int32]cluster.Broker{},
		shuttingDown:   map[int32]bool{},
		assignments:    map[string]map[int32][]int32{},
		states:         map[cluster.TopicPartition]cluster.LeaderAndIsr{},
		queues:         map[int32]requestQueue{},
		work: ctrlWork{
			failover:   true,
			sync:       map[int32]int64{},
			init:       map[cluster.TopicPartition]bool{},
			reconcile:  map[cluster.TopicPartition]bool{},
			reassign:   map[cluster.TopicPartition]bool{},
			legacyDrop: map[cluster.TopicPartition]bool{},
		},
		reassigning: map[cluster.TopicPartition]*reassignment{},
		adding:      map[cluster.TopicPartition][]int32{},
		removing:    map[cluster.TopicPartition][]int32{},
		unknown:     map[cluster.TopicPartition]cluster.LeaderAndIsr{},
		deleting:    map[string][]cluster.TopicPartitionInfo{},
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
// ZooKeeper call (go-zookeeper blocks a request made while disconnected
// until it reconnects or the session expires), and stop takes effect when
// that call returns; any write it still attempts is fenced. Every broker
// queue's context is cancelled, so no request of this controller is sent
// any more, and the loop sends nothing new (c.stopped).
func (c *controller) stop() {
	c.stopOnce.Do(func() {
		c.cancel()
		close(c.quit)
	})
}

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

// takePending returns and clears the posted events.
func (c *controller) takePending() pendingEvents {
	c.evMu.Lock()
	defer c.evMu.Unlock()
	ev := c.pending
	c.pending = pendingEvents{}
	return ev
}

func (c *controller) stopped() bool {
	select {
	case <-c.quit:
		return true
	case <-c.cfg.Done:
		return true
	default:
		return c.fenced
	}
}

// run is the controller loop: a thin driver of step with real timers.
// Unfinished work is retried with a backoff, and the loop stays
// responsive to stop while it waits.
func (c *controller) run() {
	defer close(c.exited)
	defer c.closeQueues()
	var rebalance <-chan time.Time // nil: never fires
	var timer *time.Timer
	if c.cfg.AutoLeaderRebalance {
		timer = time.NewTimer(min(firstRebalanceDelay, c.cfg.LeaderImbalanceCheckInterval))
		defer timer.Stop()
		rebalance = timer.C
	}
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	backoff, armed := ctrlRetryMin, false
	c.step(pendingEvents{})
	for !c.stopped() {
		switch {
		case !c.hasWork():
			backoff = ctrlRetryMin
		case !armed:
			retry.Reset(backoff)
			armed = true
			backoff = min(2*backoff, ctrlRetryMax)
		}
		select {
		case <-c.quit:
			return
		case <-c.cfg.Done:
			return
		case <-c.wake:
			c.step(c.takePending())
		case call := <-c.calls:
			start := c.now()
			call()
			c.afterEvent(start)
		case <-retry.C:
			armed = false
			c.step(pendingEvents{})
		case <-rebalance:
			start := c.now()
			if err := c.checkRebalance(); err != nil && !c.checkFenced(err) && !errors.Is(err, errControllerStopped) {
				c.log.Warn().Err(err).Msg("auto leader rebalance failed")
			}
			c.afterEvent(start)
			timer.Reset(c.cfg.LeaderImbalanceCheckInterval)
		}
	}
}

// step handles new events and then whatever work is left: the failover
// first, then the handlers of the events (new and failed ones) in Kafka's
// order of concern, then the work items. Whatever fails stays in c.work.
func (c *controller) step(ev pendingEvents) {
	start := c.now()
	defer c.afterEvent(start)
	c.work.events.merge(ev)
	if c.stopped() {
		return
	}
	if c.work.failover {
		if err := c.failover(); err != nil {
			if !c.checkFenced(err) {
				c.log.Warn().Err(err).Msg("controller failover failed; will retry")
			}
			return
		}
		c.work.failover = false
	}
	// Items left by an earlier failure go first: they were decided with
	// the brokers of their time (a bounced broker is still dead for them).
	if err := c.drain(); err != nil {
		c.stepFailed(err)
		return
	}
	ev = c.work.events
	c.work.events = pendingEvents{}
	step := func(ok bool, fn func() error, put pendingEvents) {
		if !ok {
			return
		}
		if c.stopped() {
			c.work.events.merge(put)
			return
		}
		if err := fn(); err != nil {
			c.work.events.merge(put)
			c.stepFailed(err)
		}
	}
	step(ev.brokers, c.onBrokerChange, pendingEvents{brokers: true})
	step(ev.topicList || len(ev.topics) > 0, func() error { return c.onTopicChange(ev.topicList, ev.topics) },
		pendingEvents{topicList: ev.topicList, topics: ev.topics})
	step(ev.deletions, c.onDeleteTopics, pendingEvents{deletions: true})
	step(ev.isrChanges, c.onIsrChange, pendingEvents{isrChanges: true})
	step(len(ev.configs) > 0, func() error { return c.onTopicConfigChange(ev.configs) }, pendingEvents{configs: ev.configs})
	step(ev.reassign, c.onLegacyReassignment, pendingEvents{reassign: true})
	step(ev.preferredElection, c.onPreferredElectionZnode, pendingEvents{preferredElection: true})
	step(ev.uncleanDefault, c.onUncleanDefaultEnabled, pendingEvents{uncleanDefault: true})
	step(ev.logDirEvents, c.onLogDirEvent, pendingEvents{logDirEvents: true})
	step(ev.logDirOutcomes, c.onLogDirOutcomes, pendingEvents{logDirOutcomes: true})
}

func (c *controller) stepFailed(err error) {
	if !c.checkFenced(err) && !errors.Is(err, errControllerStopped) {
		c.log.Warn().Err(err).Msg("controller event failed; will retry")
	}
}

// drain does the work items: LeaderAndIsr owed to started brokers, first
// states of new partitions, elections and ISR removals, then the read-back
// of writes whose outcome is still unknown. It returns
// the first error that stops the step (a lost connection or session, or a
// fence); other failures leave their item for the next retry and let the
// others proceed.
func (c *controller) drain() error {
	if err := c.syncBrokers(); err != nil {
		return err
	}
	if err := c.initPartitions(); err != nil {
		return err
	}
	if _, err := c.reconcile(); err != nil {
		return err
	}
	if err := c.dropFromLegacy(); err != nil {
		return err
	}
	if err := c.reassignPartitions(); err != nil {
		return err
	}
	if err := c.readBackUnknown(); err != nil {
		return err
	}
	c.flushMetadataAll()
	return nil
}

// flushMetadataAll sends the UpdateMetadata owed to every live broker
// since the live brokers changed (c.work.metadataAll).
func (c *controller) flushMetadataAll() {
	if c.work.metadataAll && !c.stopped() {
		c.sendUpdateMetadata(c.aliveIDs(), nil)
		c.work.metadataAll = false
	}
}

// stepError sorts an item's failure: the returned error stops the step,
// nil lets the next item go (the failed one stays in the work). A call a
// batch never sent (errNotSent) stops the step as the lost connection or
// the stop that aborted the batch does.
func (c *controller) stepError(err error) error {
	if err == nil || errors.Is(err, ErrNotController) || errors.Is(err, errControllerStopped) || errors.Is(err, errNotSent) ||
		zkSessionLost(err) || zkConnectionLost(err) {
		return err
	}
	c.log.Warn().Err(err).Msg("controller work item failed; will retry")
	return nil
}

// checkFenced reports whether err means this controller is finished: its
// epoch check failed (another controller has a newer epoch) or its
// ZooKeeper session is gone. If so it stops the loop and asks the session
// to resign.
func (c *controller) checkFenced(err error) bool {
	if !errors.Is(err, ErrNotController) && !zkSessionLost(err) {
		return false
	}
	if !c.fenced {
		c.fenced = true
		c.cancel() // nothing more is sent to brokers
		why := "controller epoch moved"
		if zkSessionLost(err) {
			why = "zookeeper session lost"
		}
		c.log.Warn().Err(err).Str("reason", why).Msg("controller resigning")
		if c.cfg.Resign != nil {
			c.cfg.Resign(c, why)
		}
	}
	return true
}

func (c *controller) closeQueues() {
	for _, q := range c.queues {
		q.close()
	}
}

// afterEvent reports the leader elections of the event that started at
// start and refreshes the offline partitions count. Loop goroutine only.
func (c *controller) afterEvent(start time.Time) {
	if c.elected > 0 {
		c.metrics.LeaderElection(c.elected, c.now().Sub(start))
		c.elected = 0
	}
	n := 0
	for _, st := range c.states {
		if _, ok := c.alive[st.Leader]; st.Leader < 0 || !ok {
			n++
		}
	}
	c.offline.Store(int32(n))
}
