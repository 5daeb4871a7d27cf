package test

// Helpers of the security tests (issue 14): a throwaway CA and certificates
// generated per test with crypto/x509, a cluster with SASL_SSL, SASL_PLAINTEXT
// and SSL listeners beside the harness's PLAINTEXT one, the AclAuthorizer,
// ZooKeeper digest auth with zookeeper.set.acl=true, and a super user whose
// SCRAM credential is written into ZooKeeper before the brokers start, as
// Kafka's `kafka-configs.sh --zookeeper ... --entity-type users --alter
// --add-config SCRAM-SHA-512=[...]` does. An RFC 5802 client (scramClient)
// serves sarama's SASL hook, the raw-socket tests, and the golden check of
// the credential znodes.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"hash"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Credentials of the secured clusters. Passwords are per-test throwaways.
const (
	adminUser = "admin" // super.users=User:admin; inter-broker principal
	adminPass = "admin-secret"
	aliceUser = "alice" // a client with ACLs per test
	alicePass = "alice-secret"
	bobUser   = "bob" // a client with fewer ACLs
	bobPass   = "bob-secret"
	zkUser    = "kafka" // ZooKeeper digest user of the brokers
	zkPass    = "zk-secret"
	// mtlsUser is the principal of the client certificate after
	// ssl.principal.mapping.rules (its DN is CN=mtls-client,OU=e2e,O=kafkazk).
	mtlsUser = "mtls-client"
	// scramIterations is the iteration count of every SCRAM credential
	// made here (Kafka's minimum is 4096).
	scramIterations = 8192
)

// Listener names of a secure broker; each name is its security protocol,
// so no listener.security.protocol.map is needed (Kafka's default map).
const (
	lnPlain    = "PLAINTEXT"
	lnSASLSSL  = "SASL_SSL"
	lnSASLPlan = "SASL_PLAINTEXT"
	lnSSL      = "SSL"
)

// secCerts are PEM files of a throwaway CA, one broker certificate (SAN
// localhost, 127.0.0.1, ::1) and one client certificate.
type secCerts struct {
	Dir        string
	CA         string // CA certificate (the truststore)
	BrokerPEM  string // broker key and certificate chain in one file (ssl.keystore.type=PEM)
	BrokerCert string
	BrokerKey  string
	ClientCert string // CN=mtls-client,OU=e2e,O=kafkazk
	ClientKey  string
	pool       *x509.CertPool
	client     tls.Certificate
}

