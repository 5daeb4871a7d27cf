package zkcoord

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/kafkazk/broker/cluster"
)

// memStore is an in-memory ZooKeeper for the controller (ctrlStore): a
// tree of znodes with versions, czxids and ZooKeeper's rules (a parent
// must exist, a node with children cannot be deleted, versions are
// checked, multi is atomic). Each call of the controller counts; a fault
// can be injected at one call index:
//
//   - faultLossBefore: the connection drops before the request reaches
//     the server: nothing applied, zk.ErrConnectionClosed.
//   - faultLossAfter: the request is applied, the reply is lost:
//     zk.ErrConnectionClosed.
//   - faultExpiry: the session expires: nothing applied, this call fails
//     with zk.ErrSessionExpired, and later calls succeed, on the new
//     session go-zookeeper opens on the same connection (it sends the
//     calls it held there): only the /controller_epoch check of a multi
//     can reject them, once a successor bumped the epoch.
//   - faultLossAfterTwice: as faultLossAfter, and the next call (the
//     read-back) fails with zk.ErrConnectionClosed too, before it applies.
//   - faultBadVersion: another writer (a leader writing its ISR) rewrites
//     every node the request sets, bumping its version, just before it
//     arrives, so a conditional set meets zk.ErrBadVersion.
//   - faultLossThrice: as faultLossAfterTwice, and the call after the
//     read-back loses its connection too (before it applies): a flapping
//     connection across the retry.
//   - faultIsrShrink: as faultBadVersion, but the other writer is a leader
//     that really changes the ISR (drops its last member other than the
//     leader) and leaves an ISR change notification: the controller must
//     decide again on the new ISR, and brokers must learn the final one.
//   - faultNewEpoch: another broker wins a controller election just
//     before the call (/controller_epoch is bumped): this controller must
//     resign at its next write, and the harness starts a fresh one.
//
// Changes (by the controller or the test) are recorded as the watch
// events the session goroutine would post (pendingEvents), and the
// controller's applied writes as a trace. Not safe for concurrent use: the
// scripted tests drive the controller on one goroutine.
type memStore struct {
	nodes   map[string]*memNode
	zxid    int64
	seq     int
	calls   int
	fault   memFault
	expired bool // the controller's session expired (faultExpiry)
	stolen  bool // another controller was elected (faultNewEpoch)
	// sentAhead is how many calls of a batch are still made after it
	// aborted (held by the client already; see Batch).
	sentAhead int
	// reads, if set, counts the controller's Gets per path.
	reads map[string]int
	// leaderWrote is the zkVersion of each state znode a leader's ISR
	// write (the isr command, faultIsrShrink) produced last.
	leaderWrote map[string]int32
	down        bool // every call fails with zk.ErrConnectionClosed (disconnected)
	events      pendingEvents
	// before, if set, runs at the start of every controller call with its
	// index: another client's change landing just before that call.
	before func(call int)
	// writeFaults queues faults for the controller's writes of a path:
	// each Multi creating or setting the path takes the next one.
	writeFaults map[string][]faultKind
	// loseRead, if set, is a path whose next read loses its connection
	// (a queued faultLossAfterTwice: the write's read-back fails too,
	// whatever other calls of a batch come between).
	loseRead string
	// trace receives a line per applied controller write; the scripted
	// tests share it with their recording sender.
	trace *[]string
}

type memNode struct {
	data []byte
	stat zk.Stat
}

type faultKind int

const (
	faultNone faultKind = iota
	faultLossBefore
	faultLossAfter
	faultExpiry
	faultBadVersion
	faultLossAfterTwice
	faultLossThrice
	faultIsrShrink
	faultNewEpoch
)

func (k faultKind) String() string {
	return [...]string{"none", "conn-loss-before-apply", "conn-loss-after-apply", "session-expiry", "bad-version", "conn-loss-after-apply-and-read-back",
		"conn-loss-after-apply-read-back-and-retry", "isr-shrink-by-leader", "newer-controller-epoch"}[k]
}

// memFault injects kind at the call with index at (0-based).
type memFault struct {
	at   int
	kind faultKind
}

func newMemStore() *memStore {
	m := &memStore{nodes: map[string]*memNode{"/": {}}, trace: new([]string), leaderWrote: map[string]int32{}}
	for _, p := range persistentPaths {
		m.put(p, nil, 0)
	}
	m.put(controllerEpochPath, encodeControllerEpoch(0), 0)
	m.events = pendingEvents{}
	return m
}

// ---- the test's direct access (not counted, never faulted) ----

