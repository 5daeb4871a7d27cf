package security

import (
	"errors"
	"testing"
)

func TestResourceACLsZnodeGolden(t *testing.T) {
	acls := []ACE{
		{"User:bob", "10.0.0.1", OpWrite, PermissionDeny},
		{"User:alice", "*", OpRead, PermissionAllow},
		{"User:alice", "*", OpRead, PermissionAllow}, // duplicate dropped
		{"User:alice", "*", OpIdempotentWrite, PermissionAllow},
	}
	want := `{"version":1,"acls":[` +
		`{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"},` +
		`{"principal":"User:alice","permissionType":"Allow","operation":"IdempotentWrite","host":"*"},` +
		`{"principal":"User:bob","permissionType":"Deny","operation":"Write","host":"10.0.0.1"}]}`
	if got := string(EncodeResourceACLs(acls)); got != want {
		t.Fatalf("znode\n got %s\nwant %s", got, want)
	}
	back, err := DecodeResourceACLs([]byte(want))
	if err != nil || len(back) != 3 {
		t.Fatalf("decode: %v %v", back, err)
	}
	if string(EncodeResourceACLs(back)) != want {
		t.Fatal("round trip changed the znode")
	}
	if got := string(EncodeResourceACLs(nil)); got != `{"version":1,"acls":[]}` {
		t.Fatalf("empty: %s", got)
	}
}

// A znode as Kafka writes it: key order from a HashMap, spacing from the
// doc comment in ZkData.scala, and upper-case names that Kafka also reads.
func TestDecodeKafkaACLZnode(t *testing.T) {
	in := `{"version": 1, "acls": [ { "host":"host1", "permissionType": "Deny","operation": "Read","principal": "User:alice"},
	{"operation":"CLUSTER_ACTION","principal":"User:CN=broker,O=x","host":"*","permissionType":"ALLOW"},
	{"operation":"DescribeConfigs","principal":"User:*","host":"*","permissionType":"allow"}]}`
	got, err := DecodeResourceACLs([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []ACE{
		{"User:*", "*", OpDescribeConfigs, PermissionAllow},
		{"User:CN=broker,O=x", "*", OpClusterAction, PermissionAllow},
		{"User:alice", "host1", OpRead, PermissionDeny},
	}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d: %v, want %v", i, got[i], want[i])
		}
	}
	for _, bad := range []string{
		`{"version":2,"acls":[]}`,
		`{"acls":[]}`,
		`{"version":1}`,
		`{"version":1,"acls":[{"principal":"alice","permissionType":"Allow","operation":"Read","host":"*"}]}`,
		`[]`, `{`,
	} {
		if _, err := DecodeResourceACLs([]byte(bad)); !errors.Is(err, ErrInvalidACL) {
			t.Errorf("DecodeResourceACLs(%s) = %v, want ErrInvalidACL", bad, err)
		}
	}
	if acls, err := DecodeResourceACLs(nil); err != nil || len(acls) != 0 {
		t.Fatalf("empty znode: %v %v", acls, err)
	}
}

