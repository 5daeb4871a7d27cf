package test

// Group tests: consumer groups against a real 3-broker cluster with
// __consumer_offsets at replication factor 3. A kgo producer writes while
// kgo ConsumerGroup members join and leave (and, in the failover variant,
// the group's coordinator is killed with SIGKILL and restarted); every
// acknowledged record must be consumed at least once, and at the end the
// committed offsets (kadm.FetchOffsets) must equal the log end offsets.
// The client variants (kcat -G, sarama, kafka-go, confluent-kafka-python)
// are in group_clients_test.go.

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupProps are the overrides of the 3-broker group clusters.
func groupProps() map[string]string {
	return failoverProps(map[string]string{
		"offsets.topic.replication.factor": "3",
		"offsets.topic.num.partitions":     "10",
		"group.initial.rebalance.delay.ms": "100",
	})
}

// groupConsumer is one kgo ConsumerGroup member that records what it reads.
type groupConsumer struct {
	name string
	cl   *kgo.Client
	done chan struct{}
}

// consumed is every record read by any member, by key, with a count.
type consumed struct {
	mu   sync.Mutex
	seen map[string]int
	// firstAfter is, per partition, the first offset read after mark was
	// set (-1: none yet).
	mark       bool
	firstAfter map[int32]int64
}

func newConsumed() *consumed {
	return &consumed{seen: map[string]int{}, firstAfter: map[int32]int64{}}
}

func (c *consumed) add(r *kgo.Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen[string(r.Key)]++
	if c.mark {
		if _, ok := c.firstAfter[r.Partition]; !ok {
			c.firstAfter[r.Partition] = r.Offset
		}
	}
}

func (c *consumed) missing(acked []ackEvent) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, a := range acked {
		if c.seen[string(a.Key)] == 0 {
			out = append(out, string(a.Key))
		}
	}
	return out
}

func (c *consumed) duplicates() (dups, total int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.seen {
		total += n
		dups += n - 1
	}
	return dups, total
}

func startGroupConsumer(t *testing.T, c *Cluster, group, topic, name string, into *consumed) *groupConsumer {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Seeds()...),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ClientID(name),
		kgo.AutoCommitInterval(500*time.Millisecond),
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.SessionTimeout(10*time.Second),
		kgo.HeartbeatInterval(time.Second),
		kgo.MetadataMinAge(200*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
	)
	if err != nil {
		t.Fatal(err)
	}
	g := &groupConsumer{name: name, cl: cl, done: make(chan struct{})}
	go func() {
		defer close(g.done)
		for {
			fs := cl.PollFetches(context.Background())
			if fs.IsClientClosed() {
				return
			}
			fs.EachRecord(into.add)
		}
	}()
	return g
}

// Stop commits what the member read and leaves the group.
func (g *groupConsumer) Stop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := g.cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Logf("consumer %s: final commit: %v", g.name, err)
	}
	g.cl.Close()
	<-g.done
}

// waitConsumed waits until every acknowledged record was read.
func waitConsumed(t *testing.T, into *consumed, acked []ackEvent, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, func() error {
		if m := into.missing(acked); len(m) > 0 {
			return fmt.Errorf("%d of %d acknowledged records not consumed yet, e.g. %s", len(m), len(acked), m[0])
		}
		return nil
	})
}

// checkCommittedAtEnd checks the group's committed offsets equal the log
// end offsets of every partition of topic.
func checkCommittedAtEnd(t *testing.T, c *Cluster, group, topic string, timeout time.Duration) {
	t.Helper()
	adm := kadm.NewClient(c.Client())
	eventually(t, timeout, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return err
		}
		committed, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return err
		}
		var problem error
		ends.Each(func(o kadm.ListedOffset) {
			if o.Err != nil {
				problem = o.Err
				return
			}
			got, ok := committed.Lookup(topic, o.Partition)
			if !ok || got.Err != nil || got.At != o.Offset {
				problem = fmt.Errorf("partition %d: committed %+v, log end offset %d", o.Partition, got, o.Offset)
			}
		})
		return problem
	})
}

// coordinatorOf asks any live broker for the group's coordinator.
func coordinatorOf(c *Cluster, group string) (int32, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.liveSeeds()...), kgo.RequestRetries(0))
	if err != nil {
		return -1, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey = group
	req.Version = 3
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return -1, err
	}
	if resp.ErrorCode != 0 {
		return -1, fmt.Errorf("FindCoordinator: error %d", resp.ErrorCode)
	}
	return resp.NodeID, nil
}

