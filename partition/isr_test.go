package partition

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestHighWatermarkCandidateProperty checks the HW rule against a naive
// restatement of Kafka 2.4+'s (§3.5) on random follower states: the
// minimum LEO over the leader, every ISR member and every follower caught
// up within the lag; an ISR member without state blocks any HW.
func TestHighWatermarkCandidateProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	now := time.Unix(5000, 0)
	lag := 10 * time.Second
	for i := 0; i < 5000; i++ {
		leo := int64(rng.IntN(100))
		followers := map[int32]*followerState{}
		isr := []int32{1}
		for id := int32(2); id <= 5; id++ {
			if rng.IntN(4) > 0 {
				f := &followerState{logEndOffset: int64(rng.IntN(int(leo)+2)) - 1}
				if rng.IntN(3) > 0 {
					f.lastCaughtUpTime = now.Add(-time.Duration(rng.IntN(20)) * time.Second)
				}
				followers[id] = f
			}
			if rng.IntN(2) == 0 {
				isr = append(isr, id)
			}
		}
		eligible := []int64{leo}
		for id := int32(2); id <= 5; id++ {
			f, inIsr := followers[id], slices.Contains(isr, id)
			switch {
			case inIsr && f == nil:
				eligible = append(eligible, -1)
			case f == nil:
			case inIsr || (!f.lastCaughtUpTime.IsZero() && now.Sub(f.lastCaughtUpTime) <= lag):
				eligible = append(eligible, f.logEndOffset)
			}
		}
		if got, want := highWatermarkCandidate(leo, 1, isr, followers, now, lag), slices.Min(eligible); got != want {
			t.Fatalf("case %d: leo %d isr %v: candidate %d, want %d", i, leo, isr, got, want)
		}
	}
}
