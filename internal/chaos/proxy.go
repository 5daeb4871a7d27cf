package chaos

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// SourceClient is the source label of every connection whose first
// request does not carry an inter-broker client id ("broker-<id>").
const SourceClient = "client"

// sourceAll, as a blocked source, holds every connection.
const sourceAll = "*"

// Proxy forwards TCP connections from its own loopback port to a target
// address, and can hold traffic from chosen sources, as an iptables DROP
// would: nothing is forwarded and nothing is closed, so senders see a
// silent, live connection until the cut heals, and then the held bytes flow
// on. A Kafka proxy names a connection's source by the client id of its
// first request: the broker's inter-broker client sends "broker-<id>", so
// one proxy in front of each broker (whose advertised listener is the
// proxy's port) can cut a broker from its peers while clients and
// ZooKeeper still reach it. A plain proxy (ZooKeeper) has one source.
type Proxy struct {
	Addr     string // where the proxy listens
	classify bool

	l       net.Listener
	mu      sync.Mutex
	target  string // guarded by mu: SetTarget moves it
	cond    *sync.Cond
	blocked map[string]bool
	conns   map[net.Conn]struct{}
	closed  bool
	wg      sync.WaitGroup
	// delay and rate shape every byte forwarded (Slow): each chunk is
	// written delay after it was read, and each direction of the whole
	// proxy (all its connections) carries at most rate bytes a second;
	// next is when each direction's link is free again.
	delay time.Duration
	rate  int64
	next  [2]time.Time
}

// NewProxy listens on a free loopback port and forwards to target.
// classify names sources by the Kafka client id of the first request.
func NewProxy(target string, classify bool) (*Proxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{Addr: l.Addr().String(), target: target, classify: classify, l: l,
		blocked: map[string]bool{}, conns: map[net.Conn]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// SetTarget makes new connections go to target (a broker restarted on
// another port); open ones keep theirs.
func (p *Proxy) SetTarget(target string) {
	p.mu.Lock()
	p.target = target
	p.mu.Unlock()
}

// Block holds traffic of the given sources (SourceClient, BrokerSource(id)).
func (p *Proxy) Block(sources ...string) {
	p.mu.Lock()
	for _, s := range sources {
		p.blocked[s] = true
	}
	p.mu.Unlock()
}

// BlockAll holds every connection, old and new.
func (p *Proxy) BlockAll() { p.Block(sourceAll) }

// Slow shapes the proxy's traffic like tc netem's "delay D rate R": each
// chunk is forwarded delay after it arrived, and each direction carries at
// most bitsPerSec (0: no limit). Heal ends it.
func (p *Proxy) Slow(delay time.Duration, bitsPerSec int64) {
	p.mu.Lock()
	p.delay, p.rate = delay, bitsPerSec/8
	p.mu.Unlock()
}

// shape returns the delay and byte rate now in force.
func (p *Proxy) shape() (time.Duration, int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.delay, p.rate
}

// reserve books n bytes on direction dir's link and returns when their
// transmission ends at the proxy's rate.
func (p *Proxy) reserve(dir, n int, rate int64) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	t := p.next[dir]
	if t.Before(now) {
		t = now
	}
	t = t.Add(time.Duration(int64(n) * int64(time.Second) / rate))
	p.next[dir] = t
	return t
}

// Heal lets every held byte through and forwards normally again, at full
// speed.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.delay, p.rate = 0, 0
	clear(p.blocked)
	p.cond.Broadcast()
	p.mu.Unlock()
}

// Blocked reports whether any source is held.
func (p *Proxy) Blocked() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.blocked) > 0
}

// Close stops the proxy and closes every connection through it.
func (p *Proxy) Close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		p.l.Close()
		for c := range p.conns {
			c.Close()
		}
		p.cond.Broadcast()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// BrokerSource is the source label of broker id's inter-broker client.
func BrokerSource(id int32) string { return "broker-" + strconv.Itoa(int(id)) }

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// waitOpen blocks while src is held; false once the proxy is closed.
func (p *Proxy) waitOpen(src string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.closed && (p.blocked[src] || p.blocked[sourceAll]) {
		p.cond.Wait()
	}
	return !p.closed
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			continue
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.serve(c)
		}()
	}
}

func (p *Proxy) serve(c net.Conn) {
	defer p.untrack(c)
	src := SourceClient
	var first []byte
	if p.classify {
		var err error
		first, src, err = peekSource(c)
		if err != nil {
			return
		}
	}
	if !p.waitOpen(src) {
		return
	}
	p.mu.Lock()
	target := p.target
	p.mu.Unlock()
	up, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	if !p.track(up) {
		return
	}
	defer p.untrack(up)
	if len(first) > 0 {
		if _, err := up.Write(first); err != nil {
			return
		}
	}
	done := make(chan struct{}, 2)
	go func() { p.pump(up, c, src, 0); done <- struct{}{} }()
	go func() { p.pump(c, up, src, 1); done <- struct{}{} }()
	<-done
	// One direction ended: close both (after any hold, as pump waited).
	c.Close()
	up.Close()
	<-done
}

// pump copies from to dst, holding each chunk (and the final close) while
// the connection's source is blocked, and shaping it while the proxy is
// slow (Slow). A reader goroutine queues chunks with their arrival times,
// so a delay adds latency without capping throughput at chunk/delay.
func (p *Proxy) pump(dst, from net.Conn, source string, dir int) {
	type chunk struct {
		b  []byte
		at time.Time
	}
	ch := make(chan chunk, 64)
	stop := make(chan struct{})
	defer close(stop)
	var rerr error
	go func() {
		defer close(ch)
		buf := make([]byte, 32<<10)
		for {
			n, err := from.Read(buf)
			if n > 0 {
				select {
				case ch <- chunk{b: append([]byte(nil), buf[:n]...), at: time.Now()}:
				case <-stop:
					return
				}
			}
			if err != nil {
				rerr = err
				return
			}
		}
	}()
	for c := range ch {
		if !p.waitOpen(source) {
			return
		}
		if delay, rate := p.shape(); delay > 0 || rate > 0 {
			due := c.at.Add(delay)
			if rate > 0 {
				if end := p.reserve(dir, len(c.b), rate); end.After(due) {
					due = end
				}
			}
			time.Sleep(time.Until(due))
		}
		if _, werr := dst.Write(c.b); werr != nil {
			return
		}
	}
	if rerr != nil && !errors.Is(rerr, net.ErrClosed) {
		p.waitOpen(source)
	}
}

// peekSource reads the first request's header up to its client id and
// returns the bytes read and the source they name.
func peekSource(c net.Conn) ([]byte, string, error) {
	// size(4) api_key(2) api_version(2) correlation_id(4) client_id_len(2)
	head := make([]byte, 14)
	if _, err := io.ReadFull(c, head); err != nil {
		return nil, "", err
	}
	n := int(int16(binary.BigEndian.Uint16(head[12:14])))
	if n <= 0 || n > 256 {
		return head, SourceClient, nil
	}
	id := make([]byte, n)
	if _, err := io.ReadFull(c, id); err != nil {
		return nil, "", err
	}
	src := SourceClient
	if s := string(id); strings.HasPrefix(s, "broker-") {
		src = s
	}
	return append(head, id...), src, nil
}
