package test

// TestTopicTools drives the topic tools of issue 4 against a 3-broker
// cluster with real ZooKeeper, through kadm and raw requests: partitions
// added to a live topic take writes; topic config changes take effect on
// the running brokers without a restart (max.message.bytes, retention,
// min.insync.replicas) and are stored as Kafka stores them; DeleteRecords
// moves the log start offset on the leader and on the followers (seen
// after leadership moves) and consumers from the start begin there;
// DescribeCluster and DescribeLogDirs describe the cluster. The subtests
// share one cluster and run in order.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestTopicTools(t *testing.T) {
	c := NewCluster(t, 3, failoverProps(map[string]string{"log.retention.check.interval.ms": "500"}))
	adm := kadm.NewClient(c.Client())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	str := func(s string) *string { return &s }
	rec := func(n int, size int) []Rec {
		var out []Rec
		for i := range n {
			out = append(out, Rec{Key: []byte(fmt.Sprintf("k%d", i)), Value: bytes.Repeat([]byte{'v'}, size)})
		}
		return out
	}
	produceTo := func(t *testing.T, topic string, p int32, recs []Rec) (int16, int64) {
		t.Helper()
		leader := c.mustState(t, topic, p).Leader
		code, base, err := rawProduce(c.Broker(leader), topic, p, recs)
		if err != nil {
			t.Fatal(err)
		}
		return code, base
	}

	t.Run("CreatePartitions", func(t *testing.T) {
		const topic = "tools-grow"
		createTopic(t, c, topic, 2, 3, nil, nil)
		resp, err := adm.UpdatePartitions(ctx, 5, topic)
		if err != nil || resp[topic].Err != nil {
			t.Fatalf("UpdatePartitions: %+v %v", resp, err)
		}
		for p := int32(2); p < 5; p++ {
			c.waitState(t, topic, p, 30*time.Second, func(s partState) error {
				if s.Leader < 0 || len(s.ISR) != 3 {
					return errors.New("want a leader and 3 in the ISR")
				}
				return nil
			})
		}
		for _, b := range c.Brokers {
			waitMetadataLeaders(t, c, b, topic, 5)
		}
		for p := int32(0); p < 5; p++ {
			if code, _ := produceTo(t, topic, p, rec(3, 10)); code != 0 {
				t.Fatalf("produce to partition %d: error %d", p, code)
			}
		}
		data, _, err := c.Get("/brokers/topics/" + topic)
		if err != nil {
			t.Fatal(err)
		}
		var a struct {
			Partitions map[string][]int32 `json:"partitions"`
		}
		if err := json.Unmarshal(data, &a); err != nil || len(a.Partitions) != 5 || len(a.Partitions["4"]) != 3 {
			t.Fatalf("assignment znode %s (%v)", data, err)
		}
		resp, err = adm.UpdatePartitions(ctx, 4, topic)
		if err != nil || !errors.Is(resp[topic].Err, kerr.InvalidPartitions) {
			t.Fatalf("shrinking: %+v %v", resp, err)
		}
	})

	t.Run("AlterConfigs", func(t *testing.T) {
		const topic = "tools-cfg"
		createTopic(t, c, topic, 1, 3, nil, nil)
		if code, _ := produceTo(t, topic, 0, rec(1, 1000)); code != 0 {
			t.Fatalf("1000-byte record before the change: error %d", code)
		}
		resp, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "max.message.bytes", Value: str("300")}}, topic)
		if err != nil || resp[0].Err != nil {
			t.Fatalf("set max.message.bytes: %+v %v", resp, err)
		}
		data, _, err := c.Get("/config/topics/" + topic)
		if err != nil || string(data) != `{"version":1,"config":{"max.message.bytes":"300"}}` {
			t.Fatalf("config znode %s (%v)", data, err)
		}
		kids, _, err := c.ZK.Children(c.Path("/config/changes"))
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, k := range kids {
			d, _, err := c.Get("/config/changes/" + k)
			found = found || err == nil && strings.HasPrefix(k, "config_change_") && string(d) == `{"version":2,"entity_path":"topics/`+topic+`"}`
		}
		if !found {
			t.Fatalf("no config_change_ node for %s among %v", topic, kids)
		}
		// The leader applies it without a restart.
		eventually(t, 10*time.Second, func() error {
			if code, _ := produceTo(t, topic, 0, rec(1, 1000)); code != kerr.MessageTooLarge.Code {
				return fmt.Errorf("1000-byte record: error %d, want MESSAGE_TOO_LARGE", code)
			}
			return nil
		})
		if code, _ := produceTo(t, topic, 0, rec(1, 10)); code != 0 {
			t.Fatalf("small record: error %d", code)
		}
		// Every broker describes the override as TOPIC_CONFIG.
		for _, b := range c.Brokers {
			eventually(t, 10*time.Second, func() error {
				src, val, err := describeTopicConfig(b, topic, "max.message.bytes")
				if err != nil {
					return err
				}
				if src != kmsg.ConfigSourceDynamicTopicConfig || val != "300" {
					return fmt.Errorf("broker %d: max.message.bytes=%s source %v", b.ID(), val, src)
				}
				return nil
			})
		}

		// Retention: small segments, then retention.ms=1 deletes the old ones.
		resp, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
			{Op: kadm.DeleteConfig, Name: "max.message.bytes"},
			{Name: "segment.bytes", Value: str("2048")},
		}, topic)
		if err != nil || resp[0].Err != nil {
			t.Fatalf("segment.bytes: %+v %v", resp, err)
		}
		eventually(t, 10*time.Second, func() error {
			if code, _ := produceTo(t, topic, 0, rec(1, 1000)); code != 0 {
				return fmt.Errorf("1000-byte record after deleting the override: error %d", code)
			}
			return nil
		})
		for range 6 {
			if code, _ := produceTo(t, topic, 0, rec(2, 300)); code != 0 {
				t.Fatalf("produce: error %d", code)
			}
		}
		resp, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: str("1")}}, topic)
		if err != nil || resp[0].Err != nil {
			t.Fatalf("retention.ms: %+v %v", resp, err)
		}
		eventually(t, 20*time.Second, func() error {
			starts, err := adm.ListStartOffsets(ctx, topic)
			if err != nil {
				return err
			}
			if o, _ := starts.Lookup(topic, 0); o.Err != nil || o.Offset <= 0 {
				return fmt.Errorf("start offset %+v: retention has not deleted anything", o)
			}
			return nil
		})

		// min.insync.replicas=3 with a follower stopped.
		resp, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "min.insync.replicas", Value: str("3")}}, topic)
		if err != nil || resp[0].Err != nil {
			t.Fatalf("min.insync.replicas: %+v %v", resp, err)
		}
		st := c.mustState(t, topic, 0)
		follower := c.Broker(st.ISR[slices.IndexFunc(st.ISR, func(id int32) bool { return id != st.Leader })])
		follower.Stop()
		c.waitState(t, topic, 0, 30*time.Second, func(s partState) error {
			if len(s.ISR) != 2 || s.inISR(follower.ID()) {
				return fmt.Errorf("want broker %d out of the ISR", follower.ID())
			}
			return nil
		})
		eventually(t, 10*time.Second, func() error {
			if code, _ := produceTo(t, topic, 0, rec(1, 10)); code != kerr.NotEnoughReplicas.Code {
				return fmt.Errorf("acks=all with 2 in the ISR: error %d, want NOT_ENOUGH_REPLICAS", code)
			}
			return nil
		})
		follower.Start()
		follower.WaitReady(60 * time.Second)
		c.waitState(t, topic, 0, 60*time.Second, func(s partState) error {
			if len(s.ISR) != 3 {
				return errors.New("want the ISR back to 3")
			}
			return nil
		})
		eventually(t, 10*time.Second, func() error {
			if code, _ := produceTo(t, topic, 0, rec(1, 10)); code != 0 {
				return fmt.Errorf("acks=all with the ISR back: error %d", code)
			}
			return nil
		})
	})

	t.Run("DeleteRecords", func(t *testing.T) {
		const topic = "tools-del"
		createTopic(t, c, topic, 1, 3, nil, nil)
		for range 5 {
			if code, _ := produceTo(t, topic, 0, rec(2, 10)); code != 0 {
				t.Fatalf("produce: error %d", code)
			}
		}
		offsets := kadm.Offsets{}
		offsets.AddOffset(topic, 0, 6, -1)
		resp, err := adm.DeleteRecords(ctx, offsets)
		if err != nil {
			t.Fatal(err)
		}
		if r, _ := resp.Lookup(topic, 0); r.Err != nil || r.LowWatermark != 6 {
			t.Fatalf("DeleteRecords: %+v", r)
		}
		offsets = kadm.Offsets{}
		offsets.AddOffset(topic, 0, 11, -1)
		resp, err = adm.DeleteRecords(ctx, offsets)
		if r, _ := resp.Lookup(topic, 0); err != nil || !errors.Is(r.Err, kerr.OffsetOutOfRange) {
			t.Fatalf("above the high watermark: %+v %v", r, err)
		}
		checkStart := func(want int64) {
			t.Helper()
			starts, err := adm.ListStartOffsets(ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			if o, _ := starts.Lookup(topic, 0); o.Err != nil || o.Offset != want {
				t.Fatalf("start offset %+v, want %d", o, want)
			}
			cl := c.Client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			fctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			defer cancel()
			fs := cl.PollFetches(fctx)
			if err := fs.Err(); err != nil {
				t.Fatal(err)
			}
			if recs := fs.Records(); len(recs) == 0 || recs[0].Offset != want {
				t.Fatalf("consumer from the start: %d records, first %v, want offset %d", len(recs), recs, want)
			}
		}
		checkStart(6)
		// The followers moved too: make one of them leader.
		old := c.Broker(c.mustState(t, topic, 0).Leader)
		old.Stop()
		c.waitState(t, topic, 0, 30*time.Second, func(s partState) error {
			if s.Leader < 0 || s.Leader == old.ID() {
				return errors.New("want a new leader")
			}
			return nil
		})
		eventually(t, 20*time.Second, func() error {
			starts, err := adm.ListStartOffsets(ctx, topic)
			if err != nil {
				return err
			}
			if o, _ := starts.Lookup(topic, 0); o.Err != nil || o.Offset != 6 {
				return fmt.Errorf("start offset on the new leader %+v, want 6", o)
			}
			return nil
		})
		checkStart(6)
		old.Start()
		old.WaitReady(60 * time.Second)
	})

	t.Run("DescribeClusterAndLogDirs", func(t *testing.T) {
		ctrl, err := c.ControllerID()
		if err != nil {
			t.Fatal(err)
		}
		idData, _, err := c.Get("/cluster/id")
		if err != nil {
			t.Fatal(err)
		}
		cl := c.Client()
		req := kmsg.NewPtrDescribeClusterRequest()
		req.EndpointType = 1
		r, err := req.RequestWith(ctx, cl)
		if err != nil || r.ErrorCode != 0 {
			t.Fatalf("DescribeCluster: %+v %v", r, err)
		}
		if len(r.Brokers) != 3 || r.ControllerID != ctrl || r.ClusterID == "" || !strings.Contains(string(idData), r.ClusterID) {
			t.Fatalf("DescribeCluster: %+v, controller %d, /cluster/id %s", r, ctrl, idData)
		}
		dirs, err := adm.DescribeAllLogDirs(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		st := c.mustState(t, "tools-grow", 0)
		for _, b := range c.Brokers {
			bd := dirs[b.ID()]
			if len(bd) != 1 {
				t.Fatalf("broker %d: %d log dirs", b.ID(), len(bd))
			}
			for _, d := range bd {
				if d.Err != nil {
					t.Fatalf("broker %d dir %s: %v", b.ID(), d.Dir, d.Err)
				}
				p, ok := d.Topics["tools-grow"][0]
				if !ok || p.Size <= 0 || p.IsFuture || p.OffsetLag != 0 {
					t.Fatalf("broker %d dir %s: tools-grow-0 %+v (leader %d)", b.ID(), d.Dir, p, st.Leader)
				}
			}
		}
	})
}

// describeTopicConfig asks b (and only b) for one config of topic.
func describeTopicConfig(b *Broker, topic, name string) (kmsg.ConfigSource, string, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.RequestRetries(0), kgo.DialTimeout(time.Second))
	if err != nil {
		return 0, "", err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName, rr.ConfigNames = kmsg.ConfigResourceTypeTopic, topic, []string{name}
	req.Resources = append(req.Resources, rr)
	r, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		return 0, "", err
	}
	resp := r.(*kmsg.DescribeConfigsResponse)
	if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 || len(resp.Resources[0].Configs) != 1 {
		return 0, "", fmt.Errorf("broker %d: describe configs %+v", b.ID(), resp.Resources)
	}
	c := resp.Resources[0].Configs[0]
	v := ""
	if c.Value != nil {
		v = *c.Value
	}
	return c.Source, v, nil
}
