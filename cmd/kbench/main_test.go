package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kafkazk/broker/internal/kbench"
)

// TestSmokeKfake runs every scenario briefly against an in-process kfake
// cluster and checks the report: one JSON line per scenario, then the table.
// It asserts no speed.
func TestSmokeKfake(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	err := run(ctx, []string{
		"--kfake", "--reps=1", "--warmup=100ms", "--duration=300ms", "--partitions=2",
		"--sizes=100", "--acks=all,1", "--e2e-rate=500", "--e2e-duration=300ms", "--consume-mib=2",
	}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr.String())
	}
	var results []kbench.Result
	sc := bufio.NewScanner(&stdout)
	var table []string
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "{") {
			var r kbench.Result
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("bad JSON line %q: %v", line, err)
			}
			results = append(results, r)
		} else if strings.HasPrefix(line, "|") {
			table = append(table, line)
		}
	}
	if len(results) != 4 {
		t.Fatalf("got %d JSON lines, want 4 (2 produce, e2e, consume):\n%s", len(results), stdout.String())
	}
	if len(table) != 2+len(results) {
		t.Errorf("table has %d lines, want %d:\n%s", len(table), 2+len(results), stdout.String())
	}
	for _, r := range results {
		if len(r.Targets) != 1 || r.Targets[0].Target != "kfake" || r.Targets[0].Err != "" {
			t.Fatalf("%s: targets %+v", r.Name, r.Targets)
		}
		tr := r.Targets[0]
		if len(tr.Runs) != 1 || tr.Runs[0].Records <= 0 || tr.Median.RecPerSec <= 0 {
			t.Errorf("%s: runs %+v", r.Name, tr.Runs)
		}
		if tr.ReplicationFactor != 3 || tr.MinInsync != 2 {
			t.Errorf("%s: rf %d min.insync %d, want 3 and 2", r.Name, tr.ReplicationFactor, tr.MinInsync)
		}
		if r.Scenario.Kind == kbench.KindE2E {
			if l := tr.Runs[0].Latency; l == nil || l.Samples != 150 || l.P50Ms <= 0 || l.P999Ms < l.P50Ms {
				t.Errorf("e2e latency %+v", l)
			}
		}
	}
}

func TestArgs(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--kfake", "--brokers=127.0.0.1:1"},
		{"--kfake", "--acks=2"},
		{"--kfake", "--sizes=0"},
		{"--kfake", "--scenarios=nope"},
		{"--kfake", "extra"},
		{"--kfake", "--scenarios=txn", "--txn-records=0"},
		{"--kfake", "--scenarios=txn", "--txn-size=0"},
	} {
		var out, errOut bytes.Buffer
		if err := run(context.Background(), args, &out, &errOut); err == nil {
			t.Errorf("run(%q) succeeded", args)
		}
	}
}

