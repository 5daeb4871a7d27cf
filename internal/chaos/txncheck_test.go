package chaos

import (
	"strings"
	"testing"
	"time"
)

// TestTxnCheckerCatches is the transactional checker's negative control:
// a clean history of two producers and a consume-transform-produce loop
// passes, and each case breaks one property and must be counted under
// its own name and nowhere else.
func TestTxnCheckerCatches(t *testing.T) {
	t.Parallel()
	s := time.Second
	w := func(topic string, p int32, v string) TxnWrite {
		return TxnWrite{Topic: topic, Partition: p, Value: v, Offset: -1}
	}
	// clean builds a fresh history each time, so cases can edit it.
	clean := func() TxnInput {
		return TxnInput{
			Txns: []Txn{
				// t0: committed and acknowledged, across two partitions.
				{Producer: "a", Seq: 0, Writes: []TxnWrite{w("txn", 0, "a0-0"), w("txn", 1, "a0-1")}, Commit: true, Outcome: OK, Invoke: 1 * s, End: 2 * s, Complete: 3 * s},
				// t1: aborted by the client.
				{Producer: "a", Seq: 1, Writes: []TxnWrite{w("txn", 0, "a1-0"), w("txn", 2, "a1-1")}, Commit: false, Outcome: OK, Invoke: 4 * s, End: 5 * s, Complete: 6 * s},
				// t2: commit sent, answer lost: visible whole.
				{Producer: "b", Seq: 0, Writes: []TxnWrite{w("txn", 1, "b0-0"), w("txn", 2, "b0-1")}, Commit: true, Outcome: Info, Invoke: 4 * s, End: 5 * s, Complete: 9 * s, Err: "timeout"},
				// t3: commit sent, answer lost: absent whole.
				{Producer: "b", Seq: 1, Writes: []TxnWrite{w("txn", 0, "b1-0")}, Commit: true, Outcome: Info, Invoke: 10 * s, End: 11 * s, Complete: 12 * s},
				// c0: consume-transform-produce of in p0@0,1 committed with offset 2.
				{Producer: "ctp", Seq: 0, Writes: []TxnWrite{w("out", 0, "in-0@ctp/0"), w("out", 0, "in-1@ctp/0")}, Group: "g", Offsets: map[int32]int64{0: 2},
					Commit: true, Outcome: OK, Invoke: 1 * s, End: 2 * s, Complete: 3 * s},
				// c1: p0@2 processed, aborted (offset 3 never applies).
				{Producer: "ctp", Seq: 1, Writes: []TxnWrite{w("out", 0, "in-2@ctp/1")}, Group: "g", Offsets: map[int32]int64{0: 3},
					Commit: false, Outcome: OK, Invoke: 4 * s, End: 5 * s, Complete: 6 * s},
				// c2: p0@2 again, committed with offset 3.
				{Producer: "ctp", Seq: 2, Writes: []TxnWrite{w("out", 0, "in-2@ctp/2")}, Group: "g", Offsets: map[int32]int64{0: 3},
					Commit: true, Outcome: OK, Invoke: 7 * s, End: 8 * s, Complete: 9 * s},
			},
			Polls: []Poll{
				{Consumer: "rc", Topic: "txn", Partition: 0, At: 2500 * time.Millisecond, Offsets: []int64{0}, Values: []string{"a0-0"}},
				{Consumer: "rc", Topic: "out", Partition: 0, At: 10 * s, Offsets: []int64{0, 1, 5}, Values: []string{"in-0@ctp/0", "in-1@ctp/0", "in-2@ctp/2"}},
			},
			Final: []Poll{
				{Consumer: "final", Topic: "txn", Partition: 0, Offsets: []int64{0}, Values: []string{"a0-0"}},
				{Consumer: "final", Topic: "txn", Partition: 1, Offsets: []int64{0, 2}, Values: []string{"a0-1", "b0-0"}},
				{Consumer: "final", Topic: "txn", Partition: 2, Offsets: []int64{3}, Values: []string{"b0-1"}},
				{Consumer: "final", Topic: "out", Partition: 0, Offsets: []int64{0, 1, 5}, Values: []string{"in-0@ctp/0", "in-1@ctp/0", "in-2@ctp/2"}},
			},
			GroupOffsets: []GroupOffset{
				{At: 1 * s, Group: "g", Partition: 0, Offset: -1},
				{At: 2500 * time.Millisecond, Group: "g", Partition: 0, Offset: -1}, // commit decided, not yet acknowledged
				{At: 4 * s, Group: "g", Partition: 0, Offset: 2},
				{At: 10 * s, Group: "g", Partition: 0, Offset: 3},
			},
			Input:       map[int32]map[int64]string{0: {0: "in-0", 1: "in-1", 2: "in-2", 3: "in-3"}},
			OutputTopic: "out",
		}
	}
	cases := []struct {
		name  string
		edit  func(in *TxnInput)
		count func(TxnAnomalies) int
	}{
		{"clean", func(*TxnInput) {}, nil},
		{"G1a during the run", func(in *TxnInput) {
			in.Polls = append(in.Polls, Poll{Consumer: "rc", Topic: "txn", Partition: 2, At: 7 * s, Offsets: []int64{1}, Values: []string{"a1-1"}})
		}, func(a TxnAnomalies) int { return a.AbortedRead }},
		{"G1a in the final read", func(in *TxnInput) {
			in.Final[0].Offsets, in.Final[0].Values = []int64{0, 1}, []string{"a0-0", "a1-0"}
		}, func(a TxnAnomalies) int { return a.AbortedRead }},
		{"precommitted read", func(in *TxnInput) {
			in.Polls[0].At = 1500 * time.Millisecond // before t0's EndTxn at 2 s
		}, func(a TxnAnomalies) int { return a.PrecommittedRead }},
		{"precommitted read of an indeterminate transaction", func(in *TxnInput) {
			in.Polls = append(in.Polls, Poll{Consumer: "rc", Topic: "txn", Partition: 1, At: 4500 * time.Millisecond, Offsets: []int64{2}, Values: []string{"b0-0"}})
		}, func(a TxnAnomalies) int { return a.PrecommittedRead }},
		{"committed transaction partly visible", func(in *TxnInput) {
			in.Final[2].Offsets, in.Final[2].Values = nil, nil // b0-1 gone, b0-0 still there
		}, func(a TxnAnomalies) int { return a.PartialTxn }},
		{"acknowledged commit wholly absent", func(in *TxnInput) {
			in.Final[0].Offsets, in.Final[0].Values = nil, nil
			in.Final[1].Offsets, in.Final[1].Values = []int64{2}, []string{"b0-0"}
		}, func(a TxnAnomalies) int { return a.LostTxn }},
		{"value twice in the final read", func(in *TxnInput) {
			in.Final[1].Offsets, in.Final[1].Values = []int64{0, 2, 3}, []string{"a0-1", "b0-0", "a0-1"}
		}, func(a TxnAnomalies) int { return a.TxnDuplicate }},
		{"input output twice", func(in *TxnInput) {
			in.Txns[5].Commit = true // c1 committed too: in-2 output by c1 and c2
			in.Final[3].Offsets, in.Final[3].Values = []int64{0, 1, 3, 5}, []string{"in-0@ctp/0", "in-1@ctp/0", "in-2@ctp/1", "in-2@ctp/2"}
		}, func(a TxnAnomalies) int { return a.TxnDuplicate }},
		{"group offset of an aborted transaction", func(in *TxnInput) {
			in.Txns[6].Offsets = map[int32]int64{0: 4} // only aborted c1 wrote 3
			in.Txns[6].Writes = append(in.Txns[6].Writes, w("out", 0, "in-3@ctp/2"))
			in.Final[3].Offsets, in.Final[3].Values = []int64{0, 1, 5, 6}, []string{"in-0@ctp/0", "in-1@ctp/0", "in-2@ctp/2", "in-3@ctp/2"}
			in.GroupOffsets = append(in.GroupOffsets[:3], GroupOffset{At: 7 * s, Group: "g", Partition: 0, Offset: 3}, GroupOffset{At: 10 * s, Group: "g", Partition: 0, Offset: 4})
		}, func(a TxnAnomalies) int { return a.AbortedOffset }},
		{"acknowledged offset commit not in the final offsets", func(in *TxnInput) {
			// The last sample reads 2 after c2's commit of 3 was
			// acknowledged; in-2's committed output is then past the
			// final offset too, which OffsetOutput counts beside it.
			in.GroupOffsets[3].Offset = 2
		}, func(a TxnAnomalies) int { return a.MissingOffset + a.OffsetOutput }},
		{"offset past output that is not there", func(in *TxnInput) {
			in.Final[3].Offsets, in.Final[3].Values = []int64{0, 1}, []string{"in-0@ctp/0", "in-1@ctp/0"}
			in.Txns[6].Outcome = Info // c2 indeterminate, so its absence is not a lost txn
		}, func(a TxnAnomalies) int { return a.OffsetOutput }},
		{"output without its offset", func(in *TxnInput) {
			in.GroupOffsets = in.GroupOffsets[:3] // final offset 2, yet in-2's output is committed
			in.Txns[6].Outcome = Info
		}, func(a TxnAnomalies) int { return a.OffsetOutput }},
	}
	for _, tc := range cases {
		in := clean()
		tc.edit(&in)
		res := Check(CheckInput{Txn: in})
		if tc.count == nil {
			if res.Total() != 0 {
				t.Errorf("%s: %+v, want no anomaly (%v)", tc.name, res.TxnAnomalies, res.Examples)
			}
			if res.Txns != 7 || res.TxnCommitted != 3 || res.TxnAborted != 2 || res.TxnInfo != 2 {
				t.Errorf("%s: counts %+v, want 7 transactions: 3 committed, 2 aborted, 2 indeterminate", tc.name, res.TxnCounts)
			}
			continue
		}
		got := tc.count(res.TxnAnomalies)
		if got == 0 {
			t.Errorf("%s: not counted under its own name: %+v (%v)", tc.name, res.TxnAnomalies, res.Examples)
		}
		if res.Total() != got {
			t.Errorf("%s: counted elsewhere too: %+v (%v)", tc.name, res.Anomalies, res.Examples)
		}
	}
}

