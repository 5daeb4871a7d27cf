package protocol

// Benchmarks of the request hot paths (STYLE.md §6): produce decode+append
// through a real partition.Manager (RF 1, a log on disk), fetch response
// encoding, whole requests over a loopback connection (framing, buffers,
// the writer goroutine), and the inter-broker client's Fetch.
//
//	go test -run='^$' -bench=. -benchmem -count=5 ./protocol/

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
	"github.com/kafkazk/broker/security"
)

var benchTP = cluster.TopicPartition{Topic: "bench", Partition: 0}

// benchManager is a real replica manager leading benchTP alone.
func benchManager(b *testing.B) *partition.Manager {
	b.Helper()
	m, err := partition.NewManager(partition.Config{
		BrokerID: 1, LogDirs: []string{filepath.Join(b.TempDir(), "logs")},
		HighWatermarkCheckpointInterval: time.Hour, RecoveryPointCheckpointInterval: time.Hour,
		RetentionCheckInterval: time.Hour, Log: zerolog.Nop(),
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = m.Close() })
	cfg := cluster.DefaultLogConfig()
	cfg.SegmentBytes = 256 << 20
	errs := m.BecomeLeaderOrFollower([]partition.PartitionState{{TopicPartition: benchTP, Replicas: []int32{1}, Config: cfg,
		LeaderAndIsr: cluster.LeaderAndIsr{Leader: 1, LeaderEpoch: 1, Isr: []int32{1}}}})
	if err := errs[benchTP].Err; err != nil {
		b.Fatal(err)
	}
	return m
}

// fixedReplicas answers every Read with the same records and accepts
// every Append without looking at it: it isolates protocol's own costs.
type fixedReplicas struct {
	records []byte
	changed chan struct{}
}

func (f *fixedReplicas) Append(cluster.TopicPartition, []byte, int16) (partition.AppendResult, error) {
	return partition.AppendResult{LogAppendTime: -1}, nil
}
func (f *fixedReplicas) WaitCommitted(context.Context, cluster.TopicPartition, int64, int32) error {
	return nil
}
func (f *fixedReplicas) Read(cluster.TopicPartition, partition.ReadRequest) (partition.ReadResult, error) {
	return partition.ReadResult{Records: f.records, HighWatermark: 1 << 40, LastStableOffset: 1 << 40}, nil
}
func (f *fixedReplicas) ListOffset(cluster.TopicPartition, int64, int32, partition.OffsetsAsker) (int64, int64, int32, error) {
	return 0, -1, 0, nil
}
func (f *fixedReplicas) Changed(bool) <-chan struct{} { return f.changed }

func benchServer(r Replicas) *Server {
	fr := newFakeReplicas()
	c := newFakeCluster(fr, cluster.Broker{ID: 1, Endpoints: []cluster.Endpoint{{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: "127.0.0.1", Port: 1}}})
	return NewServer(Config{BrokerID: 1, Replicas: r, Metadata: c, Admin: c, ProducerIDs: c, Log: zerolog.Nop()})
}

// benchConn is a connection of a benchServer over r, its peer end of a
// net.Pipe unread (handlers are called directly), closed when b ends.
func benchConn(b *testing.B, r Replicas) *conn {
	s := benchServer(r)
	p1, p2 := net.Pipe()
	b.Cleanup(func() {
		p2.Close()
		p1.Close()
		s.Close()
	})
	return s.newConn(p1, "PLAINTEXT")
}

