package test

// Client tests: each real client produces the same kind of workload
// (numRecords keyed records, unique keys and values, headers, value sizes
// 10..1000 bytes) to a 4-partition topic of a fresh 1-broker cluster, the
// acknowledged offsets are recorded, everything is read back and the history
// checked; then the broker is killed with SIGKILL, started again, and the
// check repeated: nothing acknowledged may be lost or duplicated by the
// crash.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	numRecords    = 10000
	numPartitions = 4
	readTimeout   = 90 * time.Second
)

func clientCluster(t *testing.T) *Cluster {
	return NewCluster(t, 1, map[string]string{
		"auto.create.topics.enable": "true",
		"num.partitions":            strconv.Itoa(numPartitions),
	})
}

// verifyAcrossCrash checks the acknowledged records against a kgo read,
// kills the broker with SIGKILL, restarts it and checks again. extraRead, if
// set, is a second reader (the producing client's own consumer) whose result
// must equal kgo's.
func verifyAcrossCrash(t *testing.T, c *Cluster, topic string, acked []Rec, extraRead func(phase string) []Rec) {
	t.Helper()
	if len(acked) != numRecords {
		t.Fatalf("%d of %d records acknowledged", len(acked), numRecords)
	}
	parts := map[int32]int{}
	for _, r := range acked {
		parts[r.Partition]++
	}
	if len(parts) != numPartitions {
		t.Errorf("records acknowledged on %d partitions, want %d: %v", len(parts), numPartitions, parts)
	}
	check := func(phase string) {
		read := readAll(t, c.Seeds(), topic, readTimeout)
		checkHistory(t, phase+" (kgo read)", acked, read, false)
		if extraRead != nil {
			other := extraRead(phase)
			checkHistory(t, phase+" (own client read)", acked, other, false)
			compareReads(t, phase, read, other)
		}
	}
	check("after produce")
	b := c.Brokers[0]
	b.Kill()
	b.Start()
	check("after kill -9 and restart")
}

// compareReads fails if two reads of the same log differ.
func compareReads(t *testing.T, phase string, a, b []Rec) {
	t.Helper()
	a, b = append([]Rec(nil), a...), append([]Rec(nil), b...)
	sortRecs(a)
	sortRecs(b)
	if len(a) != len(b) {
		t.Errorf("%s: kgo read %d records, the client's consumer %d", phase, len(a), len(b))
		return
	}
	for i := range a {
		if a[i].Partition != b[i].Partition || a[i].Offset != b[i].Offset || !sameContent(a[i], b[i]) {
			t.Errorf("%s: reads differ at %d: kgo %v, client %v", phase, i, a[i], b[i])
			return
		}
	}
}

func TestClientFranzGo(t *testing.T) {
	c := clientCluster(t)
	const topic = "kgo-topic"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := kadm.NewClient(c.Client())
	resp, err := adm.CreateTopics(ctx, numPartitions, 1, nil, topic)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("kadm CreateTopics: %v", err)
	}

	// Default producer settings: idempotent, acks=all.
	cl := c.Client(kgo.DefaultProduceTopic(topic))
	acked := kgoProduce(ctx, t, cl, workload("kgo", numRecords))
	verifyAcrossCrash(t, c, topic, acked, nil)
}

// kgoProduce produces recs with cl (to its default topic), waits for every
// acknowledgement and returns the acknowledged records; any produce error
// fails the test.
func kgoProduce(ctx context.Context, t *testing.T, cl *kgo.Client, recs []Rec) []Rec {
	t.Helper()
	var h History
	var mu sync.Mutex
	var failures []error
	for _, r := range recs {
		rec := &kgo.Record{Key: r.Key, Value: r.Value}
		for _, hd := range r.Headers {
			rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: hd.Key, Value: hd.Value})
		}
		cl.Produce(ctx, rec, func(rec *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				failures = append(failures, err)
				mu.Unlock()
				return
			}
			h.Ack(fromKgo(rec))
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if len(failures) > 0 {
		t.Fatalf("%d produce failures, first: %v", len(failures), failures[0])
	}
	return h.Acked()
}

