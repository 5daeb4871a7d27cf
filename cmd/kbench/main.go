// Command kbench measures a Kafka cluster with franz-go: produce throughput
// by record size and acks, end-to-end latency at a fixed offered rate, and
// consume throughput from the start of a filled topic. With --compare-kfake
// it runs the same scenarios alternately against the given cluster and an
// in-process kfake cluster (in memory, no replication), and prints the ratio
// of the medians.
//
//	kbench --brokers 127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094 --compare-kfake
//	kbench --kfake                           # the in-memory reference alone
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

	"github.com/twmb/franz-go/pkg/kfake"

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

// run parses args, runs the benchmark and writes the report to stdout.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o := kbench.DefaultOptions()
	fs := flag.NewFlagSet("kbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	brokers := fs.String("brokers", "", "bootstrap list host:port,... of the cluster to measure")
	compare := fs.Bool("compare-kfake", false, "also run every scenario against an in-process kfake cluster, alternating, and print ratios")
	onlyKfake := fs.Bool("kfake", false, "run against an in-process kfake cluster only (no --brokers)")
	kfakeBrokers := fs.Int("kfake-brokers", 3, "brokers in the kfake cluster")
	kfakeSegment := fs.Int64("kfake-segment-bytes", 0, "kfake's log.segment.bytes (0: kfake's default, 100 MiB)")
	kinds := fs.String("scenarios", strings.Join(o.Kinds, ","), "scenarios to run: produce,e2e,consume")
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
	consumeMiB := fs.Int64("consume-mib", o.ConsumeBytes>>20, "consume: MiB of values to fill the topic with")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of this process (clients and kfake) to the file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	o.MaxRunBytes, o.ConsumeBytes = *maxMiB<<20, *consumeMiB<<20
	o.Kinds = splitList(*kinds)
	o.Acks = splitList(*acks)
	var err error
	if o.Sizes, err = parseInts(*sizes); err != nil {
		return fmt.Errorf("--sizes: %w", err)
	}
	for _, a := range o.Acks {
		if a != "all" && a != "1" {
			return fmt.Errorf("--acks: %q is neither all nor 1", a)
		}
	}
	for _, k := range o.Kinds {
		if k != kbench.KindProduce && k != kbench.KindE2E && k != kbench.KindConsume {
			return fmt.Errorf("--scenarios: unknown %q", k)
		}
	}
	if o.Reps < 1 || o.Partitions < 1 || o.E2ERate < 1 || o.E2ESize < 8 {
		return errors.New("--reps, --partitions and --e2e-rate must be positive, --e2e-size at least 8")
	}
	if *brokers == "" && !*onlyKfake {
		return errors.New("give --brokers, or --kfake for the in-memory reference alone")
	}
	if *brokers != "" && *onlyKfake {
		return errors.New("--kfake runs without --brokers; use --compare-kfake to run both")
	}
	o.Progress = stderr
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
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
	if *brokers != "" {
		t, err := kbench.NewTarget(ctx, "cluster", splitList(*brokers))
		if err != nil {
			return err
		}
		targets = append(targets, t)
	}
	if *compare || *onlyKfake {
		kopts := []kfake.Opt{kfake.NumBrokers(*kfakeBrokers)}
		if *kfakeSegment > 0 {
			kopts = append(kopts, kfake.BrokerConfigs(map[string]string{
				"log.segment.bytes": strconv.FormatInt(*kfakeSegment, 10),
			}))
		}
		c, err := kfake.NewCluster(kopts...)
		if err != nil {
			return fmt.Errorf("kfake: %w", err)
		}
		defer c.Close()
		t, err := kbench.NewTarget(ctx, "kfake", c.ListenAddrs())
		if err != nil {
			return err
		}
		targets = append(targets, t)
	}

	results, runErr := kbench.RunScenarios(ctx, o, targets, func(r kbench.Result) {
		if err := r.WriteJSON(stdout); err != nil {
			fmt.Fprintln(stderr, "kbench: json:", err)
		}
	})
	fmt.Fprintln(stdout)
	if err := kbench.WriteTable(stdout, results); err != nil {
		return err
	}
	return runErr
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
