package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kafkazk/broker/internal/kbench"
)

// cluster is a scripts/cluster.sh cluster, read from its CLUSTER_DIR:
// cluster.env for the ports, broker-<id>/broker.pid and broker.log,
// zookeeper/zookeeper.pid and its data dir. Starting a broker goes through
// `cluster.sh start` (so the broker runs exactly as cluster.sh runs it);
// the signals whose timing is measured are sent here, to the pid in the
// broker's pid file.
type cluster struct {
	dir, sh  string
	brokers  int
	base     int
	httpBase int
	zkPort   int
	chroot   string

	mu      sync.Mutex
	logOff  map[int32]int64 // how far each log was scanned for fatal lines
	expects map[int32]bool  // brokers the benchmark stopped on purpose
}

func openCluster(dir, sh string) (*cluster, error) {
	env, err := os.ReadFile(filepath.Join(dir, "cluster.env"))
	if err != nil {
		return nil, fmt.Errorf("%s is not a cluster.sh cluster (run scripts/cluster.sh up with CLUSTER_DIR=%s): %w", dir, dir, err)
	}
	c := &cluster{dir: dir, sh: sh, logOff: map[int32]int64{}, expects: map[int32]bool{}}
	vals := map[string]string{}
	for _, line := range strings.Split(string(env), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			vals[k] = v
		}
	}
	for k, dst := range map[string]*int{"BROKERS": &c.brokers, "BASE_PORT": &c.base, "HTTP_BASE_PORT": &c.httpBase, "ZK_PORT": &c.zkPort} {
		n, err := strconv.Atoi(vals[k])
		if err != nil {
			return nil, fmt.Errorf("%s/cluster.env: %s=%q", dir, k, vals[k])
		}
		*dst = n
	}
	c.chroot = vals["ZK_CHROOT"]
	if c.brokers < 3 {
		return nil, fmt.Errorf("%s has %d brokers; the scale benchmark needs 3 (RF 3)", dir, c.brokers)
	}
	for id := int32(0); id < int32(c.brokers); id++ {
		if fi, err := os.Stat(c.logPath(id)); err == nil {
			c.logOff[id] = fi.Size()
		}
	}
	return c, nil
}

func (c *cluster) ids() []int32 {
	out := make([]int32, c.brokers)
	for i := range out {
		out[i] = int32(i)
	}
	return out
}

func (c *cluster) bootstrap() []string {
	var out []string
	for _, id := range c.ids() {
		out = append(out, fmt.Sprintf("127.0.0.1:%d", c.base+int(id)))
	}
	return out
}

func (c *cluster) zkAddr() string { return fmt.Sprintf("127.0.0.1:%d", c.zkPort) }
func (c *cluster) httpURL(id int32) string {
	return fmt.Sprintf("http://127.0.0.1:%d", c.httpBase+int(id))
}
func (c *cluster) logPath(id int32) string {
	return filepath.Join(c.dir, fmt.Sprintf("broker-%d", id), "broker.log")
}

// pid is broker id's pid, from its pid file, when that process is alive.
func (c *cluster) pid(id int32) (int, error) {
	return pidFile(filepath.Join(c.dir, fmt.Sprintf("broker-%d", id), "broker.pid"))
}

func (c *cluster) zkPid() (int, error) {
	return pidFile(filepath.Join(c.dir, "zookeeper", "zookeeper.pid"))
}

func pidFile(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("%s: %q", path, b)
	}
	if !kbench.ProcAlive(pid) {
		return 0, fmt.Errorf("pid %d of %s is not running", pid, path)
	}
	return pid, nil
}

// signal sends sig to broker id and marks it as stopped on purpose.
func (c *cluster) signal(id int32, sig syscall.Signal) (int, error) {
	pid, err := c.pid(id)
	if err != nil {
		return 0, fmt.Errorf("broker %d: %w", id, err)
	}
	c.mu.Lock()
	c.expects[id] = true
	c.mu.Unlock()
	if err := syscall.Kill(pid, sig); err != nil {
		return 0, fmt.Errorf("broker %d: kill -%d %d: %w", id, sig, pid, err)
	}
	return pid, nil
}

// start runs `cluster.sh start id`, which returns once the broker is
// registered and answers.
func (c *cluster) start(ctx context.Context, id int32, stderr io.Writer) error {
	cmd := exec.CommandContext(ctx, c.sh, "start", strconv.Itoa(int(id)))
	cmd.Env = append(os.Environ(), "CLUSTER_DIR="+c.dir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return fmt.Errorf("cluster.sh start %d: %w\n%s", id, err, out.String())
	}
	c.mu.Lock()
	delete(c.expects, id)
	c.mu.Unlock()
	return nil
}

// fatalLine matches the log lines that mean a broker cannot go on holding
// its replicas.
var fatalLine = regexp.MustCompile(`(?i)too many open files|out of memory|panic:|fatal error:`)

// health fails when a broker not stopped on purpose has exited, or when a
// broker's log has a fatal line since the last check.
func (c *cluster) health() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range c.ids() {
		if line, n := c.scanLog(id); n > 0 {
			return fmt.Errorf("broker %d logged %d fatal line(s), first: %s", id, n, line)
		}
		if c.expects[id] {
			continue
		}
		if _, err := c.pid(id); err != nil {
			return fmt.Errorf("broker %d is not running: %v", id, err)
		}
	}
	return nil
}

