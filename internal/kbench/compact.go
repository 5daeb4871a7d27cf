package kbench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkazk/broker/logstore"
)

// CompactOptions configure the compaction load kept up beside the scenarios
// (issue 13: the produce and consume figures must not drop while a
// compacted topic is being cleaned).
type CompactOptions struct {
	Rate         int     // keyed records/s; 0 is off
	RecordBytes  int     // value size
	Keys         int     // distinct keys, written in turn
	Partitions   int     // of the compacted topic
	SegmentBytes int64   // segment.bytes, small so that segments roll and get cleaned
	DirtyRatio   float64 // min.cleanable.dirty.ratio
	// MetricsURLs are the brokers' /metrics addresses, scraped for the
	// kafka_log_logcleaner* gauges before and after; may be empty.
	MetricsURLs []string
	// LogDirs are the brokers' log.dirs, whose cleaner-offset-checkpoint
	// says how far the cleaner got on the topic; may be empty.
	LogDirs []string
}

// DefaultCompactOptions: 1 KiB values over 10,000 keys, 8 MiB segments,
// dirty ratio 0.05; Rate stays 0 (off).
func DefaultCompactOptions() CompactOptions {
	return CompactOptions{RecordBytes: 1024, Keys: 10000, Partitions: 3, SegmentBytes: 8 << 20, DirtyRatio: 0.05}
}

// TopicConfigs are the compacted topic's configs.
func (o CompactOptions) TopicConfigs() map[string]string {
	return map[string]string{
		"cleanup.policy":            "compact",
		"segment.bytes":             strconv.FormatInt(o.SegmentBytes, 10),
		"min.cleanable.dirty.ratio": strconv.FormatFloat(o.DirtyRatio, 'g', -1, 64),
	}
}

// Validate checks the options of an enabled load.
func (o CompactOptions) Validate() error {
	switch {
	case o.Rate < 0:
		return errors.New("--compact-beside: the rate must not be negative")
	case o.Rate == 0:
		return nil
	case o.RecordBytes < 1 || o.Keys < 1 || o.Partitions < 1:
		return errors.New("--compact-size, --compact-keys and --compact-partitions must be positive")
	case o.SegmentBytes < 1<<10:
		return errors.New("--compact-segment-bytes must be at least 1024")
	case o.DirtyRatio <= 0 || o.DirtyRatio > 1:
		return errors.New("--compact-dirty-ratio must be in (0, 1]")
	}
	return nil
}

// CompactReport is what the compaction load did, and what the cleaner did
// meanwhile, as one JSON line {"compact_beside": ...}.
type CompactReport struct {
	Topic       string  `json:"topic"`
	Target      string  `json:"target"`
	RatePerSec  int     `json:"rate_per_sec"` // offered
	Records     int64   `json:"records"`      // acknowledged
	Bytes       int64   `json:"bytes"`        // values acknowledged
	Seconds     float64 `json:"seconds"`
	Errors      int64   `json:"errors"`
	FirstErr    string  `json:"first_error,omitempty"`
	EndOffsets  int64   `json:"end_offsets"` // sum over partitions, at the end
	Keys        int     `json:"keys"`
	SegmentSize int64   `json:"segment_bytes"`
	// Checkpoint is the topic's cleaner-offset-checkpoint (first dirty
	// offset) per log dir, summed over partitions, at the end; it was 0 at
	// the start (a new topic). Above 0 proves a pass completed.
	Checkpoint       map[string]int64 `json:"cleaner_checkpoint,omitempty"`
	CheckpointErrors []string         `json:"cleaner_checkpoint_errors,omitempty"`
	// MetricsBefore and MetricsAfter are each broker's kafka_log_logcleaner*
	// gauges, by /metrics URL.
	MetricsBefore map[string]map[string]float64 `json:"metrics_before,omitempty"`
	MetricsAfter  map[string]map[string]float64 `json:"metrics_after,omitempty"`
}

// CompactWriter writes keyed records to a compacted topic at a fixed rate
// until stopped.
type CompactWriter struct {
	o      CompactOptions
	t      *Target
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
	start  time.Time
	report CompactReport

	acked, bytes, errs atomic.Int64
	firstErr           atomic.Pointer[error]
}

