package zkcoord

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/go-zookeeper/zk"

	"github.com/kafkazk/broker/cluster"
)

// Pipelined ZooKeeper calls (Kafka 1.1's KafkaZkClient
// retryRequestsUntilConnected over the asynchronous client): the
// controller hands a batch of independent calls to ctrlStore.Batch, which
// *zkConn sends with up to maxInFlight outstanding on its one connection
// (go-zookeeper pipelines calls made from several goroutines), and
// memStore runs one by one, each with its own fault. Results come back
// indexed as the calls, and the controller applies them in that order,
// which is sorted: what a batch does to the context never depends on the
// order the server answered in. Each call keeps its own outcome, so a
// failure of some calls leaves exactly those partitions as work.

// maxInFlight bounds the calls of one batch outstanding on the connection
// (Kafka's controller pipelines without a bound; ZooKeeper's server
// throttles at globalOutstandingLimit, 1,000 by default).
const maxInFlight = 1000

// storeCall is one call of a batch: a Get of path when ops is nil, else a
// Multi of ops.
type storeCall struct {
	path string
	ops  []any
}

// storeResult is one call's outcome: data and stat for a Get, res for a
// Multi (as ctrlStore.Multi returns them), and err.
type storeResult struct {
	data []byte
	stat *zk.Stat
	res  []zk.MultiResponse
	err  error
}

func doCall(s ctrlStore, c storeCall) storeResult {
	if c.ops == nil {
		data, stat, err := s.Get(c.path)
		return storeResult{data: data, stat: stat, err: err}
	}
	res, err := s.Multi(c.ops...)
	return storeResult{res: res, err: err}
}

// errNotSent is the error of a call of a batch that was never handed to
// the client, because the batch was aborted before its turn (see Batch).
// Such a call certainly did not reach ZooKeeper: a write that failed so
// needs no read-back and stays as work, like any failed write.
var errNotSent = errors.New("zkcoord: zookeeper call not sent: batch aborted")

// batchAborts reports whether a call's outcome means the rest of its batch
// should not be handed out: the connection is gone (zk.ErrNoServer,
// zk.ErrConnectionClosed), the client is closing, the session expired, or
// the call was a fenced multi whose /controller_epoch check failed.
func batchAborts(c storeCall, r storeResult) bool {
	if errors.Is(r.err, zk.ErrNoServer) || errors.Is(r.err, zk.ErrConnectionClosed) ||
		errors.Is(r.err, zk.ErrClosing) || errors.Is(r.err, zk.ErrSessionExpired) {
		return true
	}
	if r.err == nil || len(c.ops) == 0 || len(r.res) == 0 {
		return false
	}
	chk, ok := c.ops[0].(*zk.CheckVersionRequest)
	return ok && chk.Path == controllerEpochPath && errors.Is(r.res[0].Error, zk.ErrBadVersion)
}

// Batch runs calls with up to maxInFlight outstanding at once, from
// workers that live only for the call. A worker hands out no further call
// once stop reports true (the controller stopped or fenced; it is called
// from the workers, so it must be safe for that) or once any call's
// outcome aborts the batch (batchAborts): with no server reachable
// go-zookeeper fails the calls it holds with zk.ErrNoServer only about
// once a second, ~maxInFlight at a time, so without the abort a batch of
// 100,000 would take 100 s to fail. The calls never handed out fail with
// errNotSent. The calls in flight at a disconnect fail with
// zk.ErrConnectionClosed (outcome unknown). Calls handed to go-zookeeper
// but not yet written to the socket are held and sent after it
// reconnects, even when that is on a new session after an expiry (it
// opens one on the same *zk.Conn and reports ErrSessionExpired to none of
// them): those writes can land, and the /controller_epoch check of each
// multi is what rejects them once a successor bumped the epoch.
func (z *zkConn) Batch(calls []storeCall, stop func() bool) []storeResult {
	out := make([]storeResult, len(calls))
	if len(calls) == 1 {
		if stop != nil && stop() {
			out[0].err = errNotSent
			return out
		}
		out[0] = doCall(z, calls[0])
		return out
	}
	var next atomic.Int64
	var abort atomic.Bool
	var wg sync.WaitGroup
	for w := 0; w < min(len(calls), maxInFlight); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(calls) {
					return
				}
				if abort.Load() || stop != nil && stop() {
					abort.Store(true)
					out[i].err = errNotSent
					return
				}
				out[i] = doCall(z, calls[i])
				if batchAborts(calls[i], out[i]) {
					abort.Store(true)
				}
			}
		}()
	}
	wg.Wait()
	// Every index below next was taken (and ran or was marked); the rest
	// were never taken.
	for i := min(int(next.Load()), len(calls)); i < len(calls); i++ {
		out[i].err = errNotSent
	}
	return out
}

