package logstore

import (
	"bytes"
	"slices"
	"strconv"
	"testing"
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
