// Command kbench measures a Kafka cluster with franz-go: produce throughput
// by record size and acks, end-to-end latency at a fixed offered rate, and
// consume throughput from the start of a filled topic, and (--scenarios txn,
// make bench-txn) transactional produce in transactions of --txn-records
// records beside idempotent produce of the same records, alternating on
// each target, with the txn/idempotent ratio. With --compare-kfake
// it runs the same scenarios alternately against the given cluster and an
// in-process kfake cluster (in memory, no replication), and prints the ratio
// of the medians.
//
//	kbench --brokers 127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094 --compare-kfake
//	kbench --kfake                           # the in-memory reference alone
//
// With --compact-beside RATE (cluster only) it writes RATE keyed records/s
// to a compacted RF=3 topic throughout, so that the log cleaner works beside
// the measurements, and at the end reports what it wrote and what the
// cleaner did (the topic's cleaner-offset-checkpoint in each --log-dirs, the
// kafka_log_logcleaner* gauges of each --metrics-urls). --beside-report
// WITHOUT,WITH prints the with/without ratio of two saved reports (make
// bench-compact).
//
// With --secure-brokers (the same cluster's SASL_SSL listener) and
// --secure-config (Kafka client properties, as kafka-admin --command-config)
// every scenario also runs over the secured listener, alternating with the
// plaintext one of --brokers, and the ratio column is secured/plaintext
// (make bench-secure, issue 14).
//
// It prints a Markdown table on stdout after one JSON line per scenario;
// progress goes to stderr.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kafkazk/broker/internal/clientconf"
	"github.com/kafkazk/broker/internal/kbench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "kbench:", err)
		os.Exit(1)
	}
}

// config is what the flags say beyond kbench.Options.
type config struct {
	brokers []string
	// secureBrokers and secureConfig: the same cluster's secured listener
	// (--secure-brokers, --secure-config), measured beside --brokers.
	secureBrokers []string
	secureConfig  string
	compare       bool
	onlyKfake     bool
	kfakeBrokers  int
	kfakeSegment  int64
	cpuprofile    string
	compact       kbench.CompactOptions
	// besideReport is WITHOUT,WITH: two kbench reports to compare.
	besideReport []string
}

