package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
)

const electAbout = `This tool attempts to elect a new leader for a set of topic partitions (kafka-leader-election.sh).
The type of elections supported are preferred replicas and unclean replicas.

  --election-type PREFERRED|UNCLEAN  and one of
  --topic T --partition P | --all-topic-partitions | --path-to-json-file F`

func cmdLeaderElection(ctx context.Context, args []string, out io.Writer) error {
	f := newFlags("leader-election", electAbout)
	electionType := f.String("election-type", "", `REQUIRED: "preferred" elects the preferred replica where it is not the leader; "unclean" elects any live replica where the partition has no leader`)
	topic := f.String("topic", "", "Name of topic for which to perform an election. Not allowed if --path-to-json-file or --all-topic-partitions is specified.")
	partition := f.Int("partition", -1, "Partition id for which to perform an election. REQUIRED if --topic is specified.")
	f.Bool("all-topic-partitions", false, "Perform election on all of the eligible topic partitions based on the type of election. Not allowed if --topic or --path-to-json-file is specified.")
	jsonFile := f.String("path-to-json-file", "", `The JSON file with the list of partitions for which leader elections should be performed: {"partitions":[{"topic":"foo","partition":1},{"topic":"foobar","partition":2}]}. Not allowed if --all-topic-partitions or --topic flags are specified.`)
	if err := f.parse(args); err != nil {
		return err
	}
	how, tps, err := electionArgs(f, *electionType, *topic, int32(*partition), *jsonFile)
	if err != nil {
		return err
	}
	return withAdmin(ctx, f.target(), []int16{43}, func(ctx context.Context, a *admin) error {
		return a.electLeaders(ctx, out, how, tps)
	})
}

// electionType is kmsg's ElectionType: 0 preferred, 1 unclean.
type electionType int8

func (e electionType) String() string {
	if e == 1 {
		return "UNCLEAN"
	}
	return "PREFERRED"
}

// electionArgs checks the flags as Kafka's LeaderElectionCommandOptions
// does and returns the partitions to elect, nil for all.
func electionArgs(f *flags, typ, topic string, partition int32, jsonFile string) (electionType, []cluster.TopicPartition, error) {
	var missing []string
	if f.bootstrap == "" {
		missing = append(missing, "bootstrap-server")
	}
	if !f.set["election-type"] {
		missing = append(missing, "election-type")
	}
	if len(missing) > 0 {
		return 0, nil, usageErrorf("Missing required option(s): %s", strings.Join(missing, ", "))
	}
	var how electionType
	switch strings.ToUpper(typ) {
	case "PREFERRED":
		how = 0
	case "UNCLEAN":
		how = 1
	default:
		return 0, nil, usageErrorf("--election-type: %q is not one of PREFERRED, UNCLEAN", typ)
	}
	n := 0
	for _, o := range []string{"topic", "all-topic-partitions", "path-to-json-file"} {
		if f.set[o] {
			n++
		}
	}
	if n != 1 {
		return 0, nil, usageErrorf("One and only one of the following options is required: topic, all-topic-partitions, path-to-json-file")
	}
	if f.set["topic"] && !f.set["partition"] {
		return 0, nil, usageErrorf("Missing required option(s): partition")
	}
	if !f.set["topic"] && f.set["partition"] {
		return 0, nil, usageErrorf("Option partition is only allowed if topic is used")
	}
	switch {
	case f.set["topic"]:
		if partition < 0 {
			return 0, nil, usageErrorf("--partition must be >= 0, not %d", partition)
		}
		return how, []cluster.TopicPartition{{Topic: topic, Partition: partition}}, nil
	case f.set["path-to-json-file"]:
		data, err := os.ReadFile(jsonFile)
		if err != nil {
			return 0, nil, usageErrorf("%v", err)
		}
		tps, err := parseElectionJSON(data)
		return how, tps, err
	default:
		return how, nil, nil
	}
}

// parseElectionJSON reads kafka-leader-election.sh's file:
// {"partitions":[{"topic":"foo","partition":1}]}.
func parseElectionJSON(data []byte) ([]cluster.TopicPartition, error) {
	var raw struct {
		Partitions *[]struct {
			Topic     *string `json:"topic"`
			Partition *int32  `json:"partition"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, usageErrorf("the election JSON is not valid: %v", err)
	}
	if raw.Partitions == nil {
		return nil, usageErrorf(`Replica election data is missing "partitions" field`)
	}
	var tps []cluster.TopicPartition
	for i, p := range *raw.Partitions {
		if p.Topic == nil || p.Partition == nil {
			return nil, usageErrorf("partition entry %d needs \"topic\" and \"partition\"", i)
		}
		tps = append(tps, cluster.TopicPartition{Topic: *p.Topic, Partition: *p.Partition})
	}
	if d := duplicates(tps); len(d) > 0 {
		names := make([]string, len(d))
		for i, tp := range d {
			names[i] = tp.String()
		}
		return nil, usageErrorf("Replica election data contains duplicate partitions: %s", strings.Join(names, ","))
	}
	if len(tps) == 0 {
		return nil, usageErrorf("Replica election data is empty")
	}
	return tps, nil
}

// electLeaders sends ElectLeaders (tps nil: all partitions) and prints
// Kafka's three kinds of line; any partition that failed fails the command.
func (a *admin) electLeaders(ctx context.Context, out io.Writer, how electionType, tps []cluster.TopicPartition) error {
	req := kmsg.NewPtrElectLeadersRequest()
	req.ElectionType = int8(how)
	req.TimeoutMillis = a.timeoutMillis
	if tps != nil {
		idx := make(map[string]int)
		for _, tp := range tps {
			i, ok := idx[tp.Topic]
			if !ok {
				i = len(req.Topics)
				idx[tp.Topic] = i
				rt := kmsg.NewElectLeadersRequestTopic()
				rt.Topic = tp.Topic
				req.Topics = append(req.Topics, rt)
			}
			req.Topics[i].Partitions = append(req.Topics[i].Partitions, tp.Partition)
		}
	}
	resp, err := req.RequestWith(ctx, a.kcl)
	if err != nil {
		return fmt.Errorf("ElectLeaders: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("ElectLeaders: %w", err)
	}
	results := make(map[cluster.TopicPartition]error)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			err := kerr.ErrorForCode(p.ErrorCode)
			if err != nil {
				err = withMessage(err, p.ErrorMessage)
			}
			results[cluster.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = err
		}
	}
	return reportElection(out, how, results)
}

// reportElection prints the results as LeaderElectionCommand does.
func reportElection(out io.Writer, how electionType, results map[cluster.TopicPartition]error) error {
	var ok, noop, failed []string
	for _, tp := range sortedPartitions(results) {
		switch err := results[tp]; {
		case err == nil:
			ok = append(ok, tp.String())
		case isErr(err, kerr.ElectionNotNeeded):
			noop = append(noop, tp.String())
		default:
			failed = append(failed, fmt.Sprintf("Error completing leader election (%s) for partition: %s: %v", how, tp, err))
		}
	}
	if len(ok) > 0 {
		fmt.Fprintf(out, "Successfully completed leader election (%s) for partitions %s\n", how, strings.Join(ok, ", "))
	}
	if len(noop) > 0 {
		fmt.Fprintf(out, "Valid replica already elected for partitions %s\n", strings.Join(noop, ", "))
	}
	for _, l := range failed {
		fmt.Fprintln(out, l)
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d replica(s) could not be elected", len(failed))
	}
	return nil
}
