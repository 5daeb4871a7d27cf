package kbench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Options select the scenarios and their settings.
type Options struct {
	Kinds         []string // KindProduce, KindE2E, KindConsume, KindTxn
	Sizes         []int    // produce record sizes
	Acks          []string // produce acks: "all", "1"
	Partitions    int
	Linger        time.Duration
	BatchMaxBytes int
	Reps          int
	Warmup        time.Duration // duration of the unmeasured run before each scenario

	Duration    time.Duration // produce: per run
	MaxRunBytes int64         // produce: stop a run early after this many value bytes

	E2ERate     int // records/s
	E2ESize     int
	E2EDuration time.Duration

	ConsumeSize  int
	ConsumeBytes int64 // topic size to fill and read back
	// ConsumeDuration: a consume run reads the topic again, each time
	// with a fresh client, until it has read for at least this long, so
	// that a topic read in a fraction of a second still gives a run long
	// enough to measure.
	ConsumeDuration time.Duration
	FetchMaxBytes   int
	PartFetchMax    int

	TxnRecords []int // txn: records per transaction, one scenario each
	TxnSize    int   // txn: record size in bytes

	Progress io.Writer // one line per run; nil for none
}

// DefaultOptions are short: a few minutes against two targets on 2 cores.
func DefaultOptions() Options {
	return Options{
		Kinds:           []string{KindProduce, KindE2E, KindConsume},
		Sizes:           []int{100, 1024},
		Acks:            []string{"all", "1"},
		Partitions:      6,
		Linger:          time.Millisecond,
		BatchMaxBytes:   1 << 20,
		Reps:            3,
		Warmup:          time.Second,
		Duration:        3 * time.Second,
		MaxRunBytes:     512 << 20,
		E2ERate:         5000,
		E2ESize:         1024,
		E2EDuration:     4 * time.Second,
		ConsumeSize:     1024,
		ConsumeBytes:    256 << 20,
		ConsumeDuration: 2 * time.Second,
		FetchMaxBytes:   50 << 20,
		PartFetchMax:    10 << 20,
		TxnRecords:      []int{10, 1000},
		TxnSize:         1024,
	}
}

// Scenarios expands the options into the scenarios to run, in order.
func (o Options) Scenarios() []Scenario {
	base := Scenario{
		Partitions:    o.Partitions,
		LingerMs:      float64(o.Linger) / float64(time.Millisecond),
		BatchMaxBytes: o.BatchMaxBytes,
		Compression:   "none",
		Reps:          o.Reps,
		WarmupRuns:    1,
	}
	withAcks := func(s Scenario, acks string) Scenario {
		s.Acks = acks
		s.Idempotent = acks == "all"
		s.MaxInflight = 5
		return s
	}
	var out []Scenario
	for _, kind := range o.Kinds {
		switch kind {
		case KindProduce:
			for _, size := range o.Sizes {
				for _, acks := range o.Acks {
					s := withAcks(base, acks)
					s.Kind, s.RecordBytes = KindProduce, size
					s.DurationS, s.MaxRunBytes = o.Duration.Seconds(), o.MaxRunBytes
					out = append(out, s)
				}
			}
		case KindE2E:
			s := withAcks(base, "all")
			s.Kind, s.RecordBytes, s.RatePerSec = KindE2E, o.E2ESize, o.E2ERate
			s.DurationS = o.E2EDuration.Seconds()
			out = append(out, s)
		case KindConsume:
			s := withAcks(base, "all")
			s.Kind, s.RecordBytes, s.FillBytes = KindConsume, o.ConsumeSize, o.ConsumeBytes
			s.DurationS = o.ConsumeDuration.Seconds()
			s.FetchMaxBytes, s.PartFetchMax = o.FetchMaxBytes, o.PartFetchMax
			out = append(out, s)
		case KindTxn:
			// Transactions need acks=all and the idempotent producer,
			// which is also the baseline.
			for _, n := range o.TxnRecords {
				s := withAcks(base, "all")
				s.Kind, s.RecordBytes, s.TxnRecords = KindTxn, o.TxnSize, n
				s.DurationS, s.MaxRunBytes = o.Duration.Seconds(), o.MaxRunBytes
				out = append(out, s)
			}
		}
	}
	return out
}

