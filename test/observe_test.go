package test

// Tests of the HTTP side (http.listener): Prometheus metrics that move
// with ISR shrinks, expands and elections; the /v1/partitions JSON drawing
// seed 000's picture (HW = smallest LEO in the ISR, nothing above HW for
// consumers); and the status page rendered by headless Chromium.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// observeCluster starts brokers 1..n, each with an HTTP listener on a free
// port, and returns the cluster and each broker's HTTP base URL by id.
func observeCluster(t *testing.T, n int, props map[string]string) (*Cluster, map[int32]string) {
	t.Helper()
	c := newStoppedCluster(t, props)
	urls := map[int32]string{}
	for id := int32(1); id <= int32(n); id++ {
		b := c.AddBroker(id)
		addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		b.Props["http.listener"] = addr
		urls[id] = "http://" + addr
	}
	for _, b := range c.Brokers {
		b.Start()
	}
	return c, urls
}

func httpGet(url string) (string, error) {
	cl := http.Client{Timeout: 3 * time.Second}
	resp, err := cl.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	return string(b), nil
}

// metric reads one series (name, or name{labels} exactly as exposed) from
// base's /metrics; a missing series is 0.
func metric(base, series string) (float64, error) {
	body, err := httpGet(base + "/metrics")
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if ok && name == series {
			return strconv.ParseFloat(value, 64)
		}
	}
	return 0, nil
}