// TestTxnCheckerStaleOffsetRead: a sample during the run that reads less
// than an acknowledged commit (a demoted coordinator answering from its
// cache) is counted as a stale read, not as an anomaly, while the final
// sample holds the commit.
func TestTxnCheckerStaleOffsetRead(t *testing.T) {
	t.Parallel()
	s := time.Second
	in := TxnInput{
		Txns: []Txn{{Producer: "ctp", Seq: 0, Group: "g", Offsets: map[int32]int64{0: 2},
			Writes: []TxnWrite{{Topic: "out", Partition: 0, Value: "in-0@ctp/0", Offset: -1}, {Topic: "out", Partition: 0, Value: "in-1@ctp/0", Offset: -1}},
			Commit: true, Outcome: OK, Invoke: 1 * s, End: 2 * s, Complete: 3 * s}},
		Final: []Poll{{Consumer: "final", Topic: "out", Partition: 0, Offsets: []int64{0, 1}, Values: []string{"in-0@ctp/0", "in-1@ctp/0"}}},
		GroupOffsets: []GroupOffset{
			{At: 4 * s, Group: "g", Partition: 0, Offset: -1}, // stale: no commit seen
			{At: 10 * s, Group: "g", Partition: 0, Offset: 2},
		},
		Input:       map[int32]map[int64]string{0: {0: "in-0", 1: "in-1"}},
		OutputTopic: "out",
	}
	res := Check(CheckInput{Txn: in})
	if res.StaleOffsetRead != 1 || res.Total() != 0 {
		t.Fatalf("stale reads %d, anomalies %+v (%v); want 1 stale read and no anomaly", res.StaleOffsetRead, res.TxnAnomalies, res.Examples)
	}
	in.GroupOffsets[1].Offset = -1 // the final sample lost the commit too
	if res := Check(CheckInput{Txn: in}); res.MissingOffset != 1 {
		t.Fatalf("final offset below the acknowledged commit: %+v, want MissingOffset 1", res.TxnAnomalies)
	}
}

