package test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Log dir failure end to end (Kafka's LogDirFailureChannel), with a real
// ENOSPC: a broker's second log dir is a small tmpfs, which the test
// fills. Mounting needs root (and a kernel that lets this process mount);
// without it the tests skip, saying so.

// smallTmpfs mounts a tmpfs of size bytes on a new directory outside the
// cluster's (whose removal would meet the mount point) and unmounts it
// after the cluster has stopped (a Cleanup registered before the
// cluster's runs after it).
func smallTmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs for a full disk needs root")
	}
	dir, err := os.MkdirTemp("", "logdir-tmpfs-")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		_ = os.Remove(dir)
		t.Skipf("cannot mount a tmpfs here (%v: %s)", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
		_ = os.Remove(dir)
	})
	return dir
}

// fillDisk writes zeros to dir/fill until the file system is full
// (ENOSPC), and returns how many bytes went in.
func fillDisk(t *testing.T, dir string) int64 {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "fill"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	var n int64
	for {
		w, err := f.Write(buf)
		n += int64(w)
		if errors.Is(err, syscall.ENOSPC) {
			return n
		}
		if err != nil {
			t.Fatalf("fill %s: %v", dir, err)
		}
	}
}

// describeLogDirs asks broker b for its log dirs (DescribeLogDirs v2): each
// dir's error code and how many partitions it lists.
func describeLogDirs(b *Broker) (map[string]int16, map[string]int, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.RequestRetries(0), kgo.DialTimeout(time.Second))
	if err != nil {
		return nil, nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeLogDirsRequest()
	r, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	codes, parts := map[string]int16{}, map[string]int{}
	for _, d := range r.(*kmsg.DescribeLogDirsResponse).Dirs {
		codes[d.Dir] = d.ErrorCode
		for _, t := range d.Topics {
			parts[d.Dir] += len(t.Partitions)
		}
	}
	return codes, parts, nil
}

// TestLogDirFailureENOSPC: broker 2 has two log dirs, the second a 24 MiB
// tmpfs. Under acks=all produce to six partitions (RF 3,
// min.insync.replicas 2), the tmpfs is filled: broker 2's next write
// there meets ENOSPC, that dir goes offline (DescribeLogDirs answers it
// KAFKA_STORAGE_ERROR), broker 2 writes the log dir event notification,
// and the controller moves the leadership of broker 2's partitions in that
// dir, drops replica 2 from their ISRs and lists it in offline_replicas;
// broker 2's partitions in its healthy dir keep it in their ISR. Production
// goes on, and every acknowledged record is read back.
func TestLogDirFailureENOSPC(t *testing.T) {
	disk := smallTmpfs(t, "24m")
	c := newStoppedCluster(t, failoverProps(nil))
	keepLogs(t, c)
	for id := int32(1); id <= 3; id++ {
		b := c.AddBroker(id)
		if id == 2 {
			b.Props["log.dirs"] = b.DataDir + "," + disk
		}
	}
	for _, b := range c.Brokers {
		b.Start()
	}
	const topic = "disk"
	assignment := [][]int32{{2, 1, 3}, {2, 3, 1}, {1, 2, 3}, {2, 1, 3}, {3, 2, 1}, {2, 3, 1}}
	createTopic(t, c, topic, 0, 0, assignment, map[string]string{"segment.bytes": "1048576"})
	onTmpfs := map[int32]bool{}
	for p := range int32(len(assignment)) {
		if _, err := os.Stat(filepath.Join(disk, fmt.Sprintf("%s-%d", topic, p))); err == nil {
			onTmpfs[p] = true
		}
	}
	if len(onTmpfs) == 0 || len(onTmpfs) == len(assignment) {
		t.Fatalf("broker 2's replicas on the tmpfs: %v, want some but not all", onTmpfs)
	}
	t.Logf("broker 2's replicas on the tmpfs: %v", slices.Sorted(func(yield func(int32) bool) {
		for p := range onTmpfs {
			if !yield(p) {
				return
			}
		}
	}))

	prod := startProducer(t, c, topic, int32(len(assignment)), "ld")
	start := time.Now()
	prod.waitAcks(-1, 600, start, 60*time.Second)

	filled := time.Now()
	n := fillDisk(t, disk)
	t.Logf("filled the tmpfs with %d bytes", n)
	b2 := c.Broker(2)
	eventually(t, 30*time.Second, func() error {
		if !b2.LogContains("taking it offline") {
			return errors.New("broker 2 has not taken a log dir offline")
		}
		return nil
	})
	for p := range int32(len(assignment)) {
		s := c.waitState(t, topic, p, 30*time.Second, func(s partState) error {
			if onTmpfs[p] && (s.Leader == 2 || s.inISR(2)) {
				return fmt.Errorf("replica 2 is offline but leads or is in the ISR")
			}
			if s.Leader < 0 {
				return errors.New("no leader")
			}
			return nil
		})
		t.Logf("%s-%d after the failure (%s): %v", topic, p, time.Since(filled).Round(time.Millisecond), s)
	}
	kids, _, err := c.ZK.Children(c.Path("/log_dir_event_notification"))
	if err != nil || len(kids) != 0 {
		t.Errorf("log dir event notifications left: %v %v, want the controller to have deleted them", kids, err)
	}
	consistently(t, 2*time.Second, func() error {
		for p := range int32(len(assignment)) {
			if s := c.mustState(t, topic, p); !onTmpfs[p] && !s.inISR(2) {
				return fmt.Errorf("%s-%d (broker 2's healthy dir) dropped 2 from its ISR: %v", topic, p, s)
			}
		}
		return nil
	})

	eventually(t, 10*time.Second, func() error {
		codes, parts, err := describeLogDirs(b2)
		if err != nil {
			return err
		}
		if codes[disk] != 56 || parts[disk] != 0 {
			return fmt.Errorf("tmpfs dir: error %d with %d partitions, want 56 (KAFKA_STORAGE_ERROR) and none", codes[disk], parts[disk])
		}
		if codes[b2.DataDir] != 0 || parts[b2.DataDir] != len(assignment)-len(onTmpfs) {
			return fmt.Errorf("healthy dir: error %d with %d partitions, want 0 and %d", codes[b2.DataDir], parts[b2.DataDir], len(assignment)-len(onTmpfs))
		}
		return nil
	})
	for _, b := range []*Broker{c.Broker(1), c.Broker(3)} {
		eventually(t, 10*time.Second, func() error {
			mt, err := topicMetadata(b, topic)
			if err != nil {
				return err
			}
			for _, p := range mt.Partitions {
				if off := slices.Contains(p.OfflineReplicas, 2); off != onTmpfs[p.Partition] {
					return fmt.Errorf("broker %d metadata %s-%d: offline_replicas %v", b.ID(), topic, p.Partition, p.OfflineReplicas)
				}
			}
			return nil
		})
	}

	after := time.Now()
	for p := range int32(len(assignment)) {
		prod.waitAcks(p, 50, after, 60*time.Second)
	}
	acked := prod.Stop(false)
	res := checkHistory(t, "after the log dir failure", recsOf(acked), readAll(t, c.liveSeeds(), topic, readTimeout), false)
	t.Logf("acknowledged %d records (%d after the failure); lost %d", len(acked), prod.count(-1, filled), res.Lost)
	if !b2.Running() {
		t.Error("broker 2 stopped, with one log dir still online")
	}
}

