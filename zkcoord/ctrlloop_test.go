package zkcoord

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/kafkazk/broker/cluster"
)

// lockedStore and lockedQueue let the test goroutine look at the memStore
// and the recorded requests while the loop runs on its own goroutine
// (synctest.Wait orders the two, but the race detector does not know).
type lockedStore struct {
	mu *sync.Mutex
	s  ctrlStore
}

func (l lockedStore) Get(p string) ([]byte, *zk.Stat, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.s.Get(p)
}

func (l lockedStore) Exists(p string) (bool, *zk.Stat, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.s.Exists(p)
}

func (l lockedStore) Children(p string) ([]string, *zk.Stat, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.s.Children(p)
}

func (l lockedStore) Create(p string, data []byte, flags int32) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.s.Create(p, data, flags)
}

func (l lockedStore) Delete(p string, version int32) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.s.Delete(p, version)
}

func (l lockedStore) Multi(ops ...any) ([]zk.MultiResponse, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.s.Multi(ops...)
}

func (l lockedStore) Batch(calls []storeCall, stop func() bool) []storeResult {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.s.Batch(calls, stop)
}

type lockedQueue struct {
	mu *sync.Mutex
	q  requestQueue
}

func (l lockedQueue) enqueue(r ctrlRequest) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.q.enqueue(r)
}

func (l lockedQueue) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.q.close()
}

// TestControllerLoopRetriesUntilConnected runs the real loop (run, with
// its timers under synctest's fake clock) over a memStore that is
// disconnected: nothing is written while it is down, the loop keeps
// retrying with its backoff, and once the connection is back the failover
// and a broker failure that came while down are done and announced. A
// stop while the store is down ends the loop at once and cancels the
// context of every broker queue.
//
// memStore's down fails every call at once, as go-zookeeper does for the
// requests in flight when the connection breaks; a request made while it
// stays disconnected instead blocks the caller until the client
// reconnects or the session expires. So with a real session the loop may
// sit inside one ZooKeeper call, and stop takes effect when it returns;
// what stop ends at once is the loop's waits between retries (tested
// here) and every send to a broker (the queues' context is cancelled).
func TestControllerLoopRetriesUntilConnected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newCtrlHarness(t)
		for _, cmd := range []string{"brokers 1 2 3", "topic t 0=1,2,3 1=2,3,1"} {
			if _, err := h.run(cmd); err != nil {
				t.Fatal(err)
			}
		}
		m := h.store
		var mu sync.Mutex // guards m and h once the loop runs
		m.down = true
		c := h.newController(1)
		c.store = lockedStore{&mu, m}
		newQueue := c.cfg.NewQueue
		c.cfg.NewQueue = func(b cluster.Broker) requestQueue { return lockedQueue{&mu, newQueue(b)} }
		locked := func(f func()) {
			mu.Lock()
			defer mu.Unlock()
			f()
		}
		go c.run()
		synctest.Wait()
		time.Sleep(10 * time.Second) // several retries, all failing
		synctest.Wait()
		locked(func() {
			if len(h.sent) != 0 || m.nodes[partitionStatePath("t", 0)] != nil {
				t.Fatalf("disconnected controller wrote or sent: %d requests", len(h.sent))
			}
			if m.calls < 5 {
				t.Fatalf("only %d calls in 10 s while disconnected: the loop does not retry", m.calls)
			}
			m.down = false
		})
		time.Sleep(ctrlRetryMax)
		synctest.Wait()
		locked(func() {
			if err := h.checkBrokersTold(); err != nil {
				t.Fatalf("after failover: %v", err)
			}
			// Broker 2 dies while the controller is disconnected.
			m.down = true
			m.remove(brokerPath(2))
			c.post(m.takeEvents())
		})
		synctest.Wait()
		time.Sleep(3 * time.Second)
		synctest.Wait()
		locked(func() {
			if got := string(m.nodes[partitionStatePath("t", 1)].data); got != `{"controller_epoch":1,"leader":2,"version":1,"leader_epoch":0,"isr":[2,3,1]}` {
				t.Fatalf("t/1 changed while disconnected: %s", got)
			}
			m.down = false
		})
		time.Sleep(ctrlRetryMax)
		synctest.Wait()
		locked(func() {
			if got := string(m.nodes[partitionStatePath("t", 1)].data); got != `{"controller_epoch":1,"leader":3,"version":1,"leader_epoch":1,"isr":[3,1]}` {
				t.Fatalf("t/1 after reconnecting: %s", got)
			}
			if err := h.checkBrokersTold(); err != nil {
				t.Fatalf("after broker 2 died: %v", err)
			}
			// Stop while disconnected with work pending: the loop ends at once.
			m.down = true
			m.remove(brokerPath(3))
			c.post(m.takeEvents())
		})
		synctest.Wait()
		c.stop()
		select {
		case <-c.exited:
		case <-time.After(time.Millisecond):
			t.Fatal("loop did not stop while disconnected")
		}
		if c.ctx.Err() == nil {
			t.Fatal("stop did not cancel the broker queues' context")
		}
	})
}
