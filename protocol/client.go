package protocol

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
	"github.com/kafkazk/broker/security"
)

// ClientConfig configures a BrokerClient.
type ClientConfig struct {
	// BrokerID is this broker's id: the client id is "broker-<id>" and
	// OffsetsForLeaderEpoch and ListOffsets carry it as the replica id.
	BrokerID int32
	// ListenerName is inter.broker.listener.name: which advertised
	// endpoint of a broker to connect to.
	ListenerName string
	// Resolve finds a live broker by id (usually MetadataCache.Broker); it
	// is how Fetch and OffsetsForLeaderEpoch reach a leader.
	Resolve func(id int32) (cluster.Broker, bool)
	// DialTimeout bounds a connect; zero means DefaultDialTimeout.
	DialTimeout time.Duration
	// RequestTimeout bounds one request and its response (for a Fetch,
	// on top of its MaxWait); zero means DefaultRequestTimeout (Kafka's
	// replica.socket.timeout.ms and controller.socket.timeout.ms).
	RequestTimeout time.Duration
	// MaxResponseBytes refuses a response whose size prefix is larger,
	// before allocating; zero means DefaultMaxRequestBytes.
	MaxResponseBytes int32
	// Security is how connections authenticate to the inter-broker
	// listener; the zero value is PLAINTEXT.
	Security ClientSecurity
	// Log is the client's logger; the zero value discards.
	Log zerolog.Logger
}

// ClientSecurity is the inter-broker listener's security, client side,
// as Kafka's broker configures its own client for
// security.inter.broker.protocol or inter.broker.listener.name.
type ClientSecurity struct {
	// TLS, when set, wraps every connection (SSL, SASL_SSL): the
	// truststore checks the broker's certificate and the keystore, if
	// any, is the client certificate.
	TLS *security.TLSContext
	// SASL, when set, authenticates every connection after TLS
	// (SASL_PLAINTEXT, SASL_SSL) with SaslHandshake v1 and SaslAuthenticate
	// v1 (sasl.mechanism.inter.broker.protocol; see SASLMechanism).
	SASL sasl.Mechanism
}

// SASLMechanism is the client side of a mechanism for a user and password
// (the username and password options of the inter-broker listener's
// sasl.jaas.config): PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
func SASLMechanism(name, user, password string) (sasl.Mechanism, error) {
	switch name {
	case "PLAIN":
		return plain.Auth{User: user, Pass: password}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: user, Pass: password}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: user, Pass: password}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("SASL mechanism %q for inter-broker connections: %w", name, security.ErrUnsupportedMechanism)
}

// reauthMargin is the share of a SASL session's lifetime after which the
// client re-authenticates its connection before reusing it, rather than
// have the server close it (connections.max.reauth.ms).
const reauthMargin = 0.85

// Versions of the SASL requests the client sends.
const (
	clientSASLHandshakeVersion    int16 = 1
	clientSASLAuthenticateVersion int16 = 1
)

// Defaults of ClientConfig.
const (
	DefaultDialTimeout    = 10 * time.Second
	DefaultRequestTimeout = 30 * time.Second
)

// The request versions the client sends, fixed rather than negotiated
// because both ends are this package; each is the highest the server
// serves (supportedAPIs). Fetch v12 is the last that names topics, and
// carries CurrentLeaderEpoch (v9+), fetch sessions (v7+) and ReplicaID at
// the top level (v15 moved it into ReplicaState).
const (
	clientFetchVersion                int16 = 12
	clientOffsetForLeaderEpochVersion int16 = 4
	clientListOffsetsVersion          int16 = 7
	clientLeaderAndIsrVersion         int16 = 4
	clientStopReplicaVersion          int16 = 3
	clientUpdateMetadataVersion       int16 = 6
	clientControlledShutdownVersion   int16 = 3
	clientWriteTxnMarkersVersion      int16 = 1
	clientAddPartitionsToTxnVersion   int16 = 4 // the brokers' form, with VerifyOnly
)

// ErrClientClosed is returned by BrokerClient methods after Close.
var ErrClientClosed = errors.New("protocol: broker client closed")

// connPurpose separates traffic that must not queue behind other traffic
// on one connection.
type connPurpose uint8

const (
	// purposeFetch: a follower's Fetch, OffsetsForLeaderEpoch and
	// ListOffsets, from its fetcher for that leader. A Fetch long-polls for up to its MaxWait.
	purposeFetch connPurpose = iota
	// purposeControl: the controller's LeaderAndIsr, UpdateMetadata and
	// StopReplica, which must never wait behind a long-polling Fetch.
	purposeControl
	// purposeShutdown: ControlledShutdown to the controller. Separate from
	// purposeControl because the controller handling it sends LeaderAndIsr
	// and StopReplica — to this broker itself when it is the controller —
	// and those must not queue behind the request that caused them.
	purposeShutdown
	// purposeTxnMarkers: the transaction coordinator's WriteTxnMarkers,
	// which the leader answers once the markers are replicated (up to
	// request.timeout.ms): never behind or in front of controller or
	// follower traffic.
	purposeTxnMarkers
	// purposeTxnVerify: a partition leader's AddPartitionsToTxn VerifyOnly
	// to a transaction coordinator, for a producer's first transactional
	// batch on a partition. Apart from the markers, so that a produce
	// never waits behind another transaction's replication.
	purposeTxnVerify
)

