package kbench

import (
	"strings"
	"testing"
)

// TestTxnScenarios: --scenarios txn expands to one scenario per
// transaction size, acks=all and idempotent (the baseline's settings).
func TestTxnScenarios(t *testing.T) {
	o := DefaultOptions()
	o.Kinds = []string{KindTxn}
	sc := o.Scenarios()
	if len(sc) != 2 || sc[0].TxnRecords != 10 || sc[1].TxnRecords != 1000 {
		t.Fatalf("scenarios %+v", sc)
	}
	for _, s := range sc {
		if s.Acks != "all" || !s.Idempotent || s.RecordBytes != 1024 || s.DurationS != o.Duration.Seconds() {
			t.Errorf("%s: %+v", s.Name(), s)
		}
	}
	if got := sc[1].Name(); got != "txn 1KiB x1000/txn acks=all P=6" {
		t.Errorf("name %q", got)
	}
	if (Options{Kinds: []string{KindProduce}, Sizes: []int{1}, Acks: []string{"all"}, TxnRecords: []int{10}}).Scenarios()[0].Kind != KindProduce {
		t.Error("txn scenarios without asking for them")
	}
}

// TestTxnRatio: the ratio is the median MB/s in transactions over the
// idempotent baseline's, per target, and the table shows both and it.
func TestTxnRatio(t *testing.T) {
	run := func(mb float64) Run { return NewRun(1000, int64(mb*1e6), 1) }
	r := Result{Scenario: Scenario{Kind: KindTxn, RecordBytes: 1024, Acks: "all", Partitions: 6, TxnRecords: 10},
		Targets: []TargetResult{
			{Target: "cluster", Runs: []Run{run(20), run(30), run(25)}, Baseline: []Run{run(100), run(90), run(110)}},
			{Target: "kfake", Runs: []Run{run(50)}, Baseline: []Run{run(200)}},
		}}
	r.Finish()
	c, k := r.Targets[0], r.Targets[1]
	if c.TxnRatio == nil || *c.TxnRatio != 0.25 || c.BaselineMedian.MBPerSec != 100 || k.TxnRatio == nil || *k.TxnRatio != 0.25 {
		t.Fatalf("ratios %v %v, baseline %+v", c.TxnRatio, k.TxnRatio, c.BaselineMedian)
	}
	if r.Ratios["mb_per_sec"] != 0.5 {
		t.Errorf("cluster/kfake %v, want 0.5 (of the transactional figures)", r.Ratios)
	}
	noBase := TargetResult{Target: "x", Runs: []Run{run(1)}}
	noBase.Summarise()
	if noBase.TxnRatio != nil || noBase.BaselineMedian != nil {
		t.Error("a ratio without a baseline")
	}
	var b strings.Builder
	if err := WriteTxnTable(&b, []Result{{Scenario: Scenario{Kind: KindProduce}}, r}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 || strings.Join(strings.Fields(lines[2]), " ") != "| txn 1KiB x10/txn acks=all P=6 | 25.0 | 100.0 | 0.250 | 50.0 | 200.0 | 0.250 |" {
		t.Errorf("table:\n%s", b.String())
	}
	b.Reset()
	if err := WriteTxnTable(&b, []Result{{Scenario: Scenario{Kind: KindProduce}}}); err != nil || b.Len() != 0 {
		t.Errorf("table without txn scenarios: %q %v", b.String(), err)
	}
}
