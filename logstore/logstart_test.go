package logstore

import (
	"math"
	"os"
	"testing"
)

// TestIncrementLogStartOffset moves the start of a log of three 2-batch
// segments to points inside and between segments, and checks what reads,
// the segment files, the epoch cache, retention, truncation and a reopen
// make of it.
func TestIncrementLogStartOffset(t *testing.T) {
	t.Parallel()
	batchSize := int64(len(simpleBatch(1, 0)))
	setup := func(t *testing.T) (*Log, string, Config) {
		cfg := testConfig(t)
		cfg.SegmentBytes = 2 * batchSize
		dir := t.TempDir()
		l := openLog(t, dir, cfg, 0)
		// Segments [0,1] [2,3] [4,5] [6] (active), epochs 0..6.
		for i := range 7 {
			if _, err := l.AppendAsLeader(simpleBatch(1, int64(1000+i)), int32(i), -1); err != nil {
				t.Fatal(err)
			}
		}
		return l, dir, cfg
	}
	tests := []struct {
		name        string
		offset      int64
		wantDeleted int
		wantErr     error
		wantStart   int64
	}{
		{"below start does nothing", 0, 0, nil, 0},
		{"inside the first segment", 1, 0, nil, 1},
		{"at a segment boundary", 2, 1, nil, 2},
		{"inside a later segment", 5, 2, nil, 5},
		{"at the log end keeps the active segment", 7, 3, nil, 7},
		{"above the log end", 8, 0, ErrOffsetOutOfRange, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l, dir, cfg := setup(t)
			n, err := l.IncrementLogStartOffset(tt.offset)
			if tt.wantErr != nil {
				wantErr(t, err, tt.wantErr)
			} else if err != nil {
				t.Fatal(err)
			}
			if n != tt.wantDeleted || l.LogStartOffset() != tt.wantStart {
				t.Fatalf("deleted %d, start %d; want %d, %d", n, l.LogStartOffset(), tt.wantDeleted, tt.wantStart)
			}
			if _, err := os.Stat(segPath(dir, 0, logSuffix)); (err == nil) != (n == 0) {
				t.Fatalf("first segment exists=%v after deleting %d", err == nil, n)
			}
			if tt.wantStart > 0 {
				if _, err := l.Read(tt.wantStart-1, 100, math.MaxInt64); !errorsIs(err, ErrOffsetOutOfRange) {
					t.Fatalf("Read below the start: %v", err)
				}
			}
			if tt.wantStart < 7 {
				b, err := l.Read(tt.wantStart, 100, math.MaxInt64)
				if err != nil || len(b) == 0 {
					t.Fatalf("Read at the start: %d bytes, %v", len(b), err)
				}
				if h, _ := ParseBatchHeader(b); h.BaseOffset != tt.wantStart {
					t.Fatalf("Read at the start returned batch %d", h.BaseOffset)
				}
			}
			if e := l.LeaderEpochs().Entries(); e[0].StartOffset != tt.wantStart && tt.wantStart < 7 {
				t.Fatalf("epochs %v", e)
			}
			// Retention never moves the start back down to a segment base.
			cfg.RetentionMs = 0
			l.SetConfig(cfg)
			if _, err := l.DeleteOldSegmentsBelow(1<<40, math.MaxInt64); err != nil {
				t.Fatal(err)
			}
			if l.LogStartOffset() < tt.wantStart {
				t.Fatalf("retention moved the start back to %d", l.LogStartOffset())
			}
			// A reopen starts at the first segment; the caller raises it
			// from its checkpoint.
			start := l.LogStartOffset()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l2 := openLog(t, dir, cfg, 0)
			if _, err := l2.IncrementLogStartOffset(start); err != nil {
				t.Fatal(err)
			}
			if l2.LogStartOffset() != start || l2.LogEndOffset() != 7 {
				t.Fatalf("reopened LSO %d LEO %d, want %d 7", l2.LogStartOffset(), l2.LogEndOffset(), start)
			}
		})
	}
	t.Run("truncate below the start empties the log", func(t *testing.T) {
		t.Parallel()
		l, _, _ := setup(t)
		if _, err := l.IncrementLogStartOffset(5); err != nil {
			t.Fatal(err)
		}
		if err := l.TruncateTo(4); err != nil {
			t.Fatal(err)
		}
		if l.LogStartOffset() != 4 || l.LogEndOffset() != 4 {
			t.Fatalf("LSO %d LEO %d, want 4 4", l.LogStartOffset(), l.LogEndOffset())
		}
	})
}

func TestSize(t *testing.T) {
	t.Parallel()
	batchSize := int64(len(simpleBatch(1, 0)))
	cfg := testConfig(t)
	cfg.SegmentBytes = 2 * batchSize
	l := openLog(t, t.TempDir(), cfg, 0)
	if l.Size() != 0 {
		t.Fatalf("empty log size %d", l.Size())
	}
	for i := range 5 {
		mustAppend(t, l, simpleBatch(1, int64(i)))
	}
	if got := l.Size(); got != 5*batchSize {
		t.Fatalf("size %d, want %d", got, 5*batchSize)
	}
	if _, err := l.IncrementLogStartOffset(2); err != nil {
		t.Fatal(err)
	}
	if got := l.Size(); got != 3*batchSize {
		t.Fatalf("size after deleting a segment %d, want %d", got, 3*batchSize)
	}
}
