package logstore

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"
)

// FuzzOpenSegment writes random bytes as a segment and opens the log.
// Open must fail cleanly or recover; whatever it opens must then serve
// reads, timestamp lookups, appends and truncation without panicking.
// With trusted set, the segment sits below the recovery point before an
// empty last segment, so its (fuzzed) indexes are loaded rather than
// rebuilt and the reads meet the raw bytes.
func FuzzOpenSegment(f *testing.F) {
	valid := append(simpleBatch(3, 1000), simpleBatch(2, 2000)...)
	valid = append(valid, makeBatch(batchSpec{records: 4, valueSize: 50, firstTs: 3000, baseOffset: 5})...)
	validIndex := []byte{0, 0, 0, 4, 0, 0, 0, 90}
	validTimeIndex := []byte{0, 0, 0, 0, 0, 0, 3, 232, 0, 0, 0, 2}
	f.Add(valid, validIndex, validTimeIndex, false)
	f.Add(valid, validIndex, validTimeIndex, true)
	f.Add(valid[:len(valid)-7], []byte{}, []byte{}, false)
	f.Add(valid[:100], []byte{1, 2, 3}, []byte{}, true)
	f.Add([]byte{}, []byte{}, []byte{}, false)
	f.Add(make([]byte, 200), make([]byte, 16), make([]byte, 24), true)
	f.Fuzz(func(t *testing.T, segment, index, timeIndex []byte, trusted bool) {
		dir := t.TempDir()
		write := func(name string, data []byte) {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		write("00000000000000000000.log", segment)
		write("00000000000000000000.index", index)
		write("00000000000000000000.timeindex", timeIndex)
		recoveryPoint := int64(0)
		if trusted {
			write("00000000000000100000.log", nil)
			recoveryPoint = math.MaxInt64
		}
		cfg := DefaultConfig()
		cfg.Log = zerolog.Nop()
		cfg.IndexIntervalBytes = 64
		l, err := Open(dir, cfg, recoveryPoint)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open failed without ErrCorrupt: %v", err)
			}
			return
		}
		defer l.Close()
		if !trusted {
			// Recovery keeps a valid prefix only: it must read back whole.
			readAll(t, l)
		}
		off := l.LogStartOffset()
		for i := 0; i < 100 && off < l.LogEndOffset(); i++ {
			b, err := l.Read(off, 300, math.MaxInt64)
			if err != nil || len(b) == 0 {
				break
			}
			it := NewBatchIter(b)
			next := off
			for it.Next() {
				next = max(next, it.Header().NextOffset())
			}
			if next <= off {
				break
			}
			off = next
		}
		for _, ts := range []int64{-1, 0, 1000, 2500, math.MaxInt64} {
			_, _, _, _ = l.OffsetForTimestamp(ts)
		}
		leo := l.LogEndOffset()
		info, err := l.AppendAsFollower(makeBatch(batchSpec{records: 1, baseOffset: leo}))
		if err != nil || info.FirstOffset != leo {
			t.Fatalf("append at %d after open: %+v %v", leo, info, err)
		}
		_ = l.TruncateTo(leo / 2)
		_, _ = l.DeleteOldSegments(math.MaxInt64)
	})
}

// FuzzRecordIter walks random bytes as a records section: it never
// panics, every record it yields lies within the section, in order, and it
// either reaches the end or stops with an error.
func FuzzRecordIter(f *testing.F) {
	b := kvBatch(f, kvOpts{ts: 1}, k("a", "1"), tomb("b"), kv{noKey: true, value: []byte("v")},
		kv{key: []byte("h"), value: []byte("x"), headers: [][2][]byte{{[]byte("k"), nil}}})
	f.Add(b[BatchHeaderSize:])
	f.Add(b[BatchHeaderSize : len(b)-3])
	f.Add([]byte{0x02, 0x00})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, section []byte) {
		it := newRecordIter(section)
		end := 0
		for it.next() {
			r := it.rec
			if r.start != end || r.end <= r.start || r.end > len(section) {
				t.Fatalf("record [%d, %d) after %d in %d bytes", r.start, r.end, end, len(section))
			}
			end = r.end
		}
		if it.err == nil && end != len(section) {
			t.Fatalf("stopped at %d of %d bytes without an error", end, len(section))
		}
	})
}
