package zkcoord

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
)

// Defaults for Config fields left zero.
const (
	// DefaultSessionTimeout is zookeeper.session.timeout.ms (18000 since 2.5).
	DefaultSessionTimeout = 18 * time.Second
	// retryInterval is how often the session goroutine retries reads that
	// failed (for example while disconnected).
	retryInterval = 500 * time.Millisecond
	// DefaultLeaderImbalanceCheckInterval is leader.imbalance.check.interval.seconds.
	DefaultLeaderImbalanceCheckInterval = 300 * time.Second
	// DefaultLeaderImbalancePerBrokerPercentage is leader.imbalance.per.broker.percentage.
	DefaultLeaderImbalancePerBrokerPercentage = 10
	// defaultConfigChangeExpiration is how old a /config/changes
	// notification must be before it is purged: changeExpirationMs of
	// Kafka's ZkNodeChangeNotificationListener (15 minutes).
	defaultConfigChangeExpiration = 15 * time.Minute
	// firesQueueLen bounds the queue of fired watches waiting for the
	// session goroutine; watch goroutines block (push back) when it is full.
	firesQueueLen = 256
)

// Config configures a Session. Field names follow server.properties.
type Config struct {
	// Connect is zookeeper.connect: "host:port,host:port/chroot"; the
	// chroot is optional and is created if missing.
	Connect string
	// SessionTimeout is zookeeper.session.timeout.ms (DefaultSessionTimeout if 0).
	SessionTimeout time.Duration
	// ConnectionTimeout is zookeeper.connection.timeout.ms: how long
	// Connect waits for a session (SessionTimeout if 0).
	ConnectionTimeout time.Duration
	// BrokerID is broker.id.
	BrokerID int32
	// Endpoints are the advertised listeners, published in /brokers/ids/<id>.
	Endpoints []cluster.Endpoint
	// Rack is broker.rack; empty for none.
	Rack string
	// OnControllerChange, if set, is called from the session goroutine
	// whenever this broker becomes or stops being the controller. It must
	// not block and must not call Register.
	OnControllerChange func(isController bool, controllerEpoch int32)
	// TopicDefaults are the broker's topic defaults (the log.* keys of
	// server.properties). CreateTopic and AlterTopicConfig check a topic's
	// overrides on top of them, as Kafka's AdminZkClient merges
	// KafkaConfig.extractLogConfigMap before LogConfig.validate; nil means
	// Kafka's defaults (cluster.DefaultLogConfig).
	TopicDefaults *cluster.LogConfig
	// OnTopicConfigChange, if set, is called from the session goroutine
	// after /config/topics/<t> of a known topic was read into the cache
	// (at first sight of the topic and after every change), so the
	// broker can apply the new overrides to its live replicas. It must
	// not block.
	OnTopicConfigChange func(topic string)
	// OnBrokerConfigChange, if set, is called from the session goroutine
	// after /config/brokers/<BrokerID> or /config/brokers/<default>
	// (entity cluster.BrokerDefaultEntity) was read with a new content,
	// the first read included; BrokerConfig returns it. It must not block.
	OnBrokerConfigChange func(entity string)
	// Log receives the session's logs; the zero value discards them.
	Log zerolog.Logger

	// Sender carries the controller's LeaderAndIsr, UpdateMetadata and
	// StopReplica requests while this broker is the controller. With nil,
	// the controller still keeps every znode right (new partitions,
	// elections, ISR removal, deletions) but tells no broker.
	Sender BrokerSender
	// UncleanLeaderElection is unclean.leader.election.enable, the broker
	// default; the topic override in /config/topics/<t> wins, read at
	// election time.
	UncleanLeaderElection bool
	// AutoLeaderRebalance is auto.leader.rebalance.enable (Kafka's default
	// is true; the zero value here is off).
	AutoLeaderRebalance bool
	// LeaderImbalanceCheckInterval is leader.imbalance.check.interval.seconds
	// (DefaultLeaderImbalanceCheckInterval if 0).
	LeaderImbalanceCheckInterval time.Duration
	// LeaderImbalancePerBrokerPercentage is
	// leader.imbalance.per.broker.percentage (DefaultLeaderImbalancePerBrokerPercentage if 0).
	LeaderImbalancePerBrokerPercentage int
	// Metrics receives the controller's leader elections; nil discards them.
	Metrics Metrics

	// Digest, if set, is the broker's ZooKeeper identity (the username and
	// password of the JAAS Client section): the session authenticates with
	// AddAuth("digest", "user:password") before any other request, and again
	// on every reconnect and new session.
	Digest *DigestCredentials
	// SetACL is zookeeper.set.acl: every znode the broker creates gets
	// digest:<user>:<hash> with all permissions plus world READ, except
	// Kafka's sensitive paths (/config/users, /config/brokers,
	// /delegation_token/tokens), which get no world access, and /consumers,
	// which stays open as in Kafka. It requires Digest.
	SetACL bool

	// configChangeExpiration is the age after which /config/changes
	// notifications are purged (defaultConfigChangeExpiration if 0). Kafka
	// has no setting for it; tests shorten it.
	configChangeExpiration time.Duration
}

