package test

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkazk/broker/internal/chaos"
)

// Header is one record header.
type Header struct {
	Key   string
	Value []byte
}

// Rec is one record as a producer sent it or a consumer read it. Offset is
// the acknowledged (or read) offset; -1 means the producing client does not
// report offsets, and the checker then finds the record by key.
type Rec struct {
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte
	Headers   []Header
}

func (r Rec) String() string {
	return fmt.Sprintf("p%d@%d key=%q value=%d bytes %q.. headers=%v", r.Partition, r.Offset, r.Key, len(r.Value), prefix(r.Value, 16), r.Headers)
}

func prefix(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

func sameContent(a, b Rec) bool {
	if !bytes.Equal(a.Key, b.Key) || !bytes.Equal(a.Value, b.Value) || len(a.Headers) != len(b.Headers) {
		return false
	}
	for i := range a.Headers {
		if a.Headers[i].Key != b.Headers[i].Key || !bytes.Equal(a.Headers[i].Value, b.Headers[i].Value) {
			return false
		}
	}
	return true
}

// History collects acknowledged records from any number of goroutines.
type History struct {
	mu    sync.Mutex
	acked []Rec
}

func (h *History) Ack(r Rec) {
	h.mu.Lock()
	h.acked = append(h.acked, r)
	h.mu.Unlock()
}

func (h *History) Acked() []Rec {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Rec(nil), h.acked...)
}

// CheckResult is the outcome of one history check.
type CheckResult struct {
	Acked, Read, Lost, Mismatched, Duplicated, Inconsistent, Gaps, Unordered, Extra int
	Problems                                                                        []string
}

func (r *CheckResult) problem(format string, args ...any) {
	if len(r.Problems) < 20 {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	}
}

// checkHistory compares acknowledged records with one read of the log.
// read must be in the order the consumer delivered it. It checks:
//   - lost: an acknowledged record is not at its acknowledged offset (or,
//     for clients without offsets, nowhere in its partition);
//   - mismatched: its offset holds a different key, value or headers;
//   - inconsistent: two acknowledgements name the same offset;
//   - unordered: offsets of a partition did not strictly increase as read
//     (one offset read twice included);
//   - gaps: a partition's offsets are not dense from 0 (no transactions or
//     compaction here, so every offset holds a record);
//   - duplicated: one key at two offsets (keys are unique per workload);
//   - extra: a record read that nobody acknowledged (allowed only for
//     unacknowledged sends; the caller decides, see wantExtra).
func checkHistory(t *testing.T, what string, acked, read []Rec, allowExtra bool) CheckResult {
	t.Helper()
	return checkHistoryOffsets(t, what, acked, read, allowExtra, true)
}

// checkHistoryOffsets is checkHistory with the gaps check optional (see
// analyzeHistoryOffsets).
func checkHistoryOffsets(t *testing.T, what string, acked, read []Rec, allowExtra, dense bool) CheckResult {
	t.Helper()
	res := analyzeHistoryOffsets(acked, read, allowExtra, dense)
	t.Logf("%s: acknowledged=%d read=%d lost=%d mismatched=%d duplicated=%d inconsistent=%d gaps=%d unordered=%d unacknowledged-read=%d",
		what, res.Acked, res.Read, res.Lost, res.Mismatched, res.Duplicated, res.Inconsistent, res.Gaps, res.Unordered, res.Extra)
	if !res.OK(allowExtra) {
		t.Errorf("%s: history check failed:\n  %s", what, strings.Join(res.Problems, "\n  "))
	}
	return res
}

// OK reports whether the check found nothing wrong.
func (r CheckResult) OK(allowExtra bool) bool {
	bad := r.Lost + r.Mismatched + r.Duplicated + r.Inconsistent + r.Gaps + r.Unordered
	if !allowExtra {
		bad += r.Extra
	}
	return bad == 0
}

// analyzeHistory is checkHistory without the test: it only counts.
func analyzeHistory(acked, read []Rec, allowExtra bool) CheckResult {
	return analyzeHistoryOffsets(acked, read, allowExtra, true)
}

