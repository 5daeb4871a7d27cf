package chaos

import (
	"fmt"
	"testing"
	"time"
)

// TestGroupCheckerCatches plants each consumer group anomaly in a small
// synthetic history and requires it counted under its own name; the clean
// history counts nothing.
func TestGroupCheckerCatches(t *testing.T) {
	t.Parallel()
	s := time.Second
	commit := func(p int32, off int64, done time.Duration) GroupCommit {
		return GroupCommit{Group: Group, Member: "g1", Partition: p, Offset: off, Invoke: done - 10*time.Millisecond, Complete: done, OK: true}
	}
	sample := func(p int32, off int64, at time.Duration) GroupOffset {
		return GroupOffset{At: at, Group: Group, Partition: p, Offset: off}
	}
	gpoll := func(c string, p int32, assigned time.Duration, offs ...int64) Poll {
		pl := Poll{Consumer: c, Group: Group, AssignedAt: assigned, Partition: p, At: assigned + s, HW: 100}
		for _, o := range offs {
			pl.Offsets = append(pl.Offsets, o)
			pl.Values = append(pl.Values, fmt.Sprintf("v%d", o))
		}
		return pl
	}
	clean := GroupInput{
		Commits:      []GroupCommit{commit(0, 5, 1*s), commit(0, 9, 3*s), commit(1, 4, 2*s), {Partition: 1, Offset: 2, Complete: 4 * s}},
		Samples:      []GroupOffset{sample(0, -1, 0), sample(0, 5, 2*s), sample(1, 4, 2*s+1), sample(0, 9, 4*s)},
		Final:        map[string][]int32{"g1": {0}, "g2": {1}},
		FinalOffsets: map[int32]int64{0: 9, 1: 4},
		Partitions:   2,
	}
	cleanPolls := []Poll{gpoll("g1#1", 0, 0, 0, 1, 2, 3, 4), gpoll("g2#1", 0, 3*s+1, 9, 10)}
	with := func(f func(*GroupInput, *[]Poll)) (GroupInput, []Poll) {
		in := clean
		in.Commits = append([]GroupCommit(nil), clean.Commits...)
		in.Samples = append([]GroupOffset(nil), clean.Samples...)
		in.Final = map[string][]int32{"g1": {0}, "g2": {1}}
		in.FinalOffsets = map[int32]int64{0: 9, 1: 4}
		polls := append([]Poll(nil), cleanPolls...)
		f(&in, &polls)
		return in, polls
	}
	cases := []struct {
		name  string
		edit  func(*GroupInput, *[]Poll)
		count func(GroupAnomalies) int
	}{
		{"clean", func(*GroupInput, *[]Poll) {}, nil},
		{"commit-backwards", func(in *GroupInput, _ *[]Poll) {
			in.Commits = append(in.Commits, GroupCommit{Member: "g2", Partition: 0, Offset: 7, Invoke: 3*s + 1, Complete: 3*s + 2, OK: true})
		}, func(a GroupAnomalies) int { return a.CommitBackwards }},
		{"stale-commit-read: a sample after an acknowledged commit", func(in *GroupInput, _ *[]Poll) {
			in.Samples = []GroupOffset{sample(0, 5, 2*s), sample(0, 5, 3*s+1)} // sent after the ack of 9
		}, func(a GroupAnomalies) int { return a.StaleCommitRead }},
		{"stale-commit-read: samples going down", func(in *GroupInput, _ *[]Poll) { in.Samples = append(in.Samples, sample(0, 8, 5*s)) },
			func(a GroupAnomalies) int { return a.StaleCommitRead }},
		{"lost-commit in the final offsets", func(in *GroupInput, _ *[]Poll) { in.FinalOffsets[0] = 5 },
			func(a GroupAnomalies) int { return a.LostCommit }},
		{"lost-commit: a new owner starts below it", func(_ *GroupInput, polls *[]Poll) { (*polls)[1] = gpoll("g2#1", 0, 3*s+1, 6, 7) },
			func(a GroupAnomalies) int { return a.LostCommit }},
		{"ownership: twice", func(in *GroupInput, _ *[]Poll) { in.Final["g2"] = []int32{0, 1} },
			func(a GroupAnomalies) int { return a.Ownership }},
		{"ownership: nobody", func(in *GroupInput, _ *[]Poll) { in.Final["g2"] = nil },
			func(a GroupAnomalies) int { return a.Ownership }},
	}
	for _, tc := range cases {
		in, polls := with(tc.edit)
		res := CheckResult{Examples: map[string][]string{}}
		checkGroup(&res, in, polls)
		if tc.count == nil {
			if res.GroupTotal() != 0 {
				t.Errorf("%s: %+v, want none (%v)", tc.name, res.GroupAnomalies, res.Examples)
			}
			continue
		}
		if tc.count(res.GroupAnomalies) == 0 {
			t.Errorf("%s: not counted under its own name: %+v", tc.name, res.GroupAnomalies)
		}
		if res.StaleCommitRead > 0 && res.GroupTotal() != 0 {
			t.Errorf("%s: a stale read counted as a failure: %+v", tc.name, res.GroupAnomalies)
		}
	}
	// Through Check: a group member's first poll need not start at 0,
	// and the group anomalies count in Total.
	rep := Replica{Broker: 1, HW: 12, Values: map[int64]string{}}
	for o := int64(0); o < 12; o++ {
		rep.Values[o] = fmt.Sprintf("v%d", o)
	}
	res := Check(CheckInput{Replicas: map[int32][]Replica{0: {rep}}, Polls: cleanPolls, Group: clean})
	if res.Total() != 0 {
		t.Fatalf("clean group history through Check: %+v %v", res.Anomalies, res.Examples)
	}
	in, polls := with(func(in *GroupInput, _ *[]Poll) { in.Final["g2"] = nil })
	if res := Check(CheckInput{Replicas: map[int32][]Replica{0: {rep}}, Polls: polls, Group: in}); res.Total() == 0 {
		t.Fatal("an ownership anomaly does not count in Total")
	}
}
