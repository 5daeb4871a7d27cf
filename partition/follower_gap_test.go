package partition

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/internal/recordcodec"
	"github.com/kafkazk/broker/logstore"
)

// TestReplicationFollowerCatchesUpOnCleanedLog: a replica that was down
// while the leader's compacted log was written and cleaned fetches from
// its LEO and gets batches that start above it (the gaps the cleaner
// left). It must take them, reach the leader's LEO, rejoin the ISR, and
// keep its log across a restart (its segments, rolled at gaps, stay
// contiguous so recovery deletes nothing).
func TestReplicationFollowerCatchesUpOnCleanedLog(t *testing.T) {
	cfg := cluster.DefaultLogConfig()
	cfg.MinInsyncReplicas = 1
	cfg.CleanupPolicy, cfg.Compact = "compact", true
	cfg.SegmentBytes = 150
	s := newSim(t, 3, cfg)
	s.fail(3)
	leader := s.zk.get().Leader
	for round := range 6 {
		for key := range 8 {
			if round > 0 && key%2 == 1 && round%2 == 0 {
				continue // odd keys keep an older value: gaps between survivors
			}
			b := kvBatch(int64(round), kv{key: []byte(fmt.Sprintf("k%d", key)), value: []byte(fmt.Sprintf("r%d", round))})
			if _, err := s.mgr(leader).Append(tp0, b, 1); err != nil {
				t.Fatal(err)
			}
		}
		s.catchUp()
	}
	r, err := s.mgr(leader).get(tp0)
	if err != nil {
		t.Fatal(err)
	}
	st, err := r.log.Clean(logstore.CleanConfig{UpperOffset: s.status(leader).HighWatermark, NowMs: 1 << 40,
		DeleteRetentionMs: 1 << 40, Map: logstore.NewOffsetMap(1 << 16), Codec: recordcodec.Codecs{}})
	if err != nil || st.EndOffset == 0 {
		t.Fatalf("clean: %+v, %v", st, err)
	}
	first, err := r.log.Read(0, 1, s.status(leader).HighWatermark)
	if err != nil || len(first) < logstore.BatchHeaderSize {
		t.Fatalf("leader Read(0): %d bytes, %v", len(first), err)
	}
	if h, err := logstore.ParseBatchHeader(first); err != nil || h.BaseOffset == 0 {
		t.Fatalf("leader's first batch after cleaning %+v, %v: want one above 0", h, err)
	}

	s.restart(3)
	want := s.status(leader).LogEndOffset
	for i := 0; i < 200 && s.status(3).LogEndOffset < want; i++ {
		s.fetch(3) // one leader segment per fetch at most
	}
	s.catchUp()
	if got := s.status(3).LogEndOffset; got != want {
		t.Fatalf("follower LEO %d, leader's %d", got, want)
	}
	sameLog(t, s, leader, 3)
	if isr := s.zk.get().Isr; !slices.Contains(isr, 3) {
		t.Fatalf("znode ISR %v, want 3 back in it", isr)
	}
	s.restart(3)
	if got := s.status(3).LogEndOffset; got != want {
		t.Fatalf("follower LEO %d after a restart, want %d", got, want)
	}
	sameLog(t, s, leader, 3)
}

// sameLog checks that brokers a and b hold the same batches, byte for
// byte, read one Read at a time (their segments may differ: a cleaned log
// is regrouped).
func sameLog(t *testing.T, s *sim, a, b int32) {
	t.Helper()
	all := func(id int32) []byte {
		r, err := s.mgr(id).get(tp0)
		if err != nil {
			t.Fatal(err)
		}
		var out []byte
		for off := r.log.LogStartOffset(); off < r.log.LogEndOffset(); {
			data, err := r.log.Read(off, 1<<20, r.log.LogEndOffset())
			if err != nil || len(data) == 0 {
				t.Fatalf("broker %d Read(%d): %d bytes, %v", id, off, len(data), err)
			}
			it := logstore.NewBatchIter(data)
			for it.Next() {
				out = append(out, it.Batch()...)
				off = it.Header().NextOffset()
			}
		}
		return out
	}
	if !bytes.Equal(all(a), all(b)) {
		t.Fatalf("logs of brokers %d and %d differ", a, b)
	}
}
