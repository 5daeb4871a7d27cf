package test

// Security behaviour of the built broker (issue 14) with real ZooKeeper:
// SASL failures, authorization of Produce and Metadata, ACL propagation
// between brokers, the pre-authentication receive bound, the SCRAM
// credential znode format and the znode ACLs of zookeeper.set.acl.

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// dialTLS opens a TLS connection to addr (no SASL yet).
func (sc *secureCluster) dialTLS(t *testing.T, addr string, withCert bool) *rawConn {
	t.Helper()
	d := &net.Dialer{Timeout: 3 * time.Second}
	nc, err := tls.DialWithDialer(d, "tcp", addr, sc.certs.tlsConfig(withCert))
	if err != nil {
		t.Fatalf("tls dial %s: %v", addr, err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc}
}

// dialListener opens a connection to broker id's listener ln without
// authenticating: TLS for SSL and SASL_SSL.
func (sc *secureCluster) dialListener(t *testing.T, id int32, ln string) *rawConn {
	t.Helper()
	switch ln {
	case lnSASLSSL:
		return sc.dialTLS(t, sc.addr(id, ln), false)
	case lnSSL:
		return sc.dialTLS(t, sc.addr(id, ln), true)
	default:
		return dialRaw(t, sc.addr(id, ln))
	}
}

// saslHandshake sends SaslHandshake v1 for mech and fails unless accepted.
func (r *rawConn) saslHandshake(mech string) {
	r.t.Helper()
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.SetVersion(1)
	req.Mechanism = mech
	resp := r.roundTrip(req).(*kmsg.SASLHandshakeResponse)
	if resp.ErrorCode != 0 {
		r.t.Fatalf("SaslHandshake %s: error %d (%v), mechanisms %v", mech, resp.ErrorCode, kerr.ErrorForCode(resp.ErrorCode), resp.SupportedMechanisms)
	}
}

// saslAuthenticate sends one SaslAuthenticate v1 and returns the response.
func (r *rawConn) saslAuthenticate(token []byte) *kmsg.SASLAuthenticateResponse {
	r.t.Helper()
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.SetVersion(1)
	req.SASLAuthBytes = token
	return r.roundTrip(req).(*kmsg.SASLAuthenticateResponse)
}

// scramExchange runs SCRAM-SHA-512 on r as user with pass and returns the
// last SaslAuthenticate response (error code 0 once authenticated).
func (r *rawConn) scramExchange(c *scramClient, user, pass string) *kmsg.SASLAuthenticateResponse {
	r.t.Helper()
	r.saslHandshake(c.mech)
	_ = c.Begin(user, pass, "")
	first, _ := c.Step("")
	resp := r.saslAuthenticate([]byte(first))
	if resp.ErrorCode != 0 {
		return resp
	}
	final, err := c.Step(string(resp.SASLAuthBytes))
	if err != nil {
		r.t.Fatalf("scram client: %v", err)
	}
	resp = r.saslAuthenticate([]byte(final))
	if resp.ErrorCode == 0 {
		if _, err := c.Step(string(resp.SASLAuthBytes)); err != nil {
			r.t.Errorf("server-final message: %v", err)
		}
	}
	return resp
}

// dialAuthenticated is a TLS connection to broker id's SASL_SSL listener
// authenticated with SCRAM-SHA-512 as user.
func (sc *secureCluster) dialAuthenticated(t *testing.T, id int32, user, pass string) *rawConn {
	t.Helper()
	rc := sc.dialTLS(t, sc.addr(id, lnSASLSSL), false)
	if resp := rc.scramExchange(&scramClient{mech: "SCRAM-SHA-512"}, user, pass); resp.ErrorCode != 0 {
		t.Fatalf("SCRAM-SHA-512 as %s: error %d (%v)", user, resp.ErrorCode, kerr.ErrorForCode(resp.ErrorCode))
	}
	return rc
}

// TestSecureWrongPassword: a wrong password answers
// SASL_AUTHENTICATION_FAILED (58) and the broker closes the connection,
// for SCRAM-SHA-512 on SASL_SSL and PLAIN on SASL_PLAINTEXT; kgo reports
// the same error; the right password works on the next connection.
func TestSecureWrongPassword(t *testing.T) {
	sc := newSecureCluster(t, 1, nil)
	sc.createUser(t, aliceUser, alicePass)

	t.Run("scram-sha-512", func(t *testing.T) {
		rc := sc.dialTLS(t, sc.addr(1, lnSASLSSL), false)
		start := time.Now()
		resp := rc.scramExchange(&scramClient{mech: "SCRAM-SHA-512"}, aliceUser, "wrong")
		expectCode(t, "SCRAM with a wrong password", resp.ErrorCode, kerr.SaslAuthenticationFailed.Code)
		t.Logf("failure answered after %s (connection.failed.authentication.delay.ms=100)", time.Since(start).Round(time.Millisecond))
		rc.expectClosed(5 * time.Second)
		// An unknown user fails the same way (at the first message or
		// the last, as Kafka: no user enumeration is promised).
		rc = sc.dialTLS(t, sc.addr(1, lnSASLSSL), false)
		resp = rc.scramExchange(&scramClient{mech: "SCRAM-SHA-512"}, "nobody", "x")
		expectCode(t, "SCRAM for an unknown user", resp.ErrorCode, kerr.SaslAuthenticationFailed.Code)
		rc.expectClosed(5 * time.Second)
		sc.dialAuthenticated(t, 1, aliceUser, alicePass)
	})
	t.Run("plain", func(t *testing.T) {
		rc := sc.dialListener(t, 1, lnSASLPlan)
		rc.saslHandshake("PLAIN")
		resp := rc.saslAuthenticate([]byte("\x00" + aliceUser + "\x00wrong"))
		expectCode(t, "PLAIN with a wrong password", resp.ErrorCode, kerr.SaslAuthenticationFailed.Code)
		rc.expectClosed(5 * time.Second)
		rc = sc.dialListener(t, 1, lnSASLPlan)
		rc.saslHandshake("PLAIN")
		if resp := rc.saslAuthenticate([]byte("\x00" + aliceUser + "\x00" + alicePass)); resp.ErrorCode != 0 {
			t.Errorf("PLAIN with the right password: error %d", resp.ErrorCode)
		}
	})
	t.Run("kgo", func(t *testing.T) {
		for _, ln := range []string{lnSASLSSL, lnSASLPlan} {
			cl := sc.client(t, ln, aliceUser, "wrong", kgo.RequestRetries(0))
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			req := kmsg.NewPtrMetadataRequest()
			_, err := req.RequestWith(ctx, cl)
			cancel()
			if !errors.Is(err, kerr.SaslAuthenticationFailed) {
				t.Errorf("%s: kgo with a wrong password: %v, want SASL_AUTHENTICATION_FAILED", ln, err)
			}
		}
	})
}

// TestSecureProduceWithoutWrite: bob may Read and Describe the topic but
// not Write: Produce answers TOPIC_AUTHORIZATION_FAILED (29), to kgo and
// to a raw request, and the log end offset stays 0.
func TestSecureProduceWithoutWrite(t *testing.T) {
	sc := newSecureCluster(t, 1, nil)
	sc.createUser(t, bobUser, bobPass)
	const topic = "sec-readonly"
	sc.createTopic(t, topic, 1, 1, nil)
	sc.allow(t, kadm.NewACLs().Allow("User:"+bobUser).Topics(topic).Operations(kadm.OpRead, kadm.OpDescribe))

	cl := sc.client(t, lnSASLSSL, bobUser, bobPass, kgo.DisableIdempotentWrite(), kgo.RequestRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("must not be appended")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("kgo produce without Write: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	// The idempotent producer needs IdempotentWrite on the cluster or Write
	// on some topic (KIP-679): bob has neither.
	idem := sc.client(t, lnSASLSSL, bobUser, bobPass, kgo.RequestRetries(0))
	err = idem.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("must not be appended")}).FirstErr()
	if !errors.Is(err, kerr.ClusterAuthorizationFailed) && !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("idempotent kgo produce without Write: %v, want CLUSTER_AUTHORIZATION_FAILED (InitProducerId)", err)
	}
	rc := sc.dialAuthenticated(t, 1, bobUser, bobPass)
	req := produceReqTo(topic, -1, batch([][]byte{[]byte("must not be appended")}, 0, nil, true))
	resp := rc.roundTrip(req).(*kmsg.ProduceResponse)
	expectCode(t, "raw Produce without Write", resp.Topics[0].Partitions[0].ErrorCode, kerr.TopicAuthorizationFailed.Code)
	if ends := sc.endOffsets(t, topic); ends[0] != 0 {
		t.Errorf("log end offset %d after refused produces, want 0", ends[0])
	}
	// Control: the super user's produce is appended.
	if err := sc.client(t, lnSASLSSL, adminUser, adminPass).ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("ok")}).FirstErr(); err != nil {
		t.Fatalf("produce as the super user: %v", err)
	}
	if ends := sc.endOffsets(t, topic); ends[0] != 1 {
		t.Errorf("log end offset %d after one allowed record, want 1", ends[0])
	}
}

