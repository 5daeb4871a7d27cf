package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
)

const reassignAbout = `This tool helps to move topic partitions between replicas (kafka-reassign-partitions.sh).

Actions (exactly one):
  --generate  --topics-to-move-json-file F --broker-list "1,2,3" [--disable-rack-aware] [--seed N]
  --execute   --reassignment-json-file F [--throttle B/s] [--additional] [--timeout ms]
  --verify    --reassignment-json-file F [--preserve-throttles]
  --cancel    --reassignment-json-file F [--preserve-throttles] [--timeout ms]
  --list`

const cannotExecuteMessage = "Cannot execute because there is an existing partition assignment.  " +
	"Use --additional to override this and create a new partition assignment in addition to the " +
	"existing one. The --additional flag can also be used to change the throttle by resubmitting " +
	"the current reassignment."

const verifyPeriodicallyMessage = "Warning: You must run --verify periodically, until the " +
	"reassignment completes, to ensure the throttle is removed."

// The throttle keys (KIP-73) this tool sets and clears.
const (
	leaderThrottledRate       = "leader.replication.throttled.rate"
	followerThrottledRate     = "follower.replication.throttled.rate"
	leaderThrottledReplicas   = "leader.replication.throttled.replicas"
	followerThrottledReplicas = "follower.replication.throttled.replicas"
)

func cmdReassign(ctx context.Context, args []string, out io.Writer) error {
	f := newFlags("reassign-partitions", reassignAbout)
	f.Bool("generate", false, "Generate a candidate partition reassignment configuration. It is only printed, not executed.")
	f.Bool("execute", false, "Kick off the reassignment as specified by the --reassignment-json-file option.")
	f.Bool("verify", false, "Verify if the reassignment completed as specified by --reassignment-json-file. When it has, the throttles are removed.")
	f.Bool("cancel", false, "Cancel an active reassignment.")
	f.Bool("list", false, "List all active partition reassignments.")
	planFile := f.String("reassignment-json-file", "", `The JSON file with the partition reassignment configuration: {"version":1,"partitions":[{"topic":"foo","partition":1,"replicas":[1,2,3],"log_dirs":["any","any","any"]}]}; log_dirs is optional`)
	topicsFile := f.String("topics-to-move-json-file", "", `Generate a reassignment configuration to move the partitions of these topics to --broker-list: {"topics":[{"topic":"foo"},{"topic":"foo1"}],"version":1}`)
	brokerList := f.String("broker-list", "", `The brokers to which the partitions need to be reassigned, in the form "0,1,2"`)
	f.Bool("disable-rack-aware", false, "Disable rack aware replica assignment")
	seed := f.Uint64("seed", 0, "Seed of the random start index and replica shift of --generate (default: the clock); the same seed and cluster give the same plan")
	throttle := f.Int64("throttle", -1, "The movement of partitions between brokers will be throttled to this value (bytes/sec). Resubmit the current reassignment with --additional to change it.")
	f.Bool("additional", false, "Execute this reassignment in addition to any other ongoing ones. Also used to change the throttle of an ongoing reassignment.")
	f.Bool("preserve-throttles", false, "Do not modify broker or topic throttles.")
	timeout := f.Int64("timeout", 10000, "The maximum time in ms to wait for log directory replica assignment to begin (--execute, --cancel). When given, it is also the deadline of the command's requests, which otherwise get 60 s in all and 30 s each.")
	if err := f.parse(args); err != nil {
		return err
	}
	action, err := f.action("generate", "execute", "verify", "cancel", "list")
	if err != nil {
		return err
	}
	switch action {
	case "generate":
		err = firstErr(f.require("topics-to-move-json-file", "broker-list"), f.permit(action, "topics-to-move-json-file", "broker-list", "disable-rack-aware", "seed"))
	case "execute":
		err = firstErr(f.require("reassignment-json-file"), f.permit(action, "reassignment-json-file", "throttle", "additional", "timeout"))
		if err == nil && f.set["throttle"] && *throttle < 0 {
			err = usageErrorf("--throttle must be a rate in bytes/sec >= 0, not %d", *throttle)
		}
	case "verify":
		err = firstErr(f.require("reassignment-json-file"), f.permit(action, "reassignment-json-file", "preserve-throttles"))
	case "cancel":
		err = firstErr(f.require("reassignment-json-file"), f.permit(action, "reassignment-json-file", "preserve-throttles", "timeout"))
	case "list":
		err = f.permit(action)
	}
	if err == nil && f.set["timeout"] && (*timeout <= 0 || *timeout > math.MaxInt32) {
		err = usageErrorf("--timeout must be a time in ms > 0, not %d", *timeout)
	}
	if err != nil {
		return err
	}
	if f.bootstrap == "" {
		return usageErrorf("Please specify --bootstrap-server")
	}
	// Read and check the input files before connecting, so a typo costs no
	// round trip.
	var plan assignment
	var entries []planEntry
	var topics []string
	var brokers []int32
	switch action {
	case "generate":
		data, err := os.ReadFile(*topicsFile)
		if err != nil {
			return usageErrorf("%v", err)
		}
		if topics, err = parseTopicsToMove(data); err != nil {
			return err
		}
		if brokers, err = parseBrokerList(*brokerList); err != nil {
			return err
		}
	case "execute":
		data, err := os.ReadFile(*planFile)
		if err != nil {
			return usageErrorf("%v", err)
		}
		if plan, err = parseExecutePlan(data); err != nil {
			return err
		}
	case "verify", "cancel":
		data, err := os.ReadFile(*planFile)
		if err != nil {
			return usageErrorf("%v", err)
		}
		if entries, err = parsePlanEntries(data); err != nil {
			return err
		}
	}
	preserve := f.set["preserve-throttles"]
	keys := map[string][]int16{
		"generate": {3},
		"execute":  {45, 46},
		"verify":   {46},
		"cancel":   {45, 46},
		"list":     {46},
	}[action]
	if action == "execute" && *throttle >= 0 || (action == "verify" || action == "cancel") && !preserve {
		keys = append(keys, 44)
	}
	return withAdmin(ctx, f.target(), keys, func(ctx context.Context, a *admin) error {
		if f.set["timeout"] {
			var cancel context.CancelFunc
			ctx, cancel = a.withDeadline(ctx, time.Duration(*timeout)*time.Millisecond)
			defer cancel()
		}
		switch action {
		case "generate":
			s := *seed
			if !f.set["seed"] {
				s = uint64(time.Now().UnixNano())
			}
			return a.generate(ctx, out, topics, brokers, !f.set["disable-rack-aware"], rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15)))
		case "execute":
			return a.execute(ctx, out, plan, f.set["additional"], *throttle)
		case "verify":
			_, err := a.verify(ctx, out, entries, preserve)
			return err
		case "cancel":
			return a.cancel(ctx, out, entries, preserve)
		default:
			return a.list(ctx, out)
		}
	})
}

