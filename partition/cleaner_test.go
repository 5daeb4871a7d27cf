package partition

// Tests of the log cleaner manager (cleaner.go): which logs it picks, that
// leaders and followers both clean their own logs, the
// cleaner-offset-checkpoint across a restart, the threads' lifecycle and
// log.cleaner.enable.

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/logstore"
)

// kv is one record of kvBatch; a nil value is a tombstone.
type kv struct {
	key, value []byte
}

// kvBatch builds an uncompressed v2 batch of keyed records.
func kvBatch(ts int64, recs ...kv) []byte {
	var data []byte
	for i, r := range recs {
		var body []byte
		body = append(body, 0)
		body = appendVarint(body, 0)
		body = appendVarint(body, int64(i))
		body = appendVarint(body, int64(len(r.key)))
		body = append(body, r.key...)
		if r.value == nil {
			body = appendVarint(body, -1)
		} else {
			body = appendVarint(body, int64(len(r.value)))
			body = append(body, r.value...)
		}
		body = appendVarint(body, 0)
		data = appendVarint(data, int64(len(body)))
		data = append(data, body...)
	}
	b := buildBatch(batchSpec{records: len(recs)})
	b = append(b[:61], data...)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint64(b[27:], uint64(ts))
	binary.BigEndian.PutUint64(b[35:], uint64(ts))
	return recrc(b)
}

// logRecord is a record read back from a log.
type logRecord struct {
	offset int64
	key    string
	value  *string // nil: tombstone
}

// decodeRecords walks uncompressed v2 batches.
func decodeRecords(t *testing.T, b []byte) []logRecord {
	t.Helper()
	var out []logRecord
	for len(b) >= 61 {
		base := int64(binary.BigEndian.Uint64(b[0:]))
		n := 12 + int(binary.BigEndian.Uint32(b[8:]))
		if n > len(b) {
			break // a partial batch at the end of a read
		}
		recs := b[61:n]
		count := int(binary.BigEndian.Uint32(b[57:]))
		for range count {
			l, k := binary.Varint(recs)
			rec := recs[k : k+int(l)]
			recs = recs[k+int(l):]
			rec = rec[1:] // attributes
			_, k = binary.Varint(rec)
			rec = rec[k:]
			delta, k := binary.Varint(rec)
			rec = rec[k:]
			kl, k := binary.Varint(rec)
			rec = rec[k:]
			key := string(rec[:kl])
			rec = rec[kl:]
			vl, k := binary.Varint(rec)
			rec = rec[k:]
			r := logRecord{offset: base + delta, key: key}
			if vl >= 0 {
				v := string(rec[:vl])
				r.value = &v
			}
			out = append(out, r)
		}
		b = b[n:]
	}
	return out
}

// consumeAll reads tp0 from its log start to the HW as a consumer, through
// Manager.Read.
func consumeAll(t *testing.T, m *Manager) []logRecord {
	t.Helper()
	res, err := m.Read(tp0, ReadRequest{FetchOffset: 0, MaxBytes: 1, ReplicaID: -1, CurrentLeaderEpoch: -1})
	if err != nil {
		t.Fatal(err)
	}
	off, hw := res.LogStartOffset, res.HighWatermark
	var out []logRecord
	for off < hw {
		res, err := m.Read(tp0, ReadRequest{FetchOffset: off, MaxBytes: 1 << 20, ReplicaID: -1, CurrentLeaderEpoch: -1})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, decodeRecords(t, res.Records)...)
		next := nextBatchOffset(res.Records)
		if next <= off {
			t.Fatalf("read at %d below hw %d made no progress", off, hw)
		}
		off = next
	}
	return out
}

// nextBatchOffset is the offset after the last whole batch of b.
func nextBatchOffset(b []byte) int64 {
	next := int64(0)
	for len(b) >= 61 {
		n := 12 + int(binary.BigEndian.Uint32(b[8:]))
		if n > len(b) {
			break
		}
		next = int64(binary.BigEndian.Uint64(b[0:])) + int64(binary.BigEndian.Uint32(b[23:])) + 1
		b = b[n:]
	}
	return next
}

