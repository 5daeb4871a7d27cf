package protocol

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/internal/recordcodec"
)

// testBroker is a Server on 127.0.0.1:0 over in-memory fakes.
type testBroker struct {
	srv      *Server
	addr     string
	port     int32
	replicas *fakeReplicas
	cluster  *fakeCluster
	control  *fakeControlPlane
	epochs   *fakeLeaderEpochs
	// The transaction fakes: the coordinator, the replicas' and the
	// group coordinator's transaction capabilities, the remote verifier.
	txn         *fakeTxn
	txnReplicas *fakeTxnReplicas
	txnGroups   *fakeTxnGroups
	verifier    *fakeVerifier
	// brokerEpoch is what Config.BrokerEpoch returns.
	brokerEpoch *atomic.Int64
	served      chan error
}

type brokerOption func(*Config)

func withoutAutoCreate() brokerOption { return func(c *Config) { c.AutoCreateTopics = false } }

// withoutTransactions drops the transaction coordinator and the
// transaction capabilities of the replicas and groups.
func withoutTransactions() brokerOption {
	return func(c *Config) {
		c.Transactions, c.TxnVerifier = nil, nil
		if r, ok := c.Replicas.(*fakeTxnReplicas); ok {
			c.Replicas = r.fakeReplicas
		}
		if g, ok := c.Groups.(*fakeTxnGroups); ok {
			c.Groups = groupsOnly{g.Coordinator}
		}
	}
}

// clientOnly drops the inter-broker dependencies, leaving a server that
// serves clients only.
func clientOnly() brokerOption {
	return func(c *Config) { c.ControlPlane, c.LeaderEpochs, c.BrokerEpoch = nil, nil, nil }
}

func startBroker(t *testing.T, opts ...brokerOption) *testBroker {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host, portStr, _ := net.SplitHostPort(l.Addr().String())
	port, _ := strconv.Atoi(portStr)
	r := newFakeReplicas()
	c := newFakeCluster(r, cluster.Broker{ID: 1, Endpoints: []cluster.Endpoint{
		{Listener: "EXTERNAL", SecurityProtocol: "PLAINTEXT", Host: "external.invalid", Port: 1},
		{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: host, Port: int32(port)},
	}})
	control := &fakeControlPlane{}
	epochs := &fakeLeaderEpochs{answers: map[cluster.TopicPartition]fakeEpochAnswer{}}
	brokerEpoch := new(atomic.Int64)
	brokerEpoch.Store(42)
	tr, ftxn, verifier := newFakeTxnReplicas(r), newFakeTxn(), &fakeVerifier{}
	tg := &fakeTxnGroups{Coordinator: newTestGroups(t, r)}
	cfg := Config{
		BrokerID:                 1,
		ControlPlane:             control,
		LeaderEpochs:             epochs,
		BrokerEpoch:              brokerEpoch.Load,
		MaxRequestBytes:          1 << 20,
		AutoCreateTopics:         true,
		DefaultPartitions:        2,
		DefaultReplicationFactor: 1,
		Replicas:                 tr,
		Metadata:                 c,
		Admin:                    c,
		ProducerIDs:              c,
		Groups:                   tg,
		OffsetsTopic:             OffsetsTopicConfig{Partitions: testOffsetsPartitions, ReplicationFactor: 1, SegmentBytes: 1 << 20},
		Transactions:             ftxn,
		TransactionTopic:         TransactionTopicConfig{Partitions: testTxnPartitions, ReplicationFactor: 1, MinISR: 1, SegmentBytes: 1 << 20},
		TxnVerification:          true,
		TxnVerifier:              verifier,
		ScramAdmin:               newFakeScramAdmin(),
		Log:                      zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel),
	}
	for _, o := range opts {
		o(&cfg)
	}
	b := &testBroker{srv: NewServer(cfg), addr: l.Addr().String(), port: int32(port), replicas: r, cluster: c,
		control: control, epochs: epochs, brokerEpoch: brokerEpoch, served: make(chan error, 1),
		txn: ftxn, txnReplicas: tr, txnGroups: tg, verifier: verifier}
	go func() { b.served <- b.srv.Serve(l, "PLAINTEXT") }()
	t.Cleanup(func() {
		b.srv.Close()
		if err := <-b.served; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	})
	return b
}

