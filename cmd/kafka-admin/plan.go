package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kafkazk/broker/cluster"
)

// anyLogDir is the log_dirs entry that leaves the directory to the broker.
const anyLogDir = "any"

// errUsage marks an error in the command line or an input file; main exits 2.
var errUsage = errors.New("usage")

func usageErrorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}

// planPartition is one entry of a reassignment plan.
type planPartition struct {
	Topic     string   `json:"topic"`
	Partition int32    `json:"partition"`
	Replicas  []int32  `json:"replicas"`
	LogDirs   []string `json:"log_dirs"`
}

// planJSON is kafka-reassign-partitions.sh's reassignment file, version 1:
// {"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any","any"]}]}.
// Field order matters: the output is compared byte for byte with Kafka's.
type planJSON struct {
	Version    int             `json:"version"`
	Partitions []planPartition `json:"partitions"`
}

// assignment maps partitions to replica lists; the order of a list is the
// preference order, its first broker the preferred leader.
type assignment map[cluster.TopicPartition][]int32

// sortedPartitions returns the keys of a by topic, then partition.
func sortedPartitions[V any](m map[cluster.TopicPartition]V) []cluster.TopicPartition {
	tps := make([]cluster.TopicPartition, 0, len(m))
	for tp := range m {
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, compareTP)
	return tps
}

func compareTP(a, b cluster.TopicPartition) int {
	return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
}

// formatPlan renders a in Kafka's reassignment JSON, sorted by topic and
// partition, with "any" for every log dir.
func formatPlan(a assignment) string {
	p := planJSON{Version: 1, Partitions: []planPartition{}}
	for _, tp := range sortedPartitions(a) {
		replicas := a[tp]
		dirs := make([]string, len(replicas))
		for i := range dirs {
			dirs[i] = anyLogDir
		}
		p.Partitions = append(p.Partitions, planPartition{
			Topic: tp.Topic, Partition: tp.Partition, Replicas: slices.Clone(replicas), LogDirs: dirs,
		})
	}
	if len(p.Partitions) == 0 {
		p.Partitions = []planPartition{}
	}
	for i := range p.Partitions {
		if p.Partitions[i].Replicas == nil {
			p.Partitions[i].Replicas = []int32{}
		}
	}
	b, err := json.Marshal(p)
	if err != nil {
		panic(fmt.Sprintf("kafka-admin: marshal a plan of plain values: %v", err))
	}
	return string(b)
}

// rawPlan is the plan as read, before Kafka's checks; pointers tell a
// missing field from a zero.
type rawPlan struct {
	Version    *int `json:"version"`
	Partitions []struct {
		Topic     *string   `json:"topic"`
		Partition *int32    `json:"partition"`
		Replicas  *[]int32  `json:"replicas"`
		LogDirs   *[]string `json:"log_dirs"`
	} `json:"partitions"`
}

// planEntry is one parsed partition of a plan, in file order.
type planEntry struct {
	TP       cluster.TopicPartition
	Replicas []int32
}

// parsePlanEntries reads a reassignment file as Kafka's
// parsePartitionReassignmentData does: version 1 (the default), topic,
// partition and replicas required, log_dirs optional but as long as
// replicas. Entries keep file order and duplicates, so callers can check.
// A log dir other than "any" is refused: there is one log directory per
// replica here and no AlterReplicaLogDirs.
func parsePlanEntries(data []byte) ([]planEntry, error) {
	var raw rawPlan
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&raw); err != nil {
		return nil, usageErrorf("the reassignment JSON is not valid: %v", err)
	}
	if raw.Version != nil && *raw.Version != 1 {
		return nil, usageErrorf("Not supported version field value %d", *raw.Version)
	}
	var out []planEntry
	for i, p := range raw.Partitions {
		if p.Topic == nil || p.Partition == nil || p.Replicas == nil {
			return nil, usageErrorf("partition entry %d needs \"topic\", \"partition\" and \"replicas\"", i)
		}
		tp := cluster.TopicPartition{Topic: *p.Topic, Partition: *p.Partition}
		replicas := *p.Replicas
		if p.LogDirs != nil {
			dirs := *p.LogDirs
			if len(dirs) != len(replicas) {
				return nil, usageErrorf("Size of replicas list %s is different from size of log dirs list %s for partition %s",
					javaList(replicas), javaStrings(dirs), tp)
			}
			for _, d := range dirs {
				if d != anyLogDir {
					return nil, usageErrorf("partition %s: log dir %q: only \"any\" is supported (no replica moves between log directories)", tp, d)
				}
			}
		}
		out = append(out, planEntry{TP: tp, Replicas: slices.Clone(replicas)})
	}
	return out, nil
}

