package zkcoord

import (
	"encoding/binary"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
)

// zkFrameProxy is a TCP proxy to ZooKeeper that reads the protocol's
// length-prefixed frames, so that it can lose one setData exactly: either
// the request itself (never applied) or only its reply (applied by the
// server, but the client sees its connection drop), or cut every
// connection (Cut). While held, it accepts and at once closes every new
// connection, so a session it cut off expires on the server.
type zkFrameProxy struct {
	ln     net.Listener
	target string

	mu   sync.Mutex
	rule *dropRule // armed rule, consumed by the first matching setData
	hold bool
	// holdNext lets one connection through and then holds again: a
	// session expired on the server learns so and gets no new one.
	holdNext bool
	conns    []net.Conn
	wg       sync.WaitGroup
}

// dropRule loses the next setData of a path ending in pathSuffix.
type dropRule struct {
	pathSuffix  string
	beforeApply bool   // lose the request; else let it apply and lose the reply
	onDrop      func() // runs once the frame is swallowed, before the connection closes
	hold        bool   // then refuse connections until Heal
	fired       chan struct{}
}

func newZKFrameProxy(t *testing.T, target string) *zkFrameProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &zkFrameProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *zkFrameProxy) Addr() string { return p.ln.Addr().String() }

// Arm sets the rule for the next matching setData and returns a channel
// closed once it fired.
func (p *zkFrameProxy) Arm(r dropRule) <-chan struct{} {
	r.fired = make(chan struct{})
	p.mu.Lock()
	p.rule = &r
	p.mu.Unlock()
	return r.fired
}

// Cut closes every connection and holds: new connections are closed at
// once until Heal, so that the server expires the sessions it cut off.
func (p *zkFrameProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hold = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// Heal ends a hold.
func (p *zkFrameProxy) Heal() {
	p.mu.Lock()
	p.hold = false
	p.mu.Unlock()
}

// PassOne ends a hold for one connection only.
func (p *zkFrameProxy) PassOne() {
	p.mu.Lock()
	p.hold, p.holdNext = false, true
	p.mu.Unlock()
}

func (p *zkFrameProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.hold {
			p.mu.Unlock()
			c.Close()
			continue
		}
		if p.holdNext {
			p.holdNext, p.hold = false, true
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		pc := &proxiedConn{p: p, client: c, server: up}
		p.wg.Add(2)
		go func() { defer p.wg.Done(); pc.clientToServer() }()
		go func() { defer p.wg.Done(); pc.serverToClient() }()
	}
}

// proxiedConn is one client connection and its upstream.
type proxiedConn struct {
	p              *zkFrameProxy
	client, server net.Conn

	mu      sync.Mutex
	pending *dropRule // a forwarded setData whose reply is to be lost
	xid     int32
}

func (c *proxiedConn) closeBoth() {
	c.client.Close()
	c.server.Close()
}

// readFrame reads one length-prefixed frame, returning it whole and its body.
func readFrame(r io.Reader) (frame, body []byte, err error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, nil, err
	}
	frame = make([]byte, 4+binary.BigEndian.Uint32(n[:]))
	copy(frame, n[:])
	if _, err := io.ReadFull(r, frame[4:]); err != nil {
		return nil, nil, err
	}
	return frame, frame[4:], nil
}

const opSetData = 5 // ZooKeeper's OpCode.setData

// setDataPath returns the path of a setData request body, or false.
func setDataPath(body []byte) (int32, string, bool) {
	if len(body) < 12 || int32(binary.BigEndian.Uint32(body[4:8])) != opSetData {
		return 0, "", false
	}
	n := int(binary.BigEndian.Uint32(body[8:12]))
	if len(body) < 12+n {
		return 0, "", false
	}
	return int32(binary.BigEndian.Uint32(body[0:4])), string(body[12 : 12+n]), true
}

func (c *proxiedConn) clientToServer() {
	defer c.closeBoth()
	// The first frame is the ConnectRequest, which has no request header.
	frame, _, err := readFrame(c.client)
	if err != nil {
		return
	}
	if _, err := c.server.Write(frame); err != nil {
		return
	}
	for {
		frame, body, err := readFrame(c.client)
		if err != nil {
			return
		}
		if xid, path, ok := setDataPath(body); ok {
			c.p.mu.Lock()
			r := c.p.rule
			if r != nil && strings.HasSuffix(path, r.pathSuffix) {
				c.p.rule = nil
			} else {
				r = nil
			}
			c.p.mu.Unlock()
			if r != nil && r.beforeApply {
				c.fire(r)
				return
			}
			if r != nil {
				c.mu.Lock()
				c.pending, c.xid = r, xid
				c.mu.Unlock()
			}
		}
		if _, err := c.server.Write(frame); err != nil {
			return
		}
	}
}

func (c *proxiedConn) serverToClient() {
	defer c.closeBoth()
	frame, _, err := readFrame(c.server) // the ConnectResponse
	if err != nil {
		return
	}
	if _, err := c.client.Write(frame); err != nil {
		return
	}
	for {
		frame, body, err := readFrame(c.server)
		if err != nil {
			return
		}
		if len(body) >= 4 {
			xid := int32(binary.BigEndian.Uint32(body[0:4]))
			c.mu.Lock()
			r := c.pending
			if r != nil && xid == c.xid {
				c.pending = nil
			} else {
				r = nil
			}
			c.mu.Unlock()
			if r != nil {
				c.fire(r) // the reply is swallowed: the client never sees it
				return
			}
		}
		if _, err := c.client.Write(frame); err != nil {
			return
		}
	}
}

// fire runs a rule that just swallowed a frame; the caller then closes
// the connection.
func (c *proxiedConn) fire(r *dropRule) {
	if r.onDrop != nil {
		r.onDrop()
	}
	if r.hold {
		c.p.mu.Lock()
		c.p.hold = true
		c.p.mu.Unlock()
	}
	close(r.fired)
}