// RunScenarios runs every scenario against every target. Within a scenario each
// target gets one unmeasured warm-up run, then the measured runs alternate
// between targets, reversing the order on every repetition so that drift on
// the machine falls on both. emit is called with each finished scenario.
func RunScenarios(ctx context.Context, o Options, targets []*Target, emit func(Result)) ([]Result, error) {
	var results []Result
	var errs []error
	for _, s := range o.Scenarios() {
		r := runScenario(ctx, o, s, targets)
		r.Finish()
		for _, t := range r.Targets {
			if t.Err != "" {
				errs = append(errs, fmt.Errorf("%s on %s: %s", r.Name, t.Target, t.Err))
			}
		}
		results = append(results, r)
		if emit != nil {
			emit(r)
		}
		if ctx.Err() != nil {
			break
		}
	}
	return results, errors.Join(errs...)
}

func (o Options) progress(format string, args ...any) {
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, format+"\n", args...)
	}
}

// scenarioRunner runs one measured or warm-up run on one target.
type scenarioRunner func(ctx context.Context, t *Target, topic string, d time.Duration) (Run, error)

func runScenario(ctx context.Context, o Options, s Scenario, targets []*Target) Result {
	r := Result{Scenario: s, Name: s.Name()}
	topics := make([]string, len(targets))
	failed := make([]bool, len(targets))
	fail := func(i int, err error) {
		r.Targets[i].Err = err.Error()
		failed[i] = true
		o.progress("%s: %s: %v", r.Name, targets[i].Name, err)
	}
	for i, t := range targets {
		r.Targets = append(r.Targets, TargetResult{
			Target: t.Name, Bootstrap: joinComma(t.Bootstrap),
			ReplicationFactor: t.RF, MinInsync: t.MinInsync,
		})
		topics[i] = fmt.Sprintf("kbench-%s-%d-%d", s.Kind, time.Now().UnixNano(), i)
		if err := t.CreateTopic(ctx, topics[i], s.Partitions); err != nil {
			fail(i, err)
		}
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		for i, t := range targets {
			if err := t.DeleteTopic(dctx, topics[i]); err != nil {
				o.progress("%s: delete topic %s: %v", t.Name, topics[i], err)
			}
		}
	}()

	// baseline, for a txn scenario, is the idempotent produce run measured
	// beside each transactional one.
	var run, baseline scenarioRunner
	measured, warm := time.Duration(s.DurationS*float64(time.Second)), o.Warmup
	switch s.Kind {
	case KindTxn:
		run = func(ctx context.Context, t *Target, topic string, d time.Duration) (Run, error) {
			return txnProduceRun(ctx, t, topic, s, d, s.MaxRunBytes)
		}
		baseline = func(ctx context.Context, t *Target, topic string, d time.Duration) (Run, error) {
			return produceRun(ctx, t, topic, s, d, s.MaxRunBytes)
		}
	case KindProduce:
		run = func(ctx context.Context, t *Target, topic string, d time.Duration) (Run, error) {
			return produceRun(ctx, t, topic, s, d, s.MaxRunBytes)
		}
	case KindE2E:
		run = func(ctx context.Context, t *Target, topic string, d time.Duration) (Run, error) {
			return e2eRun(ctx, t, topic, s, d)
		}
	case KindConsume:
		for i, t := range targets {
			if failed[i] {
				continue
			}
			o.progress("%s: %s: filling %s", r.Name, t.Name, bytesName(s.FillBytes))
			if _, err := produceRun(ctx, t, topics[i], s, 24*time.Hour, s.FillBytes); err != nil {
				fail(i, fmt.Errorf("fill: %w", err))
			}
		}
		run = func(ctx context.Context, t *Target, topic string, d time.Duration) (Run, error) {
			return consumeRuns(ctx, t, topic, s, d)
		}
	}

	for i, t := range targets {
		if failed[i] {
			continue
		}
		quiesce()
		if _, err := run(ctx, t, topics[i], warm); err != nil {
			fail(i, fmt.Errorf("warm-up: %w", err))
		}
		if baseline != nil && !failed[i] {
			quiesce()
			if _, err := baseline(ctx, t, topics[i], warm); err != nil {
				fail(i, fmt.Errorf("idempotent warm-up: %w", err))
			}
		}
	}
	for rep := range s.Reps {
		for k := range targets {
			i := k
			if rep%2 == 1 {
				i = len(targets) - 1 - k
			}
			if failed[i] || ctx.Err() != nil {
				continue
			}
			// A txn scenario's idempotent baseline runs before its
			// transactional run on odd repetitions and after it on even
			// ones, so that drift falls on both.
			if baseline != nil && rep%2 == 1 && !runBaseline(ctx, o, &r, i, targets[i], topics[i], measured, rep, baseline) {
				failed[i] = true
				continue
			}
			quiesce()
			res, err := run(ctx, targets[i], topics[i], measured)
			if err != nil {
				fail(i, fmt.Errorf("run %d: %w", rep+1, err))
				continue
			}
			r.Targets[i].Runs = append(r.Targets[i].Runs, res)
			if baseline != nil && rep%2 == 0 && !runBaseline(ctx, o, &r, i, targets[i], topics[i], measured, rep, baseline) {
				failed[i] = true
				continue
			}
			if res.Latency != nil {
				o.progress("%s: %s run %d/%d: p50 %.2f p99 %.2f p99.9 %.2f ms (%d samples)", r.Name, targets[i].Name,
					rep+1, s.Reps, res.Latency.P50Ms, res.Latency.P99Ms, res.Latency.P999Ms, res.Latency.Samples)
			} else {
				o.progress("%s: %s run %d/%d: %s rec/s, %.1f MB/s (%.2fs)", r.Name, targets[i].Name,
					rep+1, s.Reps, thousands(res.RecPerSec), res.MBPerSec, res.Seconds)
			}
		}
	}
	return r
}

