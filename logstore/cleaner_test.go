package logstore

import (
	"bytes"
	"math"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// The cleaner tests follow Kafka's LogCleanerTest: build a log of keyed
// records over several segments, run clean passes with an explicit clock
// and offset map, and check what is left record by record.

func smallSegConfig(t testing.TB, segBytes int64) Config {
	cfg := testConfig(t)
	cfg.SegmentBytes = segBytes
	cfg.RetentionMs = -1
	return cfg
}

// writeRounds appends rounds of keys key-0000..key-(keys-1), value
// "r<round>", one batch of batchKeys records at a time, plus one keyless
// record per round.
func writeRounds(t testing.TB, l *Log, keys, rounds, batchKeys int, ts int64) {
	t.Helper()
	for r := range rounds {
		for i := 0; i < keys; i += batchKeys {
			var recs []kv
			for j := i; j < min(i+batchKeys, keys); j++ {
				recs = append(recs, k(keyName(j), "r"+strconv.Itoa(r)))
			}
			mustAppend(t, l, kvBatch(t, kvOpts{ts: ts}, recs...))
		}
		mustAppend(t, l, kvBatch(t, kvOpts{ts: ts}, kv{noKey: true, value: []byte("keyless")}))
	}
}

// activeBytes returns the active segment's file content.
func activeBytes(t testing.TB, l *Log) []byte {
	t.Helper()
	l.mu.RLock()
	defer l.mu.RUnlock()
	s := l.segments[len(l.segments)-1]
	b := make([]byte, s.size)
	if _, err := s.logFile.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCleanKeepsLastValuePerKey: after a full clean each key's last record
// is the only one left, at its original offset; keyless records are gone;
// the active segment is byte for byte what it was; and the cleaned log
// reopens the same, even with a recovery point of 0 (every segment
// re-validated).
func TestCleanKeepsLastValuePerKey(t *testing.T) {
	dir := t.TempDir()
	cfg := smallSegConfig(t, 400)
	l := openLog(t, dir, cfg, 0)
	writeRounds(t, l, 20, 5, 4, 1000)
	before, _ := logContents(t, l)
	activeBefore := activeBytes(t, l)
	activeBase := l.segments[len(l.segments)-1].baseOffset
	// The active segment is not mapped: below it each key keeps its last
	// record below it.
	want := latestByKey(slices.DeleteFunc(slices.Clone(before), func(r gotRecord) bool { return r.offset >= activeBase }))
	leo := l.LogEndOffset()

	stats := mustCleanAll(t, l, cleanCfg(NewOffsetMap(1<<20)))
	st := stats[len(stats)-1]
	if st.EndOffset != activeBase || st.MapFull {
		t.Fatalf("EndOffset %d (map full %v), want the active segment's base %d", st.EndOffset, st.MapFull, activeBase)
	}
	if st.RecordsDropped == 0 || st.BytesWritten >= st.BytesRead {
		t.Fatalf("stats %+v: nothing dropped", st)
	}
	check := func(l *Log) {
		t.Helper()
		after, _ := logContents(t, l)
		got := map[string]gotRecord{}
		for _, r := range after {
			if r.offset >= activeBase {
				continue
			}
			if !r.hasKey {
				if r.offset < activeBase {
					t.Fatalf("keyless record at %d survived cleaning", r.offset)
				}
				continue
			}
			if prev, dup := got[r.key]; dup {
				t.Fatalf("key %s at %d and at %d", r.key, prev.offset, r.offset)
			}
			got[r.key] = r
		}
		for key, w := range want {
			if g := got[key]; g.offset != w.offset || g.value != w.value {
				t.Fatalf("key %s: got offset %d value %q, want %d %q", key, g.offset, g.value, w.offset, w.value)
			}
		}
		if !bytes.Equal(activeBytes(t, l), activeBefore) {
			t.Fatal("the active segment changed")
		}
		if l.LogEndOffset() != leo || l.LogStartOffset() != 0 {
			t.Fatalf("LEO %d start %d, want %d and 0", l.LogEndOffset(), l.LogStartOffset(), leo)
		}
	}
	check(l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2 := openLog(t, dir, cfg, 0)
	check(l2)
	// Appends go on after cleaning.
	mustAppend(t, l2, kvBatch(t, kvOpts{ts: 1000}, k("new", "v")))
}

// TestCleanActiveSegmentUntouched: a log of one segment is not cleaned at
// all, however dirty; and UpperOffset below the active segment stops the
// pass there.
func TestCleanActiveSegmentUntouched(t *testing.T) {
	l := openLog(t, t.TempDir(), smallSegConfig(t, 1<<20), 0)
	for range 10 {
		mustAppend(t, l, kvBatch(t, kvOpts{ts: 1}, k("a", "1")))
	}
	before := activeBytes(t, l)
	st, err := l.Clean(cleanCfg(NewOffsetMap(1 << 16)))
	if err != nil {
		t.Fatal(err)
	}
	if st.SegmentsCleaned != 0 || st.EndOffset != 0 || !bytes.Equal(activeBytes(t, l), before) {
		t.Fatalf("stats %+v: the active segment was cleaned", st)
	}

	l2 := openLog(t, t.TempDir(), smallSegConfig(t, 200), 0)
	for range 20 {
		mustAppend(t, l2, kvBatch(t, kvOpts{ts: 1}, k("a", "1")))
	}
	if len(l2.segments) < 4 {
		t.Fatalf("%d segments", len(l2.segments))
	}
	upper := l2.segments[2].baseOffset
	cfg := cleanCfg(NewOffsetMap(1 << 16))
	cfg.UpperOffset = upper
	st, err = l2.Clean(cfg)
	if err != nil {
		t.Fatal(err)
	}
	recs, _ := logContents(t, l2)
	if st.EndOffset != upper || recs[0].offset != upper-1 || recs[1].offset != upper {
		t.Fatalf("upper offset %d: end %d, records at %d, %d", upper, st.EndOffset, recs[0].offset, recs[1].offset)
	}
}

// setMtime dates every non-active segment file of l at ms, oldest first
// plus step per segment, as Kafka's tests set lastModified.
func setMtimes(t testing.TB, l *Log, from int, ms func(i int) int64) {
	t.Helper()
	for i, s := range l.segments[:len(l.segments)-1] {
		if i < from {
			continue
		}
		tm := time.UnixMilli(ms(i))
		if err := os.Chtimes(segPath(l.dir, s.baseOffset, logSuffix), tm, tm); err != nil {
			t.Fatal(err)
		}
	}
}

func find(recs []gotRecord, key string) []gotRecord {
	var out []gotRecord
	for _, r := range recs {
		if r.key == key {
			out = append(out, r)
		}
	}
	return out
}

// TestCleanTombstoneRetention: a tombstone replaces its key's values and
// stays while its segment was modified no more than delete.retention.ms
// before the last segment of the clean section (Kafka's deleteHorizonMs:
// 0 on the first pass, when nothing is clean yet); once the clean section
// reaches segments modified more than that after it, the next pass removes
// it. The cleaned segment keeps the modification time of what it replaced,
// so cleaning does not restart the clock.
func TestCleanTombstoneRetention(t *testing.T) {
	l := openLog(t, t.TempDir(), smallSegConfig(t, 150), 0)
	const t0 = 1_700_000_000_000
	mustAppend(t, l, kvBatch(t, kvOpts{ts: 1}, k("a", "1"), k("b", "1")))
	mustAppend(t, l, kvBatch(t, kvOpts{ts: 1}, tomb("a")))
	for range 3 {
		mustAppend(t, l, kvBatch(t, kvOpts{ts: 1}, k("b", "2"), k("c", "1")))
	}
	setMtimes(t, l, 0, func(i int) int64 { return t0 + int64(i)*1000 })
	cfg := cleanCfg(NewOffsetMap(1 << 16))
	cfg.DeleteRetentionMs = 60_000
	pass := func(what string, wantTomb bool) CleanStats {
		t.Helper()
		st, err := l.Clean(cfg)
		if err != nil {
			t.Fatal(err)
		}
		recs, _ := logContents(t, l)
		a := find(recs, "a")
		if wantTomb && (len(a) != 1 || !a[0].tomb) {
			t.Fatalf("key a %s: %+v, want only its tombstone", what, a)
		}
		if !wantTomb && len(a) != 0 {
			t.Fatalf("key a %s: %+v, want nothing", what, a)
		}
		for _, b := range find(recs, "b") {
			if b.value != "2" {
				t.Fatalf("key b %s: %+v", what, b)
			}
		}
		cfg.FirstDirtyOffset = st.EndOffset
		return st
	}
	if st := pass("after the first clean", true); st.TombstonesKept != 1 {
		t.Fatalf("stats %+v", st)
	}
	// The log moves on: new segments, 2 minutes later.
	appendLater := func() {
		n := len(l.segments) - 1
		for range 4 {
			mustAppend(t, l, kvBatch(t, kvOpts{ts: 1}, k("d", "1"), k("e", "1")))
		}
		setMtimes(t, l, n, func(i int) int64 { return t0 + 120_000 })
	}
	appendLater()
	// The clean section still ends with segments of about t0.
	pass("when the clean section is recent", true)
	appendLater()
	// Now it ends 2 minutes after the tombstone's segment.
	pass("past delete.retention.ms", false)
}

// TestCleanMinCompactionLag: segments whose largest timestamp is newer
// than now - min.compaction.lag.ms are neither mapped nor cleaned, and
// stop the cleanable range there.
func TestCleanMinCompactionLag(t *testing.T) {
	l := openLog(t, t.TempDir(), smallSegConfig(t, 150), 0)
	const now = 1_000_000
	for i := range 3 { // old: ts 1000
		mustAppend(t, l, kvBatch(t, kvOpts{ts: 1000}, k("x", strconv.Itoa(i)), k("y", strconv.Itoa(i))))
	}
	for i := range 3 { // young: ts now-10
		mustAppend(t, l, kvBatch(t, kvOpts{ts: now - 10}, k("y", "young"+strconv.Itoa(i)), k("z", "1")))
	}
	mustAppend(t, l, kvBatch(t, kvOpts{ts: now}, k("active", "1")))
	var firstYoung int64 = -1
	for _, s := range l.segments {
		if s.maxTimestamp >= now-10 {
			firstYoung = s.baseOffset
			break
		}
	}
	cfg := cleanCfg(NewOffsetMap(1 << 16))
	cfg.NowMs, cfg.MinCompactionLagMs = now, 1000
	r, err := l.Cleanable(0, math.MaxInt64, now, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if r.FirstUncleanableOffset != firstYoung || r.DirtyRatio != 1 {
		t.Fatalf("cleanable %+v, want the first young segment %d", r, firstYoung)
	}
	before, _ := logContents(t, l)
	st, err := l.Clean(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if st.EndOffset != firstYoung {
		t.Fatalf("EndOffset %d, want %d", st.EndOffset, firstYoung)
	}
	after, _ := logContents(t, l)
	if x := find(after, "x"); len(x) != 1 || x[0].value != "2" {
		t.Fatalf("x: %+v", x)
	}
	// y's young values were not mapped: its last old value stays beside them.
	if y := find(after, "y"); len(y) != 4 || y[0].value != "2" {
		t.Fatalf("y: %+v", y)
	}
	var youngBefore, youngAfter []gotRecord
	for _, r := range before {
		if r.offset >= firstYoung {
			youngBefore = append(youngBefore, r)
		}
	}
	for _, r := range after {
		if r.offset >= firstYoung {
			youngAfter = append(youngAfter, r)
		}
	}
	if !slices.Equal(youngBefore, youngAfter) {
		t.Fatal("the young segments changed")
	}
	// Once they age, they are cleaned.
	cfg.NowMs = now + 2000
	if _, err := l.Clean(cfg); err != nil {
		t.Fatal(err)
	}
	after, _ = logContents(t, l)
	if y := find(after, "y"); len(y) != 1 || y[0].value != "young2" {
		t.Fatalf("y once aged: %+v", y)
	}
}

// TestCleanFullMapSeveralPasses: with a map too small for the dirty
// section's keys, a pass cleans up to where the map filled and says so;
// passes from each EndOffset on finish the job, and the result is what one
// big map gives.
func TestCleanFullMapSeveralPasses(t *testing.T) {
	build := func() *Log {
		l := openLog(t, t.TempDir(), smallSegConfig(t, 600), 0)
		writeRounds(t, l, 100, 3, 5, 1000)
		mustAppend(t, l, kvBatch(t, kvOpts{ts: 1000}, k("active", "1")))
		return l
	}
	small, big := build(), build()
	m := NewOffsetMap(30 * offsetMapSlotBytes) // 27 keys
	if m.MaxEntries() != 27 {
		t.Fatalf("MaxEntries %d", m.MaxEntries())
	}
	stats := mustCleanAll(t, small, cleanCfg(m))
	if len(stats) < 4 || !stats[0].MapFull || stats[0].EndOffset >= stats[len(stats)-1].EndOffset {
		t.Fatalf("%d passes, first %+v", len(stats), stats[0])
	}
	for i := 1; i < len(stats); i++ {
		if stats[i].FirstDirtyOffset != stats[i-1].EndOffset || stats[i].EndOffset <= stats[i-1].EndOffset {
			t.Fatalf("pass %d: %+v after %+v", i, stats[i], stats[i-1])
		}
	}
	one := mustCleanAll(t, big, cleanCfg(NewOffsetMap(1<<20)))
	if len(one) != 1 {
		t.Fatalf("big map: %d passes", len(one))
	}
	a, _ := logContents(t, small)
	b, _ := logContents(t, big)
	if len(a) != len(b) {
		t.Fatalf("several passes left %d records, one pass %d", len(a), len(b))
	}
	for i := range a {
		if a[i].offset != b[i].offset || a[i].raw != b[i].raw {
			t.Fatalf("record %d: %+v vs %+v", i, a[i], b[i])
		}
	}
	activeBase := small.segments[len(small.segments)-1].baseOffset
	seen := map[string]bool{}
	for _, r := range a {
		if r.offset < activeBase && (seen[r.key] || !r.hasKey) {
			t.Fatalf("key %q twice below the active segment", r.key)
		}
		seen[r.key] = true
	}
}

// TestCleanKeepsProducerState: batches keep producer id, epoch and base
// sequence and their offsets; a producer's last batch is kept even when
// cleaning empties it (an empty batch whose base sequence and last offset
// delta still give the producer's last sequence), while its earlier
// emptied batches go; so the last sequence per producer read from the
// batch headers is the same before and after cleaning.
func TestCleanKeepsProducerState(t *testing.T) {
	l := openLog(t, t.TempDir(), smallSegConfig(t, 300), 0)
	seq := map[int64]int32{}
	prod := func(pid int64, recs ...kv) {
		mustAppend(t, l, kvBatch(t, kvOpts{ts: 1, producerID: pid, producerEpoch: 3, baseSequence: seq[pid]}, recs...))
		seq[pid] += int32(len(recs))
	}
	prod(7, k("a", "1"), k("b", "1"))
	prod(8, k("c", "1"), k("a", "2")) // keeps c
	prod(7, k("a", "3"), k("b", "2")) // 7's last batch: emptied below
	prod(9, k("d", "1"))
	for range 3 {
		mustAppend(t, l, kvBatch(t, kvOpts{ts: 1}, k("a", "4"), k("b", "3"), k("d", "2"), k("x", "x")))
	}
	mustAppend(t, l, kvBatch(t, kvOpts{ts: 1}, k("active", "1")))
	lastSeq := func() map[int64][2]int64 {
		_, hdrs := logContents(t, l)
		m := map[int64][2]int64{}
		for _, h := range hdrs {
			if h.ProducerID >= 0 {
				if h.ProducerEpoch != 3 {
					t.Fatalf("producer %d epoch %d", h.ProducerID, h.ProducerEpoch)
				}
				m[h.ProducerID] = [2]int64{int64(h.BaseSequence) + int64(h.LastOffsetDelta), h.LastOffset()}
			}
		}
		return m
	}
	want := lastSeq()
	st, err := l.Clean(cleanCfg(NewOffsetMap(1 << 16)))
	if err != nil {
		t.Fatal(err)
	}
	got := lastSeq()
	if len(got) != 3 || got[7] != want[7] || got[8] != want[8] || got[9] != want[9] {
		t.Fatalf("last sequence and offset per producer: %v, want %v", got, want)
	}
	if st.EmptyBatchesKept != 2 { // producers 7 and 9
		t.Fatalf("stats %+v", st)
	}
	_, hdrs := logContents(t, l)
	n7 := 0
	for _, h := range hdrs {
		if h.ProducerID == 7 {
			n7++
			if h.NumRecords != 0 || h.BaseOffset != 4 || h.LastOffsetDelta != 1 || h.BaseSequence != 2 {
				t.Fatalf("producer 7's batch after cleaning: %+v", h)
			}
		}
		if h.ProducerID == 8 && (h.BaseOffset != 2 || h.NumRecords != 1 || h.LastOffsetDelta != 1 || h.BaseSequence != 0) {
			t.Fatalf("producer 8's batch after cleaning: %+v", h)
		}
	}
	if n7 != 1 {
		t.Fatalf("producer 7 has %d batches, want its last only", n7)
	}
}

// TestCleanPreservesHeaders: a record kept from a rewritten batch has its
// headers (null values included) byte for byte.
func TestCleanPreservesHeaders(t *testing.T) {
	l := openLog(t, t.TempDir(), smallSegConfig(t, 300), 0)
	h := kv{key: []byte("h"), value: []byte("v"), headers: [][2][]byte{{[]byte("trace"), []byte("abc")}, {[]byte("nullh"), nil}, {[]byte(""), []byte("")}}}
	mustAppend(t, l, kvBatch(t, kvOpts{ts: 1}, k("a", "1"), h, k("b", "1")))
	before, _ := logContents(t, l)
	for range 3 {
		mustAppend(t, l, kvBatch(t, kvOpts{ts: 1}, k("a", "2"), k("b", "2")))
	}
	mustAppend(t, l, kvBatch(t, kvOpts{ts: 1}, k("active", "1")))
	if _, err := l.Clean(cleanCfg(NewOffsetMap(1 << 16))); err != nil {
		t.Fatal(err)
	}
	after, hdrs := logContents(t, l)
	if got := find(after, "h"); len(got) != 1 || got[0].raw != before[1].raw || got[0].offset != 1 {
		t.Fatalf("record with headers: %+v, want %+v", got, before[1])
	}
	if hdrs[0].NumRecords != 1 || hdrs[0].BaseOffset != 0 || hdrs[0].LastOffsetDelta != 2 {
		t.Fatalf("rewritten batch %+v", hdrs[0])
	}
}

// TestCleanCompressed: compressed batches (each of Kafka's codecs) are
// inflated, filtered and compressed again with their own codec; a batch
// whose records all stay is kept byte for byte.
func TestCleanCompressed(t *testing.T) {
	for _, c := range []struct {
		name  string
		codec int8
	}{{"gzip", 1}, {"snappy", 2}, {"lz4", 3}, {"zstd", 4}} {
		t.Run(c.name, func(t *testing.T) {
			l := openLog(t, t.TempDir(), smallSegConfig(t, 1000), 0)
			o := kvOpts{ts: 1, codec: c.codec}
			var recs []kv
			for i := range 20 {
				recs = append(recs, k(keyName(i), "first"))
			}
			recs = append(recs, kv{key: []byte("hk"), value: []byte("hv"), headers: [][2][]byte{{[]byte("h"), []byte("1")}}})
			mustAppend(t, l, kvBatch(t, o, recs...))
			for i := range 10 {
				mustAppend(t, l, kvBatch(t, o, k(keyName(i*2), "second"), k(keyName(i*2), "third")))
			}
			keep := kvBatch(t, o, k("solo", "1"))
			mustAppend(t, l, keep)
			for len(l.segments) < 3 {
				mustAppend(t, l, kvBatch(t, kvOpts{ts: 1}, k("filler", "x")))
			}
			before, _ := logContents(t, l)
			if _, err := l.Clean(cleanCfg(NewOffsetMap(1 << 16))); err != nil {
				t.Fatal(err)
			}
			after, hdrs := logContents(t, l)
			for i := range 20 {
				want := "first"
				if i%2 == 0 {
					want = "third"
				}
				if got := find(after, keyName(i)); len(got) != 1 || got[0].value != want || got[0].codec != c.codec {
					t.Fatalf("%s: %+v, want %q in codec %d", keyName(i), got, want, c.codec)
				}
			}
			if got := find(after, "hk"); len(got) != 1 || got[0].raw != find(before, "hk")[0].raw {
				t.Fatalf("hk: %+v", got)
			}
			if hdrs[0].Compression() != c.codec || hdrs[0].NumRecords != 11 {
				t.Fatalf("first batch after cleaning: %+v", hdrs[0])
			}
			for _, r := range after {
				if r.key == "solo" {
					raw, err := l.Read(r.offset, 1<<20, math.MaxInt64)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(raw[offAttributes:len(keep)], keep[offAttributes:]) {
						t.Fatal("a batch with nothing dropped was rewritten")
					}
				}
			}
		})
	}
}

// TestCleanConcurrentReadsAndAppends: while passes run, appends go on and
// readers keep reading the whole log; every read returns whole, CRC-valid
// batches with increasing offsets (logContents checks), and never a
// record that is not the original one at its offset.
func TestCleanConcurrentReadsAndAppends(t *testing.T) {
	l := openLog(t, t.TempDir(), smallSegConfig(t, 500), 0)
	writeRounds(t, l, 30, 6, 3, 1000)
	orig, _ := logContents(t, l)
	at := map[int64]string{}
	for _, r := range orig {
		at[r.offset] = r.raw
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // appends of a key the checks ignore
		defer wg.Done()
		for i := range 300 {
			select {
			case <-done:
				return
			default:
			}
			if _, err := l.AppendAsLeader(kvBatch(t, kvOpts{ts: 1000}, k("appended", strconv.Itoa(i))), 0, -1); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			recs, _ := logContents(t, l)
			for _, r := range recs {
				if raw, ok := at[r.offset]; r.key != "appended" && (!ok || raw != r.raw) {
					t.Errorf("record at %d is not the original", r.offset)
					return
				}
			}
		}
	}()
	cfg := cleanCfg(NewOffsetMap(40 * offsetMapSlotBytes))
	for range 20 {
		st, err := l.Clean(cfg)
		if err != nil {
			t.Error(err)
			break
		}
		if cfg.FirstDirtyOffset = st.EndOffset; !st.MapFull {
			cfg.FirstDirtyOffset = 0
		}
	}
	close(done)
	wg.Wait()
}
