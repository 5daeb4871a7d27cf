package test

// A commit storm against __consumer_offsets: one group commits offsets
// 100000 times (the figure; BROKER_TEST_COMMIT_STORM sets another)
// for a fixed set of partitions on a 3-broker cluster
// with the offsets topic at RF 3. With the log cleaner on, the group's
// offsets partition is bounded on every replica once cleaned (below the
// active segment, one record per live key); the group's coordinator is
// then killed with SIGKILL and the new one must answer OffsetFetch with
// the last commits. The same storm with log.cleaner.enable=false gives
// the uncleaned figures, logged beside the cleaned ones: what a new
// coordinator reads, and how long its load takes, follows the live
// offsets with the cleaner and the whole history without it. Timings are
// logged, never asserted.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	stormGroup      = "storm-group"
	stormTopic      = "storm"
	stormPartitions = 10
	// stormWorkers commit concurrently, worker w owning partitions w and
	// w+stormWorkers, so that the last commit of each partition is known.
	stormWorkers       = 5
	stormOffsetsParts  = 3
	stormSegmentBytes  = 1 << 20
	stormOffsetsTopic  = "__consumer_offsets"
	defaultCommitStorm = 100000
)

// commitStormCount is BROKER_TEST_COMMIT_STORM, else defaultCommitStorm,
// the 100000: the two storms, their cleaning and failovers take
// about 50 s on a 2-core machine; set it lower on a slower one (above
// about 12000 the storm fills more than two segments, which the bound
// needs to mean anything).
func commitStormCount(t *testing.T) int {
	if v := os.Getenv("BROKER_TEST_COMMIT_STORM"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < stormWorkers {
			t.Fatalf("BROKER_TEST_COMMIT_STORM=%q: want a count of at least %d", v, stormWorkers)
		}
		return n
	}
	return defaultCommitStorm
}

// stormPartitionFor is Kafka's partitionFor(groupId) for an ASCII group
// id: Utils.abs(groupId.hashCode) % n.
func stormPartitionFor(group string, n int32) int32 {
	var h int32
	for i := 0; i < len(group); i++ {
		h = 31*h + int32(group[i])
	}
	return (h & 0x7fffffff) % n
}

// stormReplica describes one replica's copy of the group's offsets
// partition, read from its segment files.
type stormReplica struct {
	Bytes       int64   // sum of the .log files
	Segments    []int64 // each .log file's size, in offset order
	Records     int
	BelowActive int // records below the active segment
	BelowKeys   int // distinct keys below the active segment
	Keys        int // distinct keys
}

// stormResult is what one storm run measured.
type stormResult struct {
	Commits   int
	StormTook time.Duration
	EndOffset int64 // log end offset of the group's offsets partition
	Replicas  map[int32]stormReplica
	// Failover is kill -9 of the coordinator to the first OffsetFetch
	// answered with the last commits; LoadTook and LoadEnd are what the
	// new coordinator logged for loading the partition.
	Failover time.Duration
	LoadTook time.Duration
	LoadEnd  int64
}

func TestOffsetsCommitStormBoundedAndFastFailover(t *testing.T) {
	n := commitStormCount(t)
	var cleaned, uncleaned stormResult
	if !t.Run("cleaned", func(t *testing.T) { cleaned = runCommitStorm(t, n, true) }) {
		return
	}
	if !t.Run("uncleaned", func(t *testing.T) { uncleaned = runCommitStorm(t, n, false) }) {
		return
	}
	for _, r := range []struct {
		name string
		res  stormResult
	}{{"cleaned", cleaned}, {"uncleaned", uncleaned}} {
		var bytes int64
		var recs int
		for _, f := range r.res.Replicas {
			bytes, recs = max(bytes, f.Bytes), max(recs, f.Records)
		}
		t.Logf("%-9s: %d commits in %s; offsets partition end offset %d; largest replica %d records, %d bytes; "+
			"failover to correct OffsetFetch %s; new coordinator's load %s (to end offset %d)",
			r.name, r.res.Commits, r.res.StormTook.Round(time.Millisecond), r.res.EndOffset, recs, bytes,
			r.res.Failover.Round(time.Millisecond), r.res.LoadTook.Round(time.Microsecond), r.res.LoadEnd)
	}
	// Far below the uncompacted size, once the storm wrote more than the
	// cleaned bound.
	for id, f := range cleaned.Replicas {
		if u := uncleaned.Replicas[id].Bytes; u > 2*stormSegmentBytes && f.Bytes > u/2 {
			t.Errorf("broker %d: %d bytes cleaned, %d uncleaned: want well below", id, f.Bytes, u)
		}
	}
	if cleaned.LoadTook > 0 {
		t.Logf("load time uncleaned/cleaned: %.1fx; failover time uncleaned/cleaned: %.2fx",
			float64(uncleaned.LoadTook)/float64(cleaned.LoadTook), float64(uncleaned.Failover)/float64(cleaned.Failover))
	}
}

