package chaos

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/kafkazk/broker/internal/zktest"
)

// ZKServer is a standalone ZooKeeper of one scenario (Scenario.OwnZK),
// which the nemesis can kill and start again on the same port and data
// directory, so its sessions survive in its snapshot as they do in a real
// ZooKeeper restart. Conn is the harness's session to it (60 s timeout,
// so it outlives an outage the scenario makes).
type ZKServer struct {
	Addr string
	Conn *zk.Conn
	dir  string
	port int
	logf func(string, ...any)
	cmd  *exec.Cmd
	done chan struct{}
}

// StartZKServer starts a ZooKeeper in dir on a free port and connects.
func StartZKServer(dir string, logf func(string, ...any)) (*ZKServer, error) {
	if _, err := os.Stat(zktest.Jar); err != nil {
		return nil, fmt.Errorf("no ZooKeeper jar: %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &ZKServer{Addr: "127.0.0.1:" + strconv.Itoa(port), dir: dir, port: port, logf: logf}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return nil, err
	}
	conf := fmt.Sprintf("tickTime=500\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\n"+
		"minSessionTimeout=1000\nmaxSessionTimeout=60000\n4lw.commands.whitelist=*\n"+
		"admin.enableServer=false\nmaxClientCnxns=0\nforceSync=no\n", filepath.Join(dir, "data"), port)
	if err := os.WriteFile(filepath.Join(dir, "zoo.cfg"), []byte(conf), 0o644); err != nil {
		return nil, err
	}
	if err := s.Start(); err != nil {
		return nil, err
	}
	conn, events, err := zk.Connect([]string{s.Addr}, 60*time.Second, zk.WithLogger(quietZK{}))
	if err != nil {
		s.Stop()
		return nil, err
	}
	deadline := time.After(30 * time.Second)
	for conn.State() != zk.StateHasSession {
		select {
		case <-events:
		case <-deadline:
			conn.Close()
			s.Stop()
			return nil, fmt.Errorf("ZooKeeper at %s: no session within 30 s", s.Addr)
		}
	}
	go func() {
		for range events {
		}
	}()
	s.Conn = conn
	return s, nil
}

type quietZK struct{}

func (quietZK) Printf(string, ...any) {}

// Start starts the server process (again) and waits until it answers.
func (s *ZKServer) Start() error {
	if s.cmd != nil {
		select {
		case <-s.done:
		default:
			return nil // running
		}
	}
	logf, err := os.OpenFile(filepath.Join(s.dir, "zookeeper.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command("java", "-Xmx256m", "-cp", "/etc/zookeeper/conf:"+zktest.Jar,
		"org.apache.zookeeper.server.ZooKeeperServerMain", filepath.Join(s.dir, "zoo.cfg"))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start ZooKeeper: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	s.cmd, s.done = cmd, done
	return waitFor(60*time.Second, func() error {
		select {
		case <-done:
			return &permanentError{fmt.Errorf("ZooKeeper at %s exited while starting (see %s)", s.Addr, filepath.Join(s.dir, "zookeeper.log"))}
		default:
		}
		if !zktest.Ruok(s.Addr) {
			return fmt.Errorf("ZooKeeper at %s not answering", s.Addr)
		}
		return nil
	})
}

// Stop kills the server (kill -9) and waits for it to exit.
func (s *ZKServer) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	select {
	case <-s.done:
		return
	default:
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.done
}

// Close ends the harness's session and stops the server.
func (s *ZKServer) Close() {
	if s.Conn != nil {
		s.Conn.Close()
	}
	s.Stop()
}
