package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const topicsAbout = `Create, delete, describe, or list topics (kafka-topics.sh).

  --create --topic T [--partitions N] [--replication-factor R] [--replica-assignment 1:2,2:3] [--config k=v]... [--if-not-exists]
  --list
  --describe [--topic T]
  --delete --topic T [--if-exists]`

func cmdTopics(ctx context.Context, args []string, out io.Writer) error {
	f := newFlags("topics", topicsAbout)
	f.Bool("create", false, "Create a new topic.")
	f.Bool("list", false, "List all available topics.")
	f.Bool("describe", false, "List details for the given topics.")
	f.Bool("delete", false, "Delete a topic.")
	topic := f.String("topic", "", "The topic to create, describe or delete.")
	partitions := f.Int("partitions", -1, "The number of partitions for the topic being created (default: the broker's num.partitions).")
	rf := f.Int("replication-factor", -1, "The replication factor for each partition in the topic being created (default: the broker's default.replication.factor).")
	assignment := f.String("replica-assignment", "", "A list of manual partition-to-broker assignments: broker_id_for_part1_replica1:broker_id_for_part1_replica2,broker_id_for_part2_replica1:...")
	var configs stringsFlag
	f.Var(&configs, "config", "A topic configuration override for the topic being created, key=value. Repeatable.")
	f.Bool("if-not-exists", false, "With --create: do nothing if the topic exists.")
	f.Bool("if-exists", false, "With --delete or --describe: do nothing if the topic does not exist.")
	if err := f.parse(args); err != nil {
		return err
	}
	action, err := f.action("create", "list", "describe", "delete")
	if err != nil {
		return err
	}
	switch action {
	case "create":
		err = f.permit(action, "topic", "partitions", "replication-factor", "replica-assignment", "config", "if-not-exists")
	case "list":
		err = f.permit(action)
	case "describe":
		err = f.permit(action, "topic", "if-exists")
	case "delete":
		err = f.permit(action, "topic", "if-exists")
	}
	if err != nil {
		return err
	}
	if f.bootstrap == "" {
		return usageErrorf("Missing required argument: --bootstrap-server")
	}
	if (action == "create" || action == "delete") && *topic == "" {
		return usageErrorf("Missing required argument: --topic")
	}
	var assign [][]int32
	if *assignment != "" {
		if f.set["partitions"] || f.set["replication-factor"] {
			return usageErrorf("Option \"--replica-assignment\" can't be used with \"--partitions\" or \"--replication-factor\"")
		}
		for p, part := range strings.Split(*assignment, ",") {
			var replicas []int32
			for _, r := range strings.Split(part, ":") {
				id, err := strconv.ParseInt(strings.TrimSpace(r), 10, 32)
				if err != nil {
					return usageErrorf("--replica-assignment: partition %d: %q is not a broker id", p, r)
				}
				replicas = append(replicas, int32(id))
			}
			assign = append(assign, replicas)
		}
	}
	cfg := map[string]*string{}
	for _, c := range configs {
		k, v, ok := strings.Cut(c, "=")
		if !ok {
			return usageErrorf("--config %q: want key=value", c)
		}
		cfg[strings.TrimSpace(k)] = kmsg.StringPtr(strings.TrimSpace(v))
	}
	keys := map[string][]int16{"create": {19}, "delete": {20}}[action]
	return withAdmin(ctx, f.target(), keys, func(ctx context.Context, a *admin) error {
		switch action {
		case "create":
			return a.createTopic(ctx, out, *topic, int32(*partitions), int16(*rf), assign, cfg, f.set["if-not-exists"])
		case "delete":
			resp, err := a.adm.DeleteTopics(ctx, *topic)
			if err != nil {
				return fmt.Errorf("DeleteTopics: %w", err)
			}
			for _, r := range resp.Sorted() {
				if r.Err != nil && !(f.set["if-exists"] && r.Err == kerr.UnknownTopicOrPartition) {
					return fmt.Errorf("DeleteTopics %s: %w", r.Topic, withMessageString(r.Err, r.ErrMessage))
				}
			}
			return nil
		case "list":
			topics, err := a.adm.ListTopicsWithInternal(ctx)
			if err != nil {
				return fmt.Errorf("Metadata: %w", err)
			}
			for _, name := range topics.Names() {
				fmt.Fprintln(out, name)
			}
			return nil
		default:
			return a.describeTopics(ctx, out, *topic, f.set["if-exists"])
		}
	})
}

func (a *admin) createTopic(ctx context.Context, out io.Writer, topic string, partitions int32, rf int16, assign [][]int32, cfg map[string]*string, ifNotExists bool) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = a.timeoutMillis
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, rf
	for p, replicas := range assign {
		ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		ra.Partition, ra.Replicas = int32(p), replicas
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	}
	keys := make([]string, 0, len(cfg))
	for k := range cfg {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, cfg[k]
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, a.kcl)
	if err != nil {
		return fmt.Errorf("CreateTopics: %w", err)
	}
	for _, r := range resp.Topics {
		err := kerr.ErrorForCode(r.ErrorCode)
		if err == kerr.TopicAlreadyExists && ifNotExists {
			return nil
		}
		if err != nil {
			return fmt.Errorf("CreateTopics %s: %w", r.Topic, withMessage(err, r.ErrorMessage))
		}
	}
	fmt.Fprintf(out, "Created topic %s.\n", topic)
	return nil
}

// describeTopics prints kafka-topics.sh --describe's lines.
func (a *admin) describeTopics(ctx context.Context, out io.Writer, topic string, ifExists bool) error {
	var topics []string
	if topic != "" {
		topics = []string{topic}
	}
	md, err := a.adm.Metadata(ctx, topics...)
	if err != nil {
		return fmt.Errorf("Metadata: %w", err)
	}
	for _, td := range md.Topics.Sorted() {
		if td.Err != nil {
			if ifExists && td.Err == kerr.UnknownTopicOrPartition {
				continue
			}
			return fmt.Errorf("Metadata %s: %w", td.Topic, td.Err)
		}
		parts := td.Partitions.Sorted()
		rf := 0
		if len(parts) > 0 {
			rf = len(parts[0].Replicas)
		}
		fmt.Fprintf(out, "Topic: %s\tTopicId: %s\tPartitionCount: %d\tReplicationFactor: %d\n", td.Topic, td.ID, len(parts), rf)
		for _, p := range parts {
			fmt.Fprintf(out, "\tTopic: %s\tPartition: %d\tLeader: %s\tReplicas: %s\tIsr: %s\n", td.Topic, p.Partition, leaderString(p.Leader), joinIDs(p.Replicas), joinIDs(p.ISR))
		}
	}
	return nil
}

func leaderString(id int32) string {
	if id < 0 {
		return "none"
	}
	return strconv.Itoa(int(id))
}

func joinIDs(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(int(id))
	}
	return strings.Join(s, ",")
}
