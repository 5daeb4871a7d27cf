package protocol

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/security"
)

// Config configures a Server.
type Config struct {
	BrokerID int32
	// MaxRequestBytes is socket.request.max.bytes: a frame whose size
	// prefix is larger closes the connection before anything is allocated.
	// Zero means Kafka's default, 104857600.
	MaxRequestBytes int32
	// ConnectionsMaxIdle is connections.max.idle.ms: a connection that
	// starts no request for this long is closed (idle clients, and
	// half-open ones that connect and never send), and so is one that
	// sends a size prefix but not the whole frame within this long of it
	// (slowloris). Zero means Kafka's default, 10 minutes.
	ConnectionsMaxIdle time.Duration
	// QueuedMaxRequestBytes is queued.max.request.bytes: the most bytes of
	// request frames being read or handled at once, over all connections.
	// A connection that reads a size prefix waits, reading nothing more,
	// until the frame's size fits (a frame larger than the whole budget
	// waits for all of it). Zero or negative means unbounded (Kafka's -1).
	QueuedMaxRequestBytes int64
	// MaxConnections is max.connections: past this many connections the
	// server stops accepting on every listener but InterBrokerListener
	// until one closes (Kafka blocks its acceptor the same way, KIP-402).
	// Zero (the zero value) means unbounded (Kafka's Int.MaxValue);
	// negative means none: only InterBrokerListener accepts, which is
	// Kafka's max.connections=0 (see ServerMaxConnections).
	MaxConnections int
	// MaxConnectionsPerIP is max.connections.per.ip: a new connection from
	// an address that already has this many is closed at once. Zero or
	// negative means unbounded (Kafka's Int.MaxValue).
	MaxConnectionsPerIP int
	// InterBrokerListener is inter.broker.listener.name, exempt from
	// MaxConnections so that brokers can always reach each other.
	InterBrokerListener string
	// AutoCreateTopics is auto.create.topics.enable.
	AutoCreateTopics bool
	// DefaultPartitions is num.partitions, for auto-created topics and
	// CreateTopics with -1 partitions.
	DefaultPartitions int32
	// DefaultReplicationFactor is default.replication.factor.
	DefaultReplicationFactor int16
	// FetchSessionCacheSlots is max.incremental.fetch.session.cache.slots:
	// the most incremental fetch sessions (KIP-227) kept. Zero means
	// Kafka's default, DefaultFetchSessionCacheSlots; negative means none
	// (Kafka's 0: every fetch is sessionless).
	FetchSessionCacheSlots int

	Replicas    Replicas
	Metadata    Metadata
	Admin       Admin
	ProducerIDs ProducerIDs
	// ControlPlane, when set, serves the controller's requests
	// (LeaderAndIsr, StopReplica, UpdateMetadata) and ControlledShutdown;
	// without it those keys are neither served nor advertised.
	ControlPlane ControlPlane
	// LeaderEpochs, when set, serves OffsetForLeaderEpoch; without it the
	// key is neither served nor advertised.
	LeaderEpochs LeaderEpochs
	// Groups, when set, serves the consumer group keys (FindCoordinator,
	// JoinGroup, ..., OffsetCommit, OffsetFetch); OffsetsTopic says how
	// FindCoordinator creates __consumer_offsets.
	Groups       Groups
	OffsetsTopic OffsetsTopicConfig
	// Transactions, when set, serves the transaction keys
	// (AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit,
	// DescribeTransactions, ListTransactions, InitProducerId and
	// FindCoordinator with a transactional id); TransactionTopic says how
	// FindCoordinator creates __transaction_state. Without it those keys
	// are neither served nor advertised, InitProducerId with a
	// transactional id answers NOT_COORDINATOR and FindCoordinator key
	// type 1 INVALID_REQUEST.
	Transactions     Transactions
	TransactionTopic TransactionTopicConfig
	// TxnVerification is transaction.partition.verification.enable
	// (KIP-890 part 1): a transactional batch of a producer with no
	// ongoing transaction on the partition is appended only after the
	// transaction coordinator confirms the partition is in the
	// transaction (locally through Transactions, or through TxnVerifier
	// to the coordinator's broker).
	TxnVerification bool
	// TxnVerifier asks the transaction coordinator on another broker.
	// Without it, a verification whose coordinator is elsewhere answers
	// NOT_ENOUGH_REPLICAS (retriable, as Kafka's unreachable coordinator).
	TxnVerifier TxnVerifier
	// BrokerEpoch returns this broker's current epoch (the czxid of its
	// registration znode). A controller request carrying an older one is
	// refused with STALE_BROKER_EPOCH; while it returns 0 (not registered
	// yet) every controller request is refused with BROKER_NOT_AVAILABLE.
	// Nil skips both checks.
	BrokerEpoch func() int64
	// RequestObserver, when set, is told of every dispatched request
	// (request counts and latency per API key).
	RequestObserver RequestObserver
	// BrokerConfigs and BrokerLoggers, when set, serve the BROKER and
	// BROKER_LOGGER resources of DescribeConfigs, AlterConfigs and
	// IncrementalAlterConfigs (broker_configs.go).
	BrokerConfigs BrokerConfigs
	BrokerLoggers BrokerLoggers
	// Authorizer (authorizer.class.name) decides every request's ACL
	// checks (authz.go); nil allows everything, as Kafka without an
	// authorizer. ACLAdmin, with Authorizer, serves CreateAcls and
	// DeleteAcls (DescribeAcls needs only Authorizer); ScramAdmin serves
	// Describe/AlterUserScramCredentials. Without them those keys are
	// neither served nor advertised.
	Authorizer Authorizer
	ACLAdmin   ACLAdmin
	ScramAdmin ScramAdmin

	// Listeners is the security of each listener, by listener name (as
	// given to Serve); a listener absent from the map is PLAINTEXT.
	Listeners map[string]ListenerSecurity
	// MaxReceiveBeforeAuth is sasl.server.max.receive.size: on a SASL
	// listener, a frame larger than this before authentication completes
	// (and during a re-authentication) closes the connection before
	// anything is allocated for it (CVE-2022-34917). Zero means Kafka's
	// default, 524288.
	MaxReceiveBeforeAuth int32
	// FailedAuthDelay is connection.failed.authentication.delay.ms: a
	// failed authentication is answered, and its connection closed, this
	// long after the failure. Zero answers at once.
	FailedAuthDelay time.Duration
	// MaxReauth is connections.max.reauth.ms (KIP-368): a SASL session
	// lasts this long; a connection that sends a request past it without
	// re-authenticating is closed. Zero means sessions do not expire.
	MaxReauth time.Duration

	// Log is the server's logger; the zero value discards.
	Log zerolog.Logger

	// now is the clock of SASL session lifetimes (nil: time.Now), and
	// onAuthenticated is told of every principal a connection
	// authenticates as; both for tests.
	now             func() time.Time
	onAuthenticated func(listener string, p security.KafkaPrincipal, reauth bool)
}