// genCerts writes a fresh CA, broker and client certificate into dir.
func genCerts(t testing.TB, dir string) secCerts {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("certificates: %v", err)
		}
	}
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		must(err)
		return k
	}
	serial := func() *big.Int {
		n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
		must(err)
		return n
	}
	now := time.Now().Add(-time.Hour)
	caKey := newKey()
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "e2e throwaway CA", Organization: []string{"kafkazk"}},
		NotBefore:             now,
		NotAfter:              now.Add(48 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	must(err)
	caCert, err := x509.ParseCertificate(caDER)
	must(err)
	leaf := func(subject pkix.Name, usage []x509.ExtKeyUsage, dns []string, ips []net.IP) ([]byte, []byte) {
		k := newKey()
		tmpl := &x509.Certificate{
			SerialNumber: serial(),
			Subject:      subject,
			NotBefore:    now,
			NotAfter:     now.Add(48 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
			ExtKeyUsage:  usage,
			DNSNames:     dns,
			IPAddresses:  ips,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
		must(err)
		kder, err := x509.MarshalPKCS8PrivateKey(k)
		must(err)
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	// The broker certificate serves both sides: its listeners and, as a
	// client, the inter-broker connections (serverAuth and clientAuth).
	bCert, bKey := leaf(pkix.Name{CommonName: "broker", OrganizationalUnit: []string{"e2e"}, Organization: []string{"kafkazk"}},
		[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")})
	cCert, cKey := leaf(pkix.Name{CommonName: mtlsUser, OrganizationalUnit: []string{"e2e"}, Organization: []string{"kafkazk"}},
		[]x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil, nil)
	c := secCerts{
		Dir:        dir,
		CA:         filepath.Join(dir, "ca.pem"),
		BrokerPEM:  filepath.Join(dir, "broker-keystore.pem"),
		BrokerCert: filepath.Join(dir, "broker.pem"),
		BrokerKey:  filepath.Join(dir, "broker.key"),
		ClientCert: filepath.Join(dir, "client.pem"),
		ClientKey:  filepath.Join(dir, "client.key"),
	}
	for path, data := range map[string][]byte{
		c.CA: caPEM, c.BrokerPEM: append(append([]byte(nil), bKey...), bCert...), c.BrokerCert: bCert,
		c.BrokerKey: bKey, c.ClientCert: cCert, c.ClientKey: cKey,
	} {
		must(os.WriteFile(path, data, 0o600))
	}
	c.pool = x509.NewCertPool()
	c.pool.AddCert(caCert)
	c.client, err = tls.X509KeyPair(cCert, cKey)
	must(err)
	return c
}

// tlsConfig is a client TLS config trusting the CA; withCert adds the
// client certificate (mTLS).
func (c secCerts) tlsConfig(withCert bool) *tls.Config {
	cfg := &tls.Config{RootCAs: c.pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	if withCert {
		cfg.Certificates = []tls.Certificate{c.client}
	}
	return cfg
}

// secureCluster is a Cluster whose brokers also listen on SASL_SSL,
// SASL_PLAINTEXT and SSL. b.Addr() stays the PLAINTEXT listener the harness
// uses for readiness (as User:ANONYMOUS, which holds no ACL).
type secureCluster struct {
	*Cluster
	certs secCerts
	// addrs[broker id][listener name] is host:port.
	addrs map[int32]map[string]string
	// zkAuth is a ZooKeeper session authenticated as the brokers' digest
	// user, for znodes that have no world access.
	zkAuth *zk.Conn
}

// jaas is a sasl.jaas.config value.
func scramJAAS(user, pass string) string {
	return fmt.Sprintf(`org.apache.kafka.common.security.scram.ScramLoginModule required username="%s" password="%s";`, user, pass)
}

func plainJAAS() string {
	return fmt.Sprintf(`org.apache.kafka.common.security.plain.PlainLoginModule required username="%s" password="%s" user_%s="%s" user_%s="%s" user_%s="%s";`,
		adminUser, adminPass, adminUser, adminPass, aliceUser, alicePass, bobUser, bobPass)
}

// secureProps are the security keys of every broker of a secure cluster
// (Kafka's names; listeners are set per broker).
func secureProps(certs secCerts) map[string]string {
	p := map[string]string{
		// Kafka's default map names these four already; spelled out
		// because a broker defaulting to PLAINTEXT:PLAINTEXT alone
		// would refuse the listeners.
		"listener.security.protocol.map":       "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL",
		"inter.broker.listener.name":           lnSASLSSL,
		"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
		"sasl.enabled.mechanisms":              "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN",
		"ssl.keystore.type":                    "PEM",
		"ssl.keystore.location":                certs.BrokerPEM,
		"ssl.truststore.type":                  "PEM",
		"ssl.truststore.location":              certs.CA,
		"listener.name.ssl.ssl.client.auth":    "required",
		"ssl.principal.mapping.rules":          `RULE:^CN=([^,]*),.*$/$1/,DEFAULT`,
		"authorizer.class.name":                "kafka.security.authorizer.AclAuthorizer",
		"super.users":                          "User:" + adminUser,
		"allow.everyone.if.no.acl.found":       "false",
		"zookeeper.set.acl":                    "true",
	}
	for _, l := range []string{"sasl_ssl", "sasl_plaintext"} {
		p["listener.name."+l+".scram-sha-512.sasl.jaas.config"] = scramJAAS(adminUser, adminPass)
		p["listener.name."+l+".scram-sha-256.sasl.jaas.config"] = scramJAAS(adminUser, adminPass)
		p["listener.name."+l+".plain.sasl.jaas.config"] = plainJAAS()
	}
	return p
}

// newSecureCluster starts n brokers with every listener, the authorizer and
// ZooKeeper ACLs; extra overrides any generated key.
func newSecureCluster(t *testing.T, n int, extra map[string]string) *secureCluster {
	t.Helper()
	if zkSkip != "" {
		t.Skip(zkSkip)
	}
	dir := t.TempDir()
	certs := genCerts(t, dir)
	props := secureProps(certs)
	for k, v := range extra {
		props[k] = v
	}
	c := newStoppedCluster(t, props)
	sc := &secureCluster{Cluster: c, certs: certs, addrs: map[int32]map[string]string{}}
	sc.zkAuth = digestConn(t)
	jaasPath := filepath.Join(dir, "zk_client_jaas.conf")
	jaas := fmt.Sprintf("Client {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n  username=\"%s\"\n  password=\"%s\";\n};\n", zkUser, zkPass)
	if err := os.WriteFile(jaasPath, []byte(jaas), 0o600); err != nil {
		t.Fatal(err)
	}
	// The first SCRAM user, before any broker runs: brokers authenticate
	// to each other as admin.
	sc.bootstrapScramUser(t, adminUser, adminPass)
	for i := 1; i <= n; i++ {
		b := c.AddBroker(int32(i))
		ls := map[string]string{lnPlain: b.Addr()}
		var specs []string
		specs = append(specs, lnPlain+"://"+b.Addr())
		for _, ln := range []string{lnSASLSSL, lnSASLPlan, lnSSL} {
			ls[ln] = fmt.Sprintf("127.0.0.1:%d", freePort(t))
			specs = append(specs, ln+"://"+ls[ln])
		}
		b.Props["listeners"] = strings.Join(specs, ",")
		b.Props["advertised.listeners"] = b.Props["listeners"]
		b.Env = append(b.Env, "KAFKA_OPTS=-Djava.security.auth.login.config="+jaasPath)
		sc.addrs[int32(i)] = ls
	}
	for _, b := range c.Brokers {
		b.Start()
	}
	return sc
}

// digestConn is a ZooKeeper session authenticated as the brokers' digest
// user, closed at the end of the test.
func digestConn(t *testing.T) *zk.Conn {
	t.Helper()
	conn, err := connectZK(zkAddr)
	if err != nil {
		t.Fatalf("zk: %v", err)
	}
	t.Cleanup(conn.Close)
	if err := conn.AddAuth("digest", []byte(zkUser+":"+zkPass)); err != nil {
		t.Fatalf("zk addauth digest: %v", err)
	}
	return conn
}

// brokerACL is what Kafka puts on a znode with zookeeper.set.acl=true: the
// digest user may do everything, the world may read unless the path is
// sensitive (ZkData.sensitivePath: /config/users, /config/brokers, ...).
func brokerACL(sensitive bool) []zk.ACL {
	acl := zk.DigestACL(zk.PermAll, zkUser, zkPass)
	if !sensitive {
		acl = append(acl, zk.WorldACL(zk.PermRead)...)
	}
	return acl
}

// bootstrapScramUser writes /config/users/<user> with SCRAM-SHA-512 and
// SCRAM-SHA-256 credentials in Kafka's format, as kafka-configs.sh
// --zookeeper does, plus the /config/changes notification.
func (sc *secureCluster) bootstrapScramUser(t *testing.T, user, pass string) {
	t.Helper()
	for _, p := range []struct {
		path      string
		sensitive bool
	}{{"/config", false}, {"/config/users", true}, {"/config/changes", false}} {
		if _, err := sc.zkAuth.Create(sc.Path(p.path), nil, 0, brokerACL(p.sensitive)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatalf("create %s: %v", p.path, err)
		}
	}
	cfg := map[string]string{}
	for _, mech := range []string{"SCRAM-SHA-512", "SCRAM-SHA-256"} {
		salt := make([]byte, 32)
		_, _ = rand.Read(salt)
		cfg[mech] = scramCredentialString(mech, pass, salt, scramIterations)
	}
	data, _ := json.Marshal(map[string]any{"version": 1, "config": cfg})
	if _, err := sc.zkAuth.Create(sc.Path("/config/users/"+user), data, 0, brokerACL(true)); err != nil {
		t.Fatalf("create /config/users/%s: %v", user, err)
	}
	note, _ := json.Marshal(map[string]any{"version": 2, "entity_path": "users/" + user})
	if _, err := sc.zkAuth.Create(sc.Path("/config/changes/config_change_"), note, zk.FlagSequence, brokerACL(false)); err != nil {
		t.Fatalf("create /config/changes notification: %v", err)
	}
}

// hashFor is SCRAM-SHA-256's or SCRAM-SHA-512's hash.
func hashFor(mech string) func() hash.Hash {
	if mech == "SCRAM-SHA-256" {
		return sha256.New
	}
	return sha512.New
}

// scramKeys computes RFC 5802's SaltedPassword, StoredKey and ServerKey.
func scramKeys(mech, pass string, salt []byte, iter int) (salted, stored, server []byte) {
	h := hashFor(mech)
	salted, err := pbkdf2.Key(h, pass, salt, iter, h().Size())
	if err != nil {
		panic(err)
	}
	clientKey := hmacSum(h, salted, []byte("Client Key"))
	sum := h()
	sum.Write(clientKey)
	return salted, sum.Sum(nil), hmacSum(h, salted, []byte("Server Key"))
}

func hmacSum(h func() hash.Hash, key, msg []byte) []byte {
	m := hmac.New(h, key)
	m.Write(msg)
	return m.Sum(nil)
}

// scramCredentialString is Kafka's ScramCredentialUtils.credentialToString.
func scramCredentialString(mech, pass string, salt []byte, iter int) string {
	_, stored, server := scramKeys(mech, pass, salt, iter)
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("salt=%s,stored_key=%s,server_key=%s,iterations=%d", b64(salt), b64(stored), b64(server), iter)
}

// addr is broker id's address on listener ln.
func (sc *secureCluster) addr(id int32, ln string) string { return sc.addrs[id][ln] }

// seeds are every broker's addresses on listener ln.
func (sc *secureCluster) seeds(ln string) []string {
	var out []string
	for _, b := range sc.Brokers {
		out = append(out, sc.addrs[b.ID()][ln])
	}
	return out
}

// kgoOpts connects a kgo client on listener ln as user (SCRAM-SHA-512 on
// SASL_SSL, PLAIN on SASL_PLAINTEXT, the client certificate on SSL, where
// user is ignored).
func (sc *secureCluster) kgoOpts(ln, user, pass string) []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(sc.seeds(ln)...), kgo.ClientID("e2e-secure")}
	switch ln {
	case lnSASLSSL:
		opts = append(opts, kgo.DialTLSConfig(sc.certs.tlsConfig(false)),
			kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()))
	case lnSASLPlan:
		opts = append(opts, kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()))
	case lnSSL:
		opts = append(opts, kgo.DialTLSConfig(sc.certs.tlsConfig(true)))
	}
	return opts
}

// client is a kgo client on ln as user, closed at the end of the test.
func (sc *secureCluster) client(t *testing.T, ln, user, pass string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append(sc.kgoOpts(ln, user, pass), opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// admin is a kadm client as the super user over SASL_SSL.
func (sc *secureCluster) admin(t *testing.T) *kadm.Client {
	return kadm.NewClient(sc.client(t, lnSASLSSL, adminUser, adminPass))
}

// createUser stores SCRAM-SHA-512 and SCRAM-SHA-256 credentials for user
// through AlterUserScramCredentials as the super user, and waits until
// every broker accepts them.
func (sc *secureCluster) createUser(t *testing.T, user, pass string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := sc.admin(t).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: user, Mechanism: kadm.ScramSha512, Iterations: scramIterations, Password: pass},
		{User: user, Mechanism: kadm.ScramSha256, Iterations: scramIterations, Password: pass},
	})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("AlterUserScramCredentials %s: %v", user, err)
	}
	for _, b := range sc.Brokers {
		addr := sc.addr(b.ID(), lnSASLSSL)
		eventually(t, 30*time.Second, func() error {
			return sc.authenticateOnce(addr, user, pass)
		})
	}
}