// runBaseline runs one idempotent baseline run of a txn scenario on
// target i and records it; it reports false (and records the error)
// when the run failed.
func runBaseline(ctx context.Context, o Options, r *Result, i int, t *Target, topic string, d time.Duration, rep int, baseline scenarioRunner) bool {
	quiesce()
	res, err := baseline(ctx, t, topic, d)
	if err != nil {
		r.Targets[i].Err = fmt.Sprintf("idempotent run %d: %v", rep+1, err)
		o.progress("%s: %s: idempotent run %d: %v", r.Name, t.Name, rep+1, err)
		return false
	}
	r.Targets[i].Baseline = append(r.Targets[i].Baseline, res)
	o.progress("%s: %s idempotent run %d/%d: %s rec/s, %.1f MB/s (%.2fs)", r.Name, t.Name,
		rep+1, r.Scenario.Reps, thousands(res.RecPerSec), res.MBPerSec, res.Seconds)
	return true
}

// quiesce writes the machine's dirty page cache back to disk (sync(2))
// before a run, so that the kernel's writeback of what an earlier run
// wrote (gigabytes, on a cluster with data on disk) does not take CPU
// and disk from the run being measured, whichever target it is. A run's
// own writes stay in the page cache, as a broker's do by default.
func quiesce() { syscall.Sync() }

func joinComma(ss []string) string {
	out := ""
	for i, s := range ss {
		if i > 0 {
			out += ","
		}
		out += s
	}
	return out
}

// producerOpts are the producer settings of a scenario.
func producerOpts(t *Target, topic string, s Scenario) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(t.Bootstrap...),
		kgo.DefaultProduceTopic(topic),
		kgo.ProducerLinger(time.Duration(s.LingerMs * float64(time.Millisecond))),
		kgo.ProducerBatchMaxBytes(int32(s.BatchMaxBytes)),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.MaxBufferedRecords(1 << 20),
		kgo.MaxBufferedBytes(32 << 20),
		kgo.RecordDeliveryTimeout(60 * time.Second),
	}
	opts = append(opts, t.Conn...)
	if s.Acks == "all" {
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	} else {
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(),
			kgo.MaxProduceRequestsInflightPerBroker(s.MaxInflight))
	}
	return opts
}