// The security protocols of listener.security.protocol.map.
const (
	ProtocolPlaintext     = "PLAINTEXT"
	ProtocolSSL           = "SSL"
	ProtocolSASLPlaintext = "SASL_PLAINTEXT"
	ProtocolSASLSSL       = "SASL_SSL"
)

// ListenerSecurity is the security of one listener.
type ListenerSecurity struct {
	// Protocol is PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.
	Protocol string
	// TLS is the listener's keystore and truststore (SSL, SASL_SSL).
	TLS *security.TLSContext
	// SASL is what the listener's SASL servers need (SASL_*).
	SASL security.SASLConfig
	// PrincipalMapper maps a TLS client certificate's distinguished name
	// to the principal's name on an SSL listener
	// (ssl.principal.mapping.rules); nil uses the DN as it is.
	PrincipalMapper *security.PrincipalMapper
}

func (ls ListenerSecurity) usesTLS() bool {
	return ls.Protocol == ProtocolSSL || ls.Protocol == ProtocolSASLSSL
}

func (ls ListenerSecurity) usesSASL() bool {
	return ls.Protocol == ProtocolSASLPlaintext || ls.Protocol == ProtocolSASLSSL
}

// DefaultMaxReceiveBeforeAuth is Kafka's sasl.server.max.receive.size default.
const DefaultMaxReceiveBeforeAuth int32 = 512 * 1024

