package protocol

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/security"
)

// Tests of the connection's security: TLS listeners, SASL (SaslHandshake
// v0 and v1, SaslAuthenticate), the limits before authentication,
// re-authentication, principals, and the inter-broker client's side.

// testPKI is a throwaway CA with certificates it signed, as PEM text.
type testPKI struct {
	t      *testing.T
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	caPEM  string
	serial int64
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	return &testPKI{t: t, ca: ca, caKey: key, serial: 1,
		caPEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))}
}

// issue returns a certificate (for 127.0.0.1, server and client use) and
// its PKCS#8 key, as PEM.
func (p *testPKI) issue(subject pkix.Name) (certPEM, keyPEM string) {
	p.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		p.t.Fatal(err)
	}
	p.serial++
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(p.serial), Subject: subject,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		p.t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		p.t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}))
}

func (p *testPKI) context(s security.TLSSettings, opts security.TLSOptions) *security.TLSContext {
	p.t.Helper()
	if s.TruststoreCertificates == "" && s.TruststoreLocation == "" {
		s.TruststoreType, s.TruststoreCertificates = "PEM", p.caPEM
	}
	if s.KeystoreType == "" && (s.KeystoreCertificateChain != "" || s.KeystoreLocation != "") {
		s.KeystoreType = "PEM"
	}
	if s.EnabledProtocols == nil {
		s.EnabledProtocols = []string{"TLSv1.2", "TLSv1.3"}
	}
	opts.Log = zerolog.New(zerolog.NewTestWriter(p.t)).Level(zerolog.InfoLevel)
	c, err := security.NewTLSContext(s, opts)
	if err != nil {
		p.t.Fatal(err)
	}
	return c
}

// serverTLS is a listener's TLSContext for 127.0.0.1 with clientAuth.
func (p *testPKI) serverTLS(clientAuth string) *security.TLSContext {
	cert, key := p.issue(pkix.Name{CommonName: "broker"})
	return p.context(security.TLSSettings{KeystoreCertificateChain: cert, KeystoreKey: key, ClientAuth: clientAuth}, security.TLSOptions{})
}

// clientTLS is a client config trusting the CA, with a client
// certificate of subject if it is not empty.
func (p *testPKI) clientTLS(subject pkix.Name) *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(p.ca)
	cfg := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	if subject.CommonName != "" {
		cert, key := p.issue(subject)
		pair, err := tls.X509KeyPair([]byte(cert), []byte(key))
		if err != nil {
			p.t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg
}

// testUsers are the PLAIN and SCRAM users of the SASL tests.
var testUsers = security.PlainUsers{"alice": "alice-secret", "bob": "bob-secret"}

func testScramCache(t *testing.T) *security.ScramCredentialCache {
	t.Helper()
	c := &security.ScramCredentialCache{}
	for user, pass := range testUsers {
		for _, m := range security.ScramMechanisms {
			cred, err := security.GenerateScramCredential(m, pass, 4096)
			if err != nil {
				t.Fatal(err)
			}
			c.Set(m, user, cred)
		}
	}
	return c
}

func saslConfig(t *testing.T) security.SASLConfig {
	return security.SASLConfig{EnabledMechanisms: []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"},
		Plain: testUsers, Scram: testScramCache(t)}
}

// principals records what connections authenticated as.
type principals struct {
	mu      sync.Mutex
	got     []security.KafkaPrincipal
	reauths int
}

func (p *principals) add(_ string, pr security.KafkaPrincipal, reauth bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if reauth {
		p.reauths++
		return
	}
	p.got = append(p.got, pr)
}

func (p *principals) reauthentications() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reauths
}

func (p *principals) list() []security.KafkaPrincipal {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]security.KafkaPrincipal(nil), p.got...)
}

// fakeClock is the server's clock of session lifetimes.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// secured makes the test broker's PLAINTEXT-named listener use ls, and
// records principals in rec.
func secured(ls ListenerSecurity, rec *principals, more ...func(*Config)) brokerOption {
	return func(c *Config) {
		c.Listeners = map[string]ListenerSecurity{"PLAINTEXT": ls}
		if rec != nil {
			c.onAuthenticated = rec.add
		}
		for _, m := range more {
			m(c)
		}
	}
}