// put creates or overwrites p (creating missing parents) as another
// client would; owner is the ephemeral owner (0 for persistent).
func (m *memStore) put(p string, data []byte, owner int64) *zk.Stat {
	if par := parent(p); par != "" && m.nodes[par] == nil {
		m.put(par, nil, 0)
	}
	m.zxid++
	n, ok := m.nodes[p]
	if !ok {
		n = &memNode{stat: zk.Stat{Czxid: m.zxid, Version: 0, EphemeralOwner: owner}}
		m.nodes[p] = n
		m.changed(p, true)
	} else {
		n.stat.Version++
		m.changed(p, false)
	}
	n.data = slices.Clone(data)
	n.stat.Mzxid = m.zxid
	return &n.stat
}

// remove deletes p and everything under it, as another client would.
func (m *memStore) remove(p string) {
	for _, k := range slices.Sorted(maps.Keys(m.nodes)) {
		if k == p || strings.HasPrefix(k, p+"/") {
			delete(m.nodes, k)
		}
	}
	m.changed(p, true)
}

// putSequential creates prefix<10 digits> and returns its name.
func (m *memStore) putSequential(prefix string, data []byte) string {
	p := fmt.Sprintf("%s%010d", prefix, m.seq)
	m.seq++
	m.put(p, data, 0)
	return p[strings.LastIndexByte(p, '/')+1:]
}

func (m *memStore) takeEvents() pendingEvents {
	ev := m.events
	m.events = pendingEvents{}
	return ev
}

func parent(p string) string {
	if p == "/" {
		return ""
	}
	i := strings.LastIndexByte(p, '/')
	if i == 0 {
		return "/"
	}
	return p[:i]
}

// changed records the watch event a change of p fires: child watches of
// its parent when it was created or deleted, data watches of p.
func (m *memStore) changed(p string, created bool) {
	par := parent(p)
	name := p[strings.LastIndexByte(p, '/')+1:]
	if created {
		switch par {
		case brokerIDsPath:
			m.events.brokers = true
		case topicsPath:
			m.events.topicList = true
		case deleteTopicsRootPath:
			m.events.deletions = true
		case isrChangeNotificationPath:
			m.events.isrChanges = true
		case logDirEventNotificationPath:
			m.events.logDirEvents = true
		}
	}
	switch par {
	case brokerIDsPath:
		m.events.brokers = true
	case topicsPath:
		m.events.merge(pendingEvents{topics: map[string]bool{name: true}})
	case configTopicsPath:
		m.events.merge(pendingEvents{configs: map[string]bool{name: true}})
	}
	switch p {
	case reassignPartitionsPath:
		m.events.reassign = true
	case preferredReplicaElectionPath:
		m.events.preferredElection = true
	}
}

// ---- ctrlStore: the controller's calls ----

// call counts one controller call and reports the fault to inject in it.
func (m *memStore) call() (faultKind, error) {
	i := m.calls
	m.calls++
	if m.before != nil {
		m.before(i)
	}
	if m.down {
		return faultNone, zk.ErrConnectionClosed
	}
	if (m.fault.kind == faultLossAfterTwice || m.fault.kind == faultLossThrice) && m.fault.at+1 == i ||
		m.fault.kind == faultLossThrice && m.fault.at+2 == i {
		return faultLossBefore, zk.ErrConnectionClosed
	}
	if m.fault.kind == faultNone || m.fault.at != i {
		return faultNone, nil
	}
	switch m.fault.kind {
	case faultLossBefore:
		return faultLossBefore, zk.ErrConnectionClosed
	case faultExpiry:
		m.expired = true
		return faultExpiry, zk.ErrSessionExpired
	case faultNewEpoch:
		e, err := decodeControllerEpoch(m.nodes[controllerEpochPath].data)
		if err != nil {
			panic(err)
		}
		m.put(controllerEpochPath, encodeControllerEpoch(e+1), 0)
		m.stolen = true
		return faultNone, nil
	case faultIsrShrink:
		m.shrinkIsr()
		return faultNone, nil
	}
	return m.fault.kind, nil
}

func (m *memStore) Get(p string) ([]byte, *zk.Stat, error) {
	if m.reads != nil {
		m.reads[p]++
	}
	if _, err := m.call(); err != nil {
		return nil, nil, err
	}
	if m.loseRead != "" && m.loseRead == p {
		m.loseRead = ""
		return nil, nil, zk.ErrConnectionClosed
	}
	n, ok := m.nodes[p]
	if !ok {
		return nil, nil, zk.ErrNoNode
	}
	st := n.stat
	return slices.Clone(n.data), &st, nil
}

func (m *memStore) Exists(p string) (bool, *zk.Stat, error) {
	if _, err := m.call(); err != nil {
		return false, nil, err
	}
	n, ok := m.nodes[p]
	if !ok {
		return false, &zk.Stat{}, nil
	}
	st := n.stat
	return true, &st, nil
}

