package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kafkazk/broker/internal/kbench"
)

const (
	mURP     = "kafka_server_replicamanager_underreplicatedpartitions"
	mLeaders = "kafka_server_replicamanager_leadercount"
	mParts   = "kafka_server_replicamanager_partitioncount"
)

func (b *bench) idle(ctx context.Context) error {
	// Let the creation's follow-up work (ISR writes, checkpoints) settle.
	time.Sleep(5 * time.Second)
	if err := b.c.health(); err != nil {
		return err
	}
	pids := map[int32]int{}
	for _, id := range b.c.ids() {
		pid, err := b.c.pid(id)
		if err != nil {
			return fmt.Errorf("broker %d: %w", id, err)
		}
		pids[id] = pid
	}
	zkPid, zkErr := b.c.zkPid()
	stop := b.profileAll(ctx, "idle", b.o.idle)
	t0 := map[int32]int64{}
	var zk0 int64
	for id, pid := range pids {
		n, err := kbench.ProcCPUTicks(pid)
		if err != nil {
			return fmt.Errorf("broker %d: %w", id, err)
		}
		t0[id] = n
	}
	if zkErr == nil {
		zk0, _ = kbench.ProcCPUTicks(zkPid)
	}
	start := time.Now()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(b.o.idle):
	}
	el := time.Since(start).Seconds()
	for _, id := range b.c.ids() {
		n, err := kbench.ProcCPUTicks(pids[id])
		if err != nil {
			return fmt.Errorf("broker %d: %w", id, err)
		}
		b.fig("idle_cpu_pct", 100*float64(n-t0[id])/kbench.ClockTicks/el, "% of a core", &id,
			fmt.Sprintf("utime+stime over %.0f s, nothing produced", el))
	}
	if zkErr == nil {
		if n, err := kbench.ProcCPUTicks(zkPid); err == nil {
			b.fig("zk_idle_cpu_pct", 100*float64(n-zk0)/kbench.ClockTicks/el, "% of a core", nil, "ZooKeeper's process")
		}
	}
	stop()
	for _, id := range b.c.ids() {
		rss, err := kbench.ProcRSSKiB(pids[id])
		if err != nil {
			return fmt.Errorf("broker %d: %w", id, err)
		}
		b.fig("rss_mib", float64(rss)/1024, "MiB", &id, "VmRSS")
		fds, err := kbench.ProcOpenFDs(pids[id])
		if err != nil {
			return fmt.Errorf("broker %d: %w", id, err)
		}
		b.fig("open_fds", float64(fds), "fds", &id, "/proc/<pid>/fd")
		if g, err := b.c.goroutines(ctx, id); err == nil {
			b.fig("goroutines", float64(g), "goroutines", &id, "")
		} else {
			b.progress("broker %d goroutines: %v", id, err)
		}
		if m, err := b.c.metrics(ctx, id, mParts, mLeaders); err == nil {
			b.fig("replicas", m[mParts], "replicas", &id, "kafka_server_replicamanager_partitioncount")
		}
	}
	b.zkFigures(ctx, zkPid, zkErr)
	return nil
}

// zkFigures are ZooKeeper's mntr counts, RSS and heap used after a full GC
// (per partition against before the topics).
func (b *bench) zkFigures(ctx context.Context, zkPid int, zkErr error) {
	if m, err := b.c.mntr(); err == nil {
		b.fig("zk_znode_count", m["zk_znode_count"], "znodes", nil, "mntr")
		b.fig("zk_approximate_data_size", m["zk_approximate_data_size"]/(1<<20), "MiB", nil, "mntr")
		b.fig("zk_watch_count", m["zk_watch_count"], "watches", nil, "mntr")
	} else {
		b.progress("mntr: %v", err)
	}
	if zkErr == nil {
		if rss, err := kbench.ProcRSSKiB(zkPid); err == nil {
			b.fig("zk_rss_mib", float64(rss)/1024, "MiB", nil, "ZooKeeper's VmRSS")
		}
	}
	if used, err := b.c.zkHeapUsedKiB(ctx); err == nil {
		b.fig("zk_heap_used_mib", float64(used)/1024, "MiB", nil, "after a full GC (jcmd GC.run; GC.heap_info)")
		if b.zkHeap0 > 0 {
			b.fig("zk_heap_per_partition", float64(used-b.zkHeap0)*1024/float64(b.o.partitions), "bytes", nil,
				fmt.Sprintf("(used after - %d KiB used before the topics) / partitions", b.zkHeap0))
		}
	} else {
		b.progress("zookeeper heap: %v", err)
	}
}