// DigestCredentials are a ZooKeeper digest identity.
type DigestCredentials struct {
	User     string
	Password string
}

// Session is one broker's ZooKeeper session: registration, controller
// election, the cache of brokers and topic configs fed by watches, and
// topic administration.
// All methods are safe for concurrent use. See the package doc for the
// concurrency contract.
type Session struct {
	cfg     Config
	log     zerolog.Logger
	zk      *zkConn
	servers []string

	done      chan struct{}
	closeOnce sync.Once
	goMu      sync.Mutex // guards closed and wg.Add
	closed    bool
	wg        sync.WaitGroup

	sessEv  chan struct{}  // buffer 1: the zk session state changed
	fires   chan watchFire // fired watches, to the session goroutine
	cmds    chan func()    // work to run on the session goroutine
	changes chan struct{}  // buffer 1: the cache changed
	ready   chan struct{}  // closed after the first sync

	clusterID string // set in Connect, immutable after

	// Owned by the session goroutine (run); never touched elsewhere.
	armed         map[watchKey]uint64 // watches set on the server, by token
	tokenSeq      uint64
	syncedSession int64      // session id whose state the cache reflects
	registered    bool       // Register succeeded once: re-register on every new session
	needRegister  bool       // registration for the current session is pending
	dirty         bool       // a read failed: resync on the next tick
	changed       bool       // the cache changed in this iteration
	acl           aclState   // the ACL watch (acl.go)
	scram         scramState // the SCRAM credential watch (scram.go)
	// beforeNotificationRead, set by tests only, runs before an ACL or
	// SCRAM change notification is read (to make one vanish).
	beforeNotificationRead func(path string)

	isr isrPropagation // NotifyIsrChange batching; its own lock

	mu              sync.Mutex // guards the fields below
	brokerEpoch     int64
	controllerID    int32
	isController    bool
	controllerEpoch int32
	brokers         map[int32]cluster.Broker
	topics          map[string]*topicEntry
	ctrl            *controller // the running controller, nil unless controller; set by the session goroutine

	// brokerConfigs are the dynamic broker configs by entity (this
	// broker's id and <default>); guarded by mu, written by the session
	// goroutine (brokerconfig.go).
	brokerConfigs map[string]map[string]string
	// topicDefaults, once set by SetTopicDefaults, replaces
	// Config.TopicDefaults (dynamic broker configs changed them).
	topicDefaults atomic.Pointer[cluster.LogConfig]
}

// Connect opens a ZooKeeper session for cfg, creates the chroot and the
// persistent top-level paths, gets or creates /cluster/id and loads the
// metadata cache. It does not register the broker: call Register.
func Connect(ctx context.Context, cfg Config) (*Session, error) {
	servers, chroot, err := parseConnect(cfg.Connect)
	if err != nil {
		return nil, err
	}
	if err := checkDigest(cfg); err != nil {
		return nil, err
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = DefaultSessionTimeout
	}
	if cfg.ConnectionTimeout <= 0 {
		cfg.ConnectionTimeout = cfg.SessionTimeout
	}
	if cfg.LeaderImbalanceCheckInterval <= 0 {
		cfg.LeaderImbalanceCheckInterval = DefaultLeaderImbalanceCheckInterval
	}
	if cfg.LeaderImbalancePerBrokerPercentage <= 0 {
		cfg.LeaderImbalancePerBrokerPercentage = DefaultLeaderImbalancePerBrokerPercentage
	}
	if cfg.configChangeExpiration <= 0 {
		cfg.configChangeExpiration = defaultConfigChangeExpiration
	}
	s := &Session{
		cfg:          cfg,
		log:          cfg.Log.With().Int32("broker_id", cfg.BrokerID).Logger(),
		servers:      servers,
		done:         make(chan struct{}),
		sessEv:       make(chan struct{}, 1),
		fires:        make(chan watchFire, firesQueueLen),
		cmds:         make(chan func()),
		changes:      make(chan struct{}, 1),
		ready:        make(chan struct{}),
		armed:        make(map[watchKey]uint64),
		controllerID: -1,
		brokers:      make(map[int32]cluster.Broker),
		topics:       make(map[string]*topicEntry),
	}
	conn, _, err := zk.Connect(servers, cfg.SessionTimeout,
		zk.WithLogger(zkLogger{s.log}),
		zk.WithEventCallback(s.onZKEvent))
	if err != nil {
		return nil, fmt.Errorf("connect to zookeeper %s: %w", strings.Join(servers, ","), err)
	}
	s.zk = &zkConn{c: conn, chroot: chroot}
	if cfg.SetACL {
		s.zk.secureACL = zk.DigestACL(zk.PermAll, cfg.Digest.User, cfg.Digest.Password)
	}
	if err := s.start(ctx); err != nil {
		s.closeConn()
		return nil, err
	}
	return s, nil
}