// produceReqTo is produceReq for topic's partition 0.
func produceReqTo(topic string, acks int16, records []byte) *kmsg.ProduceRequest {
	req := produceReq(acks, records)
	req.Topics[0].Topic = topic
	return req
}

// TestSecureMetadataWithoutDescribe: a topic bob may not Describe is absent
// from his all-topics Metadata, and named explicitly it answers
// TOPIC_AUTHORIZATION_FAILED (Kafka's KafkaApis.handleTopicMetadataRequest);
// a topic he may Describe is listed.
func TestSecureMetadataWithoutDescribe(t *testing.T) {
	sc := newSecureCluster(t, 1, nil)
	sc.createUser(t, bobUser, bobPass)
	sc.createTopic(t, "sec-hidden", 1, 1, nil)
	sc.createTopic(t, "sec-visible", 1, 1, nil)
	sc.allow(t, kadm.NewACLs().Allow("User:"+bobUser).Topics("sec-visible").Operations(kadm.OpDescribe))
	cl := sc.client(t, lnSASLSSL, bobUser, bobPass)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	all := kmsg.NewPtrMetadataRequest() // Topics nil: every topic
	resp, err := all.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tp := range resp.Topics {
		names = append(names, *tp.Topic)
	}
	if slices.Contains(names, "sec-hidden") || !slices.Contains(names, "sec-visible") {
		t.Errorf("bob's all-topics Metadata lists %v, want sec-visible and not sec-hidden", names)
	}
	one := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("sec-hidden")
	one.Topics = append(one.Topics, rt)
	resp, err = one.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 {
		t.Fatalf("Metadata for sec-hidden: %d topics", len(resp.Topics))
	}
	expectCode(t, "Metadata naming a topic without Describe", resp.Topics[0].ErrorCode, kerr.TopicAuthorizationFailed.Code)
	if n := len(resp.Topics[0].Partitions); n != 0 {
		t.Errorf("Metadata without Describe returned %d partitions", n)
	}
}