// StartCompactWriter creates the compacted topic on t (RF as t.RF) and
// starts writing to it in the background.
func StartCompactWriter(ctx context.Context, t *Target, o CompactOptions) (*CompactWriter, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	topic := fmt.Sprintf("kbench-compact-%d", time.Now().UnixNano())
	if err := t.CreateTopicConfigs(ctx, topic, o.Partitions, o.TopicConfigs()); err != nil {
		return nil, err
	}
	w := &CompactWriter{o: o, t: t, done: make(chan struct{}), report: CompactReport{
		Topic: topic, Target: t.Name, RatePerSec: o.Rate, Keys: o.Keys, SegmentSize: o.SegmentBytes,
	}}
	w.report.MetricsBefore = scrapeAll(ctx, o.MetricsURLs)
	cl, err := kgo.NewClient(t.seeds(
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), // idempotent (kgo's default)
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.MaxBufferedRecords(o.Rate*2+100),
		kgo.RecordDeliveryTimeout(60*time.Second),
	)...)
	if err != nil {
		return nil, err
	}
	w.cl = cl
	wctx, cancel := context.WithCancel(ctx)
	w.cancel = cancel
	w.start = time.Now()
	go w.loop(wctx, ctx)
	return w, nil
}

// loop produces on schedule: by now, rate × elapsed records have been
// handed to the client. A client that cannot keep up blocks Produce, so the
// achieved rate is reported, not assumed. stop ends the loop; records are
// produced with ctx, so that those still buffered at stop are delivered by
// Stop's Flush rather than failed.
func (w *CompactWriter) loop(stop, ctx context.Context) {
	defer close(w.done)
	value := payload(w.o.RecordBytes)
	keys := make([][]byte, w.o.Keys)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("key-%06d", i))
	}
	promise := func(r *kgo.Record, err error) {
		if err != nil {
			w.errs.Add(1)
			w.firstErr.CompareAndSwap(nil, &err)
			return
		}
		w.acked.Add(1)
		w.bytes.Add(int64(len(r.Value)))
	}
	interval := time.Second / time.Duration(w.o.Rate)
	for i := 0; stop.Err() == nil; {
		due := int(time.Since(w.start)/interval) + 1
		for ; i < due && stop.Err() == nil; i++ {
			w.cl.Produce(ctx, &kgo.Record{Key: keys[i%len(keys)], Value: value}, promise)
		}
		select {
		case <-stop.Done():
		case <-time.After(min(time.Until(w.start.Add(time.Duration(i)*interval)), 10*time.Millisecond)):
		}
	}
}

// Stop ends the load, waits for what was sent, reads the cleaner's figures
// and deletes the topic.
func (w *CompactWriter) Stop(ctx context.Context) CompactReport {
	w.cancel()
	<-w.done
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
	defer cancel()
	if err := w.cl.Flush(fctx); err != nil && w.firstErr.Load() == nil {
		w.firstErr.Store(&err)
	}
	w.cl.Close()
	r := w.report
	r.Seconds = time.Since(w.start).Seconds()
	r.Records, r.Bytes, r.Errors = w.acked.Load(), w.bytes.Load(), w.errs.Load()
	if e := w.firstErr.Load(); e != nil {
		r.FirstErr = (*e).Error()
	}
	if ends, err := w.t.endOffsets(fctx, r.Topic); err == nil {
		for _, o := range ends {
			r.EndOffsets += o
		}
	}
	r.Checkpoint, r.CheckpointErrors = cleanerCheckpoints(w.o.LogDirs, r.Topic)
	r.MetricsAfter = scrapeAll(fctx, w.o.MetricsURLs)
	if err := w.t.DeleteTopic(fctx, r.Topic); err != nil {
		r.CheckpointErrors = append(r.CheckpointErrors, fmt.Sprintf("delete topic: %v", err))
	}
	return r
}

