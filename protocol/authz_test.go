package protocol

// Authorization of every API (issue 14). Goal: each handler asks what
// Kafka's KafkaApis asks and answers Kafka's code when refused, and a
// refused request changes nothing. Method: a real security.Authorizer
// with no ACLs and allow.everyone.if.no.acl.found off denies everything;
// each test grants User:ANONYMOUS (what a PLAINTEXT connection is) the
// ACLs one step needs, sends the request over the wire, and checks the
// codes and the fakes' state both ways, so a check that is missing or
// too wide fails.

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
	"github.com/kafkazk/broker/security"
)

// withAuthorizer makes a the server's Authorizer, with ACLAdmin writing
// straight into it.
func withAuthorizer(a *security.Authorizer) brokerOption {
	return func(c *Config) { c.Authorizer, c.ACLAdmin = a, &fakeACLAdmin{a} }
}

func newDenyAllAuthorizer() *security.Authorizer {
	return security.NewAuthorizer(security.AuthorizerConfig{})
}

// grant allows User:ANONYMOUS ops on the literal resource (typ, name)
// from any host.
func grant(a *security.Authorizer, typ security.ResourceType, name string, ops ...security.Operation) {
	grantPattern(a, security.ResourcePattern{Type: typ, Name: name, PatternType: security.PatternLiteral}, ops...)
}

func grantPattern(a *security.Authorizer, p security.ResourcePattern, ops ...security.Operation) {
	cur, _ := a.ResourceACLs(p)
	var add []security.ACE
	for _, op := range ops {
		add = append(add, security.ACE{Principal: security.Anonymous.String(), Host: "*", Operation: op, Permission: security.PermissionAllow})
	}
	a.SetResourceACLs(p, security.AddACLs(cur.ACLs, add), cur.ZkVersion+1)
}

func grantCluster(a *security.Authorizer, ops ...security.Operation) {
	grant(a, security.ResourceCluster, security.ClusterResourceName, ops...)
}

func leoOf(b *testBroker, tp cluster.TopicPartition) int64 {
	b.replicas.mu.Lock()
	defer b.replicas.mu.Unlock()
	if l := b.replicas.parts[tp]; l != nil {
		return l.leo
	}
	return -1
}

func readsOf(b *testBroker) int {
	b.replicas.mu.Lock()
	defer b.replicas.mu.Unlock()
	return len(b.replicas.reads)
}

func TestAuthzNilAuthorizerAllowsAll(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "t", 1)
	c := b.dial(t)
	resp := c.roundTrip(produceRequest(7, 1, 1000, "t", 0, makeBatch(0, "a"))).(*kmsg.ProduceResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("produce without an authorizer: code %d", code)
	}
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.Version, ip.ProducerID, ip.ProducerEpoch = 4, -1, -1
	if r := c.roundTrip(ip).(*kmsg.InitProducerIDResponse); r.ErrorCode != 0 {
		t.Fatalf("InitProducerId without an authorizer: code %d", r.ErrorCode)
	}
}

func TestAuthzProduce(t *testing.T) {
	a := newDenyAllAuthorizer()
	b := startBroker(t, withAuthorizer(a))
	createTopic(t, b, "t", 1)
	tp := cluster.TopicPartition{Topic: "t", Partition: 0}
	c := b.dial(t)
	code := func(req *kmsg.ProduceRequest) int16 {
		t.Helper()
		return c.roundTrip(req).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
	}

	if got := code(produceRequest(7, -1, 1000, "t", 0, makeBatch(0, "a"))); got != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("produce without Write: code %d, want TOPIC_AUTHORIZATION_FAILED", got)
	}
	if leo := leoOf(b, tp); leo != 0 {
		t.Fatalf("refused produce appended: log end offset %d", leo)
	}
	// Describe, Read and Write elsewhere do not grant Write here.
	grant(a, security.ResourceTopic, "t", security.OpDescribe, security.OpRead)
	grant(a, security.ResourceTopic, "other", security.OpWrite)
	if got := code(produceRequest(7, -1, 1000, "t", 0, makeBatch(0, "a"))); got != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("produce with Read only: code %d", got)
	}

	grant(a, security.ResourceTopic, "t", security.OpWrite)
	if got := code(produceRequest(7, -1, 1000, "t", 0, makeBatch(0, "a"))); got != 0 {
		t.Fatalf("produce with Write: code %d", got)
	}
	// KIP-679: an idempotent batch needs only Write on the topic, not
	// IdempotentWrite on the cluster.
	if got := code(produceRequest(7, -1, 1000, "t", 0, makeTxnBatch(false, 7, 0, 0, "i"))); got != 0 {
		t.Fatalf("idempotent produce with Write only: code %d", got)
	}
	if leo := leoOf(b, tp); leo != 2 {
		t.Fatalf("log end offset %d after two allowed produces, want 2", leo)
	}

	// Transactional records need Write on the transactional id: every
	// partition answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED, nothing
	// is appended and the coordinator is not asked to verify.
	txnReq := produceRequest(7, -1, 1000, "t", 0, makeTxnBatch(true, 9, 0, 0, "x"))
	txnReq.TransactionID = kmsg.StringPtr("tx")
	if got := code(txnReq); got != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Fatalf("transactional produce without Write on the id: code %d", got)
	}
	if leo := leoOf(b, tp); leo != 2 {
		t.Fatalf("refused transactional produce appended: log end offset %d", leo)
	}
	if v := b.txn.verifications(); len(v) != 0 {
		t.Fatalf("refused transactional produce was verified: %v", v)
	}
	grant(a, security.ResourceTransactionalID, "tx", security.OpWrite)
	if got := code(txnReq); got == kerr.TransactionalIDAuthorizationFailed.Code || got == kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("transactional produce with both Writes: code %d", got)
	}
}