// logRecords reads a replica's whole log (a follower's too) from its log
// start to its LEO.
func logRecords(t *testing.T, m *Manager) []logRecord {
	t.Helper()
	r, err := m.get(tp0)
	if err != nil {
		t.Fatal(err)
	}
	var out []logRecord
	for off := r.log.LogStartOffset(); off < r.log.LogEndOffset(); {
		b, err := r.log.AppendRead(nil, off, 1<<20, r.log.LogEndOffset())
		if err != nil {
			t.Fatal(err)
		}
		recs := decodeRecords(t, b)
		out = append(out, recs...)
		next := nextBatchOffset(b)
		if next <= off {
			t.Fatalf("read at %d made no progress", off)
		}
		off = next
	}
	return out
}

// lastValues is the last value per key of recs, tombstoned keys absent.
func lastValues(recs []logRecord) map[string]string {
	out := map[string]string{}
	for _, r := range recs {
		if r.value == nil {
			delete(out, r.key)
		} else {
			out[r.key] = *r.value
		}
	}
	return out
}

func compactConfig() cluster.LogConfig {
	cfg := cluster.DefaultLogConfig()
	cfg.Compact, cfg.Delete, cfg.CleanupPolicy = true, false, "compact"
	cfg.SegmentBytes = 1024
	return cfg
}

// produceKeyed appends n single-record batches over keys k0..k(keys-1),
// value "v<i>", on m as leader; every tombstoneEvery-th record (if > 0)
// is a tombstone instead. It returns the expected last values.
func produceKeyed(t *testing.T, m *Manager, from, n, keys, tombstoneEvery int, acks int16) map[string]string {
	t.Helper()
	want := map[string]string{}
	for i := from; i < from+n; i++ {
		k := fmt.Sprintf("k%d", i%keys)
		rec := kv{key: []byte(k), value: []byte(fmt.Sprintf("v%d", i))}
		if tombstoneEvery > 0 && i%tombstoneEvery == 0 {
			rec.value = nil
		}
		mustAppend(t, m, kvBatch(1000+int64(i), rec), acks)
		if rec.value == nil {
			delete(want, k)
		} else {
			want[k] = string(rec.value)
		}
	}
	return want
}

// cleanAll runs clean passes on m's cleaner until none is due; it returns
// how many ran.
func cleanAll(t *testing.T, m *Manager) int {
	t.Helper()
	om := logstore.NewOffsetMap(1 << 20)
	for n := 0; n < 100; n++ {
		if !m.cleaner.cleanOnce(0, &om) {
			return n
		}
	}
	t.Fatal("the cleaner never ran out of work")
	return 0
}

// checkCompacted checks that recs hold exactly want's last values and
// that below cleanedEnd no key appears twice.
func checkCompacted(t *testing.T, who string, recs []logRecord, want map[string]string, cleanedEnd int64) {
	t.Helper()
	got := lastValues(recs)
	if len(got) != len(want) {
		t.Errorf("%s: %d live keys, want %d", who, len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: key %s = %q, want %q", who, k, got[k], v)
		}
	}
	seen := map[string]int64{}
	for _, r := range recs {
		if r.offset >= cleanedEnd {
			break
		}
		if prev, ok := seen[r.key]; ok {
			t.Errorf("%s: key %s at %d and %d, both below the cleaned end %d", who, r.key, prev, r.offset, cleanedEnd)
		}
		seen[r.key] = r.offset
	}
}

// replicateAll runs fetch rounds on broker 2 until it holds the leader's
// log and HW (catchUp's 20 rounds are too few: a round reads one segment).
func replicateAll(t *testing.T, s *sim) {
	t.Helper()
	for range 500 {
		s.fetch(2)
		l, f := s.status(1), s.status(2)
		if f.LogEndOffset == l.LogEndOffset && f.HighWatermark == l.HighWatermark && l.HighWatermark == l.LogEndOffset {
			return
		}
	}
	t.Fatal("the follower did not catch up")
}

