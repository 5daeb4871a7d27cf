package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
)

const groupsAbout = `Delete a consumer group's committed offsets (kafka-consumer-groups.sh --delete-offsets).

  --delete-offsets --group G --topic T[:P,P...] [--topic ...]
A topic without partitions means all of its partitions.`

// stringsFlag is a repeatable string flag.
type stringsFlag []string

func (s *stringsFlag) String() string { return strings.Join(*s, " ") }
func (s *stringsFlag) Set(v string) error {
	*s = append(*s, v)
	return nil
}

func cmdConsumerGroups(ctx context.Context, args []string, out io.Writer) error {
	f := newFlags("consumer-groups", groupsAbout)
	f.Bool("delete-offsets", false, "Delete offsets of consumer group. Supports one consumer group at the time, and multiple topics.")
	group := f.String("group", "", "The consumer group we wish to act on.")
	var topics stringsFlag
	f.Var(&topics, "topic", "The topic whose consumer group information should be deleted, as TOPIC or TOPIC:P,P. Repeatable.")
	if err := f.parse(args); err != nil {
		return err
	}
	if _, err := f.action("delete-offsets"); err != nil {
		return err
	}
	if err := firstErr(f.require("group", "topic"), f.permit("delete-offsets", "group", "topic")); err != nil {
		return err
	}
	if f.bootstrap == "" {
		return usageErrorf("Missing required argument: --bootstrap-server")
	}
	named, whole, err := parseTopicArgs(topics)
	if err != nil {
		return err
	}
	return withAdmin(ctx, f.target(), []int16{47}, func(ctx context.Context, a *admin) error {
		return a.deleteOffsets(ctx, out, *group, topics, named, whole)
	})
}

// parseTopicArgs splits --topic values into named partitions (t:0,1) and
// whole topics (t), as ConsumerGroupCommand does.
func parseTopicArgs(args []string) ([]cluster.TopicPartition, []string, error) {
	var named []cluster.TopicPartition
	var whole []string
	for _, arg := range args {
		if !strings.Contains(arg, ":") {
			whole = append(whole, arg)
			continue
		}
		parts := strings.Split(arg, ":")
		if len(parts) != 2 || parts[0] == "" {
			return nil, nil, usageErrorf("Invalid topic arg '%s', expected topic name and partitions", arg)
		}
		for _, p := range strings.Split(parts[1], ",") {
			n, err := strconv.ParseInt(p, 10, 32)
			if err != nil || n < 0 {
				return nil, nil, usageErrorf("Invalid partition '%s' specified in topic arg '%s''", p, arg)
			}
			named = append(named, cluster.TopicPartition{Topic: parts[0], Partition: int32(n)})
		}
	}
	return named, whole, nil
}

