package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kafkazk/broker/internal/kbench"
)

// TestSecureBesidePlaintext runs produce and consume against a kfake with
// TLS and SCRAM-SHA-512 (--secure-brokers, --secure-config) beside a
// plaintext kfake (--brokers): both targets are measured, the secured one
// first, and the table's ratio column is secured/plaintext. It asserts no
// speed. (The real comparison is one cluster's two listeners: make
// bench-secure.)
func TestSecureBesidePlaintext(t *testing.T) {
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	now := time.Now().Add(-time.Hour)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, NotBefore: now, NotAfter: now.Add(time.Hour * 24),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, _ := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leafDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kfake"},
		NotBefore: now, NotAfter: now.Add(24 * time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caPath := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	secured, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "admin", "admin-secret"),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{leafDER}, PrivateKey: key}}}))
	if err != nil {
		t.Fatal(err)
	}
	defer secured.Close()
	plain, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	conf := filepath.Join(dir, "client.properties")
	if err := os.WriteFile(conf, []byte("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"+
		"sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"admin\" password=\"admin-secret\";\n"+
		"ssl.truststore.type=PEM\nssl.truststore.location="+caPath+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	err = run(ctx, []string{
		"--brokers", strings.Join(plain.ListenAddrs(), ","),
		"--secure-brokers", strings.Join(secured.ListenAddrs(), ","), "--secure-config", conf,
		"--scenarios=produce,consume", "--sizes=1024", "--acks=all", "--reps=1", "--warmup=100ms",
		"--duration=300ms", "--partitions=2", "--consume-mib=2",
	}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr.String())
	}
	report := stdout.String()
	results, err := kbench.ReadResults(strings.NewReader(report))
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 {
		t.Fatalf("%d results, want produce and consume:\n%s", len(results), report)
	}
	for _, r := range results {
		if len(r.Targets) != 2 || r.Targets[0].Target != "secured" || r.Targets[1].Target != "plaintext" {
			t.Fatalf("%s: targets %+v", r.Name, r.Targets)
		}
		for _, tr := range r.Targets {
			if tr.Err != "" || len(tr.Runs) != 1 || tr.Median.RecPerSec <= 0 {
				t.Errorf("%s on %s: err %q, runs %+v", r.Name, tr.Target, tr.Err, tr.Runs)
			}
		}
		if _, ok := r.Ratios["mb_per_sec"]; !ok {
			t.Errorf("%s: no secured/plaintext ratio: %v", r.Name, r.Ratios)
		}
	}
	if !strings.Contains(report, "secured/plaintext") {
		t.Errorf("table has no secured/plaintext column:\n%s", report)
	}
}

func TestSecureFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--brokers", "x:1", "--secure-brokers", "y:1"},
		{"--brokers", "x:1", "--secure-config", "c"},
		{"--kfake", "--secure-brokers", "y:1", "--secure-config", "c"},
		{"--brokers", "x:1", "--compare-kfake", "--secure-brokers", "y:1", "--secure-config", "c"},
	} {
		if _, _, err := parseArgs(args, &bytes.Buffer{}); err == nil {
			t.Errorf("%v: accepted", args)
		}
	}
}
