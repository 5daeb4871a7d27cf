package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
)

// Kafka's AdminUtilsTest.testReplicaAssignment: 5 brokers, 10 partitions,
// RF 3, start index 0 and shift 0.
func TestAssignReplicasMatchesKafka(t *testing.T) {
	brokers := []cluster.BrokerRack{{ID: 0}, {ID: 1}, {ID: 2}, {ID: 3}, {ID: 4}}
	got, err := assignReplicas(brokers, 0, 10, 3, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32][]int32{
		0: {0, 1, 2}, 1: {1, 2, 3}, 2: {2, 3, 4}, 3: {3, 4, 0}, 4: {4, 0, 1},
		5: {0, 2, 3}, 6: {1, 3, 4}, 7: {2, 4, 0}, 8: {3, 0, 1}, 9: {4, 1, 2},
	}
	for p, w := range want {
		if !slices.Equal(got[p], w) {
			t.Errorf("partition %d: %v, want %v", p, got[p], w)
		}
	}
	if _, err := assignReplicas(brokers[:2], 0, 1, 3, 0, 0); err == nil {
		t.Error("RF 3 on 2 brokers accepted")
	}
}

func TestProposeAssignmentIsSeededAndKeepsShape(t *testing.T) {
	current := assignment{}
	for p := range int32(6) {
		current[tp("foo", p)] = []int32{0, 1, 2}
	}
	current[tp("bar", 0)] = []int32{1, 2}
	brokers := []cluster.BrokerRack{{ID: 0}, {ID: 1}, {ID: 2}, {ID: 3}, {ID: 4}}
	a, err := proposeAssignment(current, brokers, rand.New(rand.NewPCG(7, 7)))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := proposeAssignment(current, brokers, rand.New(rand.NewPCG(7, 7)))
	if formatPlan(a) != formatPlan(b) {
		t.Fatalf("same seed, different plans:\n%s\n%s", formatPlan(a), formatPlan(b))
	}
	if len(a) != len(current) {
		t.Fatalf("proposed %d partitions, want %d", len(a), len(current))
	}
	for k, r := range a {
		if len(r) != len(current[k]) || len(setOf(r)) != len(r) {
			t.Errorf("%s: replicas %v, want %d distinct", k, r, len(current[k]))
		}
	}
	// Every broker leads at least one of foo's 6 partitions on 5 brokers.
	leaders := map[int32]bool{}
	for p := range int32(6) {
		leaders[a[tp("foo", p)][0]] = true
	}
	if len(leaders) != 5 {
		t.Errorf("foo's leaders %v do not spread over 5 brokers", leaders)
	}
}

// --generate on 6 brokers in 3 racks (through cluster.AssignReplicas) puts
// every partition's 3 replicas on 3 racks.
func TestProposeAssignmentIsRackAware(t *testing.T) {
	rack := func(s string) *string { return &s }
	reg := kadm.BrokerDetails{
		{NodeID: 0, Rack: rack("a")}, {NodeID: 1, Rack: rack("a")}, {NodeID: 2, Rack: rack("b")},
		{NodeID: 3, Rack: rack("b")}, {NodeID: 4, Rack: rack("c")}, {NodeID: 5, Rack: rack("c")},
	}
	brokers, err := brokerRacks(reg, []int32{0, 1, 2, 3, 4, 5}, true)
	if err != nil {
		t.Fatal(err)
	}
	current := assignment{}
	for p := range int32(12) {
		current[tp("foo", p)] = []int32{0, 1, 2}
	}
	for seed := range uint64(5) {
		a, err := proposeAssignment(current, brokers, rand.New(rand.NewPCG(seed, seed)))
		if err != nil {
			t.Fatal(err)
		}
		for k, r := range a {
			racks := map[string]bool{}
			for _, id := range r {
				racks[*reg[id].Rack] = true
			}
			if len(racks) != 3 {
				t.Errorf("seed %d %s: replicas %v on racks %v, want 3 racks", seed, k, r, racks)
			}
		}
	}
}