func (p connPurpose) String() string {
	switch p {
	case purposeFetch:
		return "fetch"
	case purposeControl:
		return "control"
	case purposeTxnMarkers:
		return "txn_markers"
	case purposeTxnVerify:
		return "txn_verify"
	default:
		return "shutdown"
	}
}

type connKey struct {
	broker  int32
	purpose connPurpose
}

// BrokerClient is the inter-broker client: partition.LeaderClient for
// followers, the controller's BrokerSender, and ControlledShutdown. It
// keeps one connection per destination broker and purpose, dialed on first
// use and redialed after any error; requests on one connection go one at a
// time. A request that fails on a connection reused from an earlier
// request, with the connection dead before an answer came (the peer
// restarted), is retried once on a fresh connection: every request it
// sends can be repeated (reads, or controller requests fenced by epochs).
// Safe for concurrent use.
type BrokerClient struct {
	cfg       ClientConfig
	log       zerolog.Logger
	formatter *kmsg.RequestFormatter
	ctx       context.Context // canceled by Close
	cancel    context.CancelFunc

	mu     sync.Mutex
	closed bool
	conns  map[connKey]*brokerConn
	// sessions holds the fetch session with each leader (KIP-227).
	sessions map[int32]*fetchSessionHandler
}

// brokerConn is one connection slot. sem (capacity 1) is held for a whole
// round trip and guards every other field; a channel so that waiting for
// it ends with the caller's context.
type brokerConn struct {
	key  connKey
	sem  chan struct{}
	nc   net.Conn
	br   *bufio.Reader
	addr string
	corr int32
	// wbuf is the request encode buffer, reused for every request.
	wbuf []byte
	// renewAt is when the connection's SASL session is close enough to
	// its end that the next round trip redials; zero for never.
	renewAt time.Time
}

// NewBrokerClient returns a client that dials lazily.
func NewBrokerClient(cfg ClientConfig) *BrokerClient {
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.MaxResponseBytes <= 0 {
		cfg.MaxResponseBytes = DefaultMaxRequestBytes
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &BrokerClient{
		cfg:       cfg,
		log:       cfg.Log.With().Str("component", "broker_client").Int32("broker_id", cfg.BrokerID).Logger(),
		formatter: kmsg.NewRequestFormatter(kmsg.FormatterClientID("broker-" + strconv.Itoa(int(cfg.BrokerID)))),
		ctx:       ctx,
		cancel:    cancel,
		conns:     make(map[connKey]*brokerConn),
		sessions:  make(map[int32]*fetchSessionHandler),
	}
}

// Close ends every request in flight (with ErrClientClosed) and closes
// every connection. Safe to call more than once.
func (c *BrokerClient) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.cancel()
	conns := make([]*brokerConn, 0, len(c.conns))
	for _, bc := range c.conns {
		conns = append(conns, bc)
	}
	c.mu.Unlock()
	for _, bc := range conns {
		bc.sem <- struct{}{} // a request in flight ends promptly: c.ctx is done
		bc.closeLocked()
		<-bc.sem
	}
}

// Fetch sends one replica fetch (Fetch v12) to broker leader, in the
// incremental fetch session the client keeps with it (KIP-227; see
// fetchSessionHandler): req lists every partition the fetcher wants, the
// request carries only those whose fetch data changed since the last
// fetch (and forgets those not wanted any more), and the response holds
// only the partitions with records, an error, or a new high watermark or
// log start offset; a partition it omits has nothing new. A fetch that
// fails for its session (FETCH_SESSION_ID_NOT_FOUND,
// INVALID_FETCH_SESSION_EPOCH: the leader restarted or evicted the
// session) is sent again at once as a full fetch, which opens a new
// session. Per-partition error codes come back as partition's sentinels
// (wrapping the kerr error too); an error means the request as a whole
// failed.
func (c *BrokerClient) Fetch(ctx context.Context, leader int32, req partition.FetchRequest) (partition.FetchResponse, error) {
	addr, err := c.resolve(leader)
	if err != nil {
		return partition.FetchResponse{}, fmt.Errorf("fetch from broker %d: %w", leader, err)
	}
	h := c.sessionHandler(leader)
	h.mu.Lock()
	defer h.mu.Unlock()
	for attempt := 0; ; attempt++ {
		out, retry, err := c.fetchInSession(ctx, leader, addr, h, req)
		if !retry || attempt > 0 {
			return out, err
		}
	}
}

