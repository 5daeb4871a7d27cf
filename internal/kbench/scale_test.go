package kbench

import (
	"bytes"
	"strings"
	"testing"
)

func TestParseStatCPU(t *testing.T) {
	// A command name with spaces and a ')' must not shift the fields.
	line := "4242 (broker (x) y) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 75 0 0 20 0 9 0 123 456 789"
	got, err := parseStatCPU([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if got != 325 {
		t.Fatalf("utime+stime = %d, want 325", got)
	}
	if _, err := parseStatCPU([]byte("12 (short) S 1 2")); err == nil {
		t.Fatal("a truncated stat line parsed")
	}
}

func TestParseStatusRSS(t *testing.T) {
	status := "Name:\tbroker\nVmPeak:\t  999 kB\nVmRSS:\t   41234 kB\nThreads:\t9\n"
	got, err := parseStatusRSS(strings.NewReader(status))
	if err != nil || got != 41234 {
		t.Fatalf("VmRSS = %d, %v; want 41234", got, err)
	}
	if _, err := parseStatusRSS(strings.NewReader("Name:\tx\n")); err == nil {
		t.Fatal("a status without VmRSS parsed")
	}
}

func TestScaleTableAndTargets(t *testing.T) {
	b0, b1 := int32(0), int32(1)
	figs := []Figure{
		{Size: 1000, Figure: "create_until_leaders", Value: 5.83, Unit: "s", Target: ScaleTarget("create_until_leaders", 1000)},
		{Size: 1000, Figure: "rss_mib", Value: 41, Unit: "MiB", Broker: &b0},
		{Size: 1000, Figure: "rss_mib", Value: 43.5, Unit: "MiB", Broker: &b1},
		{Size: 10000, Figure: "create_until_leaders", Value: 12, Unit: "s"},
	}
	var w bytes.Buffer
	if err := WriteScaleTable(&w, figs); err != nil {
		t.Fatal(err)
	}
	out := w.String()
	for _, want := range []string{"1,000 partitions", "10,000 partitions", "5.83", "0:41 1:43.5", "≤ 10 s"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// rss_mib has no 10,000 value: a dash, not a zero.
	if !strings.Contains(out, "| -") {
		t.Errorf("missing cell not shown as -:\n%s", out)
	}
	if ScaleTarget("kill_broker_failover", 100000) != "≤ 10 s" || ScaleTarget("no_such", 1000) != "" {
		t.Error("ScaleTarget")
	}
	var j bytes.Buffer
	if err := figs[1].WriteJSON(&j); err != nil || !strings.Contains(j.String(), `"broker":0`) {
		t.Fatalf("json %q, %v", j.String(), err)
	}
}