func (s *Session) start(ctx context.Context) error {
	timer := time.NewTimer(s.cfg.ConnectionTimeout)
	defer timer.Stop()
	for s.zk.c.State() != zk.StateHasSession {
		select {
		case <-s.sessEv:
		case <-timer.C:
			return fmt.Errorf("connect to zookeeper %s: %w within %v (state %v)",
				strings.Join(s.servers, ","), ErrNoSession, s.cfg.ConnectionTimeout, s.zk.c.State())
		case <-ctx.Done():
			return fmt.Errorf("connect to zookeeper %s: %w", strings.Join(s.servers, ","), ctx.Err())
		}
	}
	if err := s.addAuth(ctx, timer.C); err != nil {
		return err
	}
	if s.zk.chroot != "" {
		raw := &zkConn{c: s.zk.c, secureACL: s.zk.secureACL}
		parts := strings.Split(strings.TrimPrefix(s.zk.chroot, "/"), "/")
		for i := range parts {
			if err := raw.createPersistent("/" + strings.Join(parts[:i+1], "/")); err != nil {
				return fmt.Errorf("create chroot: %w", err)
			}
		}
	}
	for _, p := range persistentPaths {
		if err := s.zk.createPersistent(p); err != nil {
			return err
		}
	}
	id, err := s.createOrGetClusterID()
	if err != nil {
		return err
	}
	s.clusterID = id
	s.log.Info().Str("cluster_id", id).Int64("session_id", s.zk.c.SessionID()).
		Str("zookeeper", s.cfg.Connect).Msg("connected to zookeeper")
	if !s.goFunc(s.run) || !s.goFunc(s.propagateIsrChanges) {
		return ErrClosed
	}
	select {
	case <-s.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// checkDigest refuses zookeeper.set.acl without credentials, as Kafka
// refuses to start with set.acl but no JAAS login, and a digest user
// that the "user:password" form cannot carry.
func checkDigest(cfg Config) error {
	if cfg.SetACL && cfg.Digest == nil {
		return fmt.Errorf("%w: zookeeper.set.acl is true but no ZooKeeper credentials (JAAS section Client) were given", ErrBadZKAuth)
	}
	if d := cfg.Digest; d != nil && (d.User == "" || strings.Contains(d.User, ":")) {
		return fmt.Errorf("%w: digest user %q is empty or contains ':'", ErrBadZKAuth, d.User)
	}
	return nil
}

// addAuth authenticates the session with its digest credentials, before any
// other request. go-zookeeper keeps what AddAuth succeeded with and sends it
// again first thing on every reconnect, new sessions after an expiry
// included, so this runs once. A connection lost before the answer leaves
// nothing recorded, so it is retried until it lands, deadline or ctx end.
func (s *Session) addAuth(ctx context.Context, deadline <-chan time.Time) error {
	d := s.cfg.Digest
	if d == nil {
		return nil
	}
	for {
		err := s.zk.c.AddAuth("digest", []byte(d.User+":"+d.Password))
		if err == nil {
			s.log.Info().Str("zk_auth_scheme", "digest").Str("zk_user", d.User).
				Bool("zk_set_acl", s.cfg.SetACL).Msg("authenticated to zookeeper")
			return nil
		}
		if !outcomeUnknown(err) {
			return fmt.Errorf("zookeeper digest auth as %s: %w", d.User, err)
		}
		s.log.Warn().Err(err).Msg("zookeeper digest auth: connection lost; retrying")
		select {
		case <-time.After(retryInterval):
		case <-deadline:
			return fmt.Errorf("zookeeper digest auth as %s: %w", d.User, err)
		case <-ctx.Done():
			return fmt.Errorf("zookeeper digest auth: %w", ctx.Err())
		}
	}
}

// createOrGetClusterID creates /cluster/id with a new id, or reads the one
// another broker created (KZC createOrGetClusterId).
func (s *Session) createOrGetClusterID() (string, error) {
	if err := s.zk.createPersistent(clusterPath); err != nil {
		return "", err
	}
	_, err := s.zk.Create(clusterIDPath, encodeClusterID(newClusterID()), 0)
	if err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return "", fmt.Errorf("create %s: %w", clusterIDPath, err)
	}
	data, _, err := s.zk.Get(clusterIDPath)
	if errors.Is(err, zk.ErrNoNode) {
		return "", ErrClusterIDMissing
	}
	if err != nil {
		return "", fmt.Errorf("get %s: %w", clusterIDPath, err)
	}
	return decodeClusterID(data)
}

// onZKEvent is go-zookeeper's event callback. It runs on the client's own
// goroutines, so it must not block: it only logs and pokes the session goroutine.
func (s *Session) onZKEvent(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	select {
	case <-s.done:
		return
	default:
	}
	switch ev.State {
	case zk.StateDisconnected:
		s.log.Warn().Str("zk_server", ev.Server).Msg("zookeeper disconnected")
	case zk.StateExpired:
		s.log.Warn().Str("zk_server", ev.Server).Msg("zookeeper session expired")
	default:
		s.log.Debug().Str("zk_server", ev.Server).Stringer("zk_state", ev.State).Msg("zookeeper state")
	}
	select {
	case s.sessEv <- struct{}{}:
	default:
	}
}

// goFunc runs f on a goroutine counted in s.wg, unless the session is closed.
func (s *Session) goFunc(f func()) bool {
	s.goMu.Lock()
	defer s.goMu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
	return true
}

// Close ends the session, which removes this broker's ephemeral znodes
// (its registration and, if it is the controller, /controller), and waits
// for every goroutine. It is safe to call more than once.
func (s *Session) Close() error {
	s.closeConn()
	return nil
}

func (s *Session) closeConn() {
	s.closeOnce.Do(func() {
		s.goMu.Lock()
		s.closed = true
		close(s.done)
		s.goMu.Unlock()
		s.zk.c.Close()
		s.wg.Wait()
		s.log.Info().Msg("zookeeper session closed")
	})
}

// do runs fn on the session goroutine and returns its error.
func (s *Session) do(ctx context.Context, fn func() error) error {
	errc := make(chan error, 1)
	select {
	case s.cmds <- func() { errc <- fn() }:
	case <-ctx.Done():
		return ctx.Err()
	case <-s.done:
		return ErrClosed
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-s.done:
		return ErrClosed
	}
}

// Changes returns a channel that receives a value (buffer 1, never
// blocking the session) after every update of the metadata cache.
func (s *Session) Changes() <-chan struct{} { return s.changes }

// ClusterID is the id in /cluster/id.
func (s *Session) ClusterID() string { return s.clusterID }

// BrokerEpoch is the czxid of this broker's registration znode, or 0 before
// Register. It changes with every re-registration after a session expiry.
func (s *Session) BrokerEpoch() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.brokerEpoch
}

