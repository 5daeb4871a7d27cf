package chaos

import (
	"fmt"
	"slices"
	"sort"
	"time"
)

// Anomalies are the checker's counts, named as in reliability.md §6.2.
type Anomalies struct {
	Lost               int // ok write not at its offset in the final log
	InconsistentOffset int // one (partition, offset) with two values
	Duplicate          int // one value at two offsets of the final log
	DuplicateNonzero   int // ... none of them offset 0
	// DuplicateEpochBump counts duplicates that are not failures: the
	// copies carry one producer id under different producer epochs, and
	// the producer reset its id (ProducerReset) on an answer from a broker
	// ZooKeeper no longer named leader of that partition. See
	// epochBumpDuplicate. Not in Total.
	DuplicateEpochBump int
	NonmonotonicPoll   int // a consumer went backwards
	// ConsumerRewind counts polls that went backwards to exactly where
	// kgo reset the consumer after reporting data loss (ErrDataLoss):
	// the client's decision on a broker's answer (a deposed leader's
	// OFFSET_OUT_OF_RANGE, its stale metadata, which kgo accepts after
	// five epoch rewinds), reported, not a failure; the records read
	// again are checked like any others (read-then-vanished, lost). Not
	// in Total.
	ConsumerRewind   int
	PollSkip         int // a consumer jumped over offsets
	NonmonotonicSend int // one producer's later ack at a lower offset
	ReadThenVanished int // polled, then not in the final log at that offset
	AboveHW          int // polled at or above the response's HW
	FailedVisible    int // a fail write's value is in the final log or a poll
	Divergent        int // replicas disagree below the minimum HW
	EpochCheckpoint  int // leader-epoch-checkpoint not increasing
	EpochViolation   int // leader_epoch decreased, or two leaders in one epoch
	ControllerEpoch  int // controller epoch decreased
	UncleanLeader    int // unclean off, yet a leader outside the last ISR
	// TxnAnomalies are the transactional checks (txn scenarios only).
	TxnAnomalies
	// GroupAnomalies are the consumer group's checks.
	GroupAnomalies
}

// Total is the sum of every count that Kafka's promise forbids.
func (a Anomalies) Total() int {
	return a.Lost + a.InconsistentOffset + a.Duplicate + a.NonmonotonicPoll + a.PollSkip + a.NonmonotonicSend +
		a.ReadThenVanished + a.AboveHW + a.FailedVisible + a.Divergent + a.EpochCheckpoint + a.EpochViolation +
		a.ControllerEpoch + a.UncleanLeader + a.TxnTotal() + a.GroupTotal()
}

// ByName is every count of the main and group checks under the name its
// examples use; TotalExcept sums them without the allowed names.
func (a Anomalies) ByName() map[string]int {
	return map[string]int{
		"lost": a.Lost, "inconsistent-offset": a.InconsistentOffset, "duplicate": a.Duplicate,
		"nonmonotonic-poll": a.NonmonotonicPoll, "poll-skip": a.PollSkip, "nonmonotonic-send": a.NonmonotonicSend,
		"read-then-vanished": a.ReadThenVanished, "above-hw": a.AboveHW, "failed-visible": a.FailedVisible,
		"divergent": a.Divergent, "epoch-checkpoint": a.EpochCheckpoint, "epoch": a.EpochViolation,
		"controller-epoch": a.ControllerEpoch, "unclean-leader": a.UncleanLeader,
		"commit-backwards": a.CommitBackwards, "lost-commit": a.LostCommit, "ownership": a.Ownership,
	}
}

// TotalExcept is Total without the counts named in allowed.
func (a Anomalies) TotalExcept(allowed []string) int {
	n := a.Total()
	byName := a.ByName()
	for _, name := range allowed {
		n -= byName[name]
	}
	return n
}