func (m *memStore) Children(p string) ([]string, *zk.Stat, error) {
	if _, err := m.call(); err != nil {
		return nil, nil, err
	}
	n, ok := m.nodes[p]
	if !ok {
		return nil, nil, zk.ErrNoNode
	}
	kids := m.children(p)
	st := n.stat
	st.NumChildren = int32(len(kids))
	return kids, &st, nil
}

func (m *memStore) children(p string) []string {
	var kids []string
	for k := range m.nodes {
		if k != "/" && parent(k) == p {
			kids = append(kids, k[strings.LastIndexByte(k, '/')+1:])
		}
	}
	slices.Sort(kids)
	return kids
}

func (m *memStore) Create(p string, data []byte, flags int32) (string, error) {
	res, err := m.Multi(&zk.CreateRequest{Path: p, Data: data, Flags: flags})
	if err != nil {
		return "", err
	}
	return res[0].String, nil
}

func (m *memStore) Delete(p string, version int32) error {
	_, err := m.Multi(&zk.DeleteRequest{Path: p, Version: version})
	return err
}

// Multi applies ops atomically, as the controller's writes all go. Create
// and Delete are one-op multis here; their trace lines are the same.
func (m *memStore) Multi(ops ...any) ([]zk.MultiResponse, error) {
	kind, err := m.call()
	if err != nil {
		return nil, err
	}
	if kind == faultNone {
		var p string
		kind, p = m.writeFault(ops)
		switch kind {
		case faultLossBefore:
			return nil, zk.ErrConnectionClosed
		case faultExpiry:
			m.expired = true
			return nil, zk.ErrSessionExpired
		case faultLossAfterTwice:
			m.loseRead = p
		}
	}
	if kind == faultBadVersion {
		for _, op := range ops {
			if o, ok := op.(*zk.SetDataRequest); ok && m.nodes[o.Path] != nil {
				m.put(o.Path, m.nodes[o.Path].data, 0)
			}
		}
	}
	res, err := m.apply(ops)
	if kind == faultLossAfter || kind == faultLossAfterTwice || kind == faultLossThrice {
		return nil, zk.ErrConnectionClosed
	}
	return res, err
}

// shrinkIsr is a leader's ISR write landing now: the first partition
// state (sorted) with a leader and another ISR member loses its last
// member other than the leader, and a notification names it.
func (m *memStore) shrinkIsr() {
	for _, p := range slices.Sorted(maps.Keys(m.nodes)) {
		if !strings.HasPrefix(p, topicsPath+"/") || !strings.HasSuffix(p, "/state") {
			continue
		}
		n := m.nodes[p]
		st, err := decodePartitionState(n.data, n.stat.Version)
		if err != nil || st.Leader < 0 || len(st.Isr) < 2 || !slices.Contains(st.Isr, st.Leader) {
			continue
		}
		for j := len(st.Isr) - 1; j >= 0; j-- {
			if st.Isr[j] != st.Leader {
				st.Isr = slices.Delete(slices.Clone(st.Isr), j, j+1)
				break
			}
		}
		m.leaderWrote[p] = m.put(p, encodePartitionState(st), 0).Version
		parts := strings.Split(p, "/") // "", brokers, topics, t, partitions, p, state
		part, _ := strconv.ParseInt(parts[5], 10, 32)
		m.putSequential(isrChangeNotificationSeqPrefix, encodeIsrChangeNotification([]cluster.TopicPartition{{Topic: parts[3], Partition: int32(part)}}))
		return
	}
}

// writeFault takes the next queued fault of a path ops create or set.
func (m *memStore) writeFault(ops []any) (faultKind, string) {
	for _, op := range ops {
		var p string
		switch o := op.(type) {
		case *zk.CreateRequest:
			p = o.Path
		case *zk.SetDataRequest:
			p = o.Path
		default:
			continue
		}
		if q := m.writeFaults[p]; len(q) > 0 {
			m.writeFaults[p] = q[1:]
			return q[0], p
		}
	}
	return faultNone, ""
}

