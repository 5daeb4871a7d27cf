package protocol

// Produce (key 0), versions 3-9 (v3 is the first with record batches, v9
// the first flexible one).
//
//   - acks must be -1, 0 or 1; anything else answers every partition with
//     INVALID_REQUIRED_ACKS (21) and appends nothing.
//   - Each partition's records go to Replicas.Append as received. Null
//     records answer INVALID_RECORD (87) for that partition.
//   - A partition this broker holds no replica of answers
//     NOT_LEADER_OR_FOLLOWER if the metadata knows it and
//     UNKNOWN_TOPIC_OR_PARTITION otherwise; an unknown topic is created
//     through Admin when auto.create.topics.enable is on (the producer
//     retries, and finds it after its next Metadata).
//   - acks=-1: after all appends, each successful partition waits in
//     Replicas.WaitCommitted under one deadline of TimeoutMillis, off the
//     connection's read loop: the connection appends the producer's next
//     Produce meanwhile, and sends the responses in request order (see
//     conn). A timeout answers REQUEST_TIMED_OUT (the records may still
//     commit later, as in Kafka).
//   - acks=0: no response at all; if any partition failed the connection
//     is closed so the client refreshes its metadata, as Kafka does.
//   - Internal topics (__consumer_offsets, __transaction_state) answer
//     INVALID_TOPIC_EXCEPTION (17): only the group coordinator writes them.
//   - BaseOffset, LogAppendTime and LogStartOffset come from the append;
//     v8+ carries an ErrorMessage on failed partitions and, for a batch
//     refused for some of its records (a keyless record on a compacted
//     topic: INVALID_RECORD; a timestamp outside
//     message.timestamp.difference.max.ms: INVALID_TIMESTAMP), the
//     RecordErrors naming each record by its index in the batch, as
//     Kafka's RecordValidationException becomes a PartitionResponse.
//   - Transactional batches (attribute bit 0x10) need the request's
//     TransactionalID: without one every partition answers
//     TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53), as Kafka's authorization
//     of a null id does, and nothing is appended. Transactional batches of
//     more than one producer id answer INVALID_PRODUCER_ID_MAPPING (49) on
//     every partition, as Kafka's handleProduceAppend throws.
//   - KIP-890 part 1 (Config.TxnVerification, with Replicas implementing
//     TxnPartitions): for each partition with a transactional batch the
//     replica gives a verification guard unless the producer already has
//     an ongoing transaction there; the partitions that need one are
//     verified with the transaction coordinator in one call (verifyInTxn:
//     the local Transactions or TxnVerifier to its broker), and each
//     verified partition is appended with its guard (AppendWith). A marker
//     for the producer in between clears the guard, and the append fails
//     INVALID_TXN_STATE. Coordinator answers map as Kafka's
//     (verificationFailure): not in the transaction INVALID_TXN_STATE,
//     fenced INVALID_PRODUCER_EPOCH, anything retriable NOT_ENOUGH_REPLICAS.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
	"github.com/kafkazk/broker/security"
)

// errAcksZeroFailed closes the connection after a failed acks=0 produce.
var errAcksZeroFailed = errors.New("protocol: acks=0 produce failed")