// CheckInput is what a run hands the checker.
type CheckInput struct {
	Writes   []Write
	Polls    []Poll
	Samples  []Sample
	Replicas map[int32][]Replica // by partition
	// FinalLeader names the replica whose log is "the final log" of each
	// partition; -1 picks the replica with the highest HW.
	FinalLeader map[int32]int32
	// UncleanAllowed turns off the leader-from-last-ISR check.
	UncleanAllowed bool
	// Txn is the transactional workload's history, empty unless the
	// scenario runs it.
	Txn TxnInput
	// Group is the consumer group's history (commits, OffsetFetch
	// samples, the final assignment); empty without a group.
	Group GroupInput
	// Resets are the kgo producers' producer id resets.
	Resets []ProducerReset
	// Rewinds are the kgo consumers' resets after reported data loss.
	Rewinds []ConsumerRewind
}

// CheckResult is the checker's verdict material.
type CheckResult struct {
	Anomalies
	Attempted, OKs, Fails, Infos, InfoSeen int
	Commits, CommitsOK                     int // consumer group commits (per partition)
	TxnCounts
	// Examples holds up to 5 instances per anomaly name.
	Examples map[string][]string
}

func (r *CheckResult) note(name, format string, args ...any) {
	if len(r.Examples[name]) < 5 {
		r.Examples[name] = append(r.Examples[name], fmt.Sprintf(format, args...))
	}
}

