package zkcoord

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/internal/zktest"
	"github.com/kafkazk/broker/security"
)

// Security against a real ZooKeeper: ACLs and SCRAM credentials written
// on one session reach another session's caches through the change
// notifications; znode ACLs keep unauthenticated clients out.

func newAuthorizer() *security.Authorizer { return security.NewAuthorizer(security.AuthorizerConfig{}) }

// waitFor polls cond every 2 ms and returns how long it took to hold.
// The watch fires on another session's goroutine, so there is nothing to
// synchronise on but the cache itself.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return time.Since(start)
}

func hasACL(a *security.Authorizer, p security.ResourcePattern, e security.ACE) bool {
	v, ok := a.ResourceACLs(p)
	return ok && slices.Contains(v.ACLs, e)
}

// TestZKACLsPropagateThroughNotifications: ACLs written by one session's
// ACLStore are in Kafka's znode and notification formats and reach another
// session's Authorizer through the change notification (latency quoted);
// ACLs present before WatchACLs are loaded; ACLs and notifications written
// raw, as Kafka's kafka-acls.sh --authorizer-properties zookeeper.connect
// writes them, are honoured; deletions propagate and remove the znode.
func TestZKACLsPropagateThroughNotifications(t *testing.T) {
	srv := zktest.Start(t)
	ctx := context.Background()
	s1 := connect(t, testConfig(t, srv.Connect(), 1))
	a1 := newAuthorizer()
	if err := s1.WatchACLs(ctx, a1); err != nil {
		t.Fatal(err)
	}
	pre := security.ResourcePattern{Type: security.ResourceTopic, Name: "before", PatternType: security.PatternLiteral}
	if errs := s1.ACLAdmin().CreateACLs(ctx, []security.ACLBinding{{Pattern: pre, Entry: allow("User:early", security.OpRead)}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if !hasACL(a1, pre, allow("User:early", security.OpRead)) {
		t.Fatal("the writer's own cache does not show its write on return")
	}

	s2 := connect(t, testConfig(t, srv.Connect(), 2))
	a2 := newAuthorizer()
	if err := s2.WatchACLs(ctx, a2); err != nil {
		t.Fatal(err)
	}
	if !hasACL(a2, pre, allow("User:early", security.OpRead)) {
		t.Fatal("an ACL present before WatchACLs was not loaded")
	}

	lit := topicLiteral("orders")
	prefixed := security.ResourcePattern{Type: security.ResourceGroup, Name: "app-", PatternType: security.PatternPrefixed}
	aliceRead := allow("User:alice", security.OpRead)
	var latencies []time.Duration
	const samples = 20
	for i := 0; i < samples; i++ {
		e := allow(fmt.Sprintf("User:u%d", i), security.OpWrite)
		start := time.Now()
		errs := s1.ACLAdmin().CreateACLs(ctx, []security.ACLBinding{{Pattern: lit, Entry: e}, {Pattern: prefixed, Entry: aliceRead}})
		if errs[0] != nil || errs[1] != nil {
			t.Fatal(errs)
		}
		waitFor(t, 10*time.Second, "literal ACL on session 2", func() bool { return hasACL(a2, lit, e) })
		latencies = append(latencies, time.Since(start))
	}
	waitFor(t, 10*time.Second, "prefixed ACL on session 2", func() bool { return hasACL(a2, prefixed, aliceRead) })
	if !a2.Authorize(security.User("alice"), "10.0.0.1", security.OpRead, security.ResourceGroup, "app-billing") {
		t.Fatal("session 2 does not enforce the prefixed ACL")
	}
	slices.Sort(latencies)
	t.Logf("ACL create -> other session's Authorizer: min %v, median %v, p90 %v, max %v (n=%d, write included)",
		latencies[0], latencies[len(latencies)/2], latencies[len(latencies)*9/10], latencies[len(latencies)-1], len(latencies))

	raw := rawConn(t, srv.Connect())
	data, st := mustGet(t, raw, "/kafka-acl/Topic/orders")
	if v, _ := a2.ResourceACLs(lit); v.ZkVersion != st.Version || len(v.ACLs) != samples {
		t.Fatalf("cached version %d (%d ACLs), znode version %d: %s", v.ZkVersion, len(v.ACLs), st.Version, data)
	}
	kids, _, err := raw.Children(aclChangesPath)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(kids)
	if len(kids) != samples+1 || kids[0] != "acl_changes_0000000000" {
		t.Fatalf("literal notifications %v", kids)
	}
	if d, _ := mustGet(t, raw, aclChangesPath+"/"+kids[1]); string(d) != "TOPIC:orders" {
		t.Fatalf("literal payload %q", d)
	}
	ext, _, _ := raw.Children(aclExtendedChangesPath)
	slices.Sort(ext)
	if d, _ := mustGet(t, raw, aclExtendedChangesPath+"/"+ext[0]); string(d) != `{"version":1,"resourceType":"GROUP","name":"app-","patternType":"PREFIXED"}` {
		t.Fatalf("extended payload %s", d)
	}

	// Written raw as Kafka's own AclAuthorizer does (a Kafka broker or
	// kafka-acls.sh with --authorizer-properties): znode, then notification.
	kafkaACL := `{"version":1,"acls":[{"principal":"User:kafka-tool","permissionType":"Deny","operation":"Describe","host":"10.1.1.1"}]}`
	if _, err := raw.Create("/kafka-acl/TransactionalId/tx-1", []byte(kafkaACL), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Create(aclChangesPath+"/"+aclChangeNamePrefix, []byte("TRANSACTIONAL_ID:tx-1"), zk.FlagSequence); err != nil {
		t.Fatal(err)
	}
	txp := security.ResourcePattern{Type: security.ResourceTransactionalID, Name: "tx-1", PatternType: security.PatternLiteral}
	deny := security.ACE{Principal: "User:kafka-tool", Host: "10.1.1.1", Operation: security.OpDescribe, Permission: security.PermissionDeny}
	waitFor(t, 10*time.Second, "raw Kafka ACL on session 2", func() bool { return hasACL(a2, txp, deny) })
	waitFor(t, 10*time.Second, "raw Kafka ACL on session 1", func() bool { return hasACL(a1, txp, deny) })

	// Delete every ACL of the literal topic: the znode goes, both caches follow.
	deleted, derrs := s2.ACLAdmin().DeleteACLs(ctx, []security.ACLBindingFilter{{
		Pattern: security.ResourcePatternFilter{Type: security.ResourceTopic, Name: strp("orders"), PatternType: security.PatternLiteral},
		Entry:   security.ACEFilter{Operation: security.OpAny, Permission: security.PermissionAny},
	}})
	if derrs[0] != nil || len(deleted[0]) != samples {
		t.Fatalf("deleted %v, err %v", deleted[0], derrs[0])
	}
	if ok, _, _ := raw.Exists("/kafka-acl/Topic/orders"); ok {
		t.Fatal("the resource znode survived its last ACL")
	}
	d := waitFor(t, 10*time.Second, "deletion on session 1", func() bool { _, ok := a1.ResourceACLs(lit); return !ok })
	t.Logf("ACL delete -> other session's Authorizer: %v after the write returned", d)
}

// TestZKACLConcurrentWritersLoseNothing: two sessions add ACLs to the same
// resource at once; the conditional writes serialise, so every ACL is in
// the znode and in both caches.
func TestZKACLConcurrentWritersLoseNothing(t *testing.T) {
	srv := zktest.Start(t)
	ctx := context.Background()
	sessions := []*Session{connect(t, testConfig(t, srv.Connect(), 1)), connect(t, testConfig(t, srv.Connect(), 2))}
	auths := []*security.Authorizer{newAuthorizer(), newAuthorizer()}
	for i, s := range sessions {
		if err := s.WatchACLs(ctx, auths[i]); err != nil {
			t.Fatal(err)
		}
	}
	p := topicLiteral("contended")
	const perWriter = 15
	var conflicts atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, 2*perWriter)
	start := make(chan struct{})
	for w, s := range sessions {
		st := s.ACLAdmin()
		st.z = conflictCounter{st.z, &conflicts}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := 0; i < perWriter; i++ {
				e := allow(fmt.Sprintf("User:w%d-%d", w, i), security.OpRead)
				if errs := st.CreateACLs(ctx, []security.ACLBinding{{Pattern: p, Entry: e}}); errs[0] != nil {
					errc <- errs[0]
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	raw := rawConn(t, srv.Connect())
	data, st := mustGet(t, raw, aclResourcePath(p))
	acls, err := security.DecodeResourceACLs(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(acls) != 2*perWriter {
		t.Fatalf("%d ACLs in the znode, want %d (version %d)", len(acls), 2*perWriter, st.Version)
	}
	for i, a := range auths {
		waitFor(t, 10*time.Second, fmt.Sprintf("session %d cache", i+1), func() bool {
			v, _ := a.ResourceACLs(p)
			return len(v.ACLs) == 2*perWriter && v.ZkVersion == st.Version
		})
	}
	t.Logf("%d concurrent creates on one resource: znode version %d, %d writes lost a race and were retried",
		2*perWriter, st.Version, conflicts.Load())
}

// conflictCounter counts the conditional writes that lost a race.
type conflictCounter struct {
	aclZK
	n *atomic.Int64
}

func (c conflictCounter) count(err error) {
	if errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNodeExists) {
		c.n.Add(1)
	}
}

func (c conflictCounter) Create(p string, data []byte, flags int32) (string, error) {
	s, err := c.aclZK.Create(p, data, flags)
	c.count(err)
	return s, err
}

func (c conflictCounter) Set(p string, data []byte, version int32) (*zk.Stat, error) {
	st, err := c.aclZK.Set(p, data, version)
	c.count(err)
	return st, err
}

// TestZKScramCredentialsFollow: a credential upserted through one session's
// ScramStore is stored in Kafka's format (golden, RFC-derived) and reaches
// another session's cache through /config/changes; a credential znode
// written raw as kafka-configs.sh --zookeeper writes it is honoured, and
// deletions propagate.
func TestZKScramCredentialsFollow(t *testing.T) {
	srv := zktest.Start(t)
	ctx := context.Background()
	s1 := connect(t, testConfig(t, srv.Connect(), 1))
	s2 := connect(t, testConfig(t, srv.Connect(), 2))
	c1, c2 := &security.ScramCredentialCache{}, &security.ScramCredentialCache{}
	if err := s1.WatchScramCredentials(ctx, c1); err != nil {
		t.Fatal(err)
	}
	if err := s2.WatchScramCredentials(ctx, c2); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res := s1.ScramAdmin().AlterScramUsers(ctx, []ScramUpsert{pencilUpsert(t, "alice", security.ScramSHA512)}, nil)
	if res["alice"] != nil {
		t.Fatal(res)
	}
	raw := rawConn(t, srv.Connect())
	data, _ := mustGet(t, raw, "/config/users/alice")
	if want := `{"version":1,"config":{` + goldenUserZnode(security.ScramSHA512) + `}}`; string(data) != want {
		t.Fatalf("user znode\n got %s\nwant %s", data, want)
	}
	want, err := security.DecodeUserScramCredentials(data)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok, _ := c1.LookupScramCredential(security.ScramSHA512, "alice"); !ok || security.FormatScramCredential(got) != security.FormatScramCredential(want[security.ScramSHA512]) {
		t.Fatal("the writer's own cache does not show its write on return")
	}
	waitFor(t, 10*time.Second, "credential on session 2", func() bool {
		got, ok, _ := c2.LookupScramCredential(security.ScramSHA512, "alice")
		return ok && security.FormatScramCredential(got) == security.FormatScramCredential(want[security.ScramSHA512])
	})
	t.Logf("SCRAM upsert -> other session's cache: %v (write included)", time.Since(start))

	// kafka-configs.sh --zookeeper ... --alter --add-config
	// 'SCRAM-SHA-256=[iterations=4096,password=pencil]' --entity-type users
	// --entity-name bob@example.com writes the sanitized znode, then the
	// notification. (Kafka's salt is the bytes of a random base-36 string;
	// the RFC 7677 one stands in here so the golden keys apply.)
	kafkaZnode := `{"version":1,"config":{` + goldenUserZnode(security.ScramSHA256) + `}}`
	if _, err := raw.Create("/config/users/bob%40example.com", []byte(kafkaZnode), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Create(configChangeSequencePrefix, []byte(`{"version":2,"entity_path":"users/bob%40example.com"}`), zk.FlagSequence); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "kafka-configs credential on session 2", func() bool {
		_, ok, _ := c2.LookupScramCredential(security.ScramSHA256, "bob@example.com")
		return ok
	})
	// It authenticates: a SCRAM exchange for bob with password "pencil".
	got, _, _ := c2.LookupScramCredential(security.ScramSHA256, "bob@example.com")
	fresh, err := security.NewScramCredential(security.ScramSHA256, "pencil", got.Salt, got.Iterations)
	if err != nil {
		t.Fatal(err)
	}
	if security.FormatScramCredential(fresh) != security.FormatScramCredential(got) {
		t.Fatal("the kafka-configs credential does not verify password pencil")
	}
	desc, err := s2.ScramAdmin().DescribeScramUsers(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(desc) != 2 || desc["bob@example.com"][0] != (ScramCredentialInfo{security.ScramSHA256, 4096}) {
		t.Fatalf("describe %v", desc)
	}

	// A quota-only change (users/<default>, a client of a user) is not a
	// credential: nothing happens, and the later user change still arrives.
	for _, ep := range []string{"users/<default>", "users/alice/clients/app"} {
		if _, err := raw.Create(configChangeSequencePrefix, security.EncodeConfigChange(ep), zk.FlagSequence); err != nil {
			t.Fatal(err)
		}
	}
	if r := s2.ScramAdmin().AlterScramUsers(ctx, nil, []ScramDeletion{{"alice", security.ScramSHA512}}); r["alice"] != nil {
		t.Fatal(r)
	}
	waitFor(t, 10*time.Second, "deletion on session 1", func() bool {
		_, ok, _ := c1.LookupScramCredential(security.ScramSHA512, "alice")
		return !ok
	})
}

// secureConfig is testConfig with digest credentials and zookeeper.set.acl.
func secureConfig(t *testing.T, connect string, id int32) Config {
	cfg := testConfig(t, connect, id)
	cfg.Digest = &DigestCredentials{User: "kafka", Password: "kafka-secret"}
	cfg.SetACL = true
	return cfg
}

// TestZKSetACLKeepsOutUnauthenticatedClients: with zookeeper.set.acl, an
// unauthenticated client can read but not change or delete a partition
// state znode, cannot read /config/users or a credential, and cannot
// write ACLs or notifications; the broker's own session keeps working after
// a session expiry, which it can only do if it authenticated again.
func TestZKSetACLKeepsOutUnauthenticatedClients(t *testing.T) {
	srv := zktest.Start(t)
	ctx := context.Background()
	proxy := newZKFrameProxy(t, srv.Addr)
	cfg := secureConfig(t, proxy.Addr()+srv.Chroot, 1)
	cfg.SessionTimeout = 2 * time.Second
	s := connect(t, cfg)
	if err := s.Register(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.WatchScramCredentials(ctx, &security.ScramCredentialCache{}); err != nil {
		t.Fatal(err)
	}
	if err := s.WatchACLs(ctx, newAuthorizer()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "controller", s.IsController)
	if err := s.CreateTopic(ctx, TopicSpec{Name: "secured", NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	if r := s.ScramAdmin().AlterScramUsers(ctx, []ScramUpsert{pencilUpsert(t, "alice", security.ScramSHA256)}, nil); r["alice"] != nil {
		t.Fatal(r)
	}
	raw := rawConn(t, srv.Connect())
	sp := partitionStatePath("secured", 0)
	waitFor(t, 20*time.Second, "partition state", func() bool { ok, _, _ := raw.Exists(sp); return ok })

	checkOutsider := func(when string) {
		t.Helper()
		data, st, err := raw.Get(sp)
		if err != nil {
			t.Fatalf("%s: world READ on the state is gone: %v", when, err)
		}
		if _, err := raw.Set(sp, []byte(`{"controller_epoch":99,"leader":-1,"version":1,"leader_epoch":99,"isr":[]}`), st.Version); !errors.Is(err, zk.ErrNoAuth) {
			t.Fatalf("%s: unauthenticated set of %s: %v (was %s)", when, sp, err, data)
		}
		if err := raw.Delete(sp, -1); !errors.Is(err, zk.ErrNoAuth) {
			t.Fatalf("%s: unauthenticated delete of %s: %v", when, sp, err)
		}
		for _, p := range []string{configUsersPath, configUserPath("alice")} {
			if _, _, err := raw.Get(p); !errors.Is(err, zk.ErrNoAuth) {
				t.Fatalf("%s: unauthenticated read of %s: %v", when, p, err)
			}
		}
		if _, _, err := raw.Children(configUsersPath); !errors.Is(err, zk.ErrNoAuth) {
			t.Fatalf("%s: unauthenticated listing of /config/users: %v", when, err)
		}
		for _, p := range []string{"/kafka-acl/Topic/evil", aclChangesPath + "/" + aclChangeNamePrefix, configChangeSequencePrefix, topicPath("evil")} {
			if _, err := raw.Create(p, []byte("x"), 0); !errors.Is(err, zk.ErrNoAuth) {
				t.Fatalf("%s: unauthenticated create of %s: %v", when, p, err)
			}
		}
	}
	checkOutsider("first session")
	// The same digest identity may read and write: the ACL is the broker's
	// digest. (ZooKeeper shows the digest hash only to a client with ADMIN.)
	authed := rawConn(t, srv.Connect())
	if err := authed.c.AddAuth("digest", []byte("kafka:kafka-secret")); err != nil {
		t.Fatal(err)
	}
	digest := zk.DigestACL(zk.PermAll, "kafka", "kafka-secret")
	for p, want := range map[string][]zk.ACL{
		sp:                      append(slices.Clone(digest), zk.WorldACL(zk.PermRead)...),
		brokerPath(1):           append(slices.Clone(digest), zk.WorldACL(zk.PermRead)...),
		"/kafka-acl/Topic":      append(slices.Clone(digest), zk.WorldACL(zk.PermRead)...),
		configUsersPath:         digest,
		configUserPath("alice"): digest,
		consumersPath:           openACL,
	} {
		acl, _, err := authed.c.GetACL(authed.abs(p))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(acl, want) {
			t.Fatalf("ACL of %s: %v, want %v", p, acl, want)
		}
	}
	if _, _, err := authed.Get(configUserPath("alice")); err != nil {
		t.Fatalf("authenticated read of the credential: %v", err)
	}

	// Session expiry: the new session must authenticate again to
	// re-register (its parent is digest-only for CREATE) and to write.
	oldSession := s.SessionID()
	proxy.Cut()
	waitFor(t, 20*time.Second, "registration gone", func() bool { ok, _, err := raw.Exists(brokerPath(1)); return err == nil && !ok })
	proxy.Heal()
	waitFor(t, 30*time.Second, "re-registered on a new session", func() bool {
		_, st, err := raw.Get(brokerPath(1))
		return err == nil && s.SessionID() != oldSession && st.EphemeralOwner == s.SessionID()
	})
	if r := s.ScramAdmin().AlterScramUsers(ctx, []ScramUpsert{pencilUpsert(t, "after-expiry", security.ScramSHA512)}, nil); r["after-expiry"] != nil {
		t.Fatalf("write after the expiry: %v", r)
	}
	if errs := s.ACLAdmin().CreateACLs(ctx, []security.ACLBinding{{Pattern: topicLiteral("secured"), Entry: allow("User:alice", security.OpRead)}}); errs[0] != nil {
		t.Fatalf("ACL write after the expiry: %v", errs[0])
	}
	if err := s.CreateTopic(ctx, TopicSpec{Name: "secured-2", NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "state of a topic created after the expiry", func() bool {
		ok, _, _ := raw.Exists(partitionStatePath("secured-2", 0))
		return ok
	})
	checkOutsider("after expiry")
	if _, err := raw.Set(partitionStatePath("secured-2", 0), []byte("x"), -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("unauthenticated set of a state written after the expiry: %v", err)
	}
}

// TestZKSetACLWithoutCredentialsRefused: zookeeper.set.acl without digest
// credentials fails Connect, as Kafka refuses to start.
func TestSetACLWithoutCredentialsRefused(t *testing.T) {
	cfg := Config{Connect: "127.0.0.1:1", SetACL: true, Log: zerolog.Nop()}
	if _, err := Connect(context.Background(), cfg); !errors.Is(err, ErrBadZKAuth) {
		t.Fatalf("got %v", err)
	}
}

// TestZKACLChangeNotificationsPurged: ACL change notifications older than
// the expiration (15 minutes in Kafka, shortened here) are purged when a
// new one is processed; younger ones stay for the other brokers.
func TestZKACLChangeNotificationsPurged(t *testing.T) {
	const expiration = time.Second
	srv := zktest.Start(t)
	ctx := context.Background()
	cfg := testConfig(t, srv.Connect(), 1)
	cfg.configChangeExpiration = expiration
	s := connect(t, cfg)
	if err := s.WatchACLs(ctx, newAuthorizer()); err != nil {
		t.Fatal(err)
	}
	raw := rawConn(t, srv.Connect())
	create := func(store string, p security.ResourcePattern) {
		t.Helper()
		if errs := s.ACLAdmin().CreateACLs(ctx, []security.ACLBinding{{Pattern: p, Entry: allow("User:x", security.OpRead)}}); errs[0] != nil {
			t.Fatal(errs[0])
		}
	}
	lit := aclChangesPath + "/" + aclChangeNamePrefix + "0000000000"
	ext := aclExtendedChangesPath + "/" + aclChangeNamePrefix + "0000000000"
	create(aclChangesPath, topicLiteral("a"))
	create(aclExtendedChangesPath, security.ResourcePattern{Type: security.ResourceTopic, Name: "p-", PatternType: security.PatternPrefixed})
	time.Sleep(expiration + 300*time.Millisecond) // ctime ages on ZooKeeper's clock: nothing to fake
	before := time.Now()
	create(aclChangesPath, topicLiteral("b"))
	create(aclExtendedChangesPath, security.ResourcePattern{Type: security.ResourceTopic, Name: "q-", PatternType: security.PatternPrefixed})
	eventually(t, 10*time.Second, func() error {
		for _, p := range []string{lit, ext} {
			if ok, _, err := raw.Exists(p); err != nil || ok {
				return fmt.Errorf("%s not purged (err %v)", p, err)
			}
		}
		return nil
	})
	if time.Since(before) < expiration {
		for _, p := range []string{aclChangesPath + "/" + aclChangeNamePrefix + "0000000001", aclExtendedChangesPath + "/" + aclChangeNamePrefix + "0000000001"} {
			if ok, _, _ := raw.Exists(p); !ok {
				t.Fatalf("%s purged younger than %v", p, expiration)
			}
		}
	}
}

// TestZKACLsAndCredentialsReloadedAfterExpiry: changes made while a
// broker's session was expired, whose notifications were purged before it
// came back, are still picked up: a new session reads every ACL and
// credential again (Kafka only resumes from its last notification).
func TestZKACLsAndCredentialsReloadedAfterExpiry(t *testing.T) {
	srv := zktest.Start(t)
	ctx := context.Background()
	writer := connect(t, testConfig(t, srv.Connect(), 1))
	if errs := writer.ACLAdmin().CreateACLs(ctx, []security.ACLBinding{{Pattern: topicLiteral("gone"), Entry: allow("User:old", security.OpRead)}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	proxy := newZKFrameProxy(t, srv.Addr)
	cfg := testConfig(t, proxy.Addr()+srv.Chroot, 2)
	cfg.SessionTimeout = 2 * time.Second
	away := connect(t, cfg)
	if err := away.Register(ctx); err != nil {
		t.Fatal(err)
	}
	a, c := newAuthorizer(), &security.ScramCredentialCache{}
	if err := away.WatchACLs(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := away.WatchScramCredentials(ctx, c); err != nil {
		t.Fatal(err)
	}
	if !hasACL(a, topicLiteral("gone"), allow("User:old", security.OpRead)) {
		t.Fatal("initial load")
	}
	oldSession := away.SessionID()
	proxy.Cut()
	raw := rawConn(t, srv.Connect())
	// Its registration is ephemeral: gone means the session expired.
	waitFor(t, 20*time.Second, "session 2 expired", func() bool {
		ok, _, err := raw.Exists(brokerPath(2))
		return err == nil && !ok
	})
	fresh := allow("User:new", security.OpWrite)
	if errs := writer.ACLAdmin().CreateACLs(ctx, []security.ACLBinding{{Pattern: topicLiteral("fresh"), Entry: fresh}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if _, errs := writer.ACLAdmin().DeleteACLs(ctx, []security.ACLBindingFilter{{
		Pattern: security.ResourcePatternFilter{Type: security.ResourceTopic, Name: strp("gone"), PatternType: security.PatternLiteral},
		Entry:   security.ACEFilter{Operation: security.OpAny, Permission: security.PermissionAny},
	}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if r := writer.ScramAdmin().AlterScramUsers(ctx, []ScramUpsert{pencilUpsert(t, "carol", security.ScramSHA256)}, nil); r["carol"] != nil {
		t.Fatal(r)
	}
	// Purge every notification, as the 15 minutes would have.
	for _, root := range []string{aclChangesPath, aclExtendedChangesPath, configChangesPath} {
		kids, _, err := raw.Children(root)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range kids {
			if err := raw.Delete(root+"/"+k, -1); err != nil {
				t.Fatal(err)
			}
		}
	}
	proxy.Heal()
	waitFor(t, 30*time.Second, "reloaded on the new session", func() bool {
		_, goneStill := a.ResourceACLs(topicLiteral("gone"))
		_, carol, _ := c.LookupScramCredential(security.ScramSHA256, "carol")
		return away.SessionID() != oldSession && hasACL(a, topicLiteral("fresh"), fresh) && !goneStill && carol
	})
}
