package protocol

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/kafkazk/broker/cluster"
)

// preAuthProduceFrame is a size-prefixed Produce v9 frame of about size
// bytes whose topics array claims (size-40)/2 entries: decoding it, kmsg
// allocates make([]ProduceRequestTopic, n) (64 bytes each) before it
// notices that the bytes are not there.
func preAuthProduceFrame(size int) []byte {
	b := []byte{0, 0, 0, 0}
	b = binary.BigEndian.AppendUint16(b, uint16(produceKey))
	b = binary.BigEndian.AppendUint16(b, 9) // flexible
	b = binary.BigEndian.AppendUint32(b, 1)
	b = binary.BigEndian.AppendUint16(b, 0) // client id ""
	b = append(b, 0)                        // header tags
	b = append(b, 0)                        // transactional id: null
	b = binary.BigEndian.AppendUint16(b, 1) // acks
	b = binary.BigEndian.AppendUint32(b, 1000)
	n := (size - len(b) - 5) / 2
	b = binary.AppendUvarint(b, uint64(n+1))
	for len(b) < size {
		b = append(b, 0x01) // each "topic": an empty compact string, ...
	}
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// manyTagsBody appends a tag buffer of as many empty unknown tags as fit
// in a frame of limit bytes of which used are taken, and returns it and
// the count.
func manyTagsBody(b []byte, used, limit int) ([]byte, int) {
	n, total := 0, used+8
	for k := 0; ; k++ {
		e := len(binary.AppendUvarint(nil, uint64(k))) + 1
		if total+e > limit {
			break
		}
		total += e
		n++
	}
	b = binary.AppendUvarint(b, uint64(n))
	for k := 0; k < n; k++ {
		b = binary.AppendUvarint(b, uint64(k))
		b = append(b, 0) // size 0
	}
	return b, n
}

// apiVersionsTagsFrame is an unprefixed ApiVersions v3 frame whose body
// carries tags unknown tags (all that fit in limit bytes when tags < 0).
func apiVersionsTagsFrame(tags, limit int) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(apiVersionsKey))
	b = binary.BigEndian.AppendUint16(b, 3)
	b = binary.BigEndian.AppendUint32(b, 1)
	b = binary.BigEndian.AppendUint16(b, 0) // client id ""
	b = append(b, 0)                        // header tags
	b = append(b, 2, 'x')                   // software name
	b = append(b, 2, '1')                   // software version
	if tags >= 0 {
		b = binary.AppendUvarint(b, uint64(tags))
		for k := 0; k < tags; k++ {
			b = binary.AppendUvarint(b, uint64(k))
			b = append(b, 0)
		}
		return b
	}
	b, _ = manyTagsBody(b, len(b), limit)
	return b
}

func prefixed(frame []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(frame))), frame...)
}

// TestPreAuthRefusedKeyNotDecoded is CVE-2022-34917's other half: a
// frame of sasl.server.max.receive.size whose key the SASL stage does not
// allow is refused from its header, before kmsg decodes the body (which
// allocates ~90 times the frame for this Produce). Allocation for the
// refused frames stays under 4 times their bytes, and each connection
// closes unanswered; a Produce after SaslHandshake is refused the same way.
func TestPreAuthRefusedKeyNotDecoded(t *testing.T) {
	b := startBroker(t, secured(ListenerSecurity{Protocol: ProtocolSASLPlaintext, SASL: saslConfig(t)}, nil))
	frame := preAuthProduceFrame(int(DefaultMaxReceiveBeforeAuth) - 4)
	const conns = 8
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := 0; i < conns; i++ {
		c := b.dial(t)
		if i%2 == 1 { // at the authenticate stage
			if hs := c.roundTrip(handshake(1, "PLAIN")).(*kmsg.SASLHandshakeResponse); hs.ErrorCode != 0 {
				t.Fatal(kerr.ErrorForCode(hs.ErrorCode))
			}
		}
		if _, err := c.c.Write(frame); err != nil {
			t.Fatal(err)
		}
		c.expectClosed()
	}
	runtime.ReadMemStats(&after)
	grew := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d refused pre-auth %d-byte frames: %d KiB allocated (%.2fx their bytes)",
		conns, len(frame), grew>>10, float64(grew)/float64(conns*len(frame)))
	if limit := uint64(4 * conns * len(frame)); grew > limit {
		t.Fatalf("refused pre-auth frames allocated %d bytes, want under %d: their bodies were decoded", grew, limit)
	}
}