// fetchInSession is one round trip of Fetch. retry says the fetch failed
// for its session and the handler now makes a full fetch. Caller holds
// h.mu.
func (c *BrokerClient) fetchInSession(ctx context.Context, leader int32, addr string, h *fetchSessionHandler, req partition.FetchRequest) (partition.FetchResponse, bool, error) {
	kreq := kmsg.NewPtrFetchRequest()
	kreq.Version = clientFetchVersion
	kreq.ReplicaID = req.ReplicaID
	kreq.MaxWaitMillis = int32(req.MaxWait / time.Millisecond)
	kreq.MinBytes = req.MinBytes
	kreq.MaxBytes = req.MaxBytes
	kreq.IsolationLevel = 0
	incremental := h.build(kreq, req.Partitions)
	kresp, frame, err := c.roundTrip(ctx, connKey{leader, purposeFetch}, addr, kreq, max(req.MaxWait, 0))
	if err != nil {
		// The leader may have served it: its session epoch is then
		// ahead of ours, so start over.
		h.failed(false)
		return partition.FetchResponse{}, false, fmt.Errorf("fetch from broker %d: %w", leader, err)
	}
	resp := kresp.(*kmsg.FetchResponse)
	if code := resp.ErrorCode; code != 0 {
		putBuf(frame)
		unknown := code == kerr.FetchSessionIDNotFound.Code
		h.failed(unknown)
		retry := unknown || code == kerr.InvalidFetchSessionEpoch.Code
		return partition.FetchResponse{}, retry, fmt.Errorf("fetch from broker %d (session %d epoch %d): %w",
			leader, kreq.SessionID, kreq.SessionEpoch, errorFromCode(code))
	}
	if !h.handled(incremental, resp.SessionID) {
		putBuf(frame)
		return partition.FetchResponse{}, true, fmt.Errorf("fetch from broker %d: incremental fetch of session %d answered for session %d",
			leader, kreq.SessionID, resp.SessionID)
	}
	out := partition.FetchResponse{Partitions: make(map[cluster.TopicPartition]partition.FetchPartitionResult, len(resp.Topics))}
	if frame != nil {
		// The records alias the response frame: the fetcher gives it back
		// to the pool once it has appended them.
		out.Release = func() { putBuf(frame) }
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out.Partitions[cluster.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = partition.FetchPartitionResult{
				Err:            errorFromCode(p.ErrorCode),
				HighWatermark:  p.HighWatermark,
				LogStartOffset: p.LogStartOffset,
				Records:        p.RecordBatches, // aliases frame until out.Release
			}
		}
	}
	return out, false, nil
}

// OffsetsForLeaderEpoch asks broker leader where epochs end
// (OffsetForLeaderEpoch v4, with this broker's id as replica id). The
// answers are in query order; a query the leader left unanswered fails
// the whole call.
func (c *BrokerClient) OffsetsForLeaderEpoch(ctx context.Context, leader int32, qs []partition.EpochQuery) ([]partition.EpochAnswer, error) {
	kreq := kmsg.NewPtrOffsetForLeaderEpochRequest()
	kreq.Version = clientOffsetForLeaderEpochVersion
	kreq.ReplicaID = c.cfg.BrokerID
	topics, byTopic := topicOrder(qs, func(q partition.EpochQuery) string { return q.TopicPartition.Topic })
	for _, t := range topics {
		kt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		kt.Topic = t
		for _, q := range byTopic[t] {
			kp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
			kp.Partition = q.TopicPartition.Partition
			kp.CurrentLeaderEpoch = q.CurrentLeaderEpoch
			kp.LeaderEpoch = q.LeaderEpoch
			kt.Partitions = append(kt.Partitions, kp)
		}
		kreq.Topics = append(kreq.Topics, kt)
	}
	kresp, err := c.askLeader(ctx, leader, kreq)
	if err != nil {
		return nil, fmt.Errorf("offsets for leader epoch from broker %d: %w", leader, err)
	}
	resp := kresp.(*kmsg.OffsetForLeaderEpochResponse)
	got := make(map[cluster.TopicPartition]partition.EpochAnswer)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			tp := cluster.TopicPartition{Topic: t.Topic, Partition: p.Partition}
			got[tp] = partition.EpochAnswer{TopicPartition: tp, Err: errorFromCode(p.ErrorCode), LeaderEpoch: p.LeaderEpoch, EndOffset: p.EndOffset}
		}
	}
	out := make([]partition.EpochAnswer, 0, len(qs))
	for _, q := range qs {
		a, ok := got[q.TopicPartition]
		if !ok {
			return nil, fmt.Errorf("offsets for leader epoch from broker %d: no answer for %s", leader, q.TopicPartition)
		}
		out = append(out, a)
	}
	return out, nil
}

// The fetcher finds ListEarliestOffset by a type assertion on its
// LeaderClient: keep BrokerClient implementing it.
var _ partition.EarliestOffsetLister = (*BrokerClient)(nil)

