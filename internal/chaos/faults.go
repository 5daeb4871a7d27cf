package chaos

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// The faults of issue 17 (reliability.md §5 #5–#8, #19–#21, #23, #25):
// several brokers down at once, a lost unflushed tail, ZooKeeper down,
// clients cut off, slow links. Each records one FaultEvent.

// startAll restarts ids in parallel.
func (e *Env) startAll(ids ...int32) {
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() { defer wg.Done(); e.start(id) }()
	}
	wg.Wait()
}

// Others are the brokers other than ids, in id order.
func (e *Env) Others(ids ...int32) []int32 {
	var out []int32
	for _, b := range e.C.Brokers {
		if !contains(ids, b.ID) {
			out = append(out, b.ID)
		}
	}
	return out
}

func contains(ids []int32, id int32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// KillTwo kills a and b at once (kill -9), keeps them down for d, then
// restarts both (#6).
func (e *Env) KillTwo(a, b int32, d time.Duration) {
	end := e.H.Fault("kill-two", a, append(e.Led(a), e.Led(b)...))
	e.C.Broker(a).Kill()
	e.C.Broker(b).Kill()
	time.Sleep(d)
	e.noteStates(fmt.Sprintf("with %d and %d down", a, b))
	e.startAll(a, b)
	end()
}

// noteStates notes every partition's leader and ISR from ZooKeeper.
func (e *Env) noteStates(when string) {
	var parts []string
	for p := int32(0); p < e.Parts; p++ {
		st, err := e.C.State(e.Topic, p)
		if err != nil {
			parts = append(parts, fmt.Sprintf("p%d ?", p))
			continue
		}
		parts = append(parts, fmt.Sprintf("p%d leader %d isr %v", p, st.Leader, st.ISR))
	}
	e.note("%s: %s", when, strings.Join(parts, "; "))
}

// UncleanTwoDown is #6 with the survivor out of the ISR: s is cut from
// the other brokers until the leaders drop it from their ISRs, then the
// other two are killed while s is still cut, so only an unclean election
// can give a partition a leader; then the network heals and the two
// restart (and truncate to s's log).
func (e *Env) UncleanTwoDown(s int32, down time.Duration) {
	others := e.Others(s)
	end := e.H.Fault("two-down-survivor-out-of-isr", s, nil)
	e.cutFromBrokers(s)
	time.Sleep(LagTime + 4*time.Second)
	for _, id := range others {
		e.C.Broker(id).Kill()
	}
	time.Sleep(down)
	e.noteStates(fmt.Sprintf("%d alone", s))
	e.C.HealNetwork()
	time.Sleep(3 * time.Second)
	e.startAll(others...)
	end()
}

// KillAll kills every broker in kill order, gap apart (a gap past the
// session timeout lets the controller shrink each ISR to the brokers
// still alive, so the last one killed is the last ISR member), keeps them
// down for down, cuts tail bytes off the newest segment of every
// partition of the last one killed if tail > 0 (LoseTail), and restarts
// them in restart order, restartGap apart (#7, #8).
func (e *Env) KillAll(kill []int32, gap, down time.Duration, tail int64, restart []int32, restartGap time.Duration) {
	kind := "kill-all"
	if tail > 0 {
		kind = "kill-all-lost-tail"
	}
	end := e.H.Fault(kind, -1, nil)
	for i, id := range kill {
		if i > 0 {
			time.Sleep(gap)
		}
		e.C.Broker(id).Kill()
	}
	time.Sleep(down)
	if tail > 0 {
		e.LoseTail(kill[len(kill)-1], tail)
	}
	e.noteStates("all down")
	for i, id := range restart {
		if i > 0 {
			time.Sleep(restartGap)
			e.noteStates(fmt.Sprintf("%v restarted", restart[:i]))
		}
		e.start(id)
	}
	end()
}

// LoseTail simulates a power cut on a stopped broker, as Kafka's system
// tests do: the newest segment of each of its partitions of the topic
// loses its last n bytes (all of it if shorter), and the log dir's
// clean-shutdown marker is removed so the broker recovers the logs.
func (e *Env) LoseTail(id int32, n int64) {
	b := e.C.Broker(id)
	if b.Running() {
		e.note("lose tail: broker %d is running; not truncating", id)
		return
	}
	if err := os.Remove(filepath.Join(b.DataDir, ".kafka_cleanshutdown")); err != nil && !errors.Is(err, os.ErrNotExist) {
		e.note("lose tail: %v", err)
	}
	var cut []string
	for p := int32(0); p < e.Parts; p++ {
		dir := filepath.Join(b.DataDir, fmt.Sprintf("%s-%d", e.Topic, p))
		segs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
		if len(segs) == 0 {
			continue
		}
		sort.Strings(segs)
		last := segs[len(segs)-1]
		fi, err := os.Stat(last)
		if err != nil {
			e.note("lose tail: %v", err)
			continue
		}
		to := max(0, fi.Size()-n)
		if err := os.Truncate(last, to); err != nil {
			e.note("lose tail: %v", err)
			continue
		}
		cut = append(cut, fmt.Sprintf("p%d %d->%d", p, fi.Size(), to))
	}
	e.note("lost unflushed tail on broker %d (newest segment bytes): %s", id, strings.Join(cut, ", "))
}

// ZKDownKill stops the scenario's own ZooKeeper, kills broker id while it
// is down, keeps ZooKeeper down for down, starts it again, and restarts
// the broker once its session has expired (#19). Without an own
// ZooKeeper (Scenario.OwnZK) it is an error.
func (e *Env) ZKDownKill(id int32, down time.Duration) {
	if e.ZKServer == nil {
		e.Err = fmt.Errorf("ZKDownKill needs Scenario.OwnZK")
		return
	}
	end := e.H.Fault("zk-down-kill", id, e.Led(id))
	e.ZKServer.Stop()
	time.Sleep(2 * time.Second)
	e.C.Broker(id).Kill()
	time.Sleep(down)
	if err := e.ZKServer.Start(); err != nil {
		e.Err = fmt.Errorf("restart ZooKeeper: %w", err)
		end()
		return
	}
	e.start(id) // waits for the killed session's registration to expire
	end()
}

// StopZK and StartZK stop and start the scenario's own ZooKeeper.
func (e *Env) StopZK() {
	if e.ZKServer != nil {
		e.ZKServer.Stop()
	}
}

// StartZK starts the scenario's own ZooKeeper again.
func (e *Env) StartZK() {
	if e.ZKServer != nil {
		if err := e.ZKServer.Start(); err != nil {
			e.Err = fmt.Errorf("restart ZooKeeper: %w", err)
		}
	}
}

// CutClients holds every client connection to every broker for d, while
// the brokers still reach each other and ZooKeeper (#20).
func (e *Env) CutClients(d time.Duration) {
	end := e.H.Fault("client-cut", -1, nil)
	for _, b := range e.C.Brokers {
		b.Proxy.Block(SourceClient)
	}
	time.Sleep(d)
	e.C.HealNetwork()
	end()
}

// isrMetrics sums every running broker's ISR shrink and expand counters.
func (e *Env) isrMetrics() (shrinks, expands float64, err error) {
	for _, b := range e.C.Brokers {
		s, err1 := b.Metric("kafka_server_replicamanager_isrshrinks_total")
		x, err2 := b.Metric("kafka_server_replicamanager_isrexpands_total")
		if err := errors.Join(err1, err2); err != nil {
			return 0, 0, err
		}
		shrinks += s
		expands += x
	}
	return shrinks, expands, nil
}

// SlowAll delays every link (each broker's Kafka and ZooKeeper proxies)
// by delay and caps each at bitsPerSec for d, like tc netem "delay 100ms
// rate 3000kbit" (#21), then heals and waits settle; it reports the ISR
// shrinks and expands the brokers counted over that time.
func (e *Env) SlowAll(delay time.Duration, bitsPerSec int64, d, settle time.Duration) {
	s0, x0, err0 := e.isrMetrics()
	end := e.H.Fault("slow", -1, nil)
	for _, b := range e.C.Brokers {
		b.Proxy.Slow(delay, bitsPerSec)
		b.ZKProxy.Slow(delay, bitsPerSec)
	}
	time.Sleep(d)
	e.C.HealNetwork()
	end()
	time.Sleep(settle)
	s1, x1, err1 := e.isrMetrics()
	if err := errors.Join(err0, err1); err != nil {
		e.note("ISR metrics: %v", err)
		return
	}
	e.Metrics = append(e.Metrics, fmt.Sprintf("broker metrics over %s of %s delay, %d kbit/s and %s after: ISR shrinks %.0f, expands %.0f",
		d, delay, bitsPerSec/1000, settle, s1-s0, x1-x0))
}

// Bounce is a fast leader change: SIGTERM broker id (controlled shutdown
// moves its leadership at once) and restart it straight away (#23).
func (e *Env) Bounce(id int32) {
	end := e.H.Fault("bounce", id, e.Led(id))
	if err := e.C.Broker(id).Term(30 * time.Second); err != nil {
		e.note("broker %d: %v", id, err)
	}
	e.start(id)
	end()
}

// TruncatedLeaderTail is the first epoch sequence of reliability.md §2.6
// (#23): the leader of partition 0 is killed, its newest segments lose
// their last tail bytes, a follower takes over, the old leader restarts
// and must resync to the new leader's log; then the new leader is killed
// so the old one leads again.
func (e *Env) TruncatedLeaderTail(tail int64) {
	l := e.LeaderTarget()
	end := e.H.Fault("truncated-leader-tail", l, e.Led(l))
	e.C.Broker(l).Kill()
	e.LoseTail(l, tail)
	time.Sleep(SessionTimeout + 2*time.Second)
	e.start(l)
	time.Sleep(5 * time.Second)
	if nl := e.Leader(0); nl >= 0 && nl != l {
		e.C.Broker(nl).Kill()
		time.Sleep(SessionTimeout + 2*time.Second)
		e.start(nl)
	}
	end()
}

// AlternatingUnclean is the third epoch sequence (#23), after Kafka's
// logsShouldNotDivergeOnUncleanLeaderElections: rounds times, with the
// brokers a and b taking turns, a is killed, b takes writes alone, b is
// killed, a restarts and is elected uncleanly (it lacks b's writes), b
// restarts and must truncate to a's log.
func (e *Env) AlternatingUnclean(rounds int) {
	ids := e.Others()
	if len(ids) < 2 {
		e.Err = fmt.Errorf("AlternatingUnclean needs two brokers")
		return
	}
	end := e.H.Fault("alternating-unclean", -1, nil)
	a, b := ids[0], ids[1]
	for i := 0; i < rounds; i++ {
		e.C.Broker(a).Kill()
		time.Sleep(SessionTimeout + 2*time.Second) // b alone in the ISR, writing
		e.C.Broker(b).Kill()
		time.Sleep(time.Second)
		e.start(a) // only a is alive: unclean election
		time.Sleep(3 * time.Second)
		e.start(b)
		time.Sleep(3 * time.Second)
		a, b = b, a
	}
	end()
}