// batchGet reads paths in one batch.
func (c *controller) batchGet(paths []string) []storeResult {
	calls := make([]storeCall, len(paths))
	for i, p := range paths {
		calls[i] = storeCall{path: p}
	}
	return c.store.Batch(calls, c.stopped)
}

// batchMulti is multi for many independent writes in one batch: each op
// list gets the check of /controller_epoch's zkVersion first, and each
// result's error is sorted as multi's. Results are examined in order: the
// first that shows this controller fenced (a failed epoch check, a lost
// session) fences it, so nothing the caller still has to announce is
// sent; writes that landed before it are left to the successor, which
// reads them.
func (c *controller) batchMulti(writes [][]any) []storeResult {
	calls := make([]storeCall, len(writes))
	for i, ops := range writes {
		all := make([]any, 0, len(ops)+1)
		all = append(all, &zk.CheckVersionRequest{Path: controllerEpochPath, Version: c.epochZkVersion})
		calls[i] = storeCall{ops: append(all, ops...)}
	}
	out := c.store.Batch(calls, c.stopped)
	for i := range out {
		r := &out[i]
		if r.err != nil && len(r.res) > 0 && errors.Is(r.res[0].Error, zk.ErrBadVersion) {
			r.err = fmt.Errorf("check %s zk_version %d: %w", controllerEpochPath, c.epochZkVersion, ErrNotController)
		}
		c.checkFenced(r.err)
	}
	return out
}

// stateOpFailed reports whether the state write of a fenced multi
// (batchMulti: the controller-epoch check, then the write) failed with
// err, rather than its check.
func stateOpFailed(r storeResult, err error) bool {
	return len(r.res) > 1 && errors.Is(r.res[1].Error, err)
}

// stateRead is one state znode read by readStates.
type stateRead struct {
	st     cluster.LeaderAndIsr
	exists bool
	err    error // as readState's: wraps ErrBadZNode when unreadable
	cached bool  // taken from the context, not read (readStatesCached)
}

// readStates is readState for many partitions in one batch.
func (c *controller) readStates(tps []cluster.TopicPartition) []stateRead {
	paths := make([]string, len(tps))
	for i, tp := range tps {
		paths[i] = partitionStatePath(tp.Topic, tp.Partition)
	}
	res := c.batchGet(paths)
	out := make([]stateRead, len(tps))
	for i, r := range res {
		switch {
		case errors.Is(r.err, zk.ErrNoNode):
		case r.err != nil:
			out[i].err = fmt.Errorf("get %s: %w", paths[i], r.err)
		default:
			st, err := decodePartitionState(r.data, r.stat.Version)
			if err != nil {
				out[i].err = fmt.Errorf("%s: %w", paths[i], err)
				break
			}
			out[i] = stateRead{st: st, exists: true}
		}
	}
	return out
}

