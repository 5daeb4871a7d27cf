package chaos

import (
	"slices"
	"sort"
)

// GroupAnomalies are the consumer group's checks (issue 17).
type GroupAnomalies struct {
	// CommitBackwards: an acknowledged commit of a partition below one
	// acknowledged before it was sent (real-time order, so responses that
	// cross do not count).
	CommitBackwards int
	// LostCommit: an acknowledged commit the group's durable state does
	// not reflect: the final committed offset, or the first poll of a
	// member assigned the partition after the acknowledgement, below it.
	LostCommit int
	// Ownership: after the final rebalance a partition owned by no
	// member or by more than one.
	Ownership int
	// StaleCommitRead counts OffsetFetch samples, sent after a commit was
	// acknowledged, that read less (or a committed offset going down
	// between samples). It is reported, not a failure: a coordinator that
	// was paused past its session (a zombie) answers from its cache until
	// it learns it lost the offsets partition, in Kafka too, and the
	// members read their offsets from the current coordinator, which
	// LostCommit checks through their first polls.
	StaleCommitRead int
}

// GroupTotal sums the group checks that Kafka's promise forbids.
func (a GroupAnomalies) GroupTotal() int { return a.CommitBackwards + a.LostCommit + a.Ownership }

// checkGroup runs the consumer group checks over in (nothing without a
// group) and the group members' polls.
func checkGroup(res *CheckResult, in GroupInput, polls []Poll) {
	if in.Partitions == 0 && len(in.Commits) == 0 && len(in.Samples) == 0 {
		return
	}
	acked := map[int32][]GroupCommit{}
	for _, c := range in.Commits {
		res.Commits++
		if c.OK {
			res.CommitsOK++
			acked[c.Partition] = append(acked[c.Partition], c)
		}
	}
	for p := range acked {
		sort.Slice(acked[p], func(i, j int) bool { return acked[p][i].Complete < acked[p][j].Complete })
	}
	// maxAckedBefore is the highest offset acknowledged for p before t.
	maxAckedBefore := func(p int32, t int64) (int64, GroupCommit) {
		best, at := int64(-1), GroupCommit{}
		for _, c := range acked[p] {
			if int64(c.Complete) >= t {
				break
			}
			if c.Offset > best {
				best, at = c.Offset, c
			}
		}
		return best, at
	}
	// Commits in real-time order: b after a when a was acknowledged
	// before b was sent.
	for p, cs := range acked {
		byInvoke := slices.Clone(cs)
		sort.Slice(byInvoke, func(i, j int) bool { return byInvoke[i].Invoke < byInvoke[j].Invoke })
		i, best, bestC := 0, int64(-1), GroupCommit{}
		for _, b := range byInvoke {
			for i < len(cs) && cs[i].Complete < b.Invoke {
				if cs[i].Offset > best {
					best, bestC = cs[i].Offset, cs[i]
				}
				i++
			}
			if b.Offset < best {
				res.CommitBackwards++
				res.note("commit-backwards", "p%d: %s's commit of %d sent at %s after %s's commit of %d was acknowledged at %s",
					p, b.Member, b.Offset, b.Invoke, bestC.Member, best, bestC.Complete)
			}
		}
	}
	samples := slices.Clone(in.Samples)
	sort.SliceStable(samples, func(i, j int) bool { return samples[i].At < samples[j].At })
	last := map[int32]GroupOffset{}
	for _, s := range samples {
		if prev, ok := last[s.Partition]; ok && s.Offset < prev.Offset {
			res.StaleCommitRead++
			res.note("stale-commit-read", "p%d: OffsetFetch sent at %s read %d after one sent at %s read %d", s.Partition, s.At, s.Offset, prev.At, prev.Offset)
		}
		if prev, ok := last[s.Partition]; !ok || s.Offset >= prev.Offset {
			last[s.Partition] = s
		}
		if want, c := maxAckedBefore(s.Partition, int64(s.At)); want >= 0 && s.Offset < want {
			res.StaleCommitRead++
			res.note("stale-commit-read", "p%d: OffsetFetch sent at %s read %d; %s's commit of %d was acknowledged at %s", s.Partition, s.At, s.Offset, c.Member, want, c.Complete)
		}
	}
	if in.FinalOffsets != nil {
		for p, cs := range acked {
			want := int64(-1)
			for _, c := range cs {
				want = max(want, c.Offset)
			}
			if got, ok := in.FinalOffsets[p]; !ok || got < want {
				res.LostCommit++
				res.note("lost-commit", "p%d: final committed offset %d (present %v), highest acknowledged commit %d", p, got, ok, want)
			}
		}
	}
	// A member assigned a partition starts at the committed offset: its
	// first poll below a commit acknowledged before the assignment read
	// an older commit.
	type cp struct {
		c string
		p int32
	}
	seen := map[cp]bool{}
	for _, pl := range polls {
		if pl.Group == "" || len(pl.Offsets) == 0 || seen[cp{pl.Consumer, pl.Partition}] {
			continue
		}
		seen[cp{pl.Consumer, pl.Partition}] = true
		if want, c := maxAckedBefore(pl.Partition, int64(pl.AssignedAt)); want >= 0 && pl.Offsets[0] < want {
			res.LostCommit++
			res.note("lost-commit", "%s p%d: first poll after its assignment at %s starts at %d; %s's commit of %d was acknowledged at %s",
				pl.Consumer, pl.Partition, pl.AssignedAt, pl.Offsets[0], c.Member, want, c.Complete)
		}
	}
	if in.Final != nil {
		owners := map[int32][]string{}
		for m, ps := range in.Final {
			for _, p := range ps {
				owners[p] = append(owners[p], m)
			}
		}
		for p := int32(0); p < in.Partitions; p++ {
			if len(owners[p]) != 1 {
				res.Ownership++
				sort.Strings(owners[p])
				res.note("ownership", "p%d owned by %v after the final rebalance", p, owners[p])
			}
		}
	}
}