// ErrListenerSecurity is returned by Serve for a listener whose security
// is misconfigured (an unknown protocol, a TLS protocol without a
// TLSContext, SASL mechanisms without their credentials).
var ErrListenerSecurity = errors.New("protocol: listener security misconfigured")

// listenerSecurity returns the security of a listener and, for TLS ones,
// its server config.
func (s *Server) listenerSecurity(name string) (ListenerSecurity, *tls.Config, error) {
	ls, ok := s.cfg.Listeners[name]
	if !ok || ls.Protocol == "" {
		ls.Protocol = ProtocolPlaintext
	}
	switch ls.Protocol {
	case ProtocolPlaintext, ProtocolSSL, ProtocolSASLPlaintext, ProtocolSASLSSL:
	default:
		return ls, nil, fmt.Errorf("listener %s: security protocol %q: %w", name, ls.Protocol, ErrListenerSecurity)
	}
	if ls.usesSASL() {
		if err := security.ValidateSASLConfig(ls.SASL); err != nil {
			return ls, nil, fmt.Errorf("listener %s: %w: %w", name, ErrListenerSecurity, err)
		}
	}
	if !ls.usesTLS() {
		return ls, nil, nil
	}
	if ls.TLS == nil {
		return ls, nil, fmt.Errorf("listener %s: %s without a keystore: %w", name, ls.Protocol, ErrListenerSecurity)
	}
	tc, err := ls.TLS.ServerConfig()
	if err != nil {
		return ls, nil, fmt.Errorf("listener %s: %w: %w", name, ErrListenerSecurity, err)
	}
	return ls, tc, nil
}

// DefaultMaxRequestBytes is Kafka's socket.request.max.bytes default.
const DefaultMaxRequestBytes int32 = 100 * 1024 * 1024

// DefaultConnectionsMaxIdle is Kafka's connections.max.idle.ms default.
const DefaultConnectionsMaxIdle = 10 * time.Minute

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("protocol: server closed")

// writeTimeout bounds one response write so that a peer that stops
// reading cannot hold a connection's goroutines forever.
const writeTimeout = 60 * time.Second

// Server serves the Kafka protocol on any number of listeners.
type Server struct {
	cfg    Config
	apis   []apiRange // the rows of supportedAPIs this Config serves
	log    zerolog.Logger
	ctx    context.Context // canceled by Close; every wait selects on it
	cancel context.CancelFunc

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	connsByIP map[string]int // open connections per remote address
	// connClosed is closed and replaced whenever a connection ends, to
	// wake listeners waiting for a slot under MaxConnections.
	connClosed chan struct{}
	wg         sync.WaitGroup // every goroutine the server starts, and Serve

	// budget is QueuedMaxRequestBytes.
	budget *byteBudget

	// controlSem (capacity 1) serializes the controller's requests
	// (LeaderAndIsr, StopReplica, UpdateMetadata) from the controller
	// epoch check to the end of the ControlPlane call, as Kafka's
	// replicaStateChangeLock does, so that a deposed controller's request
	// that passed the check cannot be applied after its successor's. A
	// channel rather than a mutex, so that waiting for it ends with ctx.
	controlSem chan struct{}
	// controllerEpoch is the highest controller epoch seen. Guarded by
	// controlSem.
	controllerEpoch int32

	// now is the clock of SASL session lifetimes; tests replace it
	// before serving.
	now func() time.Time

	// fetchSessions is the incremental fetch session cache (KIP-227).
	fetchSessions *fetchSessionCache
}

