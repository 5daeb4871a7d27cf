package protocol

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/kafkazk/broker/security"
)

// benchTLS is a self-signed TLSContext for 127.0.0.1, usable as a
// listener's keystore and as a client's truststore.
func benchTLS(b testing.TB) *security.TLSContext {
	b.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		b.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		b.Fatal(err)
	}
	cert := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	c, err := security.NewTLSContext(security.TLSSettings{
		KeystoreType: "PEM", KeystoreCertificateChain: cert,
		KeystoreKey:    string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})),
		TruststoreType: "PEM", TruststoreCertificates: cert,
		EnabledProtocols: []string{"TLSv1.2", "TLSv1.3"},
	}, security.TLSOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkServerConnTLS is BenchmarkServerConn over an SSL listener
// beside a PLAINTEXT one: the cost of the TLS write and read paths for a
// client's produce and fetch.
func BenchmarkServerConnTLS(b *testing.B) {
	tc := benchTLS(b)
	for _, proto := range []string{ProtocolPlaintext, ProtocolSSL} {
		for _, c := range serverConnCases() {
			b.Run(proto+"/"+c.name, func(b *testing.B) {
				s := benchServer(&fixedReplicas{records: c.records, changed: make(chan struct{})})
				s.cfg.Listeners = map[string]ListenerSecurity{"SSL": {Protocol: ProtocolSSL, TLS: tc}}
				var wrap func(net.Conn) net.Conn
				if proto == ProtocolSSL {
					wrap = func(nc net.Conn) net.Conn { return tls.Client(nc, tc.ClientConfig("127.0.0.1")) }
				}
				benchServerConn(b, benchListen(b, s, proto), wrap, c.req)
			})
		}
	}
}

// BenchmarkClientFetchTLS is BenchmarkClientFetch (a follower's fetch of
// 1 MiB) over PLAINTEXT and over SSL: the inter-broker TLS path.
func BenchmarkClientFetchTLS(b *testing.B) {
	tc := benchTLS(b)
	for _, proto := range []string{ProtocolPlaintext, ProtocolSSL} {
		b.Run(proto, func(b *testing.B) {
			r := &fixedReplicas{records: fetchRecords(1 << 20), changed: make(chan struct{})}
			s := benchServer(r)
			s.cfg.Listeners = map[string]ListenerSecurity{"SSL": {Protocol: ProtocolSSL, TLS: tc}}
			var ctc *security.TLSContext
			if proto == ProtocolSSL {
				ctc = tc
			}
			benchClientFetch(b, benchListen(b, s, proto), proto, ctc, len(r.records))
		})
	}
}