// ListEarliestOffset asks broker leader for tp's log start offset
// (ListOffsets v7, timestamp -2, with this broker's id as replica id, so
// the leader answers as to a replica), for a follower whose fetch offset
// is out of range: partition.EarliestOffsetLister. A per-partition error
// code comes back as partition's sentinel (wrapping the kerr error too).
func (c *BrokerClient) ListEarliestOffset(ctx context.Context, leader int32, tp cluster.TopicPartition, currentLeaderEpoch int32) (int64, error) {
	kreq := kmsg.NewPtrListOffsetsRequest()
	kreq.Version = clientListOffsetsVersion
	kreq.ReplicaID = c.cfg.BrokerID
	kt := kmsg.NewListOffsetsRequestTopic()
	kt.Topic = tp.Topic
	kp := kmsg.NewListOffsetsRequestTopicPartition()
	kp.Partition = tp.Partition
	kp.CurrentLeaderEpoch = currentLeaderEpoch
	kp.Timestamp = partition.EarliestTimestamp
	kt.Partitions = append(kt.Partitions, kp)
	kreq.Topics = append(kreq.Topics, kt)
	kresp, err := c.askLeader(ctx, leader, kreq)
	if err != nil {
		return -1, fmt.Errorf("list earliest offset of %s from broker %d: %w", tp, leader, err)
	}
	for _, t := range kresp.(*kmsg.ListOffsetsResponse).Topics {
		if t.Topic != tp.Topic {
			continue
		}
		for _, p := range t.Partitions {
			if p.Partition != tp.Partition {
				continue
			}
			if err := errorFromCode(p.ErrorCode); err != nil {
				return -1, fmt.Errorf("list earliest offset of %s from broker %d: %w", tp, leader, err)
			}
			return p.Offset, nil
		}
	}
	return -1, fmt.Errorf("list earliest offset of %s from broker %d: no answer for it", tp, leader)
}

// LeaderAndIsr sends req to broker to (LeaderAndIsr v4). A top-level
// error code comes back as an error wrapping its cluster sentinel
// (cluster.ErrStaleControllerEpoch, cluster.ErrStaleBrokerEpoch, ...);
// per-partition errors are logged at Warn, as the controller only needs to
// know they happened.
func (c *BrokerClient) LeaderAndIsr(ctx context.Context, to cluster.Broker, req cluster.LeaderAndIsrRequest) error {
	_, _, err := c.LeaderAndIsrOffline(ctx, to, req)
	return err
}

// UpdateMetadata sends req to broker to (UpdateMetadata v6); a non-zero
// error code comes back as an error wrapping its cluster sentinel.
func (c *BrokerClient) UpdateMetadata(ctx context.Context, to cluster.Broker, req cluster.UpdateMetadataRequest) error {
	kresp, err := c.control(ctx, to, purposeControl, updateMetadataToKmsg(req, clientUpdateMetadataVersion))
	if err != nil {
		return fmt.Errorf("UpdateMetadata to broker %d: %w", to.ID, err)
	}
	if err := errorFromCode(kresp.(*kmsg.UpdateMetadataResponse).ErrorCode); err != nil {
		return fmt.Errorf("UpdateMetadata to broker %d: %w", to.ID, err)
	}
	return nil
}

// StopReplica sends req to broker to (StopReplica v3); errors as for
// LeaderAndIsr.
func (c *BrokerClient) StopReplica(ctx context.Context, to cluster.Broker, req cluster.StopReplicaRequest) error {
	kresp, err := c.control(ctx, to, purposeControl, stopReplicaToKmsg(req, clientStopReplicaVersion))
	if err != nil {
		return fmt.Errorf("StopReplica to broker %d: %w", to.ID, err)
	}
	resp := kresp.(*kmsg.StopReplicaResponse)
	if err := errorFromCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("StopReplica to broker %d: %w", to.ID, err)
	}
	c.warnFailedPartitions("StopReplica", to.ID, req.ControllerEpoch, len(resp.Partitions), func(i int) (string, int32, int16) {
		p := &resp.Partitions[i]
		return p.Topic, p.Partition, p.ErrorCode
	})
	return nil
}

// warnFailedPartitions logs the partitions a controller request to broker
// to failed for, when the request as a whole succeeded; partition(i) is
// the i-th of n answers: its topic, partition and error code.
func (c *BrokerClient) warnFailedPartitions(api string, to, controllerEpoch int32, n int, partition func(i int) (string, int32, int16)) {
	var failed []string
	for i := range n {
		if topic, p, code := partition(i); code != 0 {
			failed = append(failed, fmt.Sprintf("%s-%d: %v", topic, p, errorFromCode(code)))
		}
	}
	if len(failed) > 0 {
		c.log.Warn().Int32("to_broker_id", to).Int32("controller_epoch", controllerEpoch).
			Strs("partitions", failed).Msg(api + " failed for some partitions")
	}
}

// ControlledShutdown asks the controller to move leadership off brokerID
// (ControlledShutdown v3) and returns the partitions it still leads. A
// non-zero error code comes back as an error wrapping its cluster
// sentinel (cluster.ErrNotController when the controller moved,
// cluster.ErrStaleBrokerEpoch, cluster.ErrBrokerNotAvailable).
func (c *BrokerClient) ControlledShutdown(ctx context.Context, controller cluster.Broker, brokerID int32, brokerEpoch int64) ([]cluster.TopicPartition, error) {
	kreq := kmsg.NewPtrControlledShutdownRequest()
	kreq.Version = clientControlledShutdownVersion
	kreq.BrokerID = brokerID
	kreq.BrokerEpoch = brokerEpoch
	kresp, err := c.control(ctx, controller, purposeShutdown, kreq)
	if err != nil {
		return nil, fmt.Errorf("ControlledShutdown to controller %d: %w", controller.ID, err)
	}
	resp := kresp.(*kmsg.ControlledShutdownResponse)
	if err := errorFromCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("ControlledShutdown to controller %d: %w", controller.ID, err)
	}
	var out []cluster.TopicPartition
	for _, p := range resp.PartitionsRemaining {
		out = append(out, cluster.TopicPartition{Topic: p.Topic, Partition: p.Partition})
	}
	return out, nil
}

