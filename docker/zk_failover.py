#!/usr/bin/python3
"""zk_failover.py: kill one node of a three-node ZooKeeper ensemble while
producing, and show that the brokers carry on.

Run by scripts/demo-failover.sh --kill-zookeeper (and so by
scripts/compose-test.sh's zk-kill variant) against the cluster of
docker-compose.yml with docker-compose.zk3.yml over it: ZooKeeper servers
zookeeper, zookeeper-2 and zookeeper-3, each broker's zookeeper.connect naming
all three. It

  1. asks each ZooKeeper server `srvr` for its mode and picks the ensemble
     leader (the node whose loss costs an election; --victim chooses another),
  2. creates a topic with one partition, replication factor 3 and
     min.insync.replicas=2, and starts a producer (acks=all) of numbered
     records, a consumer, a watcher of the brokers' znodes (its ZooKeeper
     client knows all three servers) and a poller of every server's mode,
  3. `docker kill`s that ZooKeeper node and prints a timeline as things happen
     (the node silent, a new ensemble leader, the producer acknowledged again),
  4. during the outage creates a second topic (a controller write to ZooKeeper,
     which only a quorum of two can take),
  5. keeps the node down for 2 x zookeeper.session.timeout.ms (a broker whose
     session ended would show by then), then `docker start`s it and waits until
     it answers as follower or leader and serves the three brokers' znodes,
  6. reads the partition back and tallies acknowledged, consumed, lost and
     duplicated records.

With --assert it exits 1 unless: acknowledgements went on (a record produced
after the kill acknowledged, and no gap between acknowledgements, within
zookeeper.session.timeout.ms + 5 s), every broker stayed registered with the
ZooKeeper session it had before (same ephemeralOwner of /brokers/ids/<id>), the
partition kept a leader and an ISR of three, the topic created during the
outage got a leader and a full ISR, no acknowledged record is missing, and the
restarted node rejoined the ensemble. It reuses failover.py's producer,
consumer and znode watcher; it needs Debian's python3-confluent-kafka and
python3-kazoo.
"""

import argparse
import json
import logging
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from failover import (ONCE, RDKAFKA_LOG, client_config, Load, Timeline, Verdict, Watcher, clock,  # noqa: E402
                      die, docker, finish, load_checks, now, say, say_tally, wait_for)

from confluent_kafka import KafkaException  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from kazoo.client import KazooClient  # noqa: E402
from kazoo.exceptions import NoNodeError  # noqa: E402


def four_letter(hostport, cmd, timeout=1.0):
    """A ZooKeeper four-letter word; None when the server does not answer."""
    host, _, port = hostport.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(cmd.encode())
            chunks = []
            while True:
                b = s.recv(4096)
                if not b:
                    break
                chunks.append(b)
        return b"".join(chunks).decode(errors="replace")
    except OSError:
        return None


def mode(hostport, timeout=1.0):
    """leader, follower, observer, standalone; "not serving" (up, no quorum);
    "down" (no answer)."""
    out = four_letter(hostport, "srvr", timeout)
    if out is None or out == "":
        return "down"
    for line in out.splitlines():
        if line.startswith("Mode: "):
            return line[6:].strip()
    return "not serving"


class Ensemble(threading.Thread):
    """Polls every server's mode and records each change."""

    def __init__(self, nodes, timeline, interval=0.25):
        super().__init__(daemon=True)
        self.nodes = nodes  # [(name, hostport)]
        self.tl = timeline
        self.interval = interval
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.modes = {name: mode(hp) for name, hp in nodes}
        self.changes = []  # (time, name, old, new)

    def snapshot(self):
        with self.lock:
            return dict(self.modes)

    def leader(self):
        for name, m in self.snapshot().items():
            if m == "leader":
                return name
        return None

    def run(self):
        # One poller per server, so that a dead one's timeouts delay no other.
        pollers = [threading.Thread(target=self.poll, args=n, daemon=True) for n in self.nodes]
        for p in pollers:
            p.start()
        for p in pollers:
            p.join()

    def poll(self, name, hp):
        while not self.stop.is_set():
            m = mode(hp, timeout=0.5)
            t = now()
            with self.lock:
                old = self.modes.get(name)
                self.modes[name] = m
                if m != old:
                    self.changes.append((t, name, old, m))
            if m != old:
                self.tl.add("zk-mode", "ZooKeeper %s: %s -> %s" % (name, old, m), t)
            time.sleep(self.interval)


