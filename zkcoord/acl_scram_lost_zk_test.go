package zkcoord

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/kafkazk/broker/internal/zktest"
	"github.com/kafkazk/broker/security"
)

// dropSeqOnce makes the next sequential create (the change notification)
// fail with a lost connection without reaching ZooKeeper, as a connection
// blip right after the resource write would.
type dropSeqOnce struct {
	aclZK
	armed *atomic.Bool
}

func (d dropSeqOnce) Create(p string, data []byte, flags int32) (string, error) {
	if flags&zk.FlagSequence != 0 && d.armed.CompareAndSwap(true, false) {
		return "", zk.ErrConnectionClosed
	}
	return d.aclZK.Create(p, data, flags)
}

// an ACL delete whose notification create is lost leaves
// the deleted Allow in every broker's cache, the writer's included, and the
// client's retry (DeleteAcls again) finds nothing to delete, so never
// notifies either.
func TestZKLostACLNotificationDeletesEverywhere(t *testing.T) {
	srv := zktest.Start(t)
	ctx := context.Background()
	s1 := connect(t, testConfig(t, srv.Connect(), 1))
	s2 := connect(t, testConfig(t, srv.Connect(), 2))
	a1, a2 := newAuthorizer(), newAuthorizer()
	if err := s1.WatchACLs(ctx, a1); err != nil {
		t.Fatal(err)
	}
	if err := s2.WatchACLs(ctx, a2); err != nil {
		t.Fatal(err)
	}
	p := topicLiteral("orders")
	e := allow("User:mallory", security.OpRead)
	if errs := s1.ACLAdmin().CreateACLs(ctx, []security.ACLBinding{{Pattern: p, Entry: e}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	waitFor(t, 10*time.Second, "allow on broker 2", func() bool { return hasACL(a2, p, e) })

	st := s1.ACLAdmin()
	var armed atomic.Bool
	armed.Store(true)
	st.z = dropSeqOnce{st.z, &armed}
	filter := []security.ACLBindingFilter{{
		Pattern: security.ResourcePatternFilter{Type: security.ResourceTopic, Name: strp("orders"), PatternType: security.PatternLiteral},
		Entry:   security.ACEFilter{Operation: security.OpAny, Permission: security.PermissionAny},
	}}
	_, errs := st.DeleteACLs(ctx, filter)
	t.Logf("first DeleteACLs: %v", errs[0])
	// The admin client retries, as it would on the error.
	if _, errs := s1.ACLAdmin().DeleteACLs(ctx, filter); errs[0] != nil {
		t.Fatal(errs[0])
	}
	raw := rawConn(t, srv.Connect())
	if ok, _, _ := raw.Exists(aclResourcePath(p)); ok {
		t.Fatal("resource znode still there")
	}
	time.Sleep(2 * time.Second)
	for i, a := range []*security.Authorizer{a1, a2} {
		if a.Authorize(security.User("mallory"), "10.0.0.1", security.OpRead, security.ResourceTopic, "orders") {
			t.Errorf("broker %d still allows User:mallory Read on orders after the ACL was deleted from ZooKeeper", i+1)
		}
	}
}

// one entry of a resource znode that this broker cannot
// decode (an operation it does not know, as a newer Kafka may write) makes
// the whole znode ignored, Deny entries included, so a wildcard Allow
// admits the denied principal. Kafka keeps the other entries (an unknown
// operation decodes as UNKNOWN and matches nothing).
func TestZKUndecodableEntryKeepsDeny(t *testing.T) {
	srv := zktest.Start(t)
	ctx := context.Background()
	s := connect(t, testConfig(t, srv.Connect(), 1))
	if errs := s.ACLAdmin().CreateACLs(ctx, []security.ACLBinding{{Pattern: topicLiteral("*"), Entry: allow("User:*", security.OpRead)}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	raw := rawConn(t, srv.Connect())
	body := `{"version":1,"acls":[` +
		`{"principal":"User:bob","permissionType":"Deny","operation":"Read","host":"*"},` +
		`{"principal":"User:ops","permissionType":"Allow","operation":"FutureOperation","host":"*"}]}`
	if _, err := raw.Create(aclResourcePath(topicLiteral("secret")), []byte(body), 0); err != nil {
		t.Fatal(err)
	}
	a := newAuthorizer()
	if err := s.WatchACLs(ctx, a); err != nil {
		t.Fatal(err)
	}
	if a.Authorize(security.User("bob"), "10.0.0.1", security.OpRead, security.ResourceTopic, "secret") {
		t.Fatal("User:bob, denied Read on topic secret in ZooKeeper, is allowed: the Deny was dropped with the undecodable entry")
	}
}

// SCRAM side: a credential deletion whose notification is
// lost stays in the other brokers' caches (the deleted user keeps logging
// in), and the retry fails with CredentialNotFound without notifying.
func TestZKLostScramNotificationDeletesEverywhere(t *testing.T) {
	srv := zktest.Start(t)
	ctx := context.Background()
	s1 := connect(t, testConfig(t, srv.Connect(), 1))
	s2 := connect(t, testConfig(t, srv.Connect(), 2))
	c2 := &security.ScramCredentialCache{}
	if err := s2.WatchScramCredentials(ctx, c2); err != nil {
		t.Fatal(err)
	}
	if r := s1.ScramAdmin().AlterScramUsers(ctx, []ScramUpsert{pencilUpsert(t, "eve", security.ScramSHA256)}, nil); r["eve"] != nil {
		t.Fatal(r)
	}
	waitFor(t, 10*time.Second, "eve on broker 2", func() bool { _, ok, _ := c2.LookupScramCredential(security.ScramSHA256, "eve"); return ok })
	st := s1.ScramAdmin()
	var armed atomic.Bool
	armed.Store(true)
	st.z = dropSeqOnce{st.z, &armed}
	r := st.AlterScramUsers(ctx, nil, []ScramDeletion{{"eve", security.ScramSHA256}})
	t.Logf("first delete: %v", r["eve"])
	r = s1.ScramAdmin().AlterScramUsers(ctx, nil, []ScramDeletion{{"eve", security.ScramSHA256}})
	t.Logf("retried delete: %v", r["eve"])
	time.Sleep(2 * time.Second)
	if _, ok, _ := c2.LookupScramCredential(security.ScramSHA256, "eve"); ok {
		t.Fatal("broker 2 still holds eve's deleted SCRAM-SHA-256 credential")
	}
}
