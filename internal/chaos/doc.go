// Package chaos is the fault-injection harness of issue 6: a workload that
// records every write attempt and every consumer poll, a nemesis that kills,
// pauses, partitions and isolates broker processes and cuts ZooKeeper, a
// checker implementing reliability.md §6, the figures of §6.3 and a
// Markdown report. cmd/chaos runs the whole matrix; test/chaos_test.go runs
// a short subset.
//
// Cluster shape: three broker processes on loopback (internal/harness
// Processes, as test/'s brokers are), each behind a Kafka
// Proxy that is its advertised listener (so clients and the other brokers
// reach it only through the proxy) and a ZooKeeper Proxy that is its
// zookeeper.connect. A Kafka proxy names each connection's source by the
// client id of its first request ("broker-<id>" for the inter-broker
// client), so a broker can be cut from its peers while clients and
// ZooKeeper still reach it. A cut holds bytes rather than dropping or
// resetting connections, as an iptables DROP does.
//
// Issue 17 (faults.go, diskfull.go, groupworkload.go, groupcheck.go): the
// workload writes Partitions partitions from Producers idempotent kgo
// producers beside the raw writers, and a consumer group of GroupMembers
// members commits synchronously after each poll; the checker adds
// commit-backwards, lost-commit and ownership after the final rebalance.
// The scenarios add several brokers down at once (up to all three, in
// varying orders), a lost unflushed tail on the last ISR member (Recorded:
// reported, not a failure), ZooKeeper itself killed (on a ZooKeeper of the
// scenario's own, ZKServer), clients cut off, slow links (Proxy.Slow:
// delay and rate, with ISR shrinks and expands read from the brokers'
// /metrics), Kafka's epoch sequences on two brokers, a broker's wall clock
// offset by the KAFKAZK_TEST_CLOCK_OFFSET_MS test hook, and a full data
// dir on a tmpfs. Scenario.Allowed names the anomalies a scenario may show
// under §5 (loss after unclean elections at acks=1); Profile.Expect names
// a negative control's anomaly (NONIDEM: duplicate). A duplicate whose
// later copy is under a higher producer epoch of the same producer id,
// after the kgo producer reset its id (History.Resets, from its log) on an
// answer from a broker the ZooKeeper samples did not show as leader, is
// counted apart (duplicate-epoch-bump) and is not a failure: a deposed
// leader answers OUT_OF_ORDER_SEQUENCE_NUMBER from its divergent log, the
// producer bumps its epoch and resends from sequence 0 (as Kafka's own
// producer does), and brokers deduplicate per producer id and epoch only.
// Likewise a consumer poll that goes back to exactly where kgo reset the
// consumer after reporting data loss (History.Rewinds, kgo.ErrDataLoss) is
// counted apart (consumer-rewind): kgo's answer to a broker's reply, such
// as a deposed leader's OFFSET_OUT_OF_RANGE after kgo accepted that
// broker's stale metadata; the records it reads again are checked as any.
//
// Transactions (issue 18): a Scenario with Txn set (txn-random-mix, the
// random SAFE mix) also runs TxnWorkload: kgo transactional producers
// whose transactions write several values across partitions and commit or
// abort at random, and a consume-transform-produce loop (kgo's
// GroupTransactSession) whose input offsets are committed in its
// transactions, with a read_committed consumer and require_stable samples
// of the group's offsets. The one Check also runs the transactional checks
// (txncheck.go): no aborted read (G1a), no precommitted read, committed
// transactions wholly visible or wholly absent (absent and acknowledged is
// lost), no duplicate, offsets applied exactly when their transaction
// commits. The scenario fails with an error on a broker that does not
// advertise EndTxn.
//
// Times in a History are monotonic durations since the run started. The
// final read stops every broker and reads each replica's segment files,
// replication-offset-checkpoint and leader-epoch-checkpoint.
//
// The compose backend (compose.go, issue 17 part 5) runs the same
// workload, sampler, checker and report against the docker-compose
// cluster: ConnectCompose names its brokers by their published host ports,
// Docker drives reliability.md §5's docker column (docker kill, stop,
// pause, network disconnect; iptables and tc in a container's network
// namespace through nsenter from the host, as the FROM scratch broker image
// has neither), and RunCompose reads every replica's files copied out with
// docker cp after a docker stop. cmd/chaos compose runs it for make
// chaos-compose, make compose-test and make demo.
//
// The soak (soak.go, make soak) is the Bufstream-style mix: every 10-20 s
// a fresh random subset of fault packages, healed between windows.
//
// The package writes nothing to stdout: callers pass a Logf.
package chaos
