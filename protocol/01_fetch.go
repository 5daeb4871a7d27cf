package protocol

// Fetch (key 1), versions 4-12 (v4 is the first with record batches and
// isolation level, v12 the last that names topics rather than topic ids;
// kafka-go needs at least 10).
//
//   - Incremental fetch sessions (KIP-227, v7+; fetchsession*.go), as
//     Kafka's FetchManager.newContext: SessionEpoch -1 (and every fetch
//     before v7) is sessionless, answered with SessionID 0; epoch 0 is a
//     full fetch that also opens a session of the partitions it names and
//     answers its id (0 when max.incremental.fetch.session.cache.slots
//     leaves no slot; see fetchSessionCache for eviction); a full fetch
//     naming a session id closes that session first. Epoch >= 1 is an
//     incremental fetch of session SessionID: an unknown id answers
//     FETCH_SESSION_ID_NOT_FOUND, any epoch but the session's next one
//     INVALID_FETCH_SESSION_EPOCH (top-level ErrorCode, no partitions).
//     Its partitions add to or alter the session's, ForgottenTopics
//     removes (a session left empty closes, answered sessionless); every
//     partition of the session is then read with the fetch data the
//     session holds, and the response carries only those with records, an
//     error, or a high watermark, last stable offset or log start offset
//     other than the session last answered. A follower's fetch state is
//     recorded for every partition of the session, named or not, so an
//     idle caught-up follower stays in the ISR. While an incremental fetch
//     long-polls, each wake-up peeks at its partitions (FetchPeeker: one
//     lock each, no log read) and reads only those that changed. A
//     follower session (replica id >= 0 with ClusterAction) is
//     privileged in eviction. Topic ids (v13+) are not served.
//   - Each partition is read with Replicas.Read: ReplicaID is the request's
//     (-1 for consumers, a broker id for followers), CurrentLeaderEpoch
//     from v9 (else -1), MaxBytes the partition's max bytes bounded by what
//     is left of the response's MaxBytes (itself clamped to Kafka's
//     fetch.max.bytes default, 55 MiB). The first partition that returns
//     data keeps it even if it is larger (KIP-74: Read returns at least one
//     whole batch); data from a later partition that would exceed the
//     budget is dropped, and the client fetches it next time.
//   - Long poll: with MaxWaitMillis > 0, no partition error, and fewer than
//     MinBytes read, the request waits on Replicas.Changed and re-reads
//     after each signal, until MinBytes is reached, MaxWaitMillis passes or
//     the server closes. Only this connection is parked; no lock is held
//     (not even its fetch session's).
//   - IsolationLevel: a consumer's (ReplicaID -1) read_committed (1) read
//     stops at the last stable offset and answers the aborted
//     transactions overlapping the returned records (a list, empty when
//     none, as Kafka's); read_uncommitted answers AbortedTransactions null.
//     A follower's fetch is always read_uncommitted. Any other isolation
//     level reads as read_committed, as Kafka's FetchRequest.isolationLevel
//     maps every non-zero byte.
//   - HighWatermark, LastStableOffset (every version from 4) and
//     LogStartOffset from the read; PreferredReadReplica -1 (v11+).
//   - A failed partition has HW, LSO and log start offset -1, as in Kafka.
//   - Replication throttle (KIP-73): Read returns nothing for a leader-
//     throttled replica while the leader quota is exceeded; once the
//     response of a follower's fetch is final, the record bytes it carries
//     of throttled partitions (ReadResult.Throttled) are recorded against
//     the quota when Replicas implements ReplicationQuota, as Kafka's
//     KafkaApis records sizeOfThrottledPartitions.
//   - Authorization: a consumer needs Read on each topic
//     (TOPIC_AUTHORIZATION_FAILED); a follower (replica id >= 0) needs
//     ClusterAction on the cluster, else every partition answers
//     CLUSTER_AUTHORIZATION_FAILED before the replica sees the request, so a
//     client posing as a follower cannot move the high watermark
//     (CVE-2018-1288). Kafka itself answers TOPIC_AUTHORIZATION_FAILED
//     there; issue 14 asks for the cluster code.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
	"github.com/kafkazk/broker/security"
)

