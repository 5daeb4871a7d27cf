#!/usr/bin/python3
"""failover.py: watch a partition fail over when its leader's container dies.

Run by scripts/demo-failover.sh (and so by scripts/compose-test.sh) against the
cluster of docker-compose.yml; it expects the brokers registered and reachable
from the host. It

  1. creates a topic with one partition, replication factor 3 and
     min.insync.replicas=2,
  2. starts a producer (acks=all) writing numbered records and a consumer
     reading them, and a ZooKeeper watcher polling /brokers/ids, /controller and
     the partition's state znode,
  3. breaks the leader's container: `docker kill`, `docker pause` (longer than
     the ZooKeeper session timeout) or `docker network disconnect`,
  4. prints a timeline as things happen (znode gone, new leader and epoch, ISR
     shrunk, producer acknowledged again), then repairs the container
     (`docker start`, `docker unpause`, `docker network connect`) and waits for
     the old leader to rejoin the ISR,
  5. reads the partition back from the start and tallies acknowledged,
     consumed, lost and duplicated records.

With --assert it exits 1 unless: a new leader took over and the producer was
acknowledged again within the failover bound (2 x zookeeper.session.timeout.ms
+ 10 s after the fault), no acknowledged record is missing from the log, and
the old leader is back in an ISR of three. It needs Debian's
python3-confluent-kafka and python3-kazoo.
"""

import argparse
import json
import logging
import os
import re
import subprocess
import sys
import threading
import time
from datetime import datetime

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError


def now():
    return time.time()


def clock(t):
    return datetime.fromtimestamp(t).strftime("%H:%M:%S.%f")[:-3]


class Timeline:
    """Events with wall-clock times, printed as they happen."""

    def __init__(self):
        self.lock = threading.Lock()
        self.events = []  # (time, kind, text)
        self.t0 = None  # the fault

    def rel(self, t):
        if self.t0 is None:
            return ""
        return "T%+8.3fs" % (t - self.t0)

    def add(self, kind, text, t=None):
        t = now() if t is None else t
        with self.lock:
            self.events.append((t, kind, text))
        print("  %s %s  %s" % (clock(t), self.rel(t), text), flush=True)
        return t

    def first(self, kind, after=None):
        with self.lock:
            for t, k, _ in self.events:
                if k == kind and (after is None or t >= after):
                    return t
        return None


class OnceLogger(logging.Handler):
    """librdkafka's log lines, each kind printed once (a broker that answers
    every Fetch with the same protocol error would otherwise print it twice a
    second), with a count at the end."""

    def __init__(self):
        super().__init__()
        self.seen = {}

    def emit(self, record):
        msg = record.getMessage()
        key = re.sub(r"[0-9]+", "N", msg.split("]: ", 1)[-1])
        n = self.seen.get(key, 0)
        self.seen[key] = n + 1
        if n == 0:
            print("  librdkafka: %s (repeats are counted, not printed)" % msg.strip(), file=sys.stderr, flush=True)


ONCE = OnceLogger()
RDKAFKA_LOG = logging.getLogger("librdkafka")
RDKAFKA_LOG.addHandler(ONCE)
RDKAFKA_LOG.propagate = False
RDKAFKA_LOG.setLevel(logging.INFO)


def say(text=""):
    print(text, flush=True)


def die(text):
    print("failover.py: " + text, file=sys.stderr, flush=True)
    sys.exit(2)


# ---------------------------------------------------------------------------
# ZooKeeper.


