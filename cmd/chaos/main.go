// Command chaos runs the fault-injection matrix of issue 6 against broker
// processes and writes a Markdown report.
//
//	chaos [-broker bin] [-zk host:port] [-scenarios a,b] [-random 5m] [-out chaos-report.md]
//	chaos -soak 30m [-out soak-report.md]
//	chaos compose -brokers ... -containers ... -zk ... -network ... (compose.go)
//
// Without -broker it builds ./cmd/broker; without -zk it starts a
// ZooKeeper from Debian's zookeeper package (as the test harness does).
// Each scenario starts three fresh brokers in their own chroot;
// txn-random-mix also runs the transactional workload and checks of issue
// 18 and is an error against a broker without transactions (EndTxn not in
// ApiVersions), so `-scenarios txn-random-mix` runs it alone. The exit
// status is 1 when a SAFE scenario shows an anomaly or a negative control
// goes uncaught.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/kafkazk/broker/internal/chaos"
	"github.com/kafkazk/broker/internal/zktest"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "compose" {
		os.Exit(runCompose(os.Args[2:]))
	}
	os.Exit(run())
}

type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

func run() int {
	bin := flag.String("broker", "", "broker binary (default: build ./cmd/broker)")
	zkAddr := flag.String("zk", os.Getenv("BROKER_TEST_ZK"), "ZooKeeper host:port (default: start one)")
	only := flag.String("scenarios", "", "comma-separated scenario names (default: all); name/PROFILE also matches")
	random := flag.Duration("random", 3*time.Minute, "length of the random-mix scenario")
	out := flag.String("out", "chaos-report.md", "report file")
	seed := flag.Int64("seed", time.Now().UnixNano(), "random seed for the random mix")
	keep := flag.Bool("keep", false, "keep the scratch directory (broker logs and data)")
	list := flag.Bool("list", false, "list the scenarios and exit")
	soak := flag.Duration("soak", 0, "run only the soak (chaos.SoakScenario) for this long (make soak)")
	soakDisk := flag.Bool("soak-disk-full", false, "add disk full to the soak's mix (broker 1's data dir on a tmpfs; needs the logdir branch's log dir failure handling)")
	flag.Parse()

	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
	}
	all := chaos.Scenarios(*random)
	if *list {
		for _, s := range all {
			fmt.Printf("%-28s %-8s %s\n", s.Name, s.Profile.Name, s.Desc)
		}
		return 0
	}
	var scs []chaos.Scenario
	for _, s := range all {
		if *only == "" || matches(*only, s) {
			scs = append(scs, s)
		}
	}
	if *soak > 0 {
		scs = []chaos.Scenario{chaos.SoakScenario(*soak, *soakDisk)}
	}
	if len(scs) == 0 {
		logf("no scenario matches %q (see -list)", *only)
		return 2
	}
	dir, err := os.MkdirTemp("", "chaos-")
	if err != nil {
		logf("%v", err)
		return 1
	}
	if *keep {
		logf("scratch directory %s kept", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	if *bin == "" {
		*bin = filepath.Join(dir, "broker")
		cmd := exec.Command("go", "build", "-o", *bin, "./cmd/broker")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			logf("go build ./cmd/broker: %v\n%s", err, b)
			return 1
		}
	}
	if *zkAddr == "" {
		srv, err := zktest.Launch(filepath.Join(dir, "zk"))
		if err != nil {
			logf("start ZooKeeper: %v", err)
			return 1
		}
		defer srv.Stop()
		*zkAddr = srv.Addr
	}
	conn, events, err := zk.Connect([]string{*zkAddr}, 20*time.Second, zk.WithLogger(quietLogger{}))
	if err != nil {
		logf("ZooKeeper %s: %v", *zkAddr, err)
		return 1
	}
	defer conn.Close()
	for ev := range events {
		if ev.State == zk.StateHasSession {
			break
		}
	}
	go func() {
		for range events {
		}
	}()
	cfg := chaos.RunConfig{Binary: *bin, ZKAddr: *zkAddr, ZK: conn, Dir: dir, Seed: *seed, Logf: logf}
	start := time.Now()
	var results []chaos.Result
	ok := true
	for _, sc := range scs {
		r := chaos.Run(cfg, sc)
		results = append(results, r)
		ok = ok && r.Passed()
		if err := writeReport(*out, results, start, *seed); err != nil {
			logf("write %s: %v", *out, err)
			return 1
		}
	}
	logf("report written to %s (%d scenarios, %s)", *out, len(results), time.Since(start).Round(time.Second))
	if !ok {
		return 1
	}
	return 0
}

func matches(list string, s chaos.Scenario) bool {
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if n == s.Name || n == s.Name+"/"+s.Profile.Name || n == s.Profile.Name {
			return true
		}
	}
	return false
}

func writeReport(path string, results []chaos.Result, start time.Time, seed int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	header := fmt.Sprintf("Run of %s, %s, seed %d. Three brokers, topic %q with %d partitions at RF 3; zookeeper.session.timeout.ms=%d, replica.lag.time.max.ms=%d.",
		start.Format(time.RFC3339), time.Since(start).Round(time.Second), seed, chaos.Topic, chaos.Partitions,
		chaos.SessionTimeout.Milliseconds(), chaos.LagTime.Milliseconds())
	chaos.WriteReport(f, results, header)
	return f.Close()
}