// NewServer returns a server that is not yet listening.
func NewServer(cfg Config) *Server {
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if cfg.ConnectionsMaxIdle <= 0 {
		cfg.ConnectionsMaxIdle = DefaultConnectionsMaxIdle
	}
	if cfg.now == nil {
		cfg.now = time.Now
	}
	if cfg.MaxReceiveBeforeAuth <= 0 {
		cfg.MaxReceiveBeforeAuth = DefaultMaxReceiveBeforeAuth
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		cfg:        cfg,
		apis:       servedAPIs(&cfg),
		controlSem: make(chan struct{}, 1),
		log:        cfg.Log.With().Str("component", "protocol").Int32("broker_id", cfg.BrokerID).Logger(),
		ctx:        ctx,
		cancel:     cancel,
		listeners:  make(map[net.Listener]struct{}),
		conns:      make(map[*conn]struct{}),
		connsByIP:  make(map[string]int),
		connClosed: make(chan struct{}),
		budget:     newByteBudget(cfg.QueuedMaxRequestBytes),
		now:        cfg.now,
		fetchSessions: newFetchSessionCache(fetchSessionSlots(cfg.FetchSessionCacheSlots),
			fetchSessionEvictionAge, cfg.now),
	}
}

// goFuncLocked starts fn counted in s.wg, or returns false after Close.
// Caller holds s.mu.
func (s *Server) goFuncLocked(fn func()) bool {
	if s.closed {
		return false
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		fn()
	}()
	return true
}

// Serve accepts connections on l until Close, and returns ErrServerClosed
// then. listenerName picks which advertised endpoint of each broker
// Metadata answers with on this listener. l is closed when Serve returns.
func (s *Server) Serve(l net.Listener, listenerName string) error {
	sec, tlsCfg, err := s.listenerSecurity(listenerName)
	if err != nil {
		l.Close()
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		l.Close()
		return ErrServerClosed
	}
	s.listeners[l] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
		l.Close()
	}()

	s.log.Info().Str("listener", listenerName).Str("security_protocol", sec.Protocol).
		Str("addr", l.Addr().String()).Msg("serving")
	var backoff time.Duration
	for {
		if !s.waitForSlot(listenerName) {
			return ErrServerClosed
		}
		nc, err := l.Accept()
		if err != nil {
			if s.isClosed() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				// Temporary trouble such as running out of file
				// descriptors: back off instead of spinning.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn().Err(err).Dur("backoff", backoff).Msg("accept")
				select {
				case <-time.After(backoff):
				case <-s.ctx.Done():
					return ErrServerClosed
				}
				continue
			}
			return fmt.Errorf("accept on %s: %w", l.Addr(), err)
		}
		backoff = 0
		if tc, ok := nc.(*net.TCPConn); ok {
			tc.SetNoDelay(true)
		}
		if tlsCfg != nil {
			nc = tlsServer(nc, tlsCfg) // the handshake runs first in readLoop
		}
		c := s.newConn(nc, listenerName)
		c.setSecurity(sec)
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return ErrServerClosed
		}
		if limit := s.cfg.MaxConnectionsPerIP; limit > 0 && s.connsByIP[c.ip] >= limit {
			s.mu.Unlock()
			nc.Close()
			// Kafka logs this at INFO too (TooManyConnectionsException).
			s.log.Info().Str("remote_addr", c.remote).Int("max_connections_per_ip", limit).
				Msg("rejected connection: address has the maximum number of connections")
			continue
		}
		s.conns[c] = struct{}{}
		s.connsByIP[c.ip]++
		s.goFuncLocked(c.readLoop)
		s.goFuncLocked(c.writeLoop)
		s.mu.Unlock()
	}
}