// TestPreAuthOneApiVersions: as Kafka's SaslServerAuthenticator, one
// ApiVersions is served before SaslHandshake; a second closes the
// connection. One at a version above ours (answered UNSUPPORTED_VERSION)
// leaves room for one retry (at our version), but not for more.
func TestPreAuthOneApiVersions(t *testing.T) {
	b := startBroker(t, secured(ListenerSecurity{Protocol: ProtocolSASLPlaintext, SASL: saslConfig(t)}, nil))
	av := func(v int16) *kmsg.ApiVersionsRequest {
		r := kmsg.NewPtrApiVersionsRequest()
		r.Version, r.ClientSoftwareName, r.ClientSoftwareVersion = v, "raw", "1"
		return r
	}
	c := b.dial(t)
	if r := c.roundTrip(av(3)).(*kmsg.ApiVersionsResponse); r.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(r.ErrorCode))
	}
	c.send(av(3))
	c.expectClosed()

	// The one ApiVersions, then the exchange, then anything.
	c = b.dial(t)
	c.roundTrip(av(3))
	if r := c.authV1(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism(), 2); r.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(r.ErrorCode))
	}
	metadataWorks(t, c)
	if r := c.roundTrip(av(3)).(*kmsg.ApiVersionsResponse); r.ErrorCode != 0 {
		t.Fatalf("ApiVersions after authentication: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	// Above our range, then the retry at ours, then SaslHandshake.
	above := func(c *rawConn) {
		t.Helper()
		c.corr++
		req := encodeRequest(c.corr, "raw", av(0))
		binary.BigEndian.PutUint16(req[6:], 0x7fff) // api version
		if _, err := c.c.Write(req); err != nil {
			t.Fatal(err)
		}
		_, body, err := c.readFrame(false)
		if err != nil {
			t.Fatalf("ApiVersions above our range: %v", err)
		}
		r := kmsg.NewPtrApiVersionsResponse()
		if err := r.ReadFrom(body); err != nil || r.ErrorCode != kerr.UnsupportedVersion.Code {
			t.Fatalf("ApiVersions above our range: %v %v, want UNSUPPORTED_VERSION", err, kerr.ErrorForCode(r.ErrorCode))
		}
	}
	c = b.dial(t)
	above(c)
	c.roundTrip(av(3))
	if hs := c.roundTrip(handshake(1, "PLAIN")).(*kmsg.SASLHandshakeResponse); hs.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(hs.ErrorCode))
	}
	// Two above our range use up the retry.
	c = b.dial(t)
	above(c)
	above(c)
	c.send(av(3))
	c.expectClosed()

	// None after SaslHandshake.
	c = b.dial(t)
	c.roundTrip(handshake(1, "PLAIN"))
	c.send(av(3))
	c.expectClosed()
}

// TestPreAuthTagsBounded: ApiVersions v3 (and SaslAuthenticate v2) are
// decoded before authentication only when each tag buffer holds at most
// maxPreAuthTags tags; 130k unknown tags in a 512 KiB ApiVersions (20 MiB
// of kmsg allocations) close the connection at a small fraction of that.
// After authentication the same request is decoded as before.
func TestPreAuthTagsBounded(t *testing.T) {
	b := startBroker(t, secured(ListenerSecurity{Protocol: ProtocolSASLPlaintext, SASL: saslConfig(t)}, nil))
	frame := prefixed(apiVersionsTagsFrame(-1, int(DefaultMaxReceiveBeforeAuth)))
	const conns = 4
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := 0; i < conns; i++ {
		c := b.dial(t)
		if _, err := c.c.Write(frame); err != nil {
			t.Fatal(err)
		}
		c.expectClosed()
	}
	runtime.ReadMemStats(&after)
	grew := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d pre-auth ApiVersions of %d bytes full of tags: %d KiB allocated (%.2fx their bytes)",
		conns, len(frame), grew>>10, float64(grew)/float64(conns*len(frame)))
	if limit := uint64(4 * conns * len(frame)); grew > limit {
		t.Fatalf("allocated %d bytes, want under %d: the tags were decoded", grew, limit)
	}

	// A few tags are fine.
	c := b.dial(t)
	c.c.Write(prefixed(apiVersionsTagsFrame(maxPreAuthTags, 0)))
	if _, _, err := c.readFrame(false); err != nil {
		t.Fatalf("ApiVersions with %d tags before authentication: %v", maxPreAuthTags, err)
	}

	// The bound is for unauthenticated connections only.
	s := NewServer(Config{})
	if _, err := parseRequest(apiVersionsTagsFrame(1000, 0), s.apis); err != nil {
		t.Fatalf("authenticated ApiVersions with 1000 tags: %v", err)
	}
}