func TestClientSarama(t *testing.T) {
	c := clientCluster(t)
	const topic = "sarama-topic"
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.ClientID = "e2e-sarama"
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.Producer.Flush.Frequency = 5 * time.Millisecond

	admin, err := sarama.NewClusterAdmin(c.Seeds(), cfg)
	if err != nil {
		t.Fatalf("sarama cluster admin: %v", err)
	}
	if err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: numPartitions, ReplicationFactor: 1}, false); err != nil {
		t.Fatalf("sarama CreateTopic: %v", err)
	}
	_ = admin.Close()

	acked := saramaProduce(t, c.Seeds(), cfg, topic, workload("sarama", numRecords))
	verifyAcrossCrash(t, c, topic, acked, nil)
}

// saramaProduce sends recs to topic with a sarama async producer of cfg
// (which must return successes and errors) and returns the acknowledged
// records; any produce error fails the test.
func saramaProduce(t *testing.T, seeds []string, cfg *sarama.Config, topic string, recs []Rec) []Rec {
	t.Helper()
	p, err := sarama.NewAsyncProducer(seeds, cfg)
	if err != nil {
		t.Fatalf("sarama producer: %v", err)
	}
	var h History
	var failures []error
	done := make(chan struct{})
	go func() {
		defer close(done)
		for n := 0; n < len(recs); n++ {
			select {
			case m := <-p.Successes():
				r := recs[m.Metadata.(int)]
				r.Partition, r.Offset = m.Partition, m.Offset
				h.Ack(r)
			case e := <-p.Errors():
				failures = append(failures, e.Err)
			}
		}
	}()
	for i, r := range recs {
		m := &sarama.ProducerMessage{Topic: topic, Key: sarama.ByteEncoder(r.Key), Value: sarama.ByteEncoder(r.Value), Metadata: i}
		for _, hd := range r.Headers {
			m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(hd.Key), Value: hd.Value})
		}
		p.Input() <- m
	}
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("sarama: only %d acknowledgements after 2 minutes", len(h.Acked()))
	}
	if err := p.Close(); err != nil {
		t.Errorf("sarama producer close: %v", err)
	}
	if len(failures) > 0 {
		t.Fatalf("%d produce failures, first: %v", len(failures), failures[0])
	}
	return h.Acked()
}

