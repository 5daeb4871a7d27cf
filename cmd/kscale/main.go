// Command kscale is the scale benchmark of issue 16 (make bench-scale):
// against a running scripts/cluster.sh cluster of three brokers (its
// CLUSTER_DIR), it creates --partitions partitions RF 3 and measures every
// row of the issue's table, in this order:
//
//   - create: CreateTopics of all the topics in one request (the first
//     topic has min(1000, N) partitions, the rest are spread over up to
//     nine more), timed until every partition has a leader in Metadata,
//     and until every ISR is full;
//   - idle: CPU per broker (utime+stime from /proc/<pid>/stat over --idle,
//     nothing produced), RSS (VmRSS), open descriptors (/proc/<pid>/fd) and
//     goroutines; ZooKeeper's mntr (zk_znode_count,
//     zk_approximate_data_size) and its heap used after a full GC (jcmd)
//     against before the topics, per partition;
//   - produce: kbench's 1 KiB acks=all produce run over the 1,000
//     partitions of the first topic, alternating with the same run over a
//     topic of 6 partitions, and the ratio of the median MB/s;
//   - controlled shutdown (SIGTERM) of the non-controller broker leading
//     the most partitions: until its process exits, and until each
//     partition it led has another leader (a data watch on each of their
//     state znodes); then its restart, until every ISR is full (state
//     znodes) and every broker reports 0 under-replicated partitions;
//   - kill -9 of the non-controller broker leading the most: from its
//     /brokers/ids/<id> znode vanishing (an exists watch) until every
//     partition it led has another leader (state znode watches); restart;
//   - kill -9 of the controller: from /controller vanishing until a new
//     /controller, until the first state znode written with the new
//     controller epoch (the new controller has loaded every partition
//     state, its failover reads all of it before electing, and elects:
//     the partitions the dead controller led need a leader), and until
//     every partition it led has another leader; restart;
//   - the ZooKeeper snapshot: the brokers and ZooKeeper are stopped
//     (cluster.sh down) and ZooKeeper alone is started again, which loads
//     its data and writes a fresh snapshot; its size is reported.
//
// Before each kill the leadership is made preferred again
// (ElectLeaders), so the victim leads about a third. No time is asserted:
// every wait has a limit only so that a stuck phase fails with its name,
// the broker, and that broker's log tail instead of hanging; a broker
// that exits, or logs "too many open files", fails the phase at once.
//
// Output: one JSON line per figure (kbench.Figure: size, figure, value,
// unit, target) on stdout as measured, then a Markdown table. With
// --pprof-dir, a CPU profile of each broker during each phase.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/internal/kbench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "kscale:", err)
		os.Exit(1)
	}
}

type options struct {
	clusterDir   string
	clusterSh    string
	partitions   int
	topics       int
	idle         time.Duration
	produceDur   time.Duration
	produceReps  int
	spread       int
	pprofDir     string
	waitPer1k    time.Duration
	zkSnapshot   bool
	skipPhases   []string
	load         string
	sessionTimMs int
}

func parseArgs(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("kscale", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.clusterDir, "cluster-dir", "", "the CLUSTER_DIR of a running scripts/cluster.sh cluster of 3 brokers")
	fs.StringVar(&o.clusterSh, "cluster-sh", "scripts/cluster.sh", "scripts/cluster.sh, used to restart brokers and ZooKeeper")
	fs.IntVar(&o.partitions, "partitions", 1000, "partitions to create (RF 3)")
	fs.IntVar(&o.topics, "topics", 10, "at most this many topics; the first has min(--spread, N) partitions")
	fs.IntVar(&o.spread, "spread", 1000, "produce: partitions of the spread run (the first topic's)")
	fs.DurationVar(&o.idle, "idle", 30*time.Second, "idle: CPU sampling window")
	fs.DurationVar(&o.produceDur, "produce-duration", 5*time.Second, "produce: one run")
	fs.IntVar(&o.produceReps, "produce-reps", 2, "produce: runs of each, alternating (medians)")
	fs.StringVar(&o.pprofDir, "pprof-dir", "", "save a CPU profile of each broker during each phase here")
	fs.DurationVar(&o.waitPer1k, "wait-per-1k", 60*time.Second, "limit of every wait per 1,000 partitions (at least 2 min): a phase stuck longer fails")
	fs.BoolVar(&o.zkSnapshot, "zk-snapshot", true, "at the end, stop the cluster and start ZooKeeper alone, for the size of the snapshot it writes")
	skip := fs.String("skip", "", "phases to skip: produce,shutdown,kill,controller")
	fs.StringVar(&o.load, "load", "", "the machine's load (uptime) to print beside the figures")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.clusterDir == "" {
		return o, errors.New("--cluster-dir is required")
	}
	if o.partitions < 1 || o.topics < 1 || o.spread < 1 || o.produceReps < 1 {
		return o, errors.New("--partitions, --topics, --spread and --produce-reps must be positive")
	}
	for _, s := range strings.Split(*skip, ",") {
		if s = strings.TrimSpace(s); s != "" {
			if !slices.Contains([]string{"produce", "shutdown", "kill", "controller"}, s) {
				return o, fmt.Errorf("--skip: unknown phase %q", s)
			}
			o.skipPhases = append(o.skipPhases, s)
		}
	}
	return o, nil
}