// fetchMaxBytesLimit is Kafka's fetch.max.bytes default: the most one
// fetch response carries, whatever the request asks for.
const fetchMaxBytesLimit int32 = 55 * 1024 * 1024

func (s *Server) handleFetch(ctx context.Context, rc *reqContext, req *kmsg.FetchRequest) (kmsg.Response, error) {
	// Every partition's records are read into one pooled buffer, sized by
	// the connection's previous response (a follower's or a consumer's
	// fetches are alike from one to the next); the response aliases it
	// until it is encoded (rc.encodeBuf). A long poll re-reads into the
	// same buffer.
	rc.encodeBuf = getBuf(rc.sizeHint)
	denied := s.fetchAuthorization(rc, req)
	// KIP-227's FetchMetadata: before v7 every fetch is sessionless.
	sessionID, epoch := invalidSessionID, finalEpoch
	if req.Version >= 7 {
		sessionID, epoch = req.SessionID, req.SessionEpoch
	}
	if epoch != initialEpoch && epoch != finalEpoch {
		return s.fetchIncremental(ctx, rc, req, denied, sessionID, epoch), nil
	}
	// A full fetch: it closes the session it names, and with epoch 0
	// opens a new one of the partitions it asks for.
	if sessionID != invalidSessionID {
		s.fetchSessions.remove(sessionID)
	}
	resp := s.fetchFull(ctx, rc, req, denied)
	if epoch == initialEpoch {
		privileged := replicaIDOf(req) >= 0 && denied("") == 0
		resp.SessionID = s.createFetchSession(req, resp, privileged)
	}
	return resp, nil
}

// fetchFull answers a fetch of the partitions req names, long-polling as
// the file comment says. Its SessionID is 0.
func (s *Server) fetchFull(ctx context.Context, rc *reqContext, req *kmsg.FetchRequest, denied func(topic string) int16) *kmsg.FetchResponse {
	// A long poll takes the change channel before each read, so a change
	// between a read and the wait is not missed.
	var changed <-chan struct{}
	if req.MaxWaitMillis > 0 {
		changed = s.cfg.Replicas.Changed(replicaIDOf(req) >= 0)
	}
	resp, n, throttled, failed := s.fetchOnce(ctx, rc, req, denied, &rc.encodeBuf)
	if req.MaxWaitMillis <= 0 || failed || n >= int64(req.MinBytes) || len(req.Topics) == 0 {
		s.recordThrottled(throttled)
		return resp
	}
	timer := time.NewTimer(time.Duration(req.MaxWaitMillis) * time.Millisecond)
	defer timer.Stop()
	for {
		select {
		case <-changed:
		case <-timer.C:
			resp, _, throttled, _ = s.fetchOnce(ctx, rc, req, denied, &rc.encodeBuf)
			s.recordThrottled(throttled)
			return resp
		case <-ctx.Done():
			s.recordThrottled(throttled)
			return resp
		}
		changed = s.cfg.Replicas.Changed(replicaIDOf(req) >= 0)
		resp, n, throttled, failed = s.fetchOnce(ctx, rc, req, denied, &rc.encodeBuf)
		if failed || n >= int64(req.MinBytes) {
			s.recordThrottled(throttled)
			return resp
		}
	}
}

// fetchAuthorization decides, once per request, which topics req may
// read: the code a partition of topic is refused with, or 0. A follower's
// fetch (replica id >= 0) needs ClusterAction on the cluster, else every
// partition answers CLUSTER_AUTHORIZATION_FAILED (CVE-2018-1288: a client
// posing as a follower would otherwise move the high watermark); a
// consumer's needs Read on each topic (TOPIC_AUTHORIZATION_FAILED).
func (s *Server) fetchAuthorization(rc *reqContext, req *kmsg.FetchRequest) func(topic string) int16 {
	if replicaIDOf(req) >= 0 {
		if s.authorizeCluster(rc, security.OpClusterAction) {
			return func(string) int16 { return 0 }
		}
		return func(string) int16 { return kerr.ClusterAuthorizationFailed.Code }
	}
	readable := s.filterAuthorized(rc, security.OpRead, security.ResourceTopic, logDenied)
	return func(topic string) int16 {
		if readable(topic) {
			return 0
		}
		return kerr.TopicAuthorizationFailed.Code
	}
}