// firstErr returns the first non-nil error.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// ---------------------------------------------------------------------------
// Reading the cluster.

// reassignment is one partition's entry in ListPartitionReassignments.
type reassignment struct {
	Replicas, Adding, Removing []int32
}

// listReassignments returns the reassignments in progress, of all
// partitions when tps is nil.
func (a *admin) listReassignments(ctx context.Context, tps []cluster.TopicPartition) (map[cluster.TopicPartition]reassignment, error) {
	req := kmsg.NewPtrListPartitionReassignmentsRequest()
	req.TimeoutMillis = a.timeoutMillis
	if tps != nil {
		byTopic := make(map[string][]int32)
		for _, tp := range tps {
			byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partition)
		}
		req.Topics = []kmsg.ListPartitionReassignmentsRequestTopic{}
		for _, t := range slices.Sorted(mapsKeys(byTopic)) {
			rt := kmsg.NewListPartitionReassignmentsRequestTopic()
			rt.Topic = t
			rt.Partitions = byTopic[t]
			req.Topics = append(req.Topics, rt)
		}
	}
	resp, err := req.RequestWith(ctx, a.kcl)
	if err != nil {
		return nil, fmt.Errorf("ListPartitionReassignments: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("ListPartitionReassignments: %w", withMessage(err, resp.ErrorMessage))
	}
	out := make(map[cluster.TopicPartition]reassignment)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[cluster.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = reassignment{
				Replicas: p.Replicas, Adding: p.AddingReplicas, Removing: p.RemovingReplicas,
			}
		}
	}
	return out, nil
}

// withMessage appends a response's error message to its error code.
func withMessage(err error, msg *string) error {
	if msg == nil || *msg == "" {
		return err
	}
	return fmt.Errorf("%w (%s)", err, *msg)
}

func mapsKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// topicAssignment returns the replicas of every partition of topics; an
// unknown topic fails ("Topic t not found.").
func (a *admin) topicAssignment(ctx context.Context, topics []string) (assignment, kadm.Metadata, error) {
	md, err := a.adm.Metadata(ctx, topics...)
	if err != nil {
		return nil, md, fmt.Errorf("Metadata: %w", err)
	}
	out := make(assignment)
	for _, t := range topics {
		td, ok := md.Topics[t]
		if !ok || td.Err != nil {
			e := td.Err
			if e == nil {
				e = kerr.UnknownTopicOrPartition
			}
			return nil, md, fmt.Errorf("Topic %s not found: %w", t, e)
		}
		for p, pd := range td.Partitions {
			out[cluster.TopicPartition{Topic: t, Partition: p}] = slices.Clone(pd.Replicas)
		}
	}
	return out, md, nil
}