// An entry this broker cannot fully decode (an operation or permission a
// newer Kafka may write) becomes Unknown and the rest of the znode stays,
// Deny entries included, as Kafka's AclEntry.fromBytes.
func TestDecodeResourceACLsPerEntry(t *testing.T) {
	in := `{"version":1,"acls":[` +
		`{"principal":"User:bob","permissionType":"Deny","operation":"Read","host":"*"},` +
		`{"principal":"User:a","permissionType":"Maybe","operation":"Read","host":"*"},` +
		`{"principal":"User:a","permissionType":"Any","operation":"Write","host":"*"},` +
		`{"principal":"User:a","permissionType":"Allow","operation":"Fly","host":"*"},` +
		`{"principal":"User:*","permissionType":"Deny","operation":"Any","host":"*"},` +
		`{"principal":"User:a","permissionType":"Allow","operation":"Describe"}]}`
	got, err := DecodeResourceACLs([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := map[ACE]bool{
		{"User:bob", "*", OpRead, PermissionDeny}:   true,
		{"User:a", "*", OpRead, PermissionUnknown}:  true,
		{"User:a", "*", OpWrite, PermissionUnknown}: true,
		{"User:a", "*", OpUnknown, PermissionAllow}: true,
		{"User:*", "*", OpUnknown, PermissionDeny}:  true,
		{"User:a", "", OpDescribe, PermissionAllow}: true,
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %d entries", got, len(want))
	}
	for _, e := range got {
		if !want[e] {
			t.Errorf("unexpected entry %+v", e)
		}
	}
	// Unknown entries match nothing: only bob's Deny and nothing else
	// decides; the Unknown-permission Read and the Unknown-operation Allow
	// allow nobody, the Unknown-operation Deny denies nobody.
	a := NewAuthorizer(AuthorizerConfig{})
	a.SetResourceACLs(ResourcePattern{ResourceTopic, "t", PatternLiteral}, append(got, ACE{"User:c", "*", OpAll, PermissionAllow}), 0)
	for _, op := range []Operation{OpRead, OpWrite, OpAlter, OpDescribe, OpDelete} {
		if a.Authorize(User("a"), "10.0.0.1", op, ResourceTopic, "t") {
			t.Errorf("User:a allowed %v by an Unknown entry", op)
		}
		if !a.Authorize(User("c"), "10.0.0.1", op, ResourceTopic, "t") {
			t.Errorf("User:c's All Allow refused %v: an Unknown-operation Deny matched", op)
		}
	}
	if a.Authorize(User("bob"), "10.0.0.1", OpRead, ResourceTopic, "t") {
		t.Error("bob's Deny lost")
	}
}

func TestACLChangeNotifications(t *testing.T) {
	for _, tc := range []struct {
		p        ResourcePattern
		want     string
		extended bool
	}{
		{ResourcePattern{ResourceTopic, "orders", PatternLiteral}, "TOPIC:orders", false},
		{ResourcePattern{ResourceTransactionalID, "tx:1", PatternLiteral}, "TRANSACTIONAL_ID:tx:1", false},
		{ResourcePattern{ResourceTopic, "ord", PatternPrefixed}, `{"version":1,"resourceType":"TOPIC","name":"ord","patternType":"PREFIXED"}`, true},
		{ResourcePattern{ResourceDelegationToken, "d", PatternPrefixed}, `{"version":1,"resourceType":"DELEGATION_TOKEN","name":"d","patternType":"PREFIXED"}`, true},
	} {
		got, ext := EncodeACLChange(tc.p)
		if string(got) != tc.want || ext != tc.extended {
			t.Errorf("EncodeACLChange(%v) = %s %v, want %s %v", tc.p, got, ext, tc.want, tc.extended)
		}
		var back ResourcePattern
		var err error
		if ext {
			back, err = DecodeExtendedACLChange(got)
		} else {
			back, err = DecodeLiteralACLChange(got)
		}
		if err != nil || back != tc.p {
			t.Errorf("decode %s = %v, %v", got, back, err)
		}
	}
	// Older Kafka wrote the PascalCase name; both read the same.
	if p, err := DecodeLiteralACLChange([]byte("Group:g:1")); err != nil || p != (ResourcePattern{ResourceGroup, "g:1", PatternLiteral}) {
		t.Fatalf("legacy: %v %v", p, err)
	}
	if p, err := DecodeExtendedACLChange([]byte(`{"version":1,"resourceType":"Topic","name":"x","patternType":"Prefixed"}`)); err != nil || p != (ResourcePattern{ResourceTopic, "x", PatternPrefixed}) {
		t.Fatalf("pascal extended: %v %v", p, err)
	}
	for _, bad := range []string{"", "nocolon", "Any:x", "Bogus:x"} {
		if _, err := DecodeLiteralACLChange([]byte(bad)); !errors.Is(err, ErrInvalidACL) {
			t.Errorf("literal %q: %v", bad, err)
		}
	}
	for _, bad := range []string{
		`{"version":2,"resourceType":"TOPIC","name":"x","patternType":"PREFIXED"}`,
		`{"version":1,"resourceType":"ANY","name":"x","patternType":"PREFIXED"}`,
		`{"version":1,"resourceType":"TOPIC","name":"x","patternType":"MATCH"}`,
		`{"version":1,"resourceType":"TOPIC","name":"x"}`,
		`not json`,
	} {
		if _, err := DecodeExtendedACLChange([]byte(bad)); !errors.Is(err, ErrInvalidACL) {
			t.Errorf("extended %s: %v", bad, err)
		}
	}
}

func TestACLNames(t *testing.T) {
	if ResourceTransactionalID.String() != "TransactionalId" || ResourceDelegationToken.String() != "DelegationToken" {
		t.Fatal("resource type znode names")
	}
	if PatternPrefixed.StoreName() != "prefixed" {
		t.Fatal("extended store name")
	}
	for _, s := range []string{"TransactionalId", "TRANSACTIONALID", "TRANSACTIONAL_ID", "transactional_id"} {
		if r, err := ParseResourceType(s); err != nil || r != ResourceTransactionalID {
			t.Errorf("ParseResourceType(%q) = %v, %v", s, r, err)
		}
	}
	for _, s := range []string{"ClusterAction", "CLUSTER_ACTION", "CLUSTERACTION"} {
		if o, err := ParseOperation(s); err != nil || o != OpClusterAction {
			t.Errorf("ParseOperation(%q) = %v, %v", s, o, err)
		}
	}
	for o := OpUnknown; o <= OpDescribeTokens; o++ {
		if back, err := ParseOperation(o.String()); err != nil || back != o {
			t.Errorf("operation %d round trip: %v %v", o, back, err)
		}
	}
	if _, err := ParseResourceType("Broker"); err == nil {
		t.Fatal("unknown resource type accepted")
	}
}

func FuzzDecodeACLPayloads(f *testing.F) {
	f.Add([]byte(`{"version":1,"acls":[{"principal":"User:a","permissionType":"Allow","operation":"Read","host":"*"}]}`))
	f.Add([]byte(`{"version":1,"resourceType":"TOPIC","name":"ord","patternType":"PREFIXED"}`))
	f.Add([]byte("TOPIC:x"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if acls, err := DecodeResourceACLs(b); err == nil {
			again, err := DecodeResourceACLs(EncodeResourceACLs(acls))
			if err != nil || len(again) != len(acls) {
				t.Fatalf("re-decode: %v %v", again, err)
			}
		}
		if p, err := DecodeExtendedACLChange(b); err == nil {
			enc, _ := EncodeACLChange(p)
			if p.PatternType == PatternPrefixed {
				if back, err := DecodeExtendedACLChange(enc); err != nil || back != p {
					t.Fatalf("extended round trip %v: %v %v", p, back, err)
				}
			}
		}
		if p, err := DecodeLiteralACLChange(b); err == nil {
			enc, _ := EncodeACLChange(p)
			if back, err := DecodeLiteralACLChange(enc); err != nil || back != p {
				t.Fatalf("literal round trip %v: %v %v", p, back, err)
			}
		}
	})
}