// payload returns n random bytes; random so that nothing along the way can
// compress them.
func payload(n int) []byte {
	b := make([]byte, n)
	rng := rand.New(rand.NewPCG(uint64(n), 7))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// produceRun produces records of s.RecordBytes as fast as the client allows
// for d or until maxBytes, and times it until every record is acknowledged.
// It first produces one record to each partition synchronously (untimed), so
// that connections and metadata are in place.
func produceRun(ctx context.Context, t *Target, topic string, s Scenario, d time.Duration, maxBytes int64) (Run, error) {
	cl, err := kgo.NewClient(producerOpts(t, topic, s)...)
	if err != nil {
		return Run{}, err
	}
	defer cl.Close()
	value := payload(s.RecordBytes)
	prime := make([]*kgo.Record, s.Partitions)
	for i := range prime {
		prime[i] = &kgo.Record{Value: value}
	}
	pctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := cl.ProduceSync(pctx, prime...).FirstErr(); err != nil {
		return Run{}, fmt.Errorf("prime: %w", err)
	}

	var (
		pool     = sync.Pool{New: func() any { return new(kgo.Record) }}
		firstErr atomic.Pointer[error]
	)
	promise := func(r *kgo.Record, err error) {
		if err != nil {
			firstErr.CompareAndSwap(nil, &err)
		}
		*r = kgo.Record{}
		pool.Put(r)
	}
	size := int64(s.RecordBytes)
	start := time.Now()
	deadline := start.Add(d)
	var sent int64
	for {
		if sent%64 == 0 && (sent*size >= maxBytes || time.Now().After(deadline) || firstErr.Load() != nil) {
			break
		}
		rec := pool.Get().(*kgo.Record)
		rec.Value = value
		cl.Produce(ctx, rec, promise)
		sent++
	}
	if err := cl.Flush(pctx); err != nil {
		return Run{}, fmt.Errorf("flush: %w", err)
	}
	elapsed := time.Since(start)
	if e := firstErr.Load(); e != nil {
		return Run{}, *e
	}
	return NewRun(sent, sent*size, elapsed.Seconds()), nil
}

// txnProduceRun produces records of s.RecordBytes in transactions of
// s.TxnRecords records (round-robin over the partitions, so a transaction
// spans several) for d or until maxBytes, one transaction at a time as a
// transactional producer must: begin, produce, flush, commit. It is timed
// until the last commit is acknowledged. Each run has its own
// transactional.id; like produceRun it first commits one untimed
// transaction with a record for each partition.
func txnProduceRun(ctx context.Context, t *Target, topic string, s Scenario, d time.Duration, maxBytes int64) (Run, error) {
	opts := append(producerOpts(t, topic, s), kgo.TransactionalID(fmt.Sprintf("kbench-%s-%d", topic, time.Now().UnixNano())))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return Run{}, err
	}
	defer cl.Close()
	value := payload(s.RecordBytes)
	var firstErr atomic.Pointer[error]
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			firstErr.CompareAndSwap(nil, &err)
		}
	}
	tctx, cancel := context.WithTimeout(ctx, d+120*time.Second)
	defer cancel()
	txn := func(n int) error {
		if err := cl.BeginTransaction(); err != nil {
			return err
		}
		for range n {
			cl.Produce(tctx, &kgo.Record{Value: value}, promise)
		}
		if err := cl.Flush(tctx); err != nil {
			return fmt.Errorf("flush: %w", err)
		}
		if e := firstErr.Load(); e != nil {
			_ = cl.EndTransaction(tctx, kgo.TryAbort)
			return *e
		}
		if err := cl.EndTransaction(tctx, kgo.TryCommit); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		return nil
	}
	if err := txn(s.Partitions); err != nil {
		return Run{}, fmt.Errorf("prime: %w", err)
	}
	size := int64(s.RecordBytes)
	start := time.Now()
	deadline := start.Add(d)
	var sent int64
	for sent*size < maxBytes && time.Now().Before(deadline) {
		if err := txn(s.TxnRecords); err != nil {
			return Run{}, err
		}
		sent += int64(s.TxnRecords)
	}
	return NewRun(sent, sent*size, time.Since(start).Seconds()), nil
}