class Watcher(threading.Thread):
    """Polls the znodes the controller writes and records each change."""

    def __init__(self, zk, topic, timeline, interval=0.1):
        super().__init__(daemon=True)
        self.zk = zk
        self.state_path = "/brokers/topics/%s/partitions/0/state" % topic
        self.tl = timeline
        self.interval = interval
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.brokers = None
        self.controller = None
        self.state = None
        self.states = []  # (time, state) for every state seen

    def snapshot(self):
        with self.lock:
            return self.brokers, self.controller, self.state

    def read(self):
        brokers = sorted(int(b) for b in self.zk.get_children("/brokers/ids"))
        try:
            controller = json.loads(self.zk.get("/controller")[0]).get("brokerid")
        except NoNodeError:
            controller = None
        try:
            state = json.loads(self.zk.get(self.state_path)[0])
        except NoNodeError:
            state = None
        return brokers, controller, state

    def run(self):
        while not self.stop.is_set():
            try:
                brokers, controller, state = self.read()
            except Exception as e:  # a ZooKeeper hiccup: try again
                self.tl.add("zk-error", "ZooKeeper read failed: %s" % e)
                time.sleep(1)
                continue
            with self.lock:
                old_b, old_c, old_s = self.brokers, self.controller, self.state
                self.brokers, self.controller, self.state = brokers, controller, state
                if state != old_s:
                    self.states.append((now(), state))
            if old_b is not None and brokers != old_b:
                for b in sorted(set(old_b) - set(brokers)):
                    self.tl.add("broker-gone-%d" % b, "/brokers/ids/%d gone (its ZooKeeper session ended)" % b)
                for b in sorted(set(brokers) - set(old_b)):
                    self.tl.add("broker-back-%d" % b, "/brokers/ids/%d registered" % b)
            if old_b is not None and controller != old_c:
                self.tl.add("controller", "/controller: %s" % ("none" if controller is None else "broker %d" % controller))
            if old_b is not None and state != old_s and state is not None:
                self.tl.add("state", "state znode: leader %s, leader_epoch %s, isr %s" % (
                    state.get("leader"), state.get("leader_epoch"), state.get("isr")))
            time.sleep(self.interval)


# ---------------------------------------------------------------------------
# Clients.


class Load:
    """A producer (acks=all) of numbered records and a consumer of them."""

    def __init__(self, bootstrap, topic, rate, timeline):
        self.topic = topic
        self.rate = rate
        self.tl = timeline
        self.lock = threading.Lock()
        self.sent = {}  # seq -> time produced
        self.acked = {}  # seq -> (offset, time)
        self.failed = {}  # seq -> error
        self.consumed = 0
        self.stop_producing = threading.Event()
        self.stop_consuming = threading.Event()
        self.producer = Producer(client_config({
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": False,
            "linger.ms": 5,
            "retry.backoff.ms": 100,
            "message.timeout.ms": 90000,
            "topic.metadata.refresh.interval.ms": 2000,
            "socket.connection.setup.timeout.ms": 3000,
            "logger": RDKAFKA_LOG,
        }))
        self.consumer = Consumer(client_config({
            "bootstrap.servers": bootstrap,
            "group.id": "failover-demo-" + topic,
            "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 2000,
            "socket.connection.setup.timeout.ms": 3000,
            "logger": RDKAFKA_LOG,
        }))
        self.threads = [
            threading.Thread(target=self.produce, daemon=True),
            threading.Thread(target=self.consume, daemon=True),
        ]

    def start(self):
        for t in self.threads:
            t.start()

    def delivered(self, err, msg):
        seq = int(msg.value())
        t = now()
        with self.lock:
            if err is None:
                self.acked[seq] = (msg.offset(), t)
            else:
                self.failed[seq] = str(err)

    def produce(self):
        seq = 0
        gap = 1.0 / self.rate
        next_at = now()
        while not self.stop_producing.is_set():
            with self.lock:
                self.sent[seq] = now()
            while True:
                try:
                    self.producer.produce(self.topic, value=b"%d" % seq, partition=0, on_delivery=self.delivered)
                    break
                except BufferError:
                    self.producer.poll(0.1)
            seq += 1
            self.producer.poll(0)
            next_at += gap
            delay = next_at - now()
            if delay > 0:
                self.producer.poll(delay)
            else:
                next_at = now()

    def consume(self):
        self.consumer.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])
        while not self.stop_consuming.is_set():
            msg = self.consumer.poll(0.2)
            if msg is None or msg.error():
                continue
            with self.lock:
                self.consumed += 1
        self.consumer.close()

    def counts(self):
        with self.lock:
            return len(self.sent), len(self.acked), len(self.failed), self.consumed

    def first_ack_of_record_sent_after(self, t):
        """The first acknowledgement of a record produced at or after t: only a
        leader elected after the fault can have given it."""
        with self.lock:
            times = [at for seq, (_, at) in self.acked.items() if self.sent.get(seq, 0) >= t]
        return min(times) if times else None

    def finish(self, timeout):
        self.stop_producing.set()
        self.threads[0].join()
        left = self.producer.flush(timeout)
        self.stop_consuming.set()
        self.threads[1].join(10)
        return left