func produceConsume(t *testing.T, b *testBroker, value []byte, opts ...kgo.Opt) {
	t.Helper()
	createTopic(t, b, "sec", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	prod := newClient(t, b, append(opts, kgo.DefaultProduceTopic("sec"), kgo.ProducerBatchMaxBytes(1<<20))...)
	if err := prod.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	cons := newClient(t, b, append(opts, kgo.ConsumeTopics("sec"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(2<<20))...)
	for {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consume: %v", err)
		}
		if errs := fs.Errors(); len(errs) > 0 {
			t.Fatalf("consume: %v", errs[0].Err)
		}
		if recs := fs.Records(); len(recs) > 0 {
			if len(recs[0].Value) != len(value) {
				t.Fatalf("consumed %d bytes, want %d", len(recs[0].Value), len(value))
			}
			return
		}
	}
}

func kgoMechanism(name, user, pass string) sasl.Mechanism {
	m, err := SASLMechanism(name, user, pass)
	if err != nil {
		panic(err)
	}
	return m
}

// TestKgoSASL produces and consumes with kgo over SASL_PLAINTEXT and
// SASL_SSL with each mechanism (SaslHandshake v1, SaslAuthenticate), and
// checks the principal. The record is 600 KiB: above
// sasl.server.max.receive.size, which binds only before authentication.
func TestKgoSASL(t *testing.T) {
	pki := newTestPKI(t)
	big := make([]byte, 600<<10)
	for _, tc := range []struct {
		protocol, mechanism string
	}{
		{ProtocolSASLPlaintext, "PLAIN"},
		{ProtocolSASLPlaintext, "SCRAM-SHA-256"},
		{ProtocolSASLSSL, "SCRAM-SHA-512"},
		{ProtocolSASLSSL, "PLAIN"},
	} {
		t.Run(tc.protocol+"/"+tc.mechanism, func(t *testing.T) {
			ls := ListenerSecurity{Protocol: tc.protocol, SASL: saslConfig(t)}
			opts := []kgo.Opt{kgo.SASL(kgoMechanism(tc.mechanism, "alice", "alice-secret"))}
			if tc.protocol == ProtocolSASLSSL {
				ls.TLS = pki.serverTLS("none")
				opts = append(opts, kgo.DialTLSConfig(pki.clientTLS(pkix.Name{})))
			}
			rec := &principals{}
			b := startBroker(t, secured(ls, rec))
			produceConsume(t, b, big, opts...)
			got := rec.list()
			if len(got) == 0 {
				t.Fatal("no connection authenticated")
			}
			for _, p := range got {
				if p != security.User("alice") {
					t.Fatalf("principal %v, want User:alice", p)
				}
			}
		})
	}
}

// saslRaw is a raw connection to a SASL listener.
func (b *testBroker) dialTLS(t *testing.T, cfg *tls.Config) *rawConn {
	t.Helper()
	c, err := tls.Dial("tcp", b.addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c}
}

func handshake(v int16, mechanism string) *kmsg.SASLHandshakeRequest {
	r := kmsg.NewPtrSASLHandshakeRequest()
	r.Version, r.Mechanism = v, mechanism
	return r
}

func authenticate(v int16, msg []byte) *kmsg.SASLAuthenticateRequest {
	r := kmsg.NewPtrSASLAuthenticateRequest()
	r.Version, r.SASLAuthBytes = v, msg
	return r
}

func plainToken(user, pass string) []byte { return []byte("\x00" + user + "\x00" + pass) }

// authV1 runs a whole SaslHandshake v1 / SaslAuthenticate exchange with a
// franz-go client mechanism and returns the last response.
func (r *rawConn) authV1(m sasl.Mechanism, authVersion int16) *kmsg.SASLAuthenticateResponse {
	r.t.Helper()
	if hs := r.roundTrip(handshake(1, m.Name())).(*kmsg.SASLHandshakeResponse); hs.ErrorCode != 0 {
		r.t.Fatalf("handshake: %v", kerr.ErrorForCode(hs.ErrorCode))
	}
	session, msg, err := m.Authenticate(context.Background(), "127.0.0.1")
	if err != nil {
		r.t.Fatal(err)
	}
	for {
		resp := r.roundTrip(authenticate(authVersion, msg)).(*kmsg.SASLAuthenticateResponse)
		if resp.ErrorCode != 0 {
			return resp
		}
		done, next, err := session.Challenge(resp.SASLAuthBytes)
		if err != nil {
			r.t.Fatal(err)
		}
		if done {
			return resp
		}
		msg = next
	}
}

// writeRaw sends a raw SASL token (v0 framing) and reads the answer.
func (r *rawConn) rawToken(tok []byte) ([]byte, error) {
	r.t.Helper()
	b := binary.BigEndian.AppendUint32(nil, uint32(len(tok)))
	if _, err := r.c.Write(append(b, tok...)); err != nil {
		return nil, err
	}
	r.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var size [4]byte
	if _, err := readFull(r.c, size[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err := readFull(r.c, body)
	return body, err
}

func readFull(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := c.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func metadataWorks(t *testing.T, r *rawConn) {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 9
	if resp := r.roundTrip(req).(*kmsg.MetadataResponse); len(resp.Brokers) == 0 {
		t.Fatal("metadata without brokers")
	}
}

// TestSASLHandshakeV0RawTokens is Kafka's v0 framing: after SaslHandshake
// v0 the client sends raw tokens and gets raw tokens back, for PLAIN and
// SCRAM; then requests are served as that user.
func TestSASLHandshakeV0RawTokens(t *testing.T) {
	rec := &principals{}
	b := startBroker(t, secured(ListenerSecurity{Protocol: ProtocolSASLPlaintext, SASL: saslConfig(t)}, rec))

	c := b.dial(t)
	if hs := c.roundTrip(handshake(0, "PLAIN")).(*kmsg.SASLHandshakeResponse); hs.ErrorCode != 0 {
		t.Fatalf("handshake v0: %v", kerr.ErrorForCode(hs.ErrorCode))
	}
	resp, err := c.rawToken(plainToken("bob", "bob-secret"))
	if err != nil || len(resp) != 0 {
		t.Fatalf("PLAIN raw answer %q, %v; want an empty token", resp, err)
	}
	metadataWorks(t, c)

	for _, mech := range []sasl.Mechanism{
		scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism(),
		scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism(),
	} {
		c := b.dial(t)
		if hs := c.roundTrip(handshake(0, mech.Name())).(*kmsg.SASLHandshakeResponse); hs.ErrorCode != 0 {
			t.Fatalf("handshake v0: %v", kerr.ErrorForCode(hs.ErrorCode))
		}
		session, msg, err := mech.Authenticate(context.Background(), "127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		for done := false; !done; {
			answer, err := c.rawToken(msg)
			if err != nil {
				t.Fatalf("%s raw exchange: %v", mech.Name(), err)
			}
			if done, msg, err = session.Challenge(answer); err != nil {
				t.Fatalf("%s: %v", mech.Name(), err)
			}
		}
		metadataWorks(t, c)
	}
	want := []security.KafkaPrincipal{security.User("bob"), security.User("alice"), security.User("alice")}
	if got := rec.list(); len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("principals %v, want %v", got, want)
	}

	// A wrong password in the v0 framing: no room for an error, the
	// connection closes.
	c = b.dial(t)
	c.roundTrip(handshake(0, "PLAIN"))
	if _, err := c.rawToken(plainToken("bob", "wrong")); err == nil {
		t.Fatal("wrong password over v0 got an answer")
	}
}

// TestSASLWrongPasswordDelayedThenClosed: SASL_AUTHENTICATION_FAILED no
// sooner than connection.failed.authentication.delay.ms, then the
// connection closes; kgo sees the same error.
func TestSASLWrongPasswordDelayedThenClosed(t *testing.T) {
	const delay = 300 * time.Millisecond
	b := startBroker(t, secured(ListenerSecurity{Protocol: ProtocolSASLPlaintext, SASL: saslConfig(t)}, nil,
		func(c *Config) { c.FailedAuthDelay = delay }))
	for _, mech := range []sasl.Mechanism{
		plain.Auth{User: "alice", Pass: "wrong"}.AsMechanism(),
		scram.Auth{User: "alice", Pass: "wrong"}.AsSha256Mechanism(),
		plain.Auth{User: "nobody", Pass: "x"}.AsMechanism(),
		plain.Auth{Zid: "bob", User: "alice", Pass: "alice-secret"}.AsMechanism(), // CVE-2017-12610
	} {
		c := b.dial(t)
		start := time.Now()
		resp := c.authV1(mech, 2)
		if took := time.Since(start); took < delay {
			t.Fatalf("%s: failure answered after %v, want at least %v", mech.Name(), took, delay)
		}
		if resp.ErrorCode != kerr.SaslAuthenticationFailed.Code {
			t.Fatalf("%s: error %v, want SASL_AUTHENTICATION_FAILED", mech.Name(), kerr.ErrorForCode(resp.ErrorCode))
		}
		if resp.ErrorMessage == nil || *resp.ErrorMessage == "" {
			t.Fatalf("%s: no error message", mech.Name())
		}
		c.expectClosed()
	}

	cl := newClient(t, b, kgo.SASL(plain.Auth{User: "alice", Pass: "wrong"}.AsMechanism()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := cl.Ping(ctx)
	if !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("kgo: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
}

// TestSASLUnsupportedMechanism answers UNSUPPORTED_SASL_MECHANISM with
// the enabled mechanisms, then closes.
func TestSASLUnsupportedMechanism(t *testing.T) {
	cfg := saslConfig(t)
	cfg.EnabledMechanisms = []string{"SCRAM-SHA-512"}
	b := startBroker(t, secured(ListenerSecurity{Protocol: ProtocolSASLPlaintext, SASL: cfg}, nil))
	for _, mech := range []string{"GSSAPI", "PLAIN", "OAUTHBEARER"} {
		c := b.dial(t)
		hs := c.roundTrip(handshake(1, mech)).(*kmsg.SASLHandshakeResponse)
		if hs.ErrorCode != kerr.UnsupportedSaslMechanism.Code {
			t.Fatalf("%s: %v, want UNSUPPORTED_SASL_MECHANISM", mech, kerr.ErrorForCode(hs.ErrorCode))
		}
		if len(hs.SupportedMechanisms) != 1 || hs.SupportedMechanisms[0] != "SCRAM-SHA-512" {
			t.Fatalf("mechanisms %v", hs.SupportedMechanisms)
		}
		c.expectClosed()
	}
}

// TestSASLRequestsBeforeAuthentication: ApiVersions is served before
// authentication; any other request, or SaslAuthenticate before a
// handshake, or a request other than SaslAuthenticate after one, closes
// the connection unanswered.
func TestSASLRequestsBeforeAuthentication(t *testing.T) {
	b := startBroker(t, secured(ListenerSecurity{Protocol: ProtocolSASLPlaintext, SASL: saslConfig(t)}, nil))
	createTopic(t, b, "t", 1)
	c := b.dial(t)
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	av.ClientSoftwareName, av.ClientSoftwareVersion = "raw", "1"
	resp := c.roundTrip(av).(*kmsg.ApiVersionsResponse)
	has := map[int16]bool{}
	for _, k := range resp.ApiKeys {
		has[k.ApiKey] = true
	}
	if !has[saslHandshakeKey] || !has[saslAuthenticateKey] {
		t.Fatal("ApiVersions does not advertise SaslHandshake and SaslAuthenticate")
	}
	meta := kmsg.NewPtrMetadataRequest()
	meta.Version = 9
	c.send(meta)
	c.expectClosed()

	c = b.dial(t)
	c.send(produceRequest(9, 1, 1000, "t", 0, makeBatch(0, "unauthenticated")))
	c.expectClosed()
	if n := b.replicas.logEnd(cluster.TopicPartition{Topic: "t", Partition: 0}); n != 0 {
		t.Fatalf("log end %d: records appended before authentication", n)
	}

	c = b.dial(t)
	c.send(authenticate(1, plainToken("alice", "alice-secret")))
	c.expectClosed()

	c = b.dial(t)
	c.roundTrip(handshake(1, "PLAIN"))
	c.send(meta)
	c.expectClosed()

	// After authentication a second handshake (no session lifetime) or
	// SaslAuthenticate is ILLEGAL_SASL_STATE, and the connection stays.
	c = b.dial(t)
	if r := c.authV1(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism(), 1); r.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(r.ErrorCode))
	}
	if hs := c.roundTrip(handshake(1, "PLAIN")).(*kmsg.SASLHandshakeResponse); hs.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("handshake after authentication: %v", kerr.ErrorForCode(hs.ErrorCode))
	}
	if ar := c.roundTrip(authenticate(1, nil)).(*kmsg.SASLAuthenticateResponse); ar.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("authenticate after authentication: %v", kerr.ErrorForCode(ar.ErrorCode))
	}
	metadataWorks(t, c)
}

// TestSASLHugeSizePrefixBeforeAuth is CVE-2022-34917: a 1 GiB size
// prefix before authentication closes the connection and allocates
// nothing near its size; 512 KiB + 1 is refused too.
func TestSASLHugeSizePrefixBeforeAuth(t *testing.T) {
	b := startBroker(t, secured(ListenerSecurity{Protocol: ProtocolSASLPlaintext, SASL: saslConfig(t)}, nil),
		func(c *Config) { c.MaxRequestBytes = 1<<31 - 1 })
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := 0; i < 5; i++ {
		c := b.dial(t)
		if _, err := c.c.Write([]byte{0x40, 0, 0, 0}); err != nil { // 1 GiB
			t.Fatal(err)
		}
		c.expectClosed()
	}
	runtime.ReadMemStats(&after)
	grew := after.TotalAlloc - before.TotalAlloc
	if grew > 8<<20 {
		t.Fatalf("five 1 GiB size prefixes allocated %d bytes", grew)
	}
	t.Logf("five 1 GiB size prefixes refused: %d bytes allocated in the whole process meanwhile", grew)

	c := b.dial(t)
	c.c.Write(binary.BigEndian.AppendUint32(nil, uint32(DefaultMaxReceiveBeforeAuth)+1))
	c.expectClosed()
}

// TestReadFrameSizeRefusesWithoutAllocating measures the size check
// itself: refusing a 1 GiB prefix allocates nothing beyond the error.
func TestReadFrameSizeRefusesWithoutAllocating(t *testing.T) {
	prefix := []byte{0x40, 0, 0, 0}
	r := &bytesReader{}
	refuse := func() {
		r.b = prefix
		if _, err := readFrameSize(r, minHeaderBytes, DefaultMaxReceiveBeforeAuth); err == nil {
			t.Fatal("1 GiB accepted")
		}
	}
	allocs := testing.AllocsPerRun(100, refuse)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < 100; i++ {
		refuse()
	}
	runtime.ReadMemStats(&after)
	// The wrapped error and its formatting only: a few small objects.
	if perRun := (after.TotalAlloc - before.TotalAlloc) / 100; allocs > 8 || perRun > 1024 {
		t.Fatalf("refusing a 1 GiB prefix: %v allocations, %d bytes", allocs, perRun)
	}
	t.Logf("refusing a 1 GiB prefix: %v allocations, %d bytes", allocs, (after.TotalAlloc-before.TotalAlloc)/100)
}

type bytesReader struct{ b []byte }

func (r *bytesReader) Read(p []byte) (int, error) {
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

// TestSASLReauthentication is KIP-368: SessionLifetimeMs is
// connections.max.reauth.ms; a re-authentication on the live connection
// extends the session; a request past the session's end closes the
// connection; re-authenticating as another user fails.
func TestSASLReauthentication(t *testing.T) {
	clock := newFakeClock()
	const lifetime = 10 * time.Second
	rec := &principals{}
	b := startBroker(t, secured(ListenerSecurity{Protocol: ProtocolSASLPlaintext, SASL: saslConfig(t)}, rec,
		func(c *Config) { c.MaxReauth, c.now = lifetime, clock.Now }))
	alice := scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()

	c := b.dial(t)
	if r := c.authV1(alice, 1); r.ErrorCode != 0 || r.SessionLifetimeMillis != lifetime.Milliseconds() {
		t.Fatalf("error %v, session lifetime %d ms, want %d", kerr.ErrorForCode(r.ErrorCode), r.SessionLifetimeMillis, lifetime.Milliseconds())
	}
	clock.Advance(8 * time.Second)
	metadataWorks(t, c)
	if r := c.authV1(alice, 1); r.ErrorCode != 0 || r.SessionLifetimeMillis != lifetime.Milliseconds() {
		t.Fatalf("re-authentication: %v, lifetime %d", kerr.ErrorForCode(r.ErrorCode), r.SessionLifetimeMillis)
	}
	clock.Advance(8 * time.Second) // past the first session, within the second
	metadataWorks(t, c)
	clock.Advance(3 * time.Second) // past the second
	meta := kmsg.NewPtrMetadataRequest()
	c.send(meta)
	c.expectClosed()

	// Re-authenticating as someone else fails and closes.
	c = b.dial(t)
	c.authV1(alice, 2)
	clock.Advance(2 * time.Second)
	c.send(handshake(1, "PLAIN")) // another mechanism: refused unanswered
	c.expectClosed()

	c = b.dial(t)
	c.authV1(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism(), 2)
	clock.Advance(2 * time.Second)
	if r := c.authV1(plain.Auth{User: "bob", Pass: "bob-secret"}.AsMechanism(), 2); r.ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("re-authentication as bob: %v, want SASL_AUTHENTICATION_FAILED", kerr.ErrorForCode(r.ErrorCode))
	}
	c.expectClosed()
}

// TestMutualTLSPrincipal: on an SSL listener the client certificate's DN,
// mapped by ssl.principal.mapping.rules, is the principal; without a
// certificate (ssl.client.auth=requested) it is User:ANONYMOUS, and with
// required a client without one cannot connect.
func TestMutualTLSPrincipal(t *testing.T) {
	pki := newTestPKI(t)
	mapper, err := security.ParsePrincipalMappingRules("RULE:^CN=([^,]+),OU=.*$/$1/L,DEFAULT")
	if err != nil {
		t.Fatal(err)
	}
	rec := &principals{}
	b := startBroker(t, secured(ListenerSecurity{Protocol: ProtocolSSL, TLS: pki.serverTLS("requested"), PrincipalMapper: mapper}, rec))
	produceConsume(t, b, []byte("mtls"), kgo.DialTLSConfig(pki.clientTLS(pkix.Name{CommonName: "Alice", OrganizationalUnit: []string{"Eng"}})))
	for _, p := range rec.list() {
		if p != security.User("alice") {
			t.Fatalf("principal %v, want User:alice", p)
		}
	}
	rec.mu.Lock()
	rec.got = nil
	rec.mu.Unlock()
	c := b.dialTLS(t, pki.clientTLS(pkix.Name{}))
	metadataWorks(t, c)
	if got := rec.list(); len(got) != 1 || got[0] != security.Anonymous {
		t.Fatalf("principals %v, want User:ANONYMOUS", got)
	}
	c = b.dialTLS(t, pki.clientTLS(pkix.Name{CommonName: "carol"}))
	metadataWorks(t, c)
	if got := rec.list(); got[len(got)-1] != security.User("CN=carol") {
		t.Fatalf("principal %v, want User:CN=carol (DEFAULT rule)", got[len(got)-1])
	}

	req := startBroker(t, secured(ListenerSecurity{Protocol: ProtocolSSL, TLS: pki.serverTLS("required")}, nil))
	conn, err := tls.Dial("tcp", req.addr, pki.clientTLS(pkix.Name{}))
	if err == nil {
		// TLS 1.3 reports the refused certificate on the first read.
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = conn.Read(make([]byte, 1))
		conn.Close()
	}
	if err == nil {
		t.Fatal("ssl.client.auth=required accepted a client without a certificate")
	}
}

// TestTLSCertificateReloadOnLiveListener: after the keystore file
// changes, new connections get the new certificate, without a restart.
func TestTLSCertificateReloadOnLiveListener(t *testing.T) {
	pki := newTestPKI(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "keystore.pem")
	write := func(cn string, mtime time.Time) {
		cert, key := pki.issue(pkix.Name{CommonName: cn})
		if err := os.WriteFile(path, []byte(cert+key), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	write("first", time.Now().Add(-time.Minute))
	clock := newFakeClock()
	tc := pki.context(security.TLSSettings{KeystoreLocation: path}, security.TLSOptions{ReloadInterval: time.Second, Now: clock.Now})
	b := startBroker(t, secured(ListenerSecurity{Protocol: ProtocolSSL, TLS: tc}, nil))
	served := func() string {
		t.Helper()
		c := b.dialTLS(t, pki.clientTLS(pkix.Name{}))
		metadataWorks(t, c)
		return c.c.(*tls.Conn).ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if got := served(); got != "first" {
		t.Fatalf("certificate %q, want first", got)
	}
	live := b.dialTLS(t, pki.clientTLS(pkix.Name{}))
	write("second", time.Now())
	clock.Advance(2 * time.Second)
	if got := served(); got != "second" {
		t.Fatalf("certificate after reload %q, want second", got)
	}
	metadataWorks(t, live) // the connection from before the reload goes on
}

// TestBrokerClientOverSASLSSL: the inter-broker client dials a SASL_SSL
// listener with TLS and SCRAM (and PLAIN), as the controller, followers
// and marker writer do; wrong credentials fail the request.
func TestBrokerClientOverSASLSSL(t *testing.T) {
	pki := newTestPKI(t)
	rec := &principals{}
	b := startBroker(t, secured(ListenerSecurity{Protocol: ProtocolSASLSSL, TLS: pki.serverTLS("none"), SASL: saslConfig(t)}, rec))
	trust := pki.context(security.TLSSettings{}, security.TLSOptions{})
	for _, mech := range []string{"SCRAM-SHA-512", "PLAIN"} {
		c := newBrokerClient(t, b)
		c.cfg.Security = ClientSecurity{TLS: trust, SASL: kgoMechanism(mech, "bob", "bob-secret")}
		if err := c.UpdateMetadata(context.Background(), b.self(), sampleUpdateMetadata(5, 42)); err != nil {
			t.Fatalf("%s: %v", mech, err)
		}
	}
	if got := rec.list(); len(got) != 2 || got[0] != security.User("bob") || got[1] != security.User("bob") {
		t.Fatalf("principals %v", got)
	}
	c := newBrokerClient(t, b)
	c.cfg.Security = ClientSecurity{TLS: trust, SASL: kgoMechanism("SCRAM-SHA-256", "bob", "wrong")}
	err := c.UpdateMetadata(context.Background(), b.self(), sampleUpdateMetadata(5, 42))
	if !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	// Without TLS the SASL_SSL listener refuses the connection.
	c = newBrokerClient(t, b)
	c.cfg.Security = ClientSecurity{SASL: kgoMechanism("PLAIN", "bob", "bob-secret")}
	if err := c.UpdateMetadata(context.Background(), b.self(), sampleUpdateMetadata(5, 42)); err == nil {
		t.Fatal("plaintext client accepted on SASL_SSL")
	}
}

// TestBrokerClientRenewsSessionBeforeExpiry: with a session lifetime the
// client re-authenticates its live connection before the server would
// close it (KIP-368), and redials if the server refuses.
func TestBrokerClientRenewsSessionBeforeExpiry(t *testing.T) {
	rec := &principals{}
	clock := newFakeClock()
	b := startBroker(t, secured(ListenerSecurity{Protocol: ProtocolSASLPlaintext, SASL: saslConfig(t)}, rec,
		func(c *Config) { c.MaxReauth, c.now = time.Hour, clock.Now }))
	c := newBrokerClient(t, b)
	c.cfg.Security = ClientSecurity{SASL: kgoMechanism("SCRAM-SHA-256", "bob", "bob-secret")}
	update := func() {
		t.Helper()
		if err := c.UpdateMetadata(context.Background(), b.self(), sampleUpdateMetadata(5, 42)); err != nil {
			t.Fatal(err)
		}
	}
	update()
	update()
	if n, r := len(rec.list()), rec.reauthentications(); n != 1 || r != 0 {
		t.Fatalf("%d authentications, %d re-authentications for two requests within the session, want 1, 0", n, r)
	}
	renew := func() {
		for _, bc := range c.conns {
			bc.renewAt = time.Now().Add(-time.Second) // as if 85% of the lifetime had passed
		}
	}
	renew()
	update()
	if n, r := len(rec.list()), rec.reauthentications(); n != 1 || r != 1 {
		t.Fatalf("after the renewal point: %d authentications, %d re-authentications, want 1, 1", n, r)
	}
	// Within a second of the last re-authentication the server answers
	// SaslHandshake with ILLEGAL_SASL_STATE: the client redials.
	renew()
	update()
	if n, r := len(rec.list()), rec.reauthentications(); n != 2 || r != 1 {
		t.Fatalf("refused re-authentication: %d authentications, %d re-authentications, want 2, 1", n, r)
	}
}

// TestServeRefusesMisconfiguredListener: a TLS protocol without a
// keystore, or an unknown protocol, is an error of Serve.
func TestServeRefusesMisconfiguredListener(t *testing.T) {
	for _, ls := range []ListenerSecurity{{Protocol: ProtocolSSL}, {Protocol: "KERBEROS"},
		{Protocol: ProtocolSASLPlaintext, SASL: security.SASLConfig{EnabledMechanisms: []string{"PLAIN"}}}} {
		s := NewServer(Config{Listeners: map[string]ListenerSecurity{"X": ls}})
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Serve(l, "X"); !errors.Is(err, ErrListenerSecurity) {
			t.Fatalf("%+v: Serve %v, want ErrListenerSecurity", ls, err)
		}
		s.Close()
	}
}

// saramaScram is sarama's SCRAMClient over franz-go's client mechanism.
type saramaScram struct {
	mech    func(user, pass string) sasl.Mechanism
	session sasl.Session
	first   []byte
	done    bool
}

func (s *saramaScram) Begin(user, pass, _ string) error {
	session, first, err := s.mech(user, pass).Authenticate(context.Background(), "127.0.0.1")
	s.session, s.first = session, first
	return err
}

func (s *saramaScram) Step(challenge string) (string, error) {
	if s.first != nil {
		first := s.first
		s.first = nil
		return string(first), nil
	}
	done, msg, err := s.session.Challenge([]byte(challenge))
	s.done = done
	return string(msg), err
}

func (s *saramaScram) Done() bool { return s.done }

// TestSaramaSASLHandshakeVersions: sarama produces over SASL_PLAINTEXT
// with SaslHandshake v0 (raw tokens; sarama's Net.SASL.Version, which
// needs ApiVersionsRequest off) for PLAIN and SCRAM-SHA-512, and with v1.
func TestSaramaSASLHandshakeVersions(t *testing.T) {
	rec := &principals{}
	b := startBroker(t, secured(ListenerSecurity{Protocol: ProtocolSASLPlaintext, SASL: saslConfig(t)}, rec))
	createTopic(t, b, "sarama", 1)
	for _, tc := range []struct {
		name      string
		version   int16
		mechanism sarama.SASLMechanism
	}{
		{"v0/PLAIN", sarama.SASLHandshakeV0, sarama.SASLTypePlaintext},
		{"v0/SCRAM-SHA-512", sarama.SASLHandshakeV0, sarama.SASLTypeSCRAMSHA512},
		{"v1/PLAIN", sarama.SASLHandshakeV1, sarama.SASLTypePlaintext},
		{"v1/SCRAM-SHA-256", sarama.SASLHandshakeV1, sarama.SASLTypeSCRAMSHA256},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := sarama.NewConfig()
			cfg.Version = sarama.V2_8_0_0
			cfg.Producer.Return.Successes = true
			cfg.Producer.RequiredAcks = sarama.WaitForAll
			cfg.Net.SASL.Enable, cfg.Net.SASL.Handshake = true, true
			cfg.Net.SASL.Version, cfg.Net.SASL.Mechanism = tc.version, tc.mechanism
			cfg.Net.SASL.User, cfg.Net.SASL.Password = "bob", "bob-secret"
			if tc.version == sarama.SASLHandshakeV0 {
				// Without ApiVersions sarama sends what its Version
				// implies: Kafka 2.1's requests are in our ranges.
				cfg.ApiVersionsRequest, cfg.Version = false, sarama.V2_1_0_0
			}
			switch tc.mechanism {
			case sarama.SASLTypeSCRAMSHA512:
				cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient {
					return &saramaScram{mech: func(u, p string) sasl.Mechanism { return scram.Auth{User: u, Pass: p}.AsSha512Mechanism() }}
				}
			case sarama.SASLTypeSCRAMSHA256:
				cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient {
					return &saramaScram{mech: func(u, p string) sasl.Mechanism { return scram.Auth{User: u, Pass: p}.AsSha256Mechanism() }}
				}
			}
			before := len(rec.list())
			prod, err := sarama.NewSyncProducer([]string{b.addr}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer prod.Close()
			if _, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: "sarama", Value: sarama.StringEncoder(tc.name)}); err != nil {
				t.Fatalf("produce: %v", err)
			}
			got := rec.list()[before:]
			if len(got) == 0 {
				t.Fatal("no connection authenticated")
			}
			for _, p := range got {
				if p != security.User("bob") {
					t.Fatalf("principal %v", p)
				}
			}
		})
	}
}

// TestKgoReauthenticatesInPlace: with connections.max.reauth.ms kgo
// re-authenticates on its live connection before the session ends
// (KIP-368), and keeps producing through it.
// The session lifetime is real time because kgo's clock is.
func TestKgoReauthenticatesInPlace(t *testing.T) {
	rec := &principals{}
	b := startBroker(t, secured(ListenerSecurity{Protocol: ProtocolSASLPlaintext, SASL: saslConfig(t)}, rec,
		func(c *Config) { c.MaxReauth = 2 * time.Second }))
	createTopic(t, b, "reauth", 1)
	prod := newClient(t, b, kgo.SASL(kgoMechanism("SCRAM-SHA-256", "alice", "alice-secret")), kgo.DefaultProduceTopic("reauth"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	deadline := time.Now().Add(3500 * time.Millisecond)
	for i := 0; time.Now().Before(deadline); i++ {
		if err := prod.ProduceSync(ctx, kgo.StringRecord("r")).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
		time.Sleep(100 * time.Millisecond) // pacing, not synchronisation
	}
	if n := rec.reauthentications(); n == 0 {
		t.Fatal("kgo never re-authenticated within 3.5 s of 2 s sessions")
	}
	for _, p := range rec.list() {
		if p != security.User("alice") {
			t.Fatalf("principal %v", p)
		}
	}
	t.Logf("%d connections authenticated, %d re-authentications", len(rec.list()), rec.reauthentications())
}

// TestSASLKeysOnPlaintextListener: SaslHandshake and SaslAuthenticate on
// a listener without SASL answer ILLEGAL_SASL_STATE, as KafkaApis does,
// and the connection stays.
func TestSASLKeysOnPlaintextListener(t *testing.T) {
	b := startBroker(t)
	c := b.dial(t)
	if hs := c.roundTrip(handshake(1, "PLAIN")).(*kmsg.SASLHandshakeResponse); hs.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("SaslHandshake: %v", kerr.ErrorForCode(hs.ErrorCode))
	}
	if ar := c.roundTrip(authenticate(2, plainToken("alice", "alice-secret"))).(*kmsg.SASLAuthenticateResponse); ar.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("SaslAuthenticate: %v", kerr.ErrorForCode(ar.ErrorCode))
	}
	metadataWorks(t, c)
}

// TestPlaintextClientOnTLSListener: a client speaking plaintext to an SSL
// listener fails the TLS handshake and is closed unanswered.
func TestPlaintextClientOnTLSListener(t *testing.T) {
	pki := newTestPKI(t)
	b := startBroker(t, secured(ListenerSecurity{Protocol: ProtocolSSL, TLS: pki.serverTLS("none")}, nil))
	c := b.dial(t)
	meta := kmsg.NewPtrMetadataRequest()
	c.send(meta)
	c.expectClosed()
}
