package kbench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
)

// Kinds of scenario.
const (
	KindProduce = "produce" // produce as fast as the client can for a duration
	KindE2E     = "e2e"     // produce at a fixed rate, measure produce-to-consume latency
	KindConsume = "consume" // consume a filled topic from its start
	// KindTxn produces in transactions of TxnRecords records, each
	// measured run followed (or preceded, alternately) by an idempotent
	// produce run of the same records on the same target: the baseline.
	KindTxn = "txn"
)

// Scenario is one benchmark configuration. Every setting goes into the JSON
// line, so a figure never travels without the configuration that produced it.
type Scenario struct {
	Kind          string  `json:"kind"`
	RecordBytes   int     `json:"record_bytes"` // value size; records have no key
	Acks          string  `json:"acks"`         // "all" or "1"
	Partitions    int     `json:"partitions"`
	LingerMs      float64 `json:"linger_ms"`
	BatchMaxBytes int     `json:"batch_max_bytes"` // producer batch.size
	Idempotent    bool    `json:"idempotent"`
	MaxInflight   int     `json:"max_inflight_per_broker"`
	Compression   string  `json:"compression"`
	RatePerSec    int     `json:"rate_per_sec,omitempty"` // e2e: offered records/s
	DurationS     float64 `json:"duration_s,omitempty"`   // produce, e2e: per run; consume: at least
	MaxRunBytes   int64   `json:"max_run_bytes,omitempty"`
	FillBytes     int64   `json:"fill_bytes,omitempty"` // consume: topic size
	FetchMaxBytes int     `json:"fetch_max_bytes,omitempty"`
	PartFetchMax  int     `json:"fetch_max_partition_bytes,omitempty"`
	TxnRecords    int     `json:"txn_records,omitempty"` // txn: records per transaction
	Reps          int     `json:"reps"`
	WarmupRuns    int     `json:"warmup_runs"`
}

// Name is the scenario's row label.
func (s Scenario) Name() string {
	switch s.Kind {
	case KindProduce:
		return fmt.Sprintf("produce %s acks=%s P=%d", sizeName(s.RecordBytes), s.Acks, s.Partitions)
	case KindE2E:
		return fmt.Sprintf("e2e %s acks=%s P=%d @%d/s", sizeName(s.RecordBytes), s.Acks, s.Partitions, s.RatePerSec)
	case KindConsume:
		return fmt.Sprintf("consume %s P=%d %s", sizeName(s.RecordBytes), s.Partitions, bytesName(s.FillBytes))
	case KindTxn:
		return fmt.Sprintf("txn %s x%d/txn acks=%s P=%d", sizeName(s.RecordBytes), s.TxnRecords, s.Acks, s.Partitions)
	}
	return s.Kind
}

func sizeName(n int) string {
	if n >= 1024 && n%1024 == 0 {
		return fmt.Sprintf("%dKiB", n/1024)
	}
	return fmt.Sprintf("%dB", n)
}

func bytesName(n int64) string {
	return fmt.Sprintf("%dMiB", n>>20)
}

// Run is one measured repetition against one target.
type Run struct {
	Records   int64      `json:"records"`
	Bytes     int64      `json:"bytes"` // record values only
	Seconds   float64    `json:"seconds"`
	RecPerSec float64    `json:"rec_per_sec"`
	MBPerSec  float64    `json:"mb_per_sec"` // 10^6 bytes of record values per second
	Latency   *Latencies `json:"latency,omitempty"`
}

// NewRun fills in the rates of a throughput run.
func NewRun(records, bytes int64, seconds float64) Run {
	r := Run{Records: records, Bytes: bytes, Seconds: seconds}
	if seconds > 0 {
		r.RecPerSec = float64(records) / seconds
		r.MBPerSec = float64(bytes) / seconds / 1e6
	}
	return r
}

// Medians are the per-metric medians over a target's runs.
type Medians struct {
	RecPerSec float64 `json:"rec_per_sec"`
	MBPerSec  float64 `json:"mb_per_sec"`
	P50Ms     float64 `json:"p50_ms,omitempty"`
	P99Ms     float64 `json:"p99_ms,omitempty"`
	P999Ms    float64 `json:"p999_ms,omitempty"`
}

// TargetResult is a scenario's outcome on one target.
type TargetResult struct {
	Target            string  `json:"target"`
	Bootstrap         string  `json:"bootstrap"`
	ReplicationFactor int     `json:"replication_factor"`
	MinInsync         int     `json:"min_insync_replicas"`
	Runs              []Run   `json:"runs"`
	Median            Medians `json:"median"`
	// Baseline is set for a txn scenario: the idempotent produce runs of
	// the same records, interleaved with Runs on the same target, their
	// medians, and TxnRatio, the median MB/s in transactions over the
	// idempotent one (below 1 is slower).
	Baseline       []Run    `json:"baseline_runs,omitempty"`
	BaselineMedian *Medians `json:"baseline_median,omitempty"`
	TxnRatio       *float64 `json:"txn_over_idempotent,omitempty"`
	Err            string   `json:"error,omitempty"`
}