// TestParseRequestBoundedTags: each tag buffer of a pre-auth request,
// the header's and the body's, is counted before kmsg decodes it.
func TestParseRequestBoundedTags(t *testing.T) {
	s := NewServer(Config{})
	header := func(key, version int16) []byte {
		b := binary.BigEndian.AppendUint16(nil, uint16(key))
		b = binary.BigEndian.AppendUint16(b, uint16(version))
		b = binary.BigEndian.AppendUint32(b, 7)
		return binary.BigEndian.AppendUint16(b, 0)
	}
	tags := func(b []byte, n int) []byte {
		b = binary.AppendUvarint(b, uint64(n))
		for k := 0; k < n; k++ {
			b = append(b, byte(k), 0)
		}
		return b
	}
	auth := func(headerTags, bodyTags int) []byte {
		b := tags(header(saslAuthenticateKey, 2), headerTags)
		b = append(b, 4, 'a', 'b', 'c') // compact bytes
		return tags(b, bodyTags)
	}
	for _, tc := range []struct {
		name  string
		frame []byte
		ok    bool
	}{
		{"SaslAuthenticate v2, no tags", auth(0, 0), true},
		{"SaslAuthenticate v2, the most tags", auth(maxPreAuthTags, maxPreAuthTags), true},
		{"SaslAuthenticate v2, body tags", auth(0, maxPreAuthTags+1), false},
		{"SaslAuthenticate v2, header tags", auth(maxPreAuthTags+1, 0), false},
		{"ApiVersions v3, body tags", apiVersionsTagsFrame(maxPreAuthTags+1, 0), false},
		{"ApiVersions v3, the most tags", apiVersionsTagsFrame(maxPreAuthTags, 0), true},
	} {
		_, err := parseRequestBounded(tc.frame, s.apis, true)
		if tc.ok && err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if !tc.ok && !errors.Is(err, errTooManyTags) {
			t.Errorf("%s: %v, want errTooManyTags", tc.name, err)
		}
		if _, err := parseRequest(tc.frame, s.apis); err != nil {
			t.Errorf("%s unbounded: %v", tc.name, err)
		}
	}
}

// TestSASLFailedAuthReleasesBudget: a failed authentication gives back
// its frame's queued.max.request.bytes share before it waits out
// connection.failed.authentication.delay.ms, so a client that fails with
// a frame the size of the budget does not stall every other connection
// for the delay. The delay here is far longer than the test's reads
// wait; only the release lets the second client in.
func TestSASLFailedAuthReleasesBudget(t *testing.T) {
	const budget = 64 << 10
	b := startBroker(t, secured(ListenerSecurity{Protocol: ProtocolSASLPlaintext, SASL: saslConfig(t)}, nil,
		func(c *Config) { c.FailedAuthDelay, c.QueuedMaxRequestBytes = time.Hour, budget }))
	bad := b.dial(t)
	if hs := bad.roundTrip(handshake(1, "PLAIN")).(*kmsg.SASLHandshakeResponse); hs.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(hs.ErrorCode))
	}
	// Larger than the budget: it takes all of it, and every other frame
	// waits until it is given back.
	bad.send(authenticate(1, plainToken("alice", strings.Repeat("x", budget))))
	// Only an ordering aid (with the release the test passes either way):
	// let the server read the failing frame before the next one.
	time.Sleep(100 * time.Millisecond)
	good := b.dial(t)
	if r := good.authV1(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism(), 1); r.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(r.ErrorCode))
	}
	metadataWorks(t, good)
}

