package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Process is one broker process, started as often as the caller likes.
type Process struct {
	Bin       string // the broker binary
	PropsPath string // server.properties, written at every Start
	LogPath   string // stdout and stderr of every start, appended
	// Banner names the harness in the line written to the log before
	// each start ("==== <Banner>: start #n of broker <id> at <time> ====").
	Banner string
	ID     int32

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	err    error // cmd.Wait's result, valid once done is closed
	exit   int   // the exit code once done is closed (-1: a signal)
	paused bool
	starts int
}

// ErrRunning is Start of a process that has not exited.
var ErrRunning = errors.New("already running")

// Start writes props to PropsPath and starts the binary on it with env
// added to the environment. It does not wait for the broker to be ready.
func (p *Process) Start(props map[string]string, env []string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done != nil {
		select {
		case <-p.done:
		default:
			return fmt.Errorf("broker %d: %w", p.ID, ErrRunning)
		}
	}
	if err := WriteProps(p.PropsPath, props, p.Banner); err != nil {
		return err
	}
	logf, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	p.starts++
	fmt.Fprintf(logf, "==== %s: start #%d of broker %d at %s ====\n", p.Banner, p.starts, p.ID, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(p.Bin, p.PropsPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start broker %d: %w", p.ID, err)
	}
	done := make(chan struct{})
	go func() {
		err := cmd.Wait()
		logf.Close()
		p.mu.Lock()
		p.err, p.exit = err, cmd.ProcessState.ExitCode()
		p.mu.Unlock()
		close(done)
	}()
	p.cmd, p.done, p.paused, p.err, p.exit = cmd, done, false, nil, -1
	return nil
}

// Done is closed when the last started process exits; nil if never
// started.
func (p *Process) Done() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// Running reports whether the process is started and has not exited.
func (p *Process) Running() bool {
	done := p.Done()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// Paused reports whether the process is stopped by SIGSTOP.
func (p *Process) Paused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused
}

// Err is the last process's wait result once it exited.
func (p *Process) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// ExitCode is the last process's exit code: -1 if still running, killed by
// a signal, or never started.
func (p *Process) ExitCode() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return -1
	}
	return p.exit
}

// Pid is the last process's id, 0 if never started.
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Signal sends sig to the running process's group and returns the exit
// channel; false if it is not running.
func (p *Process) Signal(sig syscall.Signal) (<-chan struct{}, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.done == nil {
		return nil, false
	}
	select {
	case <-p.done:
		return p.done, false
	default:
	}
	if err := syscall.Kill(-p.cmd.Process.Pid, sig); err != nil {
		return p.done, false
	}
	switch sig {
	case syscall.SIGSTOP:
		p.paused = true
	case syscall.SIGCONT, syscall.SIGKILL:
		p.paused = false
	}
	return p.done, true
}

// Kill sends SIGKILL and waits for the exit.
func (p *Process) Kill() {
	if done, ok := p.Signal(syscall.SIGKILL); ok {
		<-done
	}
}

// Pause freezes the process (SIGSTOP), as a long GC pause or a hung VM
// would.
func (p *Process) Pause() error {
	if _, ok := p.Signal(syscall.SIGSTOP); !ok {
		return fmt.Errorf("pause broker %d: not running", p.ID)
	}
	return nil
}

// Resume continues a paused process (SIGCONT).
func (p *Process) Resume() error {
	if _, ok := p.Signal(syscall.SIGCONT); !ok {
		return fmt.Errorf("resume broker %d: not running", p.ID)
	}
	return nil
}

// Terminate sends SIGTERM (SIGCONT first if paused) without waiting and
// returns the exit channel; false if not running.
func (p *Process) Terminate() (<-chan struct{}, bool) {
	if p.Paused() {
		p.Signal(syscall.SIGCONT)
	}
	return p.Signal(syscall.SIGTERM)
}

// Term is Kafka's clean stop: SIGTERM, then up to timeout for the exit;
// SIGKILL after that. The timeout and a non-zero exit are errors; a
// process not running is not.
func (p *Process) Term(timeout time.Duration) error {
	done, ok := p.Terminate()
	if !ok {
		return nil
	}
	select {
	case <-done:
	case <-time.After(timeout):
		p.Kill()
		return fmt.Errorf("still running %s after SIGTERM; killed", timeout)
	}
	if err := p.Err(); err != nil {
		return fmt.Errorf("exit after SIGTERM: %w", err)
	}
	return nil
}

// Log is everything the broker wrote over all its starts.
func (p *Process) Log() string {
	data, _ := os.ReadFile(p.LogPath)
	return string(data)
}

// LogContains reports whether the log holds s.
func (p *Process) LogContains(s string) bool { return strings.Contains(p.Log(), s) }

// LogTail is the last n lines of the log.
func (p *Process) LogTail(n int) string {
	lines := strings.Split(strings.TrimRight(p.Log(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// WriteProps writes props as a server.properties, keys sorted, under a
// comment naming who generated it.
func WriteProps(path string, props map[string]string, by string) error {
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# generated by the %s\n", by)
	for _, k := range keys {
		fmt.Fprintf(&buf, "%s=%s\n", k, props[k])
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// Ready is one readiness probe of broker id: its registration znode
// (regPath, with any chroot) exists and Metadata through cl, a client
// seeded with the broker's own address, lists it.
func Ready(conn *zk.Conn, regPath string, cl *kgo.Client, id int32) error {
	ok, _, err := conn.Exists(regPath)
	if err != nil {
		return fmt.Errorf("exists %s: %w", regPath, err)
	}
	if !ok {
		return fmt.Errorf("%s not registered", regPath)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{} // no topics, only brokers
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	for _, mb := range resp.Brokers {
		if mb.NodeID == id {
			return nil
		}
	}
	return fmt.Errorf("metadata does not list broker %d (brokers %v)", id, resp.Brokers)
}

// Permanent wraps an error that Poll returns at once.
type Permanent struct{ Err error }

func (p *Permanent) Error() string { return p.Err.Error() }
func (p *Permanent) Unwrap() error { return p.Err }

// Poll calls fn every 100 ms until it returns nil or a *Permanent error,
// or timeout passes; then it returns fn's last error.
func Poll(timeout time.Duration, fn func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := fn()
		if err == nil {
			return nil
		}
		var pe *Permanent
		if errors.As(err, &pe) {
			return pe.Err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s: %w", timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// WaitUnregistered waits until path (a broker's /brokers/ids/<id>, with any
// chroot) is gone: a killed broker's registration outlives it until its
// ZooKeeper session expires, and a broker cannot tell that from a live
// duplicate, so it refuses to register over it (as Kafka 2.x does).
func WaitUnregistered(conn *zk.Conn, path string, timeout time.Duration) error {
	return Poll(timeout, func() error {
		ok, _, err := conn.Exists(path)
		if err != nil {
			return err
		}
		if ok {
			return fmt.Errorf("%s still held by an earlier session", path)
		}
		return nil
	})
}