// ServerMaxConnections is Config.MaxConnections for Kafka's
// max.connections value n: 0 admits no connection outside the
// inter-broker listener, as in Kafka.
func ServerMaxConnections(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// waitForSlot blocks while MaxConnections connections are open, unless
// listener is the inter-broker listener; false means the server closed.
func (s *Server) waitForSlot(listener string) bool {
	if listener == s.cfg.InterBrokerListener {
		return true
	}
	for {
		s.mu.Lock()
		n, wake, limit := len(s.conns), s.connClosed, s.cfg.MaxConnections
		s.mu.Unlock()
		if limit == 0 || n < limit {
			return true
		}
		select {
		case <-wake:
		case <-s.ctx.Done():
			return false
		}
	}
}

// SetConnectionLimits changes max.connections (as Config.MaxConnections:
// zero unbounded, negative none) and max.connections.per.ip (zero or
// negative: unbounded) without a restart, as Kafka's
// SocketServer.reconfigure: new connections are checked against the new
// limits, listeners waiting for a slot look again, and connections already
// open stay open.
func (s *Server) SetConnectionLimits(maxConnections, maxConnectionsPerIP int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.MaxConnections, s.cfg.MaxConnectionsPerIP = maxConnections, maxConnectionsPerIP
	close(s.connClosed)
	s.connClosed = make(chan struct{})
}

// removeConn forgets c and wakes listeners waiting for a slot.
func (s *Server) removeConn(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
	if s.connsByIP[c.ip]--; s.connsByIP[c.ip] <= 0 {
		delete(s.connsByIP, c.ip)
	}
	close(s.connClosed)
	s.connClosed = make(chan struct{})
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close stops every listener and connection, ends all waits, and returns
// once every goroutine of the server has finished. It is safe to call
// more than once.
func (s *Server) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		s.cancel()
		for l := range s.listeners {
			l.Close()
		}
		for c := range s.conns {
			c.nc.Close()
		}
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// maxPendingProduces bounds the acks=all Produce requests of one
// connection that wait for replication at once (see conn).
const maxPendingProduces = 8

// conn is one client connection: readLoop reads, decodes and handles one
// request at a time; writeLoop is the only writer to the socket.
//
// Responses leave in request order. An acks=all Produce appends in
// readLoop like every request, but waits for replication in a goroutine of
// its own, so that the next Produce on the connection (a producer keeps
// several in flight) is appended while the earlier one replicates, instead
// of behind it: its response goes into out as a future that writeLoop
// waits for. Only Produce overlaps this way. Any other request first waits
// until every earlier response is complete, so it is handled after them,
// as with Kafka's muted connection (a Fetch or OffsetCommit after a
// Produce sees its outcome). At most maxPendingProduces wait at once.
type conn struct {
	s        *Server
	nc       net.Conn
	listener string
	remote   string
	ip       string // remote without the port, for MaxConnectionsPerIP
	log      zerolog.Logger
	// principal is who the connection authenticated as (reqContext's).
	principal security.KafkaPrincipal
	// securityProtocol is the listener's (reqContext's).
	securityProtocol string
	sec              ListenerSecurity
	// authenticated: the connection may send any request. False on a
	// SASL listener until the exchange completes (sasl).
	authenticated bool
	sasl          saslConn
	// frame is the request frame readLoop is handling (readLoop's only).
	frame *requestFrame

	// out carries encoded responses, in request order, to writeLoop. Its
	// small capacity pushes back on a client that stops reading. Their
	// buffers come from the pools, and writeLoop gives them back.
	out chan outFrame
	// pending counts deferred responses (acks=all Produce) not yet
	// encoded; pendingSlots bounds them.
	pending      sync.WaitGroup
	pendingSlots chan struct{}
	// respHint is the size of the last response, to pick a response
	// buffer that will not need to grow.
	respHint   int
	writerDone chan struct{} // closed when writeLoop returns
	ctx        context.Context
	cancel     context.CancelFunc
}

func (s *Server) newConn(nc net.Conn, listener string) *conn {
	ctx, cancel := context.WithCancel(s.ctx)
	remote := nc.RemoteAddr().String()
	ip, _, err := net.SplitHostPort(remote)
	if err != nil {
		ip = remote
	}
	return &conn{
		s:                s,
		nc:               nc,
		listener:         listener,
		remote:           remote,
		ip:               ip,
		log:              s.log.With().Str("remote_addr", remote).Logger(),
		principal:        security.Anonymous,
		securityProtocol: ProtocolPlaintext,
		sec:              ListenerSecurity{Protocol: ProtocolPlaintext},
		authenticated:    true,
		out:              make(chan outFrame, 2+maxPendingProduces),
		pendingSlots:     make(chan struct{}, maxPendingProduces),
		writerDone:       make(chan struct{}),
		ctx:              ctx,
		cancel:           cancel,
	}
}

// setSecurity makes c a connection of a listener with this security.
func (c *conn) setSecurity(sec ListenerSecurity) {
	c.sec, c.securityProtocol = sec, sec.Protocol
	c.authenticated = !sec.usesSASL()
}

func (c *conn) readLoop() {
	defer func() {
		c.cancel()
		// Deferred responses end with the context: wait for them, so that
		// the server's Close, which waits for this loop, waits for them.
		c.pending.Wait()
		close(c.out) // writeLoop flushes what is queued, then closes the socket
		c.s.removeConn(c)
	}()
	idle := c.s.cfg.ConnectionsMaxIdle
	if !c.tlsHandshake(idle) {
		return
	}
	br := bufio.NewReaderSize(c.nc, 32<<10)
	for {
		// connections.max.idle.ms: the next request must start in time.
		// No deadline runs while a request is handled (a long-polling
		// Fetch or an acks=all Produce is not idle).
		c.nc.SetReadDeadline(time.Now().Add(idle))
		// Before authentication (and while re-authenticating) a frame
		// may be no larger than sasl.server.max.receive.size; raw SASL
		// tokens (after SaslHandshake v0) have no request header.
		minBytes, maxBytes := minHeaderBytes, c.s.cfg.MaxRequestBytes
		preAuth := !c.authenticated || c.sasl.reauthing
		if preAuth {
			maxBytes = c.s.cfg.MaxReceiveBeforeAuth
		}
		if c.sasl.stage == saslStageRaw {
			minBytes = 0
		}
		size, err := readFrameSize(br, minBytes, maxBytes)
		if err != nil {
			if preAuth && errors.Is(err, errFrameSize) {
				c.log.Info().Err(err).Int32("sasl_server_max_receive_size", maxBytes).
					Msg("closing connection: receive before authentication too large")
				return
			}
			c.logReadError(err)
			return
		}
		// queued.max.request.bytes: wait for the frame's bytes before
		// reading (and allocating) any of them.
		held, err := c.s.budget.acquire(c.ctx, int64(size))
		if err != nil {
			return // the server or the writer closed
		}
		// The whole frame must arrive within the idle time of its size
		// prefix, however slowly it trickles: a stalled frame holds
		// budget, so it must not hold it for longer.
		c.nc.SetReadDeadline(time.Now().Add(idle))
		frame, err := readFrameBody(br, size)
		if err != nil {
			c.s.budget.release(held)
			c.logReadError(err)
			return
		}
		rf := &requestFrame{budget: c.s.budget, held: held, buf: frame}
		c.frame = rf // a failed authentication gives it back before its delay
		if c.sasl.stage == saslStageRaw {
			// A raw SASL token, not a request (SaslHandshake v0).
			resp := c.handleRawToken(frame)
			rf.release(false)
			if !c.send(resp) || resp.close {
				return
			}
			continue
		}
		// The key is read now: a handler may give the frame back early
		// (releaseFrame), and then it is not ours to read.
		key := int16(binary.BigEndian.Uint16(frame))
		if key != produceKey {
			// Handled after every earlier response is complete.
			c.pending.Wait()
		}
		resp, err := c.handleFrame(frame, rf)
		if err != nil {
			rf.release(false) // after a panic, trust nothing about the frame
			return            // already logged
		}
		rf.release(frameReusable(key))
		if !c.send(resp) || resp.close {
			return
		}
	}
}

// send queues resp for writeLoop, if it is a response; false means the
// writer has gone.
func (c *conn) send(resp outFrame) bool {
	if resp.b == nil && resp.later == nil {
		return true
	}
	select {
	case c.out <- resp:
		return true
	case <-c.writerDone:
		return false
	}
}

// tlsHandshake runs the TLS handshake of a TLS listener's connection
// within the idle time, and on an SSL listener makes the client
// certificate's principal the connection's. False closes the connection.
func (c *conn) tlsHandshake(idle time.Duration) bool {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return true
	}
	tc.SetDeadline(time.Now().Add(idle))
	if err := tc.HandshakeContext(c.ctx); err != nil {
		c.log.Info().Err(err).Str("listener", c.listener).Msg("closing connection: TLS handshake failed")
		return false
	}
	tc.SetDeadline(time.Time{})
	if c.sec.Protocol != ProtocolSSL {
		return true // SASL_SSL: the principal is SASL's
	}
	p, err := security.PrincipalFromTLS(tc.ConnectionState(), c.sec.PrincipalMapper)
	if err != nil {
		c.log.Info().Err(err).Msg("closing connection: no principal for the client certificate")
		return false
	}
	c.principal = p
	c.log.Debug().Str("principal", p.String()).Msg("TLS client authenticated")
	if hook := c.s.cfg.onAuthenticated; hook != nil {
		hook(c.listener, p, false)
	}
	return true
}

// outFrame is one response for writeLoop: the encoded bytes, or a future
// delivering them (nil for none: the connection then closes).
type outFrame struct {
	b     []byte
	later <-chan []byte
	// close: the connection closes once this response (if any) is
	// queued, as after a failed authentication.
	close bool
}

// requestFrame is one request frame's hold on memory: its buffer and its
// share of the request budget, given back by release.
type requestFrame struct {
	budget *byteBudget
	held   int64
	buf    []byte
	done   bool
}

// release gives back the frame's budget and, if reuse, its buffer to the
// pools; only its first call does anything. A handler may call it early
// (through reqContext) once nothing it still uses aliases the frame, as
// Produce does before waiting for acks=all, so that waiting requests hold
// neither budget nor buffers.
func (f *requestFrame) release(reuse bool) {
	if f == nil || f.done {
		return
	}
	f.done = true
	f.budget.release(f.held)
	if reuse {
		putBuf(f.buf)
	}
	f.buf = nil
}

// frameReusable reports whether the buffer of a frame with this API key
// may be reused once its request was handled: true for the keys whose
// decoded requests hold no bytes of the frame afterwards (kmsg copies
// strings; byte fields alias the frame). Produce's records are appended (copied to the log) before
// its handler returns. JoinGroup's protocol metadata and SyncGroup's
// assignments are byte fields the group coordinator keeps, so their
// frames, like those of any key not listed, are left to the GC.
func frameReusable(key int16) bool {
	switch key {
	case 0, 1, 2, 3, 8, 9, 10, 12, 18, 23: // Produce, Fetch, ListOffsets, Metadata, OffsetCommit, OffsetFetch, FindCoordinator, Heartbeat, ApiVersions, OffsetForLeaderEpoch
		return true
	case 22, 24, 25, 26, 27, 28, 61, 65, 66: // InitProducerId and the transaction keys: strings and numbers only
		return true
	}
	return false
}

func (c *conn) logReadError(err error) {
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
	case errors.Is(err, os.ErrDeadlineExceeded):
		c.log.Debug().Dur("connections_max_idle", c.s.cfg.ConnectionsMaxIdle).
			Msg("closing connection: idle, or a request frame not received in time")
	case errors.Is(err, errFrameSize):
		// A TLS ClientHello on a plaintext listener reads as ~369 MB.
		c.log.Warn().Err(err).Msg("closing connection: bad request size (a TLS client on a plaintext listener?)")
	default:
		c.log.Debug().Err(err).Msg("closing connection: read")
	}
}