// partitionAssignment returns the replicas of the named partitions, failing
// for any that does not exist ("Unable to find partition: t-9").
func (a *admin) partitionAssignment(ctx context.Context, tps []cluster.TopicPartition) (assignment, kadm.Metadata, error) {
	var topics []string
	for _, tp := range tps {
		if !slices.Contains(topics, tp.Topic) {
			topics = append(topics, tp.Topic)
		}
	}
	md, err := a.adm.Metadata(ctx, topics...)
	if err != nil {
		return nil, md, fmt.Errorf("Metadata: %w", err)
	}
	out := make(assignment)
	var missing []string
	for _, tp := range slices.SortedFunc(slices.Values(tps), compareTP) {
		pd, ok := md.Topics[tp.Topic].Partitions[tp.Partition]
		if !ok || md.Topics[tp.Topic].Err != nil {
			missing = append(missing, tp.String())
			continue
		}
		out[tp] = slices.Clone(pd.Replicas)
	}
	if len(missing) > 0 {
		return nil, md, fmt.Errorf("%w: Unable to find partition: %s", kerr.UnknownTopicOrPartition, strings.Join(missing, ", "))
	}
	return out, md, nil
}

// ---------------------------------------------------------------------------
// --generate

func (a *admin) generate(ctx context.Context, out io.Writer, topics []string, brokerList []int32, rackAware bool, rng *rand.Rand) error {
	current, md, err := a.topicAssignment(ctx, topics)
	if err != nil {
		return err
	}
	brokers, err := brokerRacks(md.Brokers, brokerList, rackAware)
	if err != nil {
		return err
	}
	proposed, err := proposeAssignment(current, brokers, rng)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Current partition replica assignment\n%s\n\n", formatPlan(current))
	fmt.Fprintf(out, "Proposed partition reassignment configuration\n%s\n", formatPlan(proposed))
	return nil
}

// brokerRacks keeps the registered brokers named in list (others are
// ignored, as Kafka does) with their racks. With rackAware, either every
// such broker has a rack or none has.
func brokerRacks(registered kadm.BrokerDetails, list []int32, rackAware bool) ([]cluster.BrokerRack, error) {
	var out []cluster.BrokerRack
	racked := 0
	for _, b := range registered {
		if !slices.Contains(list, b.NodeID) {
			continue
		}
		br := cluster.BrokerRack{ID: b.NodeID}
		if rackAware && b.Rack != nil {
			br.Rack = *b.Rack
			racked++
		}
		out = append(out, br)
	}
	if rackAware && racked != 0 && racked != len(out) {
		return nil, errors.New("Not all brokers have rack information. Add --disable-rack-aware in command line to make replica assignment without rack information.")
	}
	slices.SortFunc(out, func(x, y cluster.BrokerRack) int { return int(x.ID) - int(y.ID) })
	return out, nil
}

// proposeAssignment places every topic of current afresh on brokers,
// keeping its partition count and replication factor, as Kafka's
// calculateAssignment does. Each topic gets its own random start index and
// replica shift from rng, so a seeded rng gives the same plan.
func proposeAssignment(current assignment, brokers []cluster.BrokerRack, rng *rand.Rand) (assignment, error) {
	if len(brokers) == 0 {
		return nil, fmt.Errorf("%w: none of the brokers in --broker-list is registered", kerr.InvalidReplicationFactor)
	}
	type topicShape struct {
		partitions int32
		rf         int16
		first      int32
	}
	shapes := make(map[string]*topicShape)
	for _, tp := range sortedPartitions(current) {
		s := shapes[tp.Topic]
		if s == nil {
			s = &topicShape{first: tp.Partition, rf: int16(len(current[tp]))}
			shapes[tp.Topic] = s
		}
		s.partitions++
	}
	proposed := make(assignment)
	for _, t := range slices.Sorted(mapsKeys(shapes)) {
		s := shapes[t]
		start, shift := rng.IntN(len(brokers)), rng.IntN(len(brokers))
		placed, err := assignReplicas(brokers, 0, s.partitions, s.rf, start, shift)
		if err != nil {
			return nil, fmt.Errorf("topic %s: %w", t, err)
		}
		for p, r := range placed {
			proposed[cluster.TopicPartition{Topic: t, Partition: p}] = r
		}
	}
	return proposed, nil
}