// TestSecureACLPropagation: an ACL created through broker 1 is enforced by
// every broker of three; the test logs how long each took (no timed
// assertion: the bound is generous, the figure is the report).
func TestSecureACLPropagation(t *testing.T) {
	sc := newSecureCluster(t, 3, map[string]string{"offsets.topic.replication.factor": "3"})
	sc.createUser(t, bobUser, bobPass)
	const topic = "sec-propagate"
	sc.createTopic(t, topic, 1, 3, nil)
	// One connected client per broker, so a poll is one Metadata request.
	bobs := map[int32]*kgo.Client{}
	for _, b := range sc.Brokers {
		bobs[b.ID()] = sc.client(t, lnSASLSSL, bobUser, bobPass, kgo.SeedBrokers(sc.addr(b.ID(), lnSASLSSL)))
	}
	described := func(id int32) error {
		cl := bobs[id]
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		// To this broker itself, not whichever kgo picks.
		kresp, err := cl.Broker(int(id)).Request(ctx, req)
		if err != nil {
			return err
		}
		resp := kresp.(*kmsg.MetadataResponse)
		if c := resp.Topics[0].ErrorCode; c != 0 {
			return fmt.Errorf("broker %d: %w", id, kerr.ErrorForCode(c))
		}
		return nil
	}
	for _, b := range sc.Brokers {
		if err := described(b.ID()); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("before the ACL, broker %d answered %v, want TOPIC_AUTHORIZATION_FAILED", b.ID(), err)
		}
	}
	// CreateAcls to broker 1 only.
	cl := sc.client(t, lnSASLSSL, adminUser, adminPass, kgo.SeedBrokers(sc.addr(1, lnSASLSSL)))
	req := kmsg.NewPtrCreateACLsRequest()
	cr := kmsg.NewCreateACLsRequestCreation()
	cr.ResourceType, cr.ResourceName, cr.ResourcePatternType = kmsg.ACLResourceTypeTopic, topic, kmsg.ACLResourcePatternTypeLiteral
	cr.Principal, cr.Host = "User:"+bobUser, "*"
	cr.Operation, cr.PermissionType = kmsg.ACLOperationDescribe, kmsg.ACLPermissionTypeAllow
	req.Creations = append(req.Creations, cr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl.Broker(1))
	if err != nil {
		t.Fatal(err)
	}
	if c := resp.Results[0].ErrorCode; c != 0 {
		t.Fatalf("CreateAcls through broker 1: %v", kerr.ErrorForCode(c))
	}
	// Poll every broker at once from the CreateAcls answer on; each
	// figure is the first poll (100 ms apart) that saw the ACL.
	created := time.Now()
	took := make([]time.Duration, len(sc.Brokers))
	errs := make([]error, len(sc.Brokers))
	var wg sync.WaitGroup
	for i, b := range sc.Brokers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = poll(30*time.Second, func() error { return described(b.ID()) })
			took[i] = time.Since(created)
		}()
	}
	wg.Wait()
	for i, b := range sc.Brokers {
		if errs[i] != nil {
			t.Errorf("broker %d never enforced the ACL: %v", b.ID(), errs[i])
			continue
		}
		t.Logf("ACL created through broker 1 enforced by broker %d after %s", b.ID(), took[i].Round(10*time.Microsecond))
	}
}