// parseArgs parses and checks the flags.
func parseArgs(args []string, stderr io.Writer) (kbench.Options, config, error) {
	o := kbench.DefaultOptions()
	var c config
	c.compact = kbench.DefaultCompactOptions()
	fs := flag.NewFlagSet("kbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	brokers := fs.String("brokers", "", "bootstrap list host:port,... of the cluster to measure")
	secureBrokers := fs.String("secure-brokers", "", "bootstrap list of the same cluster's SASL_SSL (or SSL, SASL_PLAINTEXT) listener: every scenario also runs there, alternating with --brokers, and the table gives secured/plaintext")
	fs.StringVar(&c.secureConfig, "secure-config", "", "with --secure-brokers: Kafka client properties (security.protocol, sasl.mechanism, sasl.jaas.config, ssl.truststore.location, ...), as kafka-admin --command-config")
	fs.BoolVar(&c.compare, "compare-kfake", false, "also run every scenario against an in-process kfake cluster, alternating, and print ratios")
	fs.BoolVar(&c.onlyKfake, "kfake", false, "run against an in-process kfake cluster only (no --brokers)")
	fs.IntVar(&c.kfakeBrokers, "kfake-brokers", 3, "brokers in the kfake cluster")
	fs.Int64Var(&c.kfakeSegment, "kfake-segment-bytes", 0, "kfake's log.segment.bytes (0: kfake's default, 100 MiB)")
	kinds := fs.String("scenarios", strings.Join(o.Kinds, ","), "scenarios to run: produce,e2e,consume,txn (txn: transactional produce beside idempotent produce, not in the default)")
	txnRecords := fs.String("txn-records", "10,1000", "txn: records per transaction, one scenario each")
	fs.IntVar(&o.TxnSize, "txn-size", o.TxnSize, "txn: record size in bytes")
	sizes := fs.String("sizes", "100,1024", "produce record sizes in bytes")
	acks := fs.String("acks", "all,1", "produce acks settings: all,1")
	fs.IntVar(&o.Partitions, "partitions", o.Partitions, "partitions per topic")
	fs.DurationVar(&o.Linger, "linger", o.Linger, "producer linger")
	fs.IntVar(&o.BatchMaxBytes, "batch-bytes", o.BatchMaxBytes, "producer batch max bytes (batch.size)")
	fs.IntVar(&o.Reps, "reps", o.Reps, "measured runs per scenario and target (medians are reported)")
	fs.DurationVar(&o.Warmup, "warmup", o.Warmup, "unmeasured warm-up run per scenario and target")
	fs.DurationVar(&o.Duration, "duration", o.Duration, "produce: length of one run")
	maxMiB := fs.Int64("max-run-mib", o.MaxRunBytes>>20, "produce: end a run early after this many MiB of values")
	fs.IntVar(&o.E2ERate, "e2e-rate", o.E2ERate, "e2e: offered records/s")
	fs.IntVar(&o.E2ESize, "e2e-size", o.E2ESize, "e2e: record size in bytes")
	fs.DurationVar(&o.E2EDuration, "e2e-duration", o.E2EDuration, "e2e: length of one run")
	fs.IntVar(&o.ConsumeSize, "consume-size", o.ConsumeSize, "consume: record size in bytes")
	fs.DurationVar(&o.ConsumeDuration, "consume-duration", o.ConsumeDuration, "consume: read the topic again (fresh client each time) until a run has read for at least this long")
	consumeMiB := fs.Int64("consume-mib", o.ConsumeBytes>>20, "consume: MiB of values to fill the topic with")
	fs.StringVar(&c.cpuprofile, "cpuprofile", "", "write a CPU profile of this process (clients and kfake) to the file")
	fs.IntVar(&c.compact.Rate, "compact-beside", 0, "cluster only: while every scenario runs, write this many keyed records/s to a compacted RF=3 topic, so the log cleaner works beside the measurements (0: off)")
	fs.IntVar(&c.compact.RecordBytes, "compact-size", c.compact.RecordBytes, "compact-beside: value size in bytes")
	fs.IntVar(&c.compact.Keys, "compact-keys", c.compact.Keys, "compact-beside: distinct keys")
	fs.IntVar(&c.compact.Partitions, "compact-partitions", c.compact.Partitions, "compact-beside: partitions of the compacted topic")
	fs.Int64Var(&c.compact.SegmentBytes, "compact-segment-bytes", c.compact.SegmentBytes, "compact-beside: the topic's segment.bytes")
	fs.Float64Var(&c.compact.DirtyRatio, "compact-dirty-ratio", c.compact.DirtyRatio, "compact-beside: the topic's min.cleanable.dirty.ratio")
	metricsURLs := fs.String("metrics-urls", "", "compact-beside: the brokers' /metrics URLs, for the kafka_log_logcleaner* gauges before and after")
	logDirs := fs.String("log-dirs", "", "compact-beside: the brokers' log.dirs, for the topic's cleaner-offset-checkpoint at the end")
	beside := fs.String("beside-report", "", "WITHOUT,WITH: print the with/without table of two kbench reports (stdout of runs without and with --compact-beside) and exit")
	if err := fs.Parse(args); err != nil {
		return o, c, err
	}
	if fs.NArg() > 0 {
		return o, c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *beside != "" {
		if c.besideReport = splitList(*beside); len(c.besideReport) != 2 {
			return o, c, errors.New("--beside-report wants two files, WITHOUT,WITH")
		}
		return o, c, nil
	}
	c.brokers = splitList(*brokers)
	c.secureBrokers = splitList(*secureBrokers)
	switch {
	case len(c.secureBrokers) > 0 && c.secureConfig == "":
		return o, c, errors.New("--secure-brokers needs --secure-config (the listener's client properties)")
	case len(c.secureBrokers) == 0 && c.secureConfig != "":
		return o, c, errors.New("--secure-config without --secure-brokers")
	case len(c.secureBrokers) > 0 && len(c.brokers) == 0:
		return o, c, errors.New("--secure-brokers runs beside --brokers (the plaintext listener of the same cluster)")
	case len(c.secureBrokers) > 0 && (c.compare || c.onlyKfake):
		return o, c, errors.New("--secure-brokers and --compare-kfake: the table compares two targets; run them separately")
	}
	c.compact.MetricsURLs, c.compact.LogDirs = splitList(*metricsURLs), splitList(*logDirs)
	o.MaxRunBytes, o.ConsumeBytes = *maxMiB<<20, *consumeMiB<<20
	o.Kinds = splitList(*kinds)
	o.Acks = splitList(*acks)
	var err error
	if o.Sizes, err = parseInts(*sizes); err != nil {
		return o, c, fmt.Errorf("--sizes: %w", err)
	}
	if o.TxnRecords, err = parseInts(*txnRecords); err != nil {
		return o, c, fmt.Errorf("--txn-records: %w", err)
	}
	if o.TxnSize < 1 {
		return o, c, errors.New("--txn-size must be positive")
	}
	for _, a := range o.Acks {
		if a != "all" && a != "1" {
			return o, c, fmt.Errorf("--acks: %q is neither all nor 1", a)
		}
	}
	for _, k := range o.Kinds {
		if k != kbench.KindProduce && k != kbench.KindE2E && k != kbench.KindConsume && k != kbench.KindTxn {
			return o, c, fmt.Errorf("--scenarios: unknown %q", k)
		}
	}
	if o.Reps < 1 || o.Partitions < 1 || o.E2ERate < 1 || o.E2ESize < 8 {
		return o, c, errors.New("--reps, --partitions and --e2e-rate must be positive, --e2e-size at least 8")
	}
	if len(c.brokers) == 0 && !c.onlyKfake {
		return o, c, errors.New("give --brokers, or --kfake for the in-memory reference alone")
	}
	if len(c.brokers) > 0 && c.onlyKfake {
		return o, c, errors.New("--kfake runs without --brokers; use --compare-kfake to run both")
	}
	if err := c.compact.Validate(); err != nil {
		return o, c, err
	}
	if c.compact.Rate > 0 && len(c.brokers) == 0 {
		return o, c, errors.New("--compact-beside loads the cluster of --brokers; kfake has no cleaner")
	}
	return o, c, nil
}

// run parses args, runs the benchmark and writes the report to stdout.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, c, err := parseArgs(args, stderr)
	if err != nil {
		return err
	}
	if c.besideReport != nil {
		return besideReport(stdout, c.besideReport[0], c.besideReport[1])
	}
	o.Progress = stderr
	if c.cpuprofile != "" {
		f, err := os.Create(c.cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	var targets []*kbench.Target
	defer func() {
		for _, t := range targets {
			t.Close()
		}
	}()
	if len(c.secureBrokers) > 0 {
		// First, so the ratio column is secured/plaintext.
		conn, err := clientconf.FileOpts(c.secureConfig, 10*time.Second)
		if err != nil {
			return fmt.Errorf("--secure-config %s: %w", c.secureConfig, err)
		}
		t, err := kbench.NewTarget(ctx, "secured", c.secureBrokers, conn...)
		if err != nil {
			return err
		}
		targets = append(targets, t)
	}
	if len(c.brokers) > 0 {
		name := "cluster"
		if len(c.secureBrokers) > 0 {
			name = "plaintext"
		}
		t, err := kbench.NewTarget(ctx, name, c.brokers)
		if err != nil {
			return err
		}
		targets = append(targets, t)
	}
	if c.compare || c.onlyKfake {
		kopts := []kfake.Opt{kfake.NumBrokers(c.kfakeBrokers)}
		if c.kfakeSegment > 0 {
			kopts = append(kopts, kfake.BrokerConfigs(map[string]string{
				"log.segment.bytes": strconv.FormatInt(c.kfakeSegment, 10),
			}))
		}
		kc, err := kfake.NewCluster(kopts...)
		if err != nil {
			return fmt.Errorf("kfake: %w", err)
		}
		defer kc.Close()
		t, err := kbench.NewTarget(ctx, "kfake", kc.ListenAddrs())
		if err != nil {
			return err
		}
		targets = append(targets, t)
	}

	var compact *kbench.CompactWriter
	if c.compact.Rate > 0 {
		if compact, err = kbench.StartCompactWriter(ctx, targets[0], c.compact); err != nil {
			return fmt.Errorf("--compact-beside: %w", err)
		}
		fmt.Fprintf(stderr, "compaction beside: %d keyed records/s of %d B over %d keys to a compacted topic on %s\n",
			c.compact.Rate, c.compact.RecordBytes, c.compact.Keys, targets[0].Name)
	}
	results, runErr := kbench.RunScenarios(ctx, o, targets, func(r kbench.Result) {
		if err := r.WriteJSON(stdout); err != nil {
			fmt.Fprintln(stderr, "kbench: json:", err)
		}
	})
	var report kbench.CompactReport
	if compact != nil {
		report = compact.Stop(ctx)
		if err := report.WriteJSON(stdout); err != nil {
			fmt.Fprintln(stderr, "kbench: json:", err)
		}
	}
	fmt.Fprintln(stdout)
	if err := kbench.WriteTable(stdout, results); err != nil {
		return err
	}
	for _, r := range results {
		if r.Scenario.Kind == kbench.KindTxn {
			fmt.Fprintln(stdout, "\nTransactional produce against idempotent produce, measured alternately on each target (MB/s medians; txn/idempotent below 1 is slower):")
			fmt.Fprintln(stdout)
			if err := kbench.WriteTxnTable(stdout, results); err != nil {
				return err
			}
			break
		}
	}
	if compact != nil {
		fmt.Fprintln(stdout)
		if err := report.WriteText(stdout); err != nil {
			return err
		}
	}
	return runErr
}

// besideReport prints the with/without table of two saved reports.
func besideReport(stdout io.Writer, withoutPath, withPath string) error {
	read := func(p string) ([]kbench.Result, error) {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		rs, err := kbench.ReadResults(f)
		if err == nil && len(rs) == 0 {
			err = errors.New("no scenario results")
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		return rs, nil
	}
	without, err := read(withoutPath)
	if err != nil {
		return err
	}
	with, err := read(withPath)
	if err != nil {
		return err
	}
	return kbench.WriteBesideTable(stdout, without, with)
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("empty")
	}
	return out, nil
}
