package chaos

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// RunConfig is shared by every scenario of a run.
type RunConfig struct {
	Binary string   // broker binary
	ZKAddr string   // ZooKeeper host:port
	ZK     *zk.Conn // a session to it
	Dir    string   // scratch directory
	Seed   int64
	Logf   func(string, ...any)
}

// Result is one scenario's outcome.
type Result struct {
	Scenario string
	Profile  string
	Safe     bool
	Desc     string
	// Allowed are anomaly names the scenario expects (Scenario.Allowed):
	// reported, not counted against the verdict. Recorded marks a
	// scenario whose loss Kafka does not promise to prevent
	// (Scenario.Recorded).
	Allowed  []string
	Recorded bool
	Expect   string // a negative control's anomaly (Profile.Expect)
	Check    CheckResult
	Figures  Figures
	Notes    []string
	Duration time.Duration
	Err      error
}

// Topic and Partitions of every scenario.
const (
	Topic      = "chaos"
	Partitions = 6
)

// Passed is the verdict: a SAFE scenario passes with zero anomalies
// besides its allowed ones; a negative control passes when the checker
// caught its expected anomaly (loss unless Profile.Expect names another).
func (r Result) Passed() bool {
	if r.Err != nil {
		return false
	}
	if r.Safe {
		return r.Check.TotalExcept(r.Allowed) == 0
	}
	return r.Check.ByName()[r.expect()] > 0
}

func (r Result) expect() string {
	if r.Expect == "" {
		return "lost"
	}
	return r.Expect
}

// Verdict is a one-word verdict for the report.
func (r Result) Verdict() string {
	switch {
	case r.Err != nil:
		return "ERROR"
	case r.Recorded && r.Passed():
		return "RECORDED"
	case r.Safe && r.Passed():
		return "PASS"
	case r.Safe:
		return "FAIL"
	case r.Passed():
		return "CAUGHT"
	default:
		return "NOT CAUGHT"
	}
}