// benchValues returns n values of size bytes.
func benchValues(n, size int) []string {
	v := strings.Repeat("x", size)
	out := make([]string, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// benchFrame is req framed as a client sends it, without the size prefix.
func benchFrame(req kmsg.Request) []byte { return encodeRequest(1, "bench", req)[4:] }

// fetchRecords is about n bytes of whole batches of 100-byte records.
func fetchRecords(n int) []byte {
	batch := makeBatch(1, benchValues(100, 100)...)
	var out []byte
	for len(out)+len(batch) <= n || len(out) == 0 {
		out = append(out, batch...)
	}
	return out
}

// BenchmarkProduce decodes a Produce v9 frame holding one batch of 100-byte
// records and appends it through a real partition.Manager (acks=1), then
// encodes the response: what the connection goroutine does per request,
// without the socket.
func BenchmarkProduce(b *testing.B) {
	for _, records := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("records=%d", records), func(b *testing.B) {
			m := benchManager(b)
			c := benchConn(b, m)
			batch := makeBatch(1, benchValues(records, 100)...)
			frame := benchFrame(produceRequest(9, 1, 30000, benchTP.Topic, 0, batch))
			// Append assigns offsets in the batch it is given, here inside
			// frame, and refuses a client's batch whose base offset is not
			// 0 (INVALID_RECORD): each round puts the 0 back.
			at := bytes.Index(frame, batch)
			rounds := int64(0)
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			for b.Loop() {
				binary.BigEndian.PutUint64(frame[at:], 0)
				if _, err := benchHandle(c, frame); err != nil {
					b.Fatal(err)
				}
				rounds++
			}
			// A refused append answers as fast as any: check they all landed.
			if hw, _, _, err := m.ListOffset(benchTP, partition.LatestTimestamp, -1, partition.AskerConsumer); err != nil || hw != rounds*int64(records) {
				b.Fatalf("high watermark %d (%v) after %d rounds of %d records", hw, err, rounds, records)
			}
		})
	}
}