func (s *Server) handleProduce(ctx context.Context, rc *reqContext, req *kmsg.ProduceRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	validAcks := req.Acks == -1 || req.Acks == 0 || req.Acks == 1
	var (
		waits   []produceWait
		failed  bool
		created map[string]bool
	)
	setErr := func(rp *kmsg.ProduceResponseTopicPartition, code int16, err error) {
		setProduceErr(rp, req.Version, code, err)
		failed = true
	}

	// Transactional batches: the request's producer, refusals of the
	// whole request, and the guards of verified partitions.
	txnState, whole := s.prepareTxnProduce(ctx, rc, req, validAcks)
	writable := s.filterAuthorized(rc, security.OpWrite, security.ResourceTopic, logDenied)

	// With a WakeBatcher the appends' wake-ups of long-polling fetches
	// go out once, after the last append of the request, so a follower's
	// fetch session wakes once for all its partitions and gets them in
	// one response (Kafka's ActionQueue), not one partition at a time.
	var wakes *partition.Wakes
	batcher, _ := s.cfg.Replicas.(WakeBatcher)
	if batcher != nil {
		wakes = new(partition.Wakes)
	}

	resp.Topics = make([]kmsg.ProduceResponseTopic, 0, len(req.Topics))
	for ti, t := range req.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.ProduceResponseTopicPartition, 0, len(t.Partitions))
		for pi, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition = p.Partition
			tp := cluster.TopicPartition{Topic: t.Topic, Partition: p.Partition}
			tv := txnState[tp]
			switch {
			case whole != nil:
				setErr(&rp, whole.code, whole.err)
			case !writable(t.Topic):
				setErr(&rp, kerr.TopicAuthorizationFailed.Code, errTopicAuthorization)
			case !validAcks:
				setErr(&rp, kerr.InvalidRequiredAcks.Code, fmt.Errorf("acks %d is not -1, 0 or 1", req.Acks))
			case p.Records == nil:
				setErr(&rp, kerr.InvalidRecord.Code, errors.New("null records"))
			case cluster.IsInternalTopic(t.Topic):
				// Only the group coordinator writes __consumer_offsets (through
				// Replicas, not Produce), as Kafka refuses clients.
				setErr(&rp, kerr.InvalidTopicException.Code, fmt.Errorf("cannot append to internal topic %s", t.Topic))
			case tv.err != nil:
				setErr(&rp, s.partitionErrorCode(ctx, rc, tp, tv.err, s.produceErrorCode, &created), tv.err)
			default:
				var (
					res partition.AppendResult
					err error
				)
				if tv.transactional {
					res, err = s.cfg.Replicas.(TxnPartitions).AppendWith(tp, p.Records,
						partition.AppendOptions{Acks: req.Acks, Origin: partition.OriginClient, VerificationGuard: tv.guard, Wakes: wakes})
				} else if batcher != nil {
					res, err = batcher.AppendWith(tp, p.Records, partition.AppendOptions{Acks: req.Acks, Wakes: wakes})
				} else {
					res, err = s.cfg.Replicas.Append(tp, p.Records, req.Acks)
				}
				if err != nil {
					setErr(&rp, s.partitionErrorCode(ctx, rc, tp, err, s.produceErrorCode, &created), err)
					break
				}
				rp.BaseOffset = res.BaseOffset
				rp.LogAppendTime = res.LogAppendTime
				rp.LogStartOffset = res.LogStartOffset
				if req.Acks == -1 {
					waits = append(waits, produceWait{ti: ti, pi: pi, tp: tp, last: res.LastOffset, epoch: res.LeaderEpoch})
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if batcher != nil {
		batcher.Wake(wakes)
	}

	// Every append has copied its records to the log, and nothing below
	// reads the request's records: the frame can go before the wait.
	rc.releaseFrame()
	if len(waits) > 0 {
		// The wait for replication runs off the connection's read loop
		// (rc.complete), so the producer's next request is appended
		// meanwhile; the response still leaves in request order. The
		// timeout runs from now, as it would inline.
		deadline := time.Now().Add(time.Duration(max(req.TimeoutMillis, 0)) * time.Millisecond)
		rc.complete = func(ctx context.Context) { s.awaitCommitted(ctx, rc, resp, waits, deadline) }
	}

	if req.Acks == 0 {
		if failed {
			return nil, errAcksZeroFailed
		}
		return nil, nil
	}
	return resp, nil
}

// txnProduce is one partition's transactional batches after
// verification: appended with AppendWith and guard (transactional), or
// failed with err before any append.
type txnProduce struct {
	transactional bool
	guard         uint64
	err           error
}

// wholeProduceError fails every partition of a Produce request.
type wholeProduceError struct {
	code int16
	err  error
}

// prepareTxnProduce finds the partitions with transactional batches and,
// with verification on, gets their guards and verifies those that need
// it with the coordinator. It returns their state, absent for partitions
// without transactional batches (and for all when Replicas does not
// implement TxnPartitions: they are appended as any batch), or an error
// for the whole request.
func (s *Server) prepareTxnProduce(ctx context.Context, rc *reqContext, req *kmsg.ProduceRequest, validAcks bool) (map[cluster.TopicPartition]txnProduce, *wholeProduceError) {
	var (
		out           map[cluster.TopicPartition]txnProduce
		producerID    int64
		producerEpoch int16
		found         bool
		needVerify    []cluster.TopicPartition
	)
	tpr, canVerify := s.cfg.Replicas.(TxnPartitions)
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			bp := scanBatches(p.Records)
			if !bp.transactional {
				continue
			}
			if req.TransactionID == nil {
				return nil, &wholeProduceError{kerr.TransactionalIDAuthorizationFailed.Code,
					errors.New("transactional records in a produce request without a transactional id")}
			}
			// Write on the transactional id, asked once (found is set after
			// the first transactional partition passed).
			if !found && !s.authorize(rc, security.OpWrite, security.ResourceTransactionalID, *req.TransactionID) {
				return nil, &wholeProduceError{kerr.TransactionalIDAuthorizationFailed.Code, errTransactionalIDAuthorization}
			}
			if bp.mixed || (found && bp.producerID != producerID) {
				return nil, &wholeProduceError{kerr.InvalidProducerIDMapping.Code,
					errors.New("transactional records contained more than one producer id")}
			}
			found, producerID, producerEpoch = true, bp.producerID, bp.producerEpoch
			if !canVerify {
				continue
			}
			if out == nil {
				out = map[cluster.TopicPartition]txnProduce{}
			}
			tp := cluster.TopicPartition{Topic: t.Topic, Partition: p.Partition}
			tv := txnProduce{transactional: true}
			// The request is refused for these anyway: no guard, no call.
			if !validAcks || cluster.IsInternalTopic(t.Topic) || !s.cfg.TxnVerification ||
				!s.authorizeLog(rc, security.OpWrite, security.ResourceTopic, t.Topic, quiet) {
				out[tp] = tv
				continue
			}
			guard, needed, err := tpr.TxnVerificationGuard(tp, producerID)
			switch {
			case err != nil:
				tv.err = err
			case needed:
				tv.guard = guard
				needVerify = append(needVerify, tp)
			}
			out[tp] = tv
		}
	}
	if len(needVerify) == 0 {
		return out, nil
	}
	errs, err := s.verifyInTxn(ctx, *req.TransactionID, producerID, producerEpoch, needVerify)
	for _, tp := range needVerify {
		e := err
		if e == nil {
			e = errs[tp]
		}
		if e != nil {
			tv := out[tp]
			tv.err = verificationFailure(e)
			out[tp] = tv
		}
	}
	if err != nil {
		requestEvent(s.log.Debug(), rc).Err(err).Str("transactional_id", *req.TransactionID).
			Int64("producer_id", producerID).Msg("transaction verification failed")
	}
	return out, nil
}