// TxnMarkerFor is one marker of a WriteTxnMarkers request and the
// partitions it is written to.
type TxnMarkerFor struct {
	partition.TxnMarker
	Partitions []cluster.TopicPartition
}

// errNoAnswer is a partition a response left out: the request may have
// been applied or not, so it is retriable, as a lost connection.
var errNoAnswer = fmt.Errorf("no answer for the partition: %w", cluster.ErrBrokerNotAvailable)

// WriteTxnMarkers sends markers to broker to, the leader of their
// partitions (WriteTxnMarkers v1), and returns each partition's outcome:
// nil once its marker is written and replicated, else an error wrapping
// partition's sentinel (ErrNotLeader, ErrUnknownTopicOrPartition,
// ErrNotEnoughReplicas, ErrInvalidProducerEpoch,
// ErrTransactionCoordinatorFenced, ...) and the kerr error. A partition
// the response leaves out gets an error wrapping
// cluster.ErrBrokerNotAvailable. The map is keyed by partition, so a
// request should name each partition once (one producer's markers). An
// error means the request as a whole failed. Markers go on a connection of
// their own, as the leader holds the answer until they are replicated.
func (c *BrokerClient) WriteTxnMarkers(ctx context.Context, to cluster.Broker, markers []TxnMarkerFor) (map[cluster.TopicPartition]error, error) {
	kreq := kmsg.NewPtrWriteTxnMarkersRequest()
	kreq.Version = clientWriteTxnMarkersVersion
	for _, m := range markers {
		km := kmsg.NewWriteTxnMarkersRequestMarker()
		km.ProducerID, km.ProducerEpoch = m.ProducerID, m.ProducerEpoch
		km.Committed, km.CoordinatorEpoch = m.Commit, m.CoordinatorEpoch
		topics, byTopic := topicOrder(m.Partitions, func(tp cluster.TopicPartition) string { return tp.Topic })
		for _, t := range topics {
			kt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			kt.Topic = t
			for _, tp := range byTopic[t] {
				kt.Partitions = append(kt.Partitions, tp.Partition)
			}
			km.Topics = append(km.Topics, kt)
		}
		kreq.Markers = append(kreq.Markers, km)
	}
	addr, err := c.address(to)
	if err != nil {
		return nil, fmt.Errorf("WriteTxnMarkers to broker %d: %w", to.ID, err)
	}
	// The leader waits up to request.timeout.ms for replication before it
	// answers: that wait is part of the request.
	kresp, _, err := c.roundTrip(ctx, connKey{to.ID, purposeTxnMarkers}, addr, kreq, txnRequestTimeout)
	if err != nil {
		return nil, fmt.Errorf("WriteTxnMarkers to broker %d: %w", to.ID, err)
	}
	got := map[cluster.TopicPartition]error{}
	for _, m := range kresp.(*kmsg.WriteTxnMarkersResponse).Markers {
		for _, t := range m.Topics {
			for _, p := range t.Partitions {
				tp := cluster.TopicPartition{Topic: t.Topic, Partition: p.Partition}
				if err := errorFromCode(p.ErrorCode); err != nil {
					got[tp] = fmt.Errorf("marker for producer %d on %s at broker %d: %w", m.ProducerID, tp, to.ID, err)
				} else {
					got[tp] = nil
				}
			}
		}
	}
	out := map[cluster.TopicPartition]error{}
	for _, m := range markers {
		for _, tp := range m.Partitions {
			err, ok := got[tp]
			if !ok {
				err = fmt.Errorf("marker for producer %d on %s at broker %d: %w", m.ProducerID, tp, to.ID, errNoAnswer)
			}
			out[tp] = err
		}
	}
	return out, nil
}