func TestCleanerCleansLeaderAndFollower(t *testing.T) {
	s := newSim(t, 2, compactConfig())
	leader := s.mgr(1)
	const n, keys = 300, 10
	want := produceKeyed(t, leader, 0, n, keys, 0, -1)
	replicateAll(t, s)
	for id := int32(1); id <= 2; id++ {
		m := s.mgr(id)
		before := len(logRecords(t, m))
		if passes := cleanAll(t, m); passes == 0 {
			t.Fatalf("broker %d: no clean pass ran", id)
		}
		end := m.cleaner.checkpoint(tp0)
		recs := logRecords(t, m)
		if len(recs) >= before {
			t.Errorf("broker %d: %d records after cleaning, %d before", id, len(recs), before)
		}
		checkCompacted(t, fmt.Sprintf("broker %d", id), recs, want, end)
	}
	checkCompacted(t, "leader's consumer", consumeAll(t, leader), want, leader.cleaner.checkpoint(tp0))
	// Replication goes on over the cleaned logs.
	mustAppend(t, leader, kvBatch(5000, kv{key: []byte("k0"), value: []byte("new")}), -1)
	want["k0"] = "new"
	replicateAll(t, s)
	checkCompacted(t, "follower after more records", logRecords(t, s.mgr(2)), want, 0)
}