// Run runs one scenario on a fresh cluster: start three brokers and the
// topic, start the ZooKeeper sampler and the workload, warm up, run the
// nemesis, heal, let the writers finish, wait for full ISRs, stop every
// broker and read each replica's files, then check.
func Run(cfg RunConfig, sc Scenario) (res Result) {
	began := time.Now()
	res = Result{Scenario: sc.Name, Profile: sc.Profile.Name, Safe: sc.Profile.Safe, Desc: sc.Desc,
		Allowed: sc.Allowed, Recorded: sc.Recorded, Expect: sc.Profile.Expect}
	defer func() { res.Duration = time.Since(began) }()
	logf := func(format string, args ...any) {
		cfg.Logf("[%s/%s] "+format, append([]any{sc.Name, sc.Profile.Name}, args...)...)
	}
	dir := filepath.Join(cfg.Dir, sc.Name+"-"+sc.Profile.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		res.Err = err
		return res
	}
	zkAddr, zkConn := cfg.ZKAddr, cfg.ZK
	var ownZK *ZKServer
	if sc.OwnZK {
		// A ZooKeeper of the scenario's own, which its nemesis stops and
		// restarts (the shared one serves other runs).
		var err error
		if ownZK, err = StartZKServer(filepath.Join(dir, "zk"), logf); err != nil {
			res.Err = fmt.Errorf("own ZooKeeper: %w", err)
			return res
		}
		defer ownZK.Close()
		zkAddr, zkConn = ownZK.Addr, ownZK.Conn
	}
	nBrokers := sc.Brokers
	if nBrokers == 0 {
		nBrokers = 3
	}
	c, err := StartCluster(ClusterConfig{Binary: cfg.Binary, ZKAddr: zkAddr, ZK: zkConn, Dir: dir, Brokers: nBrokers,
		Props: sc.Profile.BrokerProps, Env: sc.BrokerEnv, Tmpfs: sc.Tmpfs, Logf: logf})
	if err != nil {
		res.Err = fmt.Errorf("start cluster: %w", err)
		return res
	}
	defer c.Close()
	if err := c.CreateTopic(Topic, Partitions, nil); err != nil {
		res.Err = err
		return res
	}
	h := NewHistory()
	s := StartSampler(c, h, Topic, Partitions, 100*time.Millisecond)
	defer s.Stop()
	var tw *TxnWorkload
	if sc.Txn {
		if err := c.ServesTransactions(); err != nil {
			res.Err = err
			return res
		}
		if tw, err = StartTxnWorkload(h, c.Seeds(), func(t string, n int32) error { return c.CreateTopic(t, n, nil) }, Partitions, cfg.Seed, logf); err != nil {
			res.Err = fmt.Errorf("transactional workload: %w", err)
			return res
		}
	}
	w, err := StartWorkload(h, c, Topic, Partitions, sc.Profile, s.Leader, logf)
	if err != nil {
		if tw != nil {
			tw.StopWriters()
			tw.Finish(time.Second)
		}
		res.Err = err
		return res
	}
	env := &Env{C: c, H: h, Topic: Topic, Parts: Partitions, Rand: rand.New(rand.NewSource(cfg.Seed)), Logf: logf, ZKServer: ownZK}
	time.Sleep(3 * time.Second) // warm up: writes flowing before the first fault
	logf("nemesis: %s", sc.Desc)
	sc.Nemesis(env)
	env.Recover()
	time.Sleep(3 * time.Second)
	w.StopWriters(40 * time.Second)
	if tw != nil {
		tw.StopWriters()
	}
	writesEnd := h.Now()
	if err := c.WaitFullISR(Topic, Partitions, 60*time.Second); err != nil {
		env.note("ISR not full within 60 s of the end of writes: %v", err)
	}
	time.Sleep(3 * time.Second) // the consumers read up to the HW
	group := w.StopGroup()
	w.StopConsumer()
	var txnIn TxnInput
	if tw != nil {
		for _, t := range []string{TxnTopic, CTPInput, CTPOutput} {
			if err := c.WaitFullISR(t, Partitions, 30*time.Second); err != nil {
				env.note("%s: ISR not full: %v", t, err)
			}
		}
		var notes []string
		txnIn, notes = tw.Finish(2*txnTimeout + 30*time.Second)
		for _, n := range notes {
			env.note("%s", n)
		}
	}
	final := map[int32]int32{}
	for p := int32(0); p < Partitions; p++ {
		final[p] = env.Leader(p)
	}
	samples := s.Stop()
	c.StopAll()
	for _, b := range c.Brokers {
		data, _ := os.ReadFile(b.LogPath)
		if strings.Contains(string(data), "panic") {
			env.note("broker %d's log mentions a panic (%s)", b.ID, b.LogPath)
		}
	}
	// The replicas are the topic znode's: a reassignment may have moved
	// them off some brokers (which deleted their copies).
	assigned, err := c.Assignment(Topic)
	if err != nil {
		env.note("%v", err)
	}
	reps := map[int32][]Replica{}
	for p := int32(0); p < Partitions; p++ {
		for _, b := range c.Brokers {
			if assigned.Partitions != nil && !slices.Contains(assigned.Partitions[p], b.ID) {
				continue
			}
			r := ReadReplica(b.ID, b.DataDir, Topic, p)
			if r.Err != "" {
				env.note("broker %d p%d: %s", b.ID, p, r.Err)
			}
			reps[p] = append(reps[p], r)
		}
	}
	if tw != nil {
		txnIn.Input = map[int32]map[int64]string{}
		inAssigned, err := c.Assignment(CTPInput)
		if err != nil {
			env.note("%v", err)
		}
		for p := int32(0); p < Partitions; p++ {
			var best *Replica
			for _, b := range c.Brokers {
				if inAssigned.Partitions != nil && !slices.Contains(inAssigned.Partitions[p], b.ID) {
					continue
				}
				r := ReadReplica(b.ID, b.DataDir, CTPInput, p)
				if r.Err == "" && (best == nil || r.HW > best.HW) {
					best = &r
				}
			}
			txnIn.Input[p] = map[int64]string{}
			if best == nil {
				env.note("%s p%d: no replica to read", CTPInput, p)
				continue
			}
			for o, v := range best.Values {
				if o < best.HW {
					txnIn.Input[p][o] = v
				}
			}
		}
	}
	writes, polls, faults := h.snapshot()
	res.Check = Check(CheckInput{Writes: writes, Polls: polls, Samples: samples, Replicas: reps,
		FinalLeader: final, UncleanAllowed: sc.Profile.BrokerProps["unclean.leader.election.enable"] == "true", Txn: txnIn,
		Group: group, Resets: h.resets(), Rewinds: h.rewinds()})
	for i, r := range h.resets() {
		if i == 10 {
			env.note("... %d producer id resets in all", len(h.resets()))
			break
		}
		env.note("producer id reset (kgo's KIP-360 epoch bump): %s at %s, answer from broker %d for p%d, producer id %d epoch %d: %s",
			r.Producer, r.At.Round(time.Millisecond), r.Broker, r.Partition, r.ProducerID, r.ProducerEpoch, r.Err)
	}
	if tw != nil && res.Check.TxnCommitted == 0 && env.Err == nil {
		env.Err = fmt.Errorf("no transaction committed: the transactional checks saw nothing")
	}
	res.Figures = ComputeFigures(writes, faults, samples, Partitions, writesEnd)
	res.Notes = append(env.Notes, env.Metrics...)
	res.Err = env.Err
	logf("done in %s: %s; attempted=%d ok=%d fail=%d info=%d group commits=%d/%d anomalies=%+v", time.Since(began).Round(time.Second),
		res.Verdict(), res.Check.Attempted, res.Check.OKs, res.Check.Fails, res.Check.Infos, res.Check.CommitsOK, res.Check.Commits, res.Check.Anomalies)
	for name, ex := range res.Check.Examples {
		for _, e := range ex {
			logf("  %s: %s", name, e)
		}
	}
	return res
}
