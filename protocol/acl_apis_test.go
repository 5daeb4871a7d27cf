package protocol

// The ACL keys (29-31) and the SCRAM credential keys (50, 51). Goal: the
// filters select what Kafka's do, every validation answers Kafka's code,
// and only valid changes reach the store. Method: a real
// security.Authorizer as both decision core and ACL store (fakeACLAdmin
// writes into it) and an in-memory ScramAdmin, driven over the wire.

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/security"
)

func aclCreation(typ kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType, principal string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) kmsg.CreateACLsRequestCreation {
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = typ, name, pt
	c.Principal, c.Host, c.Operation, c.PermissionType = principal, "*", op, perm
	return c
}

func TestACLKeysSecurityDisabled(t *testing.T) {
	b := startBroker(t)
	c := b.dial(t)
	d := kmsg.NewPtrDescribeACLsRequest()
	d.Version, d.ResourceType, d.ResourcePatternType, d.Operation, d.PermissionType = 2, kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	if r := c.roundTrip(d).(*kmsg.DescribeACLsResponse); r.ErrorCode != kerr.SecurityDisabled.Code {
		t.Errorf("DescribeAcls without an authorizer: code %d", r.ErrorCode)
	}
	cr := kmsg.NewPtrCreateACLsRequest()
	cr.Version = 2
	cr.Creations = append(cr.Creations, aclCreation(kmsg.ACLResourceTypeTopic, "t", kmsg.ACLResourcePatternTypeLiteral, "User:a", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow))
	if r := c.roundTrip(cr).(*kmsg.CreateACLsResponse); r.Results[0].ErrorCode != kerr.SecurityDisabled.Code {
		t.Errorf("CreateAcls without an authorizer: code %d", r.Results[0].ErrorCode)
	}
	dl := kmsg.NewPtrDeleteACLsRequest()
	dl.Version = 2
	dl.Filters = append(dl.Filters, kmsg.DeleteACLsRequestFilter{ResourceType: kmsg.ACLResourceTypeAny, ResourcePatternType: kmsg.ACLResourcePatternTypeAny,
		Operation: kmsg.ACLOperationAny, PermissionType: kmsg.ACLPermissionTypeAny})
	if r := c.roundTrip(dl).(*kmsg.DeleteACLsResponse); r.Results[0].ErrorCode != kerr.SecurityDisabled.Code {
		t.Errorf("DeleteAcls without an authorizer: code %d", r.Results[0].ErrorCode)
	}

	// An authorizer without a store to write to: reads work, writes are
	// disabled.
	a := newDenyAllAuthorizer()
	grantCluster(a, security.OpAlter, security.OpDescribe)
	b2 := startBroker(t, func(c *Config) { c.Authorizer = a })
	c2 := b2.dial(t)
	if r := c2.roundTrip(d).(*kmsg.DescribeACLsResponse); r.ErrorCode != 0 || len(r.Resources) != 1 {
		t.Errorf("DescribeAcls with an authorizer: code %d, %d resources", r.ErrorCode, len(r.Resources))
	}
	if r := c2.roundTrip(cr).(*kmsg.CreateACLsResponse); r.Results[0].ErrorCode != kerr.SecurityDisabled.Code {
		t.Errorf("CreateAcls without ACLAdmin: code %d", r.Results[0].ErrorCode)
	}
}