func TestClientKafkaGo(t *testing.T) {
	c := clientCluster(t)
	const topic = "kafkago-topic"

	// kafka-go creates topics through a Conn to the controller.
	conn, err := kafka.Dial("tcp", c.Brokers[0].Addr())
	if err != nil {
		t.Fatalf("kafka-go dial: %v", err)
	}
	ctrl, err := conn.Controller()
	conn.Close()
	if err != nil {
		t.Fatalf("kafka-go Controller: %v", err)
	}
	cconn, err := kafka.Dial("tcp", net.JoinHostPort(ctrl.Host, strconv.Itoa(ctrl.Port)))
	if err != nil {
		t.Fatalf("kafka-go dial controller %v: %v", ctrl, err)
	}
	err = cconn.CreateTopics(kafka.TopicConfig{Topic: topic, NumPartitions: numPartitions, ReplicationFactor: 1})
	cconn.Close()
	if err != nil {
		t.Fatalf("kafka-go CreateTopics: %v", err)
	}

	var h History
	var mu sync.Mutex
	var failures []error
	w := &kafka.Writer{
		Addr:         kafka.TCP(c.Seeds()...),
		Topic:        topic,
		Balancer:     &kafka.Hash{},
		RequiredAcks: kafka.RequireAll,
		BatchSize:    500,
		BatchTimeout: 5 * time.Millisecond,
		Completion: func(msgs []kafka.Message, err error) {
			if err != nil {
				mu.Lock()
				failures = append(failures, err)
				mu.Unlock()
				return
			}
			for _, m := range msgs {
				r := Rec{Partition: int32(m.Partition), Offset: m.Offset, Key: m.Key, Value: m.Value}
				for _, hd := range m.Headers {
					r.Headers = append(r.Headers, Header{Key: hd.Key, Value: hd.Value})
				}
				h.Ack(r)
			}
		},
	}
	var msgs []kafka.Message
	for _, r := range workload("kafka-go", numRecords) {
		m := kafka.Message{Key: r.Key, Value: r.Value}
		for _, hd := range r.Headers {
			m.Headers = append(m.Headers, kafka.Header{Key: hd.Key, Value: hd.Value})
		}
		msgs = append(msgs, m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("kafka-go WriteMessages: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("kafka-go writer close: %v", err)
	}
	if len(failures) > 0 {
		t.Fatalf("%d batches failed, first: %v", len(failures), failures[0])
	}
	verifyAcrossCrash(t, c, topic, h.Acked(), nil)
}

var kcatDelivered = regexp.MustCompile(`Message delivered to partition (\d+) \(offset (\d+)\)`)

// TestClientKcat produces with kcat (librdkafka 2.0.2) relying on topic
// auto-creation, one kcat run per partition (-p) so that the delivery
// reports, which kcat prints in order but without the key, can be matched
// to the records sent; it reads back with kcat -C and with kgo.
func TestClientKcat(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("kcat not found: install Debian's kcat package")
	}
	c := clientCluster(t)
	const topic = "kcat-topic"
	recs := workload("kcat", numRecords)
	var h History
	for p := int32(0); p < numPartitions; p++ {
		var sent []Rec
		for i, r := range recs {
			if int32(i%numPartitions) != p {
				continue
			}
			r.Partition = p
			r.Headers = []Header{{Key: "client", Value: []byte("kcat")}, {Key: "part", Value: []byte(fmt.Sprint(p))}}
			sent = append(sent, r)
		}
		for _, r := range kcatProduce(t, c.Bootstrap(), topic, p, sent, nil, nil) {
			h.Ack(r)
		}
	}
	verifyAcrossCrash(t, c, topic, h.Acked(), func(phase string) []Rec {
		return kcatConsume(t, c.Bootstrap(), topic)
	})
}

// kcatProduce sends sent (their keys, values and the headers of sent[0])
// with kcat -P into partition p of topic, extra being more kcat arguments
// (a secured listener's -X settings), and returns the records with the
// offsets of kcat's delivery reports. hint, if not nil, explains a failed
// run from kcat's stderr.
func kcatProduce(t *testing.T, bootstrap, topic string, p int32, sent []Rec, extra []string, hint func(stderr string) string) []Rec {
	t.Helper()
	var in bytes.Buffer
	for _, r := range sent {
		fmt.Fprintf(&in, "%s:%s\n", r.Key, r.Value)
	}
	args := []string{"-P", "-b", bootstrap, "-t", topic, "-p", fmt.Sprint(p), "-K:"}
	if len(sent) > 0 {
		for _, hd := range sent[0].Headers {
			args = append(args, "-H", hd.Key+"="+string(hd.Value))
		}
	}
	// One request in flight: the delivery reports are matched to the
	// records by order, and a non-idempotent producer with several requests
	// in flight may legitimately reorder a batch retried after
	// auto-creation behind later ones.
	args = append(append(args, "-X", "acks=all", "-X", "max.in.flight.requests.per.connection=1", "-v", "-v"), extra...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kcat", args...)
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		why := ""
		if hint != nil {
			why = hint(stderr.String())
		}
		t.Fatalf("kcat -P -p %d: %v\n%s%s", p, err, tailLines(stderr.String(), 30), why)
	}
	noProtocolErrors(t, fmt.Sprintf("kcat -P -p %d", p), stderr.String())
	if strings.Contains(stderr.String(), "Delivery failed") {
		t.Fatalf("kcat -P -p %d reported failed deliveries:\n%s", p, tailLines(stderr.String(), 30))
	}
	drs := kcatDelivered.FindAllStringSubmatch(stderr.String(), -1)
	if len(drs) != len(sent) {
		t.Fatalf("kcat -P -p %d: %d delivery reports for %d records:\n%s", p, len(drs), len(sent), tailLines(stderr.String(), 30))
	}
	var acked []Rec
	for i, dr := range drs {
		part, _ := strconv.Atoi(dr[1])
		off, _ := strconv.ParseInt(dr[2], 10, 64)
		if int32(part) != p {
			t.Fatalf("kcat -P -p %d: delivery report for partition %d", p, part)
		}
		r := sent[i]
		r.Offset = off
		acked = append(acked, r)
	}
	return acked
}

// kcatConsume reads the whole topic with kcat -C -e (no consumer group);
// extra are more kcat arguments (e.g. -X isolation.level=read_committed).
func kcatConsume(t *testing.T, bootstrap, topic string, extra ...string) []Rec {
	t.Helper()
	// 10,000 small records take kcat a second or two; a kcat that has not
	// reached the end after this long is stuck (see its stderr).
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	args := append([]string{"-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e",
		"-f", `%p\t%o\t%k\t%s\t%h\n`}, extra...)
	cmd := exec.CommandContext(ctx, "kcat", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kcat -C: %v\n%s", err, tailLines(stderr.String(), 30))
	}
	noProtocolErrors(t, "kcat -C", stderr.String())
	var out []Rec
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 5 {
			t.Fatalf("kcat -C: unparseable line %q", sc.Text())
		}
		p, err1 := strconv.Atoi(f[0])
		o, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("kcat -C: unparseable line %q", sc.Text())
		}
		r := Rec{Partition: int32(p), Offset: o, Key: []byte(f[2]), Value: []byte(f[3])}
		if f[4] != "" {
			for _, kv := range strings.Split(f[4], ",") {
				k, v, _ := strings.Cut(kv, "=")
				r.Headers = append(r.Headers, Header{Key: k, Value: []byte(v)})
			}
		}
		out = append(out, r)
	}
	return out
}