// bench is one run at one size.
type bench struct {
	o      options
	c      *cluster
	z      *zkView
	t      *kbench.Target
	cl     *kgo.Client
	stdout io.Writer
	stderr io.Writer

	topics []string
	parts  []tp
	assign map[tp][]int32
	figs   []kbench.Figure
	// zkHeap0 is ZooKeeper's used heap (KiB) before the topics.
	zkHeap0 int64
	// phaseStart is when the current phase began.
	phaseStart time.Time
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseArgs(args, stderr)
	if err != nil {
		return err
	}
	c, err := openCluster(o.clusterDir, o.clusterSh)
	if err != nil {
		return err
	}
	b := &bench{o: o, c: c, stdout: stdout, stderr: stderr}
	runErr := b.run(ctx)
	table := b.figs
	if runErr != nil {
		// The JSON line carries the whole report; the table only its
		// first line, below it.
		b.fig("phase_failed", secs(time.Since(b.phaseStart)), "s", nil, runErr.Error())
	}
	fmt.Fprintln(stdout)
	if o.load != "" {
		fmt.Fprintf(stdout, "load (uptime) at the start: %s\n\n", o.load)
	}
	if err := kbench.WriteScaleTable(stdout, table); err != nil {
		return err
	}
	if runErr != nil {
		first, _, _ := strings.Cut(runErr.Error(), "\n")
		fmt.Fprintf(stdout, "\nFAILED after %.0f s in the phase: %s\n", secs(time.Since(b.phaseStart)), first)
	}
	return runErr
}