// handleFrame decodes and handles one frame, returning the framed
// response (empty for none) or an error that closes the connection.
func (c *conn) handleFrame(frame []byte, rf *requestFrame) (out outFrame, err error) {
	// Before authentication a key the SASL stage does not allow is
	// refused from the header alone, before its body is decoded
	// (CVE-2022-34917: kmsg allocates arrays and tag maps many times a
	// frame's size); the keys it allows are decoded with bounded tags.
	preAuth := c.preAuth()
	if out, refused := c.gateSASLKey(frame); refused {
		return out, nil
	}
	req, err := parseRequestBounded(frame, c.s.apis, preAuth)
	if err != nil {
		ev := c.log.Warn().Err(err)
		if req != nil {
			ev = ev.Int16("api_key", req.key).Int16("api_version", req.version).
				Int32("correlation_id", req.correlationID).Str("client_id", req.clientID)
		}
		ev.Msg("closing connection: bad request")
		return outFrame{}, err
	}
	if out, handled := c.gateSASL(req); handled {
		return out, nil
	}
	c.log.Debug().Int16("api_key", req.key).Int16("api_version", req.version).
		Int32("correlation_id", req.correlationID).Str("client_id", req.clientID).
		Int32("size", req.size).Msg("request")

	defer func() {
		if p := recover(); p != nil {
			c.log.Error().Int16("api_key", req.key).Int16("api_version", req.version).
				Int32("correlation_id", req.correlationID).Str("client_id", req.clientID).
				Interface("panic", p).Bytes("stack", debug.Stack()).
				Msg("closing connection: handler panicked")
			out, err = outFrame{}, fmt.Errorf("panic in handler for key %d: %v", req.key, p)
		}
	}()

	var resp kmsg.Response
	var rc *reqContext
	if req.kreq == nil {
		// ApiVersions above our range.
		resp = unsupportedApiVersionsResponse(c.s.apis)
	} else {
		rc = &reqContext{listener: c.listener, clientID: req.clientID, correlationID: req.correlationID, remoteAddr: c.remote,
			principal: c.principal, host: c.ip, securityProtocol: c.securityProtocol,
			frame: rf, sizeHint: c.respHint}
		resp, err = c.s.dispatch(c.ctx, rc, req.kreq)
		if err != nil {
			c.log.Info().Err(err).Int16("api_key", req.key).Int32("correlation_id", req.correlationID).
				Msg("closing connection")
			return outFrame{}, err
		}
		if resp == nil {
			return outFrame{}, nil
		}
		if rc.complete != nil {
			return c.deferResponse(rc, req, resp), nil
		}
	}
	b := appendResponse(getBuf(c.respHint), req.correlationID, resp)
	c.respHint = len(b)
	if rc != nil {
		rc.encoded()
	}
	return outFrame{b: b}, nil
}