// parseExecutePlan adds --execute's checks (parseExecuteAssignmentArgs):
// a non-empty list, no empty replica list, no partition twice, no broker
// twice in one partition.
func parseExecutePlan(data []byte) (assignment, error) {
	entries, err := parsePlanEntries(data)
	if err != nil {
		return nil, err
	}
	if len(entries) == 0 {
		return nil, usageErrorf("Partition reassignment list cannot be empty")
	}
	a := make(assignment, len(entries))
	var dupParts []string
	var dupReplicas []string
	for _, e := range entries {
		if len(e.Replicas) == 0 {
			return nil, usageErrorf("Partition replica list cannot be empty")
		}
		if _, ok := a[e.TP]; ok {
			dupParts = append(dupParts, e.TP.String())
		}
		a[e.TP] = e.Replicas
		if d := duplicates(e.Replicas); len(d) > 0 {
			dupReplicas = append(dupReplicas, fmt.Sprintf("%s contains multiple entries for %s", e.TP, joinInts(d, ",")))
		}
	}
	if len(dupParts) > 0 {
		return nil, usageErrorf("Partition reassignment contains duplicate topic partitions: %s", strings.Join(dupParts, ","))
	}
	if len(dupReplicas) > 0 {
		return nil, usageErrorf("Partition replica lists may not contain duplicate entries: %s", strings.Join(dupReplicas, ". "))
	}
	return a, nil
}

// parseTopicsToMove reads --topics-to-move-json-file:
// {"topics":[{"topic":"foo"}],"version":1}.
func parseTopicsToMove(data []byte) ([]string, error) {
	var raw struct {
		Version *int `json:"version"`
		Topics  []struct {
			Topic *string `json:"topic"`
		} `json:"topics"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, usageErrorf("the topics-to-move JSON is not valid: %v", err)
	}
	if raw.Version != nil && *raw.Version != 1 {
		return nil, usageErrorf("Not supported version field value %d", *raw.Version)
	}
	var topics []string
	for i, t := range raw.Topics {
		if t.Topic == nil {
			return nil, usageErrorf("topics entry %d has no \"topic\"", i)
		}
		topics = append(topics, *t.Topic)
	}
	if d := duplicates(topics); len(d) > 0 {
		return nil, usageErrorf("List of topics to reassign contains duplicate entries: %s", strings.Join(d, ","))
	}
	if len(topics) == 0 {
		return nil, usageErrorf("the topics-to-move JSON names no topic")
	}
	return topics, nil
}

// parseBrokerList reads --broker-list "1,2,3".
func parseBrokerList(s string) ([]int32, error) {
	var ids []int32
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		var id int32
		if _, err := fmt.Sscanf(f, "%d", &id); err != nil || fmt.Sprint(id) != f || id < 0 {
			return nil, usageErrorf("--broker-list: %q is not a broker id", f)
		}
		ids = append(ids, id)
	}
	if d := duplicates(ids); len(d) > 0 {
		return nil, usageErrorf("Broker list contains duplicate entries: %s", joinInts(d, ","))
	}
	return ids, nil
}

// duplicates returns the values that occur more than once, in first-seen order.
func duplicates[T comparable](xs []T) []T {
	seen := make(map[T]int, len(xs))
	var out []T
	for _, x := range xs {
		seen[x]++
		if seen[x] == 2 {
			out = append(out, x)
		}
	}
	return out
}

func joinInts(xs []int32, sep string) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, sep)
}

// javaList prints a list as Java's List.toString does: [1, 2, 3].
func javaList(xs []int32) string { return "[" + joinInts(xs, ", ") + "]" }

func javaStrings(xs []string) string { return "[" + strings.Join(xs, ", ") + "]" }
