package security

import (
	"errors"
	"reflect"
	"testing"
)

// These tests follow the semantic cases of Kafka's AclAuthorizer tests
// (AuthorizerTest.scala before KAFKA-17614), rewritten over the cache.

var (
	topicRes     = ResourcePattern{ResourceTopic, "foo-1", PatternLiteral}
	clusterRes   = ResourcePattern{ResourceCluster, ClusterResourceName, PatternLiteral}
	wildcardRes  = ResourcePattern{ResourceTopic, WildcardResource, PatternLiteral}
	prefixedRes  = ResourcePattern{ResourceTopic, "foo", PatternPrefixed}
	alice        = User("alice")
	allowReadACE = ACE{"User:alice", WildcardHost, OpRead, PermissionAllow}
	denyReadACE  = ACE{"User:alice", WildcardHost, OpRead, PermissionDeny}
)

func addACLs(a *Authorizer, p ResourcePattern, acls ...ACE) {
	cur, _ := a.ResourceACLs(p)
	a.SetResourceACLs(p, AddACLs(cur.ACLs, acls), cur.ZkVersion+1)
}

func TestAuthorizeTopicACLs(t *testing.T) {
	a := NewAuthorizer(AuthorizerConfig{})
	host1, host2 := "192.168.1.1", "192.168.1.2"
	addACLs(a, topicRes,
		ACE{"User:alice", host1, OpRead, PermissionAllow},
		ACE{"User:alice", host2, OpRead, PermissionAllow},
		ACE{"User:alice", host1, OpRead, PermissionDeny},
		ACE{"User:alice", host1, OpWrite, PermissionAllow},
		ACE{"User:alice", WildcardHost, OpDescribe, PermissionAllow},
		ACE{"User:rob", WildcardHost, OpRead, PermissionAllow},
		ACE{"User:batman", WildcardHost, OpWrite, PermissionAllow},
	)
	for _, tc := range []struct {
		who  KafkaPrincipal
		host string
		op   Operation
		want bool
	}{
		{alice, host2, OpRead, true},
		{alice, host1, OpRead, false}, // deny from host1
		{alice, host1, OpWrite, true},
		{alice, host2, OpWrite, false}, // no allow from host2
		{alice, host1, OpDescribe, true},
		{alice, host2, OpDescribe, true},
		{alice, host1, OpAlter, false},
		{alice, host2, OpAlter, false},
		{User("rob"), host1, OpDescribe, true}, // implied by Read
		{User("batman"), host1, OpDescribe, true},
		{User("rob"), host1, OpRead, true},
		{User("batman"), host1, OpWrite, true},
		{User("rob"), host1, OpWrite, false},
		{User("nobody"), host1, OpDescribe, false},
		{KafkaPrincipal{"Group", "alice"}, host2, OpRead, false}, // type is part of the principal
	} {
		if got := a.Authorize(tc.who, tc.host, tc.op, ResourceTopic, topicRes.Name); got != tc.want {
			t.Errorf("%s from %s %s: %v, want %v", tc.who, tc.host, tc.op, got, tc.want)
		}
	}
}

func TestAuthorizeDenyTakesPrecedence(t *testing.T) {
	a := NewAuthorizer(AuthorizerConfig{})
	host := "192.168.2.1"
	addACLs(a, topicRes, ACE{WildcardPrincipal, WildcardHost, OpAll, PermissionAllow}, ACE{"User:alice", host, OpAll, PermissionDeny})
	if a.Authorize(alice, host, OpRead, ResourceTopic, topicRes.Name) {
		t.Fatal("deny should take precedence over allow")
	}
	if !a.Authorize(User("random"), "192.0.4.4", OpRead, ResourceTopic, topicRes.Name) {
		t.Fatal("allow-all ACL should allow everyone else")
	}
}

func TestAuthorizeSuperUser(t *testing.T) {
	su, err := ParseSuperUsers(" User:superuser1 ; User:superuser2")
	if err != nil {
		t.Fatal(err)
	}
	a := NewAuthorizer(AuthorizerConfig{SuperUsers: su})
	addACLs(a, topicRes, ACE{WildcardPrincipal, WildcardHost, OpAll, PermissionDeny})
	for _, p := range []KafkaPrincipal{User("superuser1"), User("superuser2")} {
		if !a.Authorize(p, "192.0.4.4", OpRead, ResourceTopic, topicRes.Name) || !a.AuthorizeByResourceType(p, "1.1.1.1", OpWrite, ResourceTopic) {
			t.Errorf("super user %s denied", p)
		}
	}
	if a.Authorize(User("superuser3"), "192.0.4.4", OpRead, ResourceTopic, topicRes.Name) {
		t.Fatal("non-super user allowed through deny-all")
	}
	if _, err := ParseSuperUsers("User:a;nocolon"); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("bad super.users: %v", err)
	}
}