// produceWait is an acks=all partition's append to wait for: the
// partition's place in the response and the offset that must commit.
type produceWait struct {
	ti, pi int
	tp     cluster.TopicPartition
	last   int64
	epoch  int32 // the append's leader epoch
}

// awaitCommitted waits, until deadline, for each of waits to commit, and
// sets the error of those that did not on resp.
func (s *Server) awaitCommitted(ctx context.Context, rc *reqContext, resp *kmsg.ProduceResponse, waits []produceWait, deadline time.Time) {
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	for _, w := range waits {
		if err := s.cfg.Replicas.WaitCommitted(wctx, w.tp, w.last, w.epoch); err != nil {
			rp := &resp.Topics[w.ti].Partitions[w.pi]
			// The records are in the leader's log; the error tells the
			// client the outcome of replication, not of the write. Kafka
			// keeps the base offset on a failed wait.
			base := rp.BaseOffset
			setProduceErr(rp, resp.Version, s.produceErrorCode(rc, err), err)
			rp.BaseOffset = base
		}
	}
}

// setProduceErr fails one partition of a Produce response; v8+ carries
// the error's text.
func setProduceErr(rp *kmsg.ProduceResponseTopicPartition, version int16, code int16, err error) {
	rp.ErrorCode = code
	rp.BaseOffset = -1
	if version >= 8 && err != nil {
		msg := err.Error()
		rp.ErrorMessage = &msg
		var rve *partition.RecordValidationError
		if errors.As(err, &rve) {
			rp.ErrorRecords = make([]kmsg.ProduceResponseTopicPartitionErrorRecord, 0, len(rve.Records))
			for _, r := range rve.Records {
				er := kmsg.NewProduceResponseTopicPartitionErrorRecord()
				m := r.Message
				er.RelativeOffset, er.ErrorMessage = r.BatchIndex, &m
				rp.ErrorRecords = append(rp.ErrorRecords, er)
			}
		}
	}
}

// adminTimeout bounds an Admin call by a request's timeout, or by 30 s
// when the request has none.
func adminTimeout(ctx context.Context, timeoutMillis int32) (context.Context, context.CancelFunc) {
	d := 30 * time.Second
	if timeoutMillis > 0 {
		d = time.Duration(timeoutMillis) * time.Millisecond
	}
	return context.WithTimeout(ctx, d)
}

// autoCreateTopic creates topic with num.partitions and
// default.replication.factor.
func (s *Server) autoCreateTopic(ctx context.Context, topic string) error {
	actx, cancel := adminTimeout(ctx, 0)
	defer cancel()
	err := s.cfg.Admin.CreateTopic(actx, CreateTopicRequest{
		Name:              topic,
		NumPartitions:     s.cfg.DefaultPartitions,
		ReplicationFactor: s.cfg.DefaultReplicationFactor,
	})
	if err == nil {
		s.log.Info().Str("topic", topic).Int32("partitions", s.cfg.DefaultPartitions).
			Int16("replication_factor", s.cfg.DefaultReplicationFactor).Msg("auto-created topic")
	}
	return err
}