// TestAuthzProduceAutoCreate: a produce to an unknown topic creates it
// only with Create on the cluster or the topic.
func TestAuthzProduceAutoCreate(t *testing.T) {
	a := newDenyAllAuthorizer()
	b := startBroker(t, withAuthorizer(a))
	grant(a, security.ResourceTopic, "new", security.OpWrite)
	c := b.dial(t)
	c.roundTrip(produceRequest(7, 1, 1000, "new", 0, makeBatch(0, "a")))
	if _, ok := b.cluster.Topic("new"); ok {
		t.Fatal("topic auto-created by a principal without Create")
	}
	grant(a, security.ResourceTopic, "new", security.OpCreate)
	c.roundTrip(produceRequest(7, 1, 1000, "new", 0, makeBatch(0, "a")))
	if _, ok := b.cluster.Topic("new"); !ok {
		t.Fatal("topic not auto-created with Create on it")
	}
}

// TestAuthzInitProducerID is KIP-679: an idempotent producer's
// InitProducerId needs IdempotentWrite on the cluster or Write on at
// least one topic (a prefixed ACL counts); a transactional one Write on
// its id.
func TestAuthzInitProducerID(t *testing.T) {
	a := newDenyAllAuthorizer()
	b := startBroker(t, withAuthorizer(a))
	c := b.dial(t)
	idem := func() int16 {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version, req.ProducerID, req.ProducerEpoch = 4, -1, -1
		return c.roundTrip(req).(*kmsg.InitProducerIDResponse).ErrorCode
	}
	if got := idem(); got != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("idempotent InitProducerId with no ACL: code %d, want CLUSTER_AUTHORIZATION_FAILED", got)
	}
	grant(a, security.ResourceTopic, "orders", security.OpRead)
	if got := idem(); got != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("idempotent InitProducerId with Read only: code %d", got)
	}
	grantPattern(a, security.ResourcePattern{Type: security.ResourceTopic, Name: "orders-", PatternType: security.PatternPrefixed}, security.OpWrite)
	if got := idem(); got != 0 {
		t.Fatalf("idempotent InitProducerId with prefixed Write: code %d", got)
	}

	a2 := newDenyAllAuthorizer()
	grantCluster(a2, security.OpIdempotentWrite)
	b2 := startBroker(t, withAuthorizer(a2))
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version, req.ProducerID, req.ProducerEpoch = 4, -1, -1
	if got := b2.dial(t).roundTrip(req).(*kmsg.InitProducerIDResponse).ErrorCode; got != 0 {
		t.Fatalf("idempotent InitProducerId with IdempotentWrite: code %d", got)
	}

	txnInit := func() int16 {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version, req.ProducerID, req.ProducerEpoch = 4, -1, -1
		req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr("tx"), 60000
		return c.roundTrip(req).(*kmsg.InitProducerIDResponse).ErrorCode
	}
	if got := txnInit(); got != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Fatalf("transactional InitProducerId without Write on the id: code %d", got)
	}
	grant(a, security.ResourceTransactionalID, "tx", security.OpDescribe)
	if got := txnInit(); got != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Fatalf("transactional InitProducerId with Describe only: code %d", got)
	}
	grant(a, security.ResourceTransactionalID, "tx", security.OpWrite)
	if got := txnInit(); got != 0 {
		t.Fatalf("transactional InitProducerId with Write: code %d", got)
	}
}

