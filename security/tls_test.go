package security

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

var serial struct {
	sync.Mutex
	n int64
}

func nextSerial() *big.Int {
	serial.Lock()
	defer serial.Unlock()
	serial.n++
	return big.NewInt(serial.n)
}

func newCA(t *testing.T, cn string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: nextSerial(), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns PEM chain (leaf, CA) and PKCS#8 key for a leaf.
func (ca *testCA) issue(t *testing.T, subject pkix.Name, dns ...string) (chainPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: nextSerial(), Subject: subject, DNSNames: dns,
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:   time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	p8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	chain := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), ca.pem...)
	return chain, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p8})
}

func writeFile(t *testing.T, path string, parts ...[]byte) {
	t.Helper()
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// handshake runs a TLS handshake over loopback TCP and returns the
// server's view of the connection and both sides' errors.
func handshake(t *testing.T, server, client *tls.Config) (tls.ConnectionState, error, error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type result struct {
		cs  tls.ConnectionState
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- result{err: err}
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		sc := tls.Server(c, server)
		err = sc.Handshake()
		if err == nil {
			_, err = sc.Write([]byte("k"))
		}
		done <- result{sc.ConnectionState(), err}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	cc := tls.Client(c, client)
	cerr := cc.Handshake()
	if cerr == nil {
		// In TLS 1.3 a refused client certificate shows on the first read.
		_, cerr = cc.Read(make([]byte, 1))
	}
	r := <-done
	return r.cs, r.err, cerr
}

type tlsFixture struct {
	dir                    string
	ca                     *testCA
	serverPEM, clientPEM   string // keystore files: key + chain
	serverChain, serverKey []byte
	clientChain, clientKey []byte
	caFile                 string
}

func newTLSFixture(t *testing.T) *tlsFixture {
	t.Helper()
	f := &tlsFixture{dir: t.TempDir(), ca: newCA(t, "Test CA")}
	f.serverChain, f.serverKey = f.ca.issue(t, pkix.Name{CommonName: "broker1", Organization: []string{"Test"}}, "localhost")
	f.clientChain, f.clientKey = f.ca.issue(t, pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"ServiceUsers"}, Organization: []string{"Test"}})
	f.serverPEM = filepath.Join(f.dir, "server.pem")
	f.clientPEM = filepath.Join(f.dir, "client.pem")
	f.caFile = filepath.Join(f.dir, "ca.pem")
	writeFile(t, f.serverPEM, f.serverKey, f.serverChain)
	writeFile(t, f.clientPEM, f.clientKey, f.clientChain)
	writeFile(t, f.caFile, f.ca.pem)
	return f
}

