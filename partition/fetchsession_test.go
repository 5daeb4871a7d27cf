package partition

import (
	"errors"
	"testing"
)

// PeekFetch agrees with Read on the offsets, the error, and whether there
// are records, for followers and consumers, without recording a fetch.
func TestPeekFetchMatchesRead(t *testing.T) {
	m, _ := newLeaderManager(t, 1, []int32{1, 2}, []int32{1, 2})
	for i := range 3 {
		if _, err := m.Append(tp0, buildBatch(batchSpec{records: 2, valueSize: 8, timestamp: int64(i)}), 1); err != nil {
			t.Fatal(err)
		}
	}
	followerFetch(t, m, 4, 0) // follower 2 at 4 of 6: HW 4
	before := followerLEO(t, m)
	for _, replica := range []int32{-1, 2} {
		for _, iso := range []int8{0, 1} {
			for off := int64(-1); off <= 7; off++ {
				req := ReadRequest{FetchOffset: off, MaxBytes: 1 << 20, ReplicaID: replica, CurrentLeaderEpoch: 0, IsolationLevel: iso}
				// Read first: a follower's Read records its fetch, which
				// may move the HW that both then answer; put the follower
				// back at 4 (the HW stays) and peek, which records nothing.
				res, rerr := m.Read(tp0, req)
				if replica >= 0 {
					followerFetch(t, m, 4, 0)
				}
				pk, perr := m.PeekFetch(tp0, req)
				if got := followerLEO(t, m); got != before {
					t.Fatalf("PeekFetch recorded a follower fetch: LEO %d, was %d", got, before)
				}
				if !errors.Is(perr, unwrapSentinel(rerr)) || (perr == nil) != (rerr == nil) {
					t.Fatalf("replica %d iso %d offset %d: peek error %v, read error %v", replica, iso, off, perr, rerr)
				}
				if rerr != nil {
					continue
				}
				if pk.Readable != (len(res.Records) > 0) || pk.HighWatermark != res.HighWatermark ||
					pk.LastStableOffset != res.LastStableOffset || pk.LogStartOffset != res.LogStartOffset {
					t.Fatalf("replica %d iso %d offset %d: peek %+v, read %d record bytes HW %d LSO %d start %d", replica, iso, off,
						pk, len(res.Records), res.HighWatermark, res.LastStableOffset, res.LogStartOffset)
				}
			}
		}
	}
	if _, err := m.PeekFetch(tp0, ReadRequest{FetchOffset: 0, ReplicaID: 2, CurrentLeaderEpoch: 5}); !errors.Is(err, ErrUnknownLeaderEpoch) {
		t.Errorf("peek with a future leader epoch: %v, want ErrUnknownLeaderEpoch", err)
	}
}

// unwrapSentinel is the package sentinel err wraps, or err.
func unwrapSentinel(err error) error {
	for _, s := range []error{ErrOffsetOutOfRange, ErrNotLeader, ErrFencedLeaderEpoch, ErrUnknownLeaderEpoch, ErrUnknownTopicOrPartition} {
		if errors.Is(err, s) {
			return s
		}
	}
	return err
}

func followerLEO(t *testing.T, m *Manager) int64 {
	t.Helper()
	for _, st := range m.PartitionStatus() {
		for _, f := range st.Followers {
			if st.TopicPartition == tp0 && f.BrokerID == 2 {
				return f.LogEndOffset
			}
		}
	}
	t.Fatal("no follower 2 of tp0")
	return 0
}