// Check runs every check of reliability.md §6.2 and, for a transactional
// history, the checks of issue 18 (checkTxns).
func Check(in CheckInput) CheckResult {
	res := CheckResult{Examples: map[string][]string{}}
	final := map[int32]map[int64]string{}
	stamps := map[int32]map[int64]Stamp{}
	for p, reps := range in.Replicas {
		var pick *Replica
		for i := range reps {
			if want, ok := in.FinalLeader[p]; ok && want >= 0 && reps[i].Broker == want {
				pick = &reps[i]
			}
		}
		if pick == nil {
			for i := range reps {
				if pick == nil || reps[i].HW > pick.HW {
					pick = &reps[i]
				}
			}
		}
		if pick != nil {
			final[p] = pick.Values
			stamps[p] = pick.Stamps
		}
	}
	// where[p][value] = offsets in the final log.
	where := map[int32]map[string][]int64{}
	for p, log := range final {
		m := map[string][]int64{}
		for o, v := range log {
			m[v] = append(m[v], o)
		}
		where[p] = m
	}

	// 1 lost, 6 failed-visible, 9 info resolution, 4 nonmonotonic-send.
	type key struct {
		p int32
		o int64
	}
	vals := map[key]map[string]bool{}
	addVal := func(p int32, o int64, v string) {
		k := key{p, o}
		if vals[k] == nil {
			vals[k] = map[string]bool{}
		}
		vals[k][v] = true
	}
	failed := map[string]bool{}
	type ps struct {
		prod string
		p    int32
	}
	sends := map[ps][]Write{}
	for _, w := range in.Writes {
		res.Attempted++
		switch w.Outcome {
		case OK:
			res.OKs++
			addVal(w.Partition, w.Offset, w.Value)
			sends[ps{w.Producer, w.Partition}] = append(sends[ps{w.Producer, w.Partition}], w)
			if got, ok := final[w.Partition][w.Offset]; !ok || got != w.Value {
				res.Lost++
				res.note("lost", "%s p%d@%d acknowledged at %s; final log has %q", w.Value, w.Partition, w.Offset, w.Complete, got)
			}
		case Fail:
			res.Fails++
			failed[w.Value] = true
			if offs := where[w.Partition][w.Value]; len(offs) > 0 {
				res.FailedVisible++
				res.note("failed-visible", "%s failed (%s) but is at p%d@%v", w.Value, w.Err, w.Partition, offs)
			}
		case Info:
			res.Infos++
			if len(where[w.Partition][w.Value]) > 0 {
				res.InfoSeen++
			}
		}
	}
	for k, ws := range sends {
		sort.Slice(ws, func(i, j int) bool { return ws[i].Seq < ws[j].Seq })
		for i := 1; i < len(ws); i++ {
			if ws[i].Offset <= ws[i-1].Offset {
				res.NonmonotonicSend++
				res.note("nonmonotonic-send", "%s p%d: seq %d at %d after seq %d at %d", k.prod, k.p, ws[i].Seq, ws[i].Offset, ws[i-1].Seq, ws[i-1].Offset)
			}
		}
	}
	// 4 poll order, 5 read-then-vanished and HW.
	type cp struct {
		c string
		p int32
	}
	next := map[cp]int64{}
	usedRewind := make([]bool, len(in.Rewinds))
	for _, pl := range in.Polls {
		for i, o := range pl.Offsets {
			v := pl.Values[i]
			addVal(pl.Partition, o, v)
			if i > 0 && o <= pl.Offsets[i-1] {
				res.NonmonotonicPoll++
				res.note("nonmonotonic-poll", "%s p%d: offset %d after %d within one poll", pl.Consumer, pl.Partition, o, pl.Offsets[i-1])
			}
			if o >= pl.HW {
				res.AboveHW++
				res.note("above-hw", "%s p%d@%d polled with HW %d", pl.Consumer, pl.Partition, o, pl.HW)
			}
			if got, ok := final[pl.Partition][o]; !ok || got != v {
				res.ReadThenVanished++
				res.note("read-then-vanished", "%s p%d@%d read %q at %s; final log has %q", pl.Consumer, pl.Partition, o, v, pl.At, got)
			}
			if failed[v] {
				res.FailedVisible++
				res.note("failed-visible", "%s failed but polled at p%d@%d", v, pl.Partition, o)
			}
		}
		if len(pl.Offsets) == 0 {
			continue
		}
		k := cp{pl.Consumer, pl.Partition}
		if want, ok := next[k]; ok {
			switch first := pl.Offsets[0]; {
			case first > want:
				res.PollSkip++
				res.note("poll-skip", "%s p%d: poll at %s starts at %d, expected %d", pl.Consumer, pl.Partition, pl.At, first, want)
			case first < want:
				if i := rewindTo(in.Rewinds, usedRewind, pl, first); i >= 0 {
					usedRewind[i] = true
					rw := in.Rewinds[i]
					res.ConsumerRewind++
					res.note("consumer-rewind", "%s p%d: poll at %s starts at %d, expected %d: kgo reported data loss at %s (consumed to %d in epoch %d, reset to %d in epoch %d)",
						pl.Consumer, pl.Partition, pl.At, first, want, rw.At, rw.ConsumedTo, rw.ConsumedToEpoch, rw.ResetTo, rw.ResetToEpoch)
					break
				}
				res.NonmonotonicPoll++
				res.note("nonmonotonic-poll", "%s p%d: poll at %s starts at %d, expected %d", pl.Consumer, pl.Partition, pl.At, first, want)
			}
		} else if pl.Offsets[0] != 0 && pl.Group == "" {
			// A group member starts at the committed offset (checked by
			// checkGroup); an assigned consumer at 0.
			res.PollSkip++
			res.note("poll-skip", "%s p%d: first poll starts at %d, not 0", pl.Consumer, pl.Partition, pl.Offsets[0])
		}
		next[k] = pl.Offsets[len(pl.Offsets)-1] + 1
	}
	// 2 inconsistent offsets (acks, polls and the final log).
	for p, log := range final {
		for o, v := range log {
			addVal(p, o, v)
		}
	}
	for k, vs := range vals {
		if len(vs) > 1 {
			res.InconsistentOffset++
			var l []string
			for v := range vs {
				l = append(l, v)
			}
			sort.Strings(l)
			res.note("inconsistent-offset", "p%d@%d holds %v", k.p, k.o, l)
		}
	}
	// 3 duplicates in the final log.
	producerOf := map[string]string{}
	for _, w := range in.Writes {
		producerOf[w.Value] = w.Producer
	}
	for p, m := range where {
		for v, offs := range m {
			if len(offs) > 1 {
				slices.Sort(offs)
				if why, ok := epochBumpDuplicate(offs, stamps[p], in.Resets, producerOf[v], in.Samples); ok {
					res.DuplicateEpochBump++
					res.note("duplicate-epoch-bump", "%s at p%d offsets %v: %s", v, p, offs, why)
					continue
				}
				res.Duplicate++
				if !slices.Contains(offs, 0) {
					res.DuplicateNonzero++
				}
				res.note("duplicate", "%s at p%d offsets %v%s", v, p, offs, describeStamps(offs, stamps[p]))
			}
		}
	}
	// 7 replica divergence below the minimum HW, and epoch checkpoints.
	for p, reps := range in.Replicas {
		minHW := int64(-1)
		for _, r := range reps {
			if r.HW >= 0 && (minHW < 0 || r.HW < minHW) {
				minHW = r.HW
			}
			for i := 1; i < len(r.Epochs); i++ {
				if r.Epochs[i][0] <= r.Epochs[i-1][0] || r.Epochs[i][1] < r.Epochs[i-1][1] {
					res.EpochCheckpoint++
					res.note("epoch-checkpoint", "broker %d p%d: leader-epoch-checkpoint %v", r.Broker, p, r.Epochs)
					break
				}
			}
		}
		for o := int64(0); o < minHW; o++ {
			var first string
			var firstBroker int32
			var have bool
			for _, r := range reps {
				v, ok := r.Values[o]
				if !ok {
					continue // below log start or a control record
				}
				if !have {
					first, firstBroker, have = v, r.Broker, true
					continue
				}
				if v != first {
					res.Divergent++
					res.note("divergent", "p%d@%d: broker %d has %q, broker %d has %q (min HW %d)", p, o, firstBroker, first, r.Broker, v, minHW)
					break
				}
			}
		}
	}
	checkSamples(&res, in.Samples, in.UncleanAllowed)
	checkTxns(&res, in.Txn)
	checkGroup(&res, in.Group, in.Polls)
	return res
}

