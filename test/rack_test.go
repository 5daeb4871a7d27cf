package test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// topicAssignment reads /brokers/topics/<topic>'s partitions.
func topicAssignment(c *Cluster, topic string) (map[int32][]int32, error) {
	data, _, err := c.Get("/brokers/topics/" + topic)
	if err != nil {
		return nil, fmt.Errorf("get /brokers/topics/%s: %w", topic, err)
	}
	var z struct {
		Partitions map[string][]int32 `json:"partitions"`
	}
	if err := json.Unmarshal(data, &z); err != nil {
		return nil, fmt.Errorf("/brokers/topics/%s = %s: %w", topic, data, err)
	}
	out := make(map[int32][]int32, len(z.Partitions))
	for p, rs := range z.Partitions {
		n, err := strconv.ParseInt(p, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("/brokers/topics/%s: partition %q: %w", topic, p, err)
		}
		out[int32(n)] = rs
	}
	return out, nil
}

// TestRackAwareAssignment: 6 brokers in 3 racks (broker.rack); a new
// 12-partition RF=3 topic, and 6 partitions added to it by
// CreatePartitions, have every partition's replicas on 3 racks, as read
// from the topic znode. A seventh broker without broker.rack then makes an
// automatic assignment fail as Kafka's does (UNKNOWN_SERVER_ERROR, "Not
// all brokers have rack information").
func TestRackAwareAssignment(t *testing.T) {
	c := newStoppedCluster(t, nil)
	rackOf := map[int32]string{}
	for id := int32(1); id <= 6; id++ {
		b := c.AddBroker(id)
		rackOf[id] = fmt.Sprintf("rack-%c", 'a'+id%3)
		b.Props["broker.rack"] = rackOf[id]
	}
	for _, b := range c.Brokers {
		if err := b.StartProcess(); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range c.Brokers {
		b.WaitReady(readyTimeout)
	}
	// Every registration carries its rack.
	for id, rack := range rackOf {
		data, _, err := c.Get(fmt.Sprintf("/brokers/ids/%d", id))
		var reg struct {
			Rack string `json:"rack"`
		}
		if err != nil || json.Unmarshal(data, &reg) != nil || reg.Rack != rack {
			t.Fatalf("/brokers/ids/%d = %s (%v), want rack %s", id, data, err, rack)
		}
	}
	adm := kadm.NewClient(c.Client())
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	const topic = "racked"
	checkRacks := func(partitions int) {
		t.Helper()
		a, err := topicAssignment(c, topic)
		if err != nil {
			t.Fatal(err)
		}
		if len(a) != partitions {
			t.Fatalf("%d partitions in the znode, want %d: %v", len(a), partitions, a)
		}
		leaders := map[int32]int{}
		for p, rs := range a {
			racks := map[string]bool{}
			for _, b := range rs {
				racks[rackOf[b]] = true
			}
			if len(rs) != 3 || len(racks) != 3 {
				t.Fatalf("partition %d: replicas %v on racks %v, want 3 racks", p, rs, racks)
			}
			leaders[rs[0]]++
		}
		t.Logf("%d partitions, preferred leaders per broker %v", partitions, leaders)
	}
	if resp, err := adm.CreateTopic(ctx, 12, 3, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	checkRacks(12)
	if resp, err := adm.UpdatePartitions(ctx, 18, topic); err != nil || resp.Error() != nil {
		t.Fatalf("create partitions: %v %v", err, resp.Error())
	}
	checkRacks(18)

	// A broker without a rack joins: Kafka's assignment refuses to mix.
	norack := c.AddBroker(7)
	norack.Start()
	eventually(t, 30*time.Second, func() error {
		resps, err := adm.CreateTopics(ctx, 3, 3, nil, "mixed")
		if err != nil {
			return err
		}
		resp := resps["mixed"]
		if !errors.Is(resp.Err, kerr.UnknownServerError) || !strings.Contains(resp.ErrMessage, "not all brokers have rack information") {
			return fmt.Errorf("create topic with a broker without rack: %v %q, want UNKNOWN_SERVER_ERROR with a message", resp.Err, resp.ErrMessage)
		}
		return nil
	})
	if _, _, err := c.Get("/brokers/topics/mixed"); err == nil {
		t.Fatal("/brokers/topics/mixed was written")
	}
}
