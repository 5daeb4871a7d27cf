package logstore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
)

// TestAppendReadAcrossRolls appends batches of one size into segments sized
// for exactly three of them, and checks that each segment is filled to the
// byte limit before rolling and that everything reads back.
func TestAppendReadAcrossRolls(t *testing.T) {
	t.Parallel()
	batch := simpleBatch(2, 1000)
	size := int64(len(batch))
	cfg := testConfig(t)
	cfg.SegmentBytes = 3 * size
	cfg.IndexIntervalBytes = 1
	dir := t.TempDir()
	l := openLog(t, dir, cfg, 0)

	var want []byte
	for i := range 10 {
		b := simpleBatch(2, 1000+int64(i))
		info := mustAppend(t, l, b)
		if info.FirstOffset != int64(2*i) || info.LastOffset != int64(2*i+1) || info.NumRecords != 2 {
			t.Fatalf("append %d: %+v", i, info)
		}
		want = append(want, b...) // b was rewritten in place
	}
	if got := l.LogEndOffset(); got != 20 {
		t.Fatalf("LogEndOffset = %d, want 20", got)
	}
	for _, tc := range []struct {
		base int64
		size int64
	}{{0, 3 * size}, {6, 3 * size}, {12, 3 * size}, {18, size}} {
		fi, err := os.Stat(segPath(dir, tc.base, logSuffix))
		if err != nil {
			t.Fatalf("segment %d: %v", tc.base, err)
		}
		if fi.Size() != tc.size {
			t.Fatalf("segment %d size %d, want %d", tc.base, fi.Size(), tc.size)
		}
	}
	if got := readAll(t, l); !bytes.Equal(got, want) {
		t.Fatalf("read back %d bytes differ from the %d appended", len(got), len(want))
	}
	// Every offset, including the second record of each batch, finds its batch.
	for off := int64(0); off < 20; off++ {
		b, err := l.Read(off, 1, math.MaxInt64)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		h, err := ValidateBatch(b)
		if err != nil || h.BaseOffset != off&^1 || len(b) != int(size) {
			t.Fatalf("Read(%d) = batch at %d (%d bytes), err %v", off, h.BaseOffset, len(b), err)
		}
	}
}

// TestAppendMultiBatchSpansRoll appends many batches in one call, more
// than a segment holds: they are split across segments at batch boundaries.
func TestAppendMultiBatchSpansRoll(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	one := simpleBatch(1, 5)
	cfg.SegmentBytes = int64(2*len(one)) + 10
	l := openLog(t, t.TempDir(), cfg, 0)
	var records []byte
	for range 5 {
		records = append(records, simpleBatch(1, 5)...)
	}
	want := append([]byte(nil), records...)
	info := mustAppend(t, l, records)
	if info.FirstOffset != 0 || info.LastOffset != 4 || len(info.Batches) != 5 {
		t.Fatalf("info %+v", info)
	}
	if n := len(l.segments); n != 3 {
		t.Fatalf("%d segments, want 3", n)
	}
	for i := range info.Batches {
		binary.BigEndian.PutUint64(want[i*len(one):], uint64(i))
		binary.BigEndian.PutUint32(want[i*len(one)+offLeaderEpoch:], 0)
	}
	if got := readAll(t, l); !bytes.Equal(got, want) {
		t.Fatal("read back differs")
	}
}

// TestAppendRewritesOnlyOffsetAndEpoch checks that a leader append changes
// the base offset and partition leader epoch and nothing else, leaving the
// CRC valid; with LogAppendTime it also sets the timestamp bit and max
// timestamp, with a new valid CRC.
func TestAppendRewritesOnlyOffsetAndEpoch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		logAppendTime int64
	}{
		{"create time", -1},
		{"log append time", 99999},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := openLog(t, t.TempDir(), testConfig(t), 0)
			mustAppend(t, l, simpleBatch(3, 10)) // offsets 0..2
			orig := simpleBatch(4, 500)
			in := append([]byte(nil), orig...)
			info, err := l.AppendAsLeader(in, 7, tt.logAppendTime)
			if err != nil {
				t.Fatal(err)
			}
			got, err := l.Read(3, 1<<20, math.MaxInt64)
			if err != nil {
				t.Fatal(err)
			}
			h, err := ValidateBatch(got)
			if err != nil {
				t.Fatalf("stored batch invalid: %v", err)
			}
			if h.BaseOffset != 3 || h.PartitionLeaderEpoch != 7 || info.Batches[0] != h {
				t.Fatalf("stored header %+v, info %+v", h, info.Batches[0])
			}
			// Compare everything but the rewritten fields.
			skip := map[int]bool{}
			mark := func(off, n int) {
				for i := off; i < off+n; i++ {
					skip[i] = true
				}
			}
			mark(offBaseOffset, 8)
			mark(offLeaderEpoch, 4)
			if tt.logAppendTime >= 0 {
				mark(offCRC, 4)
				mark(offAttributes, 2)
				mark(offMaxTimestamp, 8)
				if h.TimestampType() != LogAppendTime || h.MaxTimestamp != tt.logAppendTime || info.MaxTimestamp != tt.logAppendTime {
					t.Fatalf("LogAppendTime not applied: %+v", h)
				}
			} else if h.CRC != binary.BigEndian.Uint32(orig[offCRC:]) {
				t.Fatal("CRC changed without LogAppendTime")
			}
			if len(got) != len(orig) {
				t.Fatalf("stored %d bytes, sent %d", len(got), len(orig))
			}
			for i := range orig {
				if !skip[i] && got[i] != orig[i] {
					t.Fatalf("byte %d changed: %#x -> %#x", i, orig[i], got[i])
				}
			}
		})
	}
}