// TestLogDirFailureLastDirStopsBroker: broker 2's only log dir is a tmpfs;
// filled, it goes offline and, with no dir left, broker 2 stops ("Shutdown
// broker because all log dirs in ... have failed"), after a controlled
// shutdown that moves its leaderships to the other replicas at once, and
// exits 1; acknowledged records survive.
func TestLogDirFailureLastDirStopsBroker(t *testing.T) {
	disk := smallTmpfs(t, "16m")
	c := newStoppedCluster(t, failoverProps(nil))
	keepLogs(t, c)
	for id := int32(1); id <= 3; id++ {
		b := c.AddBroker(id)
		if id == 2 {
			b.Props["log.dirs"] = disk
		}
	}
	for _, b := range c.Brokers {
		b.Start()
	}
	const topic = "lastdir"
	createTopic(t, c, topic, 0, 0, [][]int32{{2, 1, 3}, {1, 2, 3}, {3, 2, 1}}, map[string]string{"segment.bytes": "1048576"})
	prod := startProducer(t, c, topic, 3, "last")
	start := time.Now()
	prod.waitAcks(-1, 300, start, 60*time.Second)
	filled := time.Now()
	fillDisk(t, disk)
	b2 := c.Broker(2)
	code := b2.WaitExit(60 * time.Second)
	t.Logf("broker 2 exited %d, %s after the disk filled", code, time.Since(filled).Round(time.Millisecond))
	if code != 1 {
		t.Errorf("broker 2 exit code %d, want 1", code)
	}
	if !b2.LogContains("Shutdown broker because all log dirs in " + disk + " have failed") {
		t.Errorf("broker 2's log lacks Kafka's shutdown message; tail:\n%s", b2.LogTail(40))
	}
	if !b2.LogContains("controlled shutdown complete") {
		t.Errorf("broker 2 did not complete a controlled shutdown before exiting; tail:\n%s", b2.LogTail(40))
	}
	for p := int32(0); p < 3; p++ {
		c.waitState(t, topic, p, sessionTimeout+30*time.Second, func(s partState) error {
			if s.Leader == 2 || s.Leader < 0 {
				return fmt.Errorf("leader %d", s.Leader)
			}
			return nil
		})
	}
	prod.waitAcks(-1, 100, time.Now(), 60*time.Second)
	acked := prod.Stop(true) // records in flight at the stop may fail over
	res := checkHistory(t, "after the broker stopped", recsOf(acked), readAll(t, c.liveSeeds(), topic, readTimeout), false)
	t.Logf("acknowledged %d records; lost %d", len(acked), res.Lost)
}