func TestAuthorizeWildcardACLs(t *testing.T) {
	a := NewAuthorizer(AuthorizerConfig{})
	host1 := "192.168.3.1"
	addACLs(a, wildcardRes, ACE{WildcardPrincipal, WildcardHost, OpRead, PermissionAllow})
	if !a.Authorize(alice, host1, OpRead, ResourceTopic, topicRes.Name) {
		t.Fatal("wildcard allow should allow")
	}
	addACLs(a, wildcardRes, ACE{"User:alice", host1, OpWrite, PermissionAllow})
	if !a.Authorize(alice, host1, OpWrite, ResourceTopic, topicRes.Name) {
		t.Fatal("wildcard write allow")
	}
	addACLs(a, topicRes, ACE{"User:alice", host1, OpWrite, PermissionDeny})
	if a.Authorize(alice, host1, OpWrite, ResourceTopic, topicRes.Name) {
		t.Fatal("literal deny should override wildcard allow")
	}
	if a.Authorize(alice, host1, OpRead, ResourceGroup, "g") {
		t.Fatal("topic wildcard leaked to groups")
	}
}

func TestAuthorizeNoACLFound(t *testing.T) {
	a := NewAuthorizer(AuthorizerConfig{})
	if a.Authorize(alice, "1.2.3.4", OpRead, ResourceTopic, "t") {
		t.Fatal("allowed with no ACL")
	}
	a = NewAuthorizer(AuthorizerConfig{AllowEveryoneIfNoACLFound: true})
	if !a.Authorize(alice, "1.2.3.4", OpRead, ResourceTopic, "t") {
		t.Fatal("allow.everyone.if.no.acl.found ignored")
	}
	// Any ACL on the resource, even for another principal, ends the
	// fallback.
	addACLs(a, ResourcePattern{ResourceTopic, "t", PatternLiteral}, ACE{"User:bob", WildcardHost, OpRead, PermissionAllow})
	if a.Authorize(alice, "1.2.3.4", OpRead, ResourceTopic, "t") {
		t.Fatal("fallback applied to a resource with ACLs")
	}
	// A prefixed ACL covers it too.
	addACLs(a, ResourcePattern{ResourceTopic, "u", PatternPrefixed}, ACE{"User:bob", WildcardHost, OpRead, PermissionAllow})
	if a.Authorize(alice, "1.2.3.4", OpRead, ResourceTopic, "u1") {
		t.Fatal("fallback applied to a resource with a prefixed ACL")
	}
}

func TestAuthorizeACLInheritance(t *testing.T) {
	allOps := []Operation{OpRead, OpWrite, OpCreate, OpDelete, OpAlter, OpDescribe, OpClusterAction, OpDescribeConfigs,
		OpAlterConfigs, OpIdempotentWrite, OpCreateTokens, OpDescribeTokens, OpAll}
	host := "192.168.3.1"
	implies := func(parent Operation, implied ...Operation) {
		t.Helper()
		a := NewAuthorizer(AuthorizerConfig{})
		addACLs(a, clusterRes, ACE{"User:alice", WildcardHost, parent, PermissionAllow})
		for _, op := range allOps {
			want := op == parent || parent == OpAll
			for _, i := range implied {
				want = want || op == i
			}
			if got := a.Authorize(alice, host, op, ResourceCluster, ClusterResourceName); got != want {
				t.Errorf("ALLOW %s: %s allowed=%v, want %v", parent, op, got, want)
			}
		}
	}
	denies := func(parent Operation) {
		t.Helper()
		a := NewAuthorizer(AuthorizerConfig{})
		addACLs(a, clusterRes, ACE{"User:alice", WildcardHost, parent, PermissionDeny}, ACE{"User:alice", WildcardHost, OpAll, PermissionAllow})
		for _, op := range allOps {
			want := !(op == parent || parent == OpAll)
			if got := a.Authorize(alice, host, op, ResourceCluster, ClusterResourceName); got != want {
				t.Errorf("DENY %s: %s allowed=%v, want %v", parent, op, got, want)
			}
		}
	}
	implies(OpAll)
	denies(OpAll)
	implies(OpRead, OpDescribe)
	implies(OpWrite, OpDescribe)
	implies(OpDelete, OpDescribe)
	implies(OpAlter, OpDescribe)
	denies(OpDescribe) // a Deny implies nothing
	implies(OpAlterConfigs, OpDescribeConfigs)
	denies(OpDescribeConfigs)
	implies(OpIdempotentWrite)
	implies(OpClusterAction)
}