func TestAuthzFetch(t *testing.T) {
	a := newDenyAllAuthorizer()
	b := startBroker(t, withAuthorizer(a))
	createTopic(t, b, "t", 1)
	grant(a, security.ResourceTopic, "t", security.OpWrite)
	c := b.dial(t)
	c.roundTrip(produceRequest(7, 1, 1000, "t", 0, makeBatch(0, "a")))

	fetch := func(replicaID int32) kmsg.FetchResponseTopicPartition {
		t.Helper()
		req := fetchRequest(11, 0, 0, "t", 0, 0)
		req.ReplicaID = replicaID
		return c.roundTrip(req).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	}
	if p := fetch(-1); p.ErrorCode != kerr.TopicAuthorizationFailed.Code || len(p.RecordBatches) != 0 || p.HighWatermark != -1 {
		t.Fatalf("consumer fetch without Read: code %d, %d bytes, hw %d", p.ErrorCode, len(p.RecordBatches), p.HighWatermark)
	}
	if n := readsOf(b); n != 0 {
		t.Fatalf("refused fetch reached the replica (%d reads)", n)
	}
	grant(a, security.ResourceTopic, "t", security.OpRead)
	if p := fetch(-1); p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("consumer fetch with Read: code %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
	}

	// A follower's fetch needs ClusterAction; Read on the topic is not
	// enough (CVE-2018-1288).
	before := readsOf(b)
	if p := fetch(2); p.ErrorCode != kerr.ClusterAuthorizationFailed.Code || len(p.RecordBatches) != 0 {
		t.Fatalf("follower fetch without ClusterAction: code %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
	}
	if n := readsOf(b); n != before {
		t.Fatal("refused follower fetch reached the replica")
	}
	grantCluster(a, security.OpClusterAction)
	if p := fetch(2); p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("follower fetch with ClusterAction: code %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
	}
}

// TestAuthzFollowerFetchHighWatermark (CVE-2018-1288, hostile-input row
// 27): over a real leader partition.Manager whose ISR holds a follower
// that has fetched nothing, a client posing as that follower and
// claiming its log end offset would move the high watermark. Without
// ClusterAction it gets CLUSTER_AUTHORIZATION_FAILED and the HW stays;
// with it (the control) the same request moves the HW.
func TestAuthzFollowerFetchHighWatermark(t *testing.T) {
	for _, allowed := range []bool{false, true} {
		tp := cluster.TopicPartition{Topic: "t", Partition: 0}
		cfg := cluster.DefaultLogConfig()
		cfg.MinInsyncReplicas = 1
		sw := &memStateWriter{state: cluster.LeaderAndIsr{Leader: 1, LeaderEpoch: 1, Isr: []int32{1, 2}, ControllerEpoch: 1}}
		leader := newReplicaManager(t, 1, nil, sw)
		st := partition.PartitionState{TopicPartition: tp, Replicas: []int32{1, 2}, Config: cfg, LeaderAndIsr: sw.state}
		if err := leader.BecomeLeaderOrFollower([]partition.PartitionState{st})[tp].Err; err != nil {
			t.Fatal(err)
		}
		if _, err := leader.Append(tp, makeBatch(0, "a", "b"), 1); err != nil {
			t.Fatal(err)
		}
		if s, _ := statusOf(leader, tp); s.HighWatermark != 0 || s.LogEndOffset != 2 {
			t.Fatalf("setup: hw %d leo %d, want 0 and 2", s.HighWatermark, s.LogEndOffset)
		}
		a := newDenyAllAuthorizer()
		grant(a, security.ResourceTopic, "t", security.OpRead, security.OpDescribe)
		if allowed {
			grantCluster(a, security.OpClusterAction)
		}
		b := startBroker(t, withAuthorizer(a), func(c *Config) { c.Replicas, c.LeaderEpochs = leader, leader })
		req := fetchRequest(11, 0, 0, "t", 0, 2) // "I have everything up to 2"
		req.ReplicaID = 2
		rp := b.dial(t).roundTrip(req).(*kmsg.FetchResponse).Topics[0].Partitions[0]
		s, _ := statusOf(leader, tp)
		switch {
		case !allowed && rp.ErrorCode != kerr.ClusterAuthorizationFailed.Code:
			t.Fatalf("forged follower fetch: code %d, want CLUSTER_AUTHORIZATION_FAILED", rp.ErrorCode)
		case !allowed && s.HighWatermark != 0:
			t.Fatalf("forged follower fetch moved the high watermark to %d", s.HighWatermark)
		case allowed && (rp.ErrorCode != 0 || s.HighWatermark != 2):
			t.Fatalf("follower fetch with ClusterAction: code %d, hw %d; want 0 and 2", rp.ErrorCode, s.HighWatermark)
		}
	}
}

func TestAuthzMetadata(t *testing.T) {
	a := newDenyAllAuthorizer()
	b := startBroker(t, withAuthorizer(a))
	for _, name := range []string{"a1", "a2", "b"} {
		createTopic(t, b, name, 1)
	}
	grantPattern(a, security.ResourcePattern{Type: security.ResourceTopic, Name: "a", PatternType: security.PatternPrefixed}, security.OpDescribe)
	c := b.dial(t)

	all := kmsg.NewPtrMetadataRequest()
	all.Version = 9
	resp := c.roundTrip(all).(*kmsg.MetadataResponse)
	var names []string
	for _, rt := range resp.Topics {
		names = append(names, *rt.Topic)
	}
	if !slices.Equal(names, []string{"a1", "a2"}) {
		t.Fatalf("all topics: %v, want only the describable a1 and a2", names)
	}

	ask := func(allowCreate bool, topics ...string) map[string]kmsg.MetadataResponseTopic {
		t.Helper()
		req := kmsg.NewPtrMetadataRequest()
		req.Version, req.AllowAutoTopicCreation = 9, allowCreate
		for _, n := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(n)
			req.Topics = append(req.Topics, rt)
		}
		out := map[string]kmsg.MetadataResponseTopic{}
		for _, rt := range c.roundTrip(req).(*kmsg.MetadataResponse).Topics {
			out[*rt.Topic] = rt
		}
		return out
	}
	got := ask(true, "a1", "b", "zzz")
	if got["a1"].ErrorCode != 0 || len(got["a1"].Partitions) != 1 {
		t.Errorf("a1: code %d, %d partitions", got["a1"].ErrorCode, len(got["a1"].Partitions))
	}
	// Existing or not, a topic without Describe looks the same.
	for _, n := range []string{"b", "zzz"} {
		if rt := got[n]; rt.ErrorCode != kerr.TopicAuthorizationFailed.Code || len(rt.Partitions) != 0 {
			t.Errorf("%s without Describe: code %d, %d partitions", n, rt.ErrorCode, len(rt.Partitions))
		}
	}
	if _, ok := b.cluster.Topic("zzz"); ok {
		t.Fatal("undescribable topic auto-created")
	}
	// Describable but not creatable: TOPIC_AUTHORIZATION_FAILED, not created.
	if rt := ask(true, "a-new")["a-new"]; rt.ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("auto-create without Create: code %d", rt.ErrorCode)
	}
	if _, ok := b.cluster.Topic("a-new"); ok {
		t.Fatal("topic auto-created without Create")
	}
	// Without auto-creation the answer is the usual unknown topic.
	if rt := ask(false, "a-new")["a-new"]; rt.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("unknown describable topic: code %d", rt.ErrorCode)
	}
	grant(a, security.ResourceTopic, "a-new", security.OpCreate)
	ask(true, "a-new")
	if _, ok := b.cluster.Topic("a-new"); !ok {
		t.Fatal("topic not auto-created with Create on it")
	}
	grantCluster(a, security.OpCreate)
	ask(true, "a-other")
	if _, ok := b.cluster.Topic("a-other"); !ok {
		t.Fatal("topic not auto-created with Create on the cluster")
	}

	// Authorized operations, when asked (v8+).
	req := kmsg.NewPtrMetadataRequest()
	req.Version, req.IncludeClusterAuthorizedOperations, req.IncludeTopicAuthorizedOperations = 9, true, true
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("a1")
	req.Topics = append(req.Topics, rt)
	mr := c.roundTrip(req).(*kmsg.MetadataResponse)
	if mr.AuthorizedOperations != 0 {
		t.Errorf("cluster operations without Describe on the cluster: %b, want 0", mr.AuthorizedOperations)
	}
	if ops := mr.Topics[0].AuthorizedOperations; ops != 1<<security.OpDescribe {
		t.Errorf("a1 operations %b, want Describe only", ops)
	}
}

