package coordlog

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
)

// scriptedLog answers Load's calls from a script: batches at their base
// offsets, the high watermark, the log start offset, and errors to return
// first.
type scriptedLog struct {
	batches  [][]byte
	hw       int64
	start    int64
	leoErrs  []error
	readErrs []error
	reads    []int64 // FetchOffset of every Read
	// onRead, if set, runs before every Read is answered.
	onRead func(n int)
}

func (s *scriptedLog) LogEndOffset(cluster.TopicPartition) (int64, error) {
	if len(s.leoErrs) > 0 {
		err := s.leoErrs[0]
		s.leoErrs = s.leoErrs[1:]
		return 0, err
	}
	end := int64(0)
	for _, b := range s.batches {
		end = int64(binary.BigEndian.Uint64(b[0:8])) + int64(int32(binary.BigEndian.Uint32(b[23:27]))) + 1
	}
	return end, nil
}

func (s *scriptedLog) Read(_ cluster.TopicPartition, req partition.ReadRequest) (partition.ReadResult, error) {
	s.reads = append(s.reads, req.FetchOffset)
	if s.onRead != nil {
		s.onRead(len(s.reads))
	}
	if len(s.readErrs) > 0 {
		err := s.readErrs[0]
		s.readErrs = s.readErrs[1:]
		return partition.ReadResult{}, err
	}
	res := partition.ReadResult{Records: []byte{}, HighWatermark: s.hw, LogStartOffset: s.start}
	if req.FetchOffset < s.start {
		return res, partition.ErrOffsetOutOfRange
	}
	for _, b := range s.batches {
		last := int64(binary.BigEndian.Uint64(b[0:8])) + int64(int32(binary.BigEndian.Uint32(b[23:27])))
		if last >= req.FetchOffset && last < s.hw {
			res.Records = append(res.Records, b...)
		}
	}
	return res, nil
}

func batchAt(t *testing.T, base int64, keys ...string) []byte {
	t.Helper()
	recs := make([]Record, len(keys))
	for i, k := range keys {
		recs[i] = Record{Key: []byte(k), Value: []byte("v")}
	}
	b, err := EncodeBatch(recs, 1, CodecNone, nil)
	if err != nil {
		t.Fatal(err)
	}
	binary.BigEndian.PutUint64(b[0:8], uint64(base))
	return b
}

type loadRun struct {
	keys   []string
	sleeps []time.Duration
}

func runLoad(t *testing.T, log *scriptedLog, stale func() bool, sleep func(d time.Duration) bool) (loadRun, int64, bool) {
	t.Helper()
	var r loadRun
	if stale == nil {
		stale = func() bool { return false }
	}
	end, ok := Load{
		Log: log, TP: cluster.TopicPartition{Topic: "__internal", Partition: 3}, What: "test partition",
		Logger: zerolog.New(zerolog.NewTestWriter(t)), Walk: WalkOptions{Strict: true}, Stale: stale,
		Sleep: func(d time.Duration) bool {
			r.sleeps = append(r.sleeps, d)
			if sleep != nil {
				return sleep(d)
			}
			return true
		},
		Record: func(_ Header, _ int64, key, _ []byte) { r.keys = append(r.keys, string(key)) },
	}.Run()
	return r, end, ok
}

// TestLoadReadsToEndOffset: Load reads every record up to the end offset
// it saw first, jumping to the log start after an out-of-range read,
// retrying a failed LogEndOffset and Read after 100 ms, and polling every
// 20 ms while the high watermark is below the end.
func TestLoadReadsToEndOffset(t *testing.T) {
	log := &scriptedLog{batches: [][]byte{batchAt(t, 5, "a", "b"), batchAt(t, 7, "c")}, hw: 7, start: 5,
		leoErrs: []error{errors.New("no status yet")}}
	log.onRead = func(n int) {
		if n == 2 {
			log.readErrs = []error{partition.ErrNotLeader}
		}
		if n == 5 {
			log.hw = 8 // the followers caught up
		}
	}
	r, end, ok := runLoad(t, log, nil, nil)
	if !ok || end != 8 || len(r.keys) != 3 || r.keys[0] != "a" || r.keys[2] != "c" {
		t.Fatalf("end %d ok %v keys %v", end, ok, r.keys)
	}
	want := []time.Duration{100 * time.Millisecond, 100 * time.Millisecond, 20 * time.Millisecond}
	if len(r.sleeps) != len(want) || r.sleeps[0] != want[0] || r.sleeps[1] != want[1] || r.sleeps[2] != want[2] {
		t.Fatalf("sleeps %v, want %v", r.sleeps, want)
	}
	// Reads: 0 (out of range), 5 (failed), 5, 7 (nothing committed), 7.
	if got := log.reads; len(got) != 5 || got[0] != 0 || got[1] != 5 || got[2] != 5 || got[3] != 7 || got[4] != 7 {
		t.Fatalf("reads at %v", got)
	}
}