// newCleanerManager makes a single-broker Manager with the cleaner
// configured as cc, leader of tp0 with cfg.
func newCleanerManager(t *testing.T, dir string, clock *fakeClock, cc CleanerConfig, cfg cluster.LogConfig) *Manager {
	t.Helper()
	m, err := NewManager(Config{
		BrokerID: 1, LogDirs: []string{dir},
		HighWatermarkCheckpointInterval: time.Second, RecoveryPointCheckpointInterval: time.Second,
		RetentionCheckInterval: time.Minute, Now: clock.Now,
		Log:     zerolog.New(zerolog.NewTestWriter(t)),
		Cleaner: cc,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	if err := m.ApplyPartitionStates([]PartitionState{leaderState(1, 0, []int32{1}, []int32{1}, cfg)}); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestCleanerSkipsDeletePolicy(t *testing.T) {
	clock := &fakeClock{t: time.Unix(100000, 0)}
	cfg := compactConfig()
	cfg.Compact, cfg.Delete, cfg.CleanupPolicy = false, true, "delete"
	cfg.RetentionMs, cfg.RetentionBytes = -1, -1
	m := newCleanerManager(t, filepath.Join(t.TempDir(), "logs"), clock, DefaultCleanerConfig(), cfg)
	produceKeyed(t, m, 0, 200, 5, 0, 1)
	before := len(logRecords(t, m))
	if n := cleanAll(t, m); n != 0 {
		t.Fatalf("%d clean passes on a delete-policy log", n)
	}
	if after := len(logRecords(t, m)); after != before {
		t.Fatalf("%d records after, %d before", after, before)
	}
	if st := m.CleanerStatus(); st.Passes != 0 || st.MaxDirtyPercent != 0 {
		t.Fatalf("cleaner status %+v on a delete-policy log", st)
	}
}

func TestCleanerPolicyChangeStartsCleaning(t *testing.T) {
	clock := &fakeClock{t: time.Unix(100000, 0)}
	cfg := compactConfig()
	cfg.Compact, cfg.Delete, cfg.CleanupPolicy = false, true, "delete"
	cfg.RetentionMs, cfg.RetentionBytes = -1, -1
	m := newCleanerManager(t, filepath.Join(t.TempDir(), "logs"), clock, DefaultCleanerConfig(), cfg)
	want := produceKeyed(t, m, 0, 200, 5, 0, 1)
	if n := cleanAll(t, m); n != 0 {
		t.Fatalf("%d clean passes while the policy is delete", n)
	}
	cfg.Compact, cfg.Delete, cfg.CleanupPolicy = true, false, "compact"
	if err := m.ApplyPartitionStates([]PartitionState{leaderState(1, 0, []int32{1}, []int32{1}, cfg)}); err != nil {
		t.Fatal(err)
	}
	if n := cleanAll(t, m); n == 0 {
		t.Fatal("no clean pass after the policy became compact")
	}
	checkCompacted(t, "after the change", consumeAll(t, m), want, m.cleaner.checkpoint(tp0))
}

func TestCleanerCheckpointAcrossRestart(t *testing.T) {
	clock := &fakeClock{t: time.Unix(100000, 0)}
	dir := filepath.Join(t.TempDir(), "logs")
	cc := DefaultCleanerConfig()
	m := newCleanerManager(t, dir, clock, cc, compactConfig())
	produceKeyed(t, m, 0, 200, 5, 0, 1)
	if n := cleanAll(t, m); n == 0 {
		t.Fatal("no clean pass")
	}
	end := m.cleaner.checkpoint(tp0)
	if end <= 0 {
		t.Fatalf("checkpoint %d after a pass", end)
	}
	es, err := logstore.ReadCleanerOffsetCheckpoint(nil, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || es[0].Topic != tp0.Topic || es[0].Partition != tp0.Partition || es[0].Offset != end {
		t.Fatalf("cleaner-offset-checkpoint after the pass holds %+v, want t-0 at %d", es, end)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	m2 := newCleanerManager(t, dir, clock, cc, compactConfig())
	if got := m2.cleaner.checkpoint(tp0); got != end {
		t.Fatalf("checkpoint after restart %d, want %d", got, end)
	}
	want := produceKeyed(t, m2, 200, 200, 5, 0, 1)
	if n := cleanAll(t, m2); n == 0 {
		t.Fatal("no clean pass after restart")
	}
	if first := m2.cleaner.lastStats[0].FirstDirtyOffset; first != end {
		t.Fatalf("the pass after restart began at %d, want the checkpoint %d", first, end)
	}
	checkCompacted(t, "after restart", consumeAll(t, m2), want, m2.cleaner.checkpoint(tp0))

	// A deleted partition leaves the checkpoint file.
	if err := m2.StopReplicas([]cluster.TopicPartition{tp0}, true); err != nil {
		t.Fatal(err)
	}
	if es, err := logstore.ReadCleanerOffsetCheckpoint(nil, dir); err != nil || len(es) != 0 {
		t.Fatalf("cleaner-offset-checkpoint after deletion: %+v, %v", es, err)
	}
}

// waitFor polls cond for up to 10 s of real time.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestCleanerThreadsCleanAndStopOnClose(t *testing.T) {
	clock := &fakeClock{t: time.Unix(100000, 0)}
	// The threads clean while the records are appended, so a pass can end
	// one segment short of the last roll. With Kafka's default ratio of
	// 0.5 that last segment may never be dirty enough to clean again; any
	// dirty byte must make the log cleanable for the wait below to end.
	cfg := compactConfig()
	cfg.MinCleanableDirtyRatio = 0.0001
	m := newCleanerManager(t, filepath.Join(t.TempDir(), "logs"), clock,
		CleanerConfig{Enable: true, Threads: 2, DedupeBufferSize: 1 << 20, Backoff: 5 * time.Millisecond}, cfg)
	m.Start()
	waitFor(t, "two cleaner threads", func() bool {
		m.cleaner.mu.Lock()
		defer m.cleaner.mu.Unlock()
		return m.cleaner.threadsLive == 2
	})
	want := produceKeyed(t, m, 0, 200, 5, 0, 1)
	waitFor(t, "a clean pass", func() bool { return m.CleanerStatus().Passes > 0 })
	waitFor(t, "the cleaned log", func() bool {
		r, _ := m.get(tp0)
		cr, err := r.log.Cleanable(m.cleaner.checkpoint(tp0), r.log.LogEndOffset(), clock.Now().UnixMilli(), 0)
		return err == nil && cr.CleanableBytes == 0
	})
	checkCompacted(t, "cleaned by the threads", consumeAll(t, m), want, m.cleaner.checkpoint(tp0))
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m.cleaner.mu.Lock()
	live := m.cleaner.threadsLive
	m.cleaner.mu.Unlock()
	if live != 0 {
		t.Fatalf("%d cleaner threads still running after Close", live)
	}
}

func TestCleanerDisabledCleansNothing(t *testing.T) {
	clock := &fakeClock{t: time.Unix(100000, 0)}
	dir := filepath.Join(t.TempDir(), "logs")
	m := newCleanerManager(t, dir, clock,
		CleanerConfig{Enable: false, Backoff: time.Millisecond}, compactConfig())
	m.Start()
	produceKeyed(t, m, 0, 200, 5, 0, 1)
	before := len(logRecords(t, m))
	time.Sleep(200 * time.Millisecond)
	m.cleaner.mu.Lock()
	live := m.cleaner.threadsLive
	m.cleaner.mu.Unlock()
	if live != 0 || m.CleanerStatus().Passes != 0 {
		t.Fatalf("log.cleaner.enable=false: %d threads, %d passes", live, m.CleanerStatus().Passes)
	}
	if after := len(logRecords(t, m)); after != before {
		t.Fatalf("%d records after, %d before", after, before)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, logstore.CleanerOffsetCheckpointFile)); !os.IsNotExist(err) {
		t.Fatalf("cleaner-offset-checkpoint written with the cleaner disabled: %v", err)
	}
}

// truncateBelowCheckpoint truncates tp0 on m three offsets below its
// cleaner checkpoint, as a follower does; it returns the checkpoint before
// the truncation and the log end offset after it.
func truncateBelowCheckpoint(t *testing.T, m *Manager) (end, to int64) {
	t.Helper()
	end = m.cleaner.checkpoint(tp0)
	r, err := m.get(tp0)
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	err = r.truncateLocked(end - 3)
	r.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	return end, r.log.LogEndOffset()
}

func TestCleanerCheckpointFollowsTruncation(t *testing.T) {
	clock := &fakeClock{t: time.Unix(100000, 0)}
	m := newCleanerManager(t, filepath.Join(t.TempDir(), "logs"), clock, DefaultCleanerConfig(), compactConfig())
	produceKeyed(t, m, 0, 200, 5, 0, 1)
	if n := cleanAll(t, m); n == 0 {
		t.Fatal("no clean pass")
	}
	// Truncate below the checkpoint and append again: the records from the
	// truncation point on are dirty.
	end, to := truncateBelowCheckpoint(t, m)
	if to >= end {
		t.Fatalf("truncated to %d, not below the checkpoint %d", to, end)
	}
	produceKeyed(t, m, 1000, 50, 5, 0, 1)
	if lc := m.cleaner.grabFilthiest(clock.Now()); lc != nil {
		m.cleaner.mu.Lock()
		delete(m.cleaner.running, tp0)
		m.cleaner.mu.Unlock()
		if lc.first != to {
			t.Errorf("a pass would begin at %d, want the truncation point %d", lc.first, to)
		}
	}
	if got := m.cleaner.checkpoint(tp0); got != to {
		t.Fatalf("checkpoint %d after a truncation to %d, want %d", got, to, to)
	}
}

// TestCleanerStopAndDeleteDuringPasses deletes and recreates a compacted
// partition while the cleaner threads keep cleaning it: a deletion waits
// for a pass in progress, and leaves no checkpoint entry behind.
func TestCleanerStopAndDeleteDuringPasses(t *testing.T) {
	clock := &fakeClock{t: time.Unix(100000, 0)}
	dir := filepath.Join(t.TempDir(), "logs")
	cfg := compactConfig()
	cfg.MinCleanableDirtyRatio = 0
	m := newCleanerManager(t, dir, clock,
		CleanerConfig{Enable: true, Threads: 2, DedupeBufferSize: 1 << 20, Backoff: time.Millisecond}, cfg)
	m.Start()
	for round := range 5 {
		if round > 0 {
			if err := m.ApplyPartitionStates([]PartitionState{leaderState(1, 0, []int32{1}, []int32{1}, cfg)}); err != nil {
				t.Fatal(err)
			}
		}
		produceKeyed(t, m, 0, 150, 5, 0, 1)
		passes := m.CleanerStatus().Passes
		waitFor(t, "a pass", func() bool { return m.CleanerStatus().Passes > passes })
		if err := m.StopReplicas([]cluster.TopicPartition{tp0}, true); err != nil {
			t.Fatal(err)
		}
		if got := m.cleaner.checkpoint(tp0); got != -1 {
			t.Fatalf("round %d: checkpoint %d kept after deletion", round, got)
		}
		if _, err := os.Stat(filepath.Join(dir, "t-0")); !os.IsNotExist(err) {
			t.Fatalf("round %d: partition directory after deletion: %v", round, err)
		}
	}
	if st := m.CleanerStatus(); st.DeadThreadCount != 0 || st.Uncleanable[dir] != 0 {
		t.Fatalf("cleaner status %+v", st)
	}
}

// TestCleanerTruncationDuringPassLowersItsCheckpoint: with two threads, a
// scan by one (B) while the other (A) cleans the partition must not
// consume a truncation of it into the old checkpoint that A's completed
// pass then overwrites: the checkpoint after A's pass is at most the
// truncation point, so the records appended again above it are dirty.
func TestCleanerTruncationDuringPassLowersItsCheckpoint(t *testing.T) {
	clock := &fakeClock{t: time.Unix(100000, 0)}
	cfg := compactConfig()
	cfg.MinCleanableDirtyRatio = 0
	cc := DefaultCleanerConfig()
	cc.Threads = 2
	m := newCleanerManager(t, filepath.Join(t.TempDir(), "logs"), clock, cc, cfg)
	produceKeyed(t, m, 0, 200, 5, 0, 1)
	if n := cleanAll(t, m); n == 0 {
		t.Fatal("no clean pass")
	}
	produceKeyed(t, m, 200, 100, 5, 0, 1)
	a := m.cleaner.grabFilthiest(clock.Now()) // thread A's pass begins
	if a == nil {
		t.Fatal("nothing to clean")
	}
	_, to := truncateBelowCheckpoint(t, m)
	if b := m.cleaner.grabFilthiest(clock.Now()); b != nil { // thread B's scan
		t.Fatalf("thread B picked %v, being cleaned by A", b.r.tp)
	}
	// A's pass completes, ending above the truncation point.
	if !m.cleaner.finishPass(0, a, logstore.CleanStats{FirstDirtyOffset: a.first, EndOffset: a.upper}, nil) {
		t.Fatal("pass not completed")
	}
	if got := m.cleaner.checkpoint(tp0); got > to {
		t.Fatalf("checkpoint %d after a pass during which the log was truncated to %d, want <= %d", got, to, to)
	}
}

// TestCleanerTruncationSurvivesStopReplica: a truncation the cleaner has
// not looked at yet still lowers the checkpoint when the replica is
// stopped (not deleted) before the next scan and opened again.
func TestCleanerTruncationSurvivesStopReplica(t *testing.T) {
	clock := &fakeClock{t: time.Unix(100000, 0)}
	cfg := compactConfig()
	m := newCleanerManager(t, filepath.Join(t.TempDir(), "logs"), clock, DefaultCleanerConfig(), cfg)
	produceKeyed(t, m, 0, 200, 5, 0, 1)
	if n := cleanAll(t, m); n == 0 {
		t.Fatal("no clean pass")
	}
	_, to := truncateBelowCheckpoint(t, m)
	if err := m.StopReplicas([]cluster.TopicPartition{tp0}, false); err != nil {
		t.Fatal(err)
	}
	if err := m.ApplyPartitionStates([]PartitionState{leaderState(1, 1, []int32{1}, []int32{1}, cfg)}); err != nil {
		t.Fatal(err)
	}
	m.cleaner.grabFilthiest(clock.Now())
	if got := m.cleaner.checkpoint(tp0); got > to {
		t.Fatalf("checkpoint %d after a truncation to %d and a restart of the replica, want <= %d", got, to, to)
	}
}

// TestCleanerAbortsThrottledPass: a pass held to a very low I/O rate is
// aborted promptly by StopReplica, and by Close, as Kafka's
// abortAndPauseCleaning, instead of their waiting for the pass to end.
func TestCleanerAbortsThrottledPass(t *testing.T) {
	for _, stop := range []string{"StopReplica", "Close"} {
		t.Run(stop, func(t *testing.T) {
			clock := &fakeClock{t: time.Unix(100000, 0)}
			cfg := compactConfig()
			cfg.MinCleanableDirtyRatio = 0
			m := newCleanerManager(t, filepath.Join(t.TempDir(), "logs"), clock,
				CleanerConfig{Enable: true, DedupeBufferSize: 1 << 20, IOMaxBytesPerSecond: 10, Backoff: time.Millisecond}, cfg)
			produceKeyed(t, m, 0, 200, 5, 0, 1)
			// Past the throttler's first 100 ms check interval, so that its
			// first check sleeps off the pass's bytes at 10 B/s.
			time.Sleep(150 * time.Millisecond)
			m.Start()
			waitFor(t, "a pass", func() bool {
				m.cleaner.mu.Lock()
				defer m.cleaner.mu.Unlock()
				return m.cleaner.running[tp0] != nil
			})
			time.Sleep(100 * time.Millisecond) // into the throttle's sleep
			done := make(chan error, 1)
			go func() {
				if stop == "Close" {
					done <- m.Close()
				} else {
					done <- m.StopReplicas([]cluster.TopicPartition{tp0}, false)
				}
			}()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(3 * time.Second):
				t.Fatalf("%s still waiting for a throttled clean pass after 3s", stop)
			}
		})
	}
}