func TestAuthzListOffsetsAndLeaderEpochs(t *testing.T) {
	a := newDenyAllAuthorizer()
	b := startBroker(t, withAuthorizer(a))
	createTopic(t, b, "t", 1)
	c := b.dial(t)
	lo := func() int16 {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version, req.ReplicaID = 4, -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return c.roundTrip(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode
	}
	oe := func() int16 {
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.Version, req.ReplicaID = 3, -1
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.LeaderEpoch, rp.CurrentLeaderEpoch = 0, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return c.roundTrip(req).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0].ErrorCode
	}
	if got := lo(); got != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("ListOffsets without Describe: code %d", got)
	}
	if got := oe(); got != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("OffsetForLeaderEpoch without Describe or ClusterAction: code %d", got)
	}
	grantCluster(a, security.OpClusterAction)
	if got := oe(); got == kerr.TopicAuthorizationFailed.Code {
		t.Errorf("OffsetForLeaderEpoch with ClusterAction: code %d", got)
	}
	grant(a, security.ResourceTopic, "t", security.OpDescribe)
	if got := lo(); got != 0 {
		t.Errorf("ListOffsets with Describe: code %d", got)
	}
}

func TestAuthzGroupKeys(t *testing.T) {
	a := newDenyAllAuthorizer()
	b := startBroker(t, withAuthorizer(a))
	createTopic(t, b, "t", 1)
	c := b.dial(t)

	commit := func() int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.Generation = 8, "g", -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Offset = 5
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return c.roundTrip(req).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
	}
	fetchOffsets := func(all bool) *kmsg.OffsetFetchResponse {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version, req.Group = 7, "g"
		if !all {
			rt := kmsg.NewOffsetFetchRequestTopic()
			rt.Topic, rt.Partitions = "t", []int32{0}
			req.Topics = append(req.Topics, rt)
		}
		return c.roundTrip(req).(*kmsg.OffsetFetchResponse)
	}
	// FindCoordinator: Describe on the group, on the transactional id.
	fc := func(typ int8, key string) int16 {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version, req.CoordinatorType, req.CoordinatorKey = 2, typ, key
		return c.roundTrip(req).(*kmsg.FindCoordinatorResponse).ErrorCode
	}
	if got := fc(0, "g"); got != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("FindCoordinator for a group without Describe: code %d", got)
	}
	if got := fc(1, "tx"); got != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Errorf("FindCoordinator for a transactional id without Describe: code %d", got)
	}
	grant(a, security.ResourceGroup, "g", security.OpDescribe)
	// The first lookup creates __consumer_offsets; wait until it is loaded.
	deadline := time.Now().Add(10 * time.Second)
	for fc(0, "g") != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := fc(0, "g"); got != 0 {
		t.Fatalf("FindCoordinator with Describe: code %d", got)
	}

	if got := commit(); got != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("OffsetCommit without group Read: code %d", got)
	}
	grant(a, security.ResourceGroup, "g", security.OpRead)
	if got := commit(); got != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("OffsetCommit without topic Read: code %d", got)
	}
	grant(a, security.ResourceTopic, "t", security.OpRead)
	for commit() == kerr.CoordinatorLoadInProgress.Code && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := commit(); got != 0 {
		t.Fatalf("OffsetCommit with both Reads: code %d", got)
	}

	grant(a, security.ResourceTopic, "t2", security.OpRead) // unrelated
	a.SetResourceACLs(security.ResourcePattern{Type: security.ResourceTopic, Name: "t", PatternType: security.PatternLiteral}, nil, 0)
	a.SetResourceACLs(security.ResourcePattern{Type: security.ResourceGroup, Name: "g", PatternType: security.PatternLiteral}, nil, 0)
	if r := fetchOffsets(false); r.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("OffsetFetch without group Describe: code %d", r.ErrorCode)
	}
	grant(a, security.ResourceGroup, "g", security.OpDescribe)
	if r := fetchOffsets(false); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != kerr.TopicAuthorizationFailed.Code ||
		r.Topics[0].Partitions[0].Offset != -1 {
		t.Fatalf("OffsetFetch of an undescribable topic: %+v", r)
	}
	if r := fetchOffsets(true); r.ErrorCode != 0 || len(r.Topics) != 0 {
		t.Fatalf("OffsetFetch of all offsets shows an undescribable topic: %+v", r.Topics)
	}
	grant(a, security.ResourceTopic, "t", security.OpDescribe)
	if r := fetchOffsets(true); len(r.Topics) != 1 || r.Topics[0].Partitions[0].Offset != 5 {
		t.Fatalf("OffsetFetch of all offsets with Describe: %+v", r.Topics)
	}

	// The membership keys need Read on the group.
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version, join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis, join.ProtocolType = 5, "other", 10000, 10000, "consumer"
	jp := kmsg.NewJoinGroupRequestProtocol()
	jp.Name, jp.Metadata = "range", []byte{}
	join.Protocols = append(join.Protocols, jp)
	if r := c.roundTrip(join).(*kmsg.JoinGroupResponse); r.ErrorCode != kerr.GroupAuthorizationFailed.Code || r.Generation != -1 {
		t.Errorf("JoinGroup without Read: code %d generation %d", r.ErrorCode, r.Generation)
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID = 3, "other", "m"
	if r := c.roundTrip(hb).(*kmsg.HeartbeatResponse); r.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("Heartbeat without Read: code %d", r.ErrorCode)
	}
	sg := kmsg.NewPtrSyncGroupRequest()
	sg.Version, sg.Group, sg.MemberID = 3, "other", "m"
	if r := c.roundTrip(sg).(*kmsg.SyncGroupResponse); r.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("SyncGroup without Read: code %d", r.ErrorCode)
	}
	lg := kmsg.NewPtrLeaveGroupRequest()
	lg.Version, lg.Group = 3, "other"
	lg.Members = []kmsg.LeaveGroupRequestMember{{MemberID: "m"}}
	if r := c.roundTrip(lg).(*kmsg.LeaveGroupResponse); r.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("LeaveGroup without Read: code %d", r.ErrorCode)
	}

	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Version, dg.Groups, dg.IncludeAuthorizedOperations = 4, []string{"g", "other"}, true
	dr := c.roundTrip(dg).(*kmsg.DescribeGroupsResponse)
	if dr.Groups[0].ErrorCode != 0 || dr.Groups[0].AuthorizedOperations != 1<<security.OpDescribe {
		t.Errorf("DescribeGroups g: code %d ops %b", dr.Groups[0].ErrorCode, dr.Groups[0].AuthorizedOperations)
	}
	if dr.Groups[1].ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("DescribeGroups other: code %d", dr.Groups[1].ErrorCode)
	}

	lgr := kmsg.NewPtrListGroupsRequest()
	lgr.Version = 3
	for _, g := range c.roundTrip(lgr).(*kmsg.ListGroupsResponse).Groups {
		if g.Group != "g" {
			t.Errorf("ListGroups shows %s, which the principal may not describe", g.Group)
		}
	}

	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = "g"
	odt := kmsg.NewOffsetDeleteRequestTopic()
	odt.Topic, odt.Partitions = "t", []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}
	od.Topics = append(od.Topics, odt)
	if r := c.roundTrip(od).(*kmsg.OffsetDeleteResponse); r.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("OffsetDelete without group Delete: code %d", r.ErrorCode)
	}
	grant(a, security.ResourceGroup, "g", security.OpDelete)
	if r := c.roundTrip(od).(*kmsg.OffsetDeleteResponse); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("OffsetDelete without topic Read: %+v", r)
	}

	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Version, del.Groups = 2, []string{"g", "other"}
	delr := c.roundTrip(del).(*kmsg.DeleteGroupsResponse)
	if delr.Groups[1].ErrorCode != kerr.GroupAuthorizationFailed.Code || delr.Groups[0].ErrorCode == kerr.GroupAuthorizationFailed.Code {
		t.Errorf("DeleteGroups: %+v", delr.Groups)
	}
}

