package protocol

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestOffsetDelete maps OffsetDelete (47) v0 onto the coordinator: a live
// kgo consumer group of topic t keeps t's offsets
// (GROUP_SUBSCRIBED_TO_TOPIC) and loses those of a topic it no longer
// consumes; an unknown partition answers UNKNOWN_TOPIC_OR_PARTITION; an
// unknown group GROUP_ID_NOT_FOUND at the top level with no topics; once
// the group is Empty, kadm's DeleteOffsets deletes the rest.
func TestOffsetDelete(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "t", 2)
	createTopic(t, b, "old", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	cons, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("t"),
		kgo.DisableAutoCommit(), kgo.SessionTimeout(6*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	// Wait until the group is Stable with its member, then commit
	// through it offsets of t (subscribed) and old (not).
	for {
		d, err := adm.DescribeGroups(ctx, "g")
		if err == nil && d["g"].State == "Stable" && len(d["g"].Members) == 1 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("group never Stable: %+v %v", d, err)
		}
		pctx, pcancel := context.WithTimeout(ctx, 50*time.Millisecond)
		cons.PollRecords(pctx, 1) // drives the join
		pcancel()
	}
	var commitErr error
	cons.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{
		"t":   {0: {Epoch: -1, Offset: 3}, 1: {Epoch: -1, Offset: 4}},
		"old": {0: {Epoch: -1, Offset: 5}},
	}, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		commitErr = err
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if e := kerr.ErrorForCode(rp.ErrorCode); e != nil && commitErr == nil {
					commitErr = e
				}
			}
		}
	})
	if commitErr != nil {
		t.Fatalf("commit: %v", commitErr)
	}

	// By hand: v0, an unknown topic and partition alongside.
	req := kmsg.NewPtrOffsetDeleteRequest()
	req.Group = "g"
	for topic, ps := range map[string][]int32{"t": {0, 1}, "old": {0, 7}, "nope": {0}} {
		rt := kmsg.NewOffsetDeleteRequestTopic()
		rt.Topic = topic
		for _, p := range ps {
			rp := kmsg.NewOffsetDeleteRequestTopicPartition()
			rp.Partition = p
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[int32]int16{
		"t":    {0: kerr.GroupSubscribedToTopic.Code, 1: kerr.GroupSubscribedToTopic.Code},
		"old":  {0: 0, 7: kerr.UnknownTopicOrPartition.Code},
		"nope": {0: kerr.UnknownTopicOrPartition.Code},
	}
	got := map[string]map[int32]int16{}
	for _, rt := range resp.Topics {
		got[rt.Topic] = map[int32]int16{}
		for _, rp := range rt.Partitions {
			got[rt.Topic][rp.Partition] = rp.ErrorCode
		}
	}
	if resp.ErrorCode != 0 || len(got) != len(want) {
		t.Fatalf("response: error %d, partitions %v; want %v", resp.ErrorCode, got, want)
	}
	for topic, ps := range want {
		for p, code := range ps {
			if c, ok := got[topic][p]; !ok || c != code {
				t.Fatalf("%s-%d: code %d (present %v), want %d; all %v", topic, p, c, ok, code, got)
			}
		}
	}
	fetched, err := adm.FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := fetched.Lookup("old", 0); ok {
		t.Fatalf("old-0 still committed: %+v", fetched)
	}
	if o, ok := fetched.Lookup("t", 1); !ok || o.At != 4 {
		t.Fatalf("t-1 after a refused delete: %+v", o)
	}

	// An unknown group: top-level GROUP_ID_NOT_FOUND, no topics.
	req.Group = "nobody"
	if resp, err := req.RequestWith(ctx, cl); err != nil || resp.ErrorCode != kerr.GroupIDNotFound.Code || len(resp.Topics) != 0 {
		t.Fatalf("unknown group: %+v %v", resp, err)
	}

	// The consumer leaves: the group is Empty and kadm deletes t's.
	cons.Close()
	del := kadm.TopicsSet{}
	del.Add("t", 0, 1)
	dresp, err := adm.DeleteOffsets(ctx, "g", del)
	if err != nil || dresp.Error() != nil {
		t.Fatalf("delete offsets of the empty group: %+v %v", dresp, err)
	}
	if fetched, err = adm.FetchOffsets(ctx, "g"); err != nil || len(fetched) != 0 {
		t.Fatalf("offsets left: %+v %v", fetched, err)
	}
	if _, err := adm.DeleteOffsets(ctx, "g", del); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Fatalf("delete offsets of the removed group: %v", err)
	}
}
