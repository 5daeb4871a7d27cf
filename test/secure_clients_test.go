package test

// Secure client tests (issue 14): kgo, sarama, kcat (librdkafka) and
// confluent-kafka-python each produce secureRecords records with acks=all
// and read them back, over SASL_SSL with SCRAM-SHA-512 (as alice, created
// through AlterUserScramCredentials), over SASL_PLAINTEXT with PLAIN (alice
// from the listener's PlainLoginModule users) and over SSL with a client
// certificate (mtls-client, from ssl.principal.mapping.rules). Each principal
// holds only Write, Read and Describe on the topics prefixed "sec-" and Read
// on every group, so each run also proves that authorization lets a
// correctly configured client through. The history check is the client
// tests' one.

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
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
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	secureRecords    = 500
	securePartitions = 3
)

var secureListeners = []string{lnSASLSSL, lnSASLPlan, lnSSL}

// userFor is the principal and password a client uses on ln.
func userFor(ln string) (string, string) {
	if ln == lnSSL {
		return mtlsUser, ""
	}
	return aliceUser, alicePass
}

// clientSecureCluster is one broker with alice and the client certificate
// allowed on the "sec-" topics.
func clientSecureCluster(t *testing.T) *secureCluster {
	t.Helper()
	sc := newSecureCluster(t, 1, nil)
	sc.createUser(t, aliceUser, alicePass)
	sc.allow(t, kadm.NewACLs().Allow("User:"+aliceUser, "User:"+mtlsUser).
		Topics("sec-").ResourcePatternType(kadm.ACLPatternPrefixed).
		Operations(kadm.OpWrite, kadm.OpRead, kadm.OpDescribe))
	sc.allow(t, kadm.NewACLs().Allow("User:"+aliceUser, "User:"+mtlsUser).Groups("*").Operations(kadm.OpRead))
	return sc
}

// secureTopic names the topic of one client and listener.
func secureTopic(client, ln string) string {
	return "sec-" + client + "-" + strings.ToLower(strings.ReplaceAll(ln, "_", "-"))
}

func TestSecureClientFranzGo(t *testing.T) {
	sc := clientSecureCluster(t)
	for _, ln := range secureListeners {
		t.Run(ln, func(t *testing.T) {
			topic := secureTopic("kgo", ln)
			sc.createTopic(t, topic, securePartitions, 1, nil)
			user, pass := userFor(ln)
			// Idempotent by default: KIP-679 lets Write on the topic
			// stand for IdempotentWrite on the cluster.
			cl := sc.client(t, ln, user, pass, kgo.DefaultProduceTopic(topic))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var h History
			var mu sync.Mutex
			var failures []error
			for _, r := range workload("kgo-"+ln, secureRecords) {
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
			read := readAllWith(t, sc.kgoOpts(ln, user, pass), topic, readTimeout)
			checkHistory(t, ln+" kgo", h.Acked(), read, false)
		})
	}
}

func TestSecureClientSarama(t *testing.T) {
	sc := clientSecureCluster(t)
	for _, ln := range secureListeners {
		t.Run(ln, func(t *testing.T) {
			topic := secureTopic("sarama", ln)
			sc.createTopic(t, topic, securePartitions, 1, nil)
			user, pass := userFor(ln)
			cfg := sc.saramaConfig(ln, user, pass)
			cfg.Producer.RequiredAcks = sarama.WaitForAll
			cfg.Producer.Return.Successes, cfg.Producer.Return.Errors = true, true
			cfg.Producer.Flush.Frequency = 5 * time.Millisecond
			p, err := sarama.NewAsyncProducer(sc.seeds(ln), cfg)
			if err != nil {
				t.Fatalf("sarama producer: %v", err)
			}
			recs := workload("sarama-"+ln, secureRecords)
			var h History
			var failures []error
			done := make(chan struct{})
			go func() {
				defer close(done)
				for range recs {
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
			case <-time.After(time.Minute):
				t.Fatalf("sarama: only %d acknowledgements after a minute", len(h.Acked()))
			}
			if err := p.Close(); err != nil {
				t.Errorf("sarama producer close: %v", err)
			}
			if len(failures) > 0 {
				t.Fatalf("%d produce failures, first: %v", len(failures), failures[0])
			}
			checkHistory(t, ln+" sarama", h.Acked(), saramaReadAll(t, sc.seeds(ln), cfg, topic), false)
		})
	}
}

// TestSecureClientSaramaHandshakeV0: sarama with SaslHandshake v0, whose
// SASL tokens follow the handshake as raw frames (Kafka's v0 framing, as
// clients before SaslAuthenticate used), PLAIN and SCRAM-SHA-512: a few
// records produced with acks=all and read back.
func TestSecureClientSaramaHandshakeV0(t *testing.T) {
	sc := clientSecureCluster(t)
	for _, ln := range []string{lnSASLSSL, lnSASLPlan} {
		t.Run(ln, func(t *testing.T) {
			topic := secureTopic("sarama-v0", ln)
			sc.createTopic(t, topic, 1, 1, nil)
			cfg := sc.saramaConfig(ln, aliceUser, alicePass)
			cfg.Net.SASL.Version = sarama.SASLHandshakeV0
			// sarama refuses ApiVersions with v0 SASL and then picks request
			// versions from cfg.Version: a 0.11 client, of the era before
			// SaslAuthenticate.
			cfg.ApiVersionsRequest = false
			cfg.Version = sarama.V0_11_0_0
			cfg.Producer.RequiredAcks = sarama.WaitForAll
			cfg.Producer.Return.Successes = true
			p, err := sarama.NewSyncProducer(sc.seeds(ln), cfg)
			if err != nil {
				t.Fatalf("sarama producer with SaslHandshake v0: %v", err)
			}
			var h History
			for _, r := range workload("sarama-v0", 20) {
				part, off, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.ByteEncoder(r.Key), Value: sarama.ByteEncoder(r.Value)})
				if err != nil {
					t.Fatalf("send: %v", err)
				}
				r.Partition, r.Offset, r.Headers = part, off, nil
				h.Ack(r)
			}
			_ = p.Close()
			read := saramaReadAll(t, sc.seeds(ln), cfg, topic)
			for i := range read {
				read[i].Headers = nil
			}
			checkHistory(t, ln+" sarama v0", h.Acked(), read, false)
		})
	}
}