// authenticateOnce connects to addr (SASL_SSL) and runs one SCRAM-SHA-512
// exchange with a one-shot kgo client.
func (sc *secureCluster) authenticateOnce(addr, user, pass string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTLSConfig(sc.certs.tlsConfig(false)),
		kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()), kgo.RequestRetries(0))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	_, err = req.RequestWith(ctx, cl)
	return err
}

// allow adds ACLs through the admin client and fails the test on error.
func (sc *secureCluster) allow(t *testing.T, b *kadm.ACLBuilder) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := sc.admin(t).CreateACLs(ctx, b)
	if err != nil {
		t.Fatalf("CreateAcls: %v", err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("CreateAcls %v: %v %s", r, r.Err, r.ErrMessage)
		}
	}
}

// createTopic creates topic as the super user and waits for its leaders
// (state znodes: world-readable under zookeeper.set.acl).
func (sc *secureCluster) createTopic(t *testing.T, topic string, partitions int32, rf int16, assignment [][]int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	adm := sc.admin(t)
	var err error
	var resp kadm.CreateTopicResponse
	if assignment != nil {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 30000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
		for p, replicas := range assignment {
			a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			a.Partition, a.Replicas = int32(p), replicas
			rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
		}
		req.Topics = append(req.Topics, rt)
		partitions, rf = int32(len(assignment)), int16(len(assignment[0]))
		var kr *kmsg.CreateTopicsResponse
		kr, err = req.RequestWith(ctx, sc.client(t, lnSASLSSL, adminUser, adminPass))
		if err == nil && kr.Topics[0].ErrorCode != 0 {
			err = fmt.Errorf("error code %d", kr.Topics[0].ErrorCode)
		}
	} else {
		resp, err = adm.CreateTopic(ctx, partitions, rf, nil, topic)
		if err == nil {
			err = resp.Err
		}
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	for p := int32(0); p < partitions; p++ {
		sc.waitState(t, topic, p, 30*time.Second, func(s partState) error {
			if s.Leader < 0 || len(s.ISR) != int(rf) {
				return fmt.Errorf("want a leader and %d in the ISR", rf)
			}
			return nil
		})
	}
	// Every broker's metadata knows the leaders (as the super user).
	for _, b := range sc.Brokers {
		cl := sc.client(t, lnSASLSSL, adminUser, adminPass, kgo.SeedBrokers(sc.addr(b.ID(), lnSASLSSL)))
		eventually(t, 30*time.Second, func() error {
			req := kmsg.NewPtrMetadataRequest()
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return err
			}
			if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != int(partitions) {
				return fmt.Errorf("broker %d metadata of %s: %+v", b.ID(), topic, resp.Topics)
			}
			for _, p := range resp.Topics[0].Partitions {
				if p.ErrorCode != 0 || p.Leader < 0 {
					return fmt.Errorf("broker %d: %s[%d] error %d leader %d", b.ID(), topic, p.Partition, p.ErrorCode, p.Leader)
				}
			}
			return nil
		})
	}
}