func mustMetric(t *testing.T, base, series string) float64 {
	t.Helper()
	v, err := metric(base, series)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// waitMetric polls until cond accepts the series' value.
func waitMetric(t *testing.T, base, series string, timeout time.Duration, cond func(float64) bool, want string) {
	t.Helper()
	eventually(t, timeout, func() error {
		v, err := metric(base, series)
		if err != nil {
			return err
		}
		if !cond(v) {
			return fmt.Errorf("%s at %s = %v, want %s", series, base, v, want)
		}
		return nil
	})
}

// produceAcks sends one batch of n records to topic-p on broker b with the
// given acks and fails the test unless it is acknowledged.
func produceAcks(t *testing.T, b *Broker, topic string, p int32, acks int16, n int, tag string) {
	t.Helper()
	// kgo sends a ProduceRequest with the client's acks, whatever the
	// request says.
	ack := kgo.AllISRAcks()
	if acks == 1 {
		ack = kgo.LeaderAck()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.RequestRetries(0), kgo.RequiredAcks(ack), kgo.DisableIdempotentWrite())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	recs := make([]Rec, n)
	for i := range recs {
		recs[i] = Rec{Value: fmt.Appendf(nil, "%s-%d", tag, i)}
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = acks, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = p, buildBatch(recs)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	r, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		t.Fatalf("produce acks=%d to broker %d: %v", acks, b.ID(), err)
	}
	if pr := r.(*kmsg.ProduceResponse).Topics[0].Partitions[0]; pr.ErrorCode != 0 {
		msg := ""
		if pr.ErrorMessage != nil {
			msg = *pr.ErrorMessage
		}
		t.Fatalf("produce acks=%d to broker %d: error code %d %s (base offset %d)", acks, b.ID(), pr.ErrorCode, msg, pr.BaseOffset)
	}
}

// TestObserveMetricsMove: SIGSTOP of a follower past replica.lag.time.max.ms
// (with writes, so its LEO falls behind) raises the leader's
// under-replicated gauge and ISR-shrink counter; SIGCONT brings the ISR back,
// the gauge down and the expand counter up; killing the leader counts an
// election on the controller.
func TestObserveMetricsMove(t *testing.T) {
	c, urls := observeCluster(t, 3, failoverProps(map[string]string{"min.insync.replicas": "1"}))
	const topic = "observe-isr"
	createTopic(t, c, topic, 1, 3, [][]int32{{1, 2, 3}}, nil)
	leader, follower := c.Broker(1), c.Broker(3)
	lu := urls[leader.ID()]
	const under = "kafka_server_replicamanager_underreplicatedpartitions"
	const shrinks = "kafka_server_replicamanager_isrshrinks_total"
	const expands = "kafka_server_replicamanager_isrexpands_total"
	waitMetric(t, lu, under, 10*time.Second, func(v float64) bool { return v == 0 }, "0")
	shrink0, expand0 := mustMetric(t, lu, shrinks), mustMetric(t, lu, expands)
	if v := mustMetric(t, lu, "kafka_server_replicamanager_leadercount"); v < 1 {
		t.Errorf("leader's leadercount = %v", v)
	}

	follower.Pause()
	paused := time.Now()
	produceAcks(t, leader, topic, 0, 1, 5, "paused")
	c.waitState(t, topic, 0, lagTime+20*time.Second, func(s partState) error {
		if s.inISR(follower.ID()) {
			return fmt.Errorf("follower %d still in the ISR", follower.ID())
		}
		return nil
	})
	waitMetric(t, lu, under, 5*time.Second, func(v float64) bool { return v == 1 }, "1")
	waitMetric(t, lu, shrinks, 5*time.Second, func(v float64) bool { return v >= shrink0+1 }, fmt.Sprintf(">= %v", shrink0+1))
	if v := mustMetric(t, lu, `kafka_cluster_partition_underreplicated{partition="0",topic="`+topic+`"}`); v != 1 {
		t.Errorf("partition under-replicated gauge = %v, want 1", v)
	}
	if v := mustMetric(t, lu, `kafka_server_brokertopicmetrics_messagesin_total{topic="`+topic+`"}`); v < 5 {
		t.Errorf("messagesin_total = %v, want >= 5", v)
	}
	t.Logf("ISR shrink seen in metrics %s after SIGSTOP", time.Since(paused).Round(time.Millisecond))

	follower.Resume()
	c.waitState(t, topic, 0, 30*time.Second, func(s partState) error {
		if !s.inISR(follower.ID()) {
			return fmt.Errorf("follower %d not back in the ISR", follower.ID())
		}
		return nil
	})
	waitMetric(t, lu, under, 5*time.Second, func(v float64) bool { return v == 0 }, "0")
	waitMetric(t, lu, expands, 5*time.Second, func(v float64) bool { return v >= expand0+1 }, fmt.Sprintf(">= %v", expand0+1))

	// Elections are counted by the controller, which may be the leader
	// itself: compare the sum over the brokers that stay alive.
	const elections = "kafka_controller_controllerstats_leaderelectionrateandtimems_count"
	sum := func() (float64, error) {
		total := 0.0
		for _, id := range []int32{2, 3} {
			v, err := metric(urls[id], elections)
			if err != nil {
				return 0, err
			}
			total += v
		}
		return total, nil
	}
	before, err := sum()
	if err != nil {
		t.Fatal(err)
	}
	leader.Kill()
	c.waitState(t, topic, 0, sessionTimeout+30*time.Second, func(s partState) error {
		if s.Leader < 0 || s.Leader == leader.ID() {
			return fmt.Errorf("no new leader yet")
		}
		return nil
	})
	eventually(t, 10*time.Second, func() error {
		after, err := sum()
		if err != nil {
			return err
		}
		if after < before+1 {
			return fmt.Errorf("%s summed over brokers 2 and 3: %v, want >= %v", elections, after, before+1)
		}
		return nil
	})
	eventually(t, 10*time.Second, func() error {
		n := 0.0
		for _, id := range []int32{2, 3} {
			v, err := metric(urls[id], "kafka_controller_kafkacontroller_activecontrollercount")
			if err != nil {
				return err
			}
			n += v
		}
		if n != 1 {
			return fmt.Errorf("activecontrollercount summed over brokers 2 and 3 = %v, want 1", n)
		}
		return nil
	})
}

// partitionsView is the part of /v1/partitions the tests read.
type partitionsView struct {
	BrokerID            int32 `json:"broker_id"`
	ReplicaLagTimeMaxMs int64 `json:"replica_lag_time_max_ms"`
	Partitions          []struct {
		Topic          string  `json:"topic"`
		Partition      int32   `json:"partition"`
		Role           string  `json:"role"`
		LeaderEpoch    int32   `json:"leader_epoch"`
		Replicas       []int32 `json:"replicas"`
		ISR            []int32 `json:"isr"`
		OSR            []int32 `json:"osr"`
		LogEndOffset   int64   `json:"log_end_offset"`
		HighWatermark  int64   `json:"high_watermark"`
		LogStartOffset int64   `json:"log_start_offset"`
		Followers      []struct {
			BrokerID          int32  `json:"broker_id"`
			InISR             bool   `json:"in_isr"`
			LogEndOffset      int64  `json:"log_end_offset"`
			RecordsBehind     *int64 `json:"records_behind"`
			CaughtUpMsAgo     *int64 `json:"caught_up_ms_ago"`
			MsUntilISRRemoval *int64 `json:"ms_until_isr_removal"`
		} `json:"followers"`
	} `json:"partitions"`
}

func readView(base string) (partitionsView, error) {
	var v partitionsView
	body, err := httpGet(base + "/v1/partitions")
	if err != nil {
		return v, err
	}
	return v, json.Unmarshal([]byte(body), &v)
}

// TestObserveSeed000 draws seed 000's picture on a live cluster: acks=1
// writes while one ISR follower is paused (replica.lag.time.max.ms long, so
// it stays in the ISR) leave the leader with LEO 5, the other follower at 5
// and the paused one at 3; the leader's /v1/partitions reports HW 3, the
// smallest LEO in the ISR, and a consumer gets offsets 0-2 and nothing of
// 3-4 until the follower resumes. Headless Chromium then loads the page.
func TestObserveSeed000(t *testing.T) {
	// The paused follower must keep both its ISR place (a long lag time)
	// and its ZooKeeper session (else the controller drops it from the ISR
	// as a dead broker) while the picture is taken.
	const lag = 60 * time.Second
	c, urls := observeCluster(t, 3, failoverProps(map[string]string{
		"min.insync.replicas":          "1",
		"replica.lag.time.max.ms":      strconv.Itoa(int(lag / time.Millisecond)),
		"zookeeper.session.timeout.ms": "30000",
	}))
	const topic = "seed000"
	createTopic(t, c, topic, 1, 3, [][]int32{{1, 2, 3}}, nil)
	leader, slow := c.Broker(1), c.Broker(3)
	produceAcks(t, leader, topic, 0, -1, 3, "committed")

	slow.Pause()
	defer slow.Resume()
	paused := time.Now()
	produceAcks(t, leader, topic, 0, 1, 2, "uncommitted")

	var view partitionsView
	eventually(t, 15*time.Second, func() error {
		v, err := readView(urls[leader.ID()])
		if err != nil {
			return err
		}
		if len(v.Partitions) != 1 || len(v.Partitions[0].Followers) != 2 {
			return fmt.Errorf("view: %+v", v)
		}
		p := v.Partitions[0]
		if p.Role != "leader" || p.LogEndOffset != 5 || p.Followers[0].LogEndOffset != 5 {
			return fmt.Errorf("want leader LEO 5 and follower 2 at 5: %+v", p)
		}
		view = v
		return nil
	})
	p := view.Partitions[0]
	f2, f3 := p.Followers[0], p.Followers[1]
	if js, err := json.Marshal(p); err == nil {
		t.Logf("leader's /v1/partitions entry %s after pausing follower 3: %s", time.Since(paused).Round(time.Millisecond), js)
	}
	if len(p.ISR) != 3 || len(p.OSR) != 0 || len(p.Replicas) != 3 {
		t.Errorf("AR %v ISR %v OSR %v: want all three in sync", p.Replicas, p.ISR, p.OSR)
	}
	if f3.BrokerID != 3 || f3.LogEndOffset != 3 || !f3.InISR {
		t.Errorf("paused follower: %+v, want broker 3 in the ISR at LEO 3", f3)
	}
	minISR := min(p.LogEndOffset, f2.LogEndOffset, f3.LogEndOffset)
	if p.HighWatermark != minISR || p.HighWatermark != 3 {
		t.Errorf("HW = %d, want the smallest LEO in the ISR, %d", p.HighWatermark, minISR)
	}
	if f3.RecordsBehind == nil || *f3.RecordsBehind != 2 {
		t.Errorf("follower 3 records behind = %v, want 2", f3.RecordsBehind)
	}
	if r := f3.MsUntilISRRemoval; r == nil || *r <= 0 || *r > lag.Milliseconds() {
		t.Errorf("follower 3 ms until ISR removal = %v, want in (0, %d]", r, lag.Milliseconds())
	}
	if r := f2.MsUntilISRRemoval; r == nil || *r != lag.Milliseconds() {
		t.Errorf("follower 2 (caught up) ms until ISR removal = %v, want %d", r, lag.Milliseconds())
	}

	// A consumer sees offsets 0-2 and nothing between HW and LEO. It is
	// seeded with the live brokers only: a request to the paused one hangs.
	cl, err := kgo.NewClient(kgo.SeedBrokers(leader.Addr(), c.Broker(2).Addr()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}}),
		kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []int64
	poll := func(d time.Duration, until func() bool) {
		deadline := time.Now().Add(d)
		for time.Now().Before(deadline) && !until() {
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			fs := cl.PollFetches(ctx)
			cancel()
			fs.EachRecord(func(r *kgo.Record) { got = append(got, r.Offset) })
		}
	}
	poll(20*time.Second, func() bool { return len(got) >= 3 })
	poll(2*time.Second, func() bool { return false }) // anything past the HW would come now
	if len(got) != 3 || got[0] != 0 || got[2] != 2 {
		t.Errorf("consumer got offsets %v, want [0 1 2] (HW 3, LEO 5)", got)
	}

	t.Run("chromium", func(t *testing.T) { checkPageInChromium(t, urls[leader.ID()], topic) })

	slow.Resume()
	eventually(t, 15*time.Second, func() error {
		v, err := readView(urls[leader.ID()])
		if err != nil {
			return err
		}
		if p := v.Partitions[0]; p.HighWatermark != 5 {
			return fmt.Errorf("HW %d after resume, want 5", p.HighWatermark)
		}
		return nil
	})
	poll(10*time.Second, func() bool { return len(got) >= 5 })
	if len(got) != 5 || got[4] != 4 {
		t.Errorf("after resume the consumer got offsets %v, want 0-4", got)
	}
}

