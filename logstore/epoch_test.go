package logstore

import (
	"os"
	"path/filepath"
	"testing"
)

func newEpochCache(t *testing.T, entries ...EpochEntry) *LeaderEpochCache {
	t.Helper()
	c, err := OpenLeaderEpochCache(filepath.Join(t.TempDir(), LeaderEpochCheckpointFile))
	must(t, err)
	for _, e := range entries {
		must(t, c.Assign(e.LeaderEpoch, e.StartOffset))
	}
	return c
}

func TestLeaderEpochCacheAssign(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		assigns []EpochEntry
		want    []EpochEntry
	}{
		{"first", []EpochEntry{{1, 0}}, []EpochEntry{{1, 0}}},
		{"increasing", []EpochEntry{{1, 0}, {2, 10}, {5, 20}}, []EpochEntry{{1, 0}, {2, 10}, {5, 20}}},
		{"same epoch ignored", []EpochEntry{{1, 0}, {1, 10}}, []EpochEntry{{1, 0}}},
		{"lower epoch ignored", []EpochEntry{{3, 0}, {2, 10}}, []EpochEntry{{3, 0}}},
		{"start below latest ignored", []EpochEntry{{1, 10}, {2, 5}}, []EpochEntry{{1, 10}}},
		{"same start replaces the empty epoch", []EpochEntry{{1, 0}, {2, 10}, {3, 10}}, []EpochEntry{{1, 0}, {3, 10}}},
		{"negative epoch ignored", []EpochEntry{{-1, 0}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newEpochCache(t, tt.assigns...)
			checkEpochs(t, c.Entries(), tt.want)
			// Persisted: a reopen sees the same.
			c2, err := OpenLeaderEpochCache(c.path)
			must(t, err)
			checkEpochs(t, c2.Entries(), tt.want)
		})
	}
}

// TestLeaderEpochCacheEndOffsetFor covers the KIP-101/KIP-279 answers of
// OffsetsForLeaderEpoch, as Kafka 2.x's LeaderEpochFileCache.endOffsetFor.
func TestLeaderEpochCacheEndOffsetFor(t *testing.T) {
	t.Parallel()
	const leo = 100
	tests := []struct {
		name       string
		entries    []EpochEntry
		requested  int32
		wantEpoch  int32
		wantOffset int64
	}{
		{"empty cache", nil, 1, -1, -1},
		{"undefined epoch", []EpochEntry{{1, 0}}, -1, -1, -1},
		{"latest epoch gets LEO", []EpochEntry{{1, 0}, {3, 50}}, 3, 3, leo},
		{"earlier epoch ends where the next starts", []EpochEntry{{1, 0}, {3, 50}}, 1, 1, 50},
		{"missing epoch answers the floor epoch", []EpochEntry{{1, 0}, {3, 50}, {5, 80}}, 4, 3, 80},
		{"gap epoch between entries", []EpochEntry{{1, 0}, {3, 50}}, 2, 1, 50},
		{"above the latest is undefined", []EpochEntry{{1, 0}, {3, 50}}, 4, -1, -1},
		{"below the first answers the first start", []EpochEntry{{4, 30}, {6, 60}}, 2, 2, 30},
		{"single entry latest", []EpochEntry{{0, 0}}, 0, 0, leo},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newEpochCache(t, tt.entries...)
			e, off := c.EndOffsetFor(tt.requested, leo)
			if e != tt.wantEpoch || off != tt.wantOffset {
				t.Fatalf("EndOffsetFor(%d) = (%d, %d), want (%d, %d)", tt.requested, e, off, tt.wantEpoch, tt.wantOffset)
			}
		})
	}
}

func TestLeaderEpochCacheTruncate(t *testing.T) {
	t.Parallel()
	base := []EpochEntry{{1, 0}, {2, 10}, {4, 20}}
	tests := []struct {
		name string
		op   func(c *LeaderEpochCache) error
		want []EpochEntry
	}{
		{"from end above all", func(c *LeaderEpochCache) error { return c.TruncateFromEnd(30) }, base},
		{"from end at a start", func(c *LeaderEpochCache) error { return c.TruncateFromEnd(20) }, base[:2]},
		{"from end inside", func(c *LeaderEpochCache) error { return c.TruncateFromEnd(15) }, base[:2]},
		{"from end to zero", func(c *LeaderEpochCache) error { return c.TruncateFromEnd(0) }, nil},
		{"from start at zero", func(c *LeaderEpochCache) error { return c.TruncateFromStart(0) }, base},
		{"from start inside first", func(c *LeaderEpochCache) error { return c.TruncateFromStart(5) }, []EpochEntry{{1, 5}, {2, 10}, {4, 20}}},
		{"from start at a start", func(c *LeaderEpochCache) error { return c.TruncateFromStart(10) }, []EpochEntry{{2, 10}, {4, 20}}},
		{"from start past the last", func(c *LeaderEpochCache) error { return c.TruncateFromStart(25) }, []EpochEntry{{4, 25}}},
		{"clear", func(c *LeaderEpochCache) error { return c.Clear() }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newEpochCache(t, base...)
			must(t, tt.op(c))
			checkEpochs(t, c.Entries(), tt.want)
			c2, err := OpenLeaderEpochCache(c.path)
			must(t, err)
			checkEpochs(t, c2.Entries(), tt.want)
		})
	}
}

func TestLeaderEpochCacheFileFormat(t *testing.T) {
	t.Parallel()
	c := newEpochCache(t, EpochEntry{0, 0}, EpochEntry{3, 17})
	data, err := os.ReadFile(c.path)
	must(t, err)
	if want := "0\n2\n0 0\n3 17\n"; string(data) != want {
		t.Fatalf("file %q, want %q", data, want)
	}
	for _, bad := range []string{"0\n1\n3\n", "0\n2\n3 17\n2 20\n", "1\n0\n", "0\n1\nx 1\n"} {
		must(t, os.WriteFile(c.path, []byte(bad), 0o644))
		if _, err := OpenLeaderEpochCache(c.path); !errorsIs(err, ErrCorrupt) {
			t.Fatalf("%q: %v, want ErrCorrupt", bad, err)
		}
	}
}