func TestACLKeys(t *testing.T) {
	a := newDenyAllAuthorizer()
	b := startBroker(t, withAuthorizer(a))
	c := b.dial(t)

	creations := []kmsg.CreateACLsRequestCreation{
		aclCreation(kmsg.ACLResourceTypeTopic, "orders", kmsg.ACLResourcePatternTypeLiteral, "User:alice", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow),
		aclCreation(kmsg.ACLResourceTypeTopic, "ord", kmsg.ACLResourcePatternTypePrefixed, "User:bob", kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeAllow),
		aclCreation(kmsg.ACLResourceTypeGroup, "g", kmsg.ACLResourcePatternTypeLiteral, "User:alice", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeDeny),
		// Refused, each with INVALID_REQUEST:
		aclCreation(kmsg.ACLResourceTypeCluster, "my-cluster", kmsg.ACLResourcePatternTypeLiteral, "User:alice", kmsg.ACLOperationAlter, kmsg.ACLPermissionTypeAllow),
		aclCreation(kmsg.ACLResourceTypeTopic, "", kmsg.ACLResourcePatternTypeLiteral, "User:alice", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow),
		aclCreation(kmsg.ACLResourceTypeTopic, "a/b", kmsg.ACLResourcePatternTypeLiteral, "User:alice", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow),
		aclCreation(kmsg.ACLResourceTypeTopic, "t", kmsg.ACLResourcePatternTypeMatch, "User:alice", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow),
		aclCreation(kmsg.ACLResourceTypeTopic, "t", kmsg.ACLResourcePatternTypeLiteral, "alice", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow),
		aclCreation(kmsg.ACLResourceTypeTopic, "t", kmsg.ACLResourcePatternTypeLiteral, "User:alice", kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAllow),
		aclCreation(kmsg.ACLResourceTypeAny, "t", kmsg.ACLResourcePatternTypeLiteral, "User:alice", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow),
	}
	cr := kmsg.NewPtrCreateACLsRequest()
	cr.Version, cr.Creations = 3, creations
	if r := c.roundTrip(cr).(*kmsg.CreateACLsResponse); r.Results[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("CreateAcls without cluster Alter: code %d", r.Results[0].ErrorCode)
	}
	if n := len(a.Resources()); n != 0 {
		t.Fatalf("refused CreateAcls stored %d resources", n)
	}
	grantCluster(a, security.OpAlter, security.OpDescribe)
	r := c.roundTrip(cr).(*kmsg.CreateACLsResponse)
	for i, res := range r.Results {
		want := int16(0)
		if i >= 3 {
			want = kerr.InvalidRequest.Code
		}
		if res.ErrorCode != want || (want != 0 && res.ErrorMessage == nil) {
			t.Errorf("creation %d: code %d (%v), want %d", i, res.ErrorCode, res.ErrorMessage, want)
		}
	}
	// The created ACLs decide: alice may read orders, bob may write any ord* topic.
	if !a.Authorize(security.User("alice"), "10.0.0.1", security.OpRead, security.ResourceTopic, "orders") ||
		!a.Authorize(security.User("bob"), "10.0.0.1", security.OpWrite, security.ResourceTopic, "orders-eu") {
		t.Fatal("created ACLs do not authorize")
	}

	describe := func(version int16, f kmsg.DescribeACLsRequest) *kmsg.DescribeACLsResponse {
		t.Helper()
		f.Version = version
		return c.roundTrip(&f).(*kmsg.DescribeACLsResponse)
	}
	anyFilter := kmsg.DescribeACLsRequest{ResourceType: kmsg.ACLResourceTypeAny, ResourcePatternType: kmsg.ACLResourcePatternTypeAny,
		Operation: kmsg.ACLOperationAny, PermissionType: kmsg.ACLPermissionTypeAny}
	// Every binding: the three created plus the test's own cluster ACLs.
	n := 0
	for _, res := range describe(3, anyFilter).Resources {
		n += len(res.ACLs)
	}
	if n != 5 {
		t.Errorf("describe all: %d bindings, want 5", n)
	}
	// MATCH on a name: the literal and the prefixed patterns that apply.
	match := anyFilter
	match.ResourceType, match.ResourceName, match.ResourcePatternType = kmsg.ACLResourceTypeTopic, kmsg.StringPtr("orders"), kmsg.ACLResourcePatternTypeMatch
	var got []string
	for _, res := range describe(3, match).Resources {
		got = append(got, res.ResourceName+"/"+res.ResourcePatternType.String())
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"ord/PREFIXED", "orders/LITERAL"}) {
		t.Errorf("MATCH orders: %v", got)
	}
	// By principal and permission.
	byPrincipal := anyFilter
	byPrincipal.Principal, byPrincipal.PermissionType = kmsg.StringPtr("User:alice"), kmsg.ACLPermissionTypeDeny
	if res := describe(3, byPrincipal).Resources; len(res) != 1 || res[0].ResourceName != "g" || res[0].ACLs[0].Operation != kmsg.ACLOperationRead {
		t.Errorf("alice's denials: %+v", res)
	}
	// v0 filters select LITERAL patterns only.
	v0 := anyFilter
	v0.ResourceType, v0.ResourceName = kmsg.ACLResourceTypeTopic, nil
	for _, res := range describe(0, v0).Resources {
		if res.ResourceName == "ord" {
			t.Errorf("v0 DescribeAcls shows the prefixed pattern %q", res.ResourceName)
		}
	}
	// An UNKNOWN element is INVALID_REQUEST.
	bad := anyFilter
	bad.Operation = kmsg.ACLOperationUnknown
	if r := describe(3, bad); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("UNKNOWN operation filter: code %d", r.ErrorCode)
	}

	// DeleteAcls: a valid filter deletes what it matches, an invalid one
	// answers INVALID_REQUEST and deletes nothing.
	dl := kmsg.NewPtrDeleteACLsRequest()
	dl.Version = 3
	dl.Filters = []kmsg.DeleteACLsRequestFilter{
		{ResourceType: kmsg.ACLResourceTypeTopic, ResourcePatternType: kmsg.ACLResourcePatternTypeAny, Principal: kmsg.StringPtr("User:bob"),
			Operation: kmsg.ACLOperationAny, PermissionType: kmsg.ACLPermissionTypeAny},
		{ResourceType: kmsg.ACLResourceTypeUnknown, ResourcePatternType: kmsg.ACLResourcePatternTypeAny,
			Operation: kmsg.ACLOperationAny, PermissionType: kmsg.ACLPermissionTypeAny},
	}
	dr := c.roundTrip(dl).(*kmsg.DeleteACLsResponse)
	if dr.Results[0].ErrorCode != 0 || len(dr.Results[0].MatchingACLs) != 1 || dr.Results[0].MatchingACLs[0].ResourceName != "ord" {
		t.Errorf("delete bob's ACLs: %+v", dr.Results[0])
	}
	if dr.Results[1].ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("UNKNOWN resource type filter: code %d", dr.Results[1].ErrorCode)
	}
	if a.Authorize(security.User("bob"), "10.0.0.1", security.OpWrite, security.ResourceTopic, "orders-eu") {
		t.Error("deleted ACL still authorizes")
	}
	if !a.Authorize(security.User("alice"), "10.0.0.1", security.OpRead, security.ResourceTopic, "orders") {
		t.Error("an ACL no filter matched was deleted")
	}

	// Describe on the cluster is what DescribeAcls needs.
	a.SetResourceACLs(security.ResourcePattern{Type: security.ResourceCluster, Name: security.ClusterResourceName, PatternType: security.PatternLiteral}, nil, 0)
	if r := describe(3, anyFilter); r.ErrorCode != kerr.ClusterAuthorizationFailed.Code || len(r.Resources) != 0 {
		t.Errorf("DescribeAcls without cluster Describe: code %d, %d resources", r.ErrorCode, len(r.Resources))
	}
	if r := c.roundTrip(dl).(*kmsg.DeleteACLsResponse); r.Results[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("DeleteAcls without cluster Alter: code %d", r.Results[0].ErrorCode)
	}
}

