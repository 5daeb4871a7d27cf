package test

// Transactions with librdkafka clients (issue 18): confluent-kafka-python's
// transactional producer (init_transactions, begin_transaction, produce,
// commit_transaction / abort_transaction) read back by a read_committed kgo
// consumer, and kcat as a read_committed consumer of a topic with committed
// and aborted transactions. Both tools come from Debian's packages
// (python3-confluent-kafka, kcat); a test skips, saying which, when one is
// missing, as the other client tests do.

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// pythonTxnScript: "txn-produce BOOTSTRAP TOPIC FILE TXID" produces the
// JSON-lines records of FILE (key, value, headers hex; partition; txn
// number; commit flag) with a transactional producer, one transaction per
// txn number in file order, flushing before each commit or abort so that
// every record is in the log, and prints one JSON delivery report per
// record. "consume-eof BOOTSTRAP TOPIC PARTITIONS ISOLATION" assigns every
// partition from the beginning with isolation.level ISOLATION and prints
// every record until each partition reported EOF (librdkafka's end is the
// LSO for read_committed, the HW otherwise).
const pythonTxnScript = `
import json, sys, time
from confluent_kafka import Producer, Consumer, KafkaError, TopicPartition, OFFSET_BEGINNING

def txn_produce(bootstrap, topic, path, txid):
    p = Producer({'bootstrap.servers': bootstrap, 'transactional.id': txid, 'acks': 'all',
                  'linger.ms': 5, 'client.id': 'e2e-python-txn', 'transaction.timeout.ms': 60000})
    def dr(err, msg):
        if err is not None:
            print(json.dumps({'key': msg.key().hex(), 'error': str(err)}))
            return
        print(json.dumps({'key': msg.key().hex(), 'partition': msg.partition(), 'offset': msg.offset()}))
    txns = []
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if not txns or txns[-1][0] != r['txn']:
                txns.append((r['txn'], r['commit'], []))
            txns[-1][2].append(r)
    p.init_transactions(30)
    for n, commit, recs in txns:
        p.begin_transaction()
        for r in recs:
            hdrs = [(h[0], bytes.fromhex(h[1])) for h in r['headers']]
            p.produce(topic, key=bytes.fromhex(r['key']), value=bytes.fromhex(r['value']),
                      partition=r['partition'], headers=hdrs, on_delivery=dr)
            p.poll(0)
        left = p.flush(30)
        if left:
            sys.stderr.write('transaction %d: %d messages not delivered\n' % (n, left))
            sys.exit(2)
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
        sys.stderr.write('transaction %d: %d records, %s\n' % (n, len(recs), 'committed' if commit else 'aborted'))

def consume_eof(bootstrap, topic, partitions, isolation):
    c = Consumer({'bootstrap.servers': bootstrap, 'group.id': 'e2e-python-txn',
                  'enable.auto.commit': False, 'auto.offset.reset': 'earliest',
                  'enable.partition.eof': True, 'isolation.level': isolation,
                  'client.id': 'e2e-python-txn'})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    eof = set()
    deadline = time.time() + 60
    while len(eof) < partitions:
        if time.time() > deadline:
            sys.stderr.write('timeout: EOF on %r of %d partitions\n' % (sorted(eof), partitions))
            sys.exit(4)
        m = c.poll(1.0)
        if m is None:
            continue
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF:
                eof.add(m.partition())
                continue
            sys.stderr.write('consume error: %s\n' % m.error())
            continue
        hdrs = [[k, (v or b'').hex()] for k, v in (m.headers() or [])]
        print(json.dumps({'partition': m.partition(), 'offset': m.offset(),
                          'key': (m.key() or b'').hex(), 'value': (m.value() or b'').hex(),
                          'headers': hdrs}))
    c.close()

if sys.argv[1] == 'txn-produce':
    txn_produce(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5])
else:
    consume_eof(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
`

