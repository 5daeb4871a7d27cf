package protocol

// Fetch sessions on the wire, over a real partition.Manager leader: after
// Kafka's FetchSessionTest (incremental add, alter, remove, responses
// omitting unchanged partitions, epoch and id errors) and with kgo, whose
// consumers use sessions by default.

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
)

// sessionLeader is a Manager (broker 1) leading partitions 0..n-1 of
// topic, RF 1, behind a test broker.
func sessionLeader(t *testing.T, topic string, n int32, opts ...brokerOption) (*partition.Manager, *testBroker) {
	t.Helper()
	m := newReplicaManager(t, 1, nil, nil)
	var states []partition.PartitionState
	for p := range n {
		states = append(states, partition.PartitionState{TopicPartition: cluster.TopicPartition{Topic: topic, Partition: p},
			Replicas: []int32{1}, Config: cluster.DefaultLogConfig(),
			LeaderAndIsr: cluster.LeaderAndIsr{Leader: 1, LeaderEpoch: 0, Isr: []int32{1}, ControllerEpoch: 1}}) // epoch 0, as the fake metadata says
	}
	for tp, res := range m.BecomeLeaderOrFollower(states) {
		if res.Err != nil {
			t.Fatalf("%s: %v", tp, res.Err)
		}
	}
	opts = append([]brokerOption{func(c *Config) { c.Replicas, c.LeaderEpochs = m, m }}, opts...)
	b := startBroker(t, opts...)
	createTopic(t, b, topic, n) // the metadata; the fake replicas it also makes go unused
	return m, b
}

func appendTo(t *testing.T, m *partition.Manager, tp cluster.TopicPartition, values ...string) {
	t.Helper()
	if _, err := m.Append(tp, makeBatch(time.Now().UnixMilli(), values...), 1); err != nil {
		t.Fatal(err)
	}
}