// cleanerCheckpoints sums topic's offsets in each dir's
// cleaner-offset-checkpoint.
func cleanerCheckpoints(dirs []string, topic string) (map[string]int64, []string) {
	if len(dirs) == 0 {
		return nil, nil
	}
	out := map[string]int64{}
	var errs []string
	for _, d := range dirs {
		entries, err := logstore.ReadCleanerOffsetCheckpoint(nil, d)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", d, err))
			continue
		}
		out[d] = 0
		for _, e := range entries {
			if e.Topic == topic {
				out[d] += e.Offset
			}
		}
	}
	return out, errs
}

func scrapeAll(ctx context.Context, urls []string) map[string]map[string]float64 {
	if len(urls) == 0 {
		return nil
	}
	out := map[string]map[string]float64{}
	for _, u := range urls {
		m, err := scrapeCleaner(ctx, u)
		if err != nil {
			m = map[string]float64{"scrape_error": 1}
		}
		out[u] = m
	}
	return out
}

// scrapeCleaner reads the kafka_log_logcleaner* samples of one /metrics.
func scrapeCleaner(ctx context.Context, url string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return ParseCleanerMetrics(resp.Body)
}

// ParseCleanerMetrics picks the samples named kafka_log_logcleaner* (the
// LogCleaner and LogCleanerManager gauges) out of a Prometheus text
// exposition, keyed by name with labels.
func ParseCleanerMetrics(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "kafka_log_logcleaner") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %q: %w", line, err)
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}

// WriteJSON writes r as one line {"compact_beside": r}.
func (r CompactReport) WriteJSON(w io.Writer) error {
	line, err := json.Marshal(struct {
		C CompactReport `json:"compact_beside"`
	}{r})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", line)
	return err
}

// WriteText writes a few lines saying what the load wrote and what the
// cleaner did meanwhile.
func (r CompactReport) WriteText(w io.Writer) error {
	var b strings.Builder
	rate := 0.0
	if r.Seconds > 0 {
		rate = float64(r.Records) / r.Seconds
	}
	fmt.Fprintf(&b, "compaction beside (%s): %s keyed records (%s over %s keys, %.1f MB) to %s in %.1fs: %s rec/s of %d offered, %d errors%s\n",
		r.Target, thousands(float64(r.Records)), sizeName(int(r.Bytes/max(1, r.Records))), thousands(float64(r.Keys)), float64(r.Bytes)/1e6,
		r.Topic, r.Seconds, thousands(rate), r.RatePerSec, r.Errors, errSuffix(r.FirstErr))
	if r.Checkpoint != nil {
		dirs := make([]string, 0, len(r.Checkpoint))
		for d := range r.Checkpoint {
			dirs = append(dirs, d)
		}
		sort.Strings(dirs)
		cleaned := 0
		for _, d := range dirs {
			if r.Checkpoint[d] > 0 {
				cleaned++
			}
			fmt.Fprintf(&b, "  cleaner-offset-checkpoint %s: %s of %s offsets cleaned\n", d,
				thousands(float64(r.Checkpoint[d])), thousands(float64(r.EndOffsets)))
		}
		fmt.Fprintf(&b, "  cleaner passes completed on %d of %d brokers (first dirty offset above 0)\n", cleaned, len(dirs))
	}
	for _, e := range r.CheckpointErrors {
		fmt.Fprintf(&b, "  %s\n", e)
	}
	urls := make([]string, 0, len(r.MetricsAfter))
	for u := range r.MetricsAfter {
		urls = append(urls, u)
	}
	sort.Strings(urls)
	for _, u := range urls {
		after := r.MetricsAfter[u]
		names := make([]string, 0, len(after))
		for n := range after {
			names = append(names, n)
		}
		sort.Strings(names)
		var parts []string
		for _, n := range names {
			short := strings.TrimPrefix(strings.TrimPrefix(n, "kafka_log_logcleanermanager_"), "kafka_log_logcleaner_")
			parts = append(parts, fmt.Sprintf("%s %g→%g", short, r.MetricsBefore[u][n], after[n]))
		}
		fmt.Fprintf(&b, "  %s: %s\n", u, strings.Join(parts, ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func errSuffix(s string) string {
	if s == "" {
		return ""
	}
	return " (first: " + s + ")"
}