func TestAuthorizePrefixed(t *testing.T) {
	a := NewAuthorizer(AuthorizerConfig{})
	for _, p := range []ResourcePattern{
		{ResourceTopic, "a_other", PatternLiteral}, {ResourceTopic, "a_other", PatternPrefixed},
		{ResourceTopic, "foo-6bd2", PatternPrefixed}, {ResourceTopic, "foo-1-zzz", PatternPrefixed},
		{ResourceTopic, "fooo-", PatternPrefixed}, {ResourceTopic, "fo-", PatternPrefixed},
		{ResourceTopic, "fop-", PatternPrefixed}, {ResourceTopic, "fon-", PatternPrefixed},
		{ResourceTopic, "z_other", PatternPrefixed}, {ResourceTopic, "z_other", PatternLiteral},
	} {
		addACLs(a, p, denyReadACE)
	}
	addACLs(a, prefixedRes, allowReadACE)
	if !a.Authorize(alice, "1.1.1.1", OpRead, ResourceTopic, "foo-1") {
		t.Fatal("prefixed allow should apply to foo-1")
	}
	addACLs(a, ResourcePattern{ResourceTopic, "foo-", PatternPrefixed}, denyReadACE)
	if a.Authorize(alice, "1.1.1.1", OpRead, ResourceTopic, "foo-1") {
		t.Fatal("a longer prefixed deny should refuse")
	}
	if !a.Authorize(alice, "1.1.1.1", OpRead, ResourceTopic, "foobar") {
		t.Fatal("foobar is under the allow but not the deny")
	}
	// The allow on "foo" is prefixed, not literal: it does not cover "fo".
	if a.Authorize(alice, "1.1.1.1", OpRead, ResourceTopic, "fo") {
		t.Fatal("prefix longer than the name applied")
	}
}

func TestAuthorizeSingleCharacterResources(t *testing.T) {
	a := NewAuthorizer(AuthorizerConfig{})
	addACLs(a, ResourcePattern{ResourceTopic, "f", PatternLiteral}, allowReadACE)
	if !a.Authorize(alice, "h", OpRead, ResourceTopic, "f") || a.Authorize(alice, "h", OpRead, ResourceTopic, "foo") {
		t.Fatal("literal f")
	}
	addACLs(a, ResourcePattern{ResourceTopic, "_", PatternPrefixed}, allowReadACE)
	for name, want := range map[string]bool{"_foo": true, "_": true, "foo_": false} {
		if got := a.Authorize(alice, "h", OpRead, ResourceTopic, name); got != want {
			t.Errorf("%s: %v want %v", name, got, want)
		}
	}
}

func TestAuthorizeHosts(t *testing.T) {
	a := NewAuthorizer(AuthorizerConfig{})
	// Java writes IPv6 addresses in full.
	addACLs(a, topicRes, ACE{"User:alice", "0:0:0:0:0:0:0:1", OpRead, PermissionAllow}, ACE{"User:alice", "10.0.0.1", OpWrite, PermissionAllow})
	for _, tc := range []struct {
		host string
		op   Operation
		want bool
	}{
		{"::1", OpRead, true}, {"0:0:0:0:0:0:0:1", OpRead, true}, {"::2", OpRead, false},
		{"10.0.0.1", OpWrite, true}, {"::ffff:10.0.0.1", OpWrite, true}, {"10.0.0.2", OpWrite, false},
	} {
		if got := a.Authorize(alice, tc.host, tc.op, ResourceTopic, topicRes.Name); got != tc.want {
			t.Errorf("%s %s: %v want %v", tc.host, tc.op, got, tc.want)
		}
	}
}

