package chaos

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

func ms(d time.Duration) string { return fmt.Sprintf("%d", d.Milliseconds()) }

// txnCells are the transactional columns: dashes for a scenario without
// the transactional workload.
func txnCells(c CheckResult) string {
	if c.Txns == 0 {
		return "- | - | - | - | - | -"
	}
	a := c.TxnAnomalies
	return fmt.Sprintf("%d/%d/%d | %d | %d | %d/%d | %d | %d/%d/%d (%d)", c.TxnCommitted, c.TxnAborted, c.TxnInfo,
		a.AbortedRead, a.PrecommittedRead, a.PartialTxn, a.LostTxn, a.TxnDuplicate, a.AbortedOffset, a.MissingOffset, a.OffsetOutput,
		a.StaleOffsetRead)
}

// WriteReport writes the Markdown report of a set of results.
func WriteReport(out io.Writer, results []Result, header string) {
	fmt.Fprintf(out, "# Chaos report\n\n%s\n\n", header)
	fmt.Fprintf(out, "Verdicts: SAFE scenarios PASS with zero anomalies besides the ones the scenario allows (listed under it); RECORDED scenarios (#8) report loss Kafka does not promise to prevent; negative controls (ACK1, UNCLEAN, NONIDEM) are CAUGHT when the checker reports their anomaly (lost writes; duplicates for NONIDEM).\n\n")
	fmt.Fprintln(out, "| scenario | profile | verdict | attempted | ok | fail | info (seen) | lost | incons. offset | dup (epoch bump) | nonmono poll/send (kgo rewinds) | poll-skip | read-then-vanished | above HW | failed-visible | divergent | epoch/ctrl/unclean | group commits ok/all | commit backwards/lost/ownership (stale reads) | txns commit/abort/info | G1a | precommitted | partial/lost txn | txn dup | offsets aborted/missing/vs output (stale reads) | unavail p50/p99/max ms | detect/elect/first-ack ms | ISR -/+ | elections | ack p50/p99 ms | time s |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range results {
		a := r.Check.Anomalies
		f := r.Figures
		tl := "-"
		if f.Timelines > 0 {
			tl = fmt.Sprintf("%s/%s/%s", ms(f.Detect), ms(f.Elect), ms(f.FirstAck))
		}
		fmt.Fprintf(out, "| %s | %s | **%s** | %d | %d | %d | %d (%d) | %d | %d | %d (%d) | %d/%d (%d) | %d | %d | %d | %d | %d | %d/%d/%d | %d/%d | %d/%d/%d (%d) | %s | %s/%s/%s | %s | %d/%d | %d | %s/%s | %.0f |\n",
			r.Scenario, r.Profile, r.Verdict(), r.Check.Attempted, r.Check.OKs, r.Check.Fails, r.Check.Infos, r.Check.InfoSeen,
			a.Lost, a.InconsistentOffset, a.Duplicate, a.DuplicateEpochBump, a.NonmonotonicPoll, a.NonmonotonicSend, a.ConsumerRewind, a.PollSkip, a.ReadThenVanished,
			a.AboveHW, a.FailedVisible, a.Divergent+a.EpochCheckpoint, a.EpochViolation, a.ControllerEpoch, a.UncleanLeader,
			r.Check.CommitsOK, r.Check.Commits, a.CommitBackwards, a.LostCommit, a.Ownership, a.StaleCommitRead,
			txnCells(r.Check), ms(f.UnavailP50), ms(f.UnavailP99), ms(f.UnavailMax), tl, f.ISRShrinks, f.ISRExpands, f.Elections,
			ms(f.LatencyP50), ms(f.LatencyP99), r.Duration.Seconds())
	}
	fmt.Fprint(out, "\n## Scenarios\n\n")
	for _, r := range results {
		fmt.Fprintf(out, "- **%s / %s**: %s.", r.Scenario, r.Profile, r.Desc)
		if r.Err != nil {
			fmt.Fprintf(out, " Error: %v.", r.Err)
		}
		if len(r.Allowed) > 0 {
			byName := r.Check.ByName()
			var parts []string
			for _, n := range r.Allowed {
				parts = append(parts, fmt.Sprintf("%s %d", n, byName[n]))
			}
			fmt.Fprintf(out, " Allowed here: %s.", strings.Join(parts, ", "))
		}
		fmt.Fprintln(out)
		for _, n := range r.Notes {
			fmt.Fprintf(out, "  - note: %s\n", n)
		}
		names := make([]string, 0, len(r.Check.Examples))
		for n := range r.Check.Examples {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			for _, e := range r.Check.Examples[n] {
				fmt.Fprintf(out, "  - %s: %s\n", n, strings.ReplaceAll(e, "|", "/"))
			}
		}
	}
	fmt.Fprint(out, `
## Columns

- attempted/ok/fail/info: write attempts of the idempotent (SAFE, UNCLEAN) or acks=1 (ACK1) kgo producer and of the
  single-attempt raw writers; fail = definitely not written, info = indeterminate; (seen) = info writes found in the
  final log.
- lost ... divergent: the checks of reliability.md §6.2, from the acknowledgements, every consumer poll, and each
  replica's segment files read after the brokers stopped (divergent = offsets below the minimum checkpointed HW where
  replicas disagree, plus non-increasing leader-epoch checkpoints). dup (epoch bump): duplicates reported, not failed,
  because the later copy is under a higher producer epoch of the same producer id, after the producer reset its id
  (kgo's KIP-360 epoch bump, as Kafka's TransactionManager does on OUT_OF_ORDER_SEQUENCE_NUMBER) on an answer from a
  broker ZooKeeper no longer named leader of that partition (a deposed leader answering from its divergent log);
  brokers deduplicate per producer id and epoch only (KAFKA-14034).
- epoch/ctrl/unclean: ZooKeeper samples every 100 ms: leader_epoch decreasing or two leaders in one epoch; controller
  epoch decreasing; with unclean election off, a new leader that was not in the previously sampled ISR.
- group commits, commit backwards/lost/ownership: the consumer group (GroupMembers members, manual synchronous
  commits after each poll) with its OffsetFetch samples every 250 ms: per-partition commits acknowledged / sent; an
  acknowledged commit below one acknowledged before it was sent; an acknowledged commit not reflected in the final
  offsets or in the first poll of a member assigned the partition after it; partitions not owned exactly once after
  the final rebalance; (stale reads): OffsetFetch samples reading less than an earlier sample or an acknowledged
  commit, reported only (a zombie coordinator answers from its cache, as Kafka's does).
- txns ... offsets (transactional scenarios): transactions of two kgo transactional producers (several values
  across partitions each, commit or abort at random) and of a consume-transform-produce loop (kgo's
  GroupTransactSession, offsets committed in the transaction): commit = EndTxn(commit) acknowledged, abort = aborted
  by the client, info = EndTxn(commit) sent, answer unknown. G1a = a read_committed read of an aborted transaction's
  value; precommitted = a read_committed read before the transaction's EndTxn was sent; partial = a committed or
  indeterminate transaction partly visible in the final read_committed read, lost = an acknowledged commit wholly
  absent; txn dup = a value twice in the final read, or an input value output twice; offsets: a committed group
  offset (OffsetFetch with require_stable, sampled every 250 ms) that only aborted transactions wrote / below what an
  acknowledged commit wrote, sampled after its acknowledgement / the final offsets against the committed output
  (every input record below the final offset output once, none above).
- unavail: per (fault, partition), the longest gap between acknowledgements from the last one before the fault to the
  next fault (or the end of writes).
- detect/elect/first-ack: medians over faults aimed at a broker that led partitions: fault to its /brokers/ids znode
  gone, to a new leader in a state znode, to the first acknowledgement on that partition after it.
- ISR -/+ and elections: shrinks, expands and leader_epoch increments seen in the samples.
`)
}
