package test

// Group client tests: kcat in balanced-consumer mode (-G), a sarama
// ConsumerGroup, a kafka-go Reader with a GroupID and a
// confluent-kafka-python consumer each join a group on a 3-broker cluster
// (__consumer_offsets at replication factor 3), consume what was produced
// and commit; then a new consumer in the same group must resume where the
// group committed (reading the second batch and nothing of the first), and
// the committed offsets must end at the log end offsets.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

const groupClientRecords = 40

// groupRunner consumes want records of topic in group, commits and exits,
// returning the keys it read.
type groupRunner func(t *testing.T, c *Cluster, group, topic string, want int) []string

func TestGroupClients(t *testing.T) {
	c := NewCluster(t, 3, groupProps())
	py, pyErr := pythonWithConfluentKafka()
	_, kcatErr := exec.LookPath("kcat")
	for _, tc := range []struct {
		name string
		run  groupRunner
		skip error
	}{
		{"kcat", kcatGroupConsume, kcatErr},
		{"sarama", saramaGroupConsume, nil},
		{"kafka-go", kafkaGoGroupConsume, nil},
		{"python", func(t *testing.T, c *Cluster, group, topic string, want int) []string {
			return pythonGroupConsume(t, py, c, group, topic, want)
		}, pyErr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.skip != nil {
				t.Skip(tc.skip)
			}
			start := time.Now()
			topic, group := "gc-"+tc.name, "group-"+tc.name
			createTopic(t, c, topic, 4, 3, nil, nil)
			first := produceKeys(t, c, topic, "first", groupClientRecords)
			checkKeys(t, "first run", tc.run(t, c, group, topic, groupClientRecords), first, nil)
			second := produceKeys(t, c, topic, "second", groupClientRecords)
			checkKeys(t, "restarted consumer", tc.run(t, c, group, topic, groupClientRecords), second, first)
			checkCommittedAtEnd(t, c, group, topic, 30*time.Second)
			t.Logf("%s: %s", tc.name, time.Since(start).Round(time.Millisecond))
		})
	}
}

// produceKeys writes n records keyed prefix-i round-robin over 4
// partitions and returns the keys.
func produceKeys(t *testing.T, c *Cluster, topic, prefix string, n int) []string {
	t.Helper()
	cl := c.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(topic))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var keys []string
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("%s-%03d", prefix, i)
		keys = append(keys, k)
		recs = append(recs, &kgo.Record{Key: []byte(k), Value: []byte("v-" + k), Partition: int32(i % 4)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	return keys
}

// checkKeys: every key of want was read and none of the earlier batch.
func checkKeys(t *testing.T, what string, got, want, notWant []string) {
	t.Helper()
	seen := map[string]bool{}
	for _, k := range got {
		seen[k] = true
	}
	for _, k := range want {
		if !seen[k] {
			t.Errorf("%s: %s not read (read %d records)", what, k, len(got))
			return
		}
	}
	for _, k := range notWant {
		if seen[k] {
			t.Errorf("%s: read %s again: the group's committed offsets were not used", what, k)
			return
		}
	}
}

func kcatGroupConsume(t *testing.T, c *Cluster, group, topic string, want int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kcat", "-b", c.Bootstrap(), "-G", group, topic,
		"-X", "auto.offset.reset=earliest", "-X", "auto.commit.interval.ms=200",
		"-c", strconv.Itoa(want), "-f", `%k\n`, "-q")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kcat -G: %v\n%s", err, tailLines(stderr.String(), 30))
	}
	noProtocolErrors(t, "kcat -G", stderr.String())
	return strings.Fields(stdout.String())
}

// saramaHandler marks and commits every message and stops the session
// after want.
type saramaHandler struct {
	mu     sync.Mutex
	keys   []string
	want   int
	cancel context.CancelFunc
}

func (h *saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *saramaHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		sess.MarkMessage(m, "")
		sess.Commit()
		h.mu.Lock()
		h.keys = append(h.keys, string(m.Key))
		done := len(h.keys) >= h.want
		h.mu.Unlock()
		if done {
			h.cancel()
		}
	}
	return nil
}

func saramaGroupConsume(t *testing.T, c *Cluster, group, topic string, want int) []string {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cg, err := sarama.NewConsumerGroup(c.Seeds(), group, cfg)
	if err != nil {
		t.Fatalf("sarama consumer group: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h := &saramaHandler{want: want, cancel: cancel}
	for ctx.Err() == nil {
		if err := cg.Consume(ctx, []string{topic}, h); err != nil && !errors.Is(err, sarama.ErrClosedConsumerGroup) {
			t.Logf("sarama consume: %v", err)
			time.Sleep(100 * time.Millisecond)
		}
	}
	if err := cg.Close(); err != nil {
		t.Errorf("sarama close: %v", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.keys) < want {
		t.Fatalf("sarama read %d of %d records", len(h.keys), want)
	}
	return h.keys
}

func kafkaGoGroupConsume(t *testing.T, c *Cluster, group, topic string, want int) []string {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: c.Seeds(), GroupID: group, Topic: topic,
		StartOffset: kafka.FirstOffset, MaxWait: 500 * time.Millisecond,
		HeartbeatInterval: time.Second, SessionTimeout: 10 * time.Second,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var keys []string
	for len(keys) < want {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			r.Close()
			t.Fatalf("kafka-go fetch after %d records: %v", len(keys), err)
		}
		if err := r.CommitMessages(ctx, m); err != nil {
			r.Close()
			t.Fatalf("kafka-go commit: %v", err)
		}
		keys = append(keys, string(m.Key))
	}
	if err := r.Close(); err != nil {
		t.Errorf("kafka-go close: %v", err)
	}
	return keys
}

const pythonGroupScript = `
import sys
from confluent_kafka import Consumer
bootstrap, group, topic, want = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
              "enable.auto.commit": False, "session.timeout.ms": 10000})
c.subscribe([topic])
n = 0
while n < want:
    m = c.poll(1.0)
    if m is None:
        continue
    if m.error():
        print("error: %s" % m.error(), file=sys.stderr)
        continue
    print(m.key().decode())
    n += 1
c.commit(asynchronous=False)
c.close()
`

func pythonGroupConsume(t *testing.T, py string, c *Cluster, group, topic string, want int) []string {
	t.Helper()
	script := filepath.Join(t.TempDir(), "group.py")
	if err := os.WriteFile(script, []byte(pythonGroupScript), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, script, c.Bootstrap(), group, topic, strconv.Itoa(want))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("python consumer: %v\n%s", err, tailLines(stderr.String(), 30))
	}
	noProtocolErrors(t, "python consumer", stderr.String())
	var keys []string
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		keys = append(keys, sc.Text())
	}
	return keys
}
