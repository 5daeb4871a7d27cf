package logstore

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// Recovery tests. Goal: whatever a crash leaves of the tail of the last
// segment, Open keeps every whole batch before it, truncates the rest and
// leaves a log that accepts the next append; damage anywhere else is
// reported, never silently dropped. Method: build a log, close it, damage
// a copy of its directory, reopen the copy.

// buildLog appends batches (2 records each, timestamps from 1000) and
// closes the log, returning its dir, the base offset of each batch and the
// byte position of each batch within its segment.
func buildLog(t *testing.T, cfg Config, n int) (dir string, bases []int64, positions []int64) {
	t.Helper()
	dir = t.TempDir()
	l, err := Open(dir, cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		info, err := l.AppendAsLeader(simpleBatch(2, int64(1000+i)), int32(i/2), -1)
		if err != nil {
			t.Fatal(err)
		}
		bases = append(bases, info.FirstOffset)
	}
	for _, s := range l.segments {
		for pos := int64(0); pos < s.size; {
			var scratch [BatchHeaderSize]byte
			h, err := s.readHeaderAt(pos, &scratch)
			if err != nil {
				t.Fatal(err)
			}
			positions = append(positions, pos)
			pos += int64(h.Size())
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, bases, positions
}

// TestTornTailEveryByte cuts the last segment at every byte position
// inside its last batch, reopens, and checks that all earlier batches
// survive, LogEndOffset is the last batch's base offset, and an append
// continues there. It runs with the last batch alone in a fresh segment
// (a crash right after a roll) and sharing a segment with others.
func TestTornTailEveryByte(t *testing.T) {
	t.Parallel()
	batchSize := int64(len(simpleBatch(2, 0)))
	tests := []struct {
		name         string
		segmentBytes int64
		batches      int
	}{
		{"shared segment", 1 << 20, 5},
		{"last batch alone after a roll", 2 * batchSize, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig(t)
			cfg.SegmentBytes = tt.segmentBytes
			cfg.IndexIntervalBytes = 1
			src, bases, positions := buildLog(t, cfg, tt.batches)
			lastBase := bases[len(bases)-1]
			lastPos := positions[len(positions)-1]
			var segBase int64
			{
				l := openLog(t, copyDir(t, src), cfg, 0)
				segBase = l.segments[len(l.segments)-1].baseOffset
				_ = l.Close()
			}
			full, err := os.ReadFile(segPath(src, segBase, logSuffix))
			if err != nil {
				t.Fatal(err)
			}
			var want []byte // every batch but the last, as read from the intact log
			{
				l := openLog(t, copyDir(t, src), cfg, 0)
				b := readAll(t, l)
				want = b[:len(b)-int(batchSize)]
				_ = l.Close()
			}
			quiet := cfg
			quiet.Log = quiet.Log.Level(100) // 1 line per cut is noise here
			for cut := lastPos; cut < int64(len(full)); cut++ {
				dir := copyDir(t, src)
				if err := os.Truncate(segPath(dir, segBase, logSuffix), cut); err != nil {
					t.Fatal(err)
				}
				l, err := Open(dir, quiet, 0)
				if err != nil {
					t.Fatalf("cut at %d: Open: %v", cut, err)
				}
				if l.LogEndOffset() != lastBase {
					t.Fatalf("cut at %d: LEO %d, want %d", cut, l.LogEndOffset(), lastBase)
				}
				if got := readAll(t, l); !bytes.Equal(got, want) {
					t.Fatalf("cut at %d: earlier batches changed", cut)
				}
				if e := l.LeaderEpochs().Entries(); e[len(e)-1].StartOffset >= lastBase {
					t.Fatalf("cut at %d: epoch cache keeps %v beyond LEO", cut, e)
				}
				info, err := l.AppendAsLeader(simpleBatch(1, 5), 9, -1)
				if err != nil || info.FirstOffset != lastBase {
					t.Fatalf("cut at %d: append after recovery at %d: %v", cut, info.FirstOffset, err)
				}
				if b, err := l.Read(lastBase, 1<<20, math.MaxInt64); err != nil || len(b) != len(simpleBatch(1, 5)) {
					t.Fatalf("cut at %d: read of the new batch: %d bytes, %v", cut, len(b), err)
				}
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				fi, _ := os.Stat(segPath(dir, segBase, logSuffix))
				if want := lastPos + int64(len(simpleBatch(1, 5))); fi.Size() != want {
					t.Fatalf("cut at %d: segment is %d bytes after the append, want %d", cut, fi.Size(), want)
				}
			}
		})
	}
}

// TestCorruption flips one bit and reopens. Above the recovery point any
// damage is a torn write and is truncated with everything after it
// (Kafka's recoverLog); below it, segments are trusted, and damage found
// while rebuilding a missing index is corruption.
func TestCorruption(t *testing.T) {
	t.Parallel()
	batchSize := int64(len(simpleBatch(2, 0)))
	tests := []struct {
		name          string
		segment       int64 // base offset of the segment to damage
		position      int64 // byte to flip, relative to the segment
		recoveryPoint int64
		wantErr       error
		wantLEO       int64
		removeIndex   bool // of the damaged segment
	}{
		// Segments of 3 batches (6 offsets): 0, 6, 12 (with 2 batches).
		{"crc of the last batch", 12, batchSize + offCRC, 0, nil, 14, false},
		{"payload of the last batch", 12, 2*batchSize - 1, 0, nil, 14, false},
		{"first batch of the last segment", 12, 70, 0, nil, 12, false},
		{"length field of the last batch", 12, batchSize + offBatchLength + 3, 0, nil, 14, false},
		{"earlier segment", 6, batchSize + 70, 0, nil, 8, false},
		{"first segment", 0, 70, 0, nil, 0, false},
		// Below the recovery point segments are trusted, as Kafka does.
		{"earlier segment below the recovery point", 0, 70, 16, nil, 16, false},
		{"segment holding the recovery point", 6, 70, 8, nil, 6, false},
		{"index rebuild below the recovery point", 0, 70, 16, ErrCorrupt, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig(t)
			cfg.SegmentBytes = 3 * batchSize
			src, _, _ := buildLog(t, cfg, 8)
			dir := copyDir(t, src)
			path := segPath(dir, tt.segment, logSuffix)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			data[tt.position] ^= 0x04
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			if tt.removeIndex {
				if err := os.Remove(segPath(dir, tt.segment, indexSuffix)); err != nil {
					t.Fatal(err)
				}
			}
			l, err := Open(dir, cfg, tt.recoveryPoint)
			if tt.wantErr != nil {
				wantErr(t, err, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if l.LogEndOffset() != tt.wantLEO {
				t.Fatalf("LEO %d, want %d", l.LogEndOffset(), tt.wantLEO)
			}
		})
	}
}

// TestTornAfterRollWithEmptySegment: the segment before an empty last
// segment is torn (a crash just after a roll, before the old segment
// reached the disk). It is a torn tail, not corruption.
func TestTornAfterRollWithEmptySegment(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	batchSize := int64(len(simpleBatch(2, 0)))
	cfg.SegmentBytes = 3 * batchSize
	src, _, _ := buildLog(t, cfg, 3) // one full segment [0,6)
	dir := copyDir(t, src)
	if err := os.Truncate(segPath(dir, 0, logSuffix), 3*batchSize-5); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(segPath(dir, 6, logSuffix), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	l := openLog(t, dir, cfg, 0)
	if l.LogEndOffset() != 4 || len(l.segments) != 1 {
		t.Fatalf("LEO %d with %d segments, want 4 and 1", l.LogEndOffset(), len(l.segments))
	}
	if _, err := os.Stat(segPath(dir, 6, logSuffix)); !os.IsNotExist(err) {
		t.Fatalf("empty segment not removed: %v", err)
	}
}

// TestIndexRebuild removes or damages the index files of a segment that
// is below the recovery point (so it is not otherwise scanned) and checks
// that reopening rebuilds them exactly and lookups still work.
func TestIndexRebuild(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		damage func(t *testing.T, dir string)
	}{
		{"index deleted", func(t *testing.T, dir string) {
			must(t, os.Remove(segPath(dir, 0, indexSuffix)))
		}},
		{"time index deleted", func(t *testing.T, dir string) {
			must(t, os.Remove(segPath(dir, 0, timeIndexSuffix)))
		}},
		{"index torn entry", func(t *testing.T, dir string) {
			fi, err := os.Stat(segPath(dir, 0, indexSuffix))
			must(t, err)
			must(t, os.Truncate(segPath(dir, 0, indexSuffix), fi.Size()-3))
		}},
		{"index points past the log", func(t *testing.T, dir string) {
			f, err := os.OpenFile(segPath(dir, 0, indexSuffix), os.O_WRONLY|os.O_APPEND, 0)
			must(t, err)
			_, err = f.Write([]byte{0, 0, 0x7f, 0, 0x7f, 0, 0, 0})
			must(t, err)
			must(t, f.Close())
		}},
		{"time index goes backwards", func(t *testing.T, dir string) {
			f, err := os.OpenFile(segPath(dir, 0, timeIndexSuffix), os.O_WRONLY|os.O_APPEND, 0)
			must(t, err)
			_, err = f.Write(make([]byte, 12))
			must(t, err)
			must(t, f.Close())
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig(t)
			cfg.SegmentBytes = 2000
			cfg.IndexIntervalBytes = 200
			src, _, _ := buildLog(t, cfg, 40)
			origIndex, _ := os.ReadFile(segPath(src, 0, indexSuffix))
			origTime, _ := os.ReadFile(segPath(src, 0, timeIndexSuffix))
			if len(origIndex) < 3*indexEntrySize || len(origTime) < 3*timeIndexEntrySize {
				t.Fatalf("test log has too small indexes: %d, %d bytes", len(origIndex), len(origTime))
			}
			dir := copyDir(t, src)
			tt.damage(t, dir)
			l := openLog(t, dir, cfg, 80) // everything is below the recovery point
			if len(l.segments) < 2 {
				t.Fatalf("want several segments, got %d", len(l.segments))
			}
			want := readAll(t, openLog(t, copyDir(t, src), cfg, 80))
			if got := readAll(t, l); !bytes.Equal(got, want) {
				t.Fatal("reads differ after the rebuild")
			}
			if _, ts, found, err := l.OffsetForTimestamp(1005); !found || ts != 1005 || err != nil {
				t.Fatalf("OffsetForTimestamp after rebuild: %d %v %v", ts, found, err)
			}
			must(t, l.Close())
			gotIndex, _ := os.ReadFile(segPath(dir, 0, indexSuffix))
			gotTime, _ := os.ReadFile(segPath(dir, 0, timeIndexSuffix))
			if !bytes.Equal(gotIndex, origIndex) || !bytes.Equal(gotTime, origTime) {
				t.Fatalf("rebuilt indexes differ: %d/%d and %d/%d bytes", len(gotIndex), len(origIndex), len(gotTime), len(origTime))
			}
		})
	}
}

// TestOpenCleansLeftovers: tmp files of interrupted checkpoint writes and
// indexes of a half-deleted segment are removed on open.
func TestOpenCleansLeftovers(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	src, _, _ := buildLog(t, cfg, 2)
	dir := copyDir(t, src)
	for _, name := range []string{"leader-epoch-checkpoint.tmp", "00000000000000000099.index", "00000000000000000099.timeindex"} {
		must(t, os.WriteFile(filepath.Join(dir, name), []byte("junk"), 0o644))
	}
	l := openLog(t, dir, cfg, 0)
	if l.LogEndOffset() != 4 {
		t.Fatalf("LEO %d", l.LogEndOffset())
	}
	for _, name := range []string{"leader-epoch-checkpoint.tmp", "00000000000000000099.index", "00000000000000000099.timeindex"} {
		if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
			t.Fatalf("%s left behind", name)
		}
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestTornTailInEarlierSegment: a power loss left a torn batch in a
// segment that is not the last one, above the recovery point (it was
// never fsynced). As Kafka's recoverLog, Open truncates that segment at
// the torn batch and deletes every later segment; followers refetch.
func TestTornTailInEarlierSegment(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	batchSize := int64(len(simpleBatch(2, 0)))
	cfg.SegmentBytes = 3 * batchSize
	src, _, _ := buildLog(t, cfg, 8) // segments 0, 6, 12 (2 batches)
	dir := copyDir(t, src)
	// Cut segment 6 inside its second batch (offsets 8-9).
	if err := os.Truncate(segPath(dir, 6, logSuffix), batchSize+20); err != nil {
		t.Fatal(err)
	}
	l, err := Open(dir, cfg, 6)
	if err != nil {
		t.Fatalf("Open with a torn segment above the recovery point: %v", err)
	}
	defer l.Close()
	if l.LogEndOffset() != 8 || len(l.segments) != 2 {
		t.Fatalf("LEO %d with %d segments, want 8 and 2", l.LogEndOffset(), len(l.segments))
	}
	if _, err := os.Stat(segPath(dir, 12, logSuffix)); !os.IsNotExist(err) {
		t.Fatalf("segment after the torn one not deleted: %v", err)
	}
	if got := len(readAll(t, l)); int64(got) != 4*batchSize {
		t.Fatalf("read %d bytes back, want %d", got, 4*batchSize)
	}
	mustAppend(t, l, simpleBatch(2, 5000))
	if l.LogEndOffset() != 10 {
		t.Fatalf("LEO %d after an append, want 10", l.LogEndOffset())
	}
}