// checkPageInChromium loads base/ in headless Chromium and checks the
// partition table in the DOM it built: the leader row with ISR, HW and LEO
// as the JSON view has them, and the paused follower 2 records behind.
func checkPageInChromium(t *testing.T, base, topic string) {
	bin := ""
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		t.Skip("no chromium on PATH: scripts/install-deps.sh installs Debian's chromium package")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--user-data-dir="+t.TempDir(), "--dump-dom", base+"/")
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("chromium --dump-dom %s: %v\n%s", base, err, stderr)
	}
	dom := string(out)
	row := rowOf(dom, `<tr class="partition`, `data-topic="`+topic+`" data-partition="0"`)
	if row == "" {
		t.Fatalf("no row for %s-0 in the DOM:\n%s", topic, dom)
	}
	for _, cell := range []string{`<td class="name role">leader</td>`, `<td class="name ar">[1,2,3]</td>`,
		`<td class="name isr">[1,2,3]</td>`, `<td class="name osr">[]</td>`, `<td class="leo">5</td>`, `<td class="hw">3</td>`} {
		if !strings.Contains(row, cell) {
			t.Errorf("leader row lacks %s:\n%s", cell, row)
		}
	}
	f3 := rowOf(dom, `<tr class="follower"`, `data-broker="3"`)
	if !strings.Contains(f3, `<td class="leo">3</td>`) || !strings.Contains(f3, `<td class="behind">2</td>`) {
		t.Errorf("follower 3 row: want LEO 3 and 2 behind:\n%s", f3)
	}
}

// rowOf returns the first <tr ...>...</tr> of dom that starts with prefix
// and whose opening tag contains attr.
func rowOf(dom, prefix, attr string) string {
	for rest := dom; ; {
		i := strings.Index(rest, prefix)
		if i < 0 {
			return ""
		}
		rest = rest[i:]
		end := strings.Index(rest, "</tr>")
		if end < 0 {
			return ""
		}
		row := rest[:end+len("</tr>")]
		if tag, _, _ := strings.Cut(row, ">"); strings.Contains(tag, attr) {
			return row
		}
		rest = rest[end:]
	}
}
