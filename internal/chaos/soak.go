package chaos

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// The soak (reliability.md §5 #26, issue 17 part 4): the Bufstream
// analysis's nemesis. Every 10–20 s it heals everything and switches to a
// fresh random subset of fault packages, sometimes none, each aimed at a
// random broker, so the cluster keeps recovering while combinations of
// faults are still reached. At the end it heals and requires every
// partition to acknowledge a write again within SoakRecovery.

// SoakRecovery is how soon after the final heal every partition must be
// writable again (§6.3's budget: all partitions writable within 30 s).
const SoakRecovery = 30 * time.Second

// soakPackage applies one fault and returns what heals it.
type soakPackage struct {
	name  string
	apply func(e *Env, id int32, window time.Duration) (heal func())
}

// soakPackages are the fault packages of the mix: hard kill, SIGTERM,
// SIGSTOP (shorter or longer than the session timeout), a cut from the
// other brokers, a cut from ZooKeeper, ZooKeeper lost by every broker, a
// slow broker (Proxy.Slow: 100 ms, 3,000 kbit/s) and full isolation.
var soakPackages = []soakPackage{
	{"kill", func(e *Env, id int32, _ time.Duration) func() {
		end := e.H.Fault("kill", id, e.Led(id))
		e.C.Broker(id).Kill()
		return func() { e.start(id); end() }
	}},
	{"sigterm", func(e *Env, id int32, _ time.Duration) func() {
		end := e.H.Fault("sigterm", id, e.Led(id))
		if err := e.C.Broker(id).Term(30 * time.Second); err != nil {
			e.note("broker %d: %v", id, err)
		}
		return func() { e.start(id); end() }
	}},
	{"pause", func(e *Env, id int32, window time.Duration) func() {
		// Half the time short of the session timeout (a latency spike),
		// otherwise the whole window (a zombie whose session expires).
		d := window
		if e.Rand.Intn(2) == 0 {
			d = SessionTimeout / 2
		}
		kind := "pause-short"
		if d > SessionTimeout {
			kind = "pause-long"
		}
		end := e.H.Fault(kind, id, e.Led(id))
		b := e.C.Broker(id)
		b.Pause()
		t := time.AfterFunc(d, b.Resume)
		return func() { t.Stop(); b.Resume(); end() }
	}},
	{"cut-from-brokers", func(e *Env, id int32, _ time.Duration) func() {
		end := e.H.Fault("cut-from-brokers", id, e.Led(id))
		e.cutFromBrokers(id)
		return func() { e.C.HealNetwork(); end() }
	}},
	{"zk-cut", func(e *Env, id int32, _ time.Duration) func() {
		end := e.H.Fault("zk-cut", id, e.Led(id))
		e.C.Broker(id).ZKProxy.BlockAll()
		return func() { e.C.HealNetwork(); end() }
	}},
	{"zk-loss", func(e *Env, _ int32, window time.Duration) func() {
		kind := "zk-loss-short"
		if window > SessionTimeout {
			kind = "zk-loss-long"
		}
		end := e.H.Fault(kind, -1, nil)
		for _, b := range e.C.Brokers {
			b.ZKProxy.BlockAll()
		}
		return func() { e.C.HealNetwork(); end() }
	}},
	{"slow", func(e *Env, id int32, _ time.Duration) func() {
		// #21's shape on the target's links (its Kafka and ZooKeeper
		// proxies): 100 ms each way and 3,000 kbit/s.
		end := e.H.Fault("slow", id, e.Led(id))
		e.C.Broker(id).Proxy.Slow(100*time.Millisecond, 3_000_000)
		e.C.Broker(id).ZKProxy.Slow(100*time.Millisecond, 3_000_000)
		return func() { e.C.HealNetwork(); end() }
	}},
	{"isolate", func(e *Env, id int32, _ time.Duration) func() {
		end := e.H.Fault("isolate", id, e.Led(id))
		e.cutFromBrokers(id)
		e.C.Broker(id).Proxy.BlockAll()
		e.C.Broker(id).ZKProxy.BlockAll()
		return func() { e.C.HealNetwork(); end() }
	}},
}

// SoakDiskBroker is the broker whose data dir the disk-full package fills
// (on a tmpfs of SoakDiskBytes, SoakScenario's Tmpfs).
const (
	SoakDiskBroker = 1
	SoakDiskBytes  = 512 << 20
)

// diskFullPackage fills broker SoakDiskBroker's tmpfs data dir with a
// filler file until ENOSPC, and deletes it on heal (#24); only in the mix
// with SoakScenario's diskFull, as it needs the broker to take a full log
// dir offline (the logdir branch's LogDirFailureChannel). With its only log
// dir offline the broker shuts itself down, as Kafka's does; the heal's
// Recover restarts it once the filler is gone.
var diskFullPackage = soakPackage{"disk-full", func(e *Env, _ int32, _ time.Duration) func() {
	id := int32(SoakDiskBroker)
	end := e.H.Fault("disk-full", id, e.Led(id))
	path := filepath.Join(e.C.Broker(id).DataDir, "chaos-soak-filler")
	n, err := fill(path)
	if err != nil {
		e.note("disk full: %v", err)
	} else {
		e.Logf("broker %d's data dir filled (%d MiB of filler)", id, n>>20)
	}
	return func() {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			e.note("disk full: %v", err)
		}
		end()
	}
}}