// Summarise computes the medians over the runs.
func (t *TargetResult) Summarise() {
	var rps, mbs, p50, p99, p999 []float64
	for _, r := range t.Runs {
		rps = append(rps, r.RecPerSec)
		mbs = append(mbs, r.MBPerSec)
		if r.Latency != nil {
			p50 = append(p50, r.Latency.P50Ms)
			p99 = append(p99, r.Latency.P99Ms)
			p999 = append(p999, r.Latency.P999Ms)
		}
	}
	t.Median = Medians{RecPerSec: Median(rps), MBPerSec: Median(mbs)}
	if len(p50) > 0 {
		t.Median.P50Ms, t.Median.P99Ms, t.Median.P999Ms = Median(p50), Median(p99), Median(p999)
	}
	t.BaselineMedian, t.TxnRatio = nil, nil
	if len(t.Baseline) > 0 {
		var brps, bmbs []float64
		for _, r := range t.Baseline {
			brps = append(brps, r.RecPerSec)
			bmbs = append(bmbs, r.MBPerSec)
		}
		t.BaselineMedian = &Medians{RecPerSec: Median(brps), MBPerSec: Median(bmbs)}
		if v := Ratio(t.Median.MBPerSec, t.BaselineMedian.MBPerSec); len(t.Runs) > 0 && !math.IsNaN(v) {
			t.TxnRatio = &v
		}
	}
}

// Result is one scenario across every target, as one JSON line.
type Result struct {
	Scenario Scenario       `json:"scenario"`
	Name     string         `json:"name"`
	Targets  []TargetResult `json:"targets"`
	// Ratios of the first target's medians to the second's, when there are
	// two: for throughput, below 1 is slower; for latency, above 1 is slower.
	Ratios map[string]float64 `json:"ratios,omitempty"`
}

// Finish summarises each target and computes the ratios.
func (r *Result) Finish() {
	r.Name = r.Scenario.Name()
	for i := range r.Targets {
		r.Targets[i].Summarise()
	}
	if len(r.Targets) != 2 {
		return
	}
	a, b := r.Targets[0].Median, r.Targets[1].Median
	r.Ratios = map[string]float64{}
	put := func(k string, v float64) {
		if !math.IsNaN(v) {
			r.Ratios[k] = v
		}
	}
	put("rec_per_sec", Ratio(a.RecPerSec, b.RecPerSec))
	put("mb_per_sec", Ratio(a.MBPerSec, b.MBPerSec))
	if r.Scenario.Kind == KindE2E {
		put("p50", Ratio(a.P50Ms, b.P50Ms))
		put("p99", Ratio(a.P99Ms, b.P99Ms))
		put("p999", Ratio(a.P999Ms, b.P999Ms))
	}
}

// WriteJSON writes r as one line.
func (r *Result) WriteJSON(w io.Writer) error {
	line, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", line)
	return err
}

// cell is a target's figures for the table.
func cell(kind string, t TargetResult) string {
	if t.Err != "" && len(t.Runs) == 0 {
		return "error"
	}
	m := t.Median
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range t.Runs {
		v := r.MBPerSec
		if kind == KindE2E && r.Latency != nil {
			v = r.Latency.P99Ms
		}
		lo, hi = min(lo, v), max(hi, v)
	}
	spread := ""
	if len(t.Runs) > 1 {
		spread = fmt.Sprintf(" [%.3g–%.3g]", lo, hi)
	}
	if kind == KindE2E {
		return fmt.Sprintf("%.1f / %.1f / %.1f ms%s", m.P50Ms, m.P99Ms, m.P999Ms, spread)
	}
	return fmt.Sprintf("%s rec/s, %.1f MB/s%s", thousands(m.RecPerSec), m.MBPerSec, spread)
}

// headline is a scenario's ratio column: MB/s for throughput, p99 for latency.
func headline(r Result) string {
	k := "mb_per_sec"
	if r.Scenario.Kind == KindE2E {
		k = "p99"
	}
	v, ok := r.Ratios[k]
	if !ok {
		return "-"
	}
	if k == "p99" {
		return fmt.Sprintf("p99 %.2f×", v)
	}
	return fmt.Sprintf("%.3f", v)
}

// thousands formats v rounded to an integer with comma separators.
func thousands(v float64) string {
	if math.IsNaN(v) {
		return "NaN"
	}
	s := fmt.Sprintf("%.0f", v)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// WriteTable writes results as a Markdown table: one row per scenario, one
// column per target (medians; latency rows show p50 / p99 / p99.9; in
// brackets the lowest and highest run, of MB/s or of p99) and, with two
// targets, the ratio of the first to the second.
func WriteTable(w io.Writer, results []Result) error {
	if len(results) == 0 {
		return nil
	}
	var names []string
	for _, t := range results[0].Targets {
		names = append(names, t.Target)
	}
	header := append([]string{"scenario"}, names...)
	if len(names) == 2 {
		header = append(header, names[0]+"/"+names[1])
	}
	rows := [][]string{header}
	for _, r := range results {
		row := []string{r.Name}
		for _, t := range r.Targets {
			row = append(row, cell(r.Scenario.Kind, t))
		}
		if len(names) == 2 {
			row = append(row, headline(r))
		}
		rows = append(rows, row)
	}
	return writeMarkdown(w, rows)
}