func TestAuthorizeByResourceType(t *testing.T) {
	host := "192.168.1.1"
	t.Run("no acl", func(t *testing.T) {
		if NewAuthorizer(AuthorizerConfig{}).AuthorizeByResourceType(alice, host, OpWrite, ResourceTopic) {
			t.Fatal("allowed with no ACL")
		}
		if !NewAuthorizer(AuthorizerConfig{AllowEveryoneIfNoACLFound: true}).AuthorizeByResourceType(alice, host, OpWrite, ResourceTopic) {
			t.Fatal("allow.everyone.if.no.acl.found ignored")
		}
	})
	write := ACE{"User:alice", WildcardHost, OpWrite, PermissionAllow}
	denyWrite := ACE{"User:alice", WildcardHost, OpWrite, PermissionDeny}
	for _, tc := range []struct {
		name  string
		setup func(a *Authorizer)
		want  bool
	}{
		{"literal allow", func(a *Authorizer) { addACLs(a, topicRes, write) }, true},
		{"prefixed allow", func(a *Authorizer) { addACLs(a, prefixedRes, write) }, true},
		{"allow for another op", func(a *Authorizer) { addACLs(a, topicRes, allowReadACE) }, false},
		{"literal allow, literal deny", func(a *Authorizer) { addACLs(a, topicRes, write, denyWrite) }, false},
		{"literal allow, prefix deny", func(a *Authorizer) {
			addACLs(a, topicRes, write)
			addACLs(a, ResourcePattern{ResourceTopic, "foo", PatternPrefixed}, denyWrite)
		}, false},
		{"prefixed allow, shorter prefixed deny", func(a *Authorizer) {
			addACLs(a, ResourcePattern{ResourceTopic, "foo-", PatternPrefixed}, write)
			addACLs(a, ResourcePattern{ResourceTopic, "fo", PatternPrefixed}, denyWrite)
		}, false},
		{"prefixed allow, longer prefixed deny", func(a *Authorizer) {
			addACLs(a, ResourcePattern{ResourceTopic, "foo", PatternPrefixed}, write)
			addACLs(a, ResourcePattern{ResourceTopic, "foo-", PatternPrefixed}, denyWrite)
		}, true},
		{"allow two, deny one", func(a *Authorizer) {
			addACLs(a, topicRes, write)
			addACLs(a, ResourcePattern{ResourceTopic, "bar", PatternLiteral}, write, denyWrite)
		}, true},
		{"wildcard deny", func(a *Authorizer) {
			addACLs(a, topicRes, write)
			addACLs(a, wildcardRes, denyWrite)
		}, false},
		{"wildcard allow", func(a *Authorizer) { addACLs(a, wildcardRes, write) }, true},
		{"other resource type", func(a *Authorizer) { addACLs(a, ResourcePattern{ResourceGroup, "g", PatternLiteral}, write) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAuthorizer(AuthorizerConfig{})
			tc.setup(a)
			if got := a.AuthorizeByResourceType(alice, host, OpWrite, ResourceTopic); got != tc.want {
				t.Fatalf("got %v want %v", got, tc.want)
			}
		})
	}
	t.Run("wildcard deny beats allow.everyone", func(t *testing.T) {
		a := NewAuthorizer(AuthorizerConfig{AllowEveryoneIfNoACLFound: true})
		addACLs(a, wildcardRes, denyWrite)
		if a.AuthorizeByResourceType(alice, host, OpWrite, ResourceTopic) {
			t.Fatal("allowed")
		}
	})
}

func strp(s string) *string { return &s }

var anyEntry = ACEFilter{Operation: OpAny, Permission: PermissionAny}

func bindingFilter(b ACLBinding) ACLBindingFilter {
	return ACLBindingFilter{
		Pattern: ResourcePatternFilter{b.Pattern.Type, strp(b.Pattern.Name), b.Pattern.PatternType},
		Entry:   ACEFilter{strp(b.Entry.Principal), strp(b.Entry.Host), b.Entry.Operation, b.Entry.Permission},
	}
}