func TestAuthzTopicAdmin(t *testing.T) {
	a := newDenyAllAuthorizer()
	b := startBroker(t, withAuthorizer(a))
	createTopic(t, b, "t", 1)
	c := b.dial(t)

	create := func(name string) kmsg.CreateTopicsResponseTopic {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version, req.TimeoutMillis = 5, 0
		ct := kmsg.NewCreateTopicsRequestTopic()
		ct.Topic, ct.NumPartitions, ct.ReplicationFactor = name, 1, 1
		req.Topics = append(req.Topics, ct)
		return c.roundTrip(req).(*kmsg.CreateTopicsResponse).Topics[0]
	}
	if r := create("n1"); r.ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("CreateTopics without Create: code %d", r.ErrorCode)
	}
	if _, ok := b.cluster.Topic("n1"); ok {
		t.Fatal("refused CreateTopics created the topic")
	}
	grant(a, security.ResourceTopic, "n1", security.OpCreate)
	if r := create("n1"); r.ErrorCode == kerr.TopicAuthorizationFailed.Code || r.ConfigErrorCode != kerr.TopicAuthorizationFailed.Code || len(r.Configs) != 0 {
		t.Fatalf("CreateTopics with Create, without DescribeConfigs: code %d, config code %d, %d configs", r.ErrorCode, r.ConfigErrorCode, len(r.Configs))
	}
	grantCluster(a, security.OpCreate)
	grant(a, security.ResourceTopic, "n2", security.OpDescribeConfigs)
	if r := create("n2"); r.ErrorCode == kerr.TopicAuthorizationFailed.Code || r.ConfigErrorCode != 0 {
		t.Fatalf("CreateTopics with cluster Create and DescribeConfigs: code %d, config code %d", r.ErrorCode, r.ConfigErrorCode)
	}

	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.Version, dt.TopicNames = 3, []string{"t"}
	if r := c.roundTrip(dt).(*kmsg.DeleteTopicsResponse); r.Topics[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("DeleteTopics without Delete: code %d", r.Topics[0].ErrorCode)
	}
	if _, ok := b.cluster.Topic("t"); !ok {
		t.Fatal("refused DeleteTopics deleted the topic")
	}

	dr := kmsg.NewPtrDeleteRecordsRequest()
	drt := kmsg.NewDeleteRecordsRequestTopic()
	drt.Topic = "t"
	drt.Partitions = []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: 0}}
	dr.Topics, dr.TimeoutMillis = append(dr.Topics, drt), 1000
	if r := c.roundTrip(dr).(*kmsg.DeleteRecordsResponse); r.Topics[0].Partitions[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("DeleteRecords without Delete: code %d", r.Topics[0].Partitions[0].ErrorCode)
	}

	cp := kmsg.NewPtrCreatePartitionsRequest()
	cpt := kmsg.NewCreatePartitionsRequestTopic()
	cpt.Topic, cpt.Count = "t", 3
	cp.Topics, cp.TimeoutMillis = append(cp.Topics, cpt), 0
	if r := c.roundTrip(cp).(*kmsg.CreatePartitionsResponse); r.Topics[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("CreatePartitions without Alter: code %d", r.Topics[0].ErrorCode)
	}
	if info, _ := b.cluster.Topic("t"); len(info.Partitions) != 1 {
		t.Fatalf("refused CreatePartitions grew the topic to %d", len(info.Partitions))
	}

	// Configs: DescribeConfigs/AlterConfigs on the topic, on the cluster
	// for brokers.
	dc := kmsg.NewPtrDescribeConfigsRequest()
	dc.Version = 3
	for _, r := range []struct {
		typ  kmsg.ConfigResourceType
		name string
	}{{kmsg.ConfigResourceTypeTopic, "t"}, {kmsg.ConfigResourceTypeBroker, "1"}} {
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = r.typ, r.name
		dc.Resources = append(dc.Resources, rr)
	}
	dcr := c.roundTrip(dc).(*kmsg.DescribeConfigsResponse)
	if dcr.Resources[0].ErrorCode != kerr.TopicAuthorizationFailed.Code || len(dcr.Resources[0].Configs) != 0 {
		t.Errorf("DescribeConfigs topic without DescribeConfigs: %+v", dcr.Resources[0])
	}
	if dcr.Resources[1].ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("DescribeConfigs broker without cluster DescribeConfigs: code %d", dcr.Resources[1].ErrorCode)
	}
	grant(a, security.ResourceTopic, "t", security.OpAlterConfigs) // implies DescribeConfigs
	if dcr := c.roundTrip(dc).(*kmsg.DescribeConfigsResponse); dcr.Resources[0].ErrorCode != 0 || len(dcr.Resources[0].Configs) == 0 {
		t.Errorf("DescribeConfigs topic with AlterConfigs: %+v", dcr.Resources[0])
	}

	ia := kmsg.NewPtrIncrementalAlterConfigsRequest()
	iar := kmsg.NewIncrementalAlterConfigsRequestResource()
	iar.ResourceType, iar.ResourceName = kmsg.ConfigResourceTypeTopic, "t2"
	iar.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "retention.ms", Op: 0, Value: kmsg.StringPtr("1000")}}
	ia.Resources = append(ia.Resources, iar)
	if r := c.roundTrip(ia).(*kmsg.IncrementalAlterConfigsResponse); r.Resources[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("IncrementalAlterConfigs without AlterConfigs: code %d", r.Resources[0].ErrorCode)
	}
	ac := kmsg.NewPtrAlterConfigsRequest()
	acr := kmsg.NewAlterConfigsRequestResource()
	acr.ResourceType, acr.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
	ac.Resources = append(ac.Resources, acr)
	if r := c.roundTrip(ac).(*kmsg.AlterConfigsResponse); r.Resources[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("AlterConfigs broker without cluster AlterConfigs: code %d", r.Resources[0].ErrorCode)
	}

	// The controller's operations: cluster Alter, Describe.
	el := kmsg.NewPtrElectLeadersRequest()
	el.Version, el.TimeoutMillis = 2, 1000
	el.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	if r := c.roundTrip(el).(*kmsg.ElectLeadersResponse); r.ErrorCode != kerr.ClusterAuthorizationFailed.Code ||
		r.Topics[0].Partitions[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("ElectLeaders without Alter: %+v", r)
	}
	apr := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	apr.Topics = []kmsg.AlterPartitionAssignmentsRequestTopic{{Topic: "t", Partitions: []kmsg.AlterPartitionAssignmentsRequestTopicPartition{{Partition: 0, Replicas: []int32{1}}}}}
	if r := c.roundTrip(apr).(*kmsg.AlterPartitionAssignmentsResponse); r.Topics[0].Partitions[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("AlterPartitionReassignments without Alter: %+v", r)
	}
	lpr := kmsg.NewPtrListPartitionReassignmentsRequest()
	if r := c.roundTrip(lpr).(*kmsg.ListPartitionReassignmentsResponse); r.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("ListPartitionReassignments without Describe: code %d", r.ErrorCode)
	}
	grantCluster(a, security.OpDescribe)
	if r := c.roundTrip(lpr).(*kmsg.ListPartitionReassignmentsResponse); r.ErrorCode != 0 {
		t.Errorf("ListPartitionReassignments with Describe: code %d", r.ErrorCode)
	}

	dcl := kmsg.NewPtrDescribeClusterRequest()
	dcl.IncludeClusterAuthorizedOperations = true
	want := int32(1<<security.OpCreate | 1<<security.OpDescribe)
	if r := c.roundTrip(dcl).(*kmsg.DescribeClusterResponse); r.ClusterAuthorizedOperations != want {
		t.Errorf("DescribeCluster operations %b, want %b", r.ClusterAuthorizedOperations, want)
	}

	// DescribeLogDirs (the fakes serve no log dirs): refused before the
	// replicas are asked.
	ld := kmsg.NewPtrDescribeLogDirsRequest()
	a.SetResourceACLs(security.ResourcePattern{Type: security.ResourceCluster, Name: security.ClusterResourceName, PatternType: security.PatternLiteral}, nil, 0)
	resp, err := b.srv.handle(context.Background(), &reqContext{principal: security.Anonymous, host: "127.0.0.1"}, ld)
	if err != nil || len(resp.(*kmsg.DescribeLogDirsResponse).Dirs) != 0 {
		t.Errorf("DescribeLogDirs without Describe: %v, %+v", err, resp)
	}
}