// rawConn speaks the protocol by hand, for what real clients never send.
type rawConn struct {
	t    *testing.T
	c    net.Conn
	corr int32
}

func (b *testBroker) dial(t *testing.T) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c}
}

// encodeRequest frames req with a v1 or v2 request header (v0, without a
// client id, for ControlledShutdown v0).
func encodeRequest(corr int32, clientID string, req kmsg.Request) []byte {
	b := []byte{0, 0, 0, 0}
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	if req.Key() != controlledShutdownKey || req.GetVersion() != 0 {
		b = binary.BigEndian.AppendUint16(b, uint16(len(clientID)))
		b = append(b, clientID...)
	}
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func (r *rawConn) send(req kmsg.Request) int32 {
	r.t.Helper()
	r.corr++
	if _, err := r.c.Write(encodeRequest(r.corr, "raw", req)); err != nil {
		r.t.Fatal(err)
	}
	return r.corr
}

// readFrame returns the next response frame (correlation id and body
// after any header tags), or an error if the connection closed.
func (r *rawConn) readFrame(flexibleHeader bool) (int32, []byte, error) {
	r.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(r.c, size[:]); err != nil {
		return 0, nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r.c, body); err != nil {
		return 0, nil, err
	}
	corr := int32(binary.BigEndian.Uint32(body))
	body = body[4:]
	if flexibleHeader {
		if body[0] != 0 {
			r.t.Fatalf("response header tags %d, want 0", body[0])
		}
		body = body[1:]
	}
	return corr, body, nil
}

// roundTrip sends req and decodes its response.
func (r *rawConn) roundTrip(req kmsg.Request) kmsg.Response {
	r.t.Helper()
	corr := r.send(req)
	resp := req.ResponseKind()
	gotCorr, body, err := r.readFrame(resp.IsFlexible() && req.Key() != 18)
	if err != nil {
		r.t.Fatalf("key %d v%d: reading response: %v", req.Key(), req.GetVersion(), err)
	}
	if gotCorr != corr {
		r.t.Fatalf("correlation id %d, want %d", gotCorr, corr)
	}
	if err := resp.ReadFrom(body); err != nil {
		r.t.Fatalf("key %d v%d: decoding response: %v", req.Key(), req.GetVersion(), err)
	}
	return resp
}

// expectClosed asserts the server closes the connection without answering.
func (r *rawConn) expectClosed() {
	r.t.Helper()
	r.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b [1]byte
	n, err := r.c.Read(b[:])
	if err == nil || n > 0 {
		r.t.Fatalf("connection still open: read %d bytes, err %v", n, err)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		r.t.Fatal("connection not closed within 5s")
	}
}

// makeBatch builds a valid v2 record batch (CRC32C included) holding one
// record per value, with timestamps ts, ts+1, ...
func makeBatch(ts int64, values ...string) []byte {
	b := recordcodec.NewBatch(ts)
	for i, v := range values {
		b.Records = append(b.Records, recordcodec.Record{Value: []byte(v), TimestampDelta: int64(i)})
	}
	return recordcodec.MustBatch(b)
}

func produceRequest(version, acks int16, timeoutMillis int32, topic string, part int32, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version = version
	req.Acks = acks
	req.TimeoutMillis = timeoutMillis
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = part
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func fetchRequest(version int16, maxWaitMillis, minBytes int32, topic string, part int32, offset int64) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = version
	req.MaxWaitMillis = maxWaitMillis
	req.MinBytes = minBytes
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = part
	rp.FetchOffset = offset
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}