// sessionFetch is a Fetch v12 of the given partitions (at offsets) in
// session id at epoch, forgetting forget.
func sessionFetch(id, epoch int32, maxWait int32, topic string, offsets map[int32]int64, forget ...int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.MaxWaitMillis = maxWait
	req.MinBytes = 1
	req.SessionID, req.SessionEpoch = id, epoch
	if len(offsets) > 0 {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		for _, p := range slices.Sorted(mapKeys(offsets)) {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, offsets[p], 1<<20
			rp.CurrentLeaderEpoch, rp.LogStartOffset = -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	if len(forget) > 0 {
		ft := kmsg.NewFetchRequestForgottenTopic()
		ft.Topic, ft.Partitions = topic, forget
		req.ForgottenTopics = append(req.ForgottenTopics, ft)
	}
	return req
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// answered is the partitions of resp by number, with their answers.
func answered(resp *kmsg.FetchResponse) map[int32]kmsg.FetchResponseTopicPartition {
	out := map[int32]kmsg.FetchResponseTopicPartition{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[p.Partition] = p
		}
	}
	return out
}

func partitionsOf(resp *kmsg.FetchResponse) []int32 {
	return slices.Sorted(mapKeys(answered(resp)))
}

func TestFetchSessionIncremental(t *testing.T) {
	const topic = "s"
	m, b := sessionLeader(t, topic, 3)
	tp := func(p int32) cluster.TopicPartition { return cluster.TopicPartition{Topic: topic, Partition: p} }
	appendTo(t, m, tp(0), "a", "b")
	c := b.dial(t)

	// A full fetch with epoch 0 opens a session and answers every partition.
	resp := c.roundTrip(sessionFetch(0, 0, 0, topic, map[int32]int64{0: 0, 1: 0, 2: 0})).(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 || resp.SessionID == 0 {
		t.Fatalf("full fetch: error %d session %d, want a session", resp.ErrorCode, resp.SessionID)
	}
	id := resp.SessionID
	if got := partitionsOf(resp); !slices.Equal(got, []int32{0, 1, 2}) {
		t.Fatalf("full fetch answered %v, want [0 1 2]", got)
	}
	if p0 := answered(resp)[0]; len(p0.RecordBatches) == 0 || p0.HighWatermark != 2 {
		t.Fatalf("partition 0: %d record bytes, HW %d; want records, HW 2", len(p0.RecordBatches), p0.HighWatermark)
	}

	// Incremental, altering partition 0's offset: nothing changed anywhere.
	resp = c.roundTrip(sessionFetch(id, 1, 0, topic, map[int32]int64{0: 2})).(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 || resp.SessionID != id || len(partitionsOf(resp)) != 0 {
		t.Fatalf("idle incremental fetch: error %d session %d partitions %v; want none", resp.ErrorCode, resp.SessionID, partitionsOf(resp))
	}
	// Records on partition 1: only it is answered, though not named.
	appendTo(t, m, tp(1), "c")
	resp = c.roundTrip(sessionFetch(id, 2, 0, topic, nil)).(*kmsg.FetchResponse)
	if got := partitionsOf(resp); !slices.Equal(got, []int32{1}) {
		t.Fatalf("after a produce to 1: answered %v, want [1]", got)
	}
	if p1 := answered(resp)[1]; len(p1.RecordBatches) == 0 || p1.HighWatermark != 1 {
		t.Fatalf("partition 1: %d record bytes, HW %d; want records, HW 1", len(p1.RecordBatches), p1.HighWatermark)
	}
	// The fetcher moves 1 to its end: nothing new to answer.
	resp = c.roundTrip(sessionFetch(id, 3, 0, topic, map[int32]int64{1: 1})).(*kmsg.FetchResponse)
	if got := partitionsOf(resp); len(got) != 0 {
		t.Fatalf("after moving 1 to its end: answered %v, want none", got)
	}

	// Epoch errors: a repeated epoch, an unknown session.
	resp = c.roundTrip(sessionFetch(id, 3, 0, topic, nil)).(*kmsg.FetchResponse)
	if resp.ErrorCode != kerr.InvalidFetchSessionEpoch.Code || len(resp.Topics) != 0 {
		t.Fatalf("repeated epoch: error %d, %d topics; want INVALID_FETCH_SESSION_EPOCH, none", resp.ErrorCode, len(resp.Topics))
	}
	resp = c.roundTrip(sessionFetch(id+1, 1, 0, topic, nil)).(*kmsg.FetchResponse)
	if resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("unknown session: error %d, want FETCH_SESSION_ID_NOT_FOUND", resp.ErrorCode)
	}
	// The failed requests did not move the session: epoch 4 is next.

	// Forget 1 and 2: a produce to 2 is not answered any more.
	resp = c.roundTrip(sessionFetch(id, 4, 0, topic, nil, 1, 2)).(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 || len(partitionsOf(resp)) != 0 {
		t.Fatalf("forgetting: error %d partitions %v", resp.ErrorCode, partitionsOf(resp))
	}
	if s := b.srv.fetchSessions.get(id); s == nil || len(s.parts) != 1 {
		t.Fatalf("session after forgetting 1 and 2: %v", s)
	}
	appendTo(t, m, tp(2), "d")
	resp = c.roundTrip(sessionFetch(id, 5, 0, topic, nil)).(*kmsg.FetchResponse)
	if got := partitionsOf(resp); len(got) != 0 {
		t.Fatalf("produce to a forgotten partition answered %v", got)
	}
	// Add 2 back: it is answered with its records and HW.
	resp = c.roundTrip(sessionFetch(id, 6, 0, topic, map[int32]int64{2: 0})).(*kmsg.FetchResponse)
	if p2, ok := answered(resp)[2]; !ok || len(p2.RecordBatches) == 0 || p2.HighWatermark != 1 || len(partitionsOf(resp)) != 1 {
		t.Fatalf("re-added partition 2: answered %v", partitionsOf(resp))
	}

	// An error is answered every time, not only when it is new.
	for epoch := int32(7); epoch <= 8; epoch++ {
		resp = c.roundTrip(sessionFetch(id, epoch, 0, topic, map[int32]int64{9: 0})).(*kmsg.FetchResponse)
		if p9, ok := answered(resp)[9]; !ok || p9.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("epoch %d: unknown partition 9 answered %v (%+v), want UNKNOWN_TOPIC_OR_PARTITION", epoch, ok, p9)
		}
	}

	// Epoch -1 with the id closes the session, answering sessionless.
	resp = c.roundTrip(sessionFetch(id, -1, 0, topic, map[int32]int64{0: 0})).(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 || resp.SessionID != 0 || len(partitionsOf(resp)) != 1 {
		t.Fatalf("closing fetch: error %d session %d partitions %v", resp.ErrorCode, resp.SessionID, partitionsOf(resp))
	}
	if b.srv.fetchSessions.get(id) != nil {
		t.Fatal("session still cached after a fetch with epoch -1")
	}
	resp = c.roundTrip(sessionFetch(id, 9, 0, topic, nil)).(*kmsg.FetchResponse)
	if resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("closed session: error %d, want FETCH_SESSION_ID_NOT_FOUND", resp.ErrorCode)
	}
}

// An incremental fetch that removes every partition closes the session
// and is answered sessionless.
func TestFetchSessionEmptied(t *testing.T) {
	_, b := sessionLeader(t, "e", 1)
	c := b.dial(t)
	resp := c.roundTrip(sessionFetch(0, 0, 0, "e", map[int32]int64{0: 0})).(*kmsg.FetchResponse)
	id := resp.SessionID
	resp = c.roundTrip(sessionFetch(id, 1, 0, "e", nil, 0)).(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 || resp.SessionID != 0 {
		t.Fatalf("emptying fetch: error %d session %d, want 0 0", resp.ErrorCode, resp.SessionID)
	}
	if b.srv.fetchSessions.len() != 0 {
		t.Fatal("emptied session still cached")
	}
}

// Fetches before v7, and with max.incremental.fetch.session.cache.slots=0,
// are sessionless.
func TestFetchSessionless(t *testing.T) {
	_, b := sessionLeader(t, "l", 1)
	c := b.dial(t)
	old := fetchRequest(6, 0, 1, "l", 0, 0)
	if resp := c.roundTrip(old).(*kmsg.FetchResponse); resp.SessionID != 0 || b.srv.fetchSessions.len() != 0 {
		t.Fatalf("v6 fetch: session %d, %d cached", resp.SessionID, b.srv.fetchSessions.len())
	}
	_, none := sessionLeader(t, "l", 1, func(c *Config) { c.FetchSessionCacheSlots = ServerFetchSessionCacheSlots(0) })
	nc := none.dial(t)
	if resp := nc.roundTrip(sessionFetch(0, 0, 0, "l", map[int32]int64{0: 0})).(*kmsg.FetchResponse); resp.ErrorCode != 0 || resp.SessionID != 0 || len(partitionsOf(resp)) != 1 {
		t.Fatalf("no slots: error %d session %d partitions %v; want a sessionless answer", resp.ErrorCode, resp.SessionID, partitionsOf(resp))
	}
}

// An idle incremental fetch long-polls, and a produce to one of its
// partitions ends the wait with that partition alone.
func TestFetchSessionLongPoll(t *testing.T) {
	m, b := sessionLeader(t, "w", 50)
	c := b.dial(t)
	offsets := map[int32]int64{}
	for p := range int32(50) {
		offsets[p] = 0
	}
	resp := c.roundTrip(sessionFetch(0, 0, 0, "w", offsets)).(*kmsg.FetchResponse)
	id := resp.SessionID
	start := time.Now()
	resp = c.roundTrip(sessionFetch(id, 1, 300, "w", nil)).(*kmsg.FetchResponse)
	if waited := time.Since(start); waited < 250*time.Millisecond || len(partitionsOf(resp)) != 0 {
		t.Fatalf("idle fetch returned after %v with %v; want a 300 ms wait, nothing", waited, partitionsOf(resp))
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		appendTo(t, m, cluster.TopicPartition{Topic: "w", Partition: 37}, "x")
	}()
	start = time.Now()
	resp = c.roundTrip(sessionFetch(id, 2, 10_000, "w", nil)).(*kmsg.FetchResponse)
	if waited := time.Since(start); waited > 5*time.Second || !slices.Equal(partitionsOf(resp), []int32{37}) {
		t.Fatalf("after %v answered %v, want [37] at once after the produce", waited, partitionsOf(resp))
	}
}

// kgo consumes through sessions (its default): every record arrives, in
// order, across produces spread over time, and the broker served it
// incremental fetches.
func TestFetchSessionKgoConsumer(t *testing.T) {
	for _, real := range []bool{true, false} {
		t.Run(fmt.Sprintf("manager=%v", real), func(t *testing.T) {
			var b *testBroker
			if real {
				_, b = sessionLeader(t, "k", 4)
			} else {
				b = startBroker(t) // fake replicas: no PeekFetch, every partition re-read
				createTopic(t, b, "k", 4)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			prod, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.DefaultProduceTopic("k"),
				kgo.RecordPartitioner(kgo.ManualPartitioner()))
			if err != nil {
				t.Fatal(err)
			}
			defer prod.Close()
			cons, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.ConsumeTopics("k"),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			defer cons.Close()
			const rounds, perRound = 5, 8
			got := map[int32][]string{}
			n := 0
			for r := range rounds {
				for i := range perRound {
					v := fmt.Sprintf("%d-%d", r, i)
					if err := prod.ProduceSync(ctx, &kgo.Record{Partition: int32(i % 4), Value: []byte(v)}).FirstErr(); err != nil {
						t.Fatal(err)
					}
				}
				for n < (r+1)*perRound {
					fs := cons.PollFetches(ctx)
					if err := ctx.Err(); err != nil {
						t.Fatalf("consumed %d of %d: %v", n, (r+1)*perRound, fs.Errors())
					}
					for _, e := range fs.Errors() {
						t.Fatalf("fetch error: %v", e)
					}
					fs.EachRecord(func(rec *kgo.Record) {
						got[rec.Partition] = append(got[rec.Partition], string(rec.Value))
						n++
					})
				}
				time.Sleep(300 * time.Millisecond) // an idle incremental fetch or two
			}
			for p := range int32(4) {
				var want []string
				for r := range rounds {
					for i := range perRound {
						if int32(i%4) == p {
							want = append(want, fmt.Sprintf("%d-%d", r, i))
						}
					}
				}
				if !slices.Equal(got[p], want) {
					t.Errorf("partition %d: consumed %v, want %v", p, got[p], want)
				}
			}
			b.srv.fetchSessions.mu.Lock()
			var epochs []int32
			for _, s := range b.srv.fetchSessions.sessions {
				s.mu.Lock()
				epochs = append(epochs, s.epoch)
				s.mu.Unlock()
			}
			b.srv.fetchSessions.mu.Unlock()
			if len(epochs) != 1 || epochs[0] < 5 {
				t.Errorf("sessions' next epochs %v: want one session that served incremental fetches", epochs)
			}
		})
	}
}