// deferResponse runs rc.complete, which finishes resp (an acks=all
// Produce waiting for replication), in a goroutine of its own, and returns
// the future of the encoded response. It waits for a free slot first.
func (c *conn) deferResponse(rc *reqContext, req *request, resp kmsg.Response) outFrame {
	later := make(chan []byte, 1)
	select {
	case c.pendingSlots <- struct{}{}:
	case <-c.ctx.Done():
		rc.complete(c.ctx) // ends at once: its observed latency ends too
		later <- nil
		return outFrame{later: later}
	}
	c.pending.Add(1)
	go func() {
		var b []byte
		defer func() {
			if p := recover(); p != nil {
				c.log.Error().Int16("api_key", req.key).Int32("correlation_id", req.correlationID).
					Interface("panic", p).Bytes("stack", debug.Stack()).
					Msg("closing connection: handler panicked")
				b = nil
			}
			later <- b
			<-c.pendingSlots
			c.pending.Done()
		}()
		rc.complete(c.ctx)
		b = appendResponse(getBuf(256), req.correlationID, resp)
	}()
	return outFrame{later: later}
}

func (c *conn) writeLoop() {
	defer func() {
		c.cancel()
		close(c.writerDone)
		c.nc.Close()
	}()
	for f := range c.out {
		b := f.b
		if f.later != nil {
			if b = <-f.later; b == nil {
				return // the deferred handler failed: close
			}
		}
		c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
		if err := writeFrame(c.nc, b); err != nil {
			if !errors.Is(err, net.ErrClosed) {
				c.log.Debug().Err(err).Msg("closing connection: write")
			}
			return
		}
		putBuf(b)
	}
}

// releaseFrame gives back the request frame's budget and buffer before
// the handler returns. The handler promises that nothing it still uses,
// and nothing it passed on, aliases the frame (byte fields of the decoded
// request do). Produce calls it before waiting for acks=all: a request
// parked for up to its timeout must not keep follower fetches, which
// move the high watermark it waits for, out of the budget.
func (rc *reqContext) releaseFrame() { rc.frame.release(true) }