func (b *bench) progress(format string, args ...any) {
	fmt.Fprintf(b.stderr, "kscale %d: %s: %s\n", b.o.partitions, time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// fig records and prints one figure.
func (b *bench) fig(name string, v float64, unit string, broker *int32, note string) {
	f := kbench.Figure{Size: b.o.partitions, Figure: name, Value: v, Unit: unit,
		Target: kbench.ScaleTarget(name, b.o.partitions), Broker: broker, Note: note}
	b.figs = append(b.figs, f)
	if err := f.WriteJSON(b.stdout); err != nil {
		fmt.Fprintln(b.stderr, "kscale: json:", err)
	}
}

func secs(d time.Duration) float64 { return d.Seconds() }

// waitLimit bounds each wait.
func (b *bench) waitLimit() time.Duration {
	return max(2*time.Minute, time.Duration(float64(b.o.waitPer1k)*float64(b.o.partitions)/1000))
}

// phaseError says which phase failed and, for every broker, whether it
// runs, its fatal log lines and its log tail.
func (b *bench) phaseError(phase string, err error) error {
	var sb strings.Builder
	fmt.Fprintf(&sb, "phase %s failed at %d partitions after %.0f s: %v", phase, b.o.partitions, secs(time.Since(b.phaseStart)), err)
	for _, id := range b.c.ids() {
		held := ""
		mctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if m, err := b.c.metrics(mctx, id, mParts); err == nil {
			held = fmt.Sprintf(", %.0f replicas", m[mParts])
		}
		cancel()
		state := "running"
		pid, perr := b.c.pid(id)
		if perr != nil {
			state = "NOT RUNNING"
		}
		fds := ""
		if perr == nil {
			if n, err := kbench.ProcOpenFDs(pid); err == nil {
				fds = fmt.Sprintf(", %d open fds", n)
			}
		}
		n, first := b.c.fatalCount(id)
		fmt.Fprintf(&sb, "\n  broker %d: %s%s%s, %d fatal log line(s)", id, state, held, fds, n)
		if n > 0 {
			fmt.Fprintf(&sb, "; first: %s", first)
		}
		fmt.Fprintf(&sb, "\n  --- broker %d log tail (%s) ---\n%s", id, b.c.logPath(id), indent(b.c.logTail(id, 12)))
	}
	return errors.New(sb.String())
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}

// wait polls cond until it is done, the cluster is unhealthy, or the limit.
func (b *bench) wait(ctx context.Context, what string, every time.Duration, cond func() (bool, string, error)) error {
	deadline := time.Now().Add(b.waitLimit())
	lastHealth := time.Time{}
	why := ""
	for {
		done, w, err := cond()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if done {
			return nil
		}
		why = w
		if time.Since(lastHealth) > time.Second {
			if err := b.c.health(); err != nil {
				return fmt.Errorf("%s: %w (last: %s)", what, err, why)
			}
			lastHealth = time.Now()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not done after %s: %s", what, b.waitLimit(), why)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
}

func (b *bench) run(ctx context.Context) error {
	phases := []struct {
		name string
		fn   func(context.Context) error
	}{
		{"connect", b.connect},
		{"create", b.create},
		{"idle", b.idle},
		{"produce", b.produce},
		{"shutdown", b.controlledShutdown},
		{"kill", b.killBroker},
		{"controller", b.killController},
		{"zk-snapshot", b.zkSnapshot},
	}
	defer func() {
		if b.cl != nil {
			b.cl.Close()
		}
		if b.t != nil {
			b.t.Close()
		}
		if b.z != nil {
			b.z.conn.Close()
		}
	}()
	for _, p := range phases {
		if slices.Contains(b.o.skipPhases, p.name) {
			b.progress("phase %s: skipped", p.name)
			continue
		}
		if p.name == "zk-snapshot" && !b.o.zkSnapshot {
			continue
		}
		b.progress("phase %s", p.name)
		b.phaseStart = time.Now()
		if err := p.fn(ctx); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("phase %s: interrupted: %w", p.name, err)
			}
			perr := b.phaseError(p.name, err)
			if b.z != nil && p.name != "zk-snapshot" {
				// What ZooKeeper holds when the brokers failed: the
				// controller may have created every state regardless.
				zkPid, zkErr := b.c.zkPid()
				b.zkFigures(ctx, zkPid, zkErr)
			}
			return perr
		}
	}
	return nil
}

// profileAll starts a CPU profile of every running broker over d, into
// pprof-dir/<size>-<phase>-broker-<id>.pprof; the returned func waits.
func (b *bench) profileAll(ctx context.Context, phase string, d time.Duration) func() {
	if b.o.pprofDir == "" {
		return func() {}
	}
	var wg sync.WaitGroup
	for _, id := range b.c.ids() {
		if _, err := b.c.pid(id); err != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := filepath.Join(b.o.pprofDir, fmt.Sprintf("%d-%s-broker-%d.pprof", b.o.partitions, phase, id))
			if err := b.c.profile(ctx, id, d, path); err != nil {
				b.progress("pprof %s broker %d: %v", phase, id, err)
			}
		}()
	}
	return wg.Wait
}

func (b *bench) connect(ctx context.Context) error {
	if b.o.pprofDir != "" {
		if err := os.MkdirAll(b.o.pprofDir, 0o755); err != nil {
			return err
		}
	}
	if err := b.c.health(); err != nil {
		return err
	}
	z, err := connectZK(b.c.zkAddr(), b.c.chroot)
	if err != nil {
		return err
	}
	b.z = z
	t, err := kbench.NewTarget(ctx, "cluster", b.c.bootstrap())
	if err != nil {
		return err
	}
	b.t = t
	if t.RF != 3 {
		return fmt.Errorf("the cluster has %d brokers in Metadata, want 3", t.RF)
	}
	b.cl, err = kgo.NewClient(kgo.SeedBrokers(b.c.bootstrap()...), kgo.RequestTimeoutOverhead(time.Minute))
	return err
}

// layout is the topics and their partition counts: the first has
// min(spread, n), the rest share what is left, at most topics in all.
func layout(n, topics, spread int) []int {
	first := min(n, spread)
	out := []int{first}
	rest := n - first
	k := min(topics-1, rest)
	for i := range k {
		c := rest / k
		if i < rest%k {
			c++
		}
		out = append(out, c)
	}
	return out
}

func (b *bench) create(ctx context.Context) error {
	if heap0, err := b.c.zkHeapUsedKiB(ctx); err == nil {
		b.zkHeap0 = heap0
	} else {
		b.progress("zookeeper heap before: %v", err)
	}
	counts := layout(b.o.partitions, b.o.topics, b.o.spread)
	stamp := time.Now().Unix()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(b.waitLimit() / time.Millisecond)
	for i, n := range counts {
		name := fmt.Sprintf("kscale-%d-%d-%d", b.o.partitions, stamp, i)
		b.topics = append(b.topics, name)
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, int32(n), 3
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = "min.insync.replicas", kmsg.StringPtr("2")
		rt.Configs = append(rt.Configs, cfg)
		req.Topics = append(req.Topics, rt)
		for p := range n {
			b.parts = append(b.parts, tp{name, int32(p)})
		}
	}
	b.progress("CreateTopics: %d topics, %v partitions", len(counts), counts)
	stop := b.profileAll(ctx, "create", 15*time.Second)
	defer stop()
	start := time.Now()
	type result struct {
		resp *kmsg.CreateTopicsResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := req.RequestWith(ctx, b.cl)
		done <- result{resp, err}
	}()
	var answered time.Duration
	var createErr error
	answeredOK := false
	lastMD, pending := time.Now(), "CreateTopics not answered yet"
	leaders := time.Duration(0)
	err := b.wait(ctx, "create: every partition has a leader in Metadata", 250*time.Millisecond, func() (bool, string, error) {
		select {
		case r := <-done:
			answered, answeredOK = time.Since(start), true
			if r.err != nil {
				createErr = r.err
			} else {
				for _, t := range r.resp.Topics {
					if t.ErrorCode != 0 {
						msg := ""
						if t.ErrorMessage != nil {
							msg = *t.ErrorMessage
						}
						createErr = fmt.Errorf("topic %s: error %d %s", t.Topic, t.ErrorCode, msg)
						break
					}
				}
			}
			if createErr != nil {
				return false, "", fmt.Errorf("CreateTopics: %w", createErr)
			}
		default:
		}
		if !answeredOK {
			// Progress, every few seconds: how far the creation got.
			if time.Since(lastMD) > 5*time.Second {
				lastMD = time.Now()
				if led, full, _, err := b.metadataLeaders(ctx); err == nil {
					pending = fmt.Sprintf("CreateTopics not answered after %.0f s; %d of %d partitions have a leader, %d a full ISR in Metadata",
						secs(time.Since(start)), led, len(b.parts), full)
				}
			}
			return false, pending, nil
		}
		led, full, why, err := b.metadataLeaders(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		if led == len(b.parts) && leaders == 0 {
			leaders = time.Since(start)
		}
		return leaders > 0, fmt.Sprintf("%d of %d partitions have a leader, %d a full ISR: %s", led, len(b.parts), full, why), nil
	})
	if err != nil {
		return err
	}
	b.fig("create_request", secs(answered), "s", nil, fmt.Sprintf("CreateTopics of %d topics in one request, until answered", len(counts)))
	b.fig("create_until_leaders", secs(leaders), "s", nil, "from sending CreateTopics until every partition has a leader in Metadata")
	err = b.wait(ctx, "create: every ISR full in Metadata", 250*time.Millisecond, func() (bool, string, error) {
		_, full, why, err := b.metadataLeaders(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		return full == len(b.parts), fmt.Sprintf("%d of %d partitions with a full ISR: %s", full, len(b.parts), why), nil
	})
	if err != nil {
		return err
	}
	b.fig("create_until_isr_full", secs(time.Since(start)), "s", nil, "until every ISR has 3 replicas in Metadata")
	b.assign = map[tp][]int32{}
	for _, t := range b.topics {
		a, err := b.z.assignment(t)
		if err != nil {
			return err
		}
		for p, r := range a {
			b.assign[tp{t, p}] = r
		}
	}
	return nil
}

// metadataLeaders asks Metadata for the benchmark's topics: how many
// partitions have a leader, how many a full ISR, and why not all.
func (b *bench) metadataLeaders(ctx context.Context) (led, full int, why string, err error) {
	mctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	md, err := b.t.Admin().Metadata(mctx, b.topics...)
	if err != nil {
		return 0, 0, "", err
	}
	for _, t := range b.topics {
		td, ok := md.Topics[t]
		if !ok || td.Err != nil {
			why = fmt.Sprintf("topic %s: %v", t, td.Err)
			continue
		}
		for _, p := range td.Partitions {
			if p.Err == nil && p.Leader >= 0 {
				led++
				if len(p.ISR) == 3 {
					full++
				} else if why == "" {
					why = fmt.Sprintf("%s-%d isr %v", t, p.Partition, p.ISR)
				}
			} else if why == "" {
				why = fmt.Sprintf("%s-%d leader %d err %v", t, p.Partition, p.Leader, p.Err)
			}
		}
	}
	return led, full, why, nil
}
