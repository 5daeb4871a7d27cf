package protocol

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Config configures a Server.
type Config struct {
	BrokerID int32
	// MaxRequestBytes is socket.request.max.bytes: a frame whose size
	// prefix is larger closes the connection before anything is allocated.
	// Zero means Kafka's default, 104857600.
	MaxRequestBytes int32
	// AutoCreateTopics is auto.create.topics.enable.
	AutoCreateTopics bool
	// DefaultPartitions is num.partitions, for auto-created topics and
	// CreateTopics with -1 partitions.
	DefaultPartitions int32
	// DefaultReplicationFactor is default.replication.factor.
	DefaultReplicationFactor int16

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
	// BrokerEpoch returns this broker's current epoch (the czxid of its
	// registration znode). A controller request carrying an older one is
	// refused with STALE_BROKER_EPOCH. Nil skips the check.
	BrokerEpoch func() int64
	// RequestObserver, when set, is told of every dispatched request
	// (request counts and latency per API key).
	RequestObserver RequestObserver

	// Log is the server's logger; the zero value discards.
	Log zerolog.Logger
}

// DefaultMaxRequestBytes is Kafka's socket.request.max.bytes default.
const DefaultMaxRequestBytes int32 = 100 * 1024 * 1024

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
	wg        sync.WaitGroup // every goroutine the server starts, and Serve

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
}

// NewServer returns a server that is not yet listening.
func NewServer(cfg Config) *Server {
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
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

	s.log.Info().Str("listener", listenerName).Str("addr", l.Addr().String()).Msg("serving")
	var backoff time.Duration
	for {
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
		c := s.newConn(nc, listenerName)
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return ErrServerClosed
		}
		s.conns[c] = struct{}{}
		s.goFuncLocked(c.readLoop)
		s.goFuncLocked(c.writeLoop)
		s.mu.Unlock()
	}
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

// conn is one client connection: readLoop reads, decodes and handles one
// request at a time; writeLoop is the only writer to the socket.
type conn struct {
	s        *Server
	nc       net.Conn
	listener string
	remote   string
	log      zerolog.Logger

	// out carries encoded responses, in request order, to writeLoop. Its
	// small capacity pushes back on a client that stops reading.
	out        chan []byte
	writerDone chan struct{} // closed when writeLoop returns
	ctx        context.Context
	cancel     context.CancelFunc
}

func (s *Server) newConn(nc net.Conn, listener string) *conn {
	ctx, cancel := context.WithCancel(s.ctx)
	remote := nc.RemoteAddr().String()
	return &conn{
		s:          s,
		nc:         nc,
		listener:   listener,
		remote:     remote,
		log:        s.log.With().Str("remote_addr", remote).Logger(),
		out:        make(chan []byte, 2),
		writerDone: make(chan struct{}),
		ctx:        ctx,
		cancel:     cancel,
	}
}

func (c *conn) readLoop() {
	defer func() {
		c.cancel()
		close(c.out) // writeLoop flushes what is queued, then closes the socket
		c.s.mu.Lock()
		delete(c.s.conns, c)
		c.s.mu.Unlock()
	}()
	br := bufio.NewReaderSize(c.nc, 32<<10)
	for {
		frame, err := readFrame(br, c.s.cfg.MaxRequestBytes)
		if err != nil {
			c.logReadError(err)
			return
		}
		resp, err := c.handleFrame(frame)
		if err != nil {
			return // already logged
		}
		if resp == nil {
			continue
		}
		select {
		case c.out <- resp:
		case <-c.writerDone:
			return
		}
	}
}

func (c *conn) logReadError(err error) {
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
	case errors.Is(err, errFrameSize):
		// A TLS ClientHello on a plaintext listener reads as ~369 MB.
		c.log.Warn().Err(err).Msg("closing connection: bad request size (a TLS client on a plaintext listener?)")
	default:
		c.log.Debug().Err(err).Msg("closing connection: read")
	}
}

// handleFrame decodes and handles one frame, returning the framed
// response (nil for none) or an error that closes the connection.
func (c *conn) handleFrame(frame []byte) (out []byte, err error) {
	req, err := parseRequest(frame, c.s.apis)
	if err != nil {
		ev := c.log.Warn().Err(err)
		if req != nil {
			ev = ev.Int16("api_key", req.key).Int16("api_version", req.version).
				Int32("correlation_id", req.correlationID).Str("client_id", req.clientID)
		}
		ev.Msg("closing connection: bad request")
		return nil, err
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
			out, err = nil, fmt.Errorf("panic in handler for key %d: %v", req.key, p)
		}
	}()

	var resp kmsg.Response
	if req.kreq == nil {
		// ApiVersions above our range.
		resp = unsupportedApiVersionsResponse(c.s.apis)
	} else {
		rc := &reqContext{listener: c.listener, clientID: req.clientID, correlationID: req.correlationID, remoteAddr: c.remote}
		resp, err = c.s.dispatch(c.ctx, rc, req.kreq)
		if err != nil {
			c.log.Info().Err(err).Int16("api_key", req.key).Int32("correlation_id", req.correlationID).
				Msg("closing connection")
			return nil, err
		}
		if resp == nil {
			return nil, nil
		}
	}
	return appendResponse(nil, req.correlationID, resp), nil
}

func (c *conn) writeLoop() {
	defer func() {
		c.cancel()
		close(c.writerDone)
		c.nc.Close()
	}()
	for b := range c.out {
		c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
		if _, err := c.nc.Write(b); err != nil {
			if !errors.Is(err, net.ErrClosed) {
				c.log.Debug().Err(err).Msg("closing connection: write")
			}
			return
		}
	}
}