// endOffsets are topic's high watermarks, read as the super user.
func (sc *secureCluster) endOffsets(t *testing.T, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := map[int32]int64{}
	adm := sc.admin(t)
	eventually(t, 30*time.Second, func() error {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return err
		}
		if err := ends.Error(); err != nil {
			return err
		}
		ends.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
		return nil
	})
	return out
}

// saramaConfig is a sarama config for listener ln as user.
func (sc *secureCluster) saramaConfig(ln, user, pass string) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.ClientID = "e2e-sarama-secure"
	switch ln {
	case lnSASLSSL:
		cfg.Net.TLS.Enable, cfg.Net.TLS.Config = true, sc.certs.tlsConfig(false)
		cfg.Net.SASL.Enable, cfg.Net.SASL.Handshake = true, true
		cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
		cfg.Net.SASL.User, cfg.Net.SASL.Password = user, pass
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{mech: "SCRAM-SHA-512"} }
	case lnSASLPlan:
		cfg.Net.SASL.Enable, cfg.Net.SASL.Handshake = true, true
		cfg.Net.SASL.Mechanism = sarama.SASLTypePlaintext
		cfg.Net.SASL.User, cfg.Net.SASL.Password = user, pass
	case lnSSL:
		cfg.Net.TLS.Enable, cfg.Net.TLS.Config = true, sc.certs.tlsConfig(true)
	}
	return cfg
}