// deleteOffsets sends OffsetDelete for the partitions and prints Kafka's
// report: a summary line (Kafka's printError, with its blank line before
// "Error:"), then TOPIC PARTITION STATUS per partition. Any error fails
// the command (Kafka's tool exits 0 here; scripts want to know).
func (a *admin) deleteOffsets(ctx context.Context, out io.Writer, group string, args []string, named []cluster.TopicPartition, whole []string) error {
	results := make(map[cluster.TopicPartition]error)
	set := make(kadm.TopicsSet)
	for _, tp := range named {
		set.Add(tp.Topic, tp.Partition)
	}
	if len(whole) > 0 {
		md, err := a.adm.Metadata(ctx, whole...)
		if err != nil {
			return fmt.Errorf("Metadata: %w", err)
		}
		for _, t := range whole {
			td := md.Topics[t]
			if td.Err != nil || len(td.Partitions) == 0 {
				e := td.Err
				if e == nil {
					e = kerr.UnknownTopicOrPartition
				}
				results[cluster.TopicPartition{Topic: t, Partition: -1}] = e
				continue
			}
			for p := range td.Partitions {
				set.Add(t, p)
			}
		}
	}
	// Kafka's tool sends the request even with no partition left (only
	// unknown topics named): the group's own error still shows.
	var top error
	if len(set) == 0 {
		req := kmsg.NewPtrOffsetDeleteRequest()
		req.Group = group
		resp, err := req.RequestWith(ctx, a.kcl)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		top = err
	} else {
		resp, err := a.adm.DeleteOffsets(ctx, group, set)
		top = err
		set.Each(func(t string, p int32) {
			tp := cluster.TopicPartition{Topic: t, Partition: p}
			if err != nil {
				results[tp] = err
			} else if e, ok := resp[t][p]; ok {
				results[tp] = e
			} else {
				// Not in the answer: not attempted.
				results[tp] = kerr.UnknownTopicOrPartition
			}
		})
	}
	// kadm returns the group's error only; Kafka's
	// DeleteConsumerGroupOffsetsResult.all fails with a partition's error
	// when any failed, and the tool's first line says so.
	groupErr := top
	rows := sortedGroupRows(results)
	if top == nil {
		for _, tp := range rows {
			if err := results[tp]; err != nil && tp.Partition >= 0 {
				top = err
				break
			}
		}
	}
	var summary string
	switch {
	case top == nil:
		summary = fmt.Sprintf("Request succeed for deleting offsets with topic %s group %s", strings.Join(args, ", "), group)
	case isErr(top, kerr.InvalidGroupID):
		summary = fmt.Sprintf("\nError: '%s' is not valid.", group)
	case isErr(top, kerr.GroupIDNotFound):
		summary = fmt.Sprintf("\nError: '%s' does not exist.", group)
	case isErr(top, kerr.GroupAuthorizationFailed):
		summary = fmt.Sprintf("\nError: Access to '%s' is not authorized.", group)
	case isErr(top, kerr.NonEmptyGroup):
		summary = fmt.Sprintf("\nError: Deleting offsets of a consumer group '%s' is forbidden if the group is not empty.", group)
	case isErr(top, kerr.GroupSubscribedToTopic), isErr(top, kerr.TopicAuthorizationFailed), isErr(top, kerr.UnknownTopicOrPartition):
		summary = "\nError: Encounter some partition level error, see the follow-up details:"
	default:
		summary = fmt.Sprintf("\nError: Encounter some unknown error: %v", top)
	}
	fmt.Fprintln(out, summary)
	fmt.Fprintf(out, "\n%-30s %-15s %-15s", "TOPIC", "PARTITION", "STATUS")
	var failed bool
	for _, tp := range rows {
		part, status := "Not Provided", "Successful"
		if tp.Partition >= 0 {
			part = strconv.Itoa(int(tp.Partition))
		}
		if err := results[tp]; err != nil {
			status = "Error: :" + err.Error()
			failed = true
		}
		fmt.Fprintf(out, "\n%-30s %-15s %-15s", tp.Topic, part, status)
	}
	fmt.Fprintln(out)
	if groupErr != nil {
		return fmt.Errorf("OffsetDelete group %s: %w", group, groupErr)
	}
	if failed {
		return errors.New("OffsetDelete: some partitions failed, see above")
	}
	return nil
}

// sortedGroupRows orders the partitions as ConsumerGroupCommand prints
// them: by topic name and partition number written together as one
// string (so t-10 before t-2, and a topic's "Not Provided" row, -1, first).
func sortedGroupRows(m map[cluster.TopicPartition]error) []cluster.TopicPartition {
	tps := make([]cluster.TopicPartition, 0, len(m))
	for tp := range m {
		tps = append(tps, tp)
	}
	key := func(tp cluster.TopicPartition) string { return tp.Topic + strconv.Itoa(int(tp.Partition)) }
	slices.SortFunc(tps, func(a, b cluster.TopicPartition) int {
		return cmp.Or(strings.Compare(key(a), key(b)), compareTP(a, b))
	})
	return tps
}

// isErr reports whether err is the Kafka error want.
func isErr(err error, want *kerr.Error) bool { return errors.Is(err, want) }