// TestCompactArgs: the compaction load needs a cluster (--brokers), valid
// settings, and is parsed into the options StartCompactWriter gets.
func TestCompactArgs(t *testing.T) {
	for _, args := range [][]string{
		{"--kfake", "--compact-beside=100"},
		{"--brokers=127.0.0.1:1", "--compact-beside=-1"},
		{"--brokers=127.0.0.1:1", "--compact-beside=100", "--compact-keys=0"},
		{"--brokers=127.0.0.1:1", "--compact-beside=100", "--compact-dirty-ratio=0"},
		{"--brokers=127.0.0.1:1", "--compact-beside=100", "--compact-segment-bytes=10"},
	} {
		var out, errOut bytes.Buffer
		if err := run(context.Background(), args, &out, &errOut); err == nil {
			t.Errorf("run(%q) succeeded", args)
		}
	}
	o, c, err := parseArgs([]string{"--brokers=127.0.0.1:1", "--compact-beside=2000", "--compact-segment-bytes=1048576",
		"--metrics-urls=http://127.0.0.1:1/metrics,http://127.0.0.1:2/metrics", "--log-dirs=/a,/b,/c"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if c.compact.Rate != 2000 || c.compact.SegmentBytes != 1<<20 || c.compact.Keys != 10000 || c.compact.RecordBytes != 1024 ||
		c.compact.DirtyRatio != 0.05 || len(c.compact.MetricsURLs) != 2 || len(c.compact.LogDirs) != 3 {
		t.Errorf("compact options %+v", c.compact)
	}
	if o.Reps != kbench.DefaultOptions().Reps {
		t.Errorf("reps %d", o.Reps)
	}
}

// TestBesideReport: --beside-report reads two kbench reports and prints
// the with/without table.
func TestBesideReport(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, mbs float64) string {
		r := kbench.Result{Scenario: kbench.Scenario{Kind: kbench.KindProduce, RecordBytes: 1024, Acks: "all", Partitions: 6},
			Targets: []kbench.TargetResult{{Target: "cluster", Runs: []kbench.Run{kbench.NewRun(1000, int64(mbs*1e6), 1)}}}}
		r.Finish()
		var b bytes.Buffer
		if err := r.WriteJSON(&b); err != nil {
			t.Fatal(err)
		}
		b.WriteString("\n| table |\n")
		p := dir + "/" + name
		if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	without, with := write("without", 100), write("with", 90)
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"--beside-report=" + without + "," + with}, &out, &errOut); err != nil {
		t.Fatalf("run: %v\n%s", err, errOut.String())
	}
	if !strings.Contains(out.String(), "| produce 1KiB acks=all P=6 | MB/s   | 100.0           | 90.0         | 0.900") {
		t.Errorf("table:\n%s", out.String())
	}
	if err := run(context.Background(), []string{"--beside-report=" + without}, &out, &errOut); err == nil {
		t.Error("one file accepted")
	}
}

// TestSmokeTxnKfake runs the txn scenarios briefly against kfake (which
// implements transactions): per transaction size one JSON line whose
// target has transactional runs, idempotent baseline runs and their
// ratio, then the txn table. It asserts no speed.
func TestSmokeTxnKfake(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	err := run(ctx, []string{"--kfake", "--scenarios=txn", "--txn-records=10,1000", "--txn-size=100",
		"--reps=2", "--warmup=100ms", "--duration=300ms", "--partitions=2"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr.String())
	}
	results, err := kbench.ReadResults(strings.NewReader(stdout.String()))
	if err != nil || len(results) != 2 {
		t.Fatalf("%d results (%v), want 2:\n%s", len(results), err, stdout.String())
	}
	for i, n := range []int{10, 1000} {
		r := results[i]
		if r.Scenario.Kind != kbench.KindTxn || r.Scenario.TxnRecords != n || r.Name != fmt.Sprintf("txn 100B x%d/txn acks=all P=2", n) {
			t.Errorf("result %d: %+v", i, r.Scenario)
		}
		tr := r.Targets[0]
		if len(tr.Runs) != 2 || len(tr.Baseline) != 2 || tr.BaselineMedian == nil || tr.TxnRatio == nil || *tr.TxnRatio <= 0 {
			t.Errorf("%s: runs %d, baseline %d, median %v, ratio %v", r.Name, len(tr.Runs), len(tr.Baseline), tr.BaselineMedian, tr.TxnRatio)
		}
		for _, run := range tr.Runs {
			if run.Records%int64(n) != 0 || run.Records == 0 {
				t.Errorf("%s: %d records, not whole transactions of %d", r.Name, run.Records, n)
			}
		}
	}
	out := stdout.String()
	i := strings.Index(out, "Transactional produce against idempotent produce")
	if i < 0 {
		t.Fatalf("no txn table:\n%s", out)
	}
	var rows []string
	for _, l := range strings.Split(out[i:], "\n") {
		if strings.HasPrefix(l, "| txn 100B x") {
			rows = append(rows, strings.Join(strings.Fields(l), " "))
		}
	}
	if !strings.Contains(out[i:], "kfake txn/idempotent") || len(rows) != 2 || strings.Count(rows[1], "|") != 5 ||
		!strings.HasPrefix(rows[1], "| txn 100B x1000/txn acks=all P=2 |") {
		t.Errorf("txn table rows %q:\n%s", rows, out[i:])
	}
}