func TestScramCredentialKeys(t *testing.T) {
	a := newDenyAllAuthorizer()
	b := startBroker(t, withAuthorizer(a))
	store := b.srv.cfg.ScramAdmin.(*fakeScramAdmin)
	store.users["alice"] = map[security.ScramMechanism]int32{security.ScramSHA256: 8192}
	c := b.dial(t)

	describe := func(users ...string) *kmsg.DescribeUserSCRAMCredentialsResponse {
		t.Helper()
		req := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
		if users != nil {
			req.Users = []kmsg.DescribeUserSCRAMCredentialsRequestUser{}
		}
		for _, u := range users {
			req.Users = append(req.Users, kmsg.DescribeUserSCRAMCredentialsRequestUser{Name: u})
		}
		return c.roundTrip(req).(*kmsg.DescribeUserSCRAMCredentialsResponse)
	}
	if r := describe("alice"); r.ErrorCode != kerr.ClusterAuthorizationFailed.Code || r.Results[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("describe without cluster Describe: %+v", r)
	}
	grantCluster(a, security.OpDescribe)
	r := describe("alice", "nobody", "dup", "dup", "")
	codes := map[string]int16{}
	for _, res := range r.Results {
		codes[res.User] = res.ErrorCode
	}
	want := map[string]int16{"alice": 0, "nobody": kerr.ResourceNotFound.Code, "dup": kerr.DuplicateResource.Code, "": kerr.ResourceNotFound.Code}
	if len(r.Results) != 4 || r.ErrorCode != 0 {
		t.Fatalf("describe: %+v", r)
	}
	for u, w := range want {
		if codes[u] != w {
			t.Errorf("describe %q: code %d, want %d", u, codes[u], w)
		}
	}
	if info := r.Results[0].CredentialInfos; len(info) != 1 || info[0].Mechanism != 1 || info[0].Iterations != 8192 {
		t.Errorf("alice's credentials: %+v", info)
	}
	if r := describe(); len(r.Results) != 1 || r.Results[0].User != "alice" {
		t.Errorf("describe all: %+v", r.Results)
	}

	alter := func(ups []kmsg.AlterUserSCRAMCredentialsRequestUpsertion, dels []kmsg.AlterUserSCRAMCredentialsRequestDeletion) map[string]int16 {
		t.Helper()
		req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
		req.Upsertions, req.Deletions = ups, dels
		out := map[string]int16{}
		for _, res := range c.roundTrip(req).(*kmsg.AlterUserSCRAMCredentialsResponse).Results {
			out[res.User] = res.ErrorCode
		}
		return out
	}
	up := func(user string, mech int8, iterations int32) kmsg.AlterUserSCRAMCredentialsRequestUpsertion {
		return kmsg.AlterUserSCRAMCredentialsRequestUpsertion{Name: user, Mechanism: mech, Iterations: iterations, Salt: []byte("salt"), SaltedPassword: []byte("salted")}
	}
	if got := alter([]kmsg.AlterUserSCRAMCredentialsRequestUpsertion{up("bob", 2, 4096)}, nil); got["bob"] != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("alter without cluster Alter: %v", got)
	}
	if calls := store.calls(); len(calls) != 0 {
		t.Fatalf("refused alter reached the store: %v", calls)
	}
	grantCluster(a, security.OpAlter)
	got := alter([]kmsg.AlterUserSCRAMCredentialsRequestUpsertion{
		up("bob", 2, 4096),   // valid
		up("few", 1, 4095),   // too few iterations
		up("many", 1, 16385), // too many
		up("mech", 3, 4096),  // unknown mechanism
		up("", 1, 4096),      // empty user
		up("twice", 1, 4096), // the same credential twice
		up("twice", 1, 8192), //
		up("mixed", 1, 4096), // fails with its deletion below
		up("max", 2, 16384),  // the top of the range
	}, []kmsg.AlterUserSCRAMCredentialsRequestDeletion{
		{Name: "alice", Mechanism: 2}, // alice has no SCRAM-SHA-512
		{Name: "ghost", Mechanism: 1}, // no such user
		{Name: "mixed", Mechanism: 1}, // deletes what the upsertion above sets: a duplicate
	})
	want = map[string]int16{
		"bob": 0, "max": 0,
		"few": kerr.UnacceptableCredential.Code, "many": kerr.UnacceptableCredential.Code, "": kerr.UnacceptableCredential.Code,
		"mech": kerr.UnsupportedSaslMechanism.Code, "twice": kerr.DuplicateResource.Code, "mixed": kerr.DuplicateResource.Code,
		"alice": kerr.ResourceNotFound.Code, "ghost": kerr.ResourceNotFound.Code,
	}
	for u, w := range want {
		if c, ok := got[u]; !ok || c != w {
			t.Errorf("alter %q: code %d (present %v), want %d", u, c, ok, w)
		}
	}
	calls := store.calls()
	if len(calls) != 1 || len(calls[0].upserts) != 2 || len(calls[0].deletions) != 0 {
		t.Fatalf("store calls %+v, want one with bob's and max's upsertions only", calls)
	}
	if u := calls[0].upserts[0]; u.User != "bob" || u.Mechanism != security.ScramSHA512 || u.Iterations != 4096 || string(u.Salt) != "salt" || string(u.SaltedPassword) != "salted" {
		t.Errorf("bob's upsertion %+v", u)
	}
	// A valid deletion reaches the store; its error becomes the user's code.
	store.failUser = "carol"
	got = alter([]kmsg.AlterUserSCRAMCredentialsRequestUpsertion{up("carol", 1, 4096)},
		[]kmsg.AlterUserSCRAMCredentialsRequestDeletion{{Name: "alice", Mechanism: 1}})
	if got["alice"] != 0 || got["carol"] != kerr.RequestTimedOut.Code {
		t.Errorf("alter with a store failure: %v", got)
	}
	if r := describe("alice"); r.Results[0].ErrorCode != kerr.ResourceNotFound.Code {
		t.Errorf("alice after deleting her only credential: %+v", r.Results[0])
	}
}