// TestGroupKgoMembersJoinAndLeave: three kgo members share a 6-partition
// topic while a producer writes; one leaves, another joins, then all stop.
func TestGroupKgoMembersJoinAndLeave(t *testing.T) {
	start := time.Now()
	c := NewCluster(t, 3, groupProps())
	const topic, group = "grp-a", "group-a"
	createTopic(t, c, topic, 6, 3, nil, nil)
	prod := startProducer(t, c, topic, 6, "a")
	into := newConsumed()
	m1 := startGroupConsumer(t, c, group, topic, "m1", into)
	m2 := startGroupConsumer(t, c, group, topic, "m2", into)
	m3 := startGroupConsumer(t, c, group, topic, "m3", into)
	prod.waitAcks(-1, 300, start, 60*time.Second)
	time.Sleep(2 * time.Second) // let the group run in its first generation
	m2.Stop(t)
	m4 := startGroupConsumer(t, c, group, topic, "m4", into)
	time.Sleep(3 * time.Second) // a rebalance with the new member
	acked := prod.Stop(false)
	waitConsumed(t, into, acked, 60*time.Second)
	for _, m := range []*groupConsumer{m1, m3, m4} {
		m.Stop(t)
	}
	checkCommittedAtEnd(t, c, group, topic, 30*time.Second)
	dups, total := into.duplicates()
	t.Logf("acknowledged %d, consumed %d (%d duplicates) in %s", len(acked), total, dups, time.Since(start).Round(time.Millisecond))
}

// TestGroupCoordinatorFailover: the same group while the coordinator's
// broker is killed (SIGKILL) and restarted. The group must settle on a new
// coordinator that loaded the committed offsets: consumption resumes from
// them (no partition starts over), nothing is skipped.
func TestGroupCoordinatorFailover(t *testing.T) {
	start := time.Now()
	c := NewCluster(t, 3, groupProps())
	const topic, group = "grp-b", "group-b"
	createTopic(t, c, topic, 6, 3, nil, nil)
	prod := startProducer(t, c, topic, 6, "b")
	into := newConsumed()
	var members []*groupConsumer
	for i := 1; i <= 3; i++ {
		members = append(members, startGroupConsumer(t, c, group, topic, fmt.Sprintf("m%d", i), into))
	}
	prod.waitAcks(-1, 300, start, 60*time.Second)
	time.Sleep(2 * time.Second) // offsets committed in the first generation

	var coord int32
	eventually(t, 20*time.Second, func() (err error) {
		coord, err = coordinatorOf(c, group)
		return err
	})
	before := time.Now()
	adm := kadm.NewClient(c.Client(kgo.SeedBrokers(c.liveSeeds()...)))
	t.Logf("killing coordinator broker %d", coord)
	c.Broker(coord).Kill()
	into.mu.Lock()
	into.mark = true
	into.mu.Unlock()

	// A new coordinator takes over and the group commits through it.
	var newCoord int32
	eventually(t, 3*sessionTimeout, func() (err error) {
		newCoord, err = coordinatorOf(c, group)
		if err == nil && newCoord == coord {
			err = fmt.Errorf("still coordinated by the killed broker %d", coord)
		}
		return err
	})
	t.Logf("group moved to broker %d after %s", newCoord, time.Since(before).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	committed, err := adm.FetchOffsets(ctx, group)
	cancel()
	eventually(t, 30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		committed, err = adm.FetchOffsets(ctx, group)
		if err == nil {
			err = committed.Error()
		}
		return err
	})
	n := 0
	committed.Each(func(o kadm.OffsetResponse) {
		if o.At > 0 {
			n++
		}
	})
	if n == 0 {
		t.Fatalf("new coordinator %d has no committed offsets for %s", newCoord, group)
	}
	c.Broker(coord).Start()
	time.Sleep(2 * time.Second) // the group keeps running with the old coordinator back
	acked := prod.Stop(true)
	waitConsumed(t, into, acked, 90*time.Second)
	for _, m := range members {
		m.Stop(t)
	}
	checkCommittedAtEnd(t, c, group, topic, 30*time.Second)
	into.mu.Lock()
	for p, off := range into.firstAfter {
		if off == 0 {
			t.Errorf("partition %d: consumption restarted from offset 0 after the coordinator moved", p)
		}
	}
	into.mu.Unlock()
	dups, total := into.duplicates()
	t.Logf("acknowledged %d, consumed %d (%d duplicates) in %s", len(acked), total, dups, time.Since(start).Round(time.Millisecond))
}