def client_config(conf):
    """conf plus the librdkafka properties (key=value lines, # comments) of the
    file named by KAFKAZK_CLIENT_CONFIG, e.g. security.protocol, sasl.* and
    ssl.*: the same demo then runs over a secured cluster (docker/lib.sh sets
    it for docker-compose.secure.yml)."""
    path = os.environ.get("KAFKAZK_CLIENT_CONFIG")
    if not path:
        return conf
    out = dict(conf)
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line[0] in "#!" or "=" not in line:
                continue
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip()
    return out


def read_back(bootstrap, topic, timeout):
    """Every record of partition 0 below the high watermark: [(offset, seq)]."""
    c = Consumer(client_config({
        "bootstrap.servers": bootstrap,
        "group.id": "failover-readback-" + topic,
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "logger": RDKAFKA_LOG,
    }))
    deadline = now() + timeout
    records = []
    try:
        while True:
            try:
                low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)
                break
            except KafkaException as e:
                if now() > deadline:
                    raise RuntimeError("no watermarks for %s: %s" % (topic, e))
                time.sleep(0.5)
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        pos = low
        while pos < high:
            if now() > deadline:
                raise RuntimeError("read back stopped at offset %d of %d" % (pos, high))
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    if msg.offset() >= high:
                        break
                    continue
                continue
            records.append((msg.offset(), int(msg.value())))
            pos = msg.offset() + 1
        return records, low, high
    finally:
        c.close()


# ---------------------------------------------------------------------------
# Docker.


class Verdict:
    """The partition read back, compared with what the load saw acknowledged."""

    def __init__(self, load, bootstrap, topic, timeout=120):
        try:
            self.records, self.low, self.high = read_back(bootstrap, topic, timeout)
            self.error = None
        except Exception as e:  # noqa: BLE001 - reported as a failed check
            self.records, self.low, self.high = [], -1, -1
            self.error = str(e)
        seen = {}
        for off, seq in self.records:
            seen.setdefault(seq, []).append(off)
        with load.lock:
            self.acked_at = dict(load.acked)  # seq -> (offset, time)
        self.lost = sorted(set(self.acked_at) - set(seen))
        self.dups = sorted(q for q, offs in seen.items() if len(offs) > 1)
        # An acknowledged record read back at another offset than the one acknowledged.
        self.moved = sorted(q for q in set(self.acked_at) & set(seen) if self.acked_at[q][0] not in seen[q])


def say_timeline(tl, title):
    """Prints the timeline's events but the watcher's own ZooKeeper errors."""
    say("")
    say("== timeline (%s)" % title)
    for t, kind, text in sorted(tl.events):
        if kind != "zk-error":
            say("  %s %s  %s" % (clock(t), tl.rel(t), text))


def say_tally(load, left, v):
    """Prints the counts every failover run reports."""
    sent, acked, failed, consumed_live = load.counts()
    say("")
    say("== tally")
    say("  produced             %6d" % sent)
    say("  acknowledged         %6d" % acked)
    say("  not acknowledged     %6d  (delivery failed or still unsent: %d)" % (failed, left))
    say("  consumed (live)      %6d" % consumed_live)
    say("  in the log           %6d  (offsets %d..%d)" % (len(v.records), v.low, v.high - 1))
    say("  lost (acked, absent) %6d%s" % (len(v.lost), "  e.g. %s" % v.lost[:10] if v.lost else ""))
    say("  duplicated           %6d%s" % (len(v.dups), "  e.g. %s" % v.dups[:10] if v.dups else ""))


def load_checks(check, load, v):
    """The checks every failover run makes of the records."""
    acked = load.counts()[1]
    check(v.error is None, "the partition reads back to its high watermark")
    check(acked > 0 and not v.lost, "no acknowledged record lost (%d acknowledged, %d lost)" % (acked, len(v.lost)))
    check(not v.moved, "every acknowledged record at the offset it was acknowledged at")