func (b *bench) produce(ctx context.Context) error {
	spreadTopic, spreadN := b.topics[0], min(b.o.spread, b.o.partitions)
	six := fmt.Sprintf("kscale-%d-six-%d", b.o.partitions, time.Now().Unix())
	if err := b.t.CreateTopic(ctx, six, 6); err != nil {
		return err
	}
	stop := b.profileAll(ctx, "produce", time.Duration(2*b.o.produceReps+1)*b.o.produceDur)
	defer stop()
	var spread, base []float64
	for rep := range b.o.produceReps {
		order := []bool{true, false}
		if rep%2 == 1 {
			order = []bool{false, true}
		}
		for _, isSpread := range order {
			topic, n := six, 6
			if isSpread {
				topic, n = spreadTopic, spreadN
			}
			r, err := kbench.ProduceThroughput(ctx, b.t, topic, n, 1024, b.o.produceDur)
			if err != nil {
				return fmt.Errorf("produce over %d partitions: %w", n, err)
			}
			b.progress("produce 1 KiB acks=all over %d partitions: %.1f MB/s", n, r.MBPerSec)
			if isSpread {
				spread = append(spread, r.MBPerSec)
			} else {
				base = append(base, r.MBPerSec)
			}
		}
	}
	s, m := kbench.Median(spread), kbench.Median(base)
	b.fig("produce_spread_mb_s", s, "MB/s", nil, fmt.Sprintf("1 KiB acks=all idempotent over %d partitions, median of %d", spreadN, len(spread)))
	b.fig("produce_six_mb_s", m, "MB/s", nil, fmt.Sprintf("the same over 6 partitions, alternating, median of %d", len(base)))
	b.fig("produce_spread_ratio", kbench.Ratio(s, m), "×", nil, "spread / six")
	return nil
}

// leaders reads every state znode: partition -> leader, and who is
// short of a full ISR.
func (b *bench) leaders() (map[int32][]tp, int, error) {
	st, err := b.z.states(b.parts)
	if err != nil {
		return nil, 0, err
	}
	out := map[int32][]tp{}
	short := 0
	for _, p := range b.parts {
		s := st[p]
		out[s.Leader] = append(out[s.Leader], p)
		if len(s.ISR) < 3 {
			short++
		}
	}
	return out, short, nil
}

// victim is the broker leading the most partitions, the controller
// excluded unless wantController.
func (b *bench) victim(wantController bool) (int32, []tp, int32, error) {
	ctrl, epoch, err := b.z.controller()
	if err != nil {
		return -1, nil, 0, err
	}
	led, _, err := b.leaders()
	if err != nil {
		return -1, nil, 0, err
	}
	if wantController {
		return ctrl, led[ctrl], epoch, nil
	}
	best := int32(-1)
	for _, id := range b.c.ids() {
		if id == ctrl {
			continue
		}
		if best < 0 || len(led[id]) > len(led[best]) {
			best = id
		}
	}
	return best, led[best], epoch, nil
}

// preferred runs a preferred leader election over every partition and waits
// until each is led by its first replica.
func (b *bench) preferred(ctx context.Context) error {
	set := kadm.TopicsSet{}
	for _, p := range b.parts {
		set.Add(p.Topic, p.Partition)
	}
	ectx, cancel := context.WithTimeout(ctx, b.waitLimit())
	defer cancel()
	if _, err := b.t.Admin().ElectLeaders(ectx, kadm.ElectPreferredReplica, set); err != nil {
		b.progress("ElectLeaders: %v (waiting for the states anyway)", err)
	}
	return b.wait(ctx, "preferred leaders", 500*time.Millisecond, func() (bool, string, error) {
		st, err := b.z.states(b.parts)
		if err != nil {
			return false, err.Error(), nil
		}
		off := 0
		for _, p := range b.parts {
			if r := b.assign[p]; len(r) > 0 && st[p].Leader != r[0] {
				off++
			}
		}
		return off == 0, fmt.Sprintf("%d partitions not led by their preferred replica", off), nil
	})
}

