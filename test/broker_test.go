package test

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestBrokerDuplicateID starts a second process with the broker.id of a
// running broker: it must exit non-zero with an error naming the id, and
// leave the first broker's registration alone.
func TestBrokerDuplicateID(t *testing.T) {
	const id = 42
	c := newCluster(t, []int32{id}, nil)
	first := c.Brokers[0]
	path := fmt.Sprintf("/brokers/ids/%d", id)
	_, before, err := c.Get(path)
	if err != nil {
		t.Fatalf("get %s: %v", path, err)
	}

	dup := c.AddBroker(id)
	if err := dup.StartProcess(); err != nil {
		t.Fatal(err)
	}
	code := dup.WaitExit(30 * time.Second)
	if code == 0 {
		t.Errorf("duplicate broker.id=%d exited 0, want non-zero; log:\n%s", id, dup.LogTail(logTailLines))
	}
	if !errorLineMentions(dup.Log(), strconv.Itoa(id)) {
		t.Errorf("duplicate broker's error output does not name broker id %d; log:\n%s", id, dup.LogTail(logTailLines))
	}

	_, after, err := c.Get(path)
	if err != nil {
		t.Fatalf("after the duplicate exited, get %s: %v", path, err)
	}
	if after.EphemeralOwner != before.EphemeralOwner || after.Czxid != before.Czxid {
		t.Errorf("%s changed owner (session %#x -> %#x, czxid %d -> %d): the duplicate touched the live registration",
			path, before.EphemeralOwner, after.EphemeralOwner, before.Czxid, after.Czxid)
	}
	if !first.Running() {
		t.Fatalf("the first broker exited")
	}
	first.WaitReady(10 * time.Second)
}

// errorLineMentions reports whether some line at level error or fatal (or
// a non-JSON line, e.g. a message printed before the logger exists)
// contains s.
func errorLineMentions(log, s string) bool {
	for _, line := range strings.Split(log, "\n") {
		if strings.HasPrefix(line, "==== harness:") || !strings.Contains(line, s) {
			continue
		}
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil {
			return true
		}
		switch m["level"] {
		case "error", "fatal", "panic":
			return true
		}
	}
	return false
}

// TestBrokerBadConfig: an unknown key or a bad value makes the broker exit
// non-zero, naming the key, before it registers.
func TestBrokerBadConfig(t *testing.T) {
	c := newStoppedCluster(t, nil)
	cases := []struct {
		name, key, value string
	}{
		{"unknown key", "no.such.setting", "1"},
		{"not a number", "num.partitions", "banana"},
		{"not a boolean", "auto.create.topics.enable", "maybe"},
		{"broker id not a number", "broker.id", "one"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := c.AddBroker(int32(100 + i))
			b.Props[tc.key] = tc.value
			if err := b.StartProcess(); err != nil {
				t.Fatal(err)
			}
			code := b.WaitExit(30 * time.Second)
			if code == 0 {
				t.Errorf("%s=%s: exit code 0, want non-zero", tc.key, tc.value)
			}
			if !errorLineMentions(b.Log(), tc.key) {
				t.Errorf("%s=%s: output does not name the key in an error:\n%s", tc.key, tc.value, b.LogTail(30))
			}
		})
	}
}

