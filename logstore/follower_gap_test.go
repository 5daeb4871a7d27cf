package logstore

import (
	"bytes"
	"math"
	"slices"
	"testing"
)

// cleanedLeader is a leader log of several rounds of keyed records (and a
// keyless one per round) in segments of segBytes, cleaned: its surviving
// batches have gaps between them, and its first batch is above offset 0.
func cleanedLeader(t *testing.T, segBytes int64) *Log {
	t.Helper()
	leader := openLog(t, t.TempDir(), smallSegConfig(t, segBytes), 0)
	writeRounds(t, leader, 12, 4, 1, 1)
	for j := 0; j < 12; j += 2 { // the odd keys of round 3 survive, with gaps
		mustAppend(t, leader, kvBatch(t, kvOpts{ts: 1}, k(keyName(j), "r4")))
	}
	writeRounds(t, leader, 2, 2, 1, 1) // and a few for the active segment
	mustCleanAll(t, leader, cleanCfg(NewOffsetMap(1<<16)))
	_, hdrs := logContents(t, leader)
	gaps := 0
	for i := 1; i < len(hdrs); i++ {
		if hdrs[i].BaseOffset > hdrs[i-1].NextOffset() {
			gaps++
		}
	}
	fillers := 0 // the cleaner's empty batch that takes a segment to the next base
	for _, h := range hdrs {
		if h.NumRecords == 0 && h.ProducerID == -1 {
			fillers++
		}
	}
	if hdrs[0].BaseOffset == 0 || gaps < 5 || fillers == 0 {
		t.Fatalf("cleaned leader's first batch at %d, %d gaps, %d filler batches: not enough to test", hdrs[0].BaseOffset, gaps, fillers)
	}
	return leader
}

// replicate appends the leader's Read results to follower as a replica
// fetcher does: each fetch at the follower's LEO, maxBytes at a time.
func replicate(t *testing.T, leader, follower *Log, maxBytes int32) {
	t.Helper()
	for n := 0; follower.LogEndOffset() < leader.LogEndOffset(); n++ {
		off := follower.LogEndOffset()
		b, err := leader.Read(off, maxBytes, math.MaxInt64)
		if err != nil {
			t.Fatalf("leader Read(%d): %v", off, err)
		}
		info, err := follower.AppendAsFollower(b)
		if err != nil {
			t.Fatalf("follower append of the leader's Read(%d): %v", off, err)
		}
		if want := info.Batches[len(info.Batches)-1].NextOffset(); follower.LogEndOffset() != want {
			t.Fatalf("follower LEO %d after an append ending at %d", follower.LogEndOffset(), want)
		}
		if n > 10000 {
			t.Fatal("follower does not catch up")
		}
	}
}

// TestFollowerReplicatesCleanedLogWithGaps: a fresh follower fetching from
// offset 0 of a cleaned leader log gets batches that start above its log
// end offset (Kafka rejects only offsets below it); it takes them and ends
// with the leader's contents and LEO. An append below the LEO is still
// ErrOffsetMismatch.
func TestFollowerReplicatesCleanedLogWithGaps(t *testing.T) {
	leader := cleanedLeader(t, 1500)
	want, _ := logContents(t, leader)
	for _, maxBytes := range []int32{1, 1 << 20} {
		follower := openLog(t, t.TempDir(), smallSegConfig(t, 1500), 0)
		replicate(t, leader, follower, maxBytes)
		if got, _ := logContents(t, follower); !slices.Equal(got, want) {
			t.Fatalf("maxBytes %d: the follower's log differs from the leader's", maxBytes)
		}
		b := makeBatch(batchSpec{records: 1, baseOffset: follower.LogEndOffset() - 1})
		_, err := follower.AppendAsFollower(b)
		wantErr(t, err, ErrOffsetMismatch)
	}
}

// TestFollowerOfCleanedLogSurvivesRestart: a follower with small segments
// replicating a cleaned log rolls at gaps; its segments must stay
// contiguous, so that a clean reopen, with the recovery point at the LEO or
// at 0 (every segment validated), keeps everything.

func TestFollowerOfCleanedLogSurvivesRestart(t *testing.T) {
	leader := cleanedLeader(t, 1500)
	want, _ := logContents(t, leader)
	dir := t.TempDir()
	cfg := smallSegConfig(t, 120)
	follower := openLog(t, dir, cfg, 0)
	replicate(t, leader, follower, 1)
	leo := follower.LogEndOffset()
	if n := len(follower.segments); n < 5 {
		t.Fatalf("%d follower segments: too few to test rolls at gaps", n)
	}
	if err := follower.Close(); err != nil {
		t.Fatal(err)
	}
	for _, rp := range []int64{leo, 0} {
		l, err := Open(dir, cfg, rp)
		if err != nil {
			t.Fatalf("reopen with recovery point %d: %v", rp, err)
		}
		if l.LogEndOffset() != leo {
			t.Fatalf("reopen with recovery point %d: LEO %d, want %d", rp, l.LogEndOffset(), leo)
		}
		if got, _ := logContents(t, l); !slices.Equal(got, want) {
			t.Fatalf("reopen with recovery point %d: contents differ from the leader's", rp)
		}
		// Segments start at the LEO of their roll, below their first
		// batch: a Read at any offset, gaps included, finds the batch
		// the leader's does.
		for off := int64(0); off < leo; off++ {
			got, err := l.Read(off, 1, math.MaxInt64)
			if err != nil {
				t.Fatalf("follower Read(%d): %v", off, err)
			}
			lb, err := leader.Read(off, 1, math.MaxInt64)
			if err != nil {
				t.Fatalf("leader Read(%d): %v", off, err)
			}
			gh, _ := ParseBatchHeader(got)
			lh, _ := ParseBatchHeader(lb)
			if gh.BaseOffset != lh.BaseOffset || !bytes.Equal(got[:gh.Size()], lb[:lh.Size()]) {
				t.Fatalf("Read(%d): follower batch at %d, leader's at %d", off, gh.BaseOffset, lh.BaseOffset)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