// readStatesCached is readStates, but with cached it takes each state the
// context holds (but those whose last write had an unknown outcome) as
// read, and reads only the others: a write decided on a cached state is
// conditional on its zkVersion like any other, so a state a leader has
// changed since meets BADVERSION and is read and decided again, while
// an event over thousands of partitions the context knows costs one
// batch of writes instead of a batch of reads and one of writes. A
// decision to write nothing checks no version, so updateStates decides
// those again on a read.
func (c *controller) readStatesCached(tps []cluster.TopicPartition, cached bool) []stateRead {
	if !cached {
		return c.readStates(tps)
	}
	out := make([]stateRead, len(tps))
	var miss []int
	for i, tp := range tps {
		st, ok := c.states[tp]
		if _, unknown := c.unknown[tp]; !ok || unknown {
			miss = append(miss, i)
			continue
		}
		out[i] = stateRead{st: st, exists: true, cached: true}
	}
	if len(miss) == 0 {
		return out
	}
	missed := make([]cluster.TopicPartition, len(miss))
	for k, i := range miss {
		missed[k] = tps[i]
	}
	for k, r := range c.readStates(missed) {
		out[miss[k]] = r
	}
	return out
}

// stateUpdate is one partition's outcome of updateStates, as updateState
// returns it: the state now stored, whether it changed (by this call or
// by an earlier write of ours whose outcome was unknown; either way it
// must be announced), ok false for a missing or unreadable state znode,
// and the error that left it undone.
type stateUpdate struct {
	st          cluster.LeaderAndIsr
	changed, ok bool
	err         error
}