// TestSessionRenewAt: a session without a lifetime is never renewed (the
// zero time), so a re-authentication answering SessionLifetimeMs 0 does
// not leave the connection re-authenticating on every round trip.
func TestSessionRenewAt(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if got := sessionRenewAt(now, 0); !got.IsZero() {
		t.Fatalf("lifetime 0: renew at %v, want never", got)
	}
	if got := sessionRenewAt(now, -1); !got.IsZero() {
		t.Fatalf("lifetime -1: renew at %v, want never", got)
	}
	if got, want := sessionRenewAt(now, 100_000), now.Add(85*time.Second); !got.Equal(want) {
		t.Fatalf("lifetime 100s: renew at %v, want %v", got, want)
	}
}

// TestBrokerClientZeroLifetimeReauthNotRepeated: a broker whose
// re-authentication answers SessionLifetimeMs 0 (the session no longer
// expires) is not re-authenticated again on every request. The broker is
// a fake that answers SaslHandshake, SaslAuthenticate (with the lifetime
// the test sets) and UpdateMetadata, counting handshakes.
func TestBrokerClientZeroLifetimeReauthNotRepeated(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var handshakes atomic.Int32
	var lifetimeMs atomic.Int64
	lifetimeMs.Store(time.Hour.Milliseconds())
	serve := func(nc net.Conn) {
		defer nc.Close()
		br := bufio.NewReader(nc)
		for {
			frame, err := readFrame(br, 1<<20)
			if err != nil {
				return
			}
			req, err := parseRequest(frame, supportedAPIs)
			if err != nil {
				t.Errorf("fake broker: %v", err)
				return
			}
			var resp kmsg.Response
			switch r := req.kreq.(type) {
			case *kmsg.SASLHandshakeRequest:
				handshakes.Add(1)
				resp = r.ResponseKind()
			case *kmsg.SASLAuthenticateRequest:
				ar := r.ResponseKind().(*kmsg.SASLAuthenticateResponse)
				ar.SASLAuthBytes, ar.SessionLifetimeMillis = []byte{}, lifetimeMs.Load()
				resp = ar
			case *kmsg.UpdateMetadataRequest:
				resp = r.ResponseKind()
			default:
				t.Errorf("fake broker: unexpected key %d", req.key)
				return
			}
			if _, err := nc.Write(appendResponse(nil, req.correlationID, resp)); err != nil {
				return
			}
		}
	}
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(nc)
		}
	}()
	addr := ln.Addr().(*net.TCPAddr)
	fake := cluster.Broker{ID: 1, Endpoints: []cluster.Endpoint{
		{Listener: "PLAINTEXT", SecurityProtocol: ProtocolSASLPlaintext, Host: "127.0.0.1", Port: int32(addr.Port)}}}
	c := NewBrokerClient(ClientConfig{
		BrokerID:       2,
		ListenerName:   "PLAINTEXT",
		Resolve:        func(int32) (cluster.Broker, bool) { return fake, true },
		RequestTimeout: 10 * time.Second,
		Security:       ClientSecurity{SASL: kgoMechanism("PLAIN", "alice", "alice-secret")},
		Log:            zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel),
	})
	t.Cleanup(c.Close)
	update := func() {
		t.Helper()
		if err := c.UpdateMetadata(context.Background(), fake, sampleUpdateMetadata(5, 42)); err != nil {
			t.Fatal(err)
		}
	}
	update()
	if n := handshakes.Load(); n != 1 {
		t.Fatalf("%d handshakes after the first request, want 1", n)
	}
	// The broker's sessions stop expiring; the client's reaches its
	// renewal point.
	lifetimeMs.Store(0)
	for _, bc := range c.conns {
		bc.renewAt = time.Now().Add(-time.Second)
	}
	update()
	if n := handshakes.Load(); n != 2 {
		t.Fatalf("%d handshakes after the renewal point, want 2 (one re-authentication)", n)
	}
	for i := 0; i < 3; i++ {
		update()
	}
	if n := handshakes.Load(); n != 2 {
		t.Fatalf("%d handshakes after three more requests, want still 2: the client re-authenticates a session without a lifetime", n)
	}
}
