package test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestBrokerPauseSessionExpiry freezes the broker (SIGSTOP) for longer than
// its ZooKeeper session timeout, so ZooKeeper expires the session and
// deletes /brokers/ids/<id>. After SIGCONT the broker must notice the
// expiry, register again under a new session and keep every acknowledged
// record; then a clean Restart must keep them too.
func TestBrokerPauseSessionExpiry(t *testing.T) {
	c := NewCluster(t, 1, map[string]string{
		"auto.create.topics.enable": "true",
		"num.partitions":            "2",
	})
	b := c.Brokers[0]
	const topic = "pause-topic"
	path := fmt.Sprintf("/brokers/ids/%d", b.ID())
	_, before, err := c.Get(path)
	if err != nil {
		t.Fatalf("get %s: %v", path, err)
	}

	var h History
	produce := func(from, to int) {
		t.Helper()
		cl := c.Client(kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		recs := workload("pause", to)[from:]
		var krs []*kgo.Record
		for _, r := range recs {
			kr := &kgo.Record{Key: r.Key, Value: r.Value}
			for _, hd := range r.Headers {
				kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: hd.Key, Value: hd.Value})
			}
			krs = append(krs, kr)
		}
		res := cl.ProduceSync(ctx, krs...)
		for _, pr := range res {
			if pr.Err != nil {
				t.Fatalf("produce: %v", pr.Err)
			}
			h.Ack(fromKgo(pr.Record))
		}
	}
	produce(0, 500)

	b.Pause()
	eventually(t, sessionTimeout+15*time.Second, func() error {
		if ok, _, err := c.ZK.Exists(c.Path(path)); err != nil || ok {
			return fmt.Errorf("%s still exists (err %v) while the broker is paused", path, err)
		}
		return nil
	})
	b.Resume()
	eventually(t, 30*time.Second, func() error {
		_, st, err := c.Get(path)
		if err != nil {
			return fmt.Errorf("get %s after resume: %w", path, err)
		}
		if st.EphemeralOwner == before.EphemeralOwner {
			return fmt.Errorf("%s still owned by the expired session %#x", path, st.EphemeralOwner)
		}
		return nil
	})
	b.WaitReady(30 * time.Second)
	if !b.Running() {
		t.Fatal("broker exited after its session expired")
	}
	produce(500, 1000)
	checkHistory(t, "after session expiry", h.Acked(), readAll(t, c.Seeds(), topic, readTimeout), false)

	b.Restart()
	checkHistory(t, "after clean restart", h.Acked(), readAll(t, c.Seeds(), topic, readTimeout), false)
}