// librdkafkaConf is the client configuration of kcat and
// confluent-kafka-python for listener ln as user (librdkafka's names).
func (sc *secureCluster) librdkafkaConf(ln, user, pass string) map[string]string {
	m := map[string]string{"bootstrap.servers": strings.Join(sc.seeds(ln), ",")}
	switch ln {
	case lnSASLSSL:
		m["security.protocol"] = "SASL_SSL"
		m["sasl.mechanisms"] = "SCRAM-SHA-512"
		m["sasl.username"], m["sasl.password"] = user, pass
		m["ssl.ca.location"] = sc.certs.CA
	case lnSASLPlan:
		m["security.protocol"] = "SASL_PLAINTEXT"
		m["sasl.mechanisms"] = "PLAIN"
		m["sasl.username"], m["sasl.password"] = user, pass
	case lnSSL:
		m["security.protocol"] = "SSL"
		m["ssl.ca.location"] = sc.certs.CA
		m["ssl.certificate.location"] = sc.certs.ClientCert
		m["ssl.key.location"] = sc.certs.ClientKey
	}
	return m
}

// kcatArgs are -X arguments for librdkafkaConf without bootstrap.servers.
func kcatArgs(conf map[string]string) []string {
	var out []string
	for k, v := range conf {
		if k != "bootstrap.servers" {
			out = append(out, "-X", k+"="+v)
		}
	}
	return out
}

