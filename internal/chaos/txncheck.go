package chaos

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// TxnWrite is one record a transaction produced.
type TxnWrite struct {
	Topic     string
	Partition int32
	Value     string
	Offset    int64 // -1 unless its produce was acknowledged
}

// Txn is one transaction of a transactional producer, from
// BeginTransaction to the answer to EndTxn. Times are monotonic since the
// run started.
type Txn struct {
	Producer string // transactional.id
	Seq      int64
	Writes   []TxnWrite
	// Group and Offsets are the consumer-group offsets committed inside
	// the transaction (AddOffsetsToTxn + TxnOffsetCommit): input
	// partition -> next offset to consume.
	Group   string
	Offsets map[int32]int64
	// Commit: EndTxn was sent with commit (or, for a consume-transform-
	// produce transaction, the session tried to commit and the outcome
	// is not known to be an abort). False: the transaction was aborted or
	// never ended, so it can never commit.
	Commit bool
	// Outcome of EndTxn: OK acknowledged, Info unknown (an error or a
	// timeout), Fail refused.
	Outcome  Outcome
	Invoke   time.Duration // BeginTransaction
	End      time.Duration // EndTxn sent: before this, the outcome was undecided
	Complete time.Duration // EndTxn answered
	Err      string
}

// committed: the commit was requested and acknowledged.
func (t *Txn) committed() bool { return t.Commit && t.Outcome == OK }

// GroupOffset is one sample of a group's committed offset of one
// partition, from an OffsetFetch with require_stable (KIP-447), so a
// partition with a pending transactional commit is not sampled. At is
// when the request was sent.
type GroupOffset struct {
	At        time.Duration
	Group     string
	Partition int32
	Offset    int64 // -1: none committed
}

// TxnInput is the transactional workload's part of CheckInput.
type TxnInput struct {
	Txns []Txn
	// Polls are read_committed polls during the run of the topics the
	// transactions write (Topic set).
	Polls []Poll
	// Final is the read_committed read, after every transaction ended,
	// of those topics from offset 0 to the LSO.
	Final []Poll
	// GroupOffsets are the consume-transform-produce group's samples; the
	// last ones are taken after the workload stopped.
	GroupOffsets []GroupOffset
	// Input is the consume-transform-produce input topic's final log by
	// partition (offset -> value), and OutputTopic the topic it writes:
	// an output value is the input value, "@", and the transaction's
	// producer and sequence, so that each is unique.
	Input       map[int32]map[int64]string
	OutputTopic string
}

// TxnAnomalies are the transactional checks of issue 18, in the style of
// Jepsen's Kafka workload.
type TxnAnomalies struct {
	AbortedRead      int // G1a: a read_committed read of an aborted transaction's value
	PrecommittedRead int // a read_committed read of a value before its transaction's EndTxn was sent
	PartialTxn       int // a committed (or indeterminate) transaction partly visible in the final read
	LostTxn          int // an acknowledged commit wholly absent from the final read
	TxnDuplicate     int // a value twice in the final read; an input value output twice
	AbortedOffset    int // a group offset that no committed (or indeterminate) transaction wrote
	MissingOffset    int // a group's final offset (sampled after the workload stopped) below what an acknowledged commit committed
	OffsetOutput     int // the final group offsets disagree with the committed output
	// StaleOffsetRead counts the samples taken during the run, after a
	// commit's acknowledgement, that read less than it committed. It is
	// reported, not a failure (as GroupAnomalies.StaleCommitRead): a
	// coordinator that lost its offsets partition answers OffsetFetch
	// from its cache until the LeaderAndIsr demoting it arrives, in Kafka
	// too, and require_stable only hides the commits pending there. The
	// durable state is what MissingOffset and OffsetOutput check.
	StaleOffsetRead int
}

// TxnTotal is the sum of the transactional anomalies.
func (a TxnAnomalies) TxnTotal() int {
	return a.AbortedRead + a.PrecommittedRead + a.PartialTxn + a.LostTxn + a.TxnDuplicate + a.AbortedOffset +
		a.MissingOffset + a.OffsetOutput
}

// TxnCounts are the transactional workload's figures for the report.
type TxnCounts struct {
	Txns, TxnCommitted, TxnAborted, TxnInfo int
	TxnPollsSeen                            int // values read under read_committed during the run
}

// outputInput is the input value an output value was made from.
func outputInput(v string) (string, bool) {
	i := strings.LastIndexByte(v, '@')
	if i < 0 {
		return "", false
	}
	return v[:i], true
}