// deleteACLs plays zkcoord's part of DeleteAcls against the cache.
func deleteACLs(a *Authorizer, filters []ACLBindingFilter) [][]ACLBinding {
	out := make([][]ACLBinding, len(filters))
	for _, p := range a.DeleteCandidates(filters) {
		cur, _ := a.ResourceACLs(p)
		remaining, deleted := RemoveMatching(p, cur.ACLs, filters)
		a.SetResourceACLs(p, remaining, cur.ZkVersion+1)
		for i := range deleted {
			out[i] = append(out[i], deleted[i]...)
		}
	}
	return out
}

func TestACLsFilterAndDelete(t *testing.T) {
	a := NewAuthorizer(AuthorizerConfig{})
	res1 := ResourcePattern{ResourceTopic, "foo-1", PatternLiteral}
	res2 := ResourcePattern{ResourceTopic, "bar-1", PatternLiteral}
	pre := ResourcePattern{ResourceTopic, "bar-", PatternPrefixed}
	acl1 := ACLBinding{res1, ACE{"User:alice", WildcardHost, OpRead, PermissionAllow}}
	acl2 := ACLBinding{res1, ACE{"User:alice", "192.168.0.1", OpWrite, PermissionAllow}}
	acl3 := ACLBinding{res2, ACE{"User:alice", WildcardHost, OpDescribe, PermissionAllow}}
	acl4 := ACLBinding{pre, ACE{WildcardPrincipal, WildcardHost, OpRead, PermissionAllow}}
	for _, b := range []ACLBinding{acl1, acl2, acl3, acl4} {
		if err := ValidateACLBinding(b); err != nil {
			t.Fatal(err)
		}
		addACLs(a, b.Pattern, b.Entry)
	}
	anyFilter := ACLBindingFilter{ResourcePatternFilter{ResourceAny, nil, PatternAny}, anyEntry}
	check := func(name string, got []ACLBinding, want ...ACLBinding) {
		t.Helper()
		sortBindings(want)
		sortBindings(got)
		if len(got) != len(want) || (len(want) > 0 && !reflect.DeepEqual(got, want)) {
			t.Errorf("%s:\n got %v\nwant %v", name, got, want)
		}
	}
	check("any", a.ACLs(anyFilter), acl1, acl2, acl3, acl4)
	check("res1", a.ACLs(ACLBindingFilter{ResourcePatternFilter{ResourceTopic, strp(res1.Name), PatternLiteral}, anyEntry}), acl1, acl2)
	check("prefixed", a.ACLs(ACLBindingFilter{ResourcePatternFilter{ResourceTopic, strp(pre.Name), PatternPrefixed}, anyEntry}), acl4)
	matching := ACLBindingFilter{ResourcePatternFilter{ResourceAny, strp(res2.Name), PatternMatch}, anyEntry}
	check("match", a.ACLs(matching), acl3, acl4)
	check("principal", a.ACLs(ACLBindingFilter{ResourcePatternFilter{ResourceAny, nil, PatternAny}, ACEFilter{Principal: strp(WildcardPrincipal), Operation: OpAny, Permission: PermissionAny}}), acl4)

	filters := []ACLBindingFilter{
		matching,
		bindingFilter(acl1),
		{ResourcePatternFilter{ResourceTopic, strp(res2.Name), PatternLiteral}, anyEntry},
		{ResourcePatternFilter{ResourceTopic, strp("baz"), PatternAny}, anyEntry},
	}
	for _, f := range filters {
		if err := ValidateFilter(f); err != nil {
			t.Fatal(err)
		}
	}
	res := deleteACLs(a, filters)
	check("deleted by match", res[0], acl3, acl4)
	check("deleted by acl1", res[1], acl1)
	check("deleted by res2 (already taken by filter 0)", res[2])
	check("deleted by baz", res[3])
	check("left", a.ACLs(anyFilter), acl2)
	if _, ok := a.ResourceACLs(res2); ok {
		t.Fatal("emptied resource still cached")
	}
}