// restart starts broker id again and measures until every ISR is full
// (state znodes) and every broker has 0 under-replicated partitions.
func (b *bench) restart(ctx context.Context, id int32, figure string) error {
	stop := b.profileAll(ctx, figure, 15*time.Second)
	defer stop()
	start := time.Now()
	if err := b.c.start(ctx, id, b.stderr); err != nil {
		return err
	}
	ready := time.Since(start)
	b.progress("broker %d ready after %s", id, ready.Round(time.Millisecond))
	err := b.wait(ctx, fmt.Sprintf("broker %d restarted: every ISR full", id), 250*time.Millisecond, func() (bool, string, error) {
		var why []string
		for _, o := range b.c.ids() {
			m, err := b.c.metrics(ctx, o, mURP)
			if err != nil {
				return false, err.Error(), nil
			}
			if m[mURP] != 0 {
				why = append(why, fmt.Sprintf("broker %d: %v under-replicated", o, m[mURP]))
			}
		}
		if len(why) > 0 {
			return false, strings.Join(why, ", "), nil
		}
		_, short, err := b.leaders()
		if err != nil {
			return false, err.Error(), nil
		}
		return short == 0, fmt.Sprintf("%d partitions short of a full ISR in their state znodes", short), nil
	})
	if err != nil {
		return err
	}
	b.fig(figure, secs(time.Since(start)), "s", &id, fmt.Sprintf("from cluster.sh start (ready after %.1f s) until 0 under-replicated partitions on every broker and every ISR full in ZooKeeper", secs(ready)))
	return nil
}

// waitExit waits for pid to exit and reports when.
func waitExit(pid int) <-chan time.Time {
	out := make(chan time.Time, 1)
	go func() {
		for kbench.ProcAlive(pid) {
			time.Sleep(10 * time.Millisecond)
		}
		out <- time.Now()
	}()
	return out
}

// moved waits for a stateWatch to see every partition led elsewhere.
func (b *bench) moved(ctx context.Context, what string, w *stateWatch) error {
	total := 0
	return b.wait(ctx, what, 50*time.Millisecond, func() (bool, string, error) {
		select {
		case <-w.allMoved:
			return true, "", nil
		default:
		}
		_, _, left, err := w.result()
		if err != nil {
			return false, "", err
		}
		if total == 0 {
			total = left
		}
		return false, fmt.Sprintf("%d partitions still led by broker %d", left, w.from), nil
	})
}

func (b *bench) controlledShutdown(ctx context.Context) error {
	id, led, _, err := b.victim(false)
	if err != nil {
		return err
	}
	b.progress("controlled shutdown of broker %d, leader of %d partitions", id, len(led))
	w, err := b.z.watchStates(led, id, -1)
	if err != nil {
		return err
	}
	defer w.stop()
	stop := b.profileAll(ctx, "shutdown", 10*time.Second)
	start := time.Now()
	pid, err := b.c.signal(id, syscall.SIGTERM)
	if err != nil {
		return err
	}
	exited := waitExit(pid)
	if err := b.moved(ctx, fmt.Sprintf("controlled shutdown of broker %d: its partitions led elsewhere", id), w); err != nil {
		return err
	}
	last, _, _, _ := w.result()
	var exitAt time.Time
	select {
	case exitAt = <-exited:
	case <-time.After(b.waitLimit()):
		return fmt.Errorf("broker %d still running %s after SIGTERM", id, b.waitLimit())
	}
	stop()
	b.fig("controlled_shutdown_exit", secs(exitAt.Sub(start)), "s", &id, fmt.Sprintf("SIGTERM to exit; it led %d partitions", len(led)))
	b.fig("controlled_shutdown_led_elsewhere", secs(last.Sub(start)), "s", &id, "SIGTERM until each partition it led has another leader (state znode watches)")
	if err := b.restart(ctx, id, "restart_isr_full"); err != nil {
		return err
	}
	return b.preferred(ctx)
}

func (b *bench) killBroker(ctx context.Context) error {
	id, led, _, err := b.victim(false)
	if err != nil {
		return err
	}
	return b.kill(ctx, id, led, -1, false)
}

func (b *bench) killController(ctx context.Context) error {
	id, led, epoch, err := b.victim(true)
	if err != nil {
		return err
	}
	return b.kill(ctx, id, led, epoch, true)
}

