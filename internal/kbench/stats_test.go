package kbench

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{1, 100, 2, 3, 4}, 3},
	} {
		in := append([]float64(nil), c.in...)
		if got := Median(c.in); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.in, got, c.want)
		}
		for i := range in {
			if in[i] != c.in[i] {
				t.Fatalf("Median modified its input: %v", c.in)
			}
		}
	}
	if !math.IsNaN(Median(nil)) {
		t.Error("Median(nil) is not NaN")
	}
}

func TestPercentileNearestRank(t *testing.T) {
	// 1..1000 ms: p50 is the 500th, p99 the 990th, p99.9 the 999th value.
	var s []time.Duration
	for i := 1000; i >= 1; i-- {
		s = append(s, time.Duration(i)*time.Millisecond)
	}
	l := Summarise(s)
	if l.Samples != 1000 || l.P50Ms != 500 || l.P99Ms != 990 || l.P999Ms != 999 || l.MaxMs != 1000 {
		t.Errorf("Summarise = %+v", l)
	}
	one := []time.Duration{7 * time.Millisecond}
	if Percentile(one, 0.5) != 7*time.Millisecond || Percentile(one, 0.999) != 7*time.Millisecond {
		t.Error("one sample is every percentile")
	}
	if Percentile(nil, 0.5) != 0 {
		t.Error("Percentile(nil) != 0")
	}
}

func TestResultRatiosAndReport(t *testing.T) {
	r := Result{
		Scenario: Scenario{Kind: KindProduce, RecordBytes: 1024, Acks: "all", Partitions: 6, Reps: 3},
		Targets: []TargetResult{
			{Target: "cluster", Runs: []Run{NewRun(100, 102400, 1), NewRun(300, 307200, 1), NewRun(200, 204800, 1)}},
			{Target: "kfake", Runs: []Run{NewRun(1000, 1024000, 1), NewRun(900, 921600, 1), NewRun(5000, 5120000, 1)}},
		},
	}
	r.Finish()
	if r.Name != "produce 1KiB acks=all P=6" {
		t.Errorf("Name = %q", r.Name)
	}
	if m := r.Targets[0].Median; m.RecPerSec != 200 || math.Abs(m.MBPerSec-0.2048) > 1e-9 {
		t.Errorf("cluster medians = %+v", m)
	}
	if got := r.Ratios["rec_per_sec"]; got != 0.2 {
		t.Errorf("ratio rec_per_sec = %v, want 0.2", got)
	}

	e := Result{
		Scenario: Scenario{Kind: KindE2E, RecordBytes: 1024, Acks: "all", Partitions: 6, RatePerSec: 5000},
		Targets: []TargetResult{
			{Target: "cluster", Runs: []Run{{Latency: &Latencies{P50Ms: 2, P99Ms: 10, P999Ms: 20}}}},
			{Target: "kfake", Runs: []Run{{Latency: &Latencies{P50Ms: 1, P99Ms: 4, P999Ms: 5}}}},
		},
	}
	e.Finish()
	if e.Ratios["p99"] != 2.5 || e.Ratios["p50"] != 2 {
		t.Errorf("e2e ratios = %v", e.Ratios)
	}

	var js bytes.Buffer
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if strings.Count(js.String(), "\n") != 1 {
		t.Errorf("JSON is not one line: %q", js.String())
	}
	var back Result
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Scenario.Partitions != 6 || len(back.Targets[1].Runs) != 3 {
		t.Errorf("JSON round trip lost data: %+v", back)
	}

	var tab bytes.Buffer
	if err := WriteTable(&tab, []Result{r, e}); err != nil {
		t.Fatal(err)
	}
	out := tab.String()
	for _, want := range []string{
		"| scenario", "cluster/kfake", "200 rec/s, 0.2 MB/s [0.102–0.307]", "1,000 rec/s, 1.0 MB/s [0.922–5.12]", "| 0.200",
		"2.0 / 10.0 / 20.0 ms", "p99 2.50×",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 4 {
		t.Errorf("table has %d lines, want 4:\n%s", len(lines), out)
	}
}

func TestThousands(t *testing.T) {
	for in, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 1234567.4: "1,234,567", -12345: "-12,345"} {
		if got := thousands(in); got != want {
			t.Errorf("thousands(%v) = %q, want %q", in, got, want)
		}
	}
}
