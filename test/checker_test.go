package test

import "testing"

// TestHistoryChecker is the checker's negative control: each case breaks
// one property and must be caught, so a passing client test means something.
func TestHistoryChecker(t *testing.T) {
	t.Parallel()
	rec := func(p int32, o int64, k, v string) Rec {
		return Rec{Partition: p, Offset: o, Key: []byte(k), Value: []byte(v), Headers: []Header{{Key: "h", Value: []byte(k)}}}
	}
	acked := []Rec{rec(0, 0, "a", "1"), rec(0, 1, "b", "2"), rec(1, 0, "c", "3")}
	withHeader := func(r Rec, v string) Rec { r.Headers = []Header{{Key: "h", Value: []byte(v)}}; return r }
	noOffset := func(r Rec) Rec { r.Offset = -1; return r }
	cases := []struct {
		name   string
		acked  []Rec
		read   []Rec
		field  func(CheckResult) int
		passes bool
	}{
		{"all good", acked, []Rec{acked[0], acked[1], acked[2]}, nil, true},
		{"all good by key", []Rec{noOffset(acked[0]), noOffset(acked[1])}, []Rec{acked[0], acked[1]}, nil, true},
		{"lost", acked, []Rec{acked[0], acked[2]}, func(r CheckResult) int { return r.Lost }, false},
		{"lost by key", []Rec{noOffset(acked[0]), noOffset(acked[1])}, []Rec{acked[0]}, func(r CheckResult) int { return r.Lost }, false},
		{"other value", acked, []Rec{acked[0], rec(0, 1, "b", "X"), acked[2]}, func(r CheckResult) int { return r.Mismatched }, false},
		{"other header", acked, []Rec{acked[0], withHeader(acked[1], "zz"), acked[2]}, func(r CheckResult) int { return r.Mismatched }, false},
		{"duplicate", acked, []Rec{acked[0], acked[1], rec(0, 2, "a", "1"), acked[2]}, func(r CheckResult) int { return r.Duplicated }, false},
		{"gap", acked[:1], []Rec{acked[0], rec(0, 2, "z", "9")}, func(r CheckResult) int { return r.Gaps }, false},
		{"unordered", acked, []Rec{acked[1], acked[0], acked[2]}, func(r CheckResult) int { return r.Unordered }, false},
		{"offset read twice", acked, []Rec{acked[0], acked[1], acked[1], acked[2]}, func(r CheckResult) int { return r.Unordered }, false},
		{"two acks one offset", []Rec{acked[0], rec(0, 0, "q", "7")}, []Rec{acked[0]}, func(r CheckResult) int { return r.Inconsistent }, false},
		{"unacknowledged read", acked[:1], []Rec{acked[0], acked[1]}, func(r CheckResult) int { return r.Extra }, false},
	}
	for _, tc := range cases {
		res := analyzeHistory(tc.acked, tc.read, false)
		if res.OK(false) != tc.passes {
			t.Errorf("%s: OK=%v, want %v (%+v)", tc.name, res.OK(false), tc.passes, res)
		}
		if tc.field != nil && tc.field(res) == 0 {
			t.Errorf("%s: not counted under its own check: %+v", tc.name, res)
		}
	}
}