// VerifyPartitionsInTxn asks broker to, the transaction coordinator of
// transactionalID, whether tps are in the producer's ongoing transaction
// (AddPartitionsToTxn v4 with VerifyOnly, KIP-890 part 1): TxnVerifier.
// Each partition's outcome is nil (in the transaction) or an error
// wrapping the txn sentinel of its code (txn.ErrInvalidTxnState, also
// partition.ErrInvalidTxnState; txn.ErrProducerFenced, ...), and the kerr
// error; a partition the response leaves out gets an error wrapping
// cluster.ErrBrokerNotAvailable. An error means the request as a whole
// failed (the top-level error code: txn.ErrNotCoordinator, ...).
func (c *BrokerClient) VerifyPartitionsInTxn(ctx context.Context, to cluster.Broker, transactionalID string, producerID int64, producerEpoch int16, tps []cluster.TopicPartition) (map[cluster.TopicPartition]error, error) {
	kreq := kmsg.NewPtrAddPartitionsToTxnRequest()
	kreq.Version = clientAddPartitionsToTxnVersion
	tr := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tr.TransactionalID, tr.ProducerID, tr.ProducerEpoch, tr.VerifyOnly = transactionalID, producerID, producerEpoch, true
	topics, byTopic := topicOrder(tps, func(tp cluster.TopicPartition) string { return tp.Topic })
	for _, t := range topics {
		kt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
		kt.Topic = t
		for _, tp := range byTopic[t] {
			kt.Partitions = append(kt.Partitions, tp.Partition)
		}
		tr.Topics = append(tr.Topics, kt)
	}
	kreq.Transactions = append(kreq.Transactions, tr)
	kresp, err := c.control(ctx, to, purposeTxnVerify, kreq)
	if err != nil {
		return nil, fmt.Errorf("verify transaction %s at broker %d: %w", transactionalID, to.ID, err)
	}
	resp := kresp.(*kmsg.AddPartitionsToTxnResponse)
	if err := errorFromCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("verify transaction %s at broker %d: %w", transactionalID, to.ID, err)
	}
	got := map[cluster.TopicPartition]error{}
	for _, rt := range resp.Transactions {
		if rt.TransactionalID != transactionalID {
			continue
		}
		for _, t := range rt.Topics {
			for _, p := range t.Partitions {
				tp := cluster.TopicPartition{Topic: t.Topic, Partition: p.Partition}
				if err := errorFromCode(p.ErrorCode); err != nil {
					got[tp] = fmt.Errorf("verify %s in transaction %s at broker %d: %w", tp, transactionalID, to.ID, err)
				} else {
					got[tp] = nil
				}
			}
		}
	}
	out := make(map[cluster.TopicPartition]error, len(tps))
	for _, tp := range tps {
		err, ok := got[tp]
		if !ok {
			err = fmt.Errorf("verify %s in transaction %s at broker %d: %w", tp, transactionalID, to.ID, errNoAnswer)
		}
		out[tp] = err
	}
	return out, nil
}

var _ TxnVerifier = (*BrokerClient)(nil)

// control sends req to broker to on its endpoint for our listener.
func (c *BrokerClient) control(ctx context.Context, to cluster.Broker, purpose connPurpose, req kmsg.Request) (kmsg.Response, error) {
	addr, err := c.address(to)
	if err != nil {
		return nil, err
	}
	// A caller of this generic path keeps the response as long as it
	// likes, so a frame the response aliases is left to the GC.
	resp, _, err := c.roundTrip(ctx, connKey{to.ID, purpose}, addr, req, 0)
	return resp, err
}

// askLeader sends req to broker leader on the fetch connection, for a
// request whose response does not alias its frame.
func (c *BrokerClient) askLeader(ctx context.Context, leader int32, req kmsg.Request) (kmsg.Response, error) {
	addr, err := c.resolve(leader)
	if err != nil {
		return nil, err
	}
	resp, frame, err := c.roundTrip(ctx, connKey{leader, purposeFetch}, addr, req, 0)
	putBuf(frame) // nil: the response does not alias its frame
	return resp, err
}

// resolve finds broker id's address through ClientConfig.Resolve.
func (c *BrokerClient) resolve(id int32) (string, error) {
	if c.cfg.Resolve == nil {
		return "", fmt.Errorf("no resolver: %w", cluster.ErrBrokerNotAvailable)
	}
	b, ok := c.cfg.Resolve(id)
	if !ok {
		return "", fmt.Errorf("broker %d unknown: %w", id, cluster.ErrBrokerNotAvailable)
	}
	return c.address(b)
}

func (c *BrokerClient) address(b cluster.Broker) (string, error) {
	e, ok := b.Endpoint(c.cfg.ListenerName)
	if !ok {
		return "", fmt.Errorf("broker %d has no endpoint on listener %s: %w", b.ID, c.cfg.ListenerName, cluster.ErrBrokerNotAvailable)
	}
	return net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port))), nil
}

// conn returns the slot for key, creating it.
func (c *BrokerClient) conn(key connKey) (*brokerConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClientClosed
	}
	bc := c.conns[key]
	if bc == nil {
		bc = &brokerConn{key: key, sem: make(chan struct{}, 1)}
		c.conns[key] = bc
	}
	return bc, nil
}

// connError is a failure of the connection itself (dial, write, read),
// as opposed to a response we could not make sense of. It wraps
// cluster.ErrBrokerNotAvailable.
type connError struct {
	op, addr string
	err      error
	// dead: the connection was found dead (reset, closed by the peer)
	// rather than slow, so a fresh one may succeed at once.
	dead bool
}

func (e *connError) Error() string { return fmt.Sprintf("%s %s: %v", e.op, e.addr, e.err) }
func (e *connError) Unwrap() []error {
	return []error{cluster.ErrBrokerNotAvailable, e.err}
}

