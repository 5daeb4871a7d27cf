package test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// scalePartitions is the partition count of TestScaleKillLeaderManyPartitions:
// SCALE_TEST_PARTITIONS, default 2,000 (2,000 replicas on each broker, a
// third of what exhausts the 20,000 open files a broker may hold on main,
// and enough for the per-partition costs to show).
func scalePartitions(t *testing.T) int32 {
	s := os.Getenv("SCALE_TEST_PARTITIONS")
	if s == "" {
		return 2000
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 3 {
		t.Fatalf("SCALE_TEST_PARTITIONS=%q: want a partition count of at least 3", s)
	}
	return int32(n)
}

// allStates reads the state znode of every partition of topic, 32 at a
// time (one read after another would take seconds at 2,000).
func allStates(c *Cluster, topic string, n int32) ([]partState, error) {
	out := make([]partState, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	work := make(chan int32)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				out[p], errs[p] = c.State(topic, p)
			}
		}()
	}
	for p := int32(0); p < n; p++ {
		work <- p
	}
	close(work)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// createManyPartitions creates topic with n partitions RF 3 and waits until
// every partition has a leader and a full ISR in its state znode and in
// every broker's Metadata. It is createTopic with room for a loaded
// machine: the request's timeout is 2 minutes, and REQUEST_TIMED_OUT is
// taken as Kafka means it, the creation going on after the answer.
func createManyPartitions(t *testing.T, c *Cluster, topic string, n int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 120000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, n, 3
	req.Topics = append(req.Topics, rt)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.liveSeeds()...), kgo.RequestTimeoutOverhead(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	for _, r := range resp.Topics {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil && err != kerr.RequestTimedOut {
			t.Fatalf("create topic %s: %v", topic, err)
		} else if err != nil {
			t.Logf("create topic %s: %v; waiting for the creation to finish", topic, err)
		}
	}
	eventually(t, 4*time.Minute, func() error {
		states, err := allStates(c, topic, n)
		if err != nil {
			return err
		}
		for q, s := range states {
			if s.Leader < 0 || len(s.ISR) != 3 {
				return fmt.Errorf("partition %d: want a leader and 3 in the ISR: %v", q, s)
			}
		}
		return nil
	})
	for _, b := range c.Brokers {
		waitMetadataLeaders(t, c, b, topic, n)
	}
}

// ackedEverywhere fails unless every one of n partitions has an
// acknowledgement after from.
func ackedEverywhere(p *liveProducer, n int32, from time.Time) error {
	seen := make(map[int32]bool, n)
	for _, a := range p.snapshot() {
		if a.At.After(from) {
			seen[a.Partition] = true
		}
	}
	if len(seen) < int(n) {
		for q := int32(0); q < n; q++ {
			if !seen[q] {
				return fmt.Errorf("%d of %d partitions acknowledged a record since %s; partition %d has not",
					len(seen), n, from.Format("15:04:05.000"), q)
			}
		}
	}
	return nil
}