// pyTxnRecord is one record of pythonTxnScript's input file.
type pyTxnRecord struct {
	Key       string     `json:"key"`
	Value     string     `json:"value"`
	Headers   [][]string `json:"headers"`
	Partition int32      `json:"partition"`
	Txn       int        `json:"txn"`
	Commit    bool       `json:"commit"`
}

func writePythonTxnScript(t *testing.T) string {
	t.Helper()
	script := filepath.Join(t.TempDir(), "txn.py")
	if err := os.WriteFile(script, []byte(pythonTxnScript), 0o644); err != nil {
		t.Fatal(err)
	}
	return script
}

// pyRecs converts the consumer output of a python script.
func pyRecs(out []pyRecord) []Rec {
	var read []Rec
	for _, pr := range out {
		r := Rec{Partition: *pr.Partition, Offset: *pr.Offset}
		r.Key, _ = hex.DecodeString(pr.Key)
		r.Value, _ = hex.DecodeString(pr.Value)
		for _, hd := range pr.Headers {
			v, _ := hex.DecodeString(hd[1])
			r.Headers = append(r.Headers, Header{Key: hd[0], Value: v})
		}
		read = append(read, r)
	}
	return read
}

// pythonConsumeEOF reads every partition of topic with confluent-kafka-python
// at the given isolation.level up to librdkafka's partition EOF.
func pythonConsumeEOF(t *testing.T, py, bootstrap, topic string, parts int32, isolation string) []Rec {
	t.Helper()
	script := writePythonTxnScript(t)
	return pyRecs(runPython(t, py, script, "consume-eof", bootstrap, topic, strconv.Itoa(int(parts)), isolation))
}