func TestAuthzInterBrokerKeys(t *testing.T) {
	a := newDenyAllAuthorizer()
	b := startBroker(t, withAuthorizer(a))
	c := b.dial(t)
	lai := kmsg.NewPtrLeaderAndISRRequest()
	lai.Version, lai.ControllerID, lai.ControllerEpoch, lai.BrokerEpoch = 2, 1, 1000, -1
	um := kmsg.NewPtrUpdateMetadataRequest()
	um.Version, um.ControllerID, um.ControllerEpoch, um.BrokerEpoch = 5, 1, 1000, -1
	sr := kmsg.NewPtrStopReplicaRequest()
	sr.Version, sr.ControllerID, sr.ControllerEpoch, sr.BrokerEpoch = 1, 1, 1000, -1
	cs := kmsg.NewPtrControlledShutdownRequest()
	cs.Version, cs.BrokerID, cs.BrokerEpoch = 2, 2, -1

	codes := func() []int16 {
		return []int16{
			c.roundTrip(lai).(*kmsg.LeaderAndISRResponse).ErrorCode,
			c.roundTrip(um).(*kmsg.UpdateMetadataResponse).ErrorCode,
			c.roundTrip(sr).(*kmsg.StopReplicaResponse).ErrorCode,
			c.roundTrip(cs).(*kmsg.ControlledShutdownResponse).ErrorCode,
		}
	}
	for i, code := range codes() {
		if code != kerr.ClusterAuthorizationFailed.Code {
			t.Errorf("inter-broker request %d without ClusterAction: code %d", i, code)
		}
	}
	b.control.mu.Lock()
	n := len(b.control.leaderAndIsr) + len(b.control.updateMetadata) + len(b.control.stopReplica) + len(b.control.shutdowns)
	b.control.mu.Unlock()
	if n != 0 {
		t.Fatalf("refused controller requests reached the control plane (%d calls)", n)
	}
	// The invented controller epoch of a refused request is not adopted.
	if b.srv.controllerEpoch != 0 {
		t.Fatalf("refused request adopted controller epoch %d", b.srv.controllerEpoch)
	}
	grantCluster(a, security.OpClusterAction)
	for i, code := range codes() {
		if code != 0 {
			t.Errorf("inter-broker request %d with ClusterAction: code %d", i, code)
		}
	}
}