// saramaReadAll reads every partition of topic from the oldest offset to
// the newest one at the start, with sarama's partition consumers.
func saramaReadAll(t *testing.T, seeds []string, cfg *sarama.Config, topic string) []Rec {
	t.Helper()
	client, err := sarama.NewClient(seeds, cfg)
	if err != nil {
		t.Fatalf("sarama client: %v", err)
	}
	defer client.Close()
	parts, err := client.Partitions(topic)
	if err != nil {
		t.Fatalf("sarama partitions: %v", err)
	}
	cons, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		t.Fatalf("sarama consumer: %v", err)
	}
	defer cons.Close()
	var out []Rec
	for _, p := range parts {
		end, err := client.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			t.Fatalf("sarama GetOffset %s[%d]: %v", topic, p, err)
		}
		if end == 0 {
			continue
		}
		pc, err := cons.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatalf("sarama ConsumePartition %s[%d]: %v", topic, p, err)
		}
		timeout := time.After(readTimeout)
		for next := int64(0); next < end; {
			select {
			case m := <-pc.Messages():
				r := Rec{Partition: m.Partition, Offset: m.Offset, Key: m.Key, Value: m.Value}
				for _, hd := range m.Headers {
					r.Headers = append(r.Headers, Header{Key: string(hd.Key), Value: hd.Value})
				}
				out = append(out, r)
				next = m.Offset + 1
			case e := <-pc.Errors():
				t.Logf("sarama consume %s[%d]: %v", topic, p, e)
			case <-timeout:
				t.Fatalf("sarama consume %s[%d]: offset %d not reached, at %d", topic, p, end, next)
			}
		}
		pc.Close()
	}
	return out
}

