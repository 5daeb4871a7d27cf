package kbench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Figure is one measurement of the scale benchmark (cmd/kscale, issue 16),
// written as one JSON line: the partition count of the cluster, the
// figure's name, its value and unit, and the target for that size
// ("" when the issue sets none).
type Figure struct {
	Size   int     `json:"size"`
	Figure string  `json:"figure"`
	Value  float64 `json:"value"`
	Unit   string  `json:"unit"`
	Target string  `json:"target"`
	// Broker is set for a per-broker figure.
	Broker *int32 `json:"broker,omitempty"`
	// Note says how it was measured when the name alone does not.
	Note string `json:"note,omitempty"`
}

// WriteJSON writes f as one line.
func (f Figure) WriteJSON(w io.Writer) error {
	line, err := json.Marshal(f)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", line)
	return err
}

// ScaleTarget is the target for a figure at a partition count, ""
// when there is none.
func ScaleTarget(figure string, size int) string {
	t, ok := scaleTargets[figure]
	if !ok {
		return ""
	}
	switch {
	case size <= 10000:
		return t[0]
	case size <= 100000:
		return t[1]
	}
	return ""
}

// scaleTargets are issue 16's table: the 10,000 and the 100,000 column.
var scaleTargets = map[string][2]string{
	"create_until_leaders":        {"≤ 10 s", "≤ 60 s"},
	"idle_cpu_pct":                {"≤ 5 %", "≤ 25 %"},
	"rss_mib":                     {"≤ 1024 MiB", "≤ 4096 MiB"},
	"controlled_shutdown_exit":    {"≤ 3 s", "≤ 15 s"},
	"kill_broker_failover":        {"≤ 2 s", "≤ 10 s"},
	"kill_controller_first_elect": {"≤ 3 s", "≤ 15 s"},
	"restart_isr_full":            {"≤ 60 s", "≤ 300 s"},
	"restart_after_kill_isr_full": {"≤ 60 s", "≤ 300 s"},
	"produce_spread_ratio":        {"≥ 0.8", "—"},
}

// WriteScaleTable writes figures as a Markdown table: one row per figure
// (per-broker figures as min / max over the brokers, or the one broker's
// value), one column per partition count, then the targets of the
// first size.
func WriteScaleTable(w io.Writer, figs []Figure) error {
	var sizes []int
	var names []string
	type key struct {
		name string
		size int
	}
	cells := map[key][]Figure{}
	for _, f := range figs {
		if !slices.Contains(sizes, f.Size) {
			sizes = append(sizes, f.Size)
		}
		if !slices.Contains(names, f.Figure) {
			names = append(names, f.Figure)
		}
		k := key{f.Figure, f.Size}
		cells[k] = append(cells[k], f)
	}
	if len(figs) == 0 {
		return nil
	}
	slices.Sort(sizes)
	header := []string{"figure", "unit"}
	for _, s := range sizes {
		header = append(header, thousands(float64(s))+" partitions")
	}
	header = append(header, "target ("+thousands(float64(sizes[0]))+")")
	rows := [][]string{header}
	for _, n := range names {
		row := []string{n, ""}
		target := ""
		for _, s := range sizes {
			fs := cells[key{n, s}]
			if len(fs) > 0 {
				row[1] = fs[0].Unit
				if s == sizes[0] {
					target = fs[0].Target
				}
			}
			row = append(row, scaleCell(fs))
		}
		rows = append(rows, append(row, target))
	}
	return writeMarkdown(w, rows)
}

// scaleCell is one cell: the value, or for per-broker figures each
// broker's value as id:value.
func scaleCell(fs []Figure) string {
	switch {
	case len(fs) == 0:
		return "-"
	case len(fs) == 1 && fs[0].Broker == nil:
		return formatValue(fs[0].Value)
	}
	parts := make([]string, 0, len(fs))
	for _, f := range fs {
		p := formatValue(f.Value)
		if f.Broker != nil {
			p = strconv.Itoa(int(*f.Broker)) + ":" + p
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, " ")
}

func formatValue(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case v == math.Trunc(v):
		return thousands(v)
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

// ProduceThroughput is one measured run of kbench's produce scenario on
// topic: records of recordBytes, acks=all with the idempotent producer,
// round-robin over the topic's partitions (its first `partitions` are
// primed with one record each, untimed), for d or 512 MiB.
func ProduceThroughput(ctx context.Context, t *Target, topic string, partitions, recordBytes int, d time.Duration) (Run, error) {
	o := DefaultOptions()
	o.Kinds, o.Sizes, o.Acks, o.Partitions = []string{KindProduce}, []int{recordBytes}, []string{"all"}, partitions
	s := o.Scenarios()[0]
	return produceRun(ctx, t, topic, s, d, o.MaxRunBytes)
}

// Admin is the target's admin client, for requests the scenarios do not
// make (the scale benchmark's CreateTopics of many topics at once).
func (t *Target) Admin() *kadm.Client { return t.adm }
