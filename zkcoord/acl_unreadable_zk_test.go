package zkcoord

import (
	"context"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/kafkazk/broker/internal/zktest"
	"github.com/kafkazk/broker/security"
)

// one notification whose resource this broker cannot read
// (NOAUTH: a znode another tool created with an ACL that excludes the
// broker's identity) blocks every later ACL notification on that broker
// forever; Kafka logs the failed notification and moves on.
func TestZKUnreadableResourceDoesNotBlockLaterACLChanges(t *testing.T) {
	srv := zktest.Start(t)
	ctx := context.Background()
	s1 := connect(t, testConfig(t, srv.Connect(), 1))
	s2 := connect(t, testConfig(t, srv.Connect(), 2))
	a2 := newAuthorizer()
	if err := s2.WatchACLs(ctx, a2); err != nil {
		t.Fatal(err)
	}
	raw := rawConn(t, srv.Connect())
	locked := aclResourcePath(topicLiteral("locked"))
	if _, err := raw.c.Create(raw.abs(locked), []byte(`{"version":1,"acls":[]}`), 0, zk.DigestACL(zk.PermAll, "someone-else", "pw")); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Create(aclChangesPath+"/"+aclChangeNamePrefix, []byte("TOPIC:locked"), zk.FlagSequence); err != nil {
		t.Fatal(err)
	}
	p := topicLiteral("later")
	e := allow("User:alice", security.OpRead)
	if errs := s1.ACLAdmin().CreateACLs(ctx, []security.ACLBinding{{Pattern: p, Entry: e}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	deadline := time.Now().Add(5 * time.Second)
	for !hasACL(a2, p, e) {
		if time.Now().After(deadline) {
			t.Fatal("broker 2 never applied an ACL created after the unreadable notification")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