// TestTxnClients: librdkafka's transactions, on a 1-broker cluster.
func TestTxnClients(t *testing.T) {
	py, pyErr := pythonWithConfluentKafka()
	_, kcatErr := exec.LookPath("kcat")
	c := NewCluster(t, 1, txnProps(1, nil))

	// confluent-kafka-python produces 8 transactions of 50 records over 4
	// partitions, aborting transactions 1, 4 and 6; a kgo read_committed
	// consumer must read exactly the committed ones at their reported
	// offsets, read_uncommitted all of them.
	t.Run("python-producer", func(t *testing.T) {
		if pyErr != nil {
			t.Skip(pyErr)
		}
		const topic, parts, txns, per = "txn-python", 4, 8, 50
		createTopic(t, c, topic, parts, 1, nil, nil)
		abort := map[int]bool{1: true, 4: true, 6: true}
		recs := workload("python-txn", txns*per)
		var in bytes.Buffer
		enc := json.NewEncoder(&in)
		byKey := map[string]Rec{}
		txnOf := map[string]int{}
		for i, r := range recs {
			n := i / per
			r.Partition = int32(i % parts)
			byKey[hex.EncodeToString(r.Key)] = r
			txnOf[hex.EncodeToString(r.Key)] = n
			var hdrs [][]string
			for _, hd := range r.Headers {
				hdrs = append(hdrs, []string{hd.Key, hex.EncodeToString(hd.Value)})
			}
			_ = enc.Encode(pyTxnRecord{Key: hex.EncodeToString(r.Key), Value: hex.EncodeToString(r.Value), Headers: hdrs,
				Partition: r.Partition, Txn: n, Commit: !abort[n]})
		}
		input := filepath.Join(t.TempDir(), "records.jsonl")
		if err := os.WriteFile(input, in.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		script := writePythonTxnScript(t)
		var committed, aborted []Rec
		for _, pr := range runPython(t, py, script, "txn-produce", c.Bootstrap(), topic, input, "python-txn") {
			r, ok := byKey[pr.Key]
			if !ok {
				t.Fatalf("python delivery report for unknown key %q", pr.Key)
			}
			if pr.Error != "" || pr.Partition == nil || pr.Offset == nil {
				t.Fatalf("python delivery failed for %q: %s", r.Key, pr.Error)
			}
			if *pr.Partition != r.Partition {
				t.Fatalf("python delivered %q to partition %d, produced to %d", r.Key, *pr.Partition, r.Partition)
			}
			r.Offset = *pr.Offset
			if abort[txnOf[pr.Key]] {
				aborted = append(aborted, r)
			} else {
				committed = append(committed, r)
			}
		}
		if len(committed)+len(aborted) != len(recs) {
			t.Fatalf("%d delivery reports for %d records", len(committed)+len(aborted), len(recs))
		}
		waitStable(t, c.liveSeeds(), topic, 30*time.Second)
		unc := readTxnTopic(t, c.liveSeeds(), topic, false, readTimeout)
		com := readTxnTopic(t, c.liveSeeds(), topic, true, readTimeout)
		checkHistoryOffsets(t, "python transactional producer, kgo read_committed", committed, dataRecs(com.Records), false, false)
		checkHistoryOffsets(t, "python transactional producer, kgo read_uncommitted", append(append([]Rec(nil), committed...), aborted...), dataRecs(unc.Records), false, false)
		lg := splitByOutcome(unc.Records)
		checkReadCommitted(t, "python transactional producer", lg, com.Records, nil)
		if !sameKeys(keysOf(lg.Aborted), keysOf(aborted)) || !sameKeys(keysOf(lg.Committed), keysOf(committed)) {
			t.Errorf("by the markers: %d committed %d aborted records, want %d and %d", len(lg.Committed), len(lg.Aborted), len(committed), len(aborted))
		}
		// Each transaction has one marker per partition it wrote to.
		if lg.Commits != (txns-len(abort))*parts || lg.Aborts != len(abort)*parts {
			t.Errorf("markers: %d COMMIT and %d ABORT, want %d and %d", lg.Commits, lg.Aborts, (txns-len(abort))*parts, len(abort)*parts)
		}
	})

	// kcat reads, with isolation.level=read_committed, a topic where a kgo
	// transactional producer committed and aborted transactions, and must
	// return what kgo's read_committed consumer returns: the committed
	// records only; without it, every record.
	t.Run("kcat-read-committed", func(t *testing.T) {
		if kcatErr != nil {
			t.Skip("kcat not found: install Debian's kcat package")
		}
		const topic, parts = "txn-kcat", 4
		createTopic(t, c, topic, parts, 1, nil, nil)
		committed, aborted := produceTxns(t, c, topic, "kcat-tx", parts, []txnStep{
			{"c0", 40, true}, {"a1", 40, false}, {"c2", 40, true}, {"a3", 40, false}, {"c4", 40, true},
		})
		waitStable(t, c.liveSeeds(), topic, 30*time.Second)
		com := readTxnTopic(t, c.liveSeeds(), topic, true, readTimeout)
		unc := readTxnTopic(t, c.liveSeeds(), topic, false, readTimeout)
		checkHistoryOffsets(t, "kgo read_committed", committed, dataRecs(com.Records), false, false)
		got := kcatConsume(t, c.Bootstrap(), topic, "-X", "isolation.level=read_committed")
		checkHistoryOffsets(t, "kcat read_committed", committed, got, false, false)
		compareReads(t, "kcat read_committed vs kgo", dataRecs(com.Records), got)
		aborts := keysOf(aborted)
		for _, r := range got {
			if aborts[string(r.Key)] {
				t.Errorf("kcat read_committed returned aborted %v", r)
			}
		}
		got = kcatConsume(t, c.Bootstrap(), topic, "-X", "isolation.level=read_uncommitted")
		checkHistoryOffsets(t, "kcat read_uncommitted", append(append([]Rec(nil), committed...), aborted...), got, false, false)
		compareReads(t, "kcat read_uncommitted vs kgo", dataRecs(unc.Records), got)
	})
}
