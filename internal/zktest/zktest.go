package zktest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// Jar is where Debian's zookeeper package installs the server.
const Jar = "/usr/share/java/zookeeper.jar"

// Server is a running ZooKeeper server started by Start or Launch.
type Server struct {
	Addr    string // host:port
	Chroot  string // "" or a path like /t123 unique to the caller
	DataDir string
	cmd     *exec.Cmd
	done    chan struct{}
}

// Connect is the zookeeper.connect string for this server: address plus chroot.
func (s *Server) Connect() string { return s.Addr + s.Chroot }

var chrootSeq atomic.Int64

// Start returns a ZooKeeper server for t, stopped (or its chroot abandoned)
// when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	if addr := os.Getenv("BROKER_TEST_ZK"); addr != "" {
		return &Server{Addr: addr, Chroot: fmt.Sprintf("/test-%d-%d", os.Getpid(), chrootSeq.Add(1))}
	}
	if _, err := os.Stat(Jar); err != nil {
		t.Skipf("zktest: no ZooKeeper: set BROKER_TEST_ZK=host:port or install Debian's zookeeper package (%s missing)", Jar)
	}
	if _, err := exec.LookPath("java"); err != nil {
		t.Skip("zktest: no ZooKeeper: java is not on PATH")
	}
	s, err := Launch(t.TempDir())
	if err != nil {
		t.Fatalf("zktest: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Launch starts a standalone ZooKeeper with its data in dir and waits until
// it answers and has served one session. The caller must call Stop.
//
// A server that exits, does not answer "ruok" within 60 s, or answers but
// serves no session within 30 s is stopped and started again on a fresh
// port and data directory (at most three tries, so at worst about 4.5
// minutes): on a loaded two-core machine a JVM has once been seen to serve
// no session for a whole minute, and the test that needed it failed for
// nothing of its own. Every failure carries the tail of the server's log.
func Launch(dir string) (*Server, error) {
	var errs []error
	for try := 1; try <= launchTries; try++ {
		s, err := launchOnce(filepath.Join(dir, fmt.Sprintf("try%d", try)))
		if err == nil {
			return s, nil
		}
		errs = append(errs, fmt.Errorf("try %d: %w", try, err))
	}
	return nil, errors.Join(errs...)
}

const (
	launchTries = 3
	// answerWithin bounds how long one try waits for "imok", and
	// sessionWithin how long it then waits for the first session.
	answerWithin  = 60 * time.Second
	sessionWithin = 30 * time.Second
)

func launchOnce(dir string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "zkdata")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	// forceSync=no: the server writes its transaction log without fsync.
	// Tests kill processes, never the machine, so the page cache keeps every
	// write; and an fsync queued behind the gigabytes other test packages
	// write can stall a session handshake for many seconds.
	cfg := filepath.Join(dir, "zoo.cfg")
	conf := fmt.Sprintf("tickTime=500\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\n"+
		"minSessionTimeout=1000\nmaxSessionTimeout=60000\n4lw.commands.whitelist=*\n"+
		"admin.enableServer=false\nmaxClientCnxns=0\nforceSync=no\n", data, port)
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "zookeeper.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("java", "-Xmx256m", "-cp", "/etc/zookeeper/conf:"+Jar,
		"org.apache.zookeeper.server.ZooKeeperServerMain", cfg)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start zookeeper: %w", err)
	}
	s := &Server{Addr: fmt.Sprintf("127.0.0.1:%d", port), DataDir: data, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); logf.Close(); close(s.done) }()
	withLog := func(err error) error {
		out, _ := os.ReadFile(logPath)
		return fmt.Errorf("%w; its log ends: %s", err, tail(string(out), 2000))
	}
	deadline := time.Now().Add(answerWithin)
	for time.Now().Before(deadline) {
		if Ruok(s.Addr) {
			if err := warm(s.Addr, sessionWithin); err != nil {
				s.Stop()
				return nil, withLog(err)
			}
			return s, nil
		}
		select {
		case <-s.done:
			return nil, withLog(fmt.Errorf("zookeeper at %s exited", s.Addr))
		case <-time.After(200 * time.Millisecond):
		}
	}
	s.Stop()
	return nil, withLog(fmt.Errorf("zookeeper at %s did not answer within %s", s.Addr, answerWithin))
}

// warm opens one session and writes a znode before the server is handed
// to a test. A freshly started JVM can take seconds over its first session
// handshake on a loaded machine, longer than the short session timeouts
// tests use, so a test's own first connect could time out; after one
// session the server answers promptly.
func warm(addr string, within time.Duration) error {
	conn, events, err := zk.Connect([]string{addr}, 30*time.Second, zk.WithLogger(quiet{}))
	if err != nil {
		return fmt.Errorf("warm zookeeper at %s: %w", addr, err)
	}
	defer conn.Close()
	timeout := time.After(within)
	for conn.State() != zk.StateHasSession {
		select {
		case <-events:
		case <-timeout:
			return fmt.Errorf("warm zookeeper at %s: no session within %s", addr, within)
		}
	}
	if _, err := conn.Create("/zktest-warm", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil && err != zk.ErrNodeExists {
		return fmt.Errorf("warm zookeeper at %s: %w", addr, err)
	}
	if err := conn.Delete("/zktest-warm", -1); err != nil {
		return fmt.Errorf("warm zookeeper at %s: %w", addr, err)
	}
	return nil
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

// Stop kills the server if Launch started it.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
}

// Ruok reports whether a ZooKeeper server answers "imok" at addr.
func Ruok(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("ruok")); err != nil {
		return false
	}
	buf := make([]byte, 4)
	n, _ := c.Read(buf)
	return string(buf[:n]) == "imok"
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
