package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// hangingTxn leaves transactional id "hang" with an open transaction on
// txt partition 0 that starts at offset 2 (after a committed record at 0
// and its marker at 1), and returns its producer id and epoch.
func hangingTxn(t *testing.T, fc *fakeCluster) (int64, int16) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(fc.bootstrap, ",")...), kgo.TransactionalID("hang"),
		kgo.DefaultProduceTopic("txt"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	// Not closed: closing would abort the open transaction.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, commit := range []bool{true, false} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if commit {
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				t.Fatal(err)
			}
		}
	}
	d, err := kadm.NewClient(cl).DescribeTransactions(ctx, "hang")
	if err != nil || d["hang"].Err != nil {
		t.Fatalf("describe: %v %v", err, d["hang"].Err)
	}
	return d["hang"].ProducerID, d["hang"].ProducerEpoch
}

// lso returns txt partition 0's last stable offset and HW.
func lso(t *testing.T, fc *fakeCluster) (int64, int64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(fc.bootstrap, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err1 := adm.ListCommittedOffsets(ctx, "txt")
	h, err2 := adm.ListEndOffsets(ctx, "txt")
	if err1 != nil || err2 != nil {
		t.Fatalf("list offsets: %v %v", err1, err2)
	}
	lo, _ := l.Lookup("txt", 0)
	ho, _ := h.Lookup("txt", 0)
	return lo.Offset, ho.Offset
}

// TestTransactionsAgainstKfake drives every transactions command against
// kfake, which serves ListTransactions, DescribeTransactions,
// DescribeProducers and WriteTxnMarkers: a hanging transaction is listed,
// described, found by its start offset and aborted, which moves the LSO
// to the HW.
func TestTransactionsAgainstKfake(t *testing.T) {
	fc := newFakeCluster(t, "txt")
	pid, epoch := hangingTxn(t, fc)
	defer func(f func() int64) { nowMillis = f }(nowMillis)
	nowMillis = func() int64 { return time.Now().UnixMilli() }

	code, out, errOut := runAdmin(t, "transactions", "list", "--bootstrap-server", fc.bootstrap)
	if code != 0 {
		t.Fatalf("list: %d %s", code, errOut)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 2 || strings.Fields(lines[0])[0] != "TransactionalId" {
		t.Fatalf("list:\n%s", out)
	}
	if f := strings.Fields(lines[1]); len(f) != 4 || f[0] != "hang" || f[2] != i64(pid) || f[3] != "Ongoing" {
		t.Errorf("list row %q: want hang, its coordinator, %d, Ongoing", lines[1], pid)
	}
	if !strings.HasSuffix(lines[0], "\t") || !strings.HasPrefix(lines[0], "TransactionalId\tCoordinator\tProducerId") ||
		len(strings.Split(lines[0], "\t")[2]) != len(i64(pid)) {
		t.Errorf("list header %q: want Kafka's tab-separated, padded columns", lines[0])
	}
	// Kafka's argument order works too, and the broker's duration filter
	// (ListTransactions v1) leaves out a transaction younger than an hour.
	code, out, errOut = runAdmin(t, "transactions", "--bootstrap-server", fc.bootstrap, "list", "--duration-filter", "3600000")
	if code != 0 || strings.Contains(out, "hang") {
		t.Errorf("list --duration-filter 3600000: %d\n%s%s", code, out, errOut)
	}

	code, out, errOut = runAdmin(t, "transactions", "describe", "--bootstrap-server", fc.bootstrap, "--transactional-id", "hang")
	if code != 0 {
		t.Fatalf("describe: %d %s", code, errOut)
	}
	lines = strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "CoordinatorId\tTransactionalId") {
		t.Fatalf("describe:\n%s", out)
	}
	f := strings.Fields(lines[1])
	if len(f) != 9 || f[1] != "hang" || f[2] != i64(pid) || f[3] != i64(int64(epoch)) || f[4] != "Ongoing" || f[6] == "None" || f[8] != "txt-0" {
		t.Errorf("describe row %q", lines[1])
	}

	code, out, errOut = runAdmin(t, "transactions", "describe-producers", "--bootstrap-server", fc.bootstrap, "--topic", "txt", "--partition", "0")
	if code != 0 {
		t.Fatalf("describe-producers: %d %s", code, errOut)
	}
	lines = strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "ProducerId ProducerEpoch LatestCoordinatorEpoch LastSequence LastTimestamp CurrentTransactionStartOffset" {
		t.Fatalf("describe-producers:\n%s", out)
	}
	if f := strings.Fields(lines[1]); len(f) != 6 || f[0] != i64(pid) || f[5] != "2" {
		t.Errorf("describe-producers row %q: want producer %d with its transaction starting at 2", lines[1], pid)
	}

	if l, h := lso(t, fc); l != 2 || h != 3 {
		t.Fatalf("before abort: LSO %d HW %d, want 2 and 3", l, h)
	}
	code, _, errOut = runAdmin(t, "transactions", "abort", "--bootstrap-server", fc.bootstrap, "--topic", "txt", "--partition", "0", "--start-offset", "1")
	if code != 1 || !strings.Contains(errOut, "Could not find any open transactions starting at offset 1 on partition txt-0") {
		t.Errorf("abort at the wrong offset: %d %s", code, errOut)
	}
	fc.record(keyWriteTxnMarkers)
	code, out, errOut = runAdmin(t, "transactions", "abort", "--bootstrap-server", fc.bootstrap, "--topic", "txt", "--partition", "0", "--start-offset", "2")
	if code != 0 {
		t.Fatalf("abort: %d %s%s", code, out, errOut)
	}
	reqs := fc.requests(keyWriteTxnMarkers)
	if len(reqs) != 1 {
		t.Fatalf("%d WriteTxnMarkers requests, want 1", len(reqs))
	}
	ms := reqs[0].(*kmsg.WriteTxnMarkersRequest).Markers
	if len(ms) != 1 || ms[0].ProducerID != pid || ms[0].ProducerEpoch != epoch || ms[0].Committed || ms[0].CoordinatorEpoch != 0 ||
		len(ms[0].Topics) != 1 || ms[0].Topics[0].Topic != "txt" || len(ms[0].Topics[0].Partitions) != 1 || ms[0].Topics[0].Partitions[0] != 0 {
		t.Errorf("marker %+v: want one ABORT of producer %d epoch %d, coordinator epoch 0, on txt-0", ms, pid, epoch)
	}
	if l, h := lso(t, fc); l != h || h != 4 {
		t.Errorf("after abort: LSO %d HW %d, want both 4 (the marker at 3)", l, h)
	}

	// The older brokers' form: the producer named in full; a coordinator
	// epoch of -1 (none seen) is sent as 0.
	code, _, errOut = runAdmin(t, "transactions", "abort", "--bootstrap-server", fc.bootstrap, "--topic", "txt", "--partition", "1",
		"--producer-id", i64(pid), "--producer-epoch", i64(int64(epoch)), "--coordinator-epoch", "-1")
	if code != 0 {
		t.Fatalf("abort by producer id: %d %s", code, errOut)
	}
	if reqs := fc.requests(keyWriteTxnMarkers); len(reqs) != 2 || reqs[1].(*kmsg.WriteTxnMarkersRequest).Markers[0].CoordinatorEpoch != 0 ||
		reqs[1].(*kmsg.WriteTxnMarkersRequest).Markers[0].Topics[0].Partitions[0] != 1 {
		t.Errorf("second marker: %+v", reqs)
	}
}

// TestTransactionsErrors: unknown ids and partitions fail with Kafka's
// messages and exit 1; bad command lines exit 2.
func TestTransactionsErrors(t *testing.T) {
	fc := newFakeCluster(t, "txt")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"describe", "--transactional-id", "nope"}, 1, "Failed to describe transaction state of transactional-id `nope`: TRANSACTIONAL_ID_NOT_FOUND"},
		{[]string{"describe-producers", "--topic", "nope", "--partition", "0"}, 1, "Failed to describe producers for partition nope-0 on leader"},
		{[]string{"abort", "--topic", "txt", "--partition", "0", "--start-offset", "0"}, 1, "Could not find any open transactions starting at offset 0 on partition txt-0"},
		{[]string{"abort", "--topic", "txt", "--partition", "0"}, 2, "must be identified either with --start-offset"},
		{[]string{"abort", "--topic", "txt", "--partition", "0", "--producer-id", "5"}, 2, "Missing required argument --producer-epoch"},
		{[]string{"abort", "--topic", "txt", "--partition", "0", "--producer-id", "5", "--producer-epoch", "1"}, 2, "Missing required argument --coordinator-epoch"},
		{[]string{"abort", "--partition", "0", "--start-offset", "0"}, 2, "Missing required argument(s): --topic"},
		{[]string{"describe-producers", "--topic", "txt"}, 2, "Missing required argument(s): --partition"},
		{[]string{"describe"}, 2, "Missing required argument(s): --transactional-id"},
		{[]string{"find-hang"}, 2, `unknown transactions command "find-hang"`},
		{[]string{"find-hanging"}, 2, "requires either --topic or --broker-id"},
		{[]string{"find-hanging", "--partition", "0", "--broker-id", "0"}, 2, "The --partition argument requires --topic"},
		{nil, 2, "give a command"},
	} {
		args := append([]string{"transactions", "--bootstrap-server", fc.bootstrap}, tc.args...)
		code, _, errOut := runAdmin(t, args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
	if code, out, _ := runAdmin(t, "transactions", "--help"); code != 0 || !strings.Contains(out, "describe-producers") {
		t.Errorf("--help: %d %q", code, out)
	}
}

// TestTransactionsDurationFilter is the tool's own filter, used when a
// broker serves only ListTransactions v0: Kafka's rule, kept when the
// transaction has run longer than the filter (a start of -1 is kept).
func TestTransactionsDurationFilter(t *testing.T) {
	d := kadm.DescribedTransactions{
		"old":   {TxnID: "old", StartTimestamp: 1000},
		"young": {TxnID: "young", StartTimestamp: 9500},
		"none":  {TxnID: "none", StartTimestamp: -1},
		"err":   {TxnID: "err", StartTimestamp: 1000, Err: errUsage},
	}
	for id, want := range map[string]bool{"old": true, "young": false, "none": true, "err": false, "absent": false} {
		if got := runningLonger(d, id, 10000, 1000); got != want {
			t.Errorf("%s: %v, want %v", id, got, want)
		}
	}
	if runningLonger(d, "young", 10000, 499) != true || runningLonger(d, "old", 10000, 9000) != false {
		t.Error("boundary: now - start must exceed the filter")
	}
}

// TestTransactionsFindHangingAgainstKfake: an open transaction younger
// than --max-transaction-timeout is not a candidate; an old one its
// coordinator still describes with the partition is not hanging; one no
// transactional id lists (ListTransactions answered empty) is, and is
// printed as Kafka's tool prints it.
func TestTransactionsFindHangingAgainstKfake(t *testing.T) {
	fc := newFakeCluster(t, "txt")
	pid, epoch := hangingTxn(t, fc)
	defer func(f func() int64) { nowMillis = f }(nowMillis)
	nowMillis = func() int64 { return time.Now().UnixMilli() }

	rows := func(args ...string) []string {
		t.Helper()
		code, out, errOut := runAdmin(t, append([]string{"transactions", "find-hanging", "--bootstrap-server", fc.bootstrap}, args...)...)
		if code != 0 {
			t.Fatalf("find-hanging %v: %d %s", args, code, errOut)
		}
		lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
		if strings.Join(strings.Fields(lines[0]), " ") != "Topic Partition ProducerId ProducerEpoch CoordinatorEpoch StartOffset LastTimestamp Duration(min)" {
			t.Fatalf("header %q", lines[0])
		}
		return lines[1:]
	}
	if r := rows("--topic", "txt"); len(r) != 0 {
		t.Errorf("a transaction just begun is hanging: %q", r)
	}
	nowMillis = func() int64 { return time.Now().Add(time.Hour).UnixMilli() }
	if r := rows("--topic", "txt", "--partition", "0"); len(r) != 0 {
		t.Errorf("a transaction its coordinator describes with the partition is hanging: %q", r)
	}
	fc.answer(keyListTransactions, func(req kmsg.Request) kmsg.Response {
		return req.(*kmsg.ListTransactionsRequest).ResponseKind()
	})
	// kfake answers DescribeProducers only on a partition's leader (Kafka
	// answers on followers too), so --broker-id names txt-0's leader.
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(fc.bootstrap, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	md, err := kadm.NewClient(cl).Metadata(context.Background(), "txt")
	if err != nil {
		t.Fatal(err)
	}
	leader := md.Topics["txt"].Partitions[0].Leader
	want := []string{"txt", "0", i64(pid), i64(int64(epoch)), "0", "2"}
	for _, args := range [][]string{{"--topic", "txt"}, {"--topic", "txt", "--partition", "0", "--broker-id", i64(int64(leader))}} {
		r := rows(args...)
		if len(r) != 1 {
			t.Errorf("%v: rows %q, want one", args, r)
			continue
		}
		if f := strings.Fields(r[0]); len(f) != 8 || !slices.Equal(f[:6], want) || (f[7] != "59" && f[7] != "60") {
			t.Errorf("%v: row %q: want txt-0's transaction of producer %d (start 2, about 60 min)", args, r[0], pid)
		}
	}
	// Listed and described, but its transaction no longer has txt-0:
	// hanging too.
	fc.answer(keyListTransactions, func(req kmsg.Request) kmsg.Response {
		resp := req.(*kmsg.ListTransactionsRequest).ResponseKind().(*kmsg.ListTransactionsResponse)
		st := kmsg.NewListTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.TransactionState = "hang", pid, "Ongoing"
		resp.TransactionStates = append(resp.TransactionStates, st)
		return resp
	})
	fc.answer(keyDescribeTransactions, func(req kmsg.Request) kmsg.Response {
		resp := req.(*kmsg.DescribeTransactionsRequest).ResponseKind().(*kmsg.DescribeTransactionsResponse)
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.ProducerEpoch, st.State = "hang", pid, epoch, "Ongoing"
		rt := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
		rt.Topic, rt.Partitions = "txt", []int32{1}
		st.Topics = append(st.Topics, rt)
		resp.TransactionStates = append(resp.TransactionStates, st)
		return resp
	})
	if r := rows("--topic", "txt"); len(r) != 1 || !strings.HasPrefix(strings.Join(strings.Fields(r[0]), " "), "txt 0 "+i64(pid)) {
		t.Errorf("a transaction without the partition: rows %q, want txt-0's", r)
	}
	if r := rows("--topic", "txt", "--max-transaction-timeout", "120"); len(r) != 0 {
		t.Errorf("younger than the timeout yet hanging: %q", r)
	}
}