// analyzeHistoryOffsets is analyzeHistory with the gaps check optional:
// dense=false is for transactional topics, where control records and the
// batches of aborted transactions hold offsets no data record read has.
//
// The checks are internal/chaos's (chaos.Check, reliability.md §6.2): each
// acknowledged record is an ok write of its content (key, value and
// headers) at its offset, each record read is a poll of its own in read
// order, and the read is the final log. Lost is chaos's lost, Mismatched
// and Inconsistent its inconsistent-offset (an offset with two contents),
// Duplicated its duplicate, Unordered its nonmonotonic-poll (an offset
// read again or after a higher one), Gaps its poll-skip (offsets not
// dense from 0). What chaos.Check has no notion of stays here: records
// acknowledged without an offset are found by key first, and a record
// read that nobody acknowledged is Extra.
func analyzeHistoryOffsets(acked, read []Rec, allowExtra, dense bool) CheckResult {
	res := CheckResult{Acked: len(acked), Read: len(read)}
	byKey := map[string][]Rec{}
	for _, r := range read {
		byKey[string(r.Key)] = append(byKey[string(r.Key)], r)
	}
	in := chaos.CheckInput{Replicas: map[int32][]chaos.Replica{}}
	final := map[int32]map[int64]string{}
	for _, r := range read {
		if final[r.Partition] == nil {
			final[r.Partition] = map[int64]string{}
		}
		if _, ok := final[r.Partition][r.Offset]; !ok {
			final[r.Partition][r.Offset] = content(r)
		}
		in.Polls = append(in.Polls, chaos.Poll{Consumer: "read", Partition: r.Partition, Offsets: []int64{r.Offset},
			Values: []string{content(r)}, HW: r.Offset + 1})
	}
	for p, log := range final {
		in.Replicas[p] = []chaos.Replica{{Broker: -1, Values: log, HW: -1}}
	}
	ackKeys := map[string]bool{}
	for i, a := range acked {
		ackKeys[string(a.Key)] = true
		if a.Offset < 0 {
			// A client that does not report offsets: the record read
			// with its key, in its partition, is where it went.
			found := false
			for _, r := range byKey[string(a.Key)] {
				if r.Partition == a.Partition || a.Partition < 0 {
					found = true
					a.Partition, a.Offset = r.Partition, r.Offset
				}
			}
			if !found {
				res.Lost++
				res.problem("acked %v not read back", a)
				continue
			}
		}
		// One producer per write: acknowledgements arrive from many
		// goroutines, so their order says nothing (no nonmonotonic-send).
		in.Writes = append(in.Writes, chaos.Write{Producer: fmt.Sprint(i), Partition: a.Partition, Offset: a.Offset,
			Value: content(a), Outcome: chaos.OK})
	}
	c := chaos.Check(in)
	res.Lost += c.Lost
	res.Mismatched = c.InconsistentOffset
	res.Inconsistent = c.InconsistentOffset
	res.Duplicated = c.Duplicate
	res.Unordered = c.NonmonotonicPoll
	if dense {
		res.Gaps = c.PollSkip
	}
	names := make([]string, 0, len(c.Examples))
	for n := range c.Examples {
		if n != "poll-skip" || dense {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		for _, e := range c.Examples[n] {
			res.problem("%s: %s", n, e)
		}
	}
	for _, r := range read {
		if !ackKeys[string(r.Key)] {
			res.Extra++
			if !allowExtra {
				res.problem("read %v that was never acknowledged", r)
			}
		}
	}
	return res
}

// content is a record's key, value and headers as one value for
// chaos.Check.
func content(r Rec) string {
	var b strings.Builder
	fmt.Fprintf(&b, "key=%q value=%q", r.Key, r.Value)
	for _, h := range r.Headers {
		fmt.Fprintf(&b, " %q=%q", h.Key, h.Value)
	}
	return b.String()
}

// readAll reads every partition of topic from offset 0 to the end offset
// ListOffsets reports when it is called, with a group-less kgo consumer. It
// fails the test if the end offsets are not reached within timeout, and
// checks that no record at or above the fetch's high watermark is returned.
func readAll(t *testing.T, seeds []string, topic string, timeout time.Duration) []Rec {
	t.Helper()
	return readAllWith(t, []kgo.Opt{kgo.SeedBrokers(seeds...)}, topic, timeout)
}

// readAllWith is readAll with the clients' connection options (seeds and
// security) given.
func readAllWith(t *testing.T, connOpts []kgo.Opt, topic string, timeout time.Duration) []Rec {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	admCl, err := kgo.NewClient(connOpts...)
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	var ends kadm.ListedOffsets
	eventually(t, 30*time.Second, func() error {
		ends, err = adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return err
		}
		return ends.Error()
	})
	want := map[int32]int64{}
	offsets := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		want[o.Partition] = o.Offset
		offsets[o.Partition] = kgo.NewOffset().At(0)
	})
	cl, err := kgo.NewClient(append(append([]kgo.Opt(nil), connOpts...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxWait(500*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	next := map[int32]int64{}
	done := func() bool {
		for p, end := range want {
			if next[p] < end {
				return false
			}
		}
		return true
	}
	var out []Rec
	aboveHW := 0
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s: end offsets %v not reached within %s: reached %v", topic, want, timeout, next)
		}
		fs.EachError(func(tp string, p int32, err error) {
			t.Logf("read %s[%d]: fetch error (retried): %v", tp, p, err)
		})
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			for _, r := range fp.Records {
				if r.Offset >= fp.HighWatermark {
					aboveHW++
				}
				out = append(out, fromKgo(r))
				next[r.Partition] = r.Offset + 1
			}
		})
	}
	if aboveHW > 0 {
		t.Errorf("read %s: %d records at or above the fetch response's high watermark", topic, aboveHW)
	}
	return out
}

func fromKgo(r *kgo.Record) Rec {
	out := Rec{Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value}
	for _, h := range r.Headers {
		out.Headers = append(out.Headers, Header{Key: h.Key, Value: h.Value})
	}
	return out
}

// sortRecs orders records by partition and offset.
func sortRecs(rs []Rec) {
	sort.Slice(rs, func(i, j int) bool {
		if rs[i].Partition != rs[j].Partition {
			return rs[i].Partition < rs[j].Partition
		}
		return rs[i].Offset < rs[j].Offset
	})
}

// workload returns n records with unique keys and values naming the record
// number, value sizes varied from 10 to 1000 bytes, and client's name in a
// header. Keys and values use only [a-z0-9-] so every client tool can carry
// them in text. Partition is left -1: the client's partitioner chooses.
func workload(client string, n int) []Rec {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	recs := make([]Rec, n)
	for i := range recs {
		size := 10 + (i*7919)%991
		v := []byte(fmt.Sprintf("v%06d-", i))
		for len(v) < size {
			v = append(v, alphabet[(i+len(v))%len(alphabet)])
		}
		recs[i] = Rec{
			Partition: -1,
			Offset:    -1,
			Key:       []byte(fmt.Sprintf("k%06d", i)),
			Value:     v[:size],
			Headers:   []Header{{Key: "client", Value: []byte(client)}, {Key: "n", Value: []byte(fmt.Sprint(i))}},
		}
	}
	return recs
}
