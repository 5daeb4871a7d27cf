package zkcoord

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/kafkazk/broker/security"
)

// TestACLDeleteReportsBindingsAfterLostAnswer: a deletion whose answer is
// lost but which landed reports the bindings it deleted, not the nothing
// the retry found left to delete.
func TestACLDeleteReportsBindingsAfterLostAnswer(t *testing.T) {
	st, f := newFakeACLStore(t)
	ctx := context.Background()
	p := topicLiteral("orders")
	if errs := st.CreateACLs(ctx, []security.ACLBinding{{Pattern: p, Entry: allow("User:alice", security.OpRead)}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	f.failNext["delete "+aclResourcePath(p)] = fakeFail{err: zk.ErrConnectionClosed, lost: true}
	deleted, errs := st.DeleteACLs(ctx, []security.ACLBindingFilter{{
		Pattern: security.ResourcePatternFilter{Type: security.ResourceTopic, Name: strp("orders"), PatternType: security.PatternLiteral},
		Entry:   security.ACEFilter{Operation: security.OpAny, Permission: security.PermissionAny},
	}})
	if errs[0] != nil {
		t.Fatal(errs[0])
	}
	if len(deleted[0]) != 1 || deleted[0][0].Entry.Principal != "User:alice" {
		t.Fatalf("deleted %v, want alice's binding", deleted[0])
	}
	if _, _, err := f.Get(aclResourcePath(p)); !errors.Is(err, zk.ErrNoNode) {
		t.Fatalf("resource still there: %v", err)
	}
}

// TestACLNotificationRetriedWhileOutcomeUnknown: the resource write landed,
// the notification create lost its connection; it is created again rather
// than given up, so the other brokers hear of the change.
func TestACLNotificationRetriedWhileOutcomeUnknown(t *testing.T) {
	st, f := newFakeACLStore(t)
	p := topicLiteral("orders")
	seq := aclChangeNodePath(aclChangesPath, aclChangeNamePrefix)
	f.failNext["create "+seq] = fakeFail{err: zk.ErrConnectionClosed}
	if errs := st.CreateACLs(context.Background(), []security.ACLBinding{{Pattern: p, Entry: allow("User:alice", security.OpRead)}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if got := f.childData(t, aclChangesPath); !slices.Equal(got, []string{"TOPIC:orders"}) {
		t.Fatalf("notifications %q", got)
	}
}

// TestACLNothingToChangeStillNotifies: a retried request that finds
// nothing to change still notifies, which repairs a notification an
// earlier attempt lost.
func TestACLNothingToChangeStillNotifies(t *testing.T) {
	st, f := newFakeACLStore(t)
	ctx := context.Background()
	p := topicLiteral("orders")
	b := []security.ACLBinding{{Pattern: p, Entry: allow("User:alice", security.OpRead)}}
	for i := 0; i < 2; i++ {
		if errs := st.CreateACLs(ctx, b); errs[0] != nil {
			t.Fatal(errs[0])
		}
	}
	if got := f.childData(t, aclChangesPath); len(got) != 2 {
		t.Fatalf("notifications %q, want one per call", got)
	}
}

// TestScramDeleteLostAnswerReadBackFails: a deletion whose answer is lost
// and whose read-back fails too is found done by the next attempt (the
// credential is gone), not refused as CredentialNotFound; it notifies.
func TestScramDeleteLostAnswerReadBackFails(t *testing.T) {
	st, f := newFakeScramStore()
	ctx := context.Background()
	if r := st.AlterScramUsers(ctx, []ScramUpsert{pencilUpsert(t, "eve", security.ScramSHA256)}, nil); r["eve"] != nil {
		t.Fatal(r)
	}
	up := configUserPath("eve")
	f.failNext["set "+up] = fakeFail{err: zk.ErrConnectionClosed, lost: true}
	f.beforeWrite = func(op, p string) {
		if op == "set" && p == up {
			f.beforeWrite = nil
			f.mu.Lock()
			f.failNext["get "+up] = fakeFail{err: zk.ErrConnectionClosed}
			f.mu.Unlock()
		}
	}
	if r := st.AlterScramUsers(ctx, nil, []ScramDeletion{{"eve", security.ScramSHA256}}); r["eve"] != nil {
		t.Fatalf("delete: %v", r["eve"])
	}
	if got := f.childData(t, configChangesPath); len(got) != 2 {
		t.Fatalf("notifications %q, want the upsert's and the deletion's", got)
	}
}

// TestScramDeleteMissingStillNotifies: deleting a credential that is gone
// fails with CredentialNotFound, as Kafka, but notifies first: the client
// retrying a deletion whose notification was lost repairs it.
func TestScramDeleteMissingStillNotifies(t *testing.T) {
	st, f := newFakeScramStore()
	r := st.AlterScramUsers(context.Background(), nil, []ScramDeletion{{"eve", security.ScramSHA256}})
	if !errors.Is(r["eve"], security.ErrCredentialNotFound) {
		t.Fatalf("got %v, want ErrCredentialNotFound", r["eve"])
	}
	if got := f.childData(t, configChangesPath); len(got) != 1 {
		t.Fatalf("notifications %q", got)
	}
}