// e2eRun produces at s.RatePerSec for d while a consumer reads the same
// partitions, and records for each record the time from its intended send
// time to its arrival at the consumer. Measuring from the intended time (the
// schedule, not the moment Produce was called) keeps a stalled producer from
// hiding latency (coordinated omission).
func e2eRun(ctx context.Context, t *Target, topic string, s Scenario, d time.Duration) (Run, error) {
	if s.RecordBytes < 8 {
		return Run{}, fmt.Errorf("e2e records need at least 8 bytes, have %d", s.RecordBytes)
	}
	ctx, cancel := context.WithTimeout(ctx, d+90*time.Second)
	defer cancel()
	ends, err := t.endOffsets(ctx, topic)
	if err != nil {
		return Run{}, fmt.Errorf("end offsets: %w", err)
	}
	from := map[int32]kgo.Offset{}
	for p, o := range ends {
		from[p] = kgo.NewOffset().At(o)
	}
	cons, err := kgo.NewClient(t.seeds(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}),
		kgo.FetchMaxWait(500*time.Millisecond))...)
	if err != nil {
		return Run{}, err
	}
	defer cons.Close()
	prod, err := kgo.NewClient(producerOpts(t, topic, s)...)
	if err != nil {
		return Run{}, err
	}
	defer prod.Close()

	total := max(1, int(float64(s.RatePerSec)*d.Seconds()))
	samples := make([]time.Duration, 0, total)
	primed := make(chan struct{})
	done := make(chan struct{})
	var base time.Time // set before the first timed record is produced
	var baseSet atomic.Bool
	go func() {
		defer close(done)
		markers := 0
		for len(samples) < total {
			fs := cons.PollFetches(ctx)
			if ctx.Err() != nil {
				return
			}
			now := time.Now()
			fs.EachRecord(func(r *kgo.Record) {
				if len(r.Value) != s.RecordBytes || !baseSet.Load() {
					if markers++; markers == s.Partitions {
						close(primed)
					}
					return
				}
				intended := time.Duration(binary.BigEndian.Uint64(r.Value))
				samples = append(samples, now.Sub(base)-intended)
			})
		}
	}()

	// Prime: one short marker record per partition; wait until the consumer
	// has them all, so every partition is being fetched before timing starts.
	marks := make([]*kgo.Record, s.Partitions)
	for i := range marks {
		marks[i] = &kgo.Record{Value: []byte{0}}
	}
	if err := prod.ProduceSync(ctx, marks...).FirstErr(); err != nil {
		return Run{}, fmt.Errorf("prime: %w", err)
	}
	select {
	case <-primed:
	case <-done:
		return Run{}, fmt.Errorf("consumer stopped before the markers arrived: %w", ctx.Err())
	}

	var firstErr atomic.Pointer[error]
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			firstErr.CompareAndSwap(nil, &err)
		}
	}
	interval := time.Second / time.Duration(s.RatePerSec)
	base = time.Now()
	baseSet.Store(true)
	for i := 0; i < total; {
		due := min(total, int(time.Since(base)/interval)+1)
		for ; i < due; i++ {
			v := make([]byte, s.RecordBytes)
			binary.BigEndian.PutUint64(v, uint64(time.Duration(i)*interval))
			prod.Produce(ctx, &kgo.Record{Value: v}, promise)
		}
		if i < total {
			time.Sleep(min(time.Until(base.Add(time.Duration(i)*interval)), time.Millisecond))
		}
	}
	if err := prod.Flush(ctx); err != nil {
		return Run{}, fmt.Errorf("flush: %w", err)
	}
	if e := firstErr.Load(); e != nil {
		return Run{}, *e
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
	<-done
	if len(samples) < total {
		return Run{}, fmt.Errorf("consumed %d of %d records", len(samples), total)
	}
	r := NewRun(int64(total), int64(total)*int64(s.RecordBytes), d.Seconds())
	lat := Summarise(samples)
	r.Latency = &lat
	return r, nil
}

// consumeRuns reads the topic with consumeRun until the reads add up to at
// least d (one read at least), and sums them: the time counted is the
// reading, not the clients' start-up between reads.
func consumeRuns(ctx context.Context, t *Target, topic string, s Scenario, d time.Duration) (Run, error) {
	var records, bytes int64
	var seconds float64
	for {
		r, err := consumeRun(ctx, t, topic, s)
		if err != nil {
			return Run{}, err
		}
		records, bytes, seconds = records+r.Records, bytes+r.Bytes, seconds+r.Seconds
		if seconds >= d.Seconds() {
			return NewRun(records, bytes, seconds), nil
		}
	}
}

// consumeRun reads the topic from its start to the end offsets with a fresh
// client, and times it from the first fetch request to the last record.
func consumeRun(ctx context.Context, t *Target, topic string, s Scenario) (Run, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	ends, err := t.endOffsets(ctx, topic)
	if err != nil {
		return Run{}, fmt.Errorf("end offsets: %w", err)
	}
	var want int64
	from := map[int32]kgo.Offset{}
	for p, o := range ends {
		want += o
		from[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(t.seeds(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}),
		kgo.FetchMaxBytes(int32(s.FetchMaxBytes)),
		kgo.FetchMaxPartitionBytes(int32(s.PartFetchMax)))...)
	if err != nil {
		return Run{}, err
	}
	defer cl.Close()
	if err := cl.Ping(ctx); err != nil {
		return Run{}, err
	}
	start := time.Now()
	var got, bytes int64
	for got < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return Run{}, fmt.Errorf("consumed %d of %d records: %w", got, want, ctx.Err())
		}
		if err := fs.Err0(); err != nil {
			return Run{}, err
		}
		fs.EachRecord(func(r *kgo.Record) {
			got++
			bytes += int64(len(r.Value))
		})
	}
	return NewRun(got, bytes, time.Since(start).Seconds()), nil
}