// replicaIDOf is the fetching broker's id, or -1 for a consumer.
func replicaIDOf(req *kmsg.FetchRequest) int32 {
	if req.Version >= 15 { // KIP-903 moved it into ReplicaState
		return req.ReplicaState.ID
	}
	return req.ReplicaID
}

// recordThrottled records the leader-throttled bytes of a final response.
func (s *Server) recordThrottled(n int64) {
	if q, ok := s.cfg.Replicas.(ReplicationQuota); ok && n > 0 {
		q.RecordLeaderReplication(n)
	}
}

// fetchOnce reads every requested partition once, into *buf (emptied
// first; grown if short). It returns the response, whose records alias
// *buf, the record bytes in it, those of leader-throttled partitions, and
// whether any partition failed.
func (s *Server) fetchOnce(ctx context.Context, rc *reqContext, req *kmsg.FetchRequest, denied func(topic string) int16, buf *[]byte) (*kmsg.FetchResponse, int64, int64, bool) {
	*buf = (*buf)[:0]
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	resp.SessionID = 0

	replicaID := replicaIDOf(req)
	var isolation int8
	if replicaID < 0 && req.IsolationLevel != 0 {
		isolation = 1
	}
	remaining := min(req.MaxBytes, fetchMaxBytesLimit)
	if remaining < 0 {
		remaining = 0
	}
	var (
		total, throttled int64
		failed           bool
	)
	resp.Topics = make([]kmsg.FetchResponseTopic, 0, len(req.Topics))
	for _, t := range req.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.FetchResponseTopicPartition, 0, len(t.Partitions))
		for _, p := range t.Partitions {
			rp := kmsg.NewFetchResponseTopicPartition()
			// An empty record set must be encoded as zero bytes, not null:
			// librdkafka rejects the whole response on a null one
			// ("invalid MessageSetSize -1").
			rp.RecordBatches = []byte{}
			rp.Partition = p.Partition
			tp := cluster.TopicPartition{Topic: t.Topic, Partition: p.Partition}
			epoch := int32(-1)
			if req.Version >= 9 {
				epoch = p.CurrentLeaderEpoch
			}
			if code := denied(t.Topic); code != 0 {
				// Refused before the replica sees the request: a follower's
				// fetch offset is not recorded, so the HW cannot move.
				rp.ErrorCode = code
				rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
				failed = true
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			limit := max(min(p.PartitionMaxBytes, remaining), 0)
			res, err := s.cfg.Replicas.Read(tp, partition.ReadRequest{
				FetchOffset:        p.FetchOffset,
				MaxBytes:           limit,
				ReplicaID:          replicaID,
				CurrentLeaderEpoch: epoch,
				LogStartOffset:     p.LogStartOffset,
				IsolationLevel:     isolation,
				Buf:                *buf,
			})
			if err != nil {
				rp.ErrorCode = s.partitionErrorCode(ctx, rc, tp, err, s.errorCode, nil)
				rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
				failed = true
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			rp.HighWatermark = res.HighWatermark
			rp.LastStableOffset = res.LastStableOffset
			rp.LogStartOffset = res.LogStartOffset
			rp.PreferredReadReplica = -1
			rp.AbortedTransactions = nil
			if isolation == 1 {
				rp.AbortedTransactions = make([]kmsg.FetchResponseTopicPartitionAbortedTransaction, 0, len(res.AbortedTransactions))
			}
			if n := int32(len(res.Records)); n > 0 {
				if total == 0 || n <= remaining {
					for _, a := range res.AbortedTransactions {
						at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
						at.ProducerID, at.FirstOffset = a.ProducerID, a.FirstOffset
						rp.AbortedTransactions = append(rp.AbortedTransactions, at)
					}
					rp.RecordBatches = res.Records
					total += int64(n)
					if res.Throttled {
						throttled += int64(n)
					}
					remaining = max(remaining-n, 0)
					if res.Buf != nil {
						*buf = res.Buf
					}
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, total, throttled, failed
}

var _ ReplicationQuota = (*partition.Manager)(nil)