// SessionID is the current ZooKeeper session id.
func (s *Session) SessionID() int64 { return s.zk.c.SessionID() }

// Register creates this broker's ephemeral /brokers/ids/<id> with Kafka's
// checked ephemeral create and then enters the controller election. After
// a session expiry the session goroutine registers again by itself. It
// returns an error wrapping ErrBrokerIDInUse if another live session owns
// the id.
func (s *Session) Register(ctx context.Context) error {
	return s.do(ctx, func() error {
		if s.registered && !s.needRegister {
			return nil
		}
		if err := s.register(); err != nil {
			return err
		}
		s.registered = true
		if err := s.refreshController(); err != nil {
			s.markDirty("elect", err)
		}
		return nil
	})
}

// register is the checked ephemeral create of /brokers/ids/<id> (KZC
// registerBroker): create and setData in one multi so the returned stat
// carries the czxid; on NODEEXISTS, our own session's node is success.
// Caller is the session goroutine.
func (s *Session) register() error {
	p := brokerPath(s.cfg.BrokerID)
	data := encodeBrokerRegistration(s.cfg.Endpoints, s.cfg.Rack, time.Now().UnixMilli())
	for {
		sid := s.zk.c.SessionID()
		res, err := s.zk.Multi(
			&zk.CreateRequest{Path: p, Flags: zk.FlagEphemeral},
			&zk.SetDataRequest{Path: p, Data: data, Version: 0})
		var czxid int64
		switch {
		case err == nil:
			czxid = res[1].Stat.Czxid
		case errors.Is(err, zk.ErrNodeExists):
			_, st, err := s.zk.Get(p)
			if errors.Is(err, zk.ErrNoNode) {
				continue // deleted between our create and our read: create again
			}
			if err != nil {
				return fmt.Errorf("register broker: get %s: %w", p, err)
			}
			if st.EphemeralOwner != sid {
				return fmt.Errorf("register broker %d: %s is owned by session 0x%x: %w",
					s.cfg.BrokerID, p, st.EphemeralOwner, ErrBrokerIDInUse)
			}
			czxid = st.Czxid
		default:
			return fmt.Errorf("register broker: create %s: %w", p, err)
		}
		s.mu.Lock()
		s.brokerEpoch = czxid
		s.mu.Unlock()
		s.needRegister = false
		s.log.Info().Str("zk_path", p).Int64("broker_epoch", czxid).Int64("session_id", sid).
			Msg("registered broker")
		return nil
	}
}