// TestLeaderAppendHeadersMatchStoredBytes checks that the headers a leader
// append returns, which it updates as it rewrites the batches rather than
// parsing them again, are those of the bytes it stored, for several
// batches in one call, with and without LogAppendTime.
func TestLeaderAppendHeadersMatchStoredBytes(t *testing.T) {
	t.Parallel()
	for _, logAppendTime := range []int64{-1, 99999} {
		t.Run(fmt.Sprintf("logAppendTime=%d", logAppendTime), func(t *testing.T) {
			t.Parallel()
			l := openLog(t, t.TempDir(), testConfig(t), 0)
			mustAppend(t, l, simpleBatch(2, 10))
			var records []byte
			for i, n := range []int{3, 1, 4} {
				records = append(records, makeBatch(batchSpec{records: n, valueSize: 20, firstTs: int64(100 * i), leaderEpoch: 9})...)
			}
			info, err := l.AppendAsLeader(records, 7, logAppendTime)
			if err != nil {
				t.Fatal(err)
			}
			got, err := l.Read(info.FirstOffset, 1<<20, math.MaxInt64)
			if err != nil {
				t.Fatal(err)
			}
			var stored []BatchHeader
			for it := NewBatchIter(got); it.Next(); {
				h, err := ValidateBatch(it.Batch())
				if err != nil {
					t.Fatalf("stored batch %d invalid: %v", len(stored), err)
				}
				stored = append(stored, h)
			}
			if !reflect.DeepEqual(info.Batches, stored) {
				t.Fatalf("AppendInfo.Batches %+v, stored headers %+v", info.Batches, stored)
			}
			if info.FirstOffset != 2 || info.LastOffset != 9 || info.NumRecords != 8 {
				t.Fatalf("info %+v", info)
			}
		})
	}
}

