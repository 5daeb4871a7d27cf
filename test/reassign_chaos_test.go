package test

// The reassign-bounce scenario of `make chaos` (internal/chaos), run here so
// that the test suite guards it: brokers 4 and 5 join a producing
// three-broker cluster, every partition moves onto both, brokers are
// bounced during the move, and the chaos checker finds nothing lost.

import (
	"testing"

	"github.com/kafkazk/broker/internal/chaos"
)

func TestChaosReassignBounce(t *testing.T) {
	if zkSkip != "" {
		t.Skip(zkSkip)
	}
	for _, sc := range chaos.Scenarios(0) {
		if sc.Name != "reassign-bounce" {
			continue
		}
		r := chaos.Run(chaos.RunConfig{Binary: brokerBin, ZKAddr: zkAddr, ZK: zkConn, Seed: 1, Dir: t.TempDir(), Logf: t.Logf}, sc)
		for _, n := range r.Notes {
			t.Logf("note: %s", n)
		}
		if r.Err != nil {
			t.Fatalf("run: %v", r.Err)
		}
		t.Logf("%s: %s in %s; attempted=%d ok=%d fail=%d info=%d; latency p50 %s p99 %s",
			sc.Name, r.Verdict(), r.Duration, r.Check.Attempted, r.Check.OKs, r.Check.Fails, r.Check.Infos, r.Figures.LatencyP50, r.Figures.LatencyP99)
		if !r.Passed() {
			t.Errorf("%s: verdict %s: %+v; examples %v", sc.Name, r.Verdict(), r.Check.Anomalies, r.Check.Examples)
		}
		if r.Check.OKs == 0 {
			t.Errorf("%s: no write acknowledged", sc.Name)
		}
		return
	}
	t.Fatal("no reassign-bounce scenario in chaos.Scenarios")
}
