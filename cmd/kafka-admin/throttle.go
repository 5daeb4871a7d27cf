package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kafkazk/broker/cluster"
)

// partitionMove is where one partition's data flows during a
// reassignment: from its current replicas (Sources) to the replicas being
// added (Destinations). Both sorted, no duplicates.
type partitionMove struct {
	Sources, Destinations []int32
}

// moveMap is topic -> partition -> move.
type moveMap map[string]map[int32]partitionMove

// proposedMoves computes the moves that --execute throttles, as Kafka's
// calculateProposedMoveMap: every reassignment already in progress, plus
// each planned partition, whose sources are those of its ongoing move if
// it has one and its current replicas otherwise.
func proposedMoves(ongoing map[cluster.TopicPartition]reassignment, plan, current assignment) (moveMap, error) {
	moves := make(moveMap)
	put := func(tp cluster.TopicPartition, m partitionMove) {
		if moves[tp.Topic] == nil {
			moves[tp.Topic] = make(map[int32]partitionMove)
		}
		moves[tp.Topic][tp.Partition] = m
	}
	for tp, r := range ongoing {
		// During a reassignment Replicas holds the adding replicas too.
		put(tp, partitionMove{Sources: without(r.Replicas, r.Adding), Destinations: setOf(r.Adding)})
	}
	for _, tp := range sortedPartitions(plan) {
		var sources []int32
		if m, ok := moves[tp.Topic][tp.Partition]; ok {
			sources = m.Sources
		} else if c, ok := current[tp]; ok {
			sources = setOf(c)
		} else {
			return nil, fmt.Errorf("Trying to reassign a topic partition %s with 0 replicas", tp)
		}
		put(tp, partitionMove{Sources: sources, Destinations: without(plan[tp], sources)})
	}
	return moves, nil
}

// setOf returns xs sorted without duplicates.
func setOf(xs []int32) []int32 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return slices.Compact(s)
}

// without returns setOf(xs) minus drop.
func without(xs, drop []int32) []int32 {
	var out []int32
	for _, x := range setOf(xs) {
		if !slices.Contains(drop, x) {
			out = append(out, x)
		}
	}
	return out
}

// throttleValue joins "partition:broker" entries sorted as strings, which
// is Kafka's TreeSet<String> order, so the value is byte-identical.
func throttleValue(entries []string) string {
	slices.Sort(entries)
	return strings.Join(slices.Compact(entries), ",")
}

// leaderThrottles is leader.replication.throttled.replicas per topic: every
// source replica of every moving partition (the leader may be any of them).
func leaderThrottles(moves moveMap) map[string]string {
	out := make(map[string]string, len(moves))
	for t, parts := range moves {
		var entries []string
		for p, m := range parts {
			for _, b := range m.Sources {
				entries = append(entries, fmt.Sprintf("%d:%d", p, b))
			}
		}
		out[t] = throttleValue(entries)
	}
	return out
}

// followerThrottles is follower.replication.throttled.replicas per topic:
// the replicas being added, which fetch the moving data.
func followerThrottles(moves moveMap) map[string]string {
	out := make(map[string]string, len(moves))
	for t, parts := range moves {
		var entries []string
		for p, m := range parts {
			for _, b := range m.Destinations {
				if !slices.Contains(m.Sources, b) {
					entries = append(entries, fmt.Sprintf("%d:%d", p, b))
				}
			}
		}
		out[t] = throttleValue(entries)
	}
	return out
}

// reassigningBrokers is every broker that sends or receives a moving
// replica: the brokers whose throttled rates are set.
func reassigningBrokers(moves moveMap) []int32 {
	var out []int32
	for _, parts := range moves {
		for _, m := range parts {
			out = append(out, m.Sources...)
			out = append(out, m.Destinations...)
		}
	}
	return setOf(out)
}

// setThrottles writes the topic throttle lists and the broker rates through
// IncrementalAlterConfigs (SET), as --execute --throttle does.
func (a *admin) setThrottles(ctx context.Context, moves moveMap, rate int64) error {
	leaders, followers := leaderThrottles(moves), followerThrottles(moves)
	for _, t := range slices.Sorted(mapsKeys(moves)) {
		ops := []kadm.AlterConfig{
			{Op: kadm.SetConfig, Name: leaderThrottledReplicas, Value: kadm.StringPtr(leaders[t])},
			{Op: kadm.SetConfig, Name: followerThrottledReplicas, Value: kadm.StringPtr(followers[t])},
		}
		resp, err := a.adm.AlterTopicConfigs(ctx, ops, t)
		if err := alterConfigsError("topic", resp, err); err != nil {
			return err
		}
	}
	v := fmt.Sprint(rate)
	ops := []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: leaderThrottledRate, Value: &v},
		{Op: kadm.SetConfig, Name: followerThrottledRate, Value: &v},
	}
	resp, err := a.adm.AlterBrokerConfigs(ctx, ops, reassigningBrokers(moves)...)
	return alterConfigsError("broker", resp, err)
}

// clearThrottles deletes the broker rates on every registered broker and on
// the plan's brokers, and the topic lists on the plan's topics: Kafka's
// clearAllThrottles, which cannot know which sources earlier moves used.
func (a *admin) clearThrottles(ctx context.Context, out io.Writer, targets []planEntry) error {
	brokers, err := a.adm.ListBrokers(ctx)
	if err != nil {
		return fmt.Errorf("Metadata: %w", err)
	}
	ids := brokers.NodeIDs()
	var topics []string
	for _, e := range targets {
		ids = append(ids, e.Replicas...)
		topics = append(topics, e.TP.Topic)
	}
	ids = setOf(ids)
	slices.Sort(topics)
	topics = slices.Compact(topics)

	fmt.Fprintf(out, "Clearing broker-level throttles on broker%s %s\n", plural(len(ids)), joinInts(ids, ","))
	resp, err := a.adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.DeleteConfig, Name: leaderThrottledRate},
		{Op: kadm.DeleteConfig, Name: followerThrottledRate},
	}, ids...)
	if err := alterConfigsError("broker", resp, err); err != nil {
		return err
	}
	fmt.Fprintf(out, "Clearing topic-level throttles on topic%s %s\n", plural(len(topics)), strings.Join(topics, ","))
	if len(topics) == 0 {
		return nil
	}
	resp, err = a.adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.DeleteConfig, Name: leaderThrottledReplicas},
		{Op: kadm.DeleteConfig, Name: followerThrottledReplicas},
	}, topics...)
	return alterConfigsError("topic", resp, err)
}

// alterConfigsError folds a request error and the per-resource errors of
// an IncrementalAlterConfigs into one error naming the resources.
func alterConfigsError(kind string, resp kadm.AlterConfigsResponses, err error) error {
	if err != nil {
		return fmt.Errorf("IncrementalAlterConfigs: %w", err)
	}
	var lines []string
	for _, r := range resp {
		if r.Err != nil {
			e := r.Err
			if r.ErrMessage != "" {
				e = fmt.Errorf("%w (%s)", r.Err, r.ErrMessage)
			}
			lines = append(lines, fmt.Sprintf("%s %q: %v", kind, r.Name, e))
		}
	}
	if len(lines) > 0 {
		return fmt.Errorf("IncrementalAlterConfigs: %s", strings.Join(lines, "; "))
	}
	return nil
}
