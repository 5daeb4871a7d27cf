package kbench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
)

// ReadResults reads the scenario JSON lines of a kbench report (stdout),
// skipping the table and any other line.
func ReadResults(r io.Reader) ([]Result, error) {
	var out []Result
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, `{"scenario"`) {
			continue
		}
		var res Result
		if err := json.Unmarshal([]byte(line), &res); err != nil {
			return nil, fmt.Errorf("result line: %w", err)
		}
		out = append(out, res)
	}
	return out, sc.Err()
}

// BesideRatio is one scenario on one target, without and with the
// compaction load: the headline figure (MB/s, or p99 ms for e2e) of each
// and with/without. For throughput below 1 is a drop; for latency above 1.
type BesideRatio struct {
	Scenario string
	Target   string
	Without  float64
	With     float64
	Ratio    float64 // NaN when a side is missing
}

func headlineValue(kind string, t TargetResult) float64 {
	if len(t.Runs) == 0 {
		return math.NaN()
	}
	if kind == KindE2E {
		return t.Median.P99Ms
	}
	return t.Median.MBPerSec
}

// BesideRatios pairs the scenarios (by name) and targets of two reports.
func BesideRatios(without, with []Result) []BesideRatio {
	var out []BesideRatio
	for _, w := range with {
		var base *Result
		for i := range without {
			if without[i].Name == w.Name {
				base = &without[i]
				break
			}
		}
		for _, wt := range w.Targets {
			br := BesideRatio{Scenario: w.Name, Target: wt.Target, With: headlineValue(w.Scenario.Kind, wt), Without: math.NaN()}
			if base != nil {
				for _, bt := range base.Targets {
					if bt.Target == wt.Target {
						br.Without = headlineValue(w.Scenario.Kind, bt)
					}
				}
			}
			br.Ratio = Ratio(br.With, br.Without)
			out = append(out, br)
		}
	}
	return out
}

// WriteBesideTable writes a Markdown table of each scenario: per target the
// headline figure without and with the compaction load, and with/without.
// Only the cluster carries the load; a kfake column is the control for
// drift of the machine between the two runs.
func WriteBesideTable(w io.Writer, without, with []Result) error {
	ratios := BesideRatios(without, with)
	var targets []string
	seen := map[string]bool{}
	for _, r := range ratios {
		if !seen[r.Target] {
			seen[r.Target] = true
			targets = append(targets, r.Target)
		}
	}
	header := []string{"scenario", "figure"}
	for _, t := range targets {
		header = append(header, t+" without", t+" with", t+" with/without")
	}
	rows := [][]string{header}
	index := map[string]int{}
	num := func(v float64) string {
		if math.IsNaN(v) {
			return "-"
		}
		return fmt.Sprintf("%.1f", v)
	}
	for _, with := range with {
		figure := "MB/s"
		if with.Scenario.Kind == KindE2E {
			figure = "p99 ms"
		}
		index[with.Name] = len(rows)
		row := []string{with.Name, figure}
		for range targets {
			row = append(row, "-", "-", "-")
		}
		rows = append(rows, row)
	}
	for _, r := range ratios {
		row := rows[index[r.Scenario]]
		for i, t := range targets {
			if t != r.Target {
				continue
			}
			ratio := "-"
			if !math.IsNaN(r.Ratio) {
				ratio = fmt.Sprintf("%.3f", r.Ratio)
			}
			row[2+3*i], row[3+3*i], row[4+3*i] = num(r.Without), num(r.With), ratio
		}
	}
	return writeMarkdown(w, rows)
}

// writeMarkdown writes rows (the first is the header) as an aligned table.
func writeMarkdown(w io.Writer, rows [][]string) error {
	widths := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, c := range row {
			widths[i] = max(widths[i], len([]rune(c)))
		}
	}
	line := func(row []string) string {
		var b strings.Builder
		b.WriteString("|")
		for i, c := range row {
			fmt.Fprintf(&b, " %s%s |", c, strings.Repeat(" ", widths[i]-len([]rune(c))))
		}
		return b.String()
	}
	var out strings.Builder
	out.WriteString(line(rows[0]) + "\n")
	sep := make([]string, len(rows[0]))
	for i := range sep {
		sep[i] = strings.Repeat("-", widths[i])
	}
	out.WriteString(line(sep) + "\n")
	for _, row := range rows[1:] {
		out.WriteString(line(row) + "\n")
	}
	_, err := io.WriteString(w, out.String())
	return err
}

// WriteTxnTable writes a Markdown table of the txn scenarios among
// results: per target the median MB/s in transactions, the median MB/s of
// the idempotent runs beside them, and txn/idempotent (below 1 is
// slower). It writes nothing when there is no txn scenario.
func WriteTxnTable(w io.Writer, results []Result) error {
	var txn []Result
	for _, r := range results {
		if r.Scenario.Kind == KindTxn {
			txn = append(txn, r)
		}
	}
	if len(txn) == 0 {
		return nil
	}
	header := []string{"scenario"}
	for _, t := range txn[0].Targets {
		header = append(header, t.Target+" txn MB/s", t.Target+" idempotent MB/s", t.Target+" txn/idempotent")
	}
	rows := [][]string{header}
	for _, r := range txn {
		row := []string{r.Name}
		for _, t := range r.Targets {
			txnMB, idemMB, ratio := "-", "-", "-"
			if len(t.Runs) > 0 {
				txnMB = fmt.Sprintf("%.1f", t.Median.MBPerSec)
			}
			if t.BaselineMedian != nil {
				idemMB = fmt.Sprintf("%.1f", t.BaselineMedian.MBPerSec)
			}
			if t.TxnRatio != nil {
				ratio = fmt.Sprintf("%.3f", *t.TxnRatio)
			}
			row = append(row, txnMB, idemMB, ratio)
		}
		for len(row) < len(header) {
			row = append(row, "-")
		}
		rows = append(rows, row[:len(header)])
	}
	return writeMarkdown(w, rows)
}