// TestAppendAllocations: an append allocates AppendInfo.Batches and
// nothing per batch, however many batches it carries.
func TestAppendAllocations(t *testing.T) { // not parallel: AllocsPerRun
	cfg := testConfig(t)
	cfg.IndexIntervalBytes = math.MaxInt64 // index entries would grow slices
	l := openLog(t, t.TempDir(), cfg, 0)
	var records []byte
	var starts []int
	for range 5 {
		starts = append(starts, len(records))
		records = append(records, simpleBatch(2, 1)...)
	}
	allocs := testing.AllocsPerRun(50, func() {
		for _, s := range starts {
			binary.BigEndian.PutUint64(records[s:], 0)
		}
		if _, err := l.AppendAsLeader(records, 1, 5); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 1 {
		t.Fatalf("a leader append of 5 batches allocates %v times, want 1", allocs)
	}
	allocs = testing.AllocsPerRun(50, func() {
		next := l.LogEndOffset()
		for _, s := range starts {
			binary.BigEndian.PutUint64(records[s:], uint64(next))
			next += 2
		}
		if _, err := l.AppendAsFollower(records); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 1 {
		t.Fatalf("a follower append of 5 batches allocates %v times, want 1", allocs)
	}
}

// TestAppendRefusesInvalid checks each rejection and that nothing is
// written, even when only the last batch of several is bad.
func TestAppendRefusesInvalid(t *testing.T) {
	t.Parallel()
	badCRC := simpleBatch(2, 1)
	badCRC[len(badCRC)-1] ^= 0x01
	nonZeroBase := makeBatch(batchSpec{records: 1, baseOffset: 5})
	control := makeBatch(batchSpec{records: 1, attributes: attrControl})
	magic1 := simpleBatch(1, 1)
	magic1[offMagic] = 1
	huge := makeBatch(batchSpec{records: 1, valueSize: 5000})
	tests := []struct {
		name    string
		records []byte
		want    error
	}{
		{"bad crc", badCRC, ErrCorrupt},
		{"bad crc after a good batch", append(simpleBatch(1, 1), badCRC...), ErrCorrupt},
		{"truncated", simpleBatch(2, 1)[:70], ErrCorrupt},
		{"trailing garbage", append(simpleBatch(1, 1), 1, 2, 3), ErrCorrupt},
		{"base offset not zero", nonZeroBase, ErrInvalidRecord},
		{"control batch", control, ErrInvalidRecord},
		{"magic 1", magic1, ErrInvalidRecord},
		{"empty", nil, ErrInvalidRecord},
		{"larger than a segment", huge, ErrRecordListTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig(t)
			cfg.SegmentBytes = 4096
			dir := t.TempDir()
			l := openLog(t, dir, cfg, 0)
			mustAppend(t, l, simpleBatch(1, 1))
			_, err := l.AppendAsLeader(append([]byte(nil), tt.records...), 0, -1)
			wantErr(t, err, tt.want)
			if l.LogEndOffset() != 1 {
				t.Fatalf("LogEndOffset = %d after a refused append", l.LogEndOffset())
			}
			fi, _ := os.Stat(segPath(dir, 0, logSuffix))
			if fi.Size() != int64(len(simpleBatch(1, 1))) {
				t.Fatalf("segment grew to %d bytes", fi.Size())
			}
		})
	}
}

func TestAppendAsFollower(t *testing.T) {
	t.Parallel()
	l := openLog(t, t.TempDir(), testConfig(t), 0)
	b1 := makeBatch(batchSpec{records: 2, baseOffset: 0, leaderEpoch: 3})
	b2 := makeBatch(batchSpec{records: 1, baseOffset: 2, leaderEpoch: 5})
	orig := append(append([]byte(nil), b1...), b2...)
	info, err := l.AppendAsFollower(append([]byte(nil), orig...))
	if err != nil {
		t.Fatal(err)
	}
	if info.FirstOffset != 0 || info.LastOffset != 2 || l.LogEndOffset() != 3 {
		t.Fatalf("info %+v LEO %d", info, l.LogEndOffset())
	}
	if got := readAll(t, l); !bytes.Equal(got, orig) {
		t.Fatal("follower batches not stored byte for byte")
	}
	if got := l.LeaderEpochs().Entries(); len(got) != 2 || got[0] != (EpochEntry{3, 0}) || got[1] != (EpochEntry{5, 2}) {
		t.Fatalf("epochs %v", got)
	}
	for _, tc := range []struct {
		name    string
		records []byte
	}{
		{"behind", makeBatch(batchSpec{records: 1, baseOffset: 2})},
		{"second behind the LEO", append(makeBatch(batchSpec{records: 1, baseOffset: 5}), makeBatch(batchSpec{records: 1, baseOffset: 1})...)},
		{"second overlaps first", append(makeBatch(batchSpec{records: 2, baseOffset: 3}), makeBatch(batchSpec{records: 1, baseOffset: 4})...)},
	} {
		_, err := l.AppendAsFollower(tc.records)
		wantErr(t, err, ErrOffsetMismatch)
		if l.LogEndOffset() != 3 {
			t.Fatalf("%s: LEO moved to %d", tc.name, l.LogEndOffset())
		}
	}
	// Offsets increase but need not be contiguous (a cleaned leader log).
	gaps := append(makeBatch(batchSpec{records: 1, baseOffset: 4}), makeBatch(batchSpec{records: 2, baseOffset: 7})...)
	if info, err := l.AppendAsFollower(gaps); err != nil || info.FirstOffset != 3 || info.LastOffset != 8 || l.LogEndOffset() != 9 {
		t.Fatalf("append with gaps: info %+v, err %v, LEO %d", info, err, l.LogEndOffset())
	}
}

// TestRead covers Read's bounds: maxOffset, maxBytes, an oversize first
// batch, the log end and offsets out of range.
func TestRead(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.IndexIntervalBytes = 100
	l := openLog(t, t.TempDir(), cfg, 0)
	small := len(simpleBatch(2, 0))
	for i := range 5 { // batches [0,1] [2,3] [4,5] [6,7] [8,9]
		mustAppend(t, l, simpleBatch(2, int64(i)))
	}
	big := makeBatch(batchSpec{records: 2, valueSize: 1000}) // [10,11]
	mustAppend(t, l, big)
	tests := []struct {
		name      string
		offset    int64
		maxBytes  int32
		maxOffset int64
		want      []int64 // base offsets returned
		wantErr   error
	}{
		{"all", 0, 1 << 20, math.MaxInt64, []int64{0, 2, 4, 6, 8, 10}, nil},
		{"mid batch starts at its base", 3, 1 << 20, math.MaxInt64, []int64{2, 4, 6, 8, 10}, nil},
		{"maxOffset at a boundary", 0, 1 << 20, 6, []int64{0, 2, 4}, nil},
		{"maxOffset inside a batch excludes it", 0, 1 << 20, 5, []int64{0, 2}, nil},
		{"maxBytes exact", 0, int32(2 * small), math.MaxInt64, []int64{0, 2}, nil},
		{"maxBytes one short", 0, int32(2*small - 1), math.MaxInt64, []int64{0}, nil},
		{"maxBytes smaller than first batch", 4, 1, math.MaxInt64, []int64{4}, nil},
		{"maxBytes zero", 4, 0, math.MaxInt64, []int64{4}, nil},
		{"oversize first batch", 10, 100, math.MaxInt64, []int64{10}, nil},
		{"offset at maxOffset", 4, 1 << 20, 4, nil, nil},
		{"offset above maxOffset", 6, 1 << 20, 4, nil, nil},
		{"batch straddles maxOffset", 4, 1 << 20, 5, nil, nil},
		{"offset at LEO", 12, 1 << 20, math.MaxInt64, nil, nil},
		{"offset past LEO", 13, 1 << 20, math.MaxInt64, nil, ErrOffsetOutOfRange},
		{"negative offset", -1, 1 << 20, math.MaxInt64, nil, ErrOffsetOutOfRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := l.Read(tt.offset, tt.maxBytes, tt.maxOffset)
			if tt.wantErr != nil {
				wantErr(t, err, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got == nil {
				t.Fatal("Read returned nil, want a non-nil slice")
			}
			var bases []int64
			it := NewBatchIter(got)
			for it.Next() {
				bases = append(bases, it.Header().BaseOffset)
			}
			if it.Err() != nil {
				t.Fatal(it.Err())
			}
			if len(bases) != len(tt.want) {
				t.Fatalf("got batches %v, want %v", bases, tt.want)
			}
			for i := range bases {
				if bases[i] != tt.want[i] {
					t.Fatalf("got batches %v, want %v", bases, tt.want)
				}
			}
		})
	}
}

// TestReadAllocations checks that a Read allocates only its result.
func TestReadAllocations(t *testing.T) {
	cfg := testConfig(t)
	cfg.IndexIntervalBytes = 256
	l := openLog(t, t.TempDir(), cfg, 0)
	for i := range 100 {
		mustAppend(t, l, simpleBatch(3, int64(i)))
	}
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := l.Read(150, 4096, math.MaxInt64); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 {
		t.Fatalf("Read allocates %v times, want 1", allocs)
	}
}

func TestReopenKeepsEverything(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := testConfig(t)
	cfg.SegmentBytes = 1000
	cfg.IndexIntervalBytes = 200
	l, err := Open(dir, cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		mustAppend(t, l, simpleBatch(2, int64(1000+i)))
	}
	if err := l.LeaderEpochs().Assign(4, l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendAsLeader(simpleBatch(1, 5000), 4, -1); err != nil {
		t.Fatal(err)
	}
	want := readAll(t, l)
	leo := l.LogEndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if l.RecoveryPoint() != leo {
		t.Fatalf("RecoveryPoint after Close = %d, want %d", l.RecoveryPoint(), leo)
	}
	if _, err := l.Read(0, 100, math.MaxInt64); !errorsIs(err, ErrClosed) {
		t.Fatalf("Read after Close: %v", err)
	}
	if _, err := l.AppendAsLeader(simpleBatch(1, 1), 0, -1); !errorsIs(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
	indexes := map[string][]byte{}
	for _, name := range []string{"00000000000000000000.index", "00000000000000000000.timeindex"} {
		indexes[name], _ = os.ReadFile(filepath.Join(dir, name))
	}

	for _, rp := range []int64{0, leo} { // full recovery, and trusting the flushed segments
		l2 := openLog(t, dir, cfg, rp)
		if l2.LogEndOffset() != leo || l2.LogStartOffset() != 0 || l2.RecoveryPoint() != leo {
			t.Fatalf("recoveryPoint %d: reopened LSO %d LEO %d RP %d, want 0 %d %d", rp, l2.LogStartOffset(), l2.LogEndOffset(), l2.RecoveryPoint(), leo, leo)
		}
		if got := readAll(t, l2); !bytes.Equal(got, want) {
			t.Fatalf("recoveryPoint %d: reopened log reads differently", rp)
		}
		if e, ok := l2.LeaderEpochs().LatestEpoch(); !ok || e != 4 {
			t.Fatalf("latest epoch %d %v, want 4", e, ok)
		}
		if _, ts, found, err := l2.OffsetForTimestamp(1015); err != nil || !found || ts != 1015 {
			t.Fatalf("OffsetForTimestamp after reopen: ts %d found %v err %v", ts, found, err)
		}
		if err := l2.Close(); err != nil {
			t.Fatal(err)
		}
		for name, before := range indexes {
			after, _ := os.ReadFile(filepath.Join(dir, name))
			if !bytes.Equal(before, after) || len(before) == 0 {
				t.Fatalf("%s changed across reopen (%d -> %d bytes)", name, len(before), len(after))
			}
		}
	}
}

func TestSegmentMsRollsByBatchTimestamp(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.SegmentMs = 1000
	l := openLog(t, t.TempDir(), cfg, 0)
	for _, ts := range []int64{10_000, 10_500, 10_999, 11_000, 11_100, 12_000} {
		mustAppend(t, l, simpleBatch(1, ts))
	}
	var bases []int64
	for _, s := range l.segments {
		bases = append(bases, s.baseOffset)
	}
	if len(bases) != 3 || bases[1] != 3 || bases[2] != 5 {
		t.Fatalf("segment bases %v, want [0 3 5]", bases)
	}
}

func TestSegmentMsRollsByClockWithoutTimestamps(t *testing.T) {
	t.Parallel()
	now := int64(1_000_000)
	cfg := testConfig(t)
	cfg.SegmentMs = 1000
	cfg.NowMs = func() int64 { return now }
	l := openLog(t, t.TempDir(), cfg, 0)
	noTs := func() []byte { return makeBatch(batchSpec{records: 1, firstTs: -1, maxTs: -1}) }
	mustAppend(t, l, noTs())
	now += 999
	mustAppend(t, l, noTs())
	if len(l.segments) != 1 {
		t.Fatal("rolled too early")
	}
	now += 1
	mustAppend(t, l, noTs())
	if len(l.segments) != 2 || l.segments[1].baseOffset != 2 {
		t.Fatalf("%d segments, want a roll at offset 2", len(l.segments))
	}
}

func TestOffsetForTimestamp(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.SegmentBytes = 300
	cfg.IndexIntervalBytes = 150
	l := openLog(t, t.TempDir(), cfg, 0)
	// Batch i holds offsets [2i, 2i+1] with max timestamp ts[i]; timestamps
	// go backwards once, as client clocks do.
	ts := []int64{100, 200, 300, 250, 400, 400, 500, 600, 700, 800}
	for _, m := range ts {
		mustAppend(t, l, makeBatch(batchSpec{records: 2, valueSize: 10, firstTs: m - 1, maxTs: m}))
	}
	if len(l.segments) < 3 {
		t.Fatalf("want several segments, got %d", len(l.segments))
	}
	tests := []struct {
		ts         int64
		wantOffset int64
		wantTs     int64
		found      bool
	}{
		{0, 0, 100, true},
		{100, 0, 100, true},
		{101, 2, 200, true},
		{250, 4, 300, true},
		{301, 8, 400, true},
		{400, 8, 400, true},
		{650, 16, 700, true},
		{800, 18, 800, true},
		{801, -1, -1, false},
	}
	for _, tt := range tests {
		off, got, found, err := l.OffsetForTimestamp(tt.ts)
		if err != nil || off != tt.wantOffset || got != tt.wantTs || found != tt.found {
			t.Errorf("OffsetForTimestamp(%d) = %d, %d, %v, %v; want %d, %d, %v", tt.ts, off, got, found, err, tt.wantOffset, tt.wantTs, tt.found)
		}
	}
}

// TestOffsetOfMaxTimestamp: ListOffsets' max timestamp (-3) is the last
// offset of the first batch that reached the largest timestamp, across
// segments, whatever order the timestamps came in.
func TestOffsetOfMaxTimestamp(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.SegmentBytes = 300
	l := openLog(t, t.TempDir(), cfg, 0)
	if _, _, found, err := l.OffsetOfMaxTimestamp(); err != nil || found {
		t.Fatalf("empty log: found %v (%v), want none", found, err)
	}
	// Batch i holds offsets [2i, 2i+1]; the largest timestamp, 900, is
	// first reached by batch 3 (offsets 6-7) in an early segment, and
	// reached again later.
	for _, m := range []int64{100, 500, 300, 900, 200, 900, 800, 400} {
		mustAppend(t, l, makeBatch(batchSpec{records: 2, valueSize: 10, firstTs: m - 1, maxTs: m}))
	}
	if len(l.segments) < 3 {
		t.Fatalf("want several segments, got %d", len(l.segments))
	}
	if off, ts, found, err := l.OffsetOfMaxTimestamp(); err != nil || !found || off != 7 || ts != 900 {
		t.Fatalf("OffsetOfMaxTimestamp = %d, %d, %v, %v; want 7, 900, true", off, ts, found, err)
	}
}

// TestRetention checks deletion by time and by size with an explicit clock:
// whole segments only, never the active one, LogStartOffset moves, and the
// leader epoch cache loses what was deleted.
func TestRetention(t *testing.T) {
	t.Parallel()
	batchSize := int64(len(simpleBatch(1, 0)))
	tests := []struct {
		name           string
		retentionMs    int64
		retentionBytes int64
		nowMs          int64
		hw             int64
		wantDeleted    int
		wantStart      int64
	}{
		// Segments of 2 batches: [0,1] ts 1000,1001; [2,3] 2000,2001; [4,5] 3000,3001; [6] 4000 (active).
		{"keep forever", -1, -1, 1 << 40, math.MaxInt64, 0, 0},
		{"time none old enough", 10_000, -1, 5000, math.MaxInt64, 0, 0},
		{"time first segment", 1000, -1, 3000, math.MaxInt64, 1, 2},
		{"time boundary keeps equal age", 1000, -1, 2001, math.MaxInt64, 0, 0},
		{"time never the active segment", 0, -1, 1 << 40, math.MaxInt64, 3, 6},
		{"time below high watermark only", 0, -1, 1 << 40, 4, 2, 4},
		{"size", -1, 3 * batchSize, 0, math.MaxInt64, 2, 4},
		{"size exact fit", -1, 7 * batchSize, 0, math.MaxInt64, 0, 0},
		{"size one byte short keeps everything", -1, 7*batchSize - 1, 0, math.MaxInt64, 0, 0},
		{"size one segment over", -1, 5 * batchSize, 0, math.MaxInt64, 1, 2},
		{"size zero", -1, 0, 0, math.MaxInt64, 3, 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig(t)
			cfg.SegmentBytes = 2 * batchSize
			cfg.RetentionMs = tt.retentionMs
			cfg.RetentionBytes = tt.retentionBytes
			dir := t.TempDir()
			l := openLog(t, dir, cfg, 0)
			for i, ts := range []int64{1000, 1001, 2000, 2001, 3000, 3001, 4000} {
				if _, err := l.AppendAsLeader(simpleBatch(1, ts), int32(i), -1); err != nil {
					t.Fatal(err)
				}
			}
			n, err := l.DeleteOldSegmentsBelow(tt.nowMs, tt.hw)
			if err != nil {
				t.Fatal(err)
			}
			if n != tt.wantDeleted || l.LogStartOffset() != tt.wantStart {
				t.Fatalf("deleted %d, start %d; want %d, %d", n, l.LogStartOffset(), tt.wantDeleted, tt.wantStart)
			}
			if _, err := os.Stat(segPath(dir, 0, logSuffix)); (err == nil) != (n == 0) {
				t.Fatalf("first segment file exists=%v after deleting %d", err == nil, n)
			}
			if _, err := l.Read(tt.wantStart-1, 100, math.MaxInt64); tt.wantStart > 0 && !errorsIs(err, ErrOffsetOutOfRange) {
				t.Fatalf("Read below the start: %v", err)
			}
			if b, err := l.Read(tt.wantStart, 100, math.MaxInt64); err != nil || len(b) == 0 {
				t.Fatalf("Read at the start: %d bytes, %v", len(b), err)
			}
			if e := l.LeaderEpochs().Entries(); e[0].StartOffset != tt.wantStart || e[len(e)-1].LeaderEpoch != 6 {
				t.Fatalf("epochs after retention %v", e)
			}
			// What is left survives a reopen.
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l2 := openLog(t, dir, cfg, 0)
			if l2.LogStartOffset() != tt.wantStart || l2.LogEndOffset() != 7 {
				t.Fatalf("reopened LSO %d LEO %d", l2.LogStartOffset(), l2.LogEndOffset())
			}
		})
	}
	t.Run("DeleteOldSegments", func(t *testing.T) {
		cfg := testConfig(t)
		cfg.SegmentBytes = batchSize
		cfg.RetentionMs = 10
		l := openLog(t, t.TempDir(), cfg, 0)
		for i := range 3 {
			mustAppend(t, l, simpleBatch(1, int64(i)))
		}
		if n, err := l.DeleteOldSegments(100); n != 2 || err != nil {
			t.Fatalf("deleted %d, %v", n, err)
		}
	})
}

func TestTruncateTo(t *testing.T) {
	t.Parallel()
	batchSize := int64(len(simpleBatch(2, 0)))
	tests := []struct {
		name     string
		endOff   int64
		wantLEO  int64
		wantSegs int
		epochs   []EpochEntry
	}{
		// Batches of 2 records: [0,1] e1, [2,3] e1 | [4,5] e2, [6,7] e2 | [8,9] e3 (3 per segment... see SegmentBytes).
		{"at LEO does nothing", 10, 10, 4, []EpochEntry{{1, 0}, {2, 4}, {3, 8}}},
		{"above LEO does nothing", 50, 10, 4, []EpochEntry{{1, 0}, {2, 4}, {3, 8}}},
		{"last batch", 8, 8, 3, []EpochEntry{{1, 0}, {2, 4}}},
		{"segment boundary", 6, 6, 3, []EpochEntry{{1, 0}, {2, 4}}},
		{"inside a batch drops it", 5, 4, 2, []EpochEntry{{1, 0}}},
		{"within the first segment", 2, 2, 1, []EpochEntry{{1, 0}}},
		{"to zero", 0, 0, 1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig(t)
			cfg.SegmentBytes = 2 * batchSize // segments [0..3] [4..7] [8..9]
			cfg.IndexIntervalBytes = 1
			dir := t.TempDir()
			l := openLog(t, dir, cfg, 0)
			for i, e := range []int32{1, 1, 2, 2, 3} {
				if _, err := l.AppendAsLeader(simpleBatch(2, int64(100*i)), e, -1); err != nil {
					t.Fatal(err)
				}
			}
			// Roll once more so that the last batch is not in the first segment.
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := l.TruncateTo(tt.endOff); err != nil {
				t.Fatal(err)
			}
			if l.LogEndOffset() != tt.wantLEO {
				t.Fatalf("LEO %d, want %d", l.LogEndOffset(), tt.wantLEO)
			}
			if l.RecoveryPoint() > tt.wantLEO {
				t.Fatalf("RecoveryPoint %d above LEO %d", l.RecoveryPoint(), tt.wantLEO)
			}
			checkEpochs(t, l.LeaderEpochs().Entries(), tt.epochs)
			if _, _, found, _ := l.OffsetForTimestamp(401); found != (tt.wantLEO > 8) {
				t.Fatalf("timestamp 401 of the last batch found=%v after truncation", found)
			}
			// Append continues at the new end and everything reads back.
			info := mustAppend(t, l, simpleBatch(1, 999))
			if info.FirstOffset != tt.wantLEO {
				t.Fatalf("next append at %d, want %d", info.FirstOffset, tt.wantLEO)
			}
			readAll(t, l)
			afterAppend := l.LeaderEpochs().Entries()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l2 := openLog(t, dir, cfg, 0)
			if l2.LogEndOffset() != tt.wantLEO+1 {
				t.Fatalf("reopened LEO %d, want %d", l2.LogEndOffset(), tt.wantLEO+1)
			}
			checkEpochs(t, l2.LeaderEpochs().Entries(), afterAppend)
		})
	}
}

func TestTruncateFullyAndStartAt(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.SegmentBytes = int64(len(simpleBatch(1, 0)))
	dir := t.TempDir()
	l := openLog(t, dir, cfg, 0)
	for i := range 3 {
		if _, err := l.AppendAsLeader(simpleBatch(1, int64(i)), int32(i), -1); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.TruncateFullyAndStartAt(1000); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 1000 || l.LogEndOffset() != 1000 || l.RecoveryPoint() != 1000 {
		t.Fatalf("LSO %d LEO %d RP %d, want 1000", l.LogStartOffset(), l.LogEndOffset(), l.RecoveryPoint())
	}
	if e := l.LeaderEpochs().Entries(); len(e) != 0 {
		t.Fatalf("epochs not cleared: %v", e)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if filepath.Ext(e.Name()) == ".log" && e.Name() != "00000000000000001000.log" {
			t.Fatalf("old segment %s left behind", e.Name())
		}
	}
	if b, err := l.Read(1000, 100, math.MaxInt64); err != nil || len(b) != 0 {
		t.Fatalf("Read at the new end: %v %v", b, err)
	}
	wantErr(t, func() error { _, err := l.Read(0, 100, math.MaxInt64); return err }(), ErrOffsetOutOfRange)
	info, err := l.AppendAsFollower(makeBatch(batchSpec{records: 2, baseOffset: 1000, leaderEpoch: 9}))
	if err != nil || info.FirstOffset != 1000 {
		t.Fatalf("append after full truncation: %+v %v", info, err)
	}
	checkEpochs(t, l.LeaderEpochs().Entries(), []EpochEntry{{9, 1000}})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2 := openLog(t, dir, cfg, 0)
	if l2.LogStartOffset() != 1000 || l2.LogEndOffset() != 1002 {
		t.Fatalf("reopened LSO %d LEO %d", l2.LogStartOffset(), l2.LogEndOffset())
	}
	// Truncating below the first segment empties the log the same way.
	if err := l2.TruncateTo(10); err != nil {
		t.Fatal(err)
	}
	if l2.LogStartOffset() != 10 || l2.LogEndOffset() != 10 {
		t.Fatalf("TruncateTo below the start: LSO %d LEO %d", l2.LogStartOffset(), l2.LogEndOffset())
	}
}

func TestFlushPolicy(t *testing.T) {
	t.Parallel()
	t.Run("FlushMessages", func(t *testing.T) {
		t.Parallel()
		cfg := testConfig(t)
		cfg.FlushMessages = 5
		l := openLog(t, t.TempDir(), cfg, 0)
		mustAppend(t, l, simpleBatch(3, 0))
		if l.RecoveryPoint() != 0 {
			t.Fatalf("flushed after 3 records: RP %d", l.RecoveryPoint())
		}
		mustAppend(t, l, simpleBatch(2, 0))
		if l.RecoveryPoint() != 5 {
			t.Fatalf("RecoveryPoint %d after 5 records, want 5", l.RecoveryPoint())
		}
	})
	t.Run("FlushMs", func(t *testing.T) {
		t.Parallel()
		now := int64(10_000)
		cfg := testConfig(t)
		cfg.FlushMs = 100
		cfg.NowMs = func() int64 { return now }
		l := openLog(t, t.TempDir(), cfg, 0)
		if err := l.MaybeFlush(now + 1000); err != nil || l.RecoveryPoint() != 0 {
			t.Fatalf("flushed an empty log: %v", err)
		}
		mustAppend(t, l, simpleBatch(1, 0))
		now += 50
		mustAppend(t, l, simpleBatch(1, 0))
		if err := l.MaybeFlush(10_099); err != nil || l.RecoveryPoint() != 0 {
			t.Fatalf("flushed too early: RP %d %v", l.RecoveryPoint(), err)
		}
		if err := l.MaybeFlush(10_100); err != nil || l.RecoveryPoint() != 2 {
			t.Fatalf("RP %d %v, want 2", l.RecoveryPoint(), err)
		}
	})
	t.Run("never", func(t *testing.T) {
		t.Parallel()
		cfg := testConfig(t)
		l := openLog(t, t.TempDir(), cfg, 0)
		mustAppend(t, l, simpleBatch(100, 0))
		if err := l.MaybeFlush(math.MaxInt64); err != nil || l.RecoveryPoint() != 0 {
			t.Fatalf("RP %d %v", l.RecoveryPoint(), err)
		}
		if err := l.Flush(); err != nil || l.RecoveryPoint() != 100 {
			t.Fatalf("Flush: RP %d %v", l.RecoveryPoint(), err)
		}
	})
}

// TestConcurrentReadsDuringAppends runs readers against a writer that
// rolls segments; under -race it checks the locking, and every read must
// return whole valid batches.
func TestConcurrentReadsDuringAppends(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.SegmentBytes = 2000
	cfg.IndexIntervalBytes = 300
	l := openLog(t, t.TempDir(), cfg, 0)
	const batches = 300
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for r := range 3 {
		wg.Go(func() {
			off := int64(0)
			for off < batches*2 {
				b, err := l.Read(off, int32(100+r*500), l.LogEndOffset())
				if err != nil {
					errs <- err
					return
				}
				it := NewBatchIter(b)
				for it.Next() {
					if _, err := ValidateBatch(it.Batch()); err != nil {
						errs <- err
						return
					}
					off = it.Header().NextOffset()
				}
				if it.Err() != nil {
					errs <- it.Err()
					return
				}
				_, _, _, _ = l.OffsetForTimestamp(50)
			}
		})
	}
	for i := range batches {
		mustAppend(t, l, simpleBatch(2, int64(i)))
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestDelete(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "topic-0")
	l, err := Open(dir, testConfig(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, simpleBatch(1, 0))
	if err := l.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("directory still there: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close after Delete: %v", err)
	}
}

func checkEpochs(t *testing.T, got, want []EpochEntry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("epochs %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("epochs %v, want %v", got, want)
		}
	}
}
