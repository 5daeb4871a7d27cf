package test

// Replication throttles (KIP-73) on broker processes: a reassignment whose
// replicas are listed in leader/follower.replication.throttled.replicas
// copies at most the brokers' leader/follower.replication.throttled.rate,
// as the leader's replication bytes-out counter and the throttle's
// byte-rate gauges in /metrics show, while an unthrottled move beside it is
// not slowed. Mid-move, ListPartitionReassignments and the leader's
// /v1/partitions show the reassignment, its bytes left and its throttle.

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fillPartition writes n records of size bytes (incompressible, in
// batches of at most 32 KiB) to topic-p and waits for every
// acknowledgement.
func fillPartition(t *testing.T, c *Cluster, topic string, p int32, n, size int) {
	t.Helper()
	cl := c.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerBatchMaxBytes(32<<10))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		v := make([]byte, size)
		_, _ = rand.Read(v)
		cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Key: []byte(fmt.Sprintf("%s-%06d", topic, i)), Value: v}, func(_ *kgo.Record, err error) { errs <- err })
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Fatalf("fill %s-%d: %v", topic, p, err)
		}
	}
}

// TestReassignThrottled: two single-replica topics of the same size on
// broker 1 each gain a replica. The throttled one (leader throttle on 1,
// follower throttle on 2, both brokers' rates at 256 KiB/s) takes at least
// half of bytes/rate and its leader's replication bytes-out stays within
// 1.5 times the rate; the unthrottled one, moving at the same time to
// broker 3, finishes in less than half of that.
func TestReassignThrottled(t *testing.T) {
	const rate = 256 << 10
	rateS := strconv.Itoa(rate)
	// Fetches of at most 64 KiB (batches of 32 KiB) keep the burst a
	// throttled follower's first fetch may take small beside the rate.
	c, urls := observeCluster(t, 3, failoverProps(map[string]string{"replica.fetch.max.bytes": "65536"}))
	keepLogs(t, c)
	adm := adminFor(t, c)
	throttles := map[string]string{"leader.replication.throttled.rate": rateS, "follower.replication.throttled.rate": rateS}
	setBrokerConfigs(t, adm, throttles, 1, 2, 3)

	const thr, free = "thr", "free"
	for _, topic := range []string{thr, free} {
		createTopic(t, c, topic, 0, 0, [][]int32{{1}}, map[string]string{"min.insync.replicas": "1"})
		fillPartition(t, c, topic, 0, 3000, 1000) // ~3 MB: about 12 s at the rate
	}
	setTopicConfigs(t, adm, thr, map[string]*string{
		"leader.replication.throttled.replicas":   kmsg.StringPtr("0:1"),
		"follower.replication.throttled.replicas": kmsg.StringPtr("0:2"),
	})
	size := dirBytes(c.Broker(1), thr, 0)
	want := time.Duration(float64(size) / rate * float64(time.Second))
	t.Logf("%s-0 and %s-0: %d bytes each on broker 1; at %d B/s the throttled copy needs %s", thr, free, size, rate, want.Round(time.Millisecond))

	series := `kafka_server_brokertopicmetrics_replicationbytesout_total{topic="` + thr + `"}`
	out0 := mustMetric(t, urls[1], series)
	type sample struct {
		at             time.Time
		out            float64
		leader, follow float64
	}
	var samples []sample
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			o, err1 := metric(urls[1], series)
			l, err2 := metric(urls[1], "kafka_server_leaderreplication_byte_rate")
			f, err3 := metric(urls[2], "kafka_server_followerreplication_byte_rate")
			if err1 == nil && err2 == nil && err3 == nil {
				samples = append(samples, sample{time.Now(), o, l, f})
			}
			select {
			case <-stop:
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()

	start := time.Now()
	submitReassignment(t, adm, thr, assignment{0: {1, 2}})
	submitReassignment(t, adm, free, assignment{0: {1, 3}})
	// Mid-move, ListPartitionReassignments and the leader's
	// /v1/partitions show the throttled reassignment in progress.
	var midMove string
	eventually(t, 5*time.Second, func() error {
		live, err := listReassigning(adm, thr, 1)
		if err != nil {
			return err
		}
		if r, ok := live[0]; !ok || !slices.Equal(r.AddingReplicas, []int32{2}) || len(r.RemovingReplicas) != 0 {
			return fmt.Errorf("ListPartitionReassignments %s: %+v, want %s-0 adding [2]", thr, live, thr)
		}
		body, err := httpGet(urls[1] + "/v1/partitions")
		if err != nil {
			return err
		}
		var v struct {
			Partitions []struct {
				Topic           string `json:"topic"`
				Partition       int32  `json:"partition"`
				LeaderThrottled bool   `json:"leader_throttled"`
				Reassignment    *struct {
					AddingReplicas []int32 `json:"adding_replicas"`
					Adding         []struct {
						BrokerID  int32 `json:"broker_id"`
						BytesLeft int64 `json:"bytes_left"`
						Throttled bool  `json:"throttled"`
					} `json:"adding"`
				} `json:"reassignment"`
			} `json:"partitions"`
		}
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			return err
		}
		for _, pv := range v.Partitions {
			if pv.Topic != thr || pv.Partition != 0 {
				continue
			}
			r := pv.Reassignment
			if !pv.LeaderThrottled || r == nil || !slices.Equal(r.AddingReplicas, []int32{2}) || len(r.Adding) != 1 ||
				r.Adding[0].BrokerID != 2 || !r.Adding[0].Throttled || r.Adding[0].BytesLeft <= 0 {
				return fmt.Errorf("broker 1 /v1/partitions %s-0 mid-move: leader_throttled %v reassignment %+v", thr, pv.LeaderThrottled, r)
			}
			midMove = fmt.Sprintf("adding %v, %d bytes left, throttled", r.AddingReplicas, r.Adding[0].BytesLeft)
			return nil
		}
		return fmt.Errorf("broker 1 /v1/partitions lists no %s-0", thr)
	})
	t.Logf("mid-move, broker 1's /v1/partitions shows %s-0 %s", thr, midMove)
	freeEnd := waitReassigned(t, c, adm, free, assignment{0: {1, 3}}, 60*time.Second)
	thrEnd := waitReassigned(t, c, adm, thr, assignment{0: {1, 2}}, 120*time.Second)
	close(stop)
	<-done
	freeDur, thrDur := freeEnd.Sub(start), thrEnd.Sub(start)
	var atEnd float64
	for _, s := range samples {
		if !s.at.After(thrEnd) {
			atEnd = s.out
		}
	}
	copied := atEnd - out0
	avg := copied / thrDur.Seconds()
	var maxLeader, maxFollow, max2s float64
	for i, s := range samples {
		maxLeader, maxFollow = max(maxLeader, s.leader), max(maxFollow, s.follow)
		for j := i + 1; j < len(samples) && !samples[j].at.After(thrEnd); j++ {
			if d := samples[j].at.Sub(s.at); d >= 2*time.Second {
				max2s = max(max2s, (samples[j].out-s.out)/d.Seconds())
				break
			}
		}
	}
	t.Logf("highest replication bytes-out rate of %s over a 2 s window during the move: %.0f B/s", thr, max2s)
	t.Logf("throttled move %s (bytes/rate %s), unthrottled %s; leader 1 sent %.0f replication bytes of %s, %.0f B/s on average (throttle %d B/s); byte-rate gauges peaked at %.0f (leader 1) and %.0f (follower 2)",
		thrDur.Round(time.Millisecond), want.Round(time.Millisecond), freeDur.Round(time.Millisecond), copied, thr, avg, rate, maxLeader, maxFollow)
	logFigures(t, t.Name(), map[string]any{"rate": rate, "bytes": size, "throttled_ms": thrDur.Milliseconds(),
		"unthrottled_ms": freeDur.Milliseconds(), "avg_rate": avg, "max_2s_rate": max2s, "leader_gauge_max": maxLeader, "follower_gauge_max": maxFollow})

	if thrDur < want/2 {
		t.Errorf("throttled move took %s, less than half of bytes/rate %s: the throttle did not hold", thrDur, want)
	}
	if avg > 1.5*rate {
		t.Errorf("leader's replication bytes-out of %s averaged %.0f B/s over the move, above 1.5 x the %d B/s throttle", thr, avg, rate)
	}
	if copied < float64(size)/2 {
		t.Errorf("leader's replication bytes-out of %s grew by %.0f, less than half the %d bytes copied: the counter is not measuring the move", thr, copied, size)
	}
	if freeDur > want/2 {
		t.Errorf("unthrottled move took %s, more than half of the throttled bytes/rate %s: unthrottled replicas were slowed", freeDur, want)
	}
	if maxLeader <= 0 || maxFollow <= 0 {
		t.Errorf("throttle gauges never above 0 during the move: kafka_server_leaderreplication_byte_rate %.0f on 1, kafka_server_followerreplication_byte_rate %.0f on 2", maxLeader, maxFollow)
	}
	if maxLeader > 2*rate || maxFollow > 2*rate {
		t.Errorf("throttle gauges above twice the rate: leader %.0f follower %.0f, rate %d", maxLeader, maxFollow, rate)
	}
	if got := dirBytes(c.Broker(2), thr, 0); got != size {
		t.Errorf("new replica of %s-0 on broker 2 holds %d bytes of segments, the leader %d", thr, got, size)
	}
}
