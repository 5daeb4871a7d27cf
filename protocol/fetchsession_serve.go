package protocol

// Serving fetches in an incremental fetch session (KIP-227): Kafka's
// FullFetchContext (a full fetch with epoch 0 creates the session) and
// IncrementalFetchContext (a fetch with epoch >= 1 updates the session,
// reads every partition of it, and answers only those that changed).

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
)

// FetchPeeker is the capability of Replicas that makes a long-polling
// session fetch cheap: after a wake-up it asks each partition of the
// session whether anything changed (one lock, no log read) and reads only
// those that did. partition.Manager implements it; without it every
// partition is read again.
type FetchPeeker interface {
	PeekFetch(tp cluster.TopicPartition, req partition.ReadRequest) (partition.PeekResult, error)
}

var _ FetchPeeker = (*partition.Manager)(nil)

// createFetchSession opens a session of the partitions of a full fetch
// with epoch 0, holding what resp answered for each (Kafka's
// FullFetchContext.updateAndGenerateResponseData). It returns the new
// session's id, or 0 when the cache has no slot for it. resp's partitions
// are req's, in request order (fetchOnce answers every one).
func (s *Server) createFetchSession(req *kmsg.FetchRequest, resp *kmsg.FetchResponse, privileged bool) int32 {
	n := 0
	for _, t := range req.Topics {
		n += len(t.Partitions)
	}
	parts := make([]*cachedPartition, 0, n)
	index := make(map[cluster.TopicPartition]int, n)
	for ti, t := range req.Topics {
		for pi, p := range t.Partitions {
			tp := cluster.TopicPartition{Topic: t.Topic, Partition: p.Partition}
			rp := &resp.Topics[ti].Partitions[pi]
			cp := requestedPartition(req.Version, tp, p)
			cp.highWatermark, cp.lastStableOffset, cp.logStartOffset = rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset
			if rp.ErrorCode != 0 {
				cp.highWatermark, cp.lastStableOffset, cp.logStartOffset = -1, -1, -1
			}
			if i, dup := index[tp]; dup {
				// A partition named twice: the last one's data, as
				// Kafka's request map keeps.
				*parts[i] = cp
				continue
			}
			index[tp] = len(parts)
			parts = append(parts, &cp)
		}
	}
	return s.fetchSessions.maybeCreate(privileged, parts)
}

// requestedPartition is a cachedPartition holding the request data of p,
// a partition of a fetch of version v, with nothing answered yet.
func requestedPartition(v int16, tp cluster.TopicPartition, p kmsg.FetchRequestTopicPartition) cachedPartition {
	epoch := int32(-1)
	if v >= 9 {
		epoch = p.CurrentLeaderEpoch
	}
	return cachedPartition{tp: tp, maxBytes: p.PartitionMaxBytes, fetchOffset: p.FetchOffset,
		fetcherLogStart: p.LogStartOffset, currentLeaderEpoch: epoch,
		highWatermark: -1, lastStableOffset: -1, logStartOffset: -1}
}

// sessionErrorResponse is a fetch refused as a whole for its session
// metadata (Kafka's SessionErrorContext): the code, no partitions.
func sessionErrorResponse(req *kmsg.FetchRequest, code int16, sessionID int32) *kmsg.FetchResponse {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	resp.ErrorCode = code
	resp.SessionID = sessionID
	resp.Topics = []kmsg.FetchResponseTopic{}
	return resp
}

// sessionItem is one partition of a session as one incremental fetch
// serves it: the request data and last answer the session holds, and this
// fetch's answer so far.
type sessionItem struct {
	cachedPartition
	// read: the partition has been read in this fetch; final: its answer
	// cannot change any more (records kept, or an error).
	read, final bool
	code        int16
	hw, lso     int64
	start       int64
	records     []byte
	aborted     []partition.AbortedTransaction
	throttled   bool
}

// mustRespond is Kafka's CachedPartition.maybeUpdateResponseData: the
// partition goes into the response when it has records or an error, or
// an offset the fetcher was not told yet.
func (it *sessionItem) mustRespond() bool {
	return len(it.records) > 0 || it.code != 0 || it.hw != it.highWatermark ||
		it.lso != it.lastStableOffset || it.start != it.logStartOffset
}

// sessionItems pools the per-fetch copies of a session's partitions, so a
// follower's fetch of thousands of partitions allocates none per round.
var sessionItems = sync.Pool{New: func() any { return new([]sessionItem) }}