// apply runs ops and keeps their changes only if all succeed: the nodes
// they touch are saved first (an undo log, so a write costs what it
// touches, not the size of the tree) and restored on a failure.
func (m *memStore) apply(ops []any) ([]zk.MultiResponse, error) {
	saved := map[string]*memNode{}
	save := func(p string) {
		if _, ok := saved[p]; ok {
			return
		}
		if n, ok := m.nodes[p]; ok {
			c := *n
			saved[p] = &c
		} else {
			saved[p] = nil
		}
	}
	savedZxid, savedEvents, savedTrace := m.zxid, m.events, len(*m.trace)
	savedEvents.topics = maps.Clone(savedEvents.topics)
	savedEvents.configs = maps.Clone(savedEvents.configs)
	res := make([]zk.MultiResponse, len(ops))
	var failed error
	for i, op := range ops {
		switch o := op.(type) {
		case *zk.CreateRequest:
			save(o.Path)
		case *zk.SetDataRequest:
			save(o.Path)
		case *zk.DeleteRequest:
			save(o.Path)
		}
		var err error
		res[i], err = m.applyOne(op)
		if err != nil {
			res[i].Error = err
			failed = err
			for j := i + 1; j < len(ops); j++ {
				res[j].Error = zk.ErrAPIError // ZooKeeper's RUNTIMEINCONSISTENCY
			}
			break
		}
	}
	if failed != nil {
		for p, n := range saved {
			if n == nil {
				delete(m.nodes, p)
			} else {
				m.nodes[p] = n
			}
		}
		m.zxid, m.events, *m.trace = savedZxid, savedEvents, (*m.trace)[:savedTrace]
		return res, failed
	}
	return res, nil
}

func (m *memStore) applyOne(op any) (zk.MultiResponse, error) {
	switch o := op.(type) {
	case *zk.CheckVersionRequest:
		n, ok := m.nodes[o.Path]
		if !ok {
			return zk.MultiResponse{}, zk.ErrNoNode
		}
		if o.Version != -1 && o.Version != n.stat.Version {
			return zk.MultiResponse{}, zk.ErrBadVersion
		}
		return zk.MultiResponse{}, nil
	case *zk.CreateRequest:
		if _, ok := m.nodes[o.Path]; ok {
			return zk.MultiResponse{}, zk.ErrNodeExists
		}
		par := parent(o.Path)
		if pn := m.nodes[par]; pn == nil {
			return zk.MultiResponse{}, zk.ErrNoNode
		} else if pn.stat.EphemeralOwner != 0 {
			return zk.MultiResponse{}, zk.ErrNoChildrenForEphemerals
		}
		st := m.put(o.Path, o.Data, 0)
		*m.trace = append(*m.trace, strings.TrimSpace(fmt.Sprintf("zk create %s %s", o.Path, o.Data)))
		return zk.MultiResponse{String: o.Path, Stat: st}, nil
	case *zk.SetDataRequest:
		n, ok := m.nodes[o.Path]
		if !ok {
			return zk.MultiResponse{}, zk.ErrNoNode
		}
		if o.Version != -1 && o.Version != n.stat.Version {
			return zk.MultiResponse{}, zk.ErrBadVersion
		}
		st := m.put(o.Path, o.Data, 0)
		*m.trace = append(*m.trace, fmt.Sprintf("zk set %s v%d %s", o.Path, o.Version, o.Data))
		return zk.MultiResponse{Stat: st}, nil
	case *zk.DeleteRequest:
		n, ok := m.nodes[o.Path]
		if !ok {
			return zk.MultiResponse{}, zk.ErrNoNode
		}
		if o.Version != -1 && o.Version != n.stat.Version {
			return zk.MultiResponse{}, zk.ErrBadVersion
		}
		if len(m.children(o.Path)) > 0 {
			return zk.MultiResponse{}, zk.ErrNotEmpty
		}
		delete(m.nodes, o.Path) // a leaf: checked above
		m.changed(o.Path, true)
		*m.trace = append(*m.trace, fmt.Sprintf("zk delete %s", o.Path))
		return zk.MultiResponse{}, nil
	}
	return zk.MultiResponse{}, fmt.Errorf("memStore: multi op %T", op)
}

// Batch runs calls one by one, in order: each is one controller call,
// counted and faulted as if it were made alone. It aborts as zkConn's
// does (stop, batchAborts), after sentAhead more calls: those the client
// already held when the abort came, which still go out.
func (m *memStore) Batch(calls []storeCall, stop func() bool) []storeResult {
	return seqBatch(m, calls, stop, m.sentAhead)
}

// seqBatch is Batch over s one call at a time, with zkConn.Batch's abort:
// once stop reports true or a call's outcome aborts the batch, ahead more
// calls are made and the rest fail with errNotSent.
func seqBatch(s ctrlStore, calls []storeCall, stop func() bool, ahead int) []storeResult {
	out := make([]storeResult, len(calls))
	aborted := false
	for i, c := range calls {
		if !aborted && stop != nil && stop() {
			aborted = true
		}
		if aborted {
			if ahead <= 0 {
				out[i].err = errNotSent
				continue
			}
			ahead--
		}
		out[i] = doCall(s, c)
		if batchAborts(c, out[i]) {
			aborted = true
		}
	}
	return out
}

var _ ctrlStore = (*memStore)(nil)