// scanLog reads broker id's log from where it last stopped; returns the
// first fatal line and how many there were.
func (c *cluster) scanLog(id int32) (string, int) {
	f, err := os.Open(c.logPath(id))
	if err != nil {
		return "", 0
	}
	defer f.Close()
	if _, err := f.Seek(c.logOff[id], io.SeekStart); err != nil {
		return "", 0
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	first, n := "", 0
	var read int64
	for sc.Scan() {
		read += int64(len(sc.Bytes())) + 1
		if fatalLine.Match(sc.Bytes()) {
			if n == 0 {
				first = truncate(sc.Text(), 400)
			}
			n++
		}
	}
	c.logOff[id] += read
	return first, n
}

// logTail is the last n lines of broker id's log.
func (c *cluster) logTail(id int32, n int) string {
	b, err := os.ReadFile(c.logPath(id))
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	for i, l := range lines {
		lines[i] = truncate(l, 300)
	}
	return strings.Join(lines, "\n")
}

// fatalCount counts the fatal lines of broker id's whole log.
func (c *cluster) fatalCount(id int32) (int, string) {
	f, err := os.Open(c.logPath(id))
	if err != nil {
		return 0, ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	n, first := 0, ""
	for sc.Scan() {
		if fatalLine.Match(sc.Bytes()) {
			if n == 0 {
				first = truncate(sc.Text(), 300)
			}
			n++
		}
	}
	return n, first
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

// metrics fetches broker id's /metrics and returns the values of the
// unlabelled series named.
func (c *cluster) metrics(ctx context.Context, id int32, names ...string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.httpURL(id)+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("broker %d /metrics: %w", id, err)
	}
	defer resp.Body.Close()
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && want[f[0]] {
			if v, err := strconv.ParseFloat(f[1], 64); err == nil {
				out[f[0]] = v
			}
		}
	}
	for _, n := range names {
		if _, ok := out[n]; !ok {
			return out, fmt.Errorf("broker %d /metrics: no %s", id, n)
		}
	}
	return out, sc.Err()
}

// goroutines reads the total of broker id's goroutine profile.
func (c *cluster) goroutines(ctx context.Context, id int32) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.httpURL(id)+"/debug/pprof/goroutine?debug=1", nil)
	if err != nil {
		return 0, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil {
		return 0, err
	}
	var n int
	if _, err := fmt.Sscanf(line, "goroutine profile: total %d", &n); err != nil {
		return 0, fmt.Errorf("goroutine profile: %q", line)
	}
	return n, nil
}

// profile saves a CPU profile of broker id over d into path.
func (c *cluster) profile(ctx context.Context, id int32, d time.Duration, path string) error {
	url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", c.httpURL(id), max(1, int(d.Seconds())))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	cl := &http.Client{Timeout: d + 30*time.Second}
	resp, err := cl.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// zk4lw sends a four-letter word to ZooKeeper.
func (c *cluster) zk4lw(cmd string) (string, error) {
	conn, err := net.DialTimeout("tcp", c.zkAddr(), 5*time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte(cmd)); err != nil {
		return "", err
	}
	b, err := io.ReadAll(conn)
	return string(b), err
}

// mntr is ZooKeeper's mntr as key -> value.
func (c *cluster) mntr() (map[string]float64, error) {
	s, err := c.zk4lw("mntr")
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) == 2 {
			if v, err := strconv.ParseFloat(f[1], 64); err == nil {
				out[f[0]] = v
			}
		}
	}
	if _, ok := out["zk_znode_count"]; !ok {
		return nil, fmt.Errorf("mntr: no zk_znode_count (is mntr in 4lw.commands.whitelist?): %q", truncate(s, 200))
	}
	return out, nil
}

var heapUsed = regexp.MustCompile(`(?m)^\s*(garbage-first heap|PSYoungGen|ParOldGen|def new generation|tenured generation|Shenandoah|ZHeap)\s+total\s+\d+K, used (\d+)K`)

// zkHeapUsedKiB is the ZooKeeper JVM's used heap after a full GC (jcmd
// GC.run, then GC.heap_info).
func (c *cluster) zkHeapUsedKiB(ctx context.Context) (int64, error) {
	pid, err := c.zkPid()
	if err != nil {
		return 0, err
	}
	p := strconv.Itoa(pid)
	if out, err := exec.CommandContext(ctx, "jcmd", p, "GC.run").CombinedOutput(); err != nil {
		return 0, fmt.Errorf("jcmd %s GC.run: %w: %s", p, err, out)
	}
	out, err := exec.CommandContext(ctx, "jcmd", p, "GC.heap_info").CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("jcmd %s GC.heap_info: %w: %s", p, err, out)
	}
	var used int64
	for _, m := range heapUsed.FindAllStringSubmatch(string(out), -1) {
		n, _ := strconv.ParseInt(m[2], 10, 64)
		used += n
	}
	if used == 0 {
		return 0, fmt.Errorf("jcmd GC.heap_info: no heap line in %q", truncate(string(out), 300))
	}
	return used, nil
}

// newestSnapshot is the size and name of the snapshot.* file of the local
// ZooKeeper's data dir with the highest zxid (the hex suffix).
func (c *cluster) newestSnapshot() (int64, string, uint64, error) {
	dir := filepath.Join(c.dir, "zookeeper", "data", "version-2")
	es, err := os.ReadDir(dir)
	if err != nil {
		return 0, "", 0, err
	}
	var best os.FileInfo
	var bestZxid uint64
	for _, e := range es {
		hex, ok := strings.CutPrefix(e.Name(), "snapshot.")
		if !ok {
			continue
		}
		zxid, err := strconv.ParseUint(hex, 16, 64)
		if err != nil {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		if best == nil || zxid > bestZxid {
			best, bestZxid = fi, zxid
		}
	}
	if best == nil {
		return 0, "", 0, fmt.Errorf("no snapshot in %s", dir)
	}
	return best.Size(), best.Name(), bestZxid, nil
}