// checkSamples is check 10: leader_epoch never decreases, one leader per
// epoch, the controller epoch never decreases and, with unclean election
// off, a new leader was in the ISR of the previous sample.
func checkSamples(res *CheckResult, samples []Sample, uncleanAllowed bool) {
	type pe struct {
		p     int
		epoch int32
	}
	leaderOf := map[pe]int32{}
	ctrlEpoch := int32(-1)
	var prev *Sample
	for i := range samples {
		s := &samples[i]
		if s.ControllerEpoch >= 0 {
			if s.ControllerEpoch < ctrlEpoch {
				res.ControllerEpoch++
				res.note("controller-epoch", "at %s controller epoch %d after %d", s.At, s.ControllerEpoch, ctrlEpoch)
			}
			ctrlEpoch = max(ctrlEpoch, s.ControllerEpoch)
		}
		for p, st := range s.States {
			if st.Leader == -2 {
				continue
			}
			if prev != nil && p < len(prev.States) && prev.States[p].Leader != -2 {
				ps := prev.States[p]
				if st.LeaderEpoch < ps.LeaderEpoch {
					res.EpochViolation++
					res.note("epoch", "p%d at %s: leader_epoch %d after %d", p, s.At, st.LeaderEpoch, ps.LeaderEpoch)
				}
				// The previous sample is the ISR the election chose from
				// only if no write came between them: a leader that added
				// a replica to the ISR just before the controller elected
				// it (a reassignment's new leader) is not unclean.
				consecutive := st.ZkVersion <= ps.ZkVersion+1
				if !uncleanAllowed && consecutive && st.Leader >= 0 && st.LeaderEpoch > ps.LeaderEpoch && st.Leader != ps.Leader &&
					len(ps.ISR) > 0 && !slices.Contains(ps.ISR, st.Leader) {
					res.UncleanLeader++
					res.note("unclean-leader", "p%d at %s: leader %d (epoch %d) not in the previous ISR %v", p, s.At, st.Leader, st.LeaderEpoch, ps.ISR)
				}
			}
			if st.Leader >= 0 {
				k := pe{p, st.LeaderEpoch}
				if l, ok := leaderOf[k]; ok && l != st.Leader {
					res.EpochViolation++
					res.note("epoch", "p%d leader_epoch %d led by %d and %d", p, st.LeaderEpoch, l, st.Leader)
				}
				leaderOf[k] = st.Leader
			}
		}
		prev = s
	}
}