func TestBrokerRacks(t *testing.T) {
	rack := func(s string) *string { return &s }
	reg := kadm.BrokerDetails{{NodeID: 2, Rack: rack("a")}, {NodeID: 1, Rack: rack("b")}, {NodeID: 3}}
	if _, err := brokerRacks(reg, []int32{1, 2, 3}, true); err == nil || !strings.Contains(err.Error(), "Not all brokers have rack information. Add --disable-rack-aware") {
		t.Fatalf("mixed racks: %v", err)
	}
	got, err := brokerRacks(reg, []int32{1, 2, 3, 9}, false)
	if err != nil || fmt.Sprint(got) != "[{1 } {2 } {3 }]" {
		t.Fatalf("without racks: %v, %v", got, err)
	}
	got, err = brokerRacks(reg, []int32{1, 2}, true)
	if err != nil || fmt.Sprint(got) != "[{1 b} {2 a}]" {
		t.Fatalf("with racks: %v, %v", got, err)
	}
}

// generate prints Kafka's two sections; the proposal is valid input for
// --execute and the same --seed gives the same output.
func TestGenerateCommand(t *testing.T) {
	fc := newFakeCluster(t, "foo")
	topics := writeFile(t, "topics.json", `{"topics":[{"topic":"foo"}],"version":1}`)
	args := []string{"reassign-partitions", "--bootstrap-server", fc.bootstrap, "--generate",
		"--topics-to-move-json-file", topics, "--broker-list", "0,1,2", "--seed", "42"}
	code, out, errOut := runAdmin(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(out, "\n")
	if len(lines) != 6 || lines[0] != "Current partition replica assignment" || lines[2] != "" ||
		lines[3] != "Proposed partition reassignment configuration" || lines[5] != "" {
		t.Fatalf("output layout:\n%s", out)
	}
	cur, err := parseExecutePlan([]byte(lines[1]))
	if err != nil || len(cur) != 3 {
		t.Fatalf("current: %v %v", cur, err)
	}
	prop, err := parseExecutePlan([]byte(lines[4]))
	if err != nil || len(prop) != 3 {
		t.Fatalf("proposed: %v %v", prop, err)
	}
	for k, r := range prop {
		if len(r) != 3 {
			t.Errorf("%s: %v", k, r)
		}
	}
	_, again, _ := runAdmin(t, args...)
	if again != out {
		t.Fatalf("same seed, different output:\n%s\n%s", out, again)
	}

	missing := writeFile(t, "missing.json", `{"topics":[{"topic":"nope"}],"version":1}`)
	code, _, errOut = runAdmin(t, "reassign-partitions", "--bootstrap-server", fc.bootstrap, "--generate",
		"--topics-to-move-json-file", missing, "--broker-list", "0,1,2")
	if code != 1 || !strings.Contains(errOut, "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Fatalf("unknown topic: exit %d, %s", code, errOut)
	}
}

func TestReassignArgumentValidation(t *testing.T) {
	f := writeFile(t, "plan.json", `{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1]}]}`)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--bootstrap-server", "x:1"}, "Command must include exactly one action: --generate, --execute, --verify, --cancel, --list"},
		{[]string{"--bootstrap-server", "x:1", "--verify", "--execute", "--reassignment-json-file", f}, "exactly one action"},
		{[]string{"--bootstrap-server", "x:1", "--execute"}, "Missing required argument(s): --reassignment-json-file"},
		{[]string{"--bootstrap-server", "x:1", "--generate", "--broker-list", "1"}, "--topics-to-move-json-file"},
		{[]string{"--bootstrap-server", "x:1", "--verify", "--reassignment-json-file", f, "--throttle", "10"}, `Option "--throttle" can't be used with action "--verify"`},
		{[]string{"--bootstrap-server", "x:1", "--list", "--preserve-throttles"}, `Option "--preserve-throttles" can't be used with action "--list"`},
		{[]string{"--bootstrap-server", "x:1", "--execute", "--reassignment-json-file", f, "--throttle", "-5"}, "--throttle must be"},
		{[]string{"--list"}, "--bootstrap-server"},
		{[]string{"--bootstrap-server", "x:1", "--execute", "--reassignment-json-file", "/nonexistent/plan.json"}, "no such file"},
		{[]string{"--nope"}, "flag provided but not defined: -nope"},
	}
	for _, c := range cases {
		code, _, errOut := runAdmin(t, append([]string{"reassign-partitions"}, c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errOut, c.want)
		}
	}
	code, out, _ := runAdmin(t, "reassign-partitions", "--help")
	if code != 0 || !strings.Contains(out, "--reassignment-json-file") || !strings.Contains(out, "kafka-reassign-partitions.sh") {
		t.Errorf("--help: exit %d\n%s", code, out)
	}
}