def owners(zk):
    """{broker id: ephemeralOwner (session id) of /brokers/ids/<id>}."""
    out = {}
    for b in zk.get_children("/brokers/ids"):
        try:
            out[int(b)] = zk.exists("/brokers/ids/" + b).ephemeralOwner
        except AttributeError:  # gone between the two reads
            pass
    return out


def create_topic(admin, topic, rf):
    fut = admin.create_topics([NewTopic(topic, 1, rf, config={"min.insync.replicas": "2"})],
                              operation_timeout=30)[topic]
    fut.result(60)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--zk-node", action="append", default=[], metavar="NAME=HOST:PORT=CONTAINER",
                    help="a ZooKeeper server: compose service, client address from here, container (one per server)")
    ap.add_argument("--victim", help="the ZooKeeper server to kill (default: the ensemble leader)")
    ap.add_argument("--topic", default="zk-kill-%d" % int(now()))
    ap.add_argument("--session-timeout-ms", type=int, default=6000)
    ap.add_argument("--brokers", type=int, default=3)
    ap.add_argument("--rate", type=int, default=50, help="records produced per second")
    ap.add_argument("--assert", dest="check", action="store_true", help="exit 1 when a check fails")
    ap.add_argument("--result", help="write the tally and timings as JSON here")
    a = ap.parse_args()

    logging.basicConfig(level=logging.ERROR)
    nodes, containers = [], {}
    for spec in a.zk_node:
        parts = spec.split("=")
        if len(parts) != 3:
            die("--zk-node %r: want NAME=HOST:PORT=CONTAINER" % spec)
        nodes.append((parts[0], parts[1]))
        containers[parts[0]] = parts[2]
    if len(nodes) < 3:
        die("need the three ZooKeeper servers (--zk-node), got %d" % len(nodes))
    addr = dict(nodes)
    session = a.session_timeout_ms / 1000.0
    bound = session + 5  # acknowledgements may pause no longer than this
    outage = max(2 * session, 10)  # how long the node stays down, at least
    tl = Timeline()
    checks = []

    def check(ok, text):
        checks.append((bool(ok), text))
        say("  %s %s" % ("ok  " if ok else "FAIL", text))

    say("== ZooKeeper ensemble")
    ens = Ensemble(nodes, tl)
    for name, hp in nodes:
        out = four_letter(hp, "srvr") or ""
        zxid = next((ln.split(": ", 1)[1] for ln in out.splitlines() if ln.startswith("Zxid: ")), "?")
        say("  %-12s %-22s mode %-10s zxid %s" % (name, hp, ens.modes[name], zxid))
    leader0 = ens.leader()
    if leader0 is None:
        die("no ZooKeeper server says Mode: leader: %s" % ens.snapshot())
    victim = a.victim or leader0
    if victim not in addr:
        die("--victim %s is none of %s" % (victim, sorted(addr)))
    others = [(n, hp) for n, hp in nodes if n != victim]

    zk = KazooClient(hosts=",".join(hp for _, hp in nodes), timeout=10)
    zk.start(timeout=30)
    ids = wait_for("brokers", 60, lambda: len(zk.get_children("/brokers/ids")) >= a.brokers)
    if not ids:
        die("fewer than %d brokers registered in ZooKeeper after 60s" % a.brokers)
    owners0 = owners(zk)
    controller0 = json.loads(zk.get("/controller")[0]).get("brokerid")
    say("  brokers registered: %s; controller: broker %s" % (
        ", ".join("%d (session 0x%x)" % (b, s) for b, s in sorted(owners0.items())), controller0))

    say("== topic %s: 1 partition, replication factor %d, min.insync.replicas=2" % (a.topic, a.brokers))
    admin = AdminClient(client_config({"bootstrap.servers": a.bootstrap, "logger": RDKAFKA_LOG}))
    try:
        create_topic(admin, a.topic, a.brokers)
    except KafkaException as e:
        die("CreateTopics %s: %s" % (a.topic, e))

    def full_isr(topic):
        try:
            s = json.loads(zk.get("/brokers/topics/%s/partitions/0/state" % topic)[0])
        except NoNodeError:
            return None
        return s if len(s.get("isr", [])) == a.brokers and s.get("leader", -1) >= 0 else None

    state0 = wait_for("isr", 60, lambda: full_isr(a.topic), 0.2)
    if not state0:
        die("partition 0 of %s has no leader with an ISR of %d after 60s" % (a.topic, a.brokers))
    say("  leader %d, leader_epoch %d, isr %s" % (state0["leader"], state0["leader_epoch"], state0["isr"]))

    say("== producing (acks=all, %d records/s) and consuming" % a.rate)
    load = Load(a.bootstrap, a.topic, a.rate, tl)
    watcher = Watcher(zk, a.topic, tl)
    watcher.start()
    load.start()
    steady = wait_for("acks", 30, lambda: load.counts()[1] >= a.rate * 2, 0.2)
    sent, acked, failed, consumed = load.counts()
    say("  sent %d, acknowledged %d, failed %d, consumed %d" % (sent, acked, failed, consumed))
    if not steady:
        load.finish(5)
        die("the producer is not acknowledged before the fault (%d of %d records in 30s)" % (acked, sent))
    ens.start()

    say("== fault: ZooKeeper %s (%s) - docker kill" % (victim, ens.snapshot()[victim]))
    say("  (ZooKeeper session timeout %.1fs; acknowledgements may pause %.1fs at most; node down >= %.0fs)" % (
        session, bound, outage))
    t_fault = now()
    tl.t0 = t_fault
    tl.add("fault", "ZooKeeper %s: docker kill (SIGKILL)" % victim, t_fault)
    docker("kill", containers[victim])

    # A controller write to ZooKeeper while the ensemble elects a new leader
    # (or, when a follower was killed, while some brokers' sessions move):
    # CreateTopics, which the brokers must retry until the quorum serves again.
    topic2 = a.topic + "-during"
    created = {}

    def create_during():
        t = now()
        try:
            create_topic(admin, topic2, a.brokers)
            s = wait_for("isr2", 30, lambda: full_isr(topic2), 0.2)
            created["state"] = s
            created["text"] = ("topic %s created during the outage: leader %d, isr %s (%.1fs after CreateTopics)" % (
                topic2, s["leader"], s["isr"], now() - t)) if s else "topic %s: no full ISR in 30s" % topic2
        except Exception as e:  # noqa: BLE001 - a failed check
            created["text"] = "topic %s during the outage: %s" % (topic2, e)
        tl.add("created", created["text"])

    creator = threading.Thread(target=create_during, daemon=True)
    creator.start()

    def serving_pair():
        m = ens.snapshot()
        got = sorted(m[n] for n, _ in others)
        return got == ["follower", "leader"] and ens.leader()

    zk_leader = wait_for("zk-leader", 30, serving_pair)
    if zk_leader:
        tl.add("zk-quorum", "ensemble serving with %s as leader (%s)" % (
            zk_leader, "a new election" if zk_leader != leader0 else "no election needed"))
    t_acked = wait_for("acked", bound + 10, lambda: load.first_ack_of_record_sent_after(t_fault))
    if t_acked:
        tl.add("acked", "producer acknowledged (first ack of a record sent after the kill)", t_acked)

    rest = t_fault + outage - now()
    if rest > 0:
        say("  (keeping %s down %.0fs more: %.0fs in all, past the session timeout)" % (victim, rest, outage))
        time.sleep(rest)
    creator.join(max(1, t_fault + 90 - now()))
    s2 = created.get("state")
    owners_outage = owners(zk)
    sent, acked, failed, consumed = load.counts()
    say("  sent %d, acknowledged %d, failed %d, consumed %d" % (sent, acked, failed, consumed))

    say("== repair: ZooKeeper %s" % victim)
    t_repair = now()
    docker("start", containers[victim])
    tl.add("repair", "ZooKeeper %s: docker start" % victim, t_repair)
    rejoin_timeout = 60
    back = wait_for("rejoin", rejoin_timeout, lambda: ens.snapshot()[victim] in ("follower", "leader") and
                    ens.snapshot()[victim], 0.2)
    if back:
        tl.add("rejoined", "ZooKeeper %s rejoined the ensemble as %s" % (victim, back))
    # The rejoined node serves the brokers' znodes (it synced from the leader).
    synced = None
    if back:
        z1 = KazooClient(hosts=addr[victim], timeout=10, read_only=False)
        try:
            z1.start(timeout=20)
            synced = sorted(int(b) for b in z1.get_children("/brokers/ids"))
            tl.add("synced", "ZooKeeper %s alone serves /brokers/ids %s" % (victim, synced))
        except Exception as e:  # noqa: BLE001 - reported below
            tl.add("synced", "ZooKeeper %s: reading /brokers/ids failed: %s" % (victim, e))
        finally:
            try:
                z1.stop()
                z1.close()
            except Exception:  # noqa: BLE001
                pass
    time.sleep(2)

    say("== stopping the producer and reading the partition back")
    left = load.finish(120)
    watcher.stop.set()
    ens.stop.set()
    v = Verdict(load, a.bootstrap, a.topic)
    acked_at = v.acked_at
    # The longest pause between acknowledgements from the kill until the
    # producer stopped (the fault, the outage, the restart).
    times = sorted(t for _, t in acked_at.values() if t >= t_fault - 1)
    gaps = [(b - a_, a_) for a_, b in zip(times, times[1:])]
    max_gap, gap_at = max(gaps) if gaps else (None, None)
    owners_end = owners(zk)
    b_final, c_final, s_final = watcher.read()
    with watcher.lock:
        states = [s for t, s in watcher.states if t >= t_fault]
    zk.stop()
    zk.close()
    gone = sorted({kind for _, kind, _ in tl.events if kind.startswith("broker-gone-")})

    say("")
    say("== timeline (T = the kill of ZooKeeper %s)" % victim)
    for t, kind, text in sorted(tl.events):
        if kind != "zk-error":
            say("  %s %s  %s" % (clock(t), tl.rel(t), text))
    errs = [t for t, kind, _ in tl.events if kind == "zk-error"]
    if errs:
        say("  (the watcher's own ZooKeeper reads failed %d times between T%+.1fs and T%+.1fs while its"
            " client moved to another server)" % (len(errs), min(errs) - t_fault, max(errs) - t_fault))

    say_tally(load, left, v)
    say("  longest pause between acknowledgements %s" % (
        "%.2fs (at T%+.1fs)" % (max_gap, gap_at - t_fault) if max_gap is not None else "-"))
    say("  brokers' sessions: before %s; during the outage %s; at the end %s" % tuple(
        "{%s}" % ", ".join("%d: 0x%x" % kv for kv in sorted(o.items())) for o in (owners0, owners_outage, owners_end)))
    say("  final: brokers %s, controller %s (was %s), leader %s, leader_epoch %s, isr %s" % (
        b_final, c_final, controller0, (s_final or {}).get("leader"), (s_final or {}).get("leader_epoch"),
        (s_final or {}).get("isr")))
    say("  ZooKeeper: %s" % ", ".join("%s %s" % kv for kv in sorted(ens.snapshot().items())))
    if v.error:
        say("  read back failed: %s" % v.error)
    if ONCE.seen:
        say("  librdkafka log lines (kinds, count): %d kinds, %d lines" % (len(ONCE.seen), sum(ONCE.seen.values())))

    say("")
    say("== checks")
    acked_s = (t_acked - t_fault) if t_acked else None
    check(zk_leader is not None, "the other two ZooKeeper servers serve as leader and follower within 30s")
    check(acked_s is not None and acked_s <= bound,
          "a record produced after the kill acknowledged within %.1fs (took %s)" % (
              bound, "%.2fs" % acked_s if acked_s is not None else "never"))
    check(max_gap is not None and max_gap <= bound,
          "no pause between acknowledgements longer than %.1fs (longest %s)" % (
              bound, "%.2fs" % max_gap if max_gap is not None else "-"))
    check(not gone and owners_outage == owners0 and owners_end == owners0 and len(owners0) == a.brokers,
          "every broker stayed registered with the ZooKeeper session it had before (%s)" % (
              "gone: %s" % gone if gone else "%d brokers, same sessions" % len(owners_end)
              if owners_end == owners0 else "sessions changed"))
    check(all(s and s.get("leader") == state0["leader"] and len(s.get("isr", [])) == a.brokers for s in states)
          and s_final and len(s_final.get("isr", [])) == a.brokers,
          "partition 0 kept leader %d and an ISR of %d throughout (%d state changes)" % (
              state0["leader"], a.brokers, len(states)))
    check(s2 is not None, "a topic created during the outage has a leader and an ISR of %d" % a.brokers)
    load_checks(check, load, v)
    check(back is not None and synced == sorted(owners0),
          "ZooKeeper %s rejoined (%s) within %ds of docker start and serves brokers %s" % (
              victim, back or "not", rejoin_timeout, synced))

    result = {
        "topic": a.topic, "victim": victim, "zk_leader_before": leader0, "zk_leader_after": zk_leader,
        "session_timeout_s": session, "bound_s": bound, "acked_after_s": acked_s, "max_ack_gap_s": max_gap,
        "rejoined_s": (tl.first("rejoined") - t_repair) if back else None,
        "timeline": [{"t": round(t - t_fault, 3), "event": text} for t, k, text in sorted(tl.events)
                     if k != "zk-error"],
    }
    finish(a, checks, result, load, v)


if __name__ == "__main__":
    main()
