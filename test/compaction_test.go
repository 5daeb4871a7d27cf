package test

// A compacted RF=3 topic written by a real client is cleaned on every
// replica: a consumer from the start then reads the last value of each
// live key and nothing of a deleted one, and the three replicas' segment
// files hold the same keys.

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// compactionRecords is how many records TestCompactedTopicCleanedOnEveryReplica
// writes before its tombstones: BROKER_TEST_COMPACT_RECORDS, else the
// issue's 1000000 (over 10000 keys, 1000 of them deleted), which takes
// about 5 s here; set it lower on a slow machine.
func compactionRecords(t *testing.T) int {
	if v := os.Getenv("BROKER_TEST_COMPACT_RECORDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("BROKER_TEST_COMPACT_RECORDS=%q: want a positive count", v)
		}
		return n
	}
	return 1000000
}

// liveKeys is the last value per key of recs, tombstoned keys left out.
func liveKeys(recs []Rec) map[string]string {
	out := map[string]string{}
	for _, r := range recs {
		if r.Value == nil {
			delete(out, string(r.Key))
		} else {
			out[string(r.Key)] = string(r.Value)
		}
	}
	return out
}

// activeSegmentBase is the base offset of the last segment file in dir.
func activeSegmentBase(dir string) (int64, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(files) == 0 {
		return 0, fmt.Errorf("segments of %s: %v (%d files)", dir, err, len(files))
	}
	sort.Strings(files)
	return strconv.ParseInt(strings.TrimSuffix(filepath.Base(files[len(files)-1]), ".log"), 10, 64)
}

func TestCompactedTopicCleanedOnEveryReplica(t *testing.T) {
	n := compactionRecords(t)
	const keys, deleted = 10000, 1000
	c := NewCluster(t, 3, failoverProps(map[string]string{
		"log.cleaner.backoff.ms":         "200",
		"log.cleaner.dedupe.buffer.size": strconv.Itoa(8 << 20),
	}))
	const topic = "compacted"
	createTopic(t, c, topic, 1, 3, nil, map[string]string{
		"cleanup.policy":            "compact",
		"segment.bytes":             strconv.Itoa(1 << 20),
		"min.cleanable.dirty.ratio": "0.01",
	})

	// The default kgo producer (idempotent, acks=all), uncompressed so
	// that the segment files can be read back.
	cl := c.Client(kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerLinger(5*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var failed atomic.Int64
	var firstErr atomic.Value
	cb := func(_ *kgo.Record, err error) {
		if err != nil && failed.Add(1) == 1 {
			firstErr.Store(err)
		}
	}
	pad := strings.Repeat("x", 64)
	want := map[string]string{}
	started := time.Now()
	for i := range n {
		k := fmt.Sprintf("key-%05d", i%keys)
		v := fmt.Sprintf("%d-%s", i, pad)
		want[k] = v
		cl.Produce(ctx, &kgo.Record{Key: []byte(k), Value: []byte(v)}, cb)
	}
	// Tombstones for every tenth key.
	for i := 0; i < keys; i += keys / deleted {
		k := fmt.Sprintf("key-%05d", i)
		delete(want, k)
		cl.Produce(ctx, &kgo.Record{Key: []byte(k), Value: nil}, cb)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if f := failed.Load(); f > 0 {
		t.Fatalf("%d produces failed, the first: %v", f, firstErr.Load())
	}
	total := int64(n + deleted)
	t.Logf("produced %d records over %d keys (%d deleted) in %s", total, keys, deleted, time.Since(started).Round(time.Millisecond))

	// Wait until every replica is cleaned up to its active segment: below
	// it, no key appears twice.
	dirs := map[int32]string{}
	for _, b := range c.Brokers {
		dirs[b.ID()] = filepath.Join(b.DataDir, topic+"-0")
	}
	bound := int(total / 4)
	cleaned := time.Now()
	replicaRecs := map[int32][]Rec{}
	eventually(t, 3*time.Minute, func() error {
		for id, dir := range dirs {
			recs, err := readSegments(dir, 0)
			if err != nil {
				return fmt.Errorf("broker %d: %w", id, err) // a swap under the read: read again
			}
			if last := recs[len(recs)-1].Offset; last != total-1 {
				return fmt.Errorf("broker %d ends at offset %d, want %d", id, last, total-1)
			}
			active, err := activeSegmentBase(dir)
			if err != nil {
				return err
			}
			seen := map[string]int64{}
			for _, r := range recs {
				if r.Offset >= active {
					break
				}
				if prev, ok := seen[string(r.Key)]; ok {
					return fmt.Errorf("broker %d: key %s at %d and %d, below the active segment at %d", id, r.Key, prev, r.Offset, active)
				}
				seen[string(r.Key)] = r.Offset
			}
			if len(recs) > bound {
				return fmt.Errorf("broker %d holds %d records, want at most %d once cleaned", id, len(recs), bound)
			}
			replicaRecs[id] = recs
		}
		return nil
	})
	t.Logf("cleaned on all three replicas %s after the last produce", time.Since(cleaned).Round(time.Millisecond))

	// A consumer from the start.
	cons := c.Client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var consumed []Rec
	for done := false; !done; {
		fetches := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consuming: %v after %d records", err, len(consumed))
		}
		fetches.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		fetches.EachRecord(func(r *kgo.Record) {
			consumed = append(consumed, Rec{Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value})
			if r.Offset == total-1 {
				done = true
			}
		})
	}
	if len(consumed) > bound {
		t.Errorf("the consumer read %d records, want at most %d after cleaning", len(consumed), bound)
	}
	got := liveKeys(consumed)
	if !maps.Equal(got, want) {
		missing, wrong := 0, 0
		for k, v := range want {
			if g, ok := got[k]; !ok {
				missing++
			} else if g != v {
				wrong++
			}
		}
		t.Errorf("the consumer's live keys: %d, want %d (%d missing, %d with an older value, %d deleted keys present)",
			len(got), len(want), missing, wrong, len(got)-len(want)+missing)
	}
	for id, recs := range replicaRecs {
		if lk := liveKeys(recs); !maps.Equal(lk, want) {
			t.Errorf("broker %d's segment files: %d live keys, want %d", id, len(lk), len(want))
		}
	}
	t.Logf("consumer read %d of %d records; replicas hold %d, %d and %d", len(consumed), total,
		len(replicaRecs[1]), len(replicaRecs[2]), len(replicaRecs[3]))
}