// TestSecureClientKcat produces with kcat into partition 0 of a
// one-partition topic (delivery reports in order, one request in flight)
// and reads back with kcat -C, both with the listener's -X settings.
func TestSecureClientKcat(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("kcat not found: install Debian's kcat package")
	}
	sc := clientSecureCluster(t)
	for _, ln := range secureListeners {
		t.Run(ln, func(t *testing.T) {
			topic := secureTopic("kcat", ln)
			sc.createTopic(t, topic, 1, 1, nil)
			user, pass := userFor(ln)
			conf := sc.librdkafkaConf(ln, user, pass)
			var in bytes.Buffer
			var sent []Rec
			for _, r := range workload("kcat", secureRecords) {
				r.Partition = 0
				r.Headers = []Header{{Key: "client", Value: []byte("kcat")}}
				sent = append(sent, r)
				fmt.Fprintf(&in, "%s:%s\n", r.Key, r.Value)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			args := append([]string{"-P", "-b", conf["bootstrap.servers"], "-t", topic, "-p", "0", "-K:", "-H", "client=kcat",
				"-X", "acks=all", "-X", "max.in.flight.requests.per.connection=1", "-v", "-v"}, kcatArgs(conf)...)
			cmd := exec.CommandContext(ctx, "kcat", args...)
			cmd.Stdin = &in
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("kcat -P: %v\n%s%s", err, tailLines(stderr.String(), 30), librdkafkaNonceHint(ln, stderr.String()))
			}
			noProtocolErrors(t, "kcat -P", stderr.String())
			drs := kcatDelivered.FindAllStringSubmatch(stderr.String(), -1)
			if len(drs) != len(sent) {
				t.Fatalf("kcat -P: %d delivery reports for %d records:\n%s", len(drs), len(sent), tailLines(stderr.String(), 30))
			}
			var h History
			for i, dr := range drs {
				off, _ := strconv.ParseInt(dr[2], 10, 64)
				r := sent[i]
				r.Offset = off
				h.Ack(r)
			}
			read := kcatConsume(t, conf["bootstrap.servers"], topic, kcatArgs(conf)...)
			checkHistory(t, ln+" kcat", h.Acked(), read, false)
		})
	}
}

// librdkafkaNonceHint explains a SCRAM failure of librdkafka before 2.6.1:
// see TestSecureScramLibrdkafkaFinalNonce.
func librdkafkaNonceHint(ln, stderr string) string {
	if ln != lnSASLSSL || !strings.Contains(stderr, "invalid credentials with SASL mechanism SCRAM") {
		return ""
	}
	return "\n(librdkafka < 2.6.1 repeats its nonce in the SCRAM client-final message; Kafka accepts a final nonce that ends with the server's: TestSecureScramLibrdkafkaFinalNonce)"
}

// securePythonScript is confluent-kafka-python's side: "produce CONF TOPIC
// FILE" and "consume CONF TOPIC PARTITIONS", CONF a JSON file of librdkafka
// settings (bootstrap and security), otherwise as pythonScript.
const securePythonScript = `
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
    conf.update({'acks': 'all', 'linger.ms': 5, 'client.id': 'e2e-python-secure', 'error_cb': fatal_auth})
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
    conf.update({'group.id': 'e2e-python-secure', 'enable.auto.commit': False,
                 'auto.offset.reset': 'earliest', 'client.id': 'e2e-python-secure', 'error_cb': fatal_auth})
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

func TestSecureClientPython(t *testing.T) {
	py, err := pythonWithConfluentKafka()
	if err != nil {
		t.Skip(err)
	}
	sc := clientSecureCluster(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "client.py")
	if err := os.WriteFile(script, []byte(securePythonScript), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, ln := range secureListeners {
		t.Run(ln, func(t *testing.T) {
			topic := secureTopic("python", ln)
			sc.createTopic(t, topic, securePartitions, 1, nil)
			user, pass := userFor(ln)
			confPath := filepath.Join(dir, ln+".json")
			conf, _ := json.Marshal(sc.librdkafkaConf(ln, user, pass))
			if err := os.WriteFile(confPath, conf, 0o600); err != nil {
				t.Fatal(err)
			}
			recs := workload("python-"+ln, secureRecords)
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
			input := filepath.Join(dir, ln+".jsonl")
			if err := os.WriteFile(input, in.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			var h History
			for _, pr := range runPython(t, py, script, "produce", confPath, topic, input) {
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
			var read []Rec
			for _, pr := range runPython(t, py, script, "consume", confPath, topic, strconv.Itoa(securePartitions)) {
				r := Rec{Partition: *pr.Partition, Offset: *pr.Offset}
				r.Key, _ = hex.DecodeString(pr.Key)
				r.Value, _ = hex.DecodeString(pr.Value)
				for _, hd := range pr.Headers {
					v, _ := hex.DecodeString(hd[1])
					r.Headers = append(r.Headers, Header{Key: hd[0], Value: v})
				}
				read = append(read, r)
			}
			checkHistory(t, ln+" python", h.Acked(), read, false)
		})
	}
}