// scramClient is the client side of SCRAM (RFC 5802), written from the RFC
// for these tests: sarama's SCRAMClient, and the raw-socket exchanges.
type scramClient struct {
	mech        string
	user, pass  string
	nonce       string
	clientFirst string
	serverSig   []byte
	step        int
	done        bool
	// tamperNonce, if set, rewrites the nonce of the client-final message.
	tamperNonce func(string) string
}

func (c *scramClient) Begin(user, pass, authzID string) error {
	c.user, c.pass = user, pass
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	c.nonce = base64.RawStdEncoding.EncodeToString(b)
	c.step, c.done = 0, false
	return nil
}

func (c *scramClient) Step(challenge string) (string, error) {
	c.step++
	switch c.step {
	case 1:
		name := strings.NewReplacer("=", "=3D", ",", "=2C").Replace(c.user)
		c.clientFirst = "n=" + name + ",r=" + c.nonce
		return "n,," + c.clientFirst, nil
	case 2:
		attrs := scramAttrs(challenge)
		nonce, saltB64, iterS := attrs["r"], attrs["s"], attrs["i"]
		if !strings.HasPrefix(nonce, c.nonce) {
			return "", fmt.Errorf("scram: server nonce %q does not extend ours", nonce)
		}
		salt, err := base64.StdEncoding.DecodeString(saltB64)
		if err != nil {
			return "", fmt.Errorf("scram: salt: %w", err)
		}
		iter, err := strconv.Atoi(iterS)
		if err != nil {
			return "", fmt.Errorf("scram: iterations: %w", err)
		}
		h := hashFor(c.mech)
		salted, _, serverKey := scramKeys(c.mech, c.pass, salt, iter)
		if c.tamperNonce != nil {
			nonce = c.tamperNonce(nonce)
		}
		final := "c=" + base64.StdEncoding.EncodeToString([]byte("n,,")) + ",r=" + nonce
		authMsg := c.clientFirst + "," + challenge + "," + final
		clientKey := hmacSum(h, salted, []byte("Client Key"))
		sum := h()
		sum.Write(clientKey)
		sig := hmacSum(h, sum.Sum(nil), []byte(authMsg))
		proof := make([]byte, len(clientKey))
		for i := range proof {
			proof[i] = clientKey[i] ^ sig[i]
		}
		c.serverSig = hmacSum(h, serverKey, []byte(authMsg))
		return final + ",p=" + base64.StdEncoding.EncodeToString(proof), nil
	default:
		attrs := scramAttrs(challenge)
		if e, ok := attrs["e"]; ok {
			return "", fmt.Errorf("scram: server error %q", e)
		}
		v, err := base64.StdEncoding.DecodeString(attrs["v"])
		if err != nil || !hmac.Equal(v, c.serverSig) {
			return "", errors.New("scram: server signature mismatch")
		}
		c.done = true
		return "", nil
	}
}

func (c *scramClient) Done() bool { return c.done }

func scramAttrs(s string) map[string]string {
	m := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}