// currentOf reads the fake cluster's replicas of foo through the tool's
// own code path, so plans in tests can start from what is there.
func currentOf(t *testing.T, fc *fakeCluster) assignment {
	t.Helper()
	a, err := connect(target{bootstrap: fc.bootstrap})
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	cur, _, err := a.topicAssignment(t.Context(), []string{"foo"})
	if err != nil {
		t.Fatal(err)
	}
	return cur
}

// --execute --throttle prints the rollback plan, sets Kafka's four throttle
// keys through IncrementalAlterConfigs and submits the plan.
func TestExecuteWithThrottle(t *testing.T) {
	fc := newFakeCluster(t, "foo")
	cur := currentOf(t, fc)
	// Move foo-0 from its 3 replicas to a reordering that drops none but
	// makes a new leader, and foo-1 unchanged: bookkeeping as Kafka's.
	plan := assignment{tp("foo", 0): {cur[tp("foo", 0)][1], cur[tp("foo", 0)][2], cur[tp("foo", 0)][0]}, tp("foo", 1): cur[tp("foo", 1)]}
	fc.answer(44, okAlterConfigs)
	fc.record(45)
	f := writeFile(t, "plan.json", formatPlan(plan))
	code, out, errOut := runAdmin(t, "reassign-partitions", "--bootstrap-server", fc.bootstrap, "--execute", "--reassignment-json-file", f, "--throttle", "50000")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	rollback := formatPlan(assignment{tp("foo", 0): cur[tp("foo", 0)], tp("foo", 1): cur[tp("foo", 1)]})
	want := "Current partition replica assignment\n\n" + rollback + "\n\n" +
		"Save this to use as the --reassignment-json-file option during rollback\n" +
		verifyPeriodicallyMessage + "\n" +
		"The inter-broker throttle limit was set to 50000 B/s\n" +
		"Successfully started partition reassignments for foo-0,foo-1\n"
	if out != want {
		t.Fatalf("output:\n%s\nwant:\n%s", out, want)
	}
	moves, _ := proposedMoves(nil, plan, cur)
	wantOps := []string{
		"BROKER 0 SET follower.replication.throttled.rate=50000",
		"BROKER 0 SET leader.replication.throttled.rate=50000",
		"BROKER 1 SET follower.replication.throttled.rate=50000",
		"BROKER 1 SET leader.replication.throttled.rate=50000",
		"BROKER 2 SET follower.replication.throttled.rate=50000",
		"BROKER 2 SET leader.replication.throttled.rate=50000",
		"TOPIC foo SET follower.replication.throttled.replicas=",
		"TOPIC foo SET leader.replication.throttled.replicas=" + leaderThrottles(moves)["foo"],
	}
	if got := alterOps(fc.requests(44)); !slices.Equal(got, wantOps) {
		t.Fatalf("config ops:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantOps, "\n"))
	}
	if got := leaderThrottles(moves)["foo"]; !strings.HasPrefix(got, "0:") || strings.Count(got, ",") != 5 {
		t.Fatalf("leader throttle %q should name 3 replicas of each of 2 partitions", got)
	}
	reqs := fc.requests(45)
	if len(reqs) != 1 || len(reqs[0].(*kmsg.AlterPartitionAssignmentsRequest).Topics[0].Partitions) != 2 {
		t.Fatalf("AlterPartitionReassignments requests: %+v", reqs)
	}
}

func TestExecuteRefusals(t *testing.T) {
	fc := newFakeCluster(t, "foo")
	run := func(plan string, extra ...string) (int, string) {
		f := writeFile(t, "plan.json", plan)
		code, _, errOut := runAdmin(t, append([]string{"reassign-partitions", "--bootstrap-server", fc.bootstrap, "--execute", "--reassignment-json-file", f}, extra...)...)
		return code, errOut
	}
	if code, errOut := run(`{"partitions":[{"topic":"foo","partition":0,"replicas":[0,9]}]}`); code != 1 || !strings.Contains(errOut, "Unknown broker id 9") {
		t.Errorf("unknown broker: exit %d %s", code, errOut)
	}
	if code, errOut := run(`{"partitions":[{"topic":"nope","partition":0,"replicas":[0]},{"topic":"foo","partition":10,"replicas":[0]},{"topic":"foo","partition":7,"replicas":[0]}]}`); code != 1 ||
		!strings.Contains(errOut, "Unable to find partition: foo-7, foo-10, nope-0") {
		t.Errorf("unknown partition: exit %d %s", code, errOut)
	}
	// The broker refuses one partition: its error name is shown.
	fc.answer(45, func(req kmsg.Request) kmsg.Response {
		r := req.(*kmsg.AlterPartitionAssignmentsRequest)
		resp := r.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
		for _, rt := range r.Topics {
			st := kmsg.NewAlterPartitionAssignmentsResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.InvalidReplicaAssignment.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	})
	if code, errOut := run(`{"partitions":[{"topic":"foo","partition":0,"replicas":[0]}]}`); code != 1 ||
		!strings.Contains(errOut, "Error reassigning partition(s):\nfoo-0: INVALID_REPLICA_ASSIGNMENT") {
		t.Errorf("refused: exit %d %s", code, errOut)
	}
	// A reassignment in progress blocks --execute without --additional.
	fc.answer(46, listAnswer(map[string]reassignment{"foo-1": {Replicas: []int32{0, 1, 2}, Adding: []int32{2}}}))
	if code, errOut := run(`{"partitions":[{"topic":"foo","partition":0,"replicas":[0]}]}`); code != 1 || !strings.Contains(errOut, cannotExecuteMessage) {
		t.Errorf("ongoing: exit %d %s", code, errOut)
	}
}

// listAnswer answers ListPartitionReassignments with the given in-progress
// partitions ("topic-p" keys), filtered by the request's topics.
func listAnswer(ongoing map[string]reassignment) func(kmsg.Request) kmsg.Response {
	return func(req kmsg.Request) kmsg.Response {
		r := req.(*kmsg.ListPartitionReassignmentsRequest)
		resp := r.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
		byTopic := map[string]*kmsg.ListPartitionReassignmentsResponseTopic{}
		for _, k := range slices.Sorted(mapsKeys(ongoing)) {
			i := strings.LastIndex(k, "-")
			topic := k[:i]
			var p int32
			fmt.Sscan(k[i+1:], &p)
			if r.Topics != nil {
				want := false
				for _, rt := range r.Topics {
					want = want || rt.Topic == topic && slices.Contains(rt.Partitions, p)
				}
				if !want {
					continue
				}
			}
			st := byTopic[topic]
			if st == nil {
				resp.Topics = append(resp.Topics, kmsg.NewListPartitionReassignmentsResponseTopic())
				st = &resp.Topics[len(resp.Topics)-1]
				st.Topic = topic
				byTopic[topic] = st
			}
			sp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
			sp.Partition = p
			sp.Replicas, sp.AddingReplicas, sp.RemovingReplicas = ongoing[k].Replicas, ongoing[k].Adding, ongoing[k].Removing
			st.Partitions = append(st.Partitions, sp)
		}
		return resp
	}
}

// --verify while a move runs reports it and leaves the throttles; once
// nothing moves it reports completion and deletes the throttles on every
// broker and on the plan's topics, unless --preserve-throttles.
func TestVerifyClearsThrottlesOnlyWhenDone(t *testing.T) {
	fc := newFakeCluster(t, "foo")
	cur := currentOf(t, fc)
	target := []int32{cur[tp("foo", 1)][2], cur[tp("foo", 1)][0]}
	plan := writeFile(t, "plan.json", formatPlan(assignment{tp("foo", 0): cur[tp("foo", 0)], tp("foo", 1): target}))
	fc.answer(44, okAlterConfigs)
	verify := func(extra ...string) (int, string) {
		code, out, errOut := runAdmin(t, append([]string{"reassign-partitions", "--bootstrap-server", fc.bootstrap, "--verify", "--reassignment-json-file", plan}, extra...)...)
		if code != 0 {
			t.Fatalf("verify exit %d: %s", code, errOut)
		}
		return code, out
	}

	fc.answer(46, listAnswer(map[string]reassignment{"foo-1": {Replicas: cur[tp("foo", 1)], Removing: []int32{cur[tp("foo", 1)][1]}}}))
	_, out := verify()
	want := "Status of partition reassignment:\n" +
		"Reassignment of partition foo-0 is completed.\n" +
		"Reassignment of partition foo-1 is still in progress.\n" +
		"\n" // Kafka's empty log-dir section
	if out != want {
		t.Fatalf("in progress:\n%s\nwant:\n%s", out, want)
	}
	if n := len(fc.requests(44)); n != 0 {
		t.Fatalf("%d IncrementalAlterConfigs while a move runs", n)
	}

	fc.answer(46, listAnswer(nil))
	_, out = verify("--preserve-throttles")
	if n := len(fc.requests(44)); n != 0 || strings.Contains(out, "Clearing") {
		t.Fatalf("--preserve-throttles touched throttles (%d requests):\n%s", n, out)
	}

	_, out = verify()
	// kfake did not move foo-1, so its replicas are not the target.
	wantTail := fmt.Sprintf("There is no active reassignment of partition foo-1, but replica set is %s rather than %s.\n\n"+
		"Clearing broker-level throttles on brokers 0,1,2\n"+
		"Clearing topic-level throttles on topic foo\n", joinInts(cur[tp("foo", 1)], ","), joinInts(target, ","))
	if !strings.HasSuffix(out, wantTail) {
		t.Fatalf("done:\n%s\nwant suffix:\n%s", out, wantTail)
	}
	wantOps := []string{
		"BROKER 0 DELETE follower.replication.throttled.rate=<nil>",
		"BROKER 0 DELETE leader.replication.throttled.rate=<nil>",
		"BROKER 1 DELETE follower.replication.throttled.rate=<nil>",
		"BROKER 1 DELETE leader.replication.throttled.rate=<nil>",
		"BROKER 2 DELETE follower.replication.throttled.rate=<nil>",
		"BROKER 2 DELETE leader.replication.throttled.rate=<nil>",
		"TOPIC foo DELETE follower.replication.throttled.replicas=<nil>",
		"TOPIC foo DELETE leader.replication.throttled.replicas=<nil>",
	}
	if got := alterOps(fc.requests(44)); !slices.Equal(got, wantOps) {
		t.Fatalf("config ops:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantOps, "\n"))
	}
}

func TestCancelAndList(t *testing.T) {
	fc := newFakeCluster(t, "foo")
	plan := writeFile(t, "plan.json", `{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[0,1]},{"topic":"foo","partition":2,"replicas":[0,1]}]}`)
	fc.answer(44, okAlterConfigs)
	fc.answer(46, listAnswer(map[string]reassignment{
		"foo-0": {Replicas: []int32{0, 1, 2, 3}, Adding: []int32{3}, Removing: []int32{2}},
		"foo-1": {Replicas: []int32{0, 1, 2}, Adding: []int32{2}},
	}))
	fc.answer(45, func(req kmsg.Request) kmsg.Response {
		r := req.(*kmsg.AlterPartitionAssignmentsRequest)
		resp := r.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
		for _, rt := range r.Topics {
			st := kmsg.NewAlterPartitionAssignmentsResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
				sp.Partition = rp.Partition
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	})

	code, out, errOut := runAdmin(t, "reassign-partitions", "--bootstrap-server", fc.bootstrap, "--list")
	want := "Current partition reassignments:\n" +
		"foo-0: replicas: 0,1,2,3. adding: 3. removing: 2.\n" +
		"foo-1: replicas: 0,1,2. adding: 2.\n"
	if code != 0 || out != want {
		t.Fatalf("list: exit %d %s\n%s\nwant:\n%s", code, errOut, out, want)
	}

	code, out, errOut = runAdmin(t, "reassign-partitions", "--bootstrap-server", fc.bootstrap, "--cancel", "--reassignment-json-file", plan)
	if code != 0 || !strings.HasPrefix(out, "Successfully cancelled partition reassignment for: foo-0\n"+
		"None of the specified partition moves are active.\n") ||
		!strings.Contains(out, "Clearing topic-level throttles on topic foo") {
		t.Fatalf("cancel: exit %d %s\n%s", code, errOut, out)
	}
	reqs := fc.requests(45)
	if len(reqs) != 1 {
		t.Fatalf("%d AlterPartitionReassignments", len(reqs))
	}
	ps := reqs[0].(*kmsg.AlterPartitionAssignmentsRequest).Topics[0].Partitions
	if len(ps) != 1 || ps[0].Partition != 0 || ps[0].Replicas != nil {
		t.Fatalf("cancel request %+v, want foo-0 with null replicas", ps)
	}

	// Nothing to cancel: Kafka's two lines.
	fc.answer(46, listAnswer(nil))
	code, out, errOut = runAdmin(t, "reassign-partitions", "--bootstrap-server", fc.bootstrap, "--cancel", "--reassignment-json-file", plan, "--preserve-throttles")
	if want := "None of the specified partition reassignments are active.\nNone of the specified partition moves are active.\n"; code != 0 || out != want {
		t.Fatalf("cancel with nothing active: exit %d %s\n%q\nwant %q", code, errOut, out, want)
	}
	if len(fc.requests(45)) != 1 {
		t.Fatalf("%d AlterPartitionReassignments after cancelling nothing", len(fc.requests(45)))
	}

	if got := formatReassignments(nil); got != "No partition reassignments found." {
		t.Fatalf("empty list: %q", got)
	}
}

// --timeout is accepted with --execute and --cancel, as Kafka's tool does,
// and bounds their requests: the TimeoutMillis they carry and the time the
// command waits for an answer.
func TestReassignTimeout(t *testing.T) {
	fc := newFakeCluster(t, "foo")
	plan := writeFile(t, "plan.json", `{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[0,1]}]}`)
	fc.answer(46, listAnswer(nil))
	code, _, errOut := runAdmin(t, "reassign-partitions", "--bootstrap-server", fc.bootstrap, "--cancel", "--reassignment-json-file", plan,
		"--preserve-throttles", "--timeout", "4321")
	if code != 0 {
		t.Fatalf("cancel --timeout: exit %d %s", code, errOut)
	}
	reqs := fc.requests(46)
	if len(reqs) != 1 || reqs[0].(*kmsg.ListPartitionReassignmentsRequest).TimeoutMillis != 4321 {
		t.Fatalf("ListPartitionReassignments with --timeout 4321: %+v", reqs)
	}

	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	fc.answer(45, func(req kmsg.Request) kmsg.Response {
		<-release // never answers while the command waits
		return req.(*kmsg.AlterPartitionAssignmentsRequest).ResponseKind()
	})
	start := time.Now()
	code, _, errOut = runAdmin(t, "reassign-partitions", "--bootstrap-server", fc.bootstrap, "--execute", "--reassignment-json-file", plan, "--timeout", "500")
	if took := time.Since(start); code != 1 || took > 5*time.Second || !strings.Contains(errOut, "deadline exceeded") {
		t.Fatalf("execute --timeout 500 against a cluster that does not answer: exit %d after %v: %s", code, took, errOut)
	}
	if reqs := fc.requests(45); len(reqs) == 0 || reqs[0].(*kmsg.AlterPartitionAssignmentsRequest).TimeoutMillis != 500 {
		t.Fatalf("AlterPartitionReassignments with --timeout 500: %+v", reqs)
	}

	for _, args := range [][]string{
		{"--verify", "--reassignment-json-file", plan, "--timeout", "10"},
		{"--list", "--timeout", "10"},
		{"--execute", "--reassignment-json-file", plan, "--timeout", "0"},
	} {
		code, _, errOut := runAdmin(t, append([]string{"reassign-partitions", "--bootstrap-server", fc.bootstrap}, args...)...)
		if code != 2 || !strings.Contains(errOut, "timeout") {
			t.Errorf("%v: exit %d %s, want a usage error", args, code, errOut)
		}
	}
}