def finish(a, checks, result, load, v):
    """Adds the counts and checks to result, writes it to --result, prints
    the summary and exits 1 with --check if a check failed."""
    sent, acked, failed, consumed_live = load.counts()
    result.update({
        "produced": sent, "acknowledged": acked, "not_acknowledged": failed, "consumed_live": consumed_live,
        "in_log": len(v.records), "lost": len(v.lost), "duplicated": len(v.dups), "moved": len(v.moved),
        "checks": [{"ok": ok, "check": text} for ok, text in checks],
    })
    if a.result:
        with open(a.result, "w") as f:
            json.dump(result, f, indent=1)
    failed_checks = [text for ok, text in checks if not ok]
    say("")
    say("%d passed, %d failed" % (len(checks) - len(failed_checks), len(failed_checks)))
    if a.check and failed_checks:
        sys.exit(1)


def docker(*args, check=True):
    r = subprocess.run(["docker", *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError("docker %s: %s" % (" ".join(args), r.stderr.strip()))
    return r.stdout.strip()


class Fault:
    def __init__(self, kind, cid, network):
        self.kind = kind
        self.cid = cid
        self.network = network
        self.ip = None
        self.aliases = []

    def inject(self):
        if self.kind == "kill":
            docker("kill", self.cid)
            return "docker kill (SIGKILL)"
        if self.kind == "pause":
            docker("pause", self.cid)
            return "docker pause (cgroup freezer)"
        nets = json.loads(docker("inspect", "-f", "{{json .NetworkSettings.Networks}}", self.cid))
        ep = nets[self.network]
        self.ip = (ep.get("IPAMConfig") or {}).get("IPv4Address") or ep.get("IPAddress")
        self.aliases = [a for a in (ep.get("Aliases") or []) if a]
        docker("network", "disconnect", self.network, self.cid)
        return "docker network disconnect %s (was %s)" % (self.network, self.ip)

    def repair(self):
        if self.kind == "kill":
            docker("start", self.cid)
            return "docker start"
        if self.kind == "pause":
            docker("unpause", self.cid)
            return "docker unpause"
        args = ["network", "connect"]
        if self.ip:
            args += ["--ip", self.ip]
        for a in self.aliases:
            args += ["--alias", a]
        docker(*args, self.network, self.cid)
        return "docker network connect %s (%s)" % (self.network, self.ip)


# ---------------------------------------------------------------------------


def wait_for(what, timeout, fn, interval=0.1):
    deadline = now() + timeout
    while now() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(interval)
    return None


def partition_metadata(admin, topic, timeout=30):
    """Partition 0 of topic as a broker's Metadata answer shows it, once it
    has a leader: the state znode is written before the controller's
    UpdateMetadata reaches every broker, so a broker asked a moment after
    may not know the partition yet. None if none did within timeout."""
    def get():
        try:
            t = admin.list_topics(topic, timeout=10).topics.get(topic)
        except KafkaException:
            return None
        p = t.partitions.get(0) if t is not None and t.error is None else None
        return p if p is not None and p.leader >= 0 else None
    return wait_for("metadata", timeout, get, 0.2)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--zookeeper", required=True, help="host:port of ZooKeeper as seen from here")
    ap.add_argument("--topic", default="failover-%d" % int(now()))
    ap.add_argument("--fault", choices=["kill", "pause", "partition"], default="kill")
    ap.add_argument("--container", action="append", default=[], metavar="ID=CONTAINER",
                    help="broker id and its container (one per broker)")
    ap.add_argument("--network", help="the compose network (for --fault partition)")
    ap.add_argument("--session-timeout-ms", type=int, default=6000)
    ap.add_argument("--brokers", type=int, default=3)
    ap.add_argument("--rate", type=int, default=50, help="records produced per second")
    ap.add_argument("--assert", dest="check", action="store_true", help="exit 1 when a check fails")
    ap.add_argument("--result", help="write the tally and timings as JSON here")
    a = ap.parse_args()

    logging.basicConfig(level=logging.ERROR)
    containers = {}
    for kv in a.container:
        k, _, v = kv.partition("=")
        containers[int(k)] = v
    session = a.session_timeout_ms / 1000.0
    bound = 2 * session + 10
    outage = max(3 * session, 15)  # how long a pause or a partition lasts
    tl = Timeline()
    checks = []  # (ok, text)

    def check(ok, text):
        checks.append((bool(ok), text))
        say("  %s %s" % ("ok  " if ok else "FAIL", text))

    zk = KazooClient(hosts=a.zookeeper, timeout=10)
    zk.start(timeout=30)

    say("== cluster")
    ids = wait_for("brokers", 60, lambda: len(zk.get_children("/brokers/ids")) >= a.brokers and zk.get_children("/brokers/ids"))
    if not ids:
        die("fewer than %d brokers registered in ZooKeeper after 60s" % a.brokers)
    say("  brokers registered: %s; controller: %s" % (
        sorted(int(i) for i in ids), json.loads(zk.get("/controller")[0]).get("brokerid")))

    say("== topic %s: 1 partition, replication factor %d, min.insync.replicas=2" % (a.topic, a.brokers))
    admin = AdminClient(client_config({"bootstrap.servers": a.bootstrap, "logger": RDKAFKA_LOG}))
    fut = admin.create_topics([NewTopic(a.topic, 1, a.brokers, config={"min.insync.replicas": "2"})],
                              operation_timeout=30)[a.topic]
    try:
        fut.result(60)
    except KafkaException as e:
        die("CreateTopics %s: %s" % (a.topic, e))
    state_path = "/brokers/topics/%s/partitions/0/state" % a.topic

    def full_isr():
        try:
            s = json.loads(zk.get(state_path)[0])
        except NoNodeError:
            return None
        return s if len(s.get("isr", [])) == a.brokers and s.get("leader", -1) >= 0 else None

    state = wait_for("isr", 60, full_isr, 0.2)
    if not state:
        try:
            got = zk.get(state_path)[0].decode()
        except NoNodeError:
            got = "(no state znode)"
        die("partition 0 of %s has no leader with an ISR of %d after 60s: %s" % (a.topic, a.brokers, got))
    assignment = json.loads(zk.get("/brokers/topics/" + a.topic)[0]).get("partitions", {}).get("0")
    leader, epoch0 = state["leader"], state["leader_epoch"]
    say("  replicas %s, leader %d, leader_epoch %d, isr %s" % (assignment, leader, epoch0, state["isr"]))
    md = partition_metadata(admin, a.topic)
    if md is None:
        die("no broker's Metadata shows a leader for partition 0 of %s after 30s" % a.topic)
    say("  Metadata from the brokers: leader %d, replicas %s, isr %s" % (md.leader, md.replicas, md.isrs))
    if leader not in containers:
        die("no container given for broker %d (have %s)" % (leader, sorted(containers)))

    say("== producing (acks=all, %d records/s) and consuming" % a.rate)
    load = Load(a.bootstrap, a.topic, a.rate, tl)
    watcher = Watcher(zk, a.topic, tl)
    watcher.start()
    load.start()
    steady = wait_for("acks", 30, lambda: load.counts()[1] >= a.rate * 2, 0.2)
    sent, acked, failed, consumed = load.counts()
    say("  sent %d, acknowledged %d, failed %d, consumed %d" % (sent, acked, failed, consumed))
    if not steady:
        check(False, "the producer is acknowledged before the fault (%d of %d records in 30s)" % (acked, sent))
        load.finish(5)
        watcher.stop.set()
        say("")
        say("== stopped: with no acknowledged records before the fault there is no failover to show")
        say("  state znode: %s" % json.dumps(watcher.snapshot()[2]))
        say("  librdkafka said (kinds, count): %s" % sorted(ONCE.seen.items(), key=lambda kv: -kv[1])[:5])
        say("")
        say("0 passed, 1 failed")
        sys.exit(1)

    fault = Fault(a.fault, containers[leader], a.network)
    say("== fault: broker %d (the leader) - %s" % (leader, a.fault))
    say("  (ZooKeeper session timeout %.1fs; failover bound %.1fs)" % (session, bound))
    t_fault = now()
    tl.t0 = t_fault
    how = fault.inject()
    tl.add("fault", "broker %d: %s" % (leader, how), t_fault)

    def new_leader():
        _, _, s = watcher.snapshot()
        if s and s.get("leader", -1) not in (-1, leader) and s.get("leader_epoch", -1) > epoch0:
            return s
        return None

    def acked_again():
        t = load.first_ack_of_record_sent_after(t_fault)
        return t

    t_gone = wait_for("gone", bound + 20, lambda: tl.first("broker-gone-%d" % leader, t_fault))
    s_new = wait_for("leader", max(1, t_fault + bound + 20 - now()), new_leader)
    if s_new:
        tl.add("new-leader", "new leader: broker %d, leader_epoch %d (was broker %d, leader_epoch %d)" % (
            s_new["leader"], s_new["leader_epoch"], leader, epoch0))

    def shrunk():
        with watcher.lock:
            for t, s in watcher.states:
                if t >= t_fault and s and leader not in s.get("isr", []):
                    return t, s
        return None

    got = wait_for("shrunk", max(1, t_fault + bound + 20 - now()), shrunk)
    if got:
        tl.add("isr-shrunk", "ISR shrunk to %s (broker %d out)" % (got[1]["isr"], leader), got[0])
    t_acked = wait_for("acked", max(1, t_fault + bound + 20 - now()), acked_again)
    if t_acked:
        tl.add("acked-again", "producer acknowledged again (first ack of a record sent after the fault)", t_acked)
    sent, acked, failed, consumed = load.counts()
    say("  sent %d, acknowledged %d, failed %d, consumed %d" % (sent, acked, failed, consumed))

    if a.fault != "kill":
        rest = t_fault + outage - now()
        if rest > 0:
            say("  (keeping the fault for %.0fs more: %.0fs in all)" % (rest, outage))
            time.sleep(rest)
    else:
        time.sleep(2)

    say("== repair: broker %d" % leader)
    t_repair = now()
    tl.add("repair", "broker %d: %s" % (leader, fault.repair()), t_repair)

    def left_isr():
        with watcher.lock:
            return any(s and leader not in s.get("isr", []) for t, s in watcher.states if t >= t_fault)

    def rejoined():
        b, _, s = watcher.snapshot()
        if left_isr() and b and leader in b and s and leader in s.get("isr", []) and len(s.get("isr", [])) == a.brokers:
            return s
        return None

    rejoin_timeout = 60 + 2 * session
    s_back = wait_for("rejoin", rejoin_timeout, rejoined, 0.2)
    if s_back:
        tl.add("rejoined", "broker %d back in the ISR: leader %d, leader_epoch %d, isr %s" % (
            leader, s_back["leader"], s_back["leader_epoch"], s_back["isr"]))
    time.sleep(2)

    say("== stopping the producer and reading the partition back")
    left = load.finish(120)
    watcher.stop.set()
    v = Verdict(load, a.bootstrap, a.topic)
    md = partition_metadata(admin, a.topic)
    b_final, c_final, s_final = watcher.read()
    zk.stop()

    say_timeline(tl, "T = the fault")
    say_tally(load, left, v)
    say("  acked at one offset, found at another %d" % len(v.moved))
    if v.error:
        say("  read back failed: %s" % v.error)
    say("  final: brokers %s, controller %s, leader %s, leader_epoch %s, isr %s" % (
        b_final, c_final, (s_final or {}).get("leader"), (s_final or {}).get("leader_epoch"), (s_final or {}).get("isr")))
    if md is not None:
        say("  Metadata from the brokers: leader %d, replicas %s, isr %s" % (md.leader, md.replicas, md.isrs))
    if ONCE.seen:
        say("  librdkafka log lines (kinds, count): %d kinds, %d lines" % (len(ONCE.seen), sum(ONCE.seen.values())))

    say("")
    say("== checks")
    failover_s = (t_acked - t_fault) if t_acked else None
    check(s_new is not None, "a new leader (not broker %d) with a higher leader_epoch within %.0fs" % (leader, bound + 20))
    check(failover_s is not None and failover_s <= bound,
          "producer acknowledged by the new leader within %.1fs of the fault (took %s)" % (
              bound, "%.1fs" % failover_s if failover_s is not None else "never"))
    load_checks(check, load, v)
    check(s_back is not None, "broker %d left the ISR, and was back in an ISR of %d within %.0fs of the repair" % (
        leader, a.brokers, rejoin_timeout))
    check(md is not None, "the brokers' Metadata shows a leader for the partition after the repair")

    result = {
        "topic": a.topic, "fault": a.fault, "old_leader": leader, "old_epoch": epoch0,
        "new_leader": s_new and s_new["leader"], "new_epoch": s_new and s_new["leader_epoch"],
        "session_timeout_s": session, "bound_s": bound,
        "znode_gone_s": t_gone and t_gone - t_fault, "failover_s": failover_s,
        "rejoined_s": s_back and (tl.first("rejoined") - t_repair),
        "timeline": [{"t": round(t - t_fault, 3), "event": text} for t, _, text in sorted(tl.events)],
    }
    finish(a, checks, result, load, v)


if __name__ == "__main__":
    main()
