package logstore

import (
	"errors"
	"math"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestCleanerOffsetCheckpoint: the cleaner checkpoint round-trips in the
// offset checkpoint text format under its Kafka file name.
func TestCleanerOffsetCheckpoint(t *testing.T) {
	fsys := NewMemFS()
	if err := fsys.MkdirAll("/logs", 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadCleanerOffsetCheckpoint(fsys, "/logs"); err != nil || len(got) != 0 {
		t.Fatalf("missing file: %v %v", got, err)
	}
	want := []CheckpointEntry{{Topic: "__consumer_offsets", Partition: 3, Offset: 42}, {Topic: "t", Partition: 0, Offset: 7}}
	if err := WriteCleanerOffsetCheckpoint(fsys, "/logs", want); err != nil {
		t.Fatal(err)
	}
	raw, err := fsys.ReadFile("/logs/cleaner-offset-checkpoint")
	if err != nil || string(raw) != "0\n2\n__consumer_offsets 3 42\nt 0 7\n" {
		t.Fatalf("file %q, %v", raw, err)
	}
	got, err := ReadCleanerOffsetCheckpoint(fsys, "/logs")
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("read back %v, %v", got, err)
	}
}

// TestRateThrottler: after 100 ms in which twice the allowed bytes went
// by, the throttler sleeps until the rate is back at the limit; below the
// limit, or unlimited, it never sleeps.
func TestRateThrottler(t *testing.T) {
	now := time.Unix(1000, 0)
	var slept []time.Duration
	th := newRateThrottler(1000, func() time.Time { return now }, func(d time.Duration) { slept = append(slept, d); now = now.Add(d) })
	th.Throttle(150)
	now = now.Add(100 * time.Millisecond)
	th.Throttle(50) // 200 bytes in 100 ms at 1000 B/s: 200 ms worth
	if len(slept) != 1 || slept[0] != 100*time.Millisecond {
		t.Fatalf("slept %v, want [100ms]", slept)
	}
	now = now.Add(time.Second)
	th.Throttle(500) // 500 bytes in a second: under the limit
	if len(slept) != 1 {
		t.Fatalf("slept %v under the limit", slept)
	}
	th.SetRate(0)
	now = now.Add(time.Second)
	th.Throttle(1 << 30)
	if len(slept) != 1 {
		t.Fatalf("slept %v with no limit", slept)
	}
}

type countingThrottler struct{ bytes int64 }

func (c *countingThrottler) Throttle(n int64) { c.bytes += n }

// TestCleanThrottledAndRatio: a pass tells its Throttler of every byte it
// reads and writes; Cleanable's dirty ratio is the dirty bytes over the
// bytes from the log start to the first uncleanable offset, and falls to 0
// once the checkpoint reaches the cleanable end.
func TestCleanThrottledAndRatio(t *testing.T) {
	l := openLog(t, t.TempDir(), smallSegConfig(t, 400), 0)
	writeRounds(t, l, 20, 4, 4, 1000)
	r, err := l.Cleanable(0, 1<<62, 2000, 0)
	if err != nil {
		t.Fatal(err)
	}
	activeBase := l.segments[len(l.segments)-1].baseOffset
	var total int64
	for _, s := range l.segments[:len(l.segments)-1] {
		total += s.size
	}
	if r.DirtyRatio != 1 || r.CleanableBytes != total || r.FirstUncleanableOffset != activeBase || r.FirstDirtyTimestampMs != 1000 {
		t.Fatalf("before cleaning: %+v (total %d, active %d)", r, total, activeBase)
	}
	cfg := cleanCfg(NewOffsetMap(1 << 16))
	th := &countingThrottler{}
	cfg.Throttler = th
	st, err := l.Clean(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if th.bytes != st.BytesRead+st.BytesWritten || th.bytes == 0 {
		t.Fatalf("throttled %d bytes, stats %+v", th.bytes, st)
	}
	r, err = l.Cleanable(st.EndOffset, 1<<62, 2000, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r.DirtyRatio != 0 || r.CleanableBytes != 0 || r.CleanBytes == 0 {
		t.Fatalf("after cleaning: %+v", r)
	}
	// Half the clean size again, dirty: a ratio in between.
	writeRounds(t, l, 20, 2, 4, 1000)
	mustAppend(t, l, kvBatch(t, kvOpts{ts: 1}, k("active", "1")))
	r, err = l.Cleanable(st.EndOffset, 1<<62, 2000, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := float64(r.CleanableBytes) / float64(r.CleanBytes+r.CleanableBytes); r.DirtyRatio != want || want <= 0 || want >= 1 {
		t.Fatalf("ratio %+v", r)
	}
}

// TestOffsetMap: Put keeps the latest offset per key, a new key is refused
// once 90% of the slots are used while known keys still update, and Clear
// empties it (Kafka's OffsetMapTest).
func TestOffsetMap(t *testing.T) {
	m := NewOffsetMap(100 * offsetMapSlotBytes)
	if m.MaxEntries() != 90 || m.Bytes() != 100*offsetMapSlotBytes {
		t.Fatalf("max entries %d, bytes %d", m.MaxEntries(), m.Bytes())
	}
	for i := range 90 {
		if !m.Put([]byte(keyName(i)), int64(i)) {
			t.Fatalf("Put %d refused", i)
		}
	}
	if m.Put([]byte("one too many"), 1000) {
		t.Fatal("a 91st key fitted")
	}
	if !m.Put([]byte(keyName(3)), 500) || m.Get([]byte(keyName(3))) != 500 || m.Len() != 90 {
		t.Fatalf("update of a known key in a full map: %d, len %d", m.Get([]byte(keyName(3))), m.Len())
	}
	for i := range 90 {
		if want := int64(i); i != 3 && m.Get([]byte(keyName(i))) != want {
			t.Fatalf("Get %d = %d", i, m.Get([]byte(keyName(i))))
		}
	}
	if m.Get([]byte("absent")) != -1 || m.LatestOffset() != 500 {
		t.Fatalf("absent %d, latest %d", m.Get([]byte("absent")), m.LatestOffset())
	}
	m.Clear()
	if m.Len() != 0 || m.Get([]byte(keyName(1))) != -1 || m.LatestOffset() != -1 {
		t.Fatal("Clear left entries")
	}
}

// TestFollowerAppendsCleanedBatches: a follower replicates what a cleaned
// leader log serves, batches with fewer records than offsets and empty
// ones included, while a leader append of such a batch is still refused.
func TestFollowerAppendsCleanedBatches(t *testing.T) {
	leader := openLog(t, t.TempDir(), smallSegConfig(t, 300), 0)
	mustAppend(t, leader, kvBatch(t, kvOpts{ts: 1, producerID: 5, baseSequence: 0}, k("a", "1"), k("b", "1")))
	for range 4 {
		mustAppend(t, leader, kvBatch(t, kvOpts{ts: 1}, k("a", "2"), k("c", "1")))
	}
	if _, err := leader.Clean(cleanCfg(NewOffsetMap(1 << 16))); err != nil {
		t.Fatal(err)
	}
	want, hdrs := logContents(t, leader)
	if hdrs[0].NumRecords != 1 || hdrs[0].LastOffsetDelta != 1 {
		t.Fatalf("first batch %+v: not a cleaned one", hdrs[0])
	}
	follower := openLog(t, t.TempDir(), smallSegConfig(t, 300), 0)
	for off := int64(0); off < leader.LogEndOffset(); {
		b, err := leader.Read(off, 1<<20, math.MaxInt64)
		if err != nil {
			t.Fatal(err)
		}
		info, err := follower.AppendAsFollower(b)
		if err != nil {
			t.Fatalf("follower append at %d: %v", off, err)
		}
		off = info.LastOffset + 1
	}
	got, _ := logContents(t, follower)
	if !slices.Equal(got, want) {
		t.Fatal("the follower's log differs from the leader's")
	}
	b, err := leader.Read(0, 1<<20, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	setBaseOffset(b, 0)
	if _, err := follower.AppendAsLeader(b[:hdrs[0].Size()], 0, -1); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("leader append of a cleaned batch: %v, want ErrInvalidRecord", err)
	}
}

type funcThrottler func(int64)

func (f funcThrottler) Throttle(n int64) { f(n) }

// TestCleanAbortedByTruncation: a truncation while a pass reads (here from
// inside its throttler, so at a known point) makes the pass give up with
// ErrCleanAborted before swapping anything in; its .cleaned file is gone,
// the log holds the truncated original, and a later pass cleans it.
func TestCleanAbortedByTruncation(t *testing.T) {
	l := openLog(t, t.TempDir(), smallSegConfig(t, 300), 0)
	writeRounds(t, l, 10, 5, 2, 1000)
	cut := l.segments[len(l.segments)-2].baseOffset
	cfg := cleanCfg(NewOffsetMap(1 << 16))
	calls := 0
	cfg.Throttler = funcThrottler(func(int64) {
		if calls++; calls == 1 {
			if err := l.TruncateTo(cut); err != nil {
				t.Error(err)
			}
		}
	})
	before, _ := logContents(t, l)
	_, err := l.Clean(cfg)
	if !errors.Is(err, ErrCleanAborted) {
		t.Fatalf("Clean during a truncation: %v, want ErrCleanAborted", err)
	}
	names, _ := OSFS.ReadDir(l.dir)
	for _, n := range names {
		if filepath.Ext(n) == cleanedSuffix || filepath.Ext(n) == swapSuffix {
			t.Fatalf("%s left behind", n)
		}
	}
	after, _ := logContents(t, l)
	if want := slices.DeleteFunc(before, func(r gotRecord) bool { return r.offset >= cut }); !slices.Equal(after, want) {
		t.Fatalf("log after the aborted pass: %d records, want the %d below %d", len(after), len(want), cut)
	}
	cfg.Throttler = nil
	if st, err := l.Clean(cfg); err != nil || st.SegmentsCleaned == 0 {
		t.Fatalf("clean after the abort: %+v %v", st, err)
	}
}