// TestLoadRetriesUnreadableBatch: a batch that fails its CRC is re-read
// after a backoff doubling from 100 ms to at most 1 s, from the offset
// after the last good batch, and its records count once it reads.
func TestLoadRetriesUnreadableBatch(t *testing.T) {
	good := batchAt(t, 1, "b")
	bad := append([]byte(nil), good...)
	bad[len(bad)-2] ^= 0xff
	log := &scriptedLog{batches: [][]byte{batchAt(t, 0, "a"), bad}, hw: 2}
	log.onRead = func(n int) {
		if n == 7 {
			log.batches[1] = good
		}
	}
	r, end, ok := runLoad(t, log, nil, nil)
	if !ok || end != 2 || len(r.keys) != 2 || r.keys[1] != "b" {
		t.Fatalf("end %d ok %v keys %v", end, ok, r.keys)
	}
	ms := time.Millisecond
	want := []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, time.Second, time.Second}
	if len(r.sleeps) != len(want) {
		t.Fatalf("sleeps %v, want %v", r.sleeps, want)
	}
	for i := range want {
		if r.sleeps[i] != want[i] {
			t.Fatalf("sleeps %v, want %v", r.sleeps, want)
		}
	}
	if log.reads[0] != 0 || log.reads[1] != 1 || log.reads[6] != 1 {
		t.Fatalf("reads at %v", log.reads)
	}
}

// TestLoadCompactedTail: once the high watermark is at the end and a read
// finds nothing past the last batch (compaction removed the tail), the
// load is complete.
func TestLoadCompactedTail(t *testing.T) {
	log := &scriptedLog{batches: [][]byte{batchAt(t, 0, "a")}, hw: 10}
	log.batches = append(log.batches, batchAt(t, 9, "gone")) // sets the end offset to 10
	end0, _ := log.LogEndOffset(cluster.TopicPartition{})
	log.batches = log.batches[:1]
	log.leoErrs = nil
	fixed := &fixedEnd{scriptedLog: log, end: end0}
	var keys []string
	end, ok := Load{Log: fixed, TP: cluster.TopicPartition{Topic: "__internal"}, What: "test partition",
		Stale: func() bool { return false }, Sleep: func(time.Duration) bool { t.Fatal("slept"); return false },
		Record: func(_ Header, _ int64, key, _ []byte) { keys = append(keys, string(key)) }}.Run()
	if !ok || end != 10 || len(keys) != 1 {
		t.Fatalf("end %d ok %v keys %v", end, ok, keys)
	}
}

type fixedEnd struct {
	*scriptedLog
	end int64
}

func (f *fixedEnd) LogEndOffset(cluster.TopicPartition) (int64, error) { return f.end, nil }

// TestLoadStops: Stale or a Sleep answering false ends the load with ok
// false and no further reads.
func TestLoadStops(t *testing.T) {
	log := &scriptedLog{batches: [][]byte{batchAt(t, 0, "a"), batchAt(t, 1, "b")}, hw: 1}
	calls := 0
	if _, _, ok := runLoad(t, log, func() bool { calls++; return calls > 2 }, nil); ok {
		t.Fatal("stale load completed")
	}
	reads := len(log.reads)
	if _, _, ok := runLoad(t, log, nil, func(time.Duration) bool { return false }); ok {
		t.Fatal("load completed after Sleep said closed")
	}
	if len(log.reads) != reads+2 { // reads 0 and 1, then a sleep waiting for the high watermark
		t.Fatalf("reads %v", log.reads)
	}
}