// BenchmarkFetchEncode decodes a consumer Fetch v11 and encodes a response
// carrying size bytes of batches for one partition (the records come from
// a fixed slice, so this is protocol's encoding cost alone).
func BenchmarkFetchEncode(b *testing.B) {
	for _, size := range []int{16 << 10, 1 << 20} {
		b.Run("bytes="+strconv.Itoa(size), func(b *testing.B) {
			r := &fixedReplicas{records: fetchRecords(size), changed: make(chan struct{})}
			c := benchConn(b, r)
			frame := benchFrame(fetchRequest(11, 0, 1, benchTP.Topic, 0, 0))
			b.SetBytes(int64(len(r.records)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := benchHandle(c, frame); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFetchFromLog is a Fetch v11 answered from a real log: a
// partition.Manager leading benchTP with 8 MiB of 100-byte records on disk
// (in the page cache), read 1 MiB at a time by a consumer (replica=-1) or
// a follower (replica=2), and the response encoded, as the connection
// goroutine does it. It measures the read into memory, the encode copy and
// what both allocate.
func BenchmarkFetchFromLog(b *testing.B) {
	for _, replica := range []int32{-1, 2} {
		b.Run(fmt.Sprintf("replica=%d", replica), func(b *testing.B) {
			m := benchManager(b)
			batch := makeBatch(1, benchValues(1000, 100)...)
			for n := 0; n < 8<<20; n += len(batch) {
				// Append assigns offsets in the batch it is given.
				if _, err := m.Append(benchTP, bytes.Clone(batch), 1); err != nil {
					b.Fatal(err)
				}
			}
			c := benchConn(b, m)
			req := fetchRequest(11, 0, 1, benchTP.Topic, 0, 0)
			req.ReplicaID = replica
			frame := benchFrame(req)
			out, err := benchHandle(c, frame)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(out)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := benchHandle(c, frame); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// serverConnCases are the requests of BenchmarkServerConn and
// BenchmarkServerConnTLS, with what Read answers.
func serverConnCases() []serverConnCase {
	return []serverConnCase{
		{"produce=1KiB", nil, produceRequest(9, 1, 30000, benchTP.Topic, 0, makeBatch(1, benchValues(10, 100)...))},
		{"produce=100KiB", nil, produceRequest(9, 1, 30000, benchTP.Topic, 0, makeBatch(1, benchValues(1000, 100)...))},
		{"fetch=1MiB", fetchRecords(1 << 20), fetchRequest(11, 0, 1, benchTP.Topic, 0, 0)},
	}
}

type serverConnCase struct {
	name    string
	records []byte // what Read answers
	req     kmsg.Request
}

// benchListen serves s on a loopback listener that speaks proto; the
// server is closed when b ends.
func benchListen(b *testing.B, s *Server, proto string) net.Listener {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go s.Serve(l, proto)
	b.Cleanup(func() { s.Close() })
	return l
}

// benchServerConn dials l, wraps the connection with wrap (nil: none) and
// times round trips of req one at a time: framing, the per-connection
// buffers and the writer goroutine.
func benchServerConn(b *testing.B, l net.Listener, wrap func(net.Conn) net.Conn, req kmsg.Request) {
	b.Helper()
	nc, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	if wrap != nil {
		nc = wrap(nc)
	}
	defer nc.Close()
	frame := encodeRequest(1, "bench", req)
	var size [4]byte
	resp := make([]byte, 0, 2<<20)
	roundTrip := func() int {
		if _, err := nc.Write(frame); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(nc, size[:]); err != nil {
			b.Fatal(err)
		}
		n := int(size[0])<<24 | int(size[1])<<16 | int(size[2])<<8 | int(size[3])
		if _, err := io.ReadFull(nc, resp[:n]); err != nil {
			b.Fatal(err)
		}
		return n
	}
	n := roundTrip()
	b.SetBytes(int64(len(frame) + 4 + n))
	b.ReportAllocs()
	for b.Loop() {
		roundTrip()
	}
}

// BenchmarkServerConn sends requests one at a time over loopback TCP and
// reads each response (benchServerConn), with Replicas that do no work.
func BenchmarkServerConn(b *testing.B) {
	for _, tc := range serverConnCases() {
		b.Run(tc.name, func(b *testing.B) {
			s := benchServer(&fixedReplicas{records: tc.records, changed: make(chan struct{})})
			benchServerConn(b, benchListen(b, s, "PLAINTEXT"), nil, tc.req)
		})
	}
}

// BenchmarkClientFetch is the follower's side: BrokerClient.Fetch of one
// partition answered with 1 MiB of batches, over loopback.
func BenchmarkClientFetch(b *testing.B) {
	r := &fixedReplicas{records: fetchRecords(1 << 20), changed: make(chan struct{})}
	benchClientFetch(b, benchListen(b, benchServer(r), ProtocolPlaintext), ProtocolPlaintext, nil, len(r.records))
}

// benchClientFetch times BrokerClient.Fetch of benchTP from the broker
// listening on l (proto, with tc as the client's TLS if not nil), each
// answered with size bytes of records.
func benchClientFetch(b *testing.B, l net.Listener, proto string, tc *security.TLSContext, size int) {
	b.Helper()
	host, portStr, _ := net.SplitHostPort(l.Addr().String())
	port, _ := strconv.Atoi(portStr)
	broker := cluster.Broker{ID: 1, Endpoints: []cluster.Endpoint{{Listener: proto, SecurityProtocol: proto, Host: host, Port: int32(port)}}}
	cfg := ClientConfig{BrokerID: 2, ListenerName: proto,
		Resolve: func(int32) (cluster.Broker, bool) { return broker, true }}
	if tc != nil {
		cfg.Security.TLS = tc
	}
	cl := NewBrokerClient(cfg)
	defer cl.Close()
	req := partition.FetchRequest{ReplicaID: 2, MaxBytes: 10 << 20, MinBytes: 1, Partitions: []partition.FetchPartition{
		{TopicPartition: benchTP, FetchOffset: 0, CurrentLeaderEpoch: -1, MaxBytes: 2 << 20}}}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		resp, err := cl.Fetch(context.Background(), 1, req)
		if err != nil {
			b.Fatal(err)
		}
		if got := len(resp.Partitions[benchTP].Records); got != size {
			b.Fatalf("fetched %d bytes, want %d", got, size)
		}
		if resp.Release != nil {
			resp.Release() // as the fetcher does once it has appended
		}
	}
}

// benchHandle runs one frame through the connection's handler, as
// readLoop does, and returns the framed response.
func benchHandle(c *conn, frame []byte) ([]byte, error) {
	rf := &requestFrame{done: true} // the frame is the benchmark's, never pooled
	resp, err := c.handleFrame(frame, rf)
	if err != nil {
		return nil, err
	}
	b := resp.b
	if resp.later != nil {
		b = <-resp.later
	}
	putBuf(b) // as writeLoop does once written
	return b, nil
}