// ---------------------------------------------------------------------------
// --execute

func (a *admin) execute(ctx context.Context, out io.Writer, plan assignment, additional bool, throttle int64) error {
	ongoing, err := a.listReassignments(ctx, nil)
	if err != nil {
		return err
	}
	if !additional && len(ongoing) > 0 {
		return errors.New(cannotExecuteMessage)
	}
	current, md, err := a.partitionAssignment(ctx, sortedPartitions(plan))
	if err != nil {
		return err
	}
	if err := checkBrokerIDs(md.Brokers, plan); err != nil {
		return err
	}
	fmt.Fprintf(out, "Current partition replica assignment\n\n%s\n\nSave this to use as the --reassignment-json-file option during rollback\n", formatPlan(current))
	if throttle >= 0 {
		fmt.Fprintln(out, verifyPeriodicallyMessage)
		moves, err := proposedMoves(ongoing, plan, current)
		if err != nil {
			return err
		}
		if err := a.setThrottles(ctx, moves, throttle); err != nil {
			return err
		}
		fmt.Fprintf(out, "The inter-broker throttle limit was set to %d B/s\n", throttle)
	}
	req := make(kadm.AlterPartitionAssignmentsReq)
	for tp, r := range plan {
		req.Assign(tp.Topic, tp.Partition, r)
	}
	resp, err := a.adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		return fmt.Errorf("AlterPartitionReassignments: %w", err)
	}
	if failed := alterErrors(resp); failed != "" {
		return fmt.Errorf("Error reassigning partition(s):\n%s", failed)
	}
	tps := sortedPartitions(plan)
	names := make([]string, len(tps))
	for i, tp := range tps {
		names[i] = tp.String()
	}
	fmt.Fprintf(out, "Successfully started partition reassignment%s for %s\n", plural(len(tps)), strings.Join(names, ","))
	return nil
}

// alterErrors lists the partitions an AlterPartitionReassignments refused,
// one "t-p: ERROR_NAME: ..." line each, or "" when none.
func alterErrors(resp kadm.AlterPartitionAssignmentsResponses) string {
	var lines []string
	for _, r := range resp.Sorted() {
		if r.Err != nil {
			e := r.Err
			if r.ErrMessage != "" {
				e = fmt.Errorf("%w (%s)", r.Err, r.ErrMessage)
			}
			lines = append(lines, fmt.Sprintf("%s: %v", cluster.TopicPartition{Topic: r.Topic, Partition: r.Partition}, e))
		}
	}
	return strings.Join(lines, "\n")
}

