package test

// Chaos subset (issues 6 and 17): a few scenarios of cmd/chaos's matrix
// (internal/chaos) so that `make test` guards the checker and the fault
// paths: kill -9 of the leader, the leader cut from its followers with
// ZooKeeper reachable, a pause past the session timeout, and the two
// negative controls (acks=1; min.insync.replicas=1 with unclean election),
// which must show lost writes; and from issue 17 the cheapest telling
// ones: kill -9 of a follower (#5), two of three replicas down (#6 SAFE),
// ZooKeeper down while the leader is killed (#19, on a ZooKeeper of its
// own), every client cut off for 20 s (#20, short) and a broker whose
// wall clock is 5 minutes ahead (#25, short).
// `make chaos` runs the whole matrix and writes chaos-report.md.

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/kafkazk/broker/internal/chaos"
	"github.com/kafkazk/broker/internal/zktest"
)

func TestChaos(t *testing.T) {
	if zkSkip != "" {
		t.Skip(zkSkip)
	}
	if testing.Short() {
		t.Skip("chaos scenarios take minutes")
	}
	want := map[string]bool{
		"kill-leader": true, "cut-leader-from-brokers": true, "pause-leader-long": true,
		"ack1-cut-then-kill": true, "unclean-jepsen-2013": true,
		"kill-follower": true, "kill-two": true, "zk-down-kill-leader": true, "clock-ahead-short": true, "client-cut-short": true,
	}
	cfg := chaos.RunConfig{Binary: brokerBin, ZKAddr: zkAddr, ZK: zkConn, Seed: 1, Logf: t.Logf}
	var results []chaos.Result
	start := time.Now()
	for _, sc := range chaos.Scenarios(time.Minute) {
		if !want[sc.Name] {
			continue
		}
		t.Run(sc.Name+"/"+sc.Profile.Name, func(t *testing.T) {
			if sc.OwnZK {
				if _, err := os.Stat(zktest.Jar); err != nil {
					t.Skipf("%s starts and kills a ZooKeeper of its own, and there is no ZooKeeper jar: %v", sc.Name, err)
				}
			}
			cfg.Dir = t.TempDir()
			cfg.Logf = t.Logf
			r := chaos.Run(cfg, sc)
			results = append(results, r)
			if r.Err != nil {
				t.Fatalf("run: %v", r.Err)
			}
			for _, n := range r.Notes {
				t.Logf("note: %s", n)
			}
			if !r.Passed() {
				t.Errorf("%s: verdict %s: %+v; examples %v", sc.Name, r.Verdict(), r.Check.Anomalies, r.Check.Examples)
			}
			if r.Check.OKs == 0 {
				t.Errorf("%s: no write acknowledged", sc.Name)
			}
			if r.Check.CommitsOK == 0 {
				t.Errorf("%s: the consumer group committed nothing", sc.Name)
			}
		})
	}
	var buf bytes.Buffer
	chaos.WriteReport(&buf, results, "go test ./test/ -run TestChaos, "+time.Since(start).Round(time.Second).String())
	t.Logf("\n%s", buf.String())
}