// updateStates is updateState for many partitions, pipelined: each round
// reads the states of the partitions still to do in one batch (the first
// round takes the context's cached states instead: readStatesCached), runs
// prepare once over those to decide on (reads a decision needs beyond the
// state; it returns an error per partition, or nil), decides each and
// writes the changed ones in one batch of fenced multis, each conditional
// on its state's zkVersion; the writes whose outcome is unknown are read
// back in one batch. Partitions that met BADVERSION (a leader changed the
// ISR), or whose unknown write did not land, go to the next round, at
// most maxStateWriteAttempts. Results are indexed as tps and were applied
// to the context in that order.
func (c *controller) updateStates(tps []cluster.TopicPartition,
	prepare func(tps []cluster.TopicPartition, cur []cluster.LeaderAndIsr) []error,
	decide func(tp cluster.TopicPartition, st cluster.LeaderAndIsr) (cluster.LeaderAndIsr, bool)) []stateUpdate {
	out := make([]stateUpdate, len(tps))
	pending := make([]int, len(tps))
	for i := range pending {
		pending[i] = i
	}
	at := func(idx []int) []cluster.TopicPartition {
		s := make([]cluster.TopicPartition, len(idx))
		for k, i := range idx {
			s[k] = tps[i]
		}
		return s
	}
	for attempt := 0; attempt < maxStateWriteAttempts && len(pending) > 0; attempt++ {
		if c.stopped() {
			break
		}
		reads := c.readStatesCached(at(pending), attempt == 0)
		var todo []int
		var curs []cluster.LeaderAndIsr
		fromCache := map[int]bool{} // todo entries decided on a cached state
		for k, i := range pending {
			tp, r := tps[i], reads[k]
			if c.skipState(tp, r.err) {
				out[i].ok, out[i].err = false, nil
				continue
			}
			if r.err != nil {
				out[i].ok, out[i].err = true, r.err
				continue
			}
			if !r.exists {
				delete(c.unknown, tp)
				out[i].ok = false
				continue
			}
			if c.adoptUnknown(tp, r.st) {
				out[i].changed = true
			}
			out[i].st, out[i].ok = r.st, true
			if r.st.ControllerEpoch > c.epoch {
				err := fmt.Errorf("%s written by controller epoch %d, ours is %d: %w",
					partitionStatePath(tp.Topic, tp.Partition), r.st.ControllerEpoch, c.epoch, ErrNotController)
				c.checkFenced(err)
				out[i].err = err
				continue
			}
			todo = append(todo, i)
			curs = append(curs, r.st)
			if r.cached {
				fromCache[i] = true
			}
		}
		if len(todo) > 0 && prepare != nil && !c.stopped() {
			errs := prepare(at(todo), curs)
			kept, keptCurs := todo[:0:0], curs[:0:0]
			for k, i := range todo {
				if k < len(errs) && errs[k] != nil {
					out[i].err = errs[k]
					continue
				}
				kept, keptCurs = append(kept, i), append(keptCurs, curs[k])
			}
			todo, curs = kept, keptCurs
		}
		var writes [][]any
		var wrote, recheck []int
		var nexts []cluster.LeaderAndIsr
		for k, i := range todo {
			tp, cur := tps[i], curs[k]
			next, change := decide(tp, cur)
			if !change && fromCache[i] {
				// A write checks a cached state's zkVersion; deciding to
				// leave it alone does not, so that decision is made again
				// on the state read (a leader may have changed the ISR:
				// a preferred replica back in it).
				recheck = append(recheck, i)
				continue
			}
			if !change {
				c.states[tp] = cur
				continue
			}
			next.ControllerEpoch = c.epoch
			writes = append(writes, []any{&zk.SetDataRequest{Path: partitionStatePath(tp.Topic, tp.Partition),
				Data: encodePartitionState(next), Version: cur.ZkVersion}})
			wrote = append(wrote, i)
			nexts = append(nexts, next)
		}
		pending = recheck
		if len(writes) == 0 {
			if len(pending) == 0 {
				break
			}
			continue
		}
		if c.stopped() {
			for _, i := range wrote {
				out[i].err = errControllerStopped
			}
			break
		}
		res := c.batchMulti(writes)
		var lost []int
		var lostNext []cluster.LeaderAndIsr
		for k, i := range wrote {
			tp, next, r := tps[i], nexts[k], res[k]
			p := partitionStatePath(tp.Topic, tp.Partition)
			switch err := r.err; {
			case err == nil:
				next.ZkVersion = r.res[1].Stat.Version
				c.setState(tp, next, "partition state changed")
				out[i].st, out[i].changed = next, true
			case errors.Is(err, ErrNotController):
				out[i].err = err
			case errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNoNode) && stateOpFailed(r, zk.ErrNoNode):
				// Changed or deleted since the state decided on: read it.
				pending = append(pending, i)
			case zkConnectionLost(err):
				c.unknown[tp] = next
				lost = append(lost, i)
				lostNext = append(lostNext, next)
				out[i].err = fmt.Errorf("set %s at zk_version %d: outcome unknown: %w", p, out[i].st.ZkVersion, err)
			default:
				out[i].err = fmt.Errorf("set %s at zk_version %d: %w", p, out[i].st.ZkVersion, err)
			}
		}
		if len(lost) > 0 && !c.stopped() {
			backs := c.readStates(at(lost))
			for k, i := range lost {
				tp, b := tps[i], backs[k]
				if b.err != nil {
					out[i].err = fmt.Errorf("%w; read back: %w", out[i].err, b.err)
					continue // c.unknown keeps it: the next read settles it
				}
				if b.exists && c.adoptUnknown(tp, b.st) {
					out[i].st, out[i].changed, out[i].err = b.st, true, nil
					continue
				}
				delete(c.unknown, tp)
				out[i].err = nil
				pending = append(pending, i) // it did not land: decide again on what is there
			}
		}
		slices.Sort(pending)
	}
	for _, i := range pending {
		if out[i].err != nil {
			continue
		}
		if c.stopped() {
			out[i].err = errControllerStopped
			continue
		}
		tp := tps[i]
		out[i].err = fmt.Errorf("set %s: zk_version kept moving after %d attempts",
			partitionStatePath(tp.Topic, tp.Partition), maxStateWriteAttempts)
		out[i].st = cluster.LeaderAndIsr{}
	}
	return out
}
