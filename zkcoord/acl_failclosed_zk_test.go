package zkcoord

import (
	"context"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/kafkazk/broker/internal/zktest"
	"github.com/kafkazk/broker/security"
)

// An ACL znode that does not parse at all at start-up fails WatchACLs, as
// Kafka's start-up does: a broker never authorizes without its ACLs.
func TestZKUnparsableACLZnodeFailsStartup(t *testing.T) {
	srv := zktest.Start(t)
	ctx := context.Background()
	s := connect(t, testConfig(t, srv.Connect(), 1))
	p := topicLiteral("bad")
	if errs := s.ACLAdmin().CreateACLs(ctx, []security.ACLBinding{{Pattern: p, Entry: allow("User:alice", security.OpRead)}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	raw := rawConn(t, srv.Connect())
	if _, err := raw.Set(aclResourcePath(p), []byte(`{"version":1,"acls":[`), -1); err != nil {
		t.Fatal(err)
	}
	if err := s.WatchACLs(ctx, newAuthorizer()); err == nil {
		t.Fatal("WatchACLs succeeded over an ACL znode that does not parse")
	}
}

// After start-up, a resource whose znode stops parsing is denied to
// everyone (a wildcard Allow elsewhere no longer admits) until it parses
// again.
func TestZKUnparsableACLZnodeDeniesUntilFixed(t *testing.T) {
	srv := zktest.Start(t)
	ctx := context.Background()
	s := connect(t, testConfig(t, srv.Connect(), 1))
	a := newAuthorizer()
	if err := s.WatchACLs(ctx, a); err != nil {
		t.Fatal(err)
	}
	st := s.ACLAdmin()
	wild, p := topicLiteral("*"), topicLiteral("bad")
	if errs := st.CreateACLs(ctx, []security.ACLBinding{
		{Pattern: wild, Entry: allow("User:*", security.OpRead)},
		{Pattern: p, Entry: allow("User:bob", security.OpWrite)},
	}); errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	alice := func() bool {
		return a.Authorize(security.User("alice"), "10.0.0.1", security.OpRead, security.ResourceTopic, "bad")
	}
	if !alice() {
		t.Fatal("wildcard Allow does not admit alice")
	}
	raw := rawConn(t, srv.Connect())
	note := func() {
		if _, err := raw.Create(aclChangesPath+"/"+aclChangeNamePrefix, []byte("TOPIC:bad"), zk.FlagSequence); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := raw.Set(aclResourcePath(p), []byte(`{"version":2,"acls":[]}`), -1); err != nil {
		t.Fatal(err)
	}
	note()
	waitFor(t, 10*time.Second, "deny on the unparsable resource", func() bool { return !alice() })
	if !a.Authorize(security.User("alice"), "10.0.0.1", security.OpRead, security.ResourceTopic, "other") {
		t.Fatal("the deny spread beyond the unparsable resource")
	}
	if _, err := raw.Set(aclResourcePath(p), security.EncodeResourceACLs([]security.ACE{allow("User:bob", security.OpWrite)}), -1); err != nil {
		t.Fatal(err)
	}
	note()
	waitFor(t, 10*time.Second, "the resource read again", alice)
}

// A notification purged before this broker read it (by a broker whose
// clock runs ahead) is not a change missed: the broker reloads every ACL.
func TestZKVanishedACLNotificationReloads(t *testing.T) {
	srv := zktest.Start(t)
	ctx := context.Background()
	s1 := connect(t, testConfig(t, srv.Connect(), 1))
	s2 := connect(t, testConfig(t, srv.Connect(), 2))
	a2 := newAuthorizer()
	if err := s2.WatchACLs(ctx, a2); err != nil {
		t.Fatal(err)
	}
	raw := rawConn(t, srv.Connect())
	if err := s2.do(ctx, func() error {
		s2.beforeNotificationRead = func(p string) {
			s2.beforeNotificationRead = nil
			if err := raw.Delete(p, -1); err != nil {
				t.Errorf("delete %s: %v", p, err)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	p, e := topicLiteral("orders"), allow("User:alice", security.OpRead)
	if errs := s1.ACLAdmin().CreateACLs(ctx, []security.ACLBinding{{Pattern: p, Entry: e}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	waitFor(t, 10*time.Second, "the ACL on broker 2", func() bool { return hasACL(a2, p, e) })
}

// The same for SCRAM: a vanished /config/changes notification reloads
// every user.
func TestZKVanishedScramNotificationReloads(t *testing.T) {
	srv := zktest.Start(t)
	ctx := context.Background()
	s1 := connect(t, testConfig(t, srv.Connect(), 1))
	s2 := connect(t, testConfig(t, srv.Connect(), 2))
	c2 := &security.ScramCredentialCache{}
	if err := s2.WatchScramCredentials(ctx, c2); err != nil {
		t.Fatal(err)
	}
	raw := rawConn(t, srv.Connect())
	if err := s2.do(ctx, func() error {
		s2.beforeNotificationRead = func(p string) {
			s2.beforeNotificationRead = nil
			if err := raw.Delete(p, -1); err != nil {
				t.Errorf("delete %s: %v", p, err)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if r := s1.ScramAdmin().AlterScramUsers(ctx, []ScramUpsert{pencilUpsert(t, "eve", security.ScramSHA256)}, nil); r["eve"] != nil {
		t.Fatal(r)
	}
	waitFor(t, 10*time.Second, "eve on broker 2", func() bool {
		_, ok, _ := c2.LookupScramCredential(security.ScramSHA256, "eve")
		return ok
	})
}

// A user znode this broker cannot read (NOAUTH) drops that user's cached
// credentials and does not block later changes of other users.
func TestZKUnreadableUserDropsCredentialsAndMovesOn(t *testing.T) {
	srv := zktest.Start(t)
	ctx := context.Background()
	s1 := connect(t, testConfig(t, srv.Connect(), 1))
	s2 := connect(t, testConfig(t, srv.Connect(), 2))
	c2 := &security.ScramCredentialCache{}
	if err := s2.WatchScramCredentials(ctx, c2); err != nil {
		t.Fatal(err)
	}
	has := func(u string) func() bool {
		return func() bool { _, ok, _ := c2.LookupScramCredential(security.ScramSHA256, u); return ok }
	}
	if r := s1.ScramAdmin().AlterScramUsers(ctx, []ScramUpsert{pencilUpsert(t, "eve", security.ScramSHA256)}, nil); r["eve"] != nil {
		t.Fatal(r)
	}
	waitFor(t, 10*time.Second, "eve on broker 2", has("eve"))
	raw := rawConn(t, srv.Connect())
	if _, err := raw.c.SetACL(raw.abs(configUserPath("eve")), zk.DigestACL(zk.PermAll, "someone-else", "pw"), -1); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Create(configChangeSequencePrefix, security.EncodeConfigChange(userEntityPrefix+"eve"), zk.FlagSequence); err != nil {
		t.Fatal(err)
	}
	if r := s1.ScramAdmin().AlterScramUsers(ctx, []ScramUpsert{pencilUpsert(t, "later", security.ScramSHA256)}, nil); r["later"] != nil {
		t.Fatal(r)
	}
	waitFor(t, 10*time.Second, "later on broker 2", has("later"))
	if has("eve")() {
		t.Fatal("broker 2 still holds the credentials of a user whose znode it cannot read")
	}
}
