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
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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
			acked := kgoProduce(ctx, t, cl, workload("kgo-"+ln, secureRecords))
			read := readAllWith(t, sc.kgoOpts(ln, user, pass), topic, readTimeout)
			checkHistory(t, ln+" kgo", acked, read, false)
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
			acked := saramaProduce(t, sc.seeds(ln), cfg, topic, workload("sarama-"+ln, secureRecords))
			checkHistory(t, ln+" sarama", acked, saramaReadAll(t, sc.seeds(ln), cfg, topic), false)
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
			var sent []Rec
			for _, r := range workload("kcat", secureRecords) {
				r.Partition = 0
				r.Headers = []Header{{Key: "client", Value: []byte("kcat")}}
				sent = append(sent, r)
			}
			hint := func(stderr string) string { return librdkafkaNonceHint(ln, stderr) }
			var h History
			for _, r := range kcatProduce(t, conf["bootstrap.servers"], topic, 0, sent, kcatArgs(conf), hint) {
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

func TestSecureClientPython(t *testing.T) {
	py, err := pythonWithConfluentKafka()
	if err != nil {
		t.Skip(err)
	}
	sc := clientSecureCluster(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "client.py")
	if err := os.WriteFile(script, []byte(pythonScript), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, ln := range secureListeners {
		t.Run(ln, func(t *testing.T) {
			topic := secureTopic("python", ln)
			sc.createTopic(t, topic, securePartitions, 1, nil)
			user, pass := userFor(ln)
			lconf := sc.librdkafkaConf(ln, user, pass)
			lconf["client.id"] = "e2e-python-secure"
			conf := pythonConf(t, dir, ln, lconf)
			acked := pythonProduce(t, py, script, conf, topic, workload("python-"+ln, secureRecords))
			read := pyRecs(runPython(t, py, script, "consume", conf, topic, strconv.Itoa(securePartitions)))
			checkHistory(t, ln+" python", acked, read, false)
		})
	}
}