// fetchIncremental serves a fetch in session id at epoch (>= 1): Kafka's
// FetchManager.newContext for an incremental request, then its
// IncrementalFetchContext.
func (s *Server) fetchIncremental(ctx context.Context, rc *reqContext, req *kmsg.FetchRequest, denied func(topic string) int16, id, epoch int32) *kmsg.FetchResponse {
	sess := s.fetchSessions.get(id)
	if sess == nil {
		return sessionErrorResponse(req, kerr.FetchSessionIDNotFound.Code, invalidSessionID)
	}
	sess.mu.Lock()
	if sess.epoch != epoch {
		sess.mu.Unlock()
		return sessionErrorResponse(req, kerr.InvalidFetchSessionEpoch.Code, invalidSessionID)
	}
	var named []cachedPartition
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			named = append(named, requestedPartition(req.Version, cluster.TopicPartition{Topic: t.Topic, Partition: p.Partition}, p))
		}
	}
	var forgotten []cluster.TopicPartition
	for _, t := range req.ForgottenTopics {
		for _, p := range t.Partitions {
			forgotten = append(forgotten, cluster.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	sess.updateLocked(named, forgotten)
	if len(sess.parts) == 0 {
		// Nothing left to fetch: the session closes and the fetch is
		// answered sessionless (its named partitions, if any).
		sess.mu.Unlock()
		s.fetchSessions.removeSession(sess)
		return s.fetchFull(ctx, rc, req, denied)
	}
	s.fetchSessions.touch(sess)
	sess.epoch = nextSessionEpoch(sess.epoch)
	itemsp := sessionItems.Get().(*[]sessionItem)
	items := (*itemsp)[:0]
	for _, cp := range sess.parts {
		items = append(items, sessionItem{cachedPartition: *cp})
	}
	sess.mu.Unlock()
	defer func() {
		clear(items)
		*itemsp = items[:0]
		sessionItems.Put(itemsp)
	}()

	r := sessionRound{s: s, ctx: ctx, rc: rc, denied: denied, items: items, buf: &rc.encodeBuf,
		replicaID: replicaIDOf(req), remaining: max(min(req.MaxBytes, fetchMaxBytesLimit), 0)}
	if r.replicaID < 0 && req.IsolationLevel != 0 {
		r.isolation = 1
	}
	r.peeker, _ = s.cfg.Replicas.(FetchPeeker)
	// A long poll takes the change channel before each round, so a change
	// during a round is not missed. A follower's wait wakes only for new
	// records (Changed(true)), as in Kafka; its last look, when the wait
	// ends, also answers a high watermark that moved meanwhile, which
	// Changed(false) tells.
	var changed, moved <-chan struct{}
	follower := r.replicaID >= 0
	if req.MaxWaitMillis > 0 {
		changed = s.cfg.Replicas.Changed(follower)
		if follower {
			moved = s.cfg.Replicas.Changed(false)
		}
	}
	r.run(false)
	if req.MaxWaitMillis > 0 && !r.failed && r.total < int64(req.MinBytes) {
		timer := time.NewTimer(time.Duration(req.MaxWaitMillis) * time.Millisecond)
	wait:
		for {
			select {
			case <-changed:
				changed = s.cfg.Replicas.Changed(follower)
				if follower {
					moved = s.cfg.Replicas.Changed(false)
				}
				r.run(true)
				if r.failed || r.total >= int64(req.MinBytes) {
					break wait
				}
			case <-timer.C:
				// A last look, unless nothing changed since the last one
				// (moved is nil, never ready, for a consumer).
				select {
				case <-changed:
					r.run(true)
				case <-moved:
					r.run(true)
				default:
				}
				break wait
			case <-ctx.Done():
				break wait
			}
		}
		timer.Stop()
	}
	s.recordThrottled(r.throttled)
	return s.answerSession(req, sess, epoch, items, r.isolation)
}

// sessionRound reads a session's partitions for one fetch, round after
// round of its long poll, into one buffer; records read are kept across
// rounds.
type sessionRound struct {
	s         *Server
	ctx       context.Context
	rc        *reqContext
	denied    func(topic string) int16
	peeker    FetchPeeker
	items     []sessionItem
	buf       *[]byte
	replicaID int32
	isolation int8

	remaining        int32 // the response's MaxBytes left
	total, throttled int64 // record bytes kept, and those leader-throttled
	failed           bool
}

// run reads every partition whose answer may still change. The first
// round (again false) reads them all: a follower's fetch state (its LEO,
// lastCaughtUpTime) moves with every fetch of the session, named in the
// request or not, which keeps a caught-up idle follower in the ISR. Later
// rounds peek first and read only the partitions whose offsets moved or
// that have records to read.
func (r *sessionRound) run(again bool) {
	for i := range r.items {
		it := &r.items[i]
		if it.final {
			continue
		}
		if code := r.denied(it.tp.Topic); code != 0 {
			// Refused before the replica sees the request: a follower's
			// fetch offset is not recorded, so the HW cannot move.
			it.read, it.final, it.code = true, true, code
			it.hw, it.lso, it.start = -1, -1, -1
			r.failed = true
			continue
		}
		rr := partition.ReadRequest{
			FetchOffset:        it.fetchOffset,
			ReplicaID:          r.replicaID,
			CurrentLeaderEpoch: it.currentLeaderEpoch,
			LogStartOffset:     it.fetcherLogStart,
			IsolationLevel:     r.isolation,
		}
		if again && it.read && r.peeker != nil {
			pk, err := r.peeker.PeekFetch(it.tp, rr)
			if err == nil && !pk.Readable && pk.HighWatermark == it.hw &&
				pk.LastStableOffset == it.lso && pk.LogStartOffset == it.start {
				continue
			}
		}
		rr.MaxBytes = max(min(it.maxBytes, r.remaining), 0)
		rr.Buf = *r.buf
		res, err := r.s.cfg.Replicas.Read(it.tp, rr)
		it.read = true
		if err != nil {
			it.final = true
			it.code = r.s.partitionErrorCode(r.ctx, r.rc, it.tp, err, r.s.errorCode, nil)
			it.hw, it.lso, it.start = -1, -1, -1
			r.failed = true
			continue
		}
		it.hw, it.lso, it.start = res.HighWatermark, res.LastStableOffset, res.LogStartOffset
		n := int32(len(res.Records))
		if n == 0 || (r.total > 0 && n > r.remaining) {
			// Nothing, or more than the response has room for (the
			// first partition with records keeps them whatever their
			// size, KIP-74): the fetcher asks again.
			continue
		}
		it.final = true
		it.records = res.Records
		it.aborted = res.AbortedTransactions
		it.throttled = res.Throttled
		r.total += int64(n)
		if res.Throttled {
			r.throttled += int64(n)
		}
		r.remaining = max(r.remaining-n, 0)
		if res.Buf != nil {
			*r.buf = res.Buf
		}
	}
}

// answerSession builds the response of an incremental fetch of sess at
// epoch from its items, and records in the session what it tells the
// fetcher (Kafka's IncrementalFetchContext.updateAndGenerateResponseData):
// only the partitions that must respond are in it; those with records move
// to the end of the session's order. If another fetch of the session came
// in meanwhile (a duplicate of this epoch, or the next), the answer is
// INVALID_FETCH_SESSION_EPOCH, as Kafka's.
func (s *Server) answerSession(req *kmsg.FetchRequest, sess *fetchSession, epoch int32, items []sessionItem, isolation int8) *kmsg.FetchResponse {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.epoch != nextSessionEpoch(epoch) {
		return sessionErrorResponse(req, kerr.InvalidFetchSessionEpoch.Code, sess.id)
	}
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	resp.SessionID = sess.id
	resp.Topics = []kmsg.FetchResponseTopic{}
	var moved []int
	for i := range items {
		it := &items[i]
		if !it.mustRespond() {
			continue
		}
		if j, ok := sess.index[it.tp]; ok {
			cp := sess.parts[j]
			cp.highWatermark, cp.lastStableOffset, cp.logStartOffset = it.hw, it.lso, it.start
			if len(it.records) > 0 {
				moved = append(moved, j)
			}
		}
		if n := len(resp.Topics); n == 0 || resp.Topics[n-1].Topic != it.tp.Topic {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic = it.tp.Topic
			resp.Topics = append(resp.Topics, rt)
		}
		rt := &resp.Topics[len(resp.Topics)-1]
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition = it.tp.Partition
		rp.ErrorCode = it.code
		rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = it.hw, it.lso, it.start
		rp.PreferredReadReplica = -1
		// Never null: librdkafka refuses a null record set.
		rp.RecordBatches = []byte{}
		if len(it.records) > 0 {
			rp.RecordBatches = it.records
		}
		rp.AbortedTransactions = nil
		if isolation == 1 && it.code == 0 {
			rp.AbortedTransactions = make([]kmsg.FetchResponseTopicPartitionAbortedTransaction, 0, len(it.aborted))
			for _, a := range it.aborted {
				at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
				at.ProducerID, at.FirstOffset = a.ProducerID, a.FirstOffset
				rp.AbortedTransactions = append(rp.AbortedTransactions, at)
			}
		}
		rt.Partitions = append(rt.Partitions, rp)
	}
	slices.Sort(moved)
	sess.moveToEndLocked(moved)
	return resp
}