func TestResourcePatternFilterMatches(t *testing.T) {
	lit := func(n string) ResourcePattern { return ResourcePattern{ResourceTopic, n, PatternLiteral} }
	pre := func(n string) ResourcePattern { return ResourcePattern{ResourceTopic, n, PatternPrefixed} }
	for _, tc := range []struct {
		f    ResourcePatternFilter
		p    ResourcePattern
		want bool
	}{
		{ResourcePatternFilter{ResourceAny, nil, PatternAny}, lit("a"), true},
		{ResourcePatternFilter{ResourceGroup, nil, PatternAny}, lit("a"), false},
		{ResourcePatternFilter{ResourceTopic, strp("a"), PatternLiteral}, lit("a"), true},
		{ResourcePatternFilter{ResourceTopic, strp("a"), PatternLiteral}, pre("a"), false},
		{ResourcePatternFilter{ResourceTopic, strp("a"), PatternAny}, pre("a"), true},
		{ResourcePatternFilter{ResourceTopic, strp("ab"), PatternAny}, pre("a"), false},
		{ResourcePatternFilter{ResourceTopic, strp("ab"), PatternMatch}, pre("a"), true},
		{ResourcePatternFilter{ResourceTopic, strp("ab"), PatternMatch}, pre("abc"), false},
		{ResourcePatternFilter{ResourceTopic, strp("ab"), PatternMatch}, lit("*"), true},
		{ResourcePatternFilter{ResourceTopic, strp("ab"), PatternMatch}, lit("ab"), true},
		{ResourcePatternFilter{ResourceTopic, strp("ab"), PatternMatch}, lit("a"), false},
		{ResourcePatternFilter{ResourceTopic, strp("*"), PatternLiteral}, lit("*"), true},
		{ResourcePatternFilter{ResourceTopic, strp("*"), PatternLiteral}, lit("a"), false},
		{ResourcePatternFilter{ResourceTopic, strp("ab"), PatternPrefixed}, pre("a"), false},
	} {
		if got := tc.f.Matches(tc.p); got != tc.want {
			t.Errorf("%+v matches %v = %v, want %v", tc.f, tc.p, got, tc.want)
		}
	}
	if got := (ResourcePatternFilter{ResourceTopic, strp("x"), PatternAny}).IndefiniteField(); got != "" {
		t.Fatalf("definite filter: %q", got)
	}
	if got := (ResourcePatternFilter{ResourceTopic, strp("x"), PatternMatch}).IndefiniteField(); got != "Resource pattern type is MATCH." {
		t.Fatalf("match filter: %q", got)
	}
	if got := FilterResources(ResourcePatternFilter{ResourceTopic, strp("x"), PatternAny}); len(got) != 2 {
		t.Fatalf("FilterResources(ANY) = %v", got)
	}
}

func TestDeleteCandidatesIncludeUncachedDefiniteResources(t *testing.T) {
	a := NewAuthorizer(AuthorizerConfig{})
	f := []ACLBindingFilter{{ResourcePatternFilter{ResourceGroup, strp("g"), PatternLiteral}, anyEntry}}
	got := a.DeleteCandidates(f)
	if len(got) != 1 || got[0] != (ResourcePattern{ResourceGroup, "g", PatternLiteral}) {
		t.Fatalf("candidates %v", got)
	}
	if got := a.DeleteCandidates([]ACLBindingFilter{{ResourcePatternFilter{ResourceAny, nil, PatternAny}, anyEntry}}); len(got) != 0 {
		t.Fatalf("indefinite filter on empty cache: %v", got)
	}
}

func TestValidateACLBinding(t *testing.T) {
	good := ACLBinding{topicRes, allowReadACE}
	if err := ValidateACLBinding(good); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*ACLBinding){
		"slash":          func(b *ACLBinding) { b.Pattern.Name = "a/b" },
		"empty name":     func(b *ACLBinding) { b.Pattern.Name = "" },
		"any type":       func(b *ACLBinding) { b.Pattern.Type = ResourceAny },
		"unknown type":   func(b *ACLBinding) { b.Pattern.Type = ResourceUnknown },
		"match pattern":  func(b *ACLBinding) { b.Pattern.PatternType = PatternMatch },
		"any op":         func(b *ACLBinding) { b.Entry.Operation = OpAny },
		"any permission": func(b *ACLBinding) { b.Entry.Permission = PermissionAny },
		"bad principal":  func(b *ACLBinding) { b.Entry.Principal = "alice" },
		"empty host":     func(b *ACLBinding) { b.Entry.Host = "" },
	} {
		b := good
		mut(&b)
		if err := ValidateACLBinding(b); !errors.Is(err, ErrInvalidACL) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := ValidateFilter(ACLBindingFilter{ResourcePatternFilter{ResourceUnknown, nil, PatternAny}, anyEntry}); err == nil {
		t.Fatal("UNKNOWN filter accepted")
	}
}