// TestSecurePreAuthSizePrefix (CVE-2022-34917): before authentication a
// size prefix above sasl.server.max.receive.size (512 KiB) closes the
// connection at once, without waiting for (or allocating) the body: 1 GiB,
// and 10 MiB, which socket.request.max.bytes (100 MiB) alone would let
// through. The broker's RSS must not grow by the announced sizes.
func TestSecurePreAuthSizePrefix(t *testing.T) {
	sc := newSecureCluster(t, 1, nil)
	h := &hostileBroker{c: sc.Cluster, b: sc.Brokers[0]}
	for _, ln := range []string{lnSASLSSL, lnSASLPlan} {
		for _, size := range []uint32{1 << 30, 10 << 20} {
			t.Run(fmt.Sprintf("%s-%dMiB", ln, size>>20), func(t *testing.T) {
				before := h.rss(t)
				var conns []*rawConn
				for range 8 {
					rc := sc.dialListener(t, 1, ln)
					b := binary.BigEndian.AppendUint32(nil, size)
					b = append(b, header(17, 1, 1, "hostile", false)...)
					rc.write(b)
					conns = append(conns, rc)
				}
				for _, rc := range conns {
					rc.expectClosed(5 * time.Second)
				}
				after := h.rss(t)
				t.Logf("RSS %d KiB before, %d KiB after 8 connections announcing %d bytes", before, after, size)
				if after-before > 32<<10 {
					t.Errorf("broker RSS grew by %d KiB on 8 pre-authentication frames of %d bytes", after-before, size)
				}
			})
		}
	}
	h.alive(t)
}

// TestSecureScramZNodeFormat: credentials written with
// AlterUserScramCredentials are stored at /config/users/<user> in Kafka's
// format, with stored_key and server_key equal to RFC 5802's values for the
// stored salt and iterations, announced in /config/changes, and not readable
// without the digest credentials.
func TestSecureScramZNodeFormat(t *testing.T) {
	sc := newSecureCluster(t, 1, nil)
	const user, pass = "carol@example.com", "p@ss,word=1"
	sc.createUser(t, user, pass)
	path := sc.Path("/config/users/" + strings.ReplaceAll(user, "@", "%40"))
	data, _, err := sc.zkAuth.Get(path)
	if err != nil {
		t.Fatalf("get %s: %v", path, err)
	}
	t.Logf("%s = %s", path, data)
	var node struct {
		Version int               `json:"version"`
		Config  map[string]string `json:"config"`
	}
	if err := json.Unmarshal(data, &node); err != nil {
		t.Fatalf("znode is not JSON: %v", err)
	}
	if node.Version != 1 || len(node.Config) != 2 {
		t.Errorf("version %d, config keys %v; want version 1 with SCRAM-SHA-256 and SCRAM-SHA-512", node.Version, node.Config)
	}
	for _, mech := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
		v, ok := node.Config[mech]
		if !ok {
			t.Errorf("no %s in %s", mech, data)
			continue
		}
		var keys []string
		attrs := map[string]string{}
		for _, kv := range strings.Split(v, ",") {
			k, val, _ := strings.Cut(kv, "=")
			keys = append(keys, k)
			attrs[k] = val
		}
		if want := []string{"salt", "stored_key", "server_key", "iterations"}; !slices.Equal(keys, want) {
			t.Errorf("%s attributes %v, want %v in Kafka's order", mech, keys, want)
		}
		salt, err := base64.StdEncoding.DecodeString(attrs["salt"])
		if err != nil || len(salt) == 0 {
			t.Errorf("%s salt %q: %v", mech, attrs["salt"], err)
			continue
		}
		iter, _ := strconv.Atoi(attrs["iterations"])
		if iter != scramIterations {
			t.Errorf("%s iterations %d, want %d", mech, iter, scramIterations)
		}
		if want := scramCredentialString(mech, pass, salt, scramIterations); v != want {
			t.Errorf("%s stored as\n  %s\nRFC 5802 gives\n  %s", mech, v, want)
		}
	}
	// Sensitive path: no world access; the harness's unauthenticated
	// session cannot read it.
	acl, _, err := sc.zkAuth.GetACL(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range acl {
		if a.Scheme == "world" {
			t.Errorf("%s has world ACL %+v", path, a)
		}
	}
	if _, _, err := sc.ZK.Get(path); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("unauthenticated read of %s: %v, want NoAuth", path, err)
	}
	// The change notification Kafka's brokers follow.
	kids, _, err := sc.zkAuth.Children(sc.Path("/config/changes"))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, k := range kids {
		d, _, err := sc.zkAuth.Get(sc.Path("/config/changes/" + k))
		if err == nil && strings.Contains(string(d), `"entity_path":"users/carol%40example.com"`) && strings.Contains(string(d), `"version":2`) {
			found = true
		}
	}
	if !found {
		t.Errorf("no /config/changes notification for users/carol%%40example.com among %v", kids)
	}
}

