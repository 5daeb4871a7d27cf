package protocol

// Authorization end to end over SASL: the principal a connection
// authenticates as is the one the Authorizer is asked about. Method: a
// SASL_PLAINTEXT listener with PLAIN users alice and bob, ACLs for alice
// only, and kgo clients as each (an idempotent producer, as kgo's
// default, so KIP-679's InitProducerId path is crossed too).

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/security"
)

func TestAuthzSASLPrincipals(t *testing.T) {
	a := security.NewAuthorizer(security.AuthorizerConfig{})
	alice := security.ACE{Principal: "User:alice", Host: "*", Permission: security.PermissionAllow}
	var aces []security.ACE
	for _, op := range []security.Operation{security.OpWrite, security.OpRead, security.OpDescribe} {
		ace := alice
		ace.Operation = op
		aces = append(aces, ace)
	}
	// bob may see the topic, not write it.
	aces = append(aces, security.ACE{Principal: "User:bob", Host: "*", Operation: security.OpDescribe, Permission: security.PermissionAllow})
	a.SetResourceACLs(security.ResourcePattern{Type: security.ResourceTopic, Name: "sec", PatternType: security.PatternLiteral}, aces, 0)
	ls := ListenerSecurity{Protocol: ProtocolSASLPlaintext, SASL: saslConfig(t)}
	b := startBroker(t, secured(ls, nil), withAuthorizer(a))
	createTopic(t, b, "sec", 1)
	tp := cluster.TopicPartition{Topic: "sec", Partition: 0}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Idempotent (kgo's default): bob may write no topic at all, so his
	// InitProducerId is refused (KIP-679).
	bob := newClient(t, b, kgo.SASL(kgoMechanism("PLAIN", "bob", "bob-secret")), kgo.DefaultProduceTopic("sec"),
		kgo.RecordRetries(0))
	if err := bob.ProduceSync(ctx, &kgo.Record{Value: []byte("bob")}).FirstErr(); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("bob's idempotent produce: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
	plain := newClient(t, b, kgo.SASL(kgoMechanism("PLAIN", "bob", "bob-secret")), kgo.DefaultProduceTopic("sec"),
		kgo.RecordRetries(0), kgo.DisableIdempotentWrite())
	if err := plain.ProduceSync(ctx, &kgo.Record{Value: []byte("bob")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("bob's produce: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	if leo := leoOf(b, tp); leo != 0 {
		t.Fatalf("bob's refused produce appended: log end offset %d", leo)
	}

	al := newClient(t, b, kgo.SASL(kgoMechanism("PLAIN", "alice", "alice-secret")), kgo.DefaultProduceTopic("sec"))
	if err := al.ProduceSync(ctx, &kgo.Record{Value: []byte("alice")}).FirstErr(); err != nil {
		t.Fatalf("alice's produce: %v", err)
	}
	if leo := leoOf(b, tp); leo != 1 {
		t.Fatalf("log end offset %d after alice's produce, want 1", leo)
	}
}