func mustTLSContext(t *testing.T, s TLSSettings, opts TLSOptions) *TLSContext {
	t.Helper()
	c, err := NewTLSContext(s, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestTLSSettingsFromConfigListenerPrefix(t *testing.T) {
	props := map[string]string{
		"ssl.keystore.type":                            "PKCS12",
		"ssl.keystore.location":                        "/etc/global.p12",
		"ssl.client.auth":                              "required",
		"listener.name.internal.ssl.keystore.type":     "PEM",
		"listener.name.internal.ssl.keystore.location": "/etc/internal.pem",
		"listener.name.internal.ssl.enabled.protocols": "TLSv1.3",
		"listener.name.internal.ssl.cipher.suites":     " TLS_AES_128_GCM_SHA256 , ",
		"listener.name.external.ssl.client.auth":       "none",
	}
	internal := TLSSettingsFromConfig(props, "INTERNAL")
	if internal.KeystoreType != "PEM" || internal.KeystoreLocation != "/etc/internal.pem" || internal.ClientAuth != "required" ||
		strings.Join(internal.EnabledProtocols, ",") != "TLSv1.3" || strings.Join(internal.CipherSuites, ",") != "TLS_AES_128_GCM_SHA256" {
		t.Fatalf("internal %+v", internal)
	}
	external := TLSSettingsFromConfig(props, "EXTERNAL")
	if external.KeystoreType != "PKCS12" || external.KeystoreLocation != "/etc/global.p12" || external.ClientAuth != "none" ||
		strings.Join(external.EnabledProtocols, ",") != "TLSv1.2,TLSv1.3" || external.EndpointIdentificationAlgorithm != "https" {
		t.Fatalf("external %+v", external)
	}
	none := TLSSettingsFromConfig(map[string]string{"ssl.endpoint.identification.algorithm": ""}, "")
	if none.EndpointIdentificationAlgorithm != "" || none.ClientAuth != "none" {
		t.Fatalf("defaults %+v", none)
	}
}

func TestTLSMutualAuthentication(t *testing.T) {
	f := newTLSFixture(t)
	for _, tc := range []struct {
		name         string
		clientAuth   string
		sendCert     bool
		wantOK       bool
		wantIdentity string
	}{
		{"required with cert", "required", true, true, "User:CN=alice,OU=ServiceUsers,O=Test"},
		{"required without cert", "required", false, false, ""},
		{"requested without cert", "requested", false, true, "User:ANONYMOUS"},
		{"requested with cert", "requested", true, true, "User:CN=alice,OU=ServiceUsers,O=Test"},
		{"none with cert", "none", true, true, "User:ANONYMOUS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := mustTLSContext(t, TLSSettings{KeystoreType: "PEM", KeystoreLocation: f.serverPEM, TruststoreType: "PEM",
				TruststoreLocation: f.caFile, ClientAuth: tc.clientAuth, EnabledProtocols: []string{"TLSv1.2", "TLSv1.3"}}, TLSOptions{})
			cs := TLSSettings{TruststoreCertificates: string(f.ca.pem), EnabledProtocols: []string{"TLSv1.2", "TLSv1.3"}, EndpointIdentificationAlgorithm: "https"}
			if tc.sendCert {
				cs.KeystoreCertificateChain, cs.KeystoreKey = string(f.clientChain), string(f.clientKey)
			}
			cli := mustTLSContext(t, cs, TLSOptions{})
			scfg, err := srv.ServerConfig()
			if err != nil {
				t.Fatal(err)
			}
			state, serr, cerr := handshake(t, scfg, cli.ClientConfig("localhost"))
			if !tc.wantOK {
				if serr == nil {
					t.Fatal("server accepted a client without a certificate")
				}
				return
			}
			if serr != nil || cerr != nil {
				t.Fatalf("server %v client %v", serr, cerr)
			}
			p, err := PrincipalFromTLS(state, nil)
			if err != nil || p.String() != tc.wantIdentity {
				t.Fatalf("principal %v %v, want %s", p, err, tc.wantIdentity)
			}
		})
	}
}

func TestTLSUntrustedClientRefused(t *testing.T) {
	f := newTLSFixture(t)
	other := newCA(t, "Other CA")
	chain, key := other.issue(t, pkix.Name{CommonName: "mallory"})
	srv := mustTLSContext(t, TLSSettings{KeystoreLocation: f.serverPEM, TruststoreLocation: f.caFile, ClientAuth: "required", EnabledProtocols: []string{"TLSv1.3"}}, TLSOptions{})
	cli := mustTLSContext(t, TLSSettings{KeystoreCertificateChain: string(chain), KeystoreKey: string(key), TruststoreCertificates: string(f.ca.pem),
		EnabledProtocols: []string{"TLSv1.3"}, EndpointIdentificationAlgorithm: "https"}, TLSOptions{})
	scfg, _ := srv.ServerConfig()
	if _, serr, _ := handshake(t, scfg, cli.ClientConfig("localhost")); serr == nil {
		t.Fatal("client certificate from an untrusted CA accepted")
	}
}

