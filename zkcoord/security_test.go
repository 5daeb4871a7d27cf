package zkcoord

import (
	"context"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/go-zookeeper/zk"
	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/security"
)

// Deterministic tests of the ACL and SCRAM stores over fakeZK, an in-memory
// ZooKeeper with versions and a hook that runs another writer between our
// read and our write.

type fakeNode struct {
	data    []byte
	version int32
}

type fakeZK struct {
	mu    sync.Mutex
	nodes map[string]*fakeNode
	seq   map[string]int
	// beforeWrite, if set, runs (without the lock) before every Set, Create
	// or Delete of path; it may write through the fake itself.
	beforeWrite func(op, path string)
	// failNext, if set for an op+path, makes that call fail with the error
	// after (lost=true) or instead of applying it.
	failNext map[string]fakeFail
}

type fakeFail struct {
	err  error
	lost bool // apply the write, then report err (its answer was lost)
}

func newFakeZK() *fakeZK {
	return &fakeZK{nodes: map[string]*fakeNode{"/": {}}, seq: map[string]int{}, failNext: map[string]fakeFail{}}
}

func parentOf(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
}

func (f *fakeZK) hook(op, p string) (fakeFail, bool) {
	if f.beforeWrite != nil {
		f.beforeWrite(op, p)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	ff, ok := f.failNext[op+" "+p]
	delete(f.failNext, op+" "+p)
	return ff, ok
}

func (f *fakeZK) Get(p string) ([]byte, *zk.Stat, error) {
	f.mu.Lock()
	ff, fail := f.failNext["get "+p]
	delete(f.failNext, "get "+p)
	f.mu.Unlock()
	if fail {
		return nil, nil, ff.err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.nodes[p]
	if !ok {
		return nil, nil, zk.ErrNoNode
	}
	return slices.Clone(n.data), &zk.Stat{Version: n.version}, nil
}

func (f *fakeZK) Children(p string) ([]string, *zk.Stat, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.nodes[p]; !ok {
		return nil, nil, zk.ErrNoNode
	}
	var out []string
	for k := range f.nodes {
		if k != p && parentOf(k) == p {
			out = append(out, k[len(p)+1:])
		}
	}
	slices.Sort(out)
	return out, &zk.Stat{}, nil
}

func (f *fakeZK) Create(p string, data []byte, flags int32) (string, error) {
	ff, fail := f.hook("create", p)
	if fail && !ff.lost {
		return "", ff.err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if flags&zk.FlagSequence != 0 {
		p = fmt.Sprintf("%s%010d", p, f.seq[parentOf(p)])
		f.seq[parentOf(p)]++
	}
	if _, ok := f.nodes[parentOf(p)]; !ok {
		return "", zk.ErrNoNode
	}
	if _, ok := f.nodes[p]; ok {
		return "", zk.ErrNodeExists
	}
	f.nodes[p] = &fakeNode{data: slices.Clone(data)}
	if fail {
		return "", ff.err
	}
	return p, nil
}

func (f *fakeZK) Set(p string, data []byte, version int32) (*zk.Stat, error) {
	ff, fail := f.hook("set", p)
	if fail && !ff.lost {
		return nil, ff.err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.nodes[p]
	if !ok {
		return nil, zk.ErrNoNode
	}
	if version != -1 && version != n.version {
		return nil, zk.ErrBadVersion
	}
	n.data = slices.Clone(data)
	n.version++
	if fail {
		return nil, ff.err
	}
	return &zk.Stat{Version: n.version}, nil
}

func (f *fakeZK) Delete(p string, version int32) error {
	ff, fail := f.hook("delete", p)
	if fail && !ff.lost {
		return ff.err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.nodes[p]
	if !ok {
		return zk.ErrNoNode
	}
	if version != -1 && version != n.version {
		return zk.ErrBadVersion
	}
	for k := range f.nodes {
		if parentOf(k) == p {
			return zk.ErrNotEmpty
		}
	}
	delete(f.nodes, p)
	if fail {
		return ff.err
	}
	return nil
}

// children returns the data of p's children in name order.
func (f *fakeZK) childData(t *testing.T, p string) []string {
	t.Helper()
	kids, _, err := f.Children(p)
	if err != nil {
		t.Fatalf("children %s: %v", p, err)
	}
	var out []string
	for _, k := range kids {
		d, _, _ := f.Get(p + "/" + k)
		out = append(out, string(d))
	}
	return out
}

func newFakeACLStore(t *testing.T) (*ACLStore, *fakeZK) {
	f := newFakeZK()
	for _, p := range []string{aclLiteralPath, aclExtendedPath, aclStorePath(security.PatternPrefixed), aclChangesPath, aclExtendedChangesPath} {
		f.nodes[p] = &fakeNode{}
	}
	for _, pt := range aclPatternTypes {
		for _, rt := range security.ConcreteResourceTypes {
			f.nodes[aclTypePath(pt, rt)] = &fakeNode{}
		}
	}
	return &ACLStore{z: f}, f
}

func allow(principal string, op security.Operation) security.ACE {
	return security.ACE{Principal: principal, Host: "*", Operation: op, Permission: security.PermissionAllow}
}

func topicLiteral(name string) security.ResourcePattern {
	return security.ResourcePattern{Type: security.ResourceTopic, Name: name, PatternType: security.PatternLiteral}
}

func strp(s string) *string { return &s }

// TestACLCreateWritesKafkaFormat: one znode per pattern in Kafka's JSON,
// created when absent, and one notification per pattern in the store of
// its pattern type, in Kafka's payloads.
func TestACLCreateWritesKafkaFormat(t *testing.T) {
	st, f := newFakeACLStore(t)
	prefixed := security.ResourcePattern{Type: security.ResourceGroup, Name: "app-", PatternType: security.PatternPrefixed}
	errs := st.CreateACLs(context.Background(), []security.ACLBinding{
		{Pattern: topicLiteral("orders"), Entry: allow("User:alice", security.OpRead)},
		{Pattern: prefixed, Entry: allow("User:bob", security.OpRead)},
		{Pattern: topicLiteral("orders"), Entry: allow("User:bob", security.OpWrite)},
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("binding %d: %v", i, err)
		}
	}
	data, _, err := f.Get("/kafka-acl/Topic/orders")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"},` +
		`{"principal":"User:bob","permissionType":"Allow","operation":"Write","host":"*"}]}`
	if string(data) != want {
		t.Fatalf("topic znode\n got %s\nwant %s", data, want)
	}
	if _, _, err := f.Get("/kafka-acl-extended/prefixed/Group/app-"); err != nil {
		t.Fatalf("prefixed znode: %v", err)
	}
	if got := f.childData(t, aclChangesPath); !slices.Equal(got, []string{"TOPIC:orders"}) {
		t.Fatalf("literal notifications %q", got)
	}
	if got := f.childData(t, aclExtendedChangesPath); !slices.Equal(got,
		[]string{`{"version":1,"resourceType":"GROUP","name":"app-","patternType":"PREFIXED"}`}) {
		t.Fatalf("extended notifications %q", got)
	}
	// Creating what exists changes nothing in the resource znode, but
	// announces it again (repairing a notification an earlier call lost).
	before, _, _ := f.Get("/kafka-acl/Topic/orders")
	if errs := st.CreateACLs(context.Background(), []security.ACLBinding{
		{Pattern: topicLiteral("orders"), Entry: allow("User:alice", security.OpRead)}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if after, _, _ := f.Get("/kafka-acl/Topic/orders"); string(after) != string(before) {
		t.Fatalf("a no-op create rewrote the znode: %s", after)
	}
	if got := f.childData(t, aclChangesPath); len(got) != 2 {
		t.Fatalf("a no-op create did not notify: %q", got)
	}
}

// TestACLCreateRetriesOnBadVersion: another writer changes the znode
// between our read and our conditional write; we re-read and keep both
// ACLs (no lost update), on a create race and on a set race.
func TestACLCreateRetriesOnBadVersion(t *testing.T) {
	st, f := newFakeACLStore(t)
	other := &ACLStore{z: f}
	p := topicLiteral("raced")
	path := aclResourcePath(p)
	var interfere func(op, path string)
	round := 0
	interfere = func(op, wp string) {
		if wp != path || round >= 2 {
			return
		}
		round++
		f.beforeWrite = nil // the other writer's own write runs unhooked
		errs := other.CreateACLs(context.Background(), []security.ACLBinding{
			{Pattern: p, Entry: allow(fmt.Sprintf("User:other%d", round), security.OpRead)}})
		if errs[0] != nil {
			t.Errorf("other writer: %v", errs[0])
		}
		f.beforeWrite = interfere
	}
	f.beforeWrite = interfere
	// Round 1 races our create (NODEEXISTS), round 2 our set (BADVERSION).
	if errs := st.CreateACLs(context.Background(), []security.ACLBinding{
		{Pattern: p, Entry: allow("User:us", security.OpWrite)}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	f.beforeWrite = nil
	data, stat, err := f.Get(path)
	if err != nil {
		t.Fatal(err)
	}
	acls, err := security.DecodeResourceACLs(data)
	if err != nil {
		t.Fatal(err)
	}
	var who []string
	for _, a := range acls {
		who = append(who, a.Principal)
	}
	slices.Sort(who)
	if !slices.Equal(who, []string{"User:other1", "User:other2", "User:us"}) {
		t.Fatalf("ACLs after the races: %v", who)
	}
	if round != 2 || stat.Version != 2 { // other: create (0), set (1); ours: set (2)
		t.Fatalf("rounds %d, version %d", round, stat.Version)
	}
	if n := len(f.childData(t, aclChangesPath)); n != 3 {
		t.Fatalf("%d notifications, want 3 (one per successful write)", n)
	}
}

// TestACLLostAnswerStillNotifies: a write whose answer is lost but which
// landed is found on the re-read with nothing left to change; the
// notification is still written, or the other brokers would never hear.
func TestACLLostAnswerStillNotifies(t *testing.T) {
	st, f := newFakeACLStore(t)
	p := topicLiteral("lost")
	f.failNext["create "+aclResourcePath(p)] = fakeFail{err: zk.ErrConnectionClosed, lost: true}
	if errs := st.CreateACLs(context.Background(), []security.ACLBinding{
		{Pattern: p, Entry: allow("User:alice", security.OpRead)}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if got := f.childData(t, aclChangesPath); !slices.Equal(got, []string{"TOPIC:lost"}) {
		t.Fatalf("notifications %q", got)
	}
}

// TestACLGivesUpAfterRetries: a writer that loses every round reports
// ErrConcurrentModification instead of spinning.
func TestACLGivesUpAfterRetries(t *testing.T) {
	st, f := newFakeACLStore(t)
	p := topicLiteral("busy")
	f.nodes[aclResourcePath(p)] = &fakeNode{data: security.EncodeResourceACLs([]security.ACE{allow("User:x", security.OpRead)})}
	f.beforeWrite = func(op, wp string) {
		f.mu.Lock()
		f.nodes[wp].version++
		f.mu.Unlock()
	}
	errs := st.CreateACLs(context.Background(), []security.ACLBinding{{Pattern: p, Entry: allow("User:y", security.OpRead)}})
	if !errors.Is(errs[0], ErrConcurrentModification) {
		t.Fatalf("got %v", errs[0])
	}
}

// TestACLDeleteRemovesZnodeWithLastACL: DeleteACLs visits what is in
// ZooKeeper, reports per filter (first matching filter wins), deletes the
// znode when no ACL remains, and notifies per changed resource.
func TestACLDeleteRemovesZnodeWithLastACL(t *testing.T) {
	st, f := newFakeACLStore(t)
	ctx := context.Background()
	pre := security.ResourcePattern{Type: security.ResourceTopic, Name: "ord", PatternType: security.PatternPrefixed}
	for i, err := range st.CreateACLs(ctx, []security.ACLBinding{
		{Pattern: topicLiteral("orders"), Entry: allow("User:alice", security.OpRead)},
		{Pattern: topicLiteral("orders"), Entry: allow("User:bob", security.OpRead)},
		{Pattern: pre, Entry: allow("User:alice", security.OpWrite)},
		{Pattern: topicLiteral("other"), Entry: allow("User:carol", security.OpRead)},
	}) {
		if err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
	}
	alice := security.ACEFilter{Principal: strp("User:alice"), Operation: security.OpAny, Permission: security.PermissionAny}
	anyEntry := security.ACEFilter{Operation: security.OpAny, Permission: security.PermissionAny}
	deleted, errs := st.DeleteACLs(ctx, []security.ACLBindingFilter{
		{Pattern: security.ResourcePatternFilter{Type: security.ResourceAny, PatternType: security.PatternAny}, Entry: alice},
		{Pattern: security.ResourcePatternFilter{Type: security.ResourceTopic, Name: strp("orders"), PatternType: security.PatternLiteral}, Entry: anyEntry},
		{Pattern: security.ResourcePatternFilter{Type: security.ResourceTopic, Name: strp("absent"), PatternType: security.PatternLiteral}, Entry: anyEntry},
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("filter %d: %v", i, err)
		}
	}
	got := func(bs []security.ACLBinding) []string {
		var out []string
		for _, b := range bs {
			out = append(out, b.Pattern.Name+"/"+b.Entry.Principal)
		}
		slices.Sort(out)
		return out
	}
	if g := got(deleted[0]); !slices.Equal(g, []string{"ord/User:alice", "orders/User:alice"}) {
		t.Fatalf("filter 0 deleted %v", g)
	}
	if g := got(deleted[1]); !slices.Equal(g, []string{"orders/User:bob"}) {
		t.Fatalf("filter 1 deleted %v", g)
	}
	if len(deleted[2]) != 0 {
		t.Fatalf("filter 2 deleted %v", deleted[2])
	}
	for _, p := range []string{"/kafka-acl/Topic/orders", "/kafka-acl-extended/prefixed/Topic/ord"} {
		if _, _, err := f.Get(p); !errors.Is(err, zk.ErrNoNode) {
			t.Fatalf("%s still there (%v)", p, err)
		}
	}
	if _, _, err := f.Get("/kafka-acl/Topic/other"); err != nil {
		t.Fatalf("untouched resource: %v", err)
	}
	// 2 creates (orders, other) + one per literal resource the deletion
	// visited (orders, absent, other: nothing-to-change notifies too);
	// 1 create + 1 delete (extended).
	if lit, ext := f.childData(t, aclChangesPath), f.childData(t, aclExtendedChangesPath); len(lit) != 5 || len(ext) != 2 {
		t.Fatalf("notifications literal %q extended %q", lit, ext)
	}
}

// TestACLRefusesUnstorableNames: a name that is not one znode segment is
// refused with security.ErrInvalidACL, not sent to ZooKeeper.
func TestACLRefusesUnstorableNames(t *testing.T) {
	st, f := newFakeACLStore(t)
	for _, name := range []string{"a/b", "..", "."} {
		p := security.ResourcePattern{Type: security.ResourceGroup, Name: name, PatternType: security.PatternLiteral}
		errs := st.CreateACLs(context.Background(), []security.ACLBinding{{Pattern: p, Entry: allow("User:x", security.OpRead)}})
		if !errors.Is(errs[0], security.ErrInvalidACL) {
			t.Fatalf("%q: %v", name, errs[0])
		}
	}
	if n := len(f.childData(t, aclChangesPath)); n != 0 {
		t.Fatalf("%d notifications", n)
	}
}

func TestSortedNotifications(t *testing.T) {
	kids := []string{"acl_changes_0000000010", "acl_changes_0000000002", "junk", "acl_changes_x", "acl_changes_0000000003"}
	var got []string
	for _, n := range sortedNotifications(kids, aclChangeNamePrefix, 2) {
		got = append(got, n.name)
	}
	if !slices.Equal(got, []string{"acl_changes_0000000003", "acl_changes_0000000010"}) {
		t.Fatalf("got %v", got)
	}
	if n := sortedNotifications(kids, aclChangeNamePrefix, -1); len(n) != 3 || n[0].seq != 2 {
		t.Fatalf("all: %v", n)
	}
}

func TestUserEntity(t *testing.T) {
	for _, tc := range []struct {
		path string
		user string
		ok   bool
	}{
		{"users/alice", "alice", true},
		{"users/bob%40example.com", "bob%40example.com", true},
		{"users/<default>", "", false},
		{"users/alice/clients/app", "", false},
		{"topics/alice", "", false},
		{"users/", "", false},
	} {
		if u, ok := userEntity(tc.path); u != tc.user || ok != tc.ok {
			t.Errorf("%s: %q %v", tc.path, u, ok)
		}
	}
}

// TestZnodeACLs: the ACL each created znode gets, per Kafka's
// ZkData.defaultAcls.
func TestZnodeACLs(t *testing.T) {
	open := &zkConn{}
	if got := open.aclFor(partitionStatePath("t", 0)); !slices.Equal(got, openACL) {
		t.Fatalf("without set.acl: %v", got)
	}
	digest := zk.DigestACL(zk.PermAll, "kafka", "secret")
	if digest[0].ID != "kafka:"+digestOf("kafka:secret") {
		t.Fatalf("digest id %s", digest[0].ID)
	}
	secure := &zkConn{secureACL: digest}
	worldRead := zk.WorldACL(zk.PermRead)[0]
	for _, tc := range []struct {
		path      string
		worldRead bool
	}{
		{partitionStatePath("t", 0), true},
		{brokerPath(1), true},
		{controllerPath, true},
		{configChangeSequencePrefix, true},
		{aclResourcePath(topicLiteral("t")), true},
		{aclChangesPath + "/" + aclChangeNamePrefix, true},
		{configTopicPath("t"), true},
		{configUsersPath, false},
		{configUserPath("alice"), false},
		{configBrokersPath, false},
		{configBrokerPath("<default>"), false},
		{delegationTokensPath + "/x", false},
	} {
		got := secure.aclFor(tc.path)
		want := []zk.ACL{digest[0]}
		if tc.worldRead {
			want = append(want, worldRead)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", tc.path, got, want)
		}
	}
	if got := secure.aclFor(consumersPath); !slices.Equal(got, openACL) {
		t.Errorf("/consumers stays open as in Kafka: %v", got)
	}
}

func digestOf(s string) string {
	h := sha1.Sum([]byte(s))
	return base64.StdEncoding.EncodeToString(h[:])
}

func TestCheckDigest(t *testing.T) {
	if err := checkDigest(Config{SetACL: true}); !errors.Is(err, ErrBadZKAuth) {
		t.Fatalf("set.acl without credentials: %v", err)
	}
	if err := checkDigest(Config{Digest: &DigestCredentials{User: "a:b", Password: "x"}}); !errors.Is(err, ErrBadZKAuth) {
		t.Fatalf("user with ':': %v", err)
	}
	if err := checkDigest(Config{SetACL: true, Digest: &DigestCredentials{User: "kafka", Password: "x"}}); err != nil {
		t.Fatal(err)
	}
}

// Golden SCRAM credential for password "pencil" with the RFC 7677 salt at
// 4096 iterations, as security's tests hold it (computed with Python's
// hashlib and hmac, not with our code).
const (
	rfc7677Salt           = "W22ZaJ0SNY7soEsUEjb6gQ=="
	goldenSHA256StoredKey = "WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY="
	goldenSHA256ServerKey = "wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU="
	goldenSHA512StoredKey = "6AAub3065EYRmyFpM2RNwqK+eGnrkYuEWbXn19LsEmBqzu8QaCXNc1FwpnX9NhH2hK/60dzj9DoO5DvVkOHbvg=="
	goldenSHA512ServerKey = "jZHbYjC1aHh0/hKbxyBuGFjDrgjgKTT1esA7awWiKcRZ0o/0b1yWEebBeSVkkCFewf91nLDfKF24mvD5nmE6rA=="
)

func pencilUpsert(t testing.TB, user string, m security.ScramMechanism) ScramUpsert {
	t.Helper()
	salt, _ := base64.StdEncoding.DecodeString(rfc7677Salt)
	h := sha256.New
	if m == security.ScramSHA512 {
		h = sha512.New
	}
	sp, err := pbkdf2.Key(h, "pencil", salt, 4096, h().Size())
	if err != nil {
		t.Fatal(err)
	}
	return ScramUpsert{User: user, Mechanism: m, Iterations: 4096, Salt: salt, SaltedPassword: sp}
}

func goldenUserZnode(m security.ScramMechanism) string {
	stored, server := goldenSHA256StoredKey, goldenSHA256ServerKey
	if m == security.ScramSHA512 {
		stored, server = goldenSHA512StoredKey, goldenSHA512ServerKey
	}
	return `"` + m.Name() + `":"salt=` + rfc7677Salt + `,stored_key=` + stored + `,server_key=` + server + `,iterations=4096"`
}

func newFakeScramStore() (*ScramStore, *fakeZK) {
	f := newFakeZK()
	for _, p := range []string{configPath, configChangesPath, configUsersPath} {
		f.nodes[p] = &fakeNode{}
	}
	return &ScramStore{z: f, log: zerolog.Nop()}, f
}

// TestScramAlterWritesKafkaFormat: the credential stored from a salt and a
// salted password is Kafka's, byte for byte against the RFC-derived golden,
// the user's name is sanitized in the path, other keys (quotas) survive,
// and the change is announced as users/<sanitized user>.
func TestScramAlterWritesKafkaFormat(t *testing.T) {
	st, f := newFakeScramStore()
	f.nodes[configUserPath("bob%40example.com")] = &fakeNode{data: []byte(`{"version":1,"config":{"producer_byte_rate":"1024"}}`)}
	res := st.AlterScramUsers(context.Background(), []ScramUpsert{
		pencilUpsert(t, "bob@example.com", security.ScramSHA256),
		pencilUpsert(t, "bob@example.com", security.ScramSHA512),
	}, nil)
	if len(res) != 1 || res["bob@example.com"] != nil {
		t.Fatalf("results %v", res)
	}
	data, _, err := f.Get("/config/users/bob%40example.com")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"version":1,"config":{` + goldenUserZnode(security.ScramSHA256) + `,` +
		goldenUserZnode(security.ScramSHA512) + `,"producer_byte_rate":"1024"}}`
	if string(data) != want {
		t.Fatalf("user znode\n got %s\nwant %s", data, want)
	}
	if got := f.childData(t, configChangesPath); !slices.Equal(got, []string{`{"version":2,"entity_path":"users/bob%40example.com"}`}) {
		t.Fatalf("notifications %q", got)
	}
	desc, err := st.DescribeScramUsers(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []ScramCredentialInfo{{security.ScramSHA256, 4096}, {security.ScramSHA512, 4096}}; !slices.Equal(desc["bob@example.com"], want) || len(desc) != 1 {
		t.Fatalf("describe %v", desc)
	}
	// Delete one mechanism: the other and the quota stay.
	res = st.AlterScramUsers(context.Background(), nil, []ScramDeletion{{"bob@example.com", security.ScramSHA512}})
	if res["bob@example.com"] != nil {
		t.Fatal(res)
	}
	data, _, _ = f.Get("/config/users/bob%40example.com")
	if want := `{"version":1,"config":{` + goldenUserZnode(security.ScramSHA256) + `,"producer_byte_rate":"1024"}}`; string(data) != want {
		t.Fatalf("after delete\n got %s\nwant %s", data, want)
	}
}

// TestScramAlterRefusals: Kafka's per-user refusals, each with the
// sentinel protocol maps to its error code, and nothing written for them.
func TestScramAlterRefusals(t *testing.T) {
	st, f := newFakeScramStore()
	low := pencilUpsert(t, "low", security.ScramSHA256)
	low.Iterations = 4095
	high := pencilUpsert(t, "high", security.ScramSHA256)
	high.Iterations = 16385
	badMech := pencilUpsert(t, "mech", security.ScramSHA256)
	badMech.Mechanism = 0
	empty := pencilUpsert(t, "", security.ScramSHA256)
	res := st.AlterScramUsers(context.Background(),
		[]ScramUpsert{low, high, badMech, empty, pencilUpsert(t, "dup", security.ScramSHA256), pencilUpsert(t, "ok", security.ScramSHA256)},
		[]ScramDeletion{{"dup", security.ScramSHA256}, {"ghost", security.ScramSHA512}})
	for user, want := range map[string]error{
		"low":   security.ErrUnacceptableCredential,
		"high":  security.ErrUnacceptableCredential,
		"mech":  security.ErrUnsupportedMechanism,
		"":      security.ErrUnacceptableCredential,
		"dup":   security.ErrDuplicateResource,
		"ghost": security.ErrCredentialNotFound,
	} {
		if !errors.Is(res[user], want) {
			t.Errorf("user %q: %v, want %v", user, res[user], want)
		}
	}
	if res["ok"] != nil || len(res) != 7 {
		t.Fatalf("results %v", res)
	}
	if kids, _, _ := f.Children(configUsersPath); !slices.Equal(kids, []string{"ok"}) {
		t.Fatalf("users written: %v", kids)
	}
}

// TestScramAlterRetriesOnBadVersion: a concurrent writer of the same user
// znode (another mechanism) is not overwritten.
func TestScramAlterRetriesOnBadVersion(t *testing.T) {
	st, f := newFakeScramStore()
	other := &ScramStore{z: f, log: zerolog.Nop()}
	once := false
	f.beforeWrite = func(op, p string) {
		if p != configUserPath("alice") || once {
			return
		}
		once = true
		f.beforeWrite = nil
		if r := other.AlterScramUsers(context.Background(), []ScramUpsert{pencilUpsert(t, "alice", security.ScramSHA512)}, nil); r["alice"] != nil {
			t.Errorf("other: %v", r)
		}
	}
	if r := st.AlterScramUsers(context.Background(), []ScramUpsert{pencilUpsert(t, "alice", security.ScramSHA256)}, nil); r["alice"] != nil {
		t.Fatal(r)
	}
	data, _, _ := f.Get(configUserPath("alice"))
	if want := `{"version":1,"config":{` + goldenUserZnode(security.ScramSHA256) + `,` + goldenUserZnode(security.ScramSHA512) + `}}`; string(data) != want {
		t.Fatalf("got %s\nwant %s", data, want)
	}
}