// runCommitStorm runs one storm of n commits on a fresh cluster, with or
// without the log cleaner, checks the offsets partition (bounded once
// cleaned, whole without the cleaner) and the committed offsets after a
// coordinator failover, and returns the figures.
func runCommitStorm(t *testing.T, n int, clean bool) stormResult {
	c := NewCluster(t, 3, failoverProps(map[string]string{
		"offsets.topic.replication.factor": "3",
		"offsets.topic.num.partitions":     strconv.Itoa(stormOffsetsParts),
		"offsets.topic.segment.bytes":      strconv.Itoa(stormSegmentBytes),
		"log.cleaner.enable":               strconv.FormatBool(clean),
		"log.cleaner.backoff.ms":           "200",
		"log.cleaner.min.cleanable.ratio":  "0.1",
		"log.cleaner.dedupe.buffer.size":   strconv.Itoa(8 << 20),
	}))
	createTopic(t, c, stormTopic, stormPartitions, 3, nil, nil)
	res := stormResult{Commits: n, Replicas: map[int32]stormReplica{}}
	part := stormPartitionFor(stormGroup, stormOffsetsParts)

	// The first commit creates __consumer_offsets: retry it until the
	// coordinator has loaded its partition.
	adm := kadm.NewClient(c.Client())
	eventually(t, time.Minute, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var offs kadm.Offsets
		offs.Add(kadm.Offset{Topic: stormTopic, Partition: 0, At: 0, LeaderEpoch: -1})
		resp, err := adm.CommitOffsets(ctx, stormGroup, offs)
		if err == nil {
			err = resp.Error()
		}
		return err
	})

	// The storm: n commit requests, worker w sending commits w, w+W, ...
	// of its two partitions at offset i+1.
	want := map[int32]int64{}
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	started := time.Now()
	for w := range stormWorkers {
		wg.Add(1)
		wcl := kadm.NewClient(c.Client())
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			var last int64
			for i := w; i < n; i += stormWorkers {
				var offs kadm.Offsets
				for p := int32(w); p < stormPartitions; p += stormWorkers {
					offs.Add(kadm.Offset{Topic: stormTopic, Partition: p, At: int64(i + 1), LeaderEpoch: -1})
				}
				resp, err := wcl.CommitOffsets(ctx, stormGroup, offs)
				if err == nil {
					err = resp.Error()
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("commit %d: %w", i, err))
					mu.Unlock()
					return
				}
				last = int64(i + 1)
			}
			mu.Lock()
			for p := int32(w); p < stormPartitions; p += stormWorkers {
				want[p] = last
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.StormTook = time.Since(started)
	if len(errs) > 0 {
		t.Fatalf("%d workers failed, the first: %v", len(errs), errs[0])
	}
	t.Logf("cleaner %v: %d commit requests (%d partitions, %d workers) in %s, %.0f/s", clean, n, stormPartitions,
		stormWorkers, res.StormTook.Round(time.Millisecond), float64(n)/res.StormTook.Seconds())

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	ends, err := adm.ListEndOffsets(ctx, stormOffsetsTopic)
	cancel()
	if err != nil {
		t.Fatalf("end offsets of %s: %v", stormOffsetsTopic, err)
	}
	end, ok := ends.Lookup(stormOffsetsTopic, part)
	if !ok || end.Err != nil {
		t.Fatalf("end offset of %s-%d: %+v", stormOffsetsTopic, part, end)
	}
	res.EndOffset = end.Offset
	if res.EndOffset < int64(n) {
		t.Fatalf("%s-%d ends at %d after %d commits: the group is not on the partition computed for it", stormOffsetsTopic, part, res.EndOffset, n)
	}

	// Every replica's segment files: with the cleaner, wait until the
	// partition is cleaned up to its active segment (no key twice below
	// it) and check it is bounded; without, it holds every record.
	eventually(t, 3*time.Minute, func() error {
		for _, b := range c.Brokers {
			dir := filepath.Join(b.DataDir, fmt.Sprintf("%s-%d", stormOffsetsTopic, part))
			f, err := stormReplicaFigures(dir, res.EndOffset)
			if err != nil {
				return fmt.Errorf("broker %d: %w", b.ID(), err)
			}
			if clean && f.BelowActive > f.BelowKeys {
				return fmt.Errorf("broker %d: %d records below the active segment over %d keys: not cleaned yet", b.ID(), f.BelowActive, f.BelowKeys)
			}
			res.Replicas[b.ID()] = f
		}
		return nil
	})
	// Bounded: below the active segment at most one record per live key
	// (checked above), the live keys are the group's offsets and its
	// metadata, and the whole log is the live keys plus the active
	// segment, at most segment.bytes.
	for id, f := range res.Replicas {
		t.Logf("cleaner %v: broker %d holds %d of %d records in segments of %v bytes, %d in all (%d below the active segment), %d keys",
			clean, id, f.Records, res.EndOffset, f.Segments, f.Bytes, f.BelowActive, f.Keys)
		if f.Keys > stormPartitions+1 {
			t.Errorf("broker %d: %d distinct keys, want at most %d (the offsets and the group)", id, f.Keys, stormPartitions+1)
		}
		if clean {
			if f.Bytes > 2*stormSegmentBytes {
				t.Errorf("broker %d: %d bytes once cleaned, want at most %d (one active segment and the live keys)", id, f.Bytes, 2*stormSegmentBytes)
			}
		} else if int64(f.Records) != res.EndOffset {
			t.Errorf("broker %d: %d records without the cleaner, want all %d", id, f.Records, res.EndOffset)
		}
	}

	// Failover: kill -9 the coordinator and time the first OffsetFetch
	// answered without error (COORDINATOR_LOAD_IN_PROGRESS until the new
	// coordinator has loaded the partition), then check it holds the last
	// commits.
	coord, err := coordinatorOf(c, stormGroup)
	if err != nil {
		t.Fatalf("FindCoordinator: %v", err)
	}
	c.Broker(coord).Kill()
	killed := time.Now()
	var got map[int32]int64
	eventually(t, 2*time.Minute, func() error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.liveSeeds()...), kgo.RetryTimeout(2*time.Second))
		if err != nil {
			return err
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		resp, err := kadm.NewClient(cl).FetchOffsets(ctx, stormGroup)
		if err != nil {
			return err
		}
		if err := resp.Error(); err != nil {
			return err
		}
		got = map[int32]int64{}
		resp.Each(func(o kadm.OffsetResponse) {
			if o.Topic == stormTopic {
				got[o.Partition] = o.At
			}
		})
		if len(got) == 0 {
			return fmt.Errorf("no offsets yet")
		}
		return nil
	})
	res.Failover = time.Since(killed)
	for p := int32(0); p < stormPartitions; p++ {
		if got[p] != want[p] {
			t.Errorf("after the failover partition %d is at %d, want the last commit %d", p, got[p], want[p])
		}
	}
	if len(got) != stormPartitions {
		t.Errorf("after the failover %d partitions committed, want %d: %v", len(got), stormPartitions, got)
	}
	next, err := coordinatorOf(c, stormGroup)
	if err != nil {
		t.Fatalf("FindCoordinator after the failover: %v", err)
	}
	if next == coord {
		t.Fatalf("coordinator still %d after its kill", coord)
	}
	res.LoadTook, res.LoadEnd, err = stormLoadLogged(c.Broker(next).Log(), part)
	if err != nil {
		t.Errorf("broker %d: %v", next, err)
	}
	t.Logf("cleaner %v: killed coordinator %d; broker %d answered the last commits %s later; its load of %s-%d took %s (end offset %d)",
		clean, coord, next, res.Failover.Round(time.Millisecond), stormOffsetsTopic, part, res.LoadTook, res.LoadEnd)
	return res
}