// fill writes path until the filesystem is full and returns the bytes
// written.
func fill(path string) (int64, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	var n int64
	for {
		k, err := f.Write(buf)
		n += int64(k)
		if errors.Is(err, syscall.ENOSPC) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("writing the filler: %w", err)
		}
	}
}

// SoakPackageNames lists the fault packages of the soak's mix.
func SoakPackageNames(diskFull bool) []string {
	var out []string
	for _, p := range packages(diskFull) {
		out = append(out, p.name)
	}
	return out
}

func packages(diskFull bool) []soakPackage {
	if diskFull {
		return append(slices.Clone(soakPackages), diskFullPackage)
	}
	return soakPackages
}

// Soak runs the mix for d: windows of 10–20 s, each with a fresh random
// subset of the packages (each in with probability 1/3, so about one
// window in twenty has none), every package of a window aimed at a random
// broker. Between windows everything is healed (network first, then
// paused brokers resumed, then stopped ones restarted). After the last
// window it requires every partition to be acknowledged again within
// SoakRecovery.
func (e *Env) Soak(d time.Duration, diskFull bool) {
	deadline := time.Now().Add(d)
	windows := 0
	for time.Now().Before(deadline) {
		window := 10*time.Second + time.Duration(e.Rand.Int63n(int64(10*time.Second)))
		window = min(window, time.Until(deadline))
		var names []string
		var heals []func()
		for _, p := range packages(diskFull) {
			if e.Rand.Intn(3) != 0 {
				continue
			}
			id := e.C.Brokers[e.Rand.Intn(len(e.C.Brokers))].ID
			if p.name == diskFullPackage.name {
				id = SoakDiskBroker // the broker with the tmpfs
			}
			names = append(names, fmt.Sprintf("%s(%d)", p.name, id))
			heals = append(heals, p.apply(e, id, window))
		}
		windows++
		if len(names) == 0 {
			names = []string{"none"}
		}
		e.Logf("soak window %d (%s): %s", windows, window.Round(time.Second), strings.Join(names, " "))
		time.Sleep(window)
		// Network and pauses first, restarts last: a restart waits for its
		// old registration to expire, which needs ZooKeeper reachable.
		slices.Reverse(heals)
		e.C.HealNetwork()
		for _, b := range e.C.Brokers {
			if b.Paused() {
				b.Resume()
			}
		}
		for _, h := range heals {
			h()
		}
		e.Recover()
	}
	healed := e.H.Now()
	e.Logf("soak: %d windows; healed, waiting for every partition to acknowledge again", windows)
	if err := e.waitAcked(healed, SoakRecovery); err != nil {
		e.note("%v", err)
		if e.Err == nil {
			e.Err = err
		}
	}
}

// waitAcked waits until every partition has an acknowledged write that
// completed after since.
func (e *Env) waitAcked(since, within time.Duration) error {
	start := time.Now()
	for {
		writes, _, _ := e.H.snapshot()
		acked := map[int32]time.Duration{}
		for _, w := range writes {
			if w.Outcome == OK && w.Complete > since {
				if t, ok := acked[w.Partition]; !ok || w.Complete < t {
					acked[w.Partition] = w.Complete
				}
			}
		}
		var missing []int32
		for p := int32(0); p < e.Parts; p++ {
			if _, ok := acked[p]; !ok {
				missing = append(missing, p)
			}
		}
		if len(missing) == 0 {
			var worst time.Duration
			for _, t := range acked {
				worst = max(worst, t-since)
			}
			e.note("every partition acknowledged again %s after the final heal", worst.Round(time.Millisecond))
			return nil
		}
		if time.Since(start) > within {
			return fmt.Errorf("partitions %v not acknowledged within %s of the final heal", missing, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// SoakScenario is `make soak`: the mix for d on a SAFE cluster. diskFull
// adds the disk-full package, with broker SoakDiskBroker's data dir on a
// tmpfs of SoakDiskBytes (mounting needs CAP_SYS_ADMIN).
func SoakScenario(d time.Duration, diskFull bool) Scenario {
	sc := Scenario{Name: "soak", Profile: SAFE, Nemesis: func(e *Env) { e.Soak(d, diskFull) },
		Desc: fmt.Sprintf("Bufstream-style soak for %s: every 10-20 s a fresh random subset of {%s}, each at a random broker; then heal, every partition acknowledged again within %s, final read",
			d, strings.Join(SoakPackageNames(diskFull), ", "), SoakRecovery)}
	if diskFull {
		sc.Tmpfs = map[int32]int64{SoakDiskBroker: SoakDiskBytes}
	}
	return sc
}