// roundTrip sends req on key's connection to addr and returns the decoded
// response, and its frame if the response aliases it (a Fetch's records)
// for the caller to give back with putBuf once done, else nil. wait is how
// long the server may legitimately hold the request (a Fetch's MaxWait),
// added to RequestTimeout.
func (c *BrokerClient) roundTrip(ctx context.Context, key connKey, addr string, req kmsg.Request, wait time.Duration) (kmsg.Response, []byte, error) {
	bc, err := c.conn(key)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(c.ctx, cancel)
	defer stop()

	select {
	case bc.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, c.ctxErr(ctx)
	}
	defer func() { <-bc.sem }()
	if ctx.Err() != nil {
		return nil, nil, c.ctxErr(ctx)
	}
	if bc.nc != nil && bc.addr != addr {
		c.log.Debug().Int32("to_broker_id", key.broker).Str("old_addr", bc.addr).Str("addr", addr).Msg("broker moved, redialing")
		bc.closeLocked()
	}
	if bc.nc != nil && !bc.renewAt.IsZero() && !time.Now().Before(bc.renewAt) {
		// KIP-368: re-authenticate on the live connection; if the
		// server refuses, a fresh connection authenticates anew.
		if err := c.authenticateLocked(ctx, bc, c.cfg.Security.SASL); err != nil {
			c.log.Debug().Err(err).Int32("to_broker_id", key.broker).Str("addr", addr).Msg("SASL re-authentication failed, redialing")
			bc.closeLocked()
		}
	}
	for attempt := 0; ; attempt++ {
		reused := bc.nc != nil
		if !reused {
			if err := c.dialLocked(ctx, bc, addr); err != nil {
				if ctx.Err() != nil {
					return nil, nil, c.ctxErr(ctx)
				}
				return nil, nil, err
			}
		}
		resp, frame, err := c.exchangeLocked(ctx, bc, req, wait)
		if err == nil {
			return resp, frame, nil
		}
		bc.closeLocked()
		if ctx.Err() != nil {
			return nil, nil, c.ctxErr(ctx)
		}
		var ce *connError
		if reused && attempt == 0 && errors.As(err, &ce) && ce.dead {
			c.log.Debug().Err(err).Int32("to_broker_id", key.broker).Msg("reused connection was dead, redialing once")
			continue
		}
		return nil, nil, err
	}
}

// ctxErr is the error for a round trip ended by ctx: ErrClientClosed if
// Close did it, else the caller's context error.
func (c *BrokerClient) ctxErr(ctx context.Context) error {
	if c.ctx.Err() != nil {
		return ErrClientClosed
	}
	return ctx.Err()
}

// dialLocked connects bc to addr. Caller holds bc.sem.
func (c *BrokerClient) dialLocked(ctx context.Context, bc *brokerConn, addr string) error {
	d := net.Dialer{Timeout: c.cfg.DialTimeout}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return &connError{op: "dial", addr: addr, err: err}
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	sec := c.cfg.Security
	if sec.TLS != nil {
		host, _, _ := net.SplitHostPort(addr)
		tc := tlsClient(nc, sec.TLS.ClientConfig(host))
		hctx, cancel := context.WithTimeout(ctx, c.cfg.DialTimeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			nc.Close()
			return &connError{op: "TLS handshake with", addr: addr, err: err}
		}
		nc = tc
	}
	bc.nc, bc.br, bc.addr, bc.renewAt = nc, bufio.NewReaderSize(nc, 32<<10), addr, time.Time{}
	if sec.SASL != nil {
		if err := c.authenticateLocked(ctx, bc, sec.SASL); err != nil {
			bc.closeLocked()
			return err
		}
	}
	c.log.Debug().Int32("to_broker_id", bc.key.broker).Str("purpose", bc.key.purpose.String()).Str("addr", addr).Msg("connected")
	return nil
}

// authenticateLocked runs the SASL exchange on bc's new connection:
// SaslHandshake v1, then SaslAuthenticate v1 until the mechanism is done.
// It also re-authenticates a live connection (KIP-368) when its session
// nears its end. Caller holds bc.sem.
func (c *BrokerClient) authenticateLocked(ctx context.Context, bc *brokerConn, mech sasl.Mechanism) error {
	fail := func(err error) error { return &connError{op: "SASL authenticate to", addr: bc.addr, err: err} }
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = clientSASLHandshakeVersion, mech.Name()
	resp, _, err := c.exchangeLocked(ctx, bc, hs, 0)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.(*kmsg.SASLHandshakeResponse).ErrorCode); err != nil {
		return fail(fmt.Errorf("SaslHandshake %s: %w (server offers %v)", mech.Name(), err, resp.(*kmsg.SASLHandshakeResponse).SupportedMechanisms))
	}
	host, _, _ := net.SplitHostPort(bc.addr)
	session, msg, err := mech.Authenticate(ctx, host)
	if err != nil {
		return fail(err)
	}
	for {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version, req.SASLAuthBytes = clientSASLAuthenticateVersion, msg
		resp, _, err := c.exchangeLocked(ctx, bc, req, 0)
		if err != nil {
			return err
		}
		ar := resp.(*kmsg.SASLAuthenticateResponse)
		if err := kerr.ErrorForCode(ar.ErrorCode); err != nil {
			text := ""
			if ar.ErrorMessage != nil {
				text = *ar.ErrorMessage
			}
			return fail(fmt.Errorf("%w: %s", err, text))
		}
		done, next, err := session.Challenge(ar.SASLAuthBytes)
		if err != nil {
			return fail(err)
		}
		if done {
			bc.renewAt = sessionRenewAt(time.Now(), ar.SessionLifetimeMillis)
			return nil
		}
		msg = next
	}
}

