package logstore

import (
	"testing"
	"time"
)

// TestRollFlushAdvancesRecoveryPoint: appends that roll segments, with no
// Flush and no flush policy, leave the rolled segments fsynced in the
// background, and RecoveryPoint reaches the base of the active segment
// (Kafka's roll schedules flushUptoOffsetExclusive(newSegment.baseOffset)).
func TestRollFlushAdvancesRecoveryPoint(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	batchSize := int64(len(simpleBatch(2, 0)))
	cfg.SegmentBytes = 3 * batchSize
	l := openLog(t, t.TempDir(), cfg, 0)
	for i := range 10 { // segments of 6 offsets: 0, 6, 12, 18 (active)
		mustAppend(t, l, simpleBatch(2, int64(1000+i)))
	}
	const activeBase = 18
	deadline := time.Now().Add(5 * time.Second)
	for l.RecoveryPoint() < activeBase && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if rp := l.RecoveryPoint(); rp != activeBase {
		t.Fatalf("RecoveryPoint %d after rolling to segment %d with no Flush, want %d", rp, activeBase, activeBase)
	}
}