// TestBrokerDiskLayout checks Kafka's on-disk names after producing to
// partition 0 of topic t and a clean stop: <log.dirs>/t-0 with the first
// segment's .log, .index and .timeindex, and the two offset checkpoints in
// log.dirs holding the log end offset for t-0.
func TestBrokerDiskLayout(t *testing.T) {
	c := NewCluster(t, 1, nil)
	b := c.Brokers[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm := kadm.NewClient(c.Client())
	resp, err := adm.CreateTopics(ctx, 1, 1, nil, "t")
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("create topic t: %v", err)
	}
	const n = 100
	cl := c.Client(kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range n {
		r := &kgo.Record{Partition: 0, Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprintf("value-%d", i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	cl.Close()
	b.Stop()

	dir := filepath.Join(b.DataDir, "t-0")
	base := filepath.Join(dir, "00000000000000000000")
	for _, ext := range []string{".log", ".index", ".timeindex"} {
		if _, err := os.Stat(base + ext); err != nil {
			t.Errorf("segment file: %v", err)
		}
	}
	if data, err := os.ReadFile(base + ".log"); err == nil {
		// A v2 record batch: baseOffset int64, batchLength int32,
		// partitionLeaderEpoch int32, magic int8 = 2.
		if len(data) < 61 {
			t.Errorf("%s.log is %d bytes, too short for one record batch", base, len(data))
		} else {
			if off := int64(binary.BigEndian.Uint64(data)); off != 0 {
				t.Errorf("first batch base offset %d, want 0", off)
			}
			if data[16] != 2 {
				t.Errorf("first batch magic %d, want 2", data[16])
			}
		}
	}
	for _, name := range []string{"recovery-point-offset-checkpoint", "replication-offset-checkpoint"} {
		offs, err := readCheckpoint(filepath.Join(b.DataDir, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if got, ok := offs["t-0"]; !ok || got != n {
			t.Errorf("%s: t-0 at %d (present %v), want %d after a clean stop; all: %v", name, got, ok, n, offs)
		}
	}
	if t.Failed() {
		logDirListing(t, b.DataDir)
	}
}

// readCheckpoint parses Kafka's offset checkpoint format: a version line
// (0), a count line, then "topic partition offset" lines.
func readCheckpoint(path string) (map[string]int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) < 2 {
		return nil, fmt.Errorf("%d lines, want a version and a count line at least", len(lines))
	}
	if lines[0] != "0" {
		return nil, fmt.Errorf("version line %q, want 0", lines[0])
	}
	count, err := strconv.Atoi(lines[1])
	if err != nil || count != len(lines)-2 {
		return nil, fmt.Errorf("count line %q but %d entries", lines[1], len(lines)-2)
	}
	out := map[string]int64{}
	for _, l := range lines[2:] {
		f := strings.Fields(l)
		if len(f) != 3 {
			return nil, fmt.Errorf("bad entry %q", l)
		}
		off, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("bad entry %q", l)
		}
		out[f[0]+"-"+f[1]] = off
	}
	return out, nil
}

func logDirListing(t *testing.T, root string) {
	var b strings.Builder
	_ = filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err == nil {
			rel, _ := filepath.Rel(root, p)
			fmt.Fprintf(&b, "  %s %d\n", rel, info.Size())
		}
		return nil
	})
	t.Logf("log.dirs %s:\n%s", root, b.String())
}

// TestZNodeLayout checks the znodes a CreateTopics leaves, in Kafka's JSON
// formats (see reference/kafka-zk-internals.md §1.2).
func TestZNodeLayout(t *testing.T) {
	c := NewCluster(t, 1, nil)
	b := c.Brokers[0]
	const topic = "zt"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm := kadm.NewClient(c.Client())
	retention := "86400000"
	resp, err := adm.CreateTopics(ctx, 3, 1, map[string]*string{"retention.ms": &retention}, topic)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("create topic: %v", err)
	}

	getJSON := func(path string, into any) bool {
		t.Helper()
		data, _, err := c.Get(path)
		if err != nil {
			t.Errorf("get %s: %v", path, err)
			return false
		}
		if err := json.Unmarshal(data, into); err != nil {
			t.Errorf("%s: not JSON (%v): %q", path, err, data)
			return false
		}
		t.Logf("%s = %s", path, data)
		return true
	}

	var tz struct {
		Version    *int               `json:"version"`
		Partitions map[string][]int32 `json:"partitions"`
	}
	if getJSON("/brokers/topics/"+topic, &tz) {
		if tz.Version == nil {
			t.Errorf("/brokers/topics/%s has no version", topic)
		}
		want := map[string][]int32{"0": {b.ID()}, "1": {b.ID()}, "2": {b.ID()}}
		if !reflect.DeepEqual(tz.Partitions, want) {
			t.Errorf("/brokers/topics/%s partitions %v, want %v", topic, tz.Partitions, want)
		}
	}

	for p := range 3 {
		path := fmt.Sprintf("/brokers/topics/%s/partitions/%d/state", topic, p)
		var raw map[string]json.RawMessage
		// The controller writes the state znodes; poll, as a client would.
		if err := poll(10*time.Second, func() error {
			_, _, err := c.Get(path)
			return err
		}); err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if !getJSON(path, &raw) {
			continue
		}
		for _, f := range []string{"leader", "leader_epoch", "isr", "controller_epoch", "version"} {
			if _, ok := raw[f]; !ok {
				t.Errorf("%s has no %q", path, f)
			}
		}
		var st struct {
			Leader          int32   `json:"leader"`
			LeaderEpoch     int32   `json:"leader_epoch"`
			ISR             []int32 `json:"isr"`
			ControllerEpoch int32   `json:"controller_epoch"`
		}
		data, _, _ := c.Get(path)
		if err := json.Unmarshal(data, &st); err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if st.Leader != b.ID() || !reflect.DeepEqual(st.ISR, []int32{b.ID()}) || st.LeaderEpoch < 0 || st.ControllerEpoch < 0 {
			t.Errorf("%s = %+v, want leader %d, isr [%d], epochs >= 0", path, st, b.ID(), b.ID())
		}
	}

	var cfg struct {
		Version *int              `json:"version"`
		Config  map[string]string `json:"config"`
	}
	if getJSON("/config/topics/"+topic, &cfg) {
		if cfg.Version == nil || cfg.Config["retention.ms"] != retention {
			t.Errorf("/config/topics/%s = %+v, want a version and retention.ms=%s", topic, cfg, retention)
		}
	}

	var reg struct {
		Version   *int     `json:"version"`
		Host      string   `json:"host"`
		Port      int      `json:"port"`
		Endpoints []string `json:"endpoints"`
	}
	if getJSON(fmt.Sprintf("/brokers/ids/%d", b.ID()), &reg) {
		want := "PLAINTEXT://" + b.Addr()
		if !reflect.DeepEqual(reg.Endpoints, []string{want}) || reg.Version == nil {
			t.Errorf("/brokers/ids/%d = %+v, want a version and endpoints [%s]", b.ID(), reg, want)
		}
		if fmt.Sprintf("%s:%d", reg.Host, reg.Port) != b.Addr() {
			t.Errorf("/brokers/ids/%d host:port %s:%d, want %s", b.ID(), reg.Host, reg.Port, b.Addr())
		}
	}

	var ctrl struct {
		Version  *int  `json:"version"`
		BrokerID int32 `json:"brokerid"`
	}
	if getJSON("/controller", &ctrl) && (ctrl.BrokerID != b.ID() || ctrl.Version == nil) {
		t.Errorf("/controller = %+v, want brokerid %d and a version", ctrl, b.ID())
	}
	if data, _, err := c.Get("/controller_epoch"); err != nil {
		t.Errorf("get /controller_epoch: %v", err)
	} else if n, err := strconv.Atoi(string(data)); err != nil || n < 0 {
		t.Errorf("/controller_epoch = %q, want a plain non-negative integer", data)
	}

	var cid struct {
		Version string `json:"version"`
		ID      string `json:"id"`
	}
	if getJSON("/cluster/id", &cid) && cid.ID == "" {
		t.Errorf("/cluster/id has no id")
	}
}
