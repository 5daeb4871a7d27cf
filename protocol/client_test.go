package protocol

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Tests in this file drive the server with franz-go's real client (kgo)
// and admin client (kadm), with default settings: idempotent producer,
// ApiVersions negotiation from v5, Metadata/Fetch at our advertised max.

func newClient(t *testing.T, b *testBroker, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func TestKgoProduceConsume(t *testing.T) {
	b := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	adm := kadm.NewClient(newClient(t, b))
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}

	prod := newClient(t, b, kgo.DefaultProduceTopic("orders"))
	const n = 50
	for i := 0; i < n; i++ {
		r := &kgo.Record{Key: []byte(fmt.Sprint(i % 7)), Value: []byte(fmt.Sprintf("v%d", i))}
		if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}

	cons := newClient(t, b, kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]bool{}
	for len(seen) < n {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", len(seen), n, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
	for i := 0; i < n; i++ {
		if !seen[fmt.Sprintf("v%d", i)] {
			t.Errorf("record v%d not consumed", i)
		}
	}
}

func TestKgoAutoCreateOnProduce(t *testing.T) {
	b := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	prod := newClient(t, b, kgo.DefaultProduceTopic("auto"), kgo.AllowAutoTopicCreation())
	if err := prod.ProduceSync(ctx, kgo.StringRecord("hello")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	info, ok := b.cluster.Topic("auto")
	if !ok || len(info.Partitions) != 2 {
		t.Fatalf("auto-created topic: %+v %v, want 2 partitions", info, ok)
	}
}

func TestKadmTopicAdmin(t *testing.T) {
	b := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, b))

	retention := "3600000"
	res, err := adm.CreateTopic(ctx, -1, -1, map[string]*string{"retention.ms": &retention}, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if res.NumPartitions != 2 || res.ReplicationFactor != 1 {
		t.Errorf("defaults not applied: %d partitions, RF %d", res.NumPartitions, res.ReplicationFactor)
	}

	_, err = adm.CreateTopic(ctx, 1, 1, nil, "t1")
	if !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Errorf("second create: %v, want TOPIC_ALREADY_EXISTS", err)
	}
	_, err = adm.CreateTopic(ctx, 1, 3, nil, "t2")
	if !errors.Is(err, kerr.InvalidReplicationFactor) {
		t.Errorf("RF 3 on one broker: %v, want INVALID_REPLICATION_FACTOR", err)
	}
	_, err = adm.CreateTopic(ctx, 1, 1, nil, "bad/name")
	if !errors.Is(err, kerr.InvalidTopicException) {
		t.Errorf("bad name: %v, want INVALID_TOPIC_EXCEPTION", err)
	}
	bogus := "1"
	_, err = adm.CreateTopic(ctx, 1, 1, map[string]*string{"no.such.key": &bogus}, "t3")
	if !errors.Is(err, kerr.InvalidConfig) {
		t.Errorf("bad config: %v, want INVALID_CONFIG", err)
	}

	rcs, err := adm.DescribeTopicConfigs(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("t1", nil)
	if err != nil || rc.Err != nil {
		t.Fatal(err, rc.Err)
	}
	var found bool
	for _, c := range rc.Configs {
		if c.Key == "retention.ms" {
			found = true
			if c.MaybeValue() != "3600000" || c.Source != 1 {
				t.Errorf("retention.ms = %q source %v, want 3600000 from TOPIC_CONFIG", c.MaybeValue(), c.Source)
			}
		}
		if c.Key == "segment.bytes" && c.Source != 5 {
			t.Errorf("segment.bytes source %v, want DEFAULT_CONFIG", c.Source)
		}
	}
	if !found {
		t.Error("retention.ms not described")
	}
	rcs, err = adm.DescribeTopicConfigs(ctx, "nope")
	if err == nil {
		rc, _ := rcs.On("nope", nil)
		err = rc.Err
	}
	if !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Errorf("describe unknown topic: %v", err)
	}

	dres, err := adm.DeleteTopics(ctx, "t1", "nope")
	if err != nil {
		t.Fatal(err)
	}
	if err := dres["t1"].Err; err != nil {
		t.Errorf("delete t1: %v", err)
	}
	if err := dres["nope"].Err; !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Errorf("delete unknown: %v", err)
	}
	if _, ok := b.cluster.Topic("t1"); ok {
		t.Error("t1 still exists")
	}
}
