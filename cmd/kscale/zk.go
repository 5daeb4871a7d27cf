package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// tp is a topic partition.
type tp struct {
	Topic     string
	Partition int32
}

func (p tp) String() string { return p.Topic + "-" + strconv.Itoa(int(p.Partition)) }

// partState is Kafka's partition state znode JSON,
// /brokers/topics/<t>/partitions/<p>/state.
type partState struct {
	ControllerEpoch int32   `json:"controller_epoch"`
	Leader          int32   `json:"leader"`
	LeaderEpoch     int32   `json:"leader_epoch"`
	ISR             []int32 `json:"isr"`
}

// zkInFlight is how many ZooKeeper reads are in flight at once on the one
// session (go-zookeeper pipelines concurrent calls on its connection).
const zkInFlight = 64

type zkView struct {
	conn   *zk.Conn
	chroot string
}

type quietLogger struct{}

func (quietLogger) Printf(string, ...interface{}) {}

func connectZK(addr, chroot string) (*zkView, error) {
	conn, events, err := zk.Connect([]string{addr}, 30*time.Second, zk.WithLogger(quietLogger{}))
	if err != nil {
		return nil, err
	}
	deadline := time.After(60 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				go func() {
					for range events {
					}
				}()
				return &zkView{conn: conn, chroot: chroot}, nil
			}
		case <-deadline:
			conn.Close()
			return nil, fmt.Errorf("zookeeper %s: no session within 60s", addr)
		}
	}
}

func (z *zkView) path(p string) string { return z.chroot + p }

func statePath(p tp) string {
	return fmt.Sprintf("/brokers/topics/%s/partitions/%d/state", p.Topic, p.Partition)
}

func (z *zkView) state(p tp) (partState, error) {
	b, _, err := z.conn.Get(z.path(statePath(p)))
	if err != nil {
		return partState{}, fmt.Errorf("get %s: %w", statePath(p), err)
	}
	var s partState
	if err := json.Unmarshal(b, &s); err != nil {
		return partState{}, fmt.Errorf("%s: %w", statePath(p), err)
	}
	return s, nil
}

// states reads the state znode of every partition, zkInFlight at a time.
// A missing znode is an error.
func (z *zkView) states(tps []tp) (map[tp]partState, error) {
	out := make(map[tp]partState, len(tps))
	var mu sync.Mutex
	var firstErr error
	work := make(chan tp)
	var wg sync.WaitGroup
	for range min(zkInFlight, len(tps)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				s, err := z.state(p)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				out[p] = s
				mu.Unlock()
			}
		}()
	}
	for _, p := range tps {
		work <- p
	}
	close(work)
	wg.Wait()
	return out, firstErr
}

// assignment reads /brokers/topics/<topic>: partition -> replicas.
func (z *zkView) assignment(topic string) (map[int32][]int32, error) {
	b, _, err := z.conn.Get(z.path("/brokers/topics/" + topic))
	if err != nil {
		return nil, fmt.Errorf("get /brokers/topics/%s: %w", topic, err)
	}
	var a struct {
		Partitions map[string][]int32 `json:"partitions"`
	}
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, fmt.Errorf("/brokers/topics/%s: %w", topic, err)
	}
	out := make(map[int32][]int32, len(a.Partitions))
	for k, v := range a.Partitions {
		p, err := strconv.Atoi(k)
		if err != nil {
			return nil, fmt.Errorf("/brokers/topics/%s: partition %q", topic, k)
		}
		out[int32(p)] = v
	}
	return out, nil
}