// kill SIGKILLs broker id, which leads led, and times from its znode
// (/controller for the controller, else /brokers/ids/<id>) vanishing.
func (b *bench) kill(ctx context.Context, id int32, led []tp, epoch int32, isController bool) error {
	what, znode := "broker", fmt.Sprintf("/brokers/ids/%d", id)
	if isController {
		what, znode = "controller", "/controller"
	}
	b.progress("kill -9 of %s %d, leader of %d partitions (controller epoch %d)", what, id, len(led), epoch)
	w, err := b.z.watchStates(led, id, epoch)
	if err != nil {
		return err
	}
	defer w.stop()
	gone, born, err := b.z.watchGone(znode)
	if err != nil {
		return err
	}
	killAt := time.Now()
	if _, err := b.c.signal(id, syscall.SIGKILL); err != nil {
		return err
	}
	var goneAt time.Time
	err = b.wait(ctx, fmt.Sprintf("kill -9 of broker %d: %s vanishes (session timeout)", id, znode), 20*time.Millisecond, func() (bool, string, error) {
		select {
		case goneAt = <-gone:
			return true, "", nil
		default:
			return false, "still there", nil
		}
	})
	if err != nil {
		return err
	}
	stop := b.profileAll(ctx, "kill-"+what, 10*time.Second)
	if err := b.moved(ctx, fmt.Sprintf("kill -9 of %s %d: its partitions led elsewhere", what, id), w); err != nil {
		return err
	}
	stop()
	last, firstNew, _, _ := w.result()
	gz := fmt.Sprintf("kill -9 to %s vanishing: %.1f s (session timeout)", znode, secs(goneAt.Sub(killAt)))
	if isController {
		select {
		case bornAt := <-born:
			b.fig("kill_controller_new_controller", secs(bornAt.Sub(goneAt)), "s", &id,
				"from /controller vanishing to a new /controller (both by watch); "+gz)
		case <-time.After(10 * time.Second):
			b.progress("no new /controller seen by watch")
		}
		// The same on ZooKeeper's clock, immune to this process's
		// scheduling: the new /controller's ctime to the mtime of the
		// first state written in its epoch.
		if _, st, err := b.z.conn.Get(b.z.path("/controller")); err == nil {
			if first, ok := w.firstNewWrite(); ok {
				b.fig("kill_controller_load_zk", secs(first.Sub(time.UnixMilli(st.Ctime))), "s", &id,
					"ZooKeeper's clock: the new /controller's ctime to the mtime of the first state znode written in its epoch (ms)")
			}
		}
		if !firstNew.IsZero() {
			b.fig("kill_controller_first_elect", secs(firstNew.Sub(goneAt)), "s", &id,
				"from /controller vanishing to the first state znode written with the new controller epoch: its failover loads every partition state before it elects")
		}
		b.fig("kill_controller_all_elected", secs(last.Sub(goneAt)), "s", &id,
			fmt.Sprintf("to every one of the %d partitions the old controller led having another leader", len(led)))
		return b.restart(ctx, id, "restart_controller_isr_full")
	}
	b.fig("kill_broker_failover", secs(last.Sub(goneAt)), "s", &id,
		fmt.Sprintf("from /brokers/ids/%d vanishing to every one of its %d partitions led elsewhere (state znode watches); %s", id, len(led), gz))
	if err := b.restart(ctx, id, "restart_after_kill_isr_full"); err != nil {
		return err
	}
	return b.preferred(ctx)
}

// zkSnapshot stops the cluster and starts ZooKeeper alone: on start it
// loads its data and writes a snapshot, whose size is the figure.
func (b *bench) zkSnapshot(ctx context.Context) error {
	for _, id := range b.c.ids() {
		b.c.expects[id] = true
	}
	env := append(os.Environ(), "CLUSTER_DIR="+b.c.dir)
	_, before, zxid0, _ := b.c.newestSnapshot()
	down := exec.CommandContext(ctx, b.c.sh, "down")
	down.Env = env
	if out, err := down.CombinedOutput(); err != nil {
		return fmt.Errorf("cluster.sh down: %w\n%s", err, out)
	}
	up := exec.CommandContext(ctx, b.c.sh, "up")
	up.Env = append(env, "BROKERS=0")
	if out, err := up.CombinedOutput(); err != nil {
		return fmt.Errorf("BROKERS=0 cluster.sh up: %w\n%s", err, out)
	}
	var size int64
	var name string
	err := b.wait(ctx, "zookeeper's snapshot on restart", 250*time.Millisecond, func() (bool, string, error) {
		s, n, zxid, err := b.c.newestSnapshot()
		if err != nil {
			return false, err.Error(), nil
		}
		if zxid <= zxid0 {
			return false, fmt.Sprintf("newest snapshot %s, none newer than %s", n, before), nil
		}
		// ZooKeeper may still be writing it: done once its size is
		// the same on two reads 250 ms apart.
		stable := n == name && s == size && s > 0
		size, name = s, n
		return stable, fmt.Sprintf("snapshot %s still growing (%d bytes)", n, s), nil
	})
	if err != nil {
		return err
	}
	b.fig("zk_snapshot_mib", float64(size)/(1<<20), "MiB", nil, "the snapshot ZooKeeper writes on restart, "+name)
	if m, err := b.c.mntr(); err == nil {
		b.fig("zk_znode_count_end", m["zk_znode_count"], "znodes", nil, "mntr after the run")
	}
	return nil
}