// epochBumpDuplicate reports whether the copies of one value at offs
// (ascending) are a duplicate Kafka's idempotent producer also makes, with
// the evidence: every copy carries the same producer id, each later copy
// under a higher producer epoch, and the producer reset its id (kgo's
// KIP-360 epoch bump) on an OUT_OF_ORDER_SEQUENCE_NUMBER or
// UNKNOWN_PRODUCER_ID from a broker that the ZooKeeper samples did not
// show as the leader of the partition it answered for: a deposed leader,
// not yet told, answering from its own divergent log, which Kafka's
// ZooKeeper-era broker also does (a Produce carries no leader epoch).
// The producer then sends every record it holds again under the new
// epoch from sequence 0, and a record whose first copy had reached the
// real leader (its acknowledgement lost) is written twice: brokers
// deduplicate per producer id and epoch only. Kafka's producer rewrites
// in-flight sequences the same way (TransactionManager.canRetry bumps
// the epoch on OUT_OF_ORDER_SEQUENCE_NUMBER; KAFKA-14034). Copies under
// one epoch, or without a reset from a deposed leader, stay failures.
func epochBumpDuplicate(offs []int64, stamps map[int64]Stamp, resets []ProducerReset, producer string, samples []Sample) (string, bool) {
	if len(offs) < 2 || stamps == nil || producer == "" {
		return "", false
	}
	first, ok := stamps[offs[0]]
	if !ok || first.ProducerID < 0 {
		return "", false
	}
	prev := first
	for _, o := range offs[1:] {
		st, ok := stamps[o]
		if !ok || st.ProducerID != first.ProducerID || st.ProducerEpoch <= prev.ProducerEpoch {
			return "", false
		}
		prev = st
	}
	for _, r := range resets {
		if r.Producer != producer || r.ProducerID != first.ProducerID || r.ProducerEpoch < first.ProducerEpoch ||
			r.ProducerEpoch >= prev.ProducerEpoch || r.Broker < 0 || r.Partition < 0 {
			continue
		}
		leader, ok := sampledLeader(samples, r.Partition, r.At)
		if !ok || leader == r.Broker {
			continue
		}
		return fmt.Sprintf("%s; %s reset producer id %d epoch %d at %s on %s from broker %d for p%d, whose sampled leader was %d",
			stampList(offs, stamps), producer, r.ProducerID, r.ProducerEpoch, r.At.Round(time.Millisecond), r.Err, r.Broker, r.Partition, leader), true
	}
	return "", false
}

// sampledLeader is partition p's leader in the last readable sample at or
// before at.
func sampledLeader(samples []Sample, p int32, at time.Duration) (int32, bool) {
	leader, ok := int32(0), false
	for _, s := range samples {
		if s.At > at {
			break
		}
		if int(p) < len(s.States) && s.States[p].Leader != -2 {
			leader, ok = s.States[p].Leader, true
		}
	}
	return leader, ok
}

// describeStamps is " (" + stampList + ")", or "" without stamps.
func describeStamps(offs []int64, stamps map[int64]Stamp) string {
	if l := stampList(offs, stamps); l != "" {
		return " (" + l + ")"
	}
	return ""
}

// stampList lists the producer id, epoch and sequence of each copy.
func stampList(offs []int64, stamps map[int64]Stamp) string {
	var b []byte
	for _, o := range offs {
		st, ok := stamps[o]
		if !ok {
			continue
		}
		if len(b) > 0 {
			b = append(b, ", "...)
		}
		b = fmt.Appendf(b, "@%d producer %d epoch %d seq %d", o, st.ProducerID, st.ProducerEpoch, st.Seq)
	}
	return string(b)
}

// rewindTo is the index of an unused rewind of pl's consumer and
// partition, recorded no later than pl, that reset it to first; -1 if
// none.
func rewindTo(rewinds []ConsumerRewind, used []bool, pl Poll, first int64) int {
	for i, r := range rewinds {
		if !used[i] && r.Consumer == pl.Consumer && r.Partition == pl.Partition && r.ResetTo == first && r.At <= pl.At {
			return i
		}
	}
	return -1
}