// controller reads /controller's brokerid and /controller_epoch.
func (z *zkView) controller() (id, epoch int32, err error) {
	b, _, err := z.conn.Get(z.path("/controller"))
	if err != nil {
		return -1, 0, fmt.Errorf("get /controller: %w", err)
	}
	var c struct {
		BrokerID int32 `json:"brokerid"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return -1, 0, fmt.Errorf("/controller: %w", err)
	}
	eb, _, err := z.conn.Get(z.path("/controller_epoch"))
	if err != nil {
		return -1, 0, fmt.Errorf("get /controller_epoch: %w", err)
	}
	e, err := strconv.Atoi(string(eb))
	if err != nil {
		return -1, 0, fmt.Errorf("/controller_epoch %q", eb)
	}
	return c.BrokerID, int32(e), nil
}

// stateWatch follows the state znodes of a set of partitions with one data
// watch each, and records, per partition, when (by the watch event's
// arrival) its leader first became one other than `from`, and the first
// time any of them was written with a controller_epoch above minEpoch.
type stateWatch struct {
	z        *zkView
	from     int32
	minEpoch int32

	mu       sync.Mutex
	movedAt  map[tp]time.Time
	firstNew time.Time // first write with controller_epoch > minEpoch
	// firstNewMtime is the smallest mtime (ZooKeeper's clock, ms) of a
	// state written with controller_epoch > minEpoch.
	firstNewMtime int64
	left          int
	allMoved      chan struct{}
	errs          []error
	stopped       bool
	stopWatch     chan struct{}
}

// watchStates sets a watch on the state znode of every partition in tps
// (zkInFlight at a time) before the caller acts.
func (z *zkView) watchStates(tps []tp, from, minEpoch int32) (*stateWatch, error) {
	w := &stateWatch{z: z, from: from, minEpoch: minEpoch, movedAt: map[tp]time.Time{},
		left: len(tps), allMoved: make(chan struct{}), stopWatch: make(chan struct{})}
	if len(tps) == 0 {
		close(w.allMoved)
		return w, nil
	}
	work := make(chan tp)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range min(zkInFlight, len(tps)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				if err := w.arm(p); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, p := range tps {
		work <- p
	}
	close(work)
	wg.Wait()
	return w, firstErr
}

// arm reads p's state with a watch and checks it; on the watch event it
// does so again, until p has moved or the watch is stopped.
func (w *stateWatch) arm(p tp) error {
	b, st, ch, err := w.z.conn.GetW(w.z.path(statePath(p)))
	if err != nil {
		return fmt.Errorf("getw %s: %w", statePath(p), err)
	}
	if w.check(p, b, st, time.Now()) {
		return nil
	}
	go func() {
		select {
		case ev := <-ch:
			at := time.Now()
			if ev.Type != zk.EventNodeDataChanged {
				if ev.Err != nil || ev.Type == zk.EventNotWatching {
					w.fail(fmt.Errorf("watch %s: %v %v", statePath(p), ev.Type, ev.Err))
					return
				}
			}
			b, st, ch2, err := w.z.conn.GetW(w.z.path(statePath(p)))
			if err != nil {
				w.fail(fmt.Errorf("getw %s: %w", statePath(p), err))
				return
			}
			if !w.check(p, b, st, at) {
				w.follow(p, ch2)
			}
		case <-w.stopWatch:
		}
	}()
	return nil
}

// follow waits on a re-armed watch.
func (w *stateWatch) follow(p tp, ch <-chan zk.Event) {
	select {
	case <-ch:
		at := time.Now()
		b, st, ch2, err := w.z.conn.GetW(w.z.path(statePath(p)))
		if err != nil {
			w.fail(fmt.Errorf("getw %s: %w", statePath(p), err))
			return
		}
		if !w.check(p, b, st, at) {
			w.follow(p, ch2)
		}
	case <-w.stopWatch:
	}
}

// check records what the state b of p says; true once p has moved.
func (w *stateWatch) check(p tp, b []byte, st *zk.Stat, at time.Time) bool {
	var s partState
	if err := json.Unmarshal(b, &s); err != nil {
		w.fail(fmt.Errorf("%s: %w", statePath(p), err))
		return true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if s.ControllerEpoch > w.minEpoch {
		if w.firstNew.IsZero() {
			w.firstNew = at
		}
		if w.firstNewMtime == 0 || st.Mtime < w.firstNewMtime {
			w.firstNewMtime = st.Mtime
		}
	}
	if _, done := w.movedAt[p]; done {
		return true
	}
	if s.Leader >= 0 && s.Leader != w.from {
		w.movedAt[p] = at
		w.left--
		if w.left == 0 {
			close(w.allMoved)
		}
		return true
	}
	return false
}

func (w *stateWatch) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.errs = append(w.errs, err)
}

// result: when the last partition moved, the first new-epoch write, how
// many are still not moved, and the first watch error.
func (w *stateWatch) result() (last, firstNew time.Time, left int, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range w.movedAt {
		if t.After(last) {
			last = t
		}
	}
	if len(w.errs) > 0 {
		err = w.errs[0]
	}
	return last, w.firstNew, w.left, err
}

// firstNewWrite is the ZooKeeper mtime of the first new-epoch state seen.
func (w *stateWatch) firstNewWrite() (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return time.UnixMilli(w.firstNewMtime), w.firstNewMtime != 0
}

func (w *stateWatch) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped {
		w.stopped = true
		close(w.stopWatch)
	}
}

// watchGone sets an exists watch on path (which must exist) and returns
// channels that get the time the znode was deleted and then the time it
// was created again (by whoever: for /controller, the new controller).
// Times are when the watch events arrive here: the events of one session
// arrive in order, so differences between them are consistent, but on a
// loaded machine their arrival may lag ZooKeeper by a scheduling delay.
func (z *zkView) watchGone(path string) (gone, born <-chan time.Time, err error) {
	ok, _, ch, err := z.conn.ExistsW(z.path(path))
	if err != nil {
		return nil, nil, fmt.Errorf("existsw %s: %w", path, err)
	}
	if !ok {
		return nil, nil, fmt.Errorf("%s does not exist", path)
	}
	g, b := make(chan time.Time, 1), make(chan time.Time, 1)
	go func() {
		deleted := false
		for {
			ev := <-ch
			at := time.Now()
			if ev.Type == zk.EventNotWatching {
				return
			}
			if ev.Type == zk.EventNodeDeleted {
				g <- at
				deleted = true
			} else if deleted && ev.Type == zk.EventNodeCreated {
				b <- at
				return
			}
			ok, _, ch2, err := z.conn.ExistsW(z.path(path))
			if err != nil {
				return
			}
			switch {
			case !deleted && !ok:
				g <- at
				deleted = true
			case deleted && ok:
				// Created before the watch was set again: as late as
				// this answer.
				b <- time.Now()
				return
			}
			ch = ch2
		}
	}()
	return g, b, nil
}