// sessionRenewAt is when a SASL session of lifetimeMillis that began at
// now is to be renewed: reauthMargin of the way through it, or the zero
// time (never) for a session without a lifetime, so that a re-auth that
// answers none stops the connection re-authenticating before every
// request.
func sessionRenewAt(now time.Time, lifetimeMillis int64) time.Time {
	if lifetimeMillis <= 0 {
		return time.Time{}
	}
	life := time.Duration(lifetimeMillis) * time.Millisecond
	return now.Add(time.Duration(float64(life) * reauthMargin))
}

// exchangeLocked writes one request and reads its response. If the
// response aliases its frame (a Fetch's records), the frame is returned
// too, for the caller to give back with putBuf once done; else it is nil.
// Caller holds bc.sem.
func (c *BrokerClient) exchangeLocked(ctx context.Context, bc *brokerConn, req kmsg.Request, wait time.Duration) (kmsg.Response, []byte, error) {
	bc.corr++
	corr := bc.corr
	bc.wbuf = c.formatter.AppendRequest(bc.wbuf[:0], req, corr)
	frame := bc.wbuf

	deadline := time.Now().Add(c.cfg.RequestTimeout + wait)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	nc := bc.nc
	nc.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	if _, err := nc.Write(frame); err != nil {
		return nil, nil, &connError{op: "write to", addr: bc.addr, err: err, dead: !isTimeout(err)}
	}
	frameBuf, err := readResponse(bc.br, c.cfg.MaxResponseBytes)
	if err != nil {
		if errors.Is(err, errFrameSize) {
			return nil, nil, fmt.Errorf("response from %s: %w", bc.addr, err)
		}
		return nil, nil, &connError{op: "read from", addr: bc.addr, err: err, dead: !isTimeout(err)}
	}
	resp, err := decodeResponse(frameBuf, req, corr)
	if err != nil {
		putBuf(frameBuf)
		return nil, nil, fmt.Errorf("response from %s: %w", bc.addr, err)
	}
	if !aliasesFrame(resp) {
		putBuf(frameBuf)
		frameBuf = nil
	}
	return resp, frameBuf, nil
}

// readResponse reads one size-prefixed response. Unlike a request frame,
// it is read into a buffer of its whole size at once (pooled if one is
// free): the peer is a broker of this cluster answering our request, the
// size is bounded by MaxResponseBytes, and the buffer usually goes to the
// caller (a Fetch's records), so growing it by doubling would only copy.
func readResponse(r io.Reader, maxBytes int32) ([]byte, error) {
	size, err := readFrameSize(r, 4, maxBytes)
	if err != nil {
		return nil, err
	}
	body := pooledBuf(size)
	if body == nil {
		body = make([]byte, size)
	}
	body = body[:size]
	if _, err := io.ReadFull(r, body); err != nil {
		putBuf(body)
		return nil, err
	}
	return body, nil
}

// decodeResponse checks the correlation id of a response frame and
// decodes its body as req's response.
func decodeResponse(frame []byte, req kmsg.Request, corr int32) (kmsg.Response, error) {
	if got := int32(binary.BigEndian.Uint32(frame)); got != corr {
		return nil, fmt.Errorf("correlation id %d, want %d", got, corr)
	}
	body := frame[4:]
	resp := req.ResponseKind()
	if resp.IsFlexible() && req.Key() != apiVersionsKey {
		var err error
		if body, err = skipTags(body); err != nil {
			return nil, fmt.Errorf("header: %w", err)
		}
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("key %d v%d: %w", req.Key(), req.GetVersion(), err)
	}
	return resp, nil
}

// aliasesFrame reports whether resp holds bytes of the frame it was
// decoded from that its caller keeps: a Fetch's record batches, which go
// to the caller as FetchPartitionResult.Records. Every other response the
// client reads is copied out field by field (kmsg copies strings), so its
// frame goes back to the pool.
func aliasesFrame(resp kmsg.Response) bool {
	f, ok := resp.(*kmsg.FetchResponse)
	if !ok {
		return false
	}
	for _, t := range f.Topics {
		for _, p := range t.Partitions {
			if len(p.RecordBatches) > 0 {
				return true
			}
		}
	}
	return false
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// closeLocked closes bc's connection, if any. Caller holds bc.sem.
func (bc *brokerConn) closeLocked() {
	if bc.nc != nil {
		bc.nc.Close()
		bc.nc, bc.br = nil, nil
	}
}