// pythonScript is the confluent-kafka-python side of TestClientPython and
// TestSecureClientPython: "produce CONF TOPIC FILE" sends the JSON-lines
// records of FILE with acks=all and prints one JSON delivery report per
// record; "consume CONF TOPIC PARTITIONS" assigns every partition from the
// beginning (no subscribe; a group.id is required by the client but auto
// commit is off) and prints every record until the high watermarks read at
// start. CONF is a JSON file of librdkafka settings (bootstrap, security,
// client.id; pythonConf); an authentication failure ends the script.
const pythonScript = `
import json, os, sys, time
from confluent_kafka import Producer, Consumer, KafkaError, TopicPartition, OFFSET_BEGINNING

def fatal_auth(err):
    # An authentication failure is final: say so and stop, instead of
    # retrying until the flush times out.
    if err.code() in (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED):
        sys.stderr.write('authentication failed: %s\n' % err)
        sys.stderr.flush()
        os._exit(5)

def produce(conf, topic, path):
    conf.update({'acks': 'all', 'linger.ms': 5, 'error_cb': fatal_auth})
    p = Producer(conf)
    failed = [0]
    def dr(err, msg):
        if err is not None:
            failed[0] += 1
            print(json.dumps({'key': msg.key().hex(), 'error': str(err)}))
            return
        print(json.dumps({'key': msg.key().hex(), 'partition': msg.partition(), 'offset': msg.offset()}))
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            hdrs = [(h[0], bytes.fromhex(h[1])) for h in r['headers']]
            while True:
                try:
                    p.produce(topic, key=bytes.fromhex(r['key']), value=bytes.fromhex(r['value']),
                              headers=hdrs, on_delivery=dr)
                    break
                except BufferError:
                    p.poll(0.1)
            p.poll(0)
    left = p.flush(60)
    if left:
        sys.stderr.write('%d messages not delivered\n' % left)
        sys.exit(2)
    if failed[0]:
        sys.exit(3)

def consume(conf, topic, partitions):
    conf.update({'group.id': conf['client.id'], 'enable.auto.commit': False,
                 'auto.offset.reset': 'earliest', 'error_cb': fatal_auth})
    c = Consumer(conf)
    highs = {}
    for p in range(partitions):
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
        highs[p] = hi
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    nxt = {p: 0 for p in highs}
    deadline = time.time() + 80
    while any(nxt[p] < highs[p] for p in highs):
        if time.time() > deadline:
            sys.stderr.write('timeout: reached %r of %r\n' % (nxt, highs))
            sys.exit(4)
        m = c.poll(1.0)
        if m is None:
            continue
        if m.error():
            sys.stderr.write('consume error: %s\n' % m.error())
            continue
        hdrs = [[k, (v or b'').hex()] for k, v in (m.headers() or [])]
        print(json.dumps({'partition': m.partition(), 'offset': m.offset(),
                          'key': (m.key() or b'').hex(), 'value': (m.value() or b'').hex(),
                          'headers': hdrs}))
        nxt[m.partition()] = m.offset() + 1
    c.close()

with open(sys.argv[2]) as f:
    conf = json.load(f)
if sys.argv[1] == 'produce':
    produce(conf, sys.argv[3], sys.argv[4])
else:
    consume(conf, sys.argv[3], int(sys.argv[4]))
`

type pyRecord struct {
	Partition *int32     `json:"partition"`
	Offset    *int64     `json:"offset"`
	Key       string     `json:"key"`
	Value     string     `json:"value"`
	Headers   [][]string `json:"headers"`
	Error     string     `json:"error"`
}