// checkBrokerIDs fails for a plan that names a broker not registered
// ("Unknown broker id 7").
func checkBrokerIDs(registered kadm.BrokerDetails, plan assignment) error {
	known := make(map[int32]bool)
	for _, b := range registered {
		known[b.NodeID] = true
	}
	for _, tp := range sortedPartitions(plan) {
		for _, id := range plan[tp] {
			if !known[id] {
				return fmt.Errorf("%w: Unknown broker id %d", kerr.BrokerNotAvailable, id)
			}
		}
	}
	return nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// ---------------------------------------------------------------------------
// --verify

// partitionState is one partition's progress toward its target replicas.
type partitionState struct {
	Current, Target []int32
	Done            bool
}

// reassignmentStates compares each target of the plan with the cluster: a
// partition still listed by ListPartitionReassignments is in progress;
// otherwise it is done, with its replicas now (none for a partition that
// no longer exists).
func reassignmentStates(targets []planEntry, ongoing map[cluster.TopicPartition]reassignment, current assignment) map[cluster.TopicPartition]partitionState {
	out := make(map[cluster.TopicPartition]partitionState, len(targets))
	for _, e := range targets {
		if r, ok := ongoing[e.TP]; ok {
			out[e.TP] = partitionState{Current: r.Replicas, Target: e.Replicas}
			continue
		}
		out[e.TP] = partitionState{Current: current[e.TP], Target: e.Replicas, Done: true}
	}
	return out
}

// formatStates prints the states as Kafka's --verify does.
func formatStates(states map[cluster.TopicPartition]partitionState) string {
	lines := []string{"Status of partition reassignment:"}
	for _, tp := range sortedPartitions(states) {
		s := states[tp]
		switch {
		case !s.Done:
			lines = append(lines, fmt.Sprintf("Reassignment of partition %s is still in progress.", tp))
		case slices.Equal(s.Current, s.Target):
			lines = append(lines, fmt.Sprintf("Reassignment of partition %s is completed.", tp))
		default:
			lines = append(lines, fmt.Sprintf("There is no active reassignment of partition %s, but replica set is %s rather than %s.",
				tp, joinInts(s.Current, ","), joinInts(s.Target, ",")))
		}
	}
	return strings.Join(lines, "\n")
}

// verify prints each partition's state and, once no reassignment at all is
// in progress (Kafka's rule: one unrelated move keeps the throttles), clears
// the throttles unless preserve. It reports whether all are done.
func (a *admin) verify(ctx context.Context, out io.Writer, targets []planEntry, preserve bool) (bool, error) {
	ongoing, err := a.listReassignments(ctx, nil)
	if err != nil {
		return false, err
	}
	var topics []string
	for _, e := range targets {
		if _, ok := ongoing[e.TP]; !ok && !slices.Contains(topics, e.TP.Topic) {
			topics = append(topics, e.TP.Topic)
		}
	}
	current := make(assignment)
	var md kadm.Metadata
	if len(topics) > 0 {
		if md, err = a.adm.Metadata(ctx, topics...); err != nil {
			return false, fmt.Errorf("Metadata: %w", err)
		}
		for _, t := range topics {
			for p, pd := range md.Topics[t].Partitions {
				current[cluster.TopicPartition{Topic: t, Partition: p}] = pd.Replicas
			}
		}
	}
	fmt.Fprintln(out, formatStates(reassignmentStates(targets, ongoing, current)))
	// Kafka's verifyReplicaMoves prints the log-dir moves next, one line
	// each; with every log dir "any" there are none, and the line is blank.
	fmt.Fprintln(out)
	if len(ongoing) > 0 || preserve {
		return len(ongoing) == 0, nil
	}
	return true, a.clearThrottles(ctx, out, targets)
}

// ---------------------------------------------------------------------------
// --cancel

func (a *admin) cancel(ctx context.Context, out io.Writer, targets []planEntry, preserve bool) error {
	tps := make([]cluster.TopicPartition, 0, len(targets))
	for _, e := range targets {
		tps = append(tps, e.TP)
	}
	ongoing, err := a.listReassignments(ctx, tps)
	if err != nil {
		return err
	}
	var active []cluster.TopicPartition
	for _, tp := range sortedPartitions(ongoing) {
		if r := ongoing[tp]; len(r.Adding) > 0 || len(r.Removing) > 0 {
			active = append(active, tp)
		}
	}
	if len(active) > 0 {
		req := make(kadm.AlterPartitionAssignmentsReq)
		for _, tp := range active {
			req.CancelAssign(tp.Topic, tp.Partition)
		}
		resp, err := a.adm.AlterPartitionAssignments(ctx, req)
		if err != nil {
			return fmt.Errorf("AlterPartitionReassignments: %w", err)
		}
		if failed := alterErrors(resp); failed != "" {
			return fmt.Errorf("Error cancelling partition reassignment%s for:\n%s", plural(strings.Count(failed, "\n")+1), failed)
		}
		names := make([]string, len(active))
		for i, tp := range active {
			names[i] = tp.String()
		}
		fmt.Fprintf(out, "Successfully cancelled partition reassignment%s for: %s\n", plural(len(active)), strings.Join(names, ","))
	} else {
		fmt.Fprintln(out, "None of the specified partition reassignments are active.")
	}
	// Kafka's log-dir moves of the plan: every log dir is "any", so none.
	// (Kafka prints this line without its newline.)
	fmt.Fprintln(out, "None of the specified partition moves are active.")
	if preserve {
		return nil
	}
	return a.clearThrottles(ctx, out, targets)
}

// ---------------------------------------------------------------------------
// --list

func (a *admin) list(ctx context.Context, out io.Writer) error {
	ongoing, err := a.listReassignments(ctx, nil)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, formatReassignments(ongoing))
	return nil
}

// formatReassignments prints --list's report.
func formatReassignments(ongoing map[cluster.TopicPartition]reassignment) string {
	if len(ongoing) == 0 {
		return "No partition reassignments found."
	}
	lines := []string{"Current partition reassignments:"}
	for _, tp := range sortedPartitions(ongoing) {
		r := ongoing[tp]
		line := fmt.Sprintf("%s: replicas: %s.", tp, joinInts(r.Replicas, ","))
		if len(r.Adding) > 0 {
			line += fmt.Sprintf(" adding: %s.", joinInts(r.Adding, ","))
		}
		if len(r.Removing) > 0 {
			line += fmt.Sprintf(" removing: %s.", joinInts(r.Removing, ","))
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}