// stormReplicaFigures reads one replica's segment files and checks that
// they end at end-1.
func stormReplicaFigures(dir string, end int64) (stormReplica, error) {
	var f stormReplica
	recs, err := readSegments(dir, 0)
	if err != nil {
		return f, err // a swap under the read: read again
	}
	if last := recs[len(recs)-1].Offset; last != end-1 {
		return f, fmt.Errorf("ends at offset %d, want %d", last, end-1)
	}
	active, err := activeSegmentBase(dir)
	if err != nil {
		return f, err
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return f, err
	}
	for _, file := range files {
		st, err := os.Stat(file)
		if err != nil {
			return f, err // a swap under the read
		}
		f.Bytes += st.Size()
		f.Segments = append(f.Segments, st.Size())
	}
	keys, below := map[string]bool{}, map[string]bool{}
	for _, r := range recs {
		keys[string(r.Key)] = true
		if r.Offset < active {
			f.BelowActive++
			below[string(r.Key)] = true
		}
	}
	f.Records, f.Keys, f.BelowKeys = len(recs), len(keys), len(below)
	return f, nil
}

// stormLoadLogged finds the last "loaded offsets partition" line for
// partition part in a broker's JSON log: the load's duration and end
// offset.
func stormLoadLogged(log string, part int32) (time.Duration, int64, error) {
	var took time.Duration
	end := int64(-1)
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, "loaded offsets partition") {
			continue
		}
		var e struct {
			Msg       string  `json:"message"`
			Partition int32   `json:"partition"`
			Took      float64 `json:"took"` // zerolog's Dur: milliseconds
			EndOffset int64   `json:"end_offset"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil || e.Msg != "loaded offsets partition" || e.Partition != part {
			continue
		}
		took, end = time.Duration(e.Took*float64(time.Millisecond)), e.EndOffset
	}
	if end < 0 {
		return 0, 0, fmt.Errorf("no \"loaded offsets partition\" line for partition %d in the log", part)
	}
	return took, end, nil
}