func TestAuthzTransactionKeys(t *testing.T) {
	a := newDenyAllAuthorizer()
	b := startBroker(t, withAuthorizer(a))
	createTopic(t, b, "t", 1)
	c := b.dial(t)

	apt := func(version int16) *kmsg.AddPartitionsToTxnResponse {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.Version = version
		if version < 4 {
			req.TransactionalID, req.ProducerID = "tx", 1
			req.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "t", Partitions: []int32{0}}, {Topic: "__consumer_offsets", Partitions: []int32{0}}}
		} else {
			tr := kmsg.NewAddPartitionsToTxnRequestTransaction()
			tr.TransactionalID, tr.ProducerID, tr.VerifyOnly = "tx", 1, true
			tr.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: "t", Partitions: []int32{0}}}
			req.Transactions = append(req.Transactions, tr)
		}
		return c.roundTrip(req).(*kmsg.AddPartitionsToTxnResponse)
	}
	if r := apt(3); r.Topics[0].Partitions[0].ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Errorf("AddPartitionsToTxn without Write on the id: %+v", r.Topics)
	}
	grant(a, security.ResourceTransactionalID, "tx", security.OpWrite)
	r := apt(3)
	if r.Topics[0].Partitions[0].ErrorCode != kerr.TopicAuthorizationFailed.Code || r.Topics[1].Partitions[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("AddPartitionsToTxn without topic Write (and an internal topic): %+v", r.Topics)
	}
	grant(a, security.ResourceTopic, "t", security.OpWrite)
	if r := apt(3); r.Topics[0].Partitions[0].ErrorCode != kerr.OperationNotAttempted.Code || r.Topics[1].Partitions[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("AddPartitionsToTxn with an internal topic: %+v", r.Topics)
	}
	if r := apt(4); r.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("AddPartitionsToTxn v4 without ClusterAction: code %d", r.ErrorCode)
	}

	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.Version, ao.TransactionalID, ao.Group = 3, "tx2", "g"
	if r := c.roundTrip(ao).(*kmsg.AddOffsetsToTxnResponse); r.ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Errorf("AddOffsetsToTxn without Write on the id: code %d", r.ErrorCode)
	}
	ao.TransactionalID = "tx"
	if r := c.roundTrip(ao).(*kmsg.AddOffsetsToTxnResponse); r.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("AddOffsetsToTxn without group Read: code %d", r.ErrorCode)
	}
	et := kmsg.NewPtrEndTxnRequest()
	et.Version, et.TransactionalID = 3, "tx2"
	if r := c.roundTrip(et).(*kmsg.EndTxnResponse); r.ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Errorf("EndTxn without Write on the id: code %d", r.ErrorCode)
	}

	toc := kmsg.NewPtrTxnOffsetCommitRequest()
	toc.Version, toc.TransactionalID, toc.Group = 3, "tx", "g"
	toc.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
	if r := c.roundTrip(toc).(*kmsg.TxnOffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("TxnOffsetCommit without group Read: %+v", r.Topics)
	}
	grant(a, security.ResourceGroup, "g", security.OpRead)
	if r := c.roundTrip(toc).(*kmsg.TxnOffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("TxnOffsetCommit without topic Read: %+v", r.Topics)
	}

	wm := kmsg.NewPtrWriteTxnMarkersRequest()
	wm.Markers = []kmsg.WriteTxnMarkersRequestMarker{{ProducerID: 1, Committed: true,
		Topics: []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: "t", Partitions: []int32{0}}}}}
	if r := c.roundTrip(wm).(*kmsg.WriteTxnMarkersResponse); r.Markers[0].Topics[0].Partitions[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("WriteTxnMarkers without ClusterAction: %+v", r.Markers)
	}
	if calls := b.txnReplicas.markerCalls(); len(calls) != 0 {
		t.Fatalf("refused WriteTxnMarkers wrote markers: %v", calls)
	}

	dp := kmsg.NewPtrDescribeProducersRequest()
	dp.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	if r := c.roundTrip(dp).(*kmsg.DescribeProducersResponse); r.Topics[0].Partitions[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("DescribeProducers without Read: %+v", r.Topics)
	}
	dt := kmsg.NewPtrDescribeTransactionsRequest()
	dt.TransactionalIDs = []string{"hidden"}
	if r := c.roundTrip(dt).(*kmsg.DescribeTransactionsResponse); r.TransactionStates[0].ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Errorf("DescribeTransactions without Describe: %+v", r.TransactionStates)
	}
}