// pythonWithConfluentKafka finds a python3 that can import confluent_kafka
// (Debian's python3-confluent-kafka lives under /usr/bin/python3, which a
// pyenv or venv python3 on PATH may shadow).
func pythonWithConfluentKafka() (string, error) {
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		if err := exec.Command(py, "-c", "import confluent_kafka").Run(); err == nil {
			return py, nil
		}
	}
	return "", errors.New("no python3 can import confluent_kafka: install Debian's python3-confluent-kafka package")
}

func TestClientPython(t *testing.T) {
	py, err := pythonWithConfluentKafka()
	if err != nil {
		t.Skip(err)
	}
	c := clientCluster(t)
	const topic = "python-topic"
	dir := t.TempDir()
	script := filepath.Join(dir, "client.py")
	if err := os.WriteFile(script, []byte(pythonScript), 0o644); err != nil {
		t.Fatal(err)
	}
	conf := pythonConf(t, dir, "plaintext", map[string]string{"bootstrap.servers": c.Bootstrap(), "client.id": "e2e-python"})

	// Produce with auto-creation of the topic (num.partitions=4).
	acked := pythonProduce(t, py, script, conf, topic, workload("python", numRecords))
	verifyAcrossCrash(t, c, topic, acked, func(phase string) []Rec {
		return pyRecs(runPython(t, py, script, "consume", conf, topic, strconv.Itoa(numPartitions)))
	})
}

// pythonConf writes the librdkafka settings conf for pythonScript into dir
// and returns the file's path.
func pythonConf(t *testing.T, dir, name string, conf map[string]string) string {
	t.Helper()
	b, err := json.Marshal(conf)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// pythonProduce sends recs to topic with pythonScript's producer (settings
// in the file conf, beside which the records go) and returns what the
// delivery reports acknowledged.
func pythonProduce(t *testing.T, py, script, conf, topic string, recs []Rec) []Rec {
	t.Helper()
	byKey := map[string]Rec{}
	var in bytes.Buffer
	enc := json.NewEncoder(&in)
	for _, r := range recs {
		byKey[hex.EncodeToString(r.Key)] = r
		var hdrs [][]string
		for _, hd := range r.Headers {
			hdrs = append(hdrs, []string{hd.Key, hex.EncodeToString(hd.Value)})
		}
		_ = enc.Encode(pyRecord{Key: hex.EncodeToString(r.Key), Value: hex.EncodeToString(r.Value), Headers: hdrs})
	}
	input := strings.TrimSuffix(conf, ".json") + ".jsonl"
	if err := os.WriteFile(input, in.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var h History
	for _, pr := range runPython(t, py, script, "produce", conf, topic, input) {
		r, ok := byKey[pr.Key]
		if !ok {
			t.Fatalf("python delivery report for unknown key %q", pr.Key)
		}
		if pr.Error != "" || pr.Partition == nil || pr.Offset == nil {
			t.Fatalf("python delivery failed for %q: %s", r.Key, pr.Error)
		}
		r.Partition, r.Offset = *pr.Partition, *pr.Offset
		h.Ack(r)
	}
	return h.Acked()
}

// runPython runs the client script and parses its JSON-lines stdout.
func runPython(t *testing.T, py, script string, args ...string) []pyRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, append([]string{script}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if s := strings.TrimSpace(stderr.String()); s != "" {
		t.Logf("python %s stderr:\n%s", args[0], tailLines(s, 30))
	}
	if err != nil {
		t.Fatalf("python %s: %v\n%s", args[0], err, tailLines(stderr.String(), 30))
	}
	noProtocolErrors(t, "python "+args[0], stderr.String())
	var out []pyRecord
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var pr pyRecord
		if err := json.Unmarshal(sc.Bytes(), &pr); err != nil {
			t.Fatalf("python %s: bad output line %q: %v", args[0], sc.Text(), err)
		}
		out = append(out, pr)
	}
	return out
}

// noProtocolErrors fails the test if librdkafka logged a protocol error
// (PROTOERR: a response it could not parse). librdkafka retries such
// fetches, so a read can still complete, but the broker sent bytes Kafka
// never would.
func noProtocolErrors(t *testing.T, what, stderr string) {
	t.Helper()
	var bad []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, "PROTOERR") {
			bad = append(bad, l)
		}
	}
	if len(bad) > 0 {
		t.Errorf("%s: librdkafka logged %d protocol errors, first:\n%s", what, len(bad), strings.Join(bad[:min(len(bad), 4)], "\n"))
	}
}