// checkTxns runs the transactional checks.
func checkTxns(res *CheckResult, in TxnInput) {
	if len(in.Txns) == 0 && len(in.Polls) == 0 && len(in.Final) == 0 && len(in.GroupOffsets) == 0 {
		return
	}
	res.Txns = len(in.Txns)
	owner := map[string]int{} // value -> index in in.Txns
	for i := range in.Txns {
		t := &in.Txns[i]
		switch {
		case t.committed():
			res.TxnCommitted++
		case !t.Commit:
			res.TxnAborted++
		default:
			res.TxnInfo++
		}
		for _, w := range t.Writes {
			owner[w.Value] = i
		}
	}
	name := func(t *Txn) string { return fmt.Sprintf("%s#%d", t.Producer, t.Seq) }

	// G1a and precommitted reads, during the run and in the final read.
	read := func(pl Poll, final bool) {
		for i, v := range pl.Values {
			ti, ok := owner[v]
			if !ok {
				continue
			}
			t := &in.Txns[ti]
			if !final {
				res.TxnPollsSeen++
			}
			switch {
			case !t.Commit:
				res.AbortedRead++
				res.note("aborted-read", "%s read %s/%d@%d %q of aborted %s (%s)", pl.Consumer, pl.Topic, pl.Partition, pl.Offsets[i], v, name(t), t.Err)
			case !final && pl.At < t.End:
				res.PrecommittedRead++
				res.note("precommitted-read", "%s read %s/%d@%d %q at %s; %s's EndTxn was sent at %s", pl.Consumer, pl.Topic, pl.Partition, pl.Offsets[i], v, pl.At, name(t), t.End)
			}
		}
	}
	for _, pl := range in.Polls {
		read(pl, false)
	}
	// Wholly visible or wholly absent, and duplicates, in the final read.
	type at struct {
		topic string
		p     int32
		o     int64
	}
	seen := map[string][]at{}
	for _, pl := range in.Final {
		read(pl, true)
		for i, v := range pl.Values {
			seen[v] = append(seen[v], at{pl.Topic, pl.Partition, pl.Offsets[i]})
		}
	}
	for v, ats := range seen {
		if len(ats) > 1 {
			res.TxnDuplicate++
			res.note("txn-duplicate", "%q at %v in the final read", v, ats)
		}
	}
	for i := range in.Txns {
		t := &in.Txns[i]
		if !t.Commit || len(t.Writes) == 0 {
			continue
		}
		var present, absent []string
		for _, w := range t.Writes {
			if len(seen[w.Value]) > 0 {
				present = append(present, w.Value)
			} else {
				absent = append(absent, w.Value)
			}
		}
		switch {
		case len(present) > 0 && len(absent) > 0:
			res.PartialTxn++
			res.note("partial-txn", "%s (%s): %v visible, %v not", name(t), t.Outcome, present, absent)
		case len(present) == 0 && t.committed():
			res.LostTxn++
			res.note("lost-txn", "%s acknowledged at %s; none of %d values visible", name(t), t.Complete, len(t.Writes))
		}
	}
	checkGroupOffsets(res, in, name)
}

// checkGroupOffsets: offsets committed in a transaction apply exactly
// when it commits.
func checkGroupOffsets(res *CheckResult, in TxnInput, name func(*Txn) string) {
	type po struct {
		p int32
		o int64
	}
	writers := map[po][]*Txn{}
	for i := range in.Txns {
		t := &in.Txns[i]
		for p, o := range t.Offsets {
			writers[po{p, o}] = append(writers[po{p, o}], t)
		}
	}
	reported := map[po]bool{}
	for _, g := range in.GroupOffsets {
		if g.Offset < 0 {
			continue
		}
		k := po{g.Partition, g.Offset}
		ok := false
		for _, t := range writers[k] {
			ok = ok || t.Commit
		}
		if !ok && !reported[k] {
			reported[k] = true
			res.AbortedOffset++
			what := "no transaction wrote it"
			if len(writers[k]) > 0 {
				what = fmt.Sprintf("only aborted %s wrote it", name(writers[k][0]))
			}
			res.note("aborted-offset", "group %s p%d at offset %d (sampled at %s): %s", g.Group, g.Partition, g.Offset, g.At, what)
		}
	}
	// The last sample of each partition, taken after the workload
	// stopped: the group's durable offsets.
	final := map[int32]GroupOffset{}
	for _, g := range in.GroupOffsets {
		if f, ok := final[g.Partition]; !ok || g.At >= f.At {
			final[g.Partition] = g
		}
	}
	for i := range in.Txns {
		t := &in.Txns[i]
		if !t.committed() {
			continue
		}
		for p, o := range t.Offsets {
			if f, ok := final[p]; ok && f.At > t.Complete && f.Offset < o {
				res.MissingOffset++
				res.note("missing-offset", "%s committed p%d offset %d, acknowledged at %s; the final sample at %s reads %d", name(t), p, o, t.Complete, f.At, f.Offset)
				continue
			}
			for _, g := range in.GroupOffsets {
				if g.Partition == p && g.At > t.Complete && g.Offset < o {
					res.StaleOffsetRead++
					res.note("stale-offset-read", "%s committed p%d offset %d, acknowledged at %s; sampled %d at %s", name(t), p, o, t.Complete, g.Offset, g.At)
					break
				}
			}
		}
	}
	// The final offsets against the committed output: every input value
	// below the final offset of its partition is in the output once, and
	// none at or above it.
	if in.Input == nil || in.OutputTopic == "" {
		return
	}
	outputs := map[string]int{} // input value -> times in the output
	for _, pl := range in.Final {
		if pl.Topic != in.OutputTopic {
			continue
		}
		for _, v := range pl.Values {
			if iv, ok := outputInput(v); ok {
				outputs[iv]++
			}
		}
	}
	parts := make([]int32, 0, len(in.Input))
	for p := range in.Input {
		parts = append(parts, p)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	for _, p := range parts {
		end := max(final[p].Offset, 0)
		offs := make([]int64, 0, len(in.Input[p]))
		for o := range in.Input[p] {
			offs = append(offs, o)
		}
		sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
		for _, o := range offs {
			v := in.Input[p][o]
			n := outputs[v]
			switch {
			case o < end && n == 0:
				res.OffsetOutput++
				res.note("offset-output", "input p%d@%d %q is below the group's final offset %d but not in the output", p, o, v, end)
			case o < end && n > 1:
				res.TxnDuplicate++
				res.note("txn-duplicate", "input p%d@%d %q is in the output %d times", p, o, v, n)
			case o >= end && n > 0:
				res.OffsetOutput++
				res.note("offset-output", "input p%d@%d %q is in the output but the group's final offset is %d", p, o, v, end)
			}
		}
	}
}