func TestTLSProtocolsAndEndpointIdentification(t *testing.T) {
	f := newTLSFixture(t)
	server := func(protos ...string) *tls.Config {
		c, err := mustTLSContext(t, TLSSettings{KeystoreLocation: f.serverPEM, EnabledProtocols: protos}, TLSOptions{}).ServerConfig()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	client := func(alg string, protos ...string) *TLSContext {
		return mustTLSContext(t, TLSSettings{TruststoreLocation: f.caFile, EnabledProtocols: protos, EndpointIdentificationAlgorithm: alg}, TLSOptions{})
	}
	state, serr, cerr := handshake(t, server("TLSv1.2"), client("https", "TLSv1.2", "TLSv1.3").ClientConfig("localhost"))
	if serr != nil || cerr != nil || state.Version != tls.VersionTLS12 {
		t.Fatalf("TLSv1.2: %v %v version %x", serr, cerr, state.Version)
	}
	if _, serr, _ := handshake(t, server("TLSv1.3"), client("https", "TLSv1.2").ClientConfig("localhost")); serr == nil {
		t.Fatal("TLSv1.3-only server accepted a TLSv1.2-only client")
	}
	// The server certificate names localhost and 127.0.0.1, not broker9.
	if _, _, cerr := handshake(t, server("TLSv1.3"), client("https", "TLSv1.3").ClientConfig("broker9")); cerr == nil {
		t.Fatal("host name not verified with endpoint identification https")
	}
	if _, serr, cerr := handshake(t, server("TLSv1.3"), client("", "TLSv1.3").ClientConfig("broker9")); serr != nil || cerr != nil {
		t.Fatalf("empty endpoint identification: %v %v", serr, cerr)
	}
	// Without endpoint identification the chain is still verified.
	other := newCA(t, "Other CA")
	otherFile := filepath.Join(f.dir, "other.pem")
	writeFile(t, otherFile, other.pem)
	c := mustTLSContext(t, TLSSettings{TruststoreLocation: otherFile, EnabledProtocols: []string{"TLSv1.3"}}, TLSOptions{})
	if _, _, cerr := handshake(t, server("TLSv1.3"), c.ClientConfig("localhost")); cerr == nil {
		t.Fatal("untrusted server accepted without endpoint identification")
	}
}

func TestTLSCipherSuites(t *testing.T) {
	ids, err := CipherSuitesFromNames([]string{"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "SSL_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "TLS_AES_256_GCM_SHA384"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 2 || ids[0] != tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 || ids[1] != tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384 {
		t.Fatalf("ids %x", ids)
	}
	if _, err := CipherSuitesFromNames([]string{"TLS_BOGUS_WITH_NOTHING"}); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "ssl.cipher.suites") {
		t.Fatalf("unknown suite: %v", err)
	}
	// A TLS 1.2 connection uses the one suite both allow.
	f := newTLSFixture(t)
	srv, _ := mustTLSContext(t, TLSSettings{KeystoreLocation: f.serverPEM, EnabledProtocols: []string{"TLSv1.2"},
		CipherSuites: []string{"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"}}, TLSOptions{}).ServerConfig()
	cli := mustTLSContext(t, TLSSettings{TruststoreLocation: f.caFile, EnabledProtocols: []string{"TLSv1.2"}}, TLSOptions{})
	state, serr, cerr := handshake(t, srv, cli.ClientConfig("localhost"))
	if serr != nil || cerr != nil || state.CipherSuite != tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256 {
		t.Fatalf("%v %v suite %x", serr, cerr, state.CipherSuite)
	}
}

func TestTLSKeystoreForms(t *testing.T) {
	leaf := func(t *testing.T, s TLSSettings) *x509.Certificate {
		t.Helper()
		c := mustTLSContext(t, s, TLSOptions{})
		cert := c.Certificate()
		if cert == nil || cert.Leaf == nil {
			t.Fatal("no certificate")
		}
		return cert.Leaf
	}
	protos := []string{"TLSv1.2", "TLSv1.3"}
	for _, tc := range []struct {
		name   string
		s      TLSSettings
		wantCN string
		chain  int
	}{
		{"PKCS12 legacy", TLSSettings{KeystoreType: "PKCS12", KeystoreLocation: "testdata/keystore-legacy.p12", KeystorePassword: "store-secret"}, "broker1", 2},
		{"PKCS12 by extension, key password fallback", TLSSettings{KeystoreLocation: "testdata/keystore-legacy.p12", KeystorePassword: "wrong", KeyPassword: "store-secret"}, "broker1", 2},
		{"PEM encrypted PKCS#8 AES-256", TLSSettings{KeystoreType: "PEM", KeystoreCertificateChain: readTestdata(t, "broker.pem"), KeystoreKey: readTestdata(t, "broker-aes256.key"), KeyPassword: "key-secret"}, "broker1", 1},
		{"PEM encrypted PKCS#8 3DES", TLSSettings{KeystoreType: "PEM", KeystoreCertificateChain: readTestdata(t, "broker.pem"), KeystoreKey: readTestdata(t, "broker-des3.key"), KeyPassword: "key-secret"}, "broker1", 1},
		{"PEM plain PKCS#8", TLSSettings{KeystoreCertificateChain: readTestdata(t, "broker.pem") + readTestdata(t, "ca.pem"), KeystoreKey: readTestdata(t, "broker.key")}, "broker1", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.s.EnabledProtocols = protos
			c := mustTLSContext(t, tc.s, TLSOptions{})
			if got := leaf(t, tc.s); got.Subject.CommonName != tc.wantCN {
				t.Fatalf("leaf %s", got.Subject)
			}
			if n := len(c.Certificate().Certificate); n != tc.chain {
				t.Fatalf("chain of %d, want %d", n, tc.chain)
			}
		})
	}
	// A certificate-only PKCS12 truststore is beyond x/crypto/pkcs12: the
	// error says so and points to PEM.
	_, err := NewTLSContext(TLSSettings{TruststoreType: "PKCS12", TruststoreLocation: "testdata/truststore-legacy.p12", TruststorePassword: "trust-secret", EnabledProtocols: protos}, TLSOptions{})
	if !errors.Is(err, ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "ssl.truststore.location:") || !strings.Contains(err.Error(), "ssl.truststore.type=PEM") {
		t.Fatalf("PKCS12 truststore: %v", err)
	}
	// The PKCS12 keystore serves a client trusting the PEM CA.
	trust := mustTLSContext(t, TLSSettings{TruststoreLocation: "testdata/ca.pem", EnabledProtocols: protos}, TLSOptions{})
	srv, err := mustTLSContext(t, TLSSettings{KeystoreType: "PKCS12", KeystoreLocation: "testdata/keystore-legacy.p12", KeystorePassword: "store-secret", EnabledProtocols: protos}, TLSOptions{}).ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	if _, serr, cerr := handshake(t, srv, trust.ClientConfig("localhost")); serr != nil || cerr != nil {
		t.Fatalf("PKCS12 handshake: %v %v", serr, cerr)
	}
}

func readTestdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestTLSConfigErrors(t *testing.T) {
	f := newTLSFixture(t)
	other := newCA(t, "Other")
	_, otherKey := other.issue(t, pkix.Name{CommonName: "x"})
	legacyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED", "DEK-Info": "AES-128-CBC,00"}, Bytes: []byte{1}})
	protos := []string{"TLSv1.2", "TLSv1.3"}
	for _, tc := range []struct {
		name    string
		s       TLSSettings
		wantKey string
	}{
		{"JKS", TLSSettings{KeystoreType: "JKS", KeystoreLocation: "k.jks"}, "ssl.keystore.type"},
		{"untyped jks file", TLSSettings{KeystoreLocation: "k.jks"}, "ssl.keystore.type"},
		{"bad type", TLSSettings{KeystoreType: "BKS", KeystoreLocation: "k"}, "ssl.keystore.type"},
		{"missing file", TLSSettings{KeystoreType: "PEM", KeystoreLocation: filepath.Join(f.dir, "nope.pem")}, "ssl.keystore.location"},
		{"chain without key", TLSSettings{KeystoreCertificateChain: string(f.serverChain)}, "ssl.keystore.key"},
		{"key without chain", TLSSettings{KeystoreKey: string(f.serverKey)}, "ssl.keystore.certificate.chain"},
		{"location and inline", TLSSettings{KeystoreLocation: f.serverPEM, KeystoreKey: string(f.serverKey), KeystoreCertificateChain: string(f.serverChain)}, "ssl.keystore.location"},
		{"mismatched key", TLSSettings{KeystoreCertificateChain: string(f.serverChain), KeystoreKey: string(otherKey)}, "ssl.keystore.key"},
		{"encrypted key without password", TLSSettings{KeystoreCertificateChain: readTestdata(t, "broker.pem"), KeystoreKey: readTestdata(t, "broker-aes256.key")}, "ssl.key.password"},
		{"encrypted key wrong password", TLSSettings{KeystoreCertificateChain: readTestdata(t, "broker.pem"), KeystoreKey: readTestdata(t, "broker-aes256.key"), KeyPassword: "nope"}, "ssl.key.password"},
		{"PBES1 key", TLSSettings{KeystoreCertificateChain: readTestdata(t, "broker.pem"), KeystoreKey: readTestdata(t, "broker-pbes1.key"), KeyPassword: "key-secret"}, "ssl.key.password"},
		{"legacy encrypted PEM", TLSSettings{KeystoreCertificateChain: string(f.serverChain), KeystoreKey: string(legacyPEM)}, "ssl.keystore.key"},
		{"PKCS12 wrong password", TLSSettings{KeystoreType: "PKCS12", KeystoreLocation: "testdata/keystore-legacy.p12", KeystorePassword: "nope"}, "ssl.keystore.location"},
		{"PKCS12 AES (unsupported)", TLSSettings{KeystoreType: "PKCS12", KeystoreLocation: "testdata/keystore-aes.p12", KeystorePassword: "store-secret"}, "ssl.keystore.location"},
		{"truststore JKS", TLSSettings{TruststoreType: "JKS", TruststoreLocation: "t.jks"}, "ssl.truststore.type"},
		{"truststore empty", TLSSettings{TruststoreCertificates: "nothing"}, "ssl.truststore.location"},
		{"client auth bogus", TLSSettings{ClientAuth: "always"}, "ssl.client.auth"},
		{"client auth without truststore", TLSSettings{KeystoreLocation: f.serverPEM, ClientAuth: "required"}, "ssl.client.auth"},
		{"old protocol", TLSSettings{EnabledProtocols: []string{"TLSv1.1"}}, "ssl.enabled.protocols"},
		{"unknown protocol", TLSSettings{EnabledProtocols: []string{"QUIC"}}, "ssl.enabled.protocols"},
		{"endpoint alg", TLSSettings{EndpointIdentificationAlgorithm: "ldap"}, "ssl.endpoint.identification.algorithm"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.s.EnabledProtocols == nil {
				tc.s.EnabledProtocols = protos
			}
			_, err := NewTLSContext(tc.s, TLSOptions{})
			if !errors.Is(err, ErrInvalidConfig) || !strings.HasPrefix(err.Error(), tc.wantKey+":") {
				t.Fatalf("err = %v, want an ErrInvalidConfig naming %s", err, tc.wantKey)
			}
		})
	}
	c := mustTLSContext(t, TLSSettings{TruststoreLocation: f.caFile, EnabledProtocols: protos}, TLSOptions{})
	if _, err := c.ServerConfig(); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("server without keystore: %v", err)
	}
}

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// touch gives path a new modification time, so a rewrite of equal size is
// still seen as a change regardless of the file system's time resolution.
func touch(t *testing.T, path string, mtime time.Time) {
	t.Helper()
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

func TestTLSKeystoreReload(t *testing.T) {
	f := newTLSFixture(t)
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	c := mustTLSContext(t, TLSSettings{KeystoreLocation: f.serverPEM, TruststoreLocation: f.caFile, ClientAuth: "requested",
		EnabledProtocols: []string{"TLSv1.3"}}, TLSOptions{ReloadInterval: 10 * time.Second, Now: clock.Now, Log: zerolog.New(zerolog.NewTestWriter(t))})
	scfg, err := c.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	served := func() string {
		t.Helper()
		cfg, err := scfg.GetConfigForClient(&tls.ClientHelloInfo{})
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Certificates[0].Leaf.Subject.CommonName
	}
	if got := served(); got != "broker1" {
		t.Fatalf("initial %s", got)
	}
	chain2, key2 := f.ca.issue(t, pkix.Name{CommonName: "broker1-renewed"}, "localhost")
	writeFile(t, f.serverPEM, key2, chain2)
	touch(t, f.serverPEM, time.Unix(1_700_000_100, 0))
	clock.Advance(5 * time.Second)
	if got := served(); got != "broker1" {
		t.Fatalf("reloaded before the interval: %s", got)
	}
	clock.Advance(5 * time.Second)
	if got := served(); got != "broker1-renewed" {
		t.Fatalf("not reloaded after the interval: %s", got)
	}
	// A half-written file (the chain without its key) keeps the old pair.
	writeFile(t, f.serverPEM, chain2[:len(chain2)/2])
	touch(t, f.serverPEM, time.Unix(1_700_000_200, 0))
	clock.Advance(10 * time.Second)
	if got := served(); got != "broker1-renewed" {
		t.Fatalf("bad file replaced the pair: %s", got)
	}
	// A key that does not match the certificate is refused too.
	_, otherKey := f.ca.issue(t, pkix.Name{CommonName: "x"})
	writeFile(t, f.serverPEM, otherKey, chain2)
	touch(t, f.serverPEM, time.Unix(1_700_000_300, 0))
	clock.Advance(10 * time.Second)
	if got := served(); got != "broker1-renewed" {
		t.Fatalf("mismatched key replaced the pair: %s", got)
	}
	// Fixed on disk: picked up at the next check.
	chain3, key3 := f.ca.issue(t, pkix.Name{CommonName: "broker1-third"}, "localhost")
	writeFile(t, f.serverPEM, key3, chain3)
	touch(t, f.serverPEM, time.Unix(1_700_000_400, 0))
	clock.Advance(10 * time.Second)
	if got := served(); got != "broker1-third" {
		t.Fatalf("fixed file not loaded: %s", got)
	}
	// A real handshake now presents the third certificate.
	cli := mustTLSContext(t, TLSSettings{TruststoreLocation: f.caFile, EnabledProtocols: []string{"TLSv1.3"}}, TLSOptions{})
	ccfg := cli.ClientConfig("localhost")
	var seen string
	ccfg.VerifyConnection = func(cs tls.ConnectionState) error { seen = cs.PeerCertificates[0].Subject.CommonName; return nil }
	if _, serr, cerr := handshake(t, scfg, ccfg); serr != nil || cerr != nil || seen != "broker1-third" {
		t.Fatalf("handshake %v %v saw %q", serr, cerr, seen)
	}
}

func TestTLSTruststoreReload(t *testing.T) {
	f := newTLSFixture(t)
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	c := mustTLSContext(t, TLSSettings{KeystoreLocation: f.serverPEM, TruststoreLocation: f.caFile, ClientAuth: "required",
		EnabledProtocols: []string{"TLSv1.3"}}, TLSOptions{ReloadInterval: time.Second, Now: clock.Now})
	scfg, _ := c.ServerConfig()
	newer := newCA(t, "Newer CA")
	chain, key := newer.issue(t, pkix.Name{CommonName: "bob"})
	cli := mustTLSContext(t, TLSSettings{KeystoreCertificateChain: string(chain), KeystoreKey: string(key), TruststoreLocation: f.caFile,
		EnabledProtocols: []string{"TLSv1.3"}}, TLSOptions{})
	if _, serr, _ := handshake(t, scfg, cli.ClientConfig("localhost")); serr == nil {
		t.Fatal("client of an untrusted CA accepted")
	}
	writeFile(t, f.caFile, f.ca.pem, newer.pem)
	touch(t, f.caFile, time.Unix(1_700_000_050, 0))
	clock.Advance(time.Second)
	state, serr, cerr := handshake(t, scfg, cli.ClientConfig("localhost"))
	if serr != nil || cerr != nil {
		t.Fatalf("after truststore reload: %v %v", serr, cerr)
	}
	if p, _ := PrincipalFromTLS(state, nil); p.String() != "User:CN=bob" {
		t.Fatalf("principal %v", p)
	}
}

func FuzzDecryptPKCS8(f *testing.F) {
	for _, name := range []string{"broker-aes256.key", "broker-des3.key", "broker-pbes1.key"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		blk, _ := pem.Decode(b)
		f.Add(blk.Bytes, "key-secret")
	}
	f.Fuzz(func(t *testing.T, der []byte, password string) {
		_, _ = decryptPKCS8(der, []byte(password))
	})
}

func TestTLSClientCertificateReload(t *testing.T) {
	f := newTLSFixture(t)
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	srv, _ := mustTLSContext(t, TLSSettings{KeystoreLocation: f.serverPEM, TruststoreLocation: f.caFile, ClientAuth: "required",
		EnabledProtocols: []string{"TLSv1.3"}}, TLSOptions{}).ServerConfig()
	cli := mustTLSContext(t, TLSSettings{KeystoreLocation: f.clientPEM, TruststoreLocation: f.caFile, EnabledProtocols: []string{"TLSv1.3"}},
		TLSOptions{ReloadInterval: time.Second, Now: clock.Now})
	ccfg := cli.ClientConfig("localhost") // one config, used across the reload
	principal := func() string {
		t.Helper()
		state, serr, cerr := handshake(t, srv, ccfg)
		if serr != nil || cerr != nil {
			t.Fatalf("%v %v", serr, cerr)
		}
		p, _ := PrincipalFromTLS(state, nil)
		return p.String()
	}
	if got := principal(); got != "User:CN=alice,OU=ServiceUsers,O=Test" {
		t.Fatalf("before: %s", got)
	}
	chain, key := f.ca.issue(t, pkix.Name{CommonName: "alice2"})
	writeFile(t, f.clientPEM, key, chain)
	touch(t, f.clientPEM, time.Unix(1_700_000_010, 0))
	clock.Advance(time.Second)
	if got := principal(); got != "User:CN=alice2" {
		t.Fatalf("after: %s", got)
	}
}