// TestTxnCheckerIgnoresOtherScenarios: without a transactional history
// the transactional counts stay zero and the report shows dashes.
func TestTxnCheckerIgnoresOtherScenarios(t *testing.T) {
	t.Parallel()
	res := Check(CheckInput{})
	if res.TxnCounts != (TxnCounts{}) || res.TxnAnomalies != (TxnAnomalies{}) {
		t.Fatalf("%+v %+v", res.TxnCounts, res.TxnAnomalies)
	}
}

// TestReportTxnColumns: the report's table keeps one shape with the
// transactional columns, for scenarios with and without them.
func TestReportTxnColumns(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	txn := Result{Scenario: "txn-random-mix", Profile: "SAFE", Safe: true}
	txn.Check.Txns, txn.Check.TxnCommitted, txn.Check.TxnAborted = 5, 3, 2
	txn.Check.AbortedRead = 1
	WriteReport(&b, []Result{{Scenario: "baseline", Profile: "SAFE", Safe: true}, txn}, "test")
	var rows []string
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(l, "|") {
			rows = append(rows, l)
		}
	}
	if len(rows) != 4 {
		t.Fatalf("%d table lines:\n%s", len(rows), b.String())
	}
	for _, r := range rows[1:] {
		if strings.Count(r, "|") != strings.Count(rows[0], "|") {
			t.Errorf("row %q has %d cells, header %d", r, strings.Count(r, "|"), strings.Count(rows[0], "|"))
		}
	}
	if !strings.Contains(rows[2], "| - | - | - | - | - | - |") || !strings.Contains(rows[3], "| **FAIL** |") || !strings.Contains(rows[3], "| 3/2/0 | 1 | 0 | 0/0 | 0 | 0/0/0 (0) |") {
		t.Errorf("rows:\n%s\n%s", rows[2], rows[3])
	}
}