// TestScaleKillLeaderManyPartitions (issue 16): 2,000 partitions RF 3 on
// three brokers (SCALE_TEST_PARTITIONS to change the count), an idempotent
// acks=all kgo producer writing to every one of them round-robin, and
// kill -9 of the broker that leads the most partitions. Every partition it
// led gets another leader from its ISR, every partition takes writes again,
// the broker restarted rejoins every ISR, and reading everything back loses
// no acknowledged record (the history checker). Not timed: every wait only
// has a limit.
func TestScaleKillLeaderManyPartitions(t *testing.T) {
	n := scalePartitions(t)
	c := NewCluster(t, 3, failoverProps(map[string]string{
		// Followers of 2,000 partitions on a loaded 2-core machine may
		// fall a few seconds behind while nothing is wrong; ISR churn is
		// not what this test is about.
		"replica.lag.time.max.ms": "30000",
	}))
	const topic = "scale-kill"
	created := time.Now()
	createManyPartitions(t, c, topic, n)
	t.Logf("%d partitions RF 3 created, with a leader and a full ISR on every broker's Metadata, after %s",
		n, time.Since(created).Round(time.Millisecond))

	start := time.Now()
	p := startProducer(t, c, topic, n, "scale")
	eventually(t, 2*time.Minute, func() error { return ackedEverywhere(p, n, start) })

	before, err := allStates(c, topic, n)
	if err != nil {
		t.Fatal(err)
	}
	led := map[int32][]int32{}
	for q, s := range before {
		led[s.Leader] = append(led[s.Leader], int32(q))
	}
	victim := int32(-1)
	for _, b := range c.Brokers {
		if victim < 0 || len(led[b.ID()]) > len(led[victim]) {
			victim = b.ID()
		}
	}
	t.Logf("killing broker %d, leader of %d of %d partitions (leaders: %d/%d/%d)", victim, len(led[victim]), n,
		len(led[c.Brokers[0].ID()]), len(led[c.Brokers[1].ID()]), len(led[c.Brokers[2].ID()]))
	kill := time.Now()
	c.Broker(victim).Kill()

	// Every partition the dead broker led gets a leader from its ISR
	// before the kill; no partition is left without one.
	eventually(t, sessionTimeout+2*time.Minute, func() error {
		now, err := allStates(c, topic, n)
		if err != nil {
			return err
		}
		for q, s := range now {
			if s.Leader < 0 || s.Leader == victim {
				return fmt.Errorf("partition %d: %v", q, s)
			}
		}
		for _, q := range led[victim] {
			if s := now[q]; !before[q].inISR(s.Leader) {
				t.Fatalf("partition %d: new leader %d was not in the ISR %v before the kill", q, s.Leader, before[q].ISR)
			}
		}
		return nil
	})
	elected := time.Now()
	t.Logf("every partition led by a live broker %s after the kill", elected.Sub(kill).Round(time.Millisecond))
	eventually(t, 2*time.Minute, func() error { return ackedEverywhere(p, n, elected) })

	c.Broker(victim).Start()
	eventually(t, 3*time.Minute, func() error {
		now, err := allStates(c, topic, n)
		if err != nil {
			return err
		}
		for q, s := range now {
			if len(s.ISR) != 3 || s.Leader < 0 {
				return fmt.Errorf("partition %d not back to a full ISR: %v", q, s)
			}
		}
		return nil
	})
	rejoined := time.Now()
	t.Logf("broker %d back in every ISR %s after its restart", victim, rejoined.Sub(elected).Round(time.Millisecond))
	eventually(t, 2*time.Minute, func() error { return ackedEverywhere(p, n, rejoined) })

	acked := p.Stop(false)
	read := readAll(t, c.liveSeeds(), topic, 2*readTimeout)
	res := checkHistory(t, fmt.Sprintf("%d partitions, leader of %d killed and restarted", n, len(led[victim])), recsOf(acked), read, false)
	t.Logf("acknowledged=%d read-back=%d lost=%d", res.Acked, res.Read, res.Lost)

	// A clean stop of brokers holding thousands of replicas each takes
	// longer than the harness's stop timeout on a loaded machine (each
	// moves its leaders away first): SIGTERM all three at once here, and
	// require each to exit 0 within a generous limit.
	stopAll(t, c, 2*time.Minute)
}

// stopAll sends SIGTERM to every running broker at once and fails unless
// each exits 0 within limit.
func stopAll(t *testing.T, c *Cluster, limit time.Duration) {
	t.Helper()
	type stopping struct {
		b    *Broker
		done <-chan struct{}
	}
	var all []stopping
	for _, b := range c.Brokers {
		if b.Running() {
			all = append(all, stopping{b, b.terminate()})
		}
	}
	deadline := time.After(limit)
	for _, s := range all {
		select {
		case <-s.done:
			if code := s.b.exitCode(); code != 0 {
				t.Errorf("broker %d exited %d after SIGTERM; log tail:\n%s", s.b.ID(), code, s.b.LogTail(30))
			}
		case <-deadline:
			t.Errorf("broker %d still running %s after SIGTERM; log tail:\n%s", s.b.ID(), limit, s.b.LogTail(30))
			s.b.Kill()
		}
	}
}