// TestAuthzDenialAuditLog: a denial logs one Info line naming the
// principal, operation, resource and client address; a quiet check
// (Metadata for all topics) logs none.
func TestAuthzDenialAuditLog(t *testing.T) {
	var buf syncBuffer
	a := newDenyAllAuthorizer()
	b := startBroker(t, withAuthorizer(a), func(c *Config) { c.Log = zerolog.New(&buf).Level(zerolog.InfoLevel) })
	createTopic(t, b, "secret", 1)
	c := b.dial(t)
	all := kmsg.NewPtrMetadataRequest()
	all.Version = 9
	c.roundTrip(all)
	if strings.Contains(buf.String(), "authorization denied") {
		t.Fatalf("all-topics Metadata logged a denial: %s", buf.String())
	}
	c.roundTrip(produceRequest(7, 1, 1000, "secret", 0, makeBatch(0, "a")))
	var found bool
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil || m["message"] != "authorization denied" {
			continue
		}
		found = true
		if m["level"] != "info" || m["principal"] != "User:ANONYMOUS" || m["operation"] != "Write" ||
			m["resource_type"] != "Topic" || m["resource"] != "secret" || m["remote_addr"] == nil || m["host"] != "127.0.0.1" {
			t.Errorf("audit line %s", line)
		}
	}
	if !found {
		t.Fatalf("no audit line for a refused produce: %s", buf.String())
	}
}

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
