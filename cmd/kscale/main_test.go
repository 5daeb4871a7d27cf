package main

import (
	"io"
	"slices"
	"testing"
)

func TestLayout(t *testing.T) {
	for _, c := range []struct {
		n, topics, spread int
		want              []int
	}{
		{1000, 10, 1000, []int{1000}},
		{300, 10, 1000, []int{300}},
		{10000, 10, 1000, []int{1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000}},
		{100000, 10, 1000, []int{1000, 11000, 11000, 11000, 11000, 11000, 11000, 11000, 11000, 11000}},
		{1005, 10, 1000, []int{1000, 1, 1, 1, 1, 1}},
		{2003, 3, 1000, []int{1000, 502, 501}},
	} {
		got := layout(c.n, c.topics, c.spread)
		if !slices.Equal(got, c.want) {
			t.Errorf("layout(%d, %d, %d) = %v, want %v", c.n, c.topics, c.spread, got, c.want)
		}
		sum := 0
		for _, v := range got {
			sum += v
		}
		if sum != c.n {
			t.Errorf("layout(%d, ...) sums to %d", c.n, sum)
		}
	}
}

func TestParseArgs(t *testing.T) {
	if _, err := parseArgs(nil, io.Discard); err == nil {
		t.Error("no --cluster-dir accepted")
	}
	if _, err := parseArgs([]string{"--cluster-dir", "/x", "--skip", "nope"}, io.Discard); err == nil {
		t.Error("unknown --skip phase accepted")
	}
	if _, err := parseArgs([]string{"--cluster-dir", "/x", "--partitions", "0"}, io.Discard); err == nil {
		t.Error("--partitions 0 accepted")
	}
	o, err := parseArgs([]string{"--cluster-dir", "/x", "--skip", "produce,kill"}, io.Discard)
	if err != nil || !slices.Equal(o.skipPhases, []string{"produce", "kill"}) {
		t.Errorf("--skip produce,kill: %v %v", o.skipPhases, err)
	}
}

func TestFatalLine(t *testing.T) {
	for line, want := range map[string]bool{
		`{"level":"error","error":"open x.index: too many open files"}`: true,
		`{"level":"info","message":"partition state applied"}`:          false,
		`panic: runtime error: index out of range`:                      true,
	} {
		if got := fatalLine.MatchString(line); got != want {
			t.Errorf("fatalLine(%q) = %v, want %v", line, got, want)
		}
	}
}