// run is the session goroutine: it owns the watches, the registration and
// the election, and is the only writer of the cache.
func (s *Session) run() {
	s.onSession()
	close(s.ready)
	tick := time.NewTicker(retryInterval)
	defer tick.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-s.sessEv:
			s.checkSession()
		case <-tick.C:
			if !s.checkSession() && s.dirty && s.zk.c.State() == zk.StateHasSession {
				s.resync()
			}
		case f := <-s.fires:
			s.handleFire(f)
		case cmd := <-s.cmds:
			cmd()
		}
		if s.changed {
			s.changed = false
			select {
			case s.changes <- struct{}{}:
			default:
			}
		}
	}
}

// checkSession starts over if the client is in a session other than the
// one the cache reflects, which after an expiry is a brand-new session
// without our ephemerals or watches. It reports whether it did.
func (s *Session) checkSession() bool {
	if s.zk.c.State() != zk.StateHasSession || s.zk.c.SessionID() == s.syncedSession {
		return false
	}
	s.onSession()
	return true
}

// onSession resyncs everything for a new session: resign, forget every
// watch, re-register, re-arm and re-read (ZKClient reinitialize;
// KC RegisterBrokerAndReelect).
func (s *Session) onSession() {
	sid := s.zk.c.SessionID()
	old := s.syncedSession
	s.syncedSession = sid
	if old != 0 {
		s.log.Warn().Int64("session_id", sid).Int64("old_session_id", old).
			Msg("new zookeeper session after expiry: re-registering and re-arming watches")
	}
	s.resign("zookeeper session expired")
	s.setControllerID(-1) // unknown until re-read (KC Expire)
	clear(s.armed)
	if s.acl.authz != nil {
		s.acl.full = true // re-read every resource on the new session
	}
	if s.scram.cache != nil {
		s.scram.full = true
	}
	if s.registered {
		s.needRegister = true
	}
	s.resync()
}

// resync re-reads all state, arming every watch not already armed.
func (s *Session) resync() {
	s.dirty = false
	if s.needRegister {
		if err := s.register(); err != nil {
			s.markDirty("re-register", err)
		}
	}
	if err := s.refreshBrokerIDs(true); err != nil {
		s.markDirty("read brokers", err)
	}
	if err := s.refreshController(); err != nil {
		s.markDirty("read controller", err)
	}
	if err := s.refreshTopics(true); err != nil {
		s.markDirty("read topics", err)
	}
	if err := s.refreshDeleteTopics(); err != nil {
		s.markDirty("read topic deletions", err)
	}
	if err := s.syncScramCredentials(); err != nil {
		s.markDirty("load SCRAM credentials", err)
	}
	if err := s.refreshConfigChanges(); err != nil {
		s.markDirty("read config changes", err)
	}
	if err := s.syncACLs(); err != nil {
		s.markDirty("read ACLs", err)
	}
	if err := s.refreshBrokerConfigs(); err != nil {
		s.markDirty("read broker configs", err)
	}
	if err := s.refreshIsrChanges(); err != nil {
		s.markDirty("read isr changes", err)
	}
	if err := s.refreshAdminRequests(0); err != nil {
		s.markDirty("read admin requests", err)
	}
	// Whatever the failed or missed reads hid, the controller re-reads.
	s.postController(pendingEvents{brokers: true, topicList: true, deletions: true, isrChanges: true})
}

// markDirty records a failed step for a retry on the next tick. Failures
// are retryable: they are lost connections, which the client heals, or
// races with other writers, which the next read resolves.
func (s *Session) markDirty(op string, err error) {
	s.dirty = true
	ev := s.log.Warn()
	if errors.Is(err, ErrBrokerIDInUse) {
		ev = s.log.Error()
	}
	ev.Err(err).Str("op", op).Int64("session_id", s.zk.c.SessionID()).Msg("zookeeper step failed; will retry")
}
