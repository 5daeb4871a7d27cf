package kbench

import (
	"bytes"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kafkazk/broker/logstore"
)

func TestParseCleanerMetrics(t *testing.T) {
	in := `# HELP kafka_log_logcleaner_max_clean_time_secs The longest pass.
# TYPE kafka_log_logcleaner_max_clean_time_secs gauge
kafka_log_logcleaner_max_clean_time_secs 2
kafka_log_logcleanermanager_max_dirty_percent 37
kafka_log_logcleanermanager_uncleanable_partitions_count{logDirectory="/d"} 0
kafka_server_brokertopicmetrics_bytesin_total 12345
kafka_log_log_logendoffset{partition="0",topic="t"} 9
`
	got, err := ParseCleanerMetrics(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		"kafka_log_logcleaner_max_clean_time_secs":                                    2,
		"kafka_log_logcleanermanager_max_dirty_percent":                               37,
		`kafka_log_logcleanermanager_uncleanable_partitions_count{logDirectory="/d"}`: 0,
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	if _, err := ParseCleanerMetrics(strings.NewReader("kafka_log_logcleaner_x notanumber\n")); err == nil {
		t.Error("bad value accepted")
	}
}

func TestCleanerCheckpoints(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	if err := logstore.WriteCleanerOffsetCheckpoint(nil, a, []logstore.CheckpointEntry{
		{Topic: "c", Partition: 0, Offset: 100}, {Topic: "c", Partition: 1, Offset: 50}, {Topic: "other", Partition: 0, Offset: 7},
	}); err != nil {
		t.Fatal(err)
	}
	got, errs := cleanerCheckpoints([]string{a, b}, "c")
	if len(errs) != 0 || got[a] != 150 || got[b] != 0 || len(got) != 2 {
		t.Errorf("got %v, errors %v; want %s 150 and %s 0 (no file)", got, errs, a, b)
	}
	if got, errs := cleanerCheckpoints(nil, "c"); got != nil || errs != nil {
		t.Errorf("no dirs: %v %v", got, errs)
	}
	r := CompactReport{Target: "cluster", Topic: "c", RatePerSec: 100, Records: 1000, Bytes: 1024000, Seconds: 10, Keys: 10,
		EndOffsets: 1000, Checkpoint: got,
		MetricsBefore: map[string]map[string]float64{"u": {"kafka_log_logcleaner_max_clean_time_secs": 0}},
		MetricsAfter:  map[string]map[string]float64{"u": {"kafka_log_logcleaner_max_clean_time_secs": 3}}}
	var out bytes.Buffer
	if err := r.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"1,000 keyed records (1KiB over 10 keys, 1.0 MB)", "100 rec/s of 100 offered",
		filepath.Base(a), "150 of 1,000 offsets cleaned",
		"cleaner passes completed on 1 of 2 brokers", "u: max_clean_time_secs 0→3",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestBesideRatios(t *testing.T) {
	res := func(kind string, mbs, p99 float64, targets ...string) Result {
		r := Result{Scenario: Scenario{Kind: kind, RecordBytes: 1024, Acks: "all", Partitions: 6, RatePerSec: 5000}}
		for _, name := range targets {
			run := NewRun(1, int64(mbs*1e6), 1)
			run.Latency = &Latencies{P50Ms: 1, P99Ms: p99, P999Ms: p99}
			r.Targets = append(r.Targets, TargetResult{Target: name, Runs: []Run{run}})
		}
		r.Finish()
		return r
	}
	without := []Result{res(KindProduce, 200, 0, "cluster", "kfake"), res(KindE2E, 5, 4, "cluster", "kfake")}
	with := []Result{res(KindProduce, 150, 0, "cluster", "kfake"), res(KindE2E, 5, 8, "cluster", "kfake"),
		res(KindConsume, 300, 0, "cluster")}
	got := BesideRatios(without, with)
	if len(got) != 5 {
		t.Fatalf("got %d ratios, want 5: %+v", len(got), got)
	}
	if g := got[0]; g.Target != "cluster" || g.Without != 200 || g.With != 150 || g.Ratio != 0.75 {
		t.Errorf("produce cluster %+v, want 200 → 150, 0.75", g)
	}
	if g := got[2]; g.Target != "cluster" || g.Without != 4 || g.With != 8 || g.Ratio != 2 {
		t.Errorf("e2e cluster %+v, want p99 4 → 8, 2", g)
	}
	if g := got[4]; !math.IsNaN(g.Without) || !math.IsNaN(g.Ratio) {
		t.Errorf("consume without a baseline %+v, want NaN", g)
	}
	var out bytes.Buffer
	if err := WriteBesideTable(&out, without, with); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 5 || !strings.Contains(lines[0], "cluster with/without") || !strings.Contains(lines[0], "kfake with/without") {
		t.Fatalf("table:\n%s", out.String())
	}
	for i, want := range []string{"| 200.0 ", "| p99 ms ", "| - "} {
		if !strings.Contains(lines[2+i], want) {
			t.Errorf("row %d lacks %q: %s", i, want, lines[2+i])
		}
	}
	if !strings.Contains(lines[2], "| 0.750 ") || !strings.Contains(lines[3], "| 2.000 ") {
		t.Errorf("ratios missing:\n%s", out.String())
	}
}