// TestSecureZNodeACLs: with zookeeper.set.acl=true an unauthenticated
// ZooKeeper client can read but not change or delete a partition state
// znode, nor create a child under /brokers/ids; the digest user can.
func TestSecureZNodeACLs(t *testing.T) {
	sc := newSecureCluster(t, 1, nil)
	const topic = "sec-zk-acl"
	sc.createTopic(t, topic, 1, 1, nil)
	path := sc.Path("/brokers/topics/" + topic + "/partitions/0/state")
	data, stat, err := sc.ZK.Get(path)
	if err != nil {
		t.Fatalf("unauthenticated read of %s: %v (world READ expected)", path, err)
	}
	acl, _, err := sc.ZK.GetACL(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s ACL %+v", path, acl)
	forged := []byte(`{"controller_epoch":999,"leader":99,"version":1,"leader_epoch":999,"isr":[99]}`)
	if _, err := sc.ZK.Set(path, forged, stat.Version); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("unauthenticated set of %s: %v, want NoAuth", path, err)
	}
	if err := sc.ZK.Delete(path, stat.Version); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("unauthenticated delete of %s: %v, want NoAuth", path, err)
	}
	if _, err := sc.ZK.Create(sc.Path("/brokers/ids/99"), []byte("{}"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("unauthenticated create of /brokers/ids/99: %v, want NoAuth", err)
	}
	after, _, err := sc.ZK.Get(path)
	if err != nil || string(after) != string(data) {
		t.Errorf("state znode changed: %s -> %s (%v)", data, after, err)
	}
	// The brokers' own digest user may write (so the ACL is not simply
	// read-only for everyone): set the same bytes back.
	if _, err := sc.zkAuth.Set(path, data, stat.Version); err != nil {
		t.Errorf("digest user set of %s: %v", path, err)
	}
}

// TestSecureScramLibrdkafkaFinalNonce: librdkafka before 2.6.1 (Debian
// bookworm's 2.0.2, so kcat and confluent-kafka-python here) sends as the
// client-final nonce its own nonce followed by the server-first nonce, which
// already begins with it (confluentinc/librdkafka#4895). Kafka's
// ScramSaslServer accepts a final nonce that ends with the server-first
// nonce (clientFinalMessage.nonce().endsWith(serverFirstMessage.nonce()),
// the check CVE-2024-56128 added), so those clients authenticate against
// Kafka; they must here too, or kcat and python cannot use SCRAM. A nonce
// that does not end with the server's is refused (hostile row 18).
func TestSecureScramLibrdkafkaFinalNonce(t *testing.T) {
	sc := newSecureCluster(t, 1, nil)
	c := &scramClient{mech: "SCRAM-SHA-512"}
	c.tamperNonce = func(n string) string { return c.nonce + n }
	rc := sc.dialTLS(t, sc.addr(1, lnSASLSSL), false)
	resp := rc.scramExchange(c, adminUser, adminPass)
	expectCode(t, "SCRAM final nonce = client nonce + server-first nonce (librdkafka < 2.6.1)", resp.ErrorCode, 0)
}
