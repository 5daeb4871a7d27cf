package protocol

// AddPartitionsToTxn (key 24), versions 0-4 (Config.Transactions).
//
//   - v0-3 come from producers: one transaction (TransactionalID,
//     ProducerID, ProducerEpoch, Topics) whose partitions go to
//     Transactions.AddPartitions; the answer is per partition.
//   - v4 is the brokers' batched form (KIP-890 part 1): Transactions, each
//     answered in its own result; one with VerifyOnly asks
//     Transactions.VerifyPartitions instead (nothing is added), which is
//     how a partition leader checks a transactional produce
//     (BrokerClient.VerifyPartitionsInTxn). The top-level ErrorCode is 0.
//   - An empty transactional id answers INVALID_REQUEST on every
//     partition of its transaction, as Kafka's coordinator does.
//   - A partition the metadata does not know answers
//     UNKNOWN_TOPIC_OR_PARTITION, and then the others of its transaction
//     answer OPERATION_NOT_ATTEMPTED (55) and nothing is added: a failed
//     partition fails the transaction's request, as in Kafka.
//   - A coordinator error without per-partition errors goes on every
//     partition. PRODUCER_FENCED answers INVALID_PRODUCER_EPOCH before v2.
//   - A partition listed twice is added once and answered once.
//   - Authorization: v4+ (from brokers) needs ClusterAction (top-level
//     CLUSTER_AUTHORIZATION_FAILED); v0-3 Write on the transactional id
//     (every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and on each
//     topic (TOPIC_AUTHORIZATION_FAILED, the rest OPERATION_NOT_ATTEMPTED);
//     an internal topic is never authorized there, as in Kafka.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/security"
)

func (s *Server) handleAddPartitionsToTxn(ctx context.Context, rc *reqContext, req *kmsg.AddPartitionsToTxnRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if req.Version >= 4 && !s.authorizeCluster(rc, security.OpClusterAction) {
		// v4+ comes from brokers only (produce verification).
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	if req.Version < 4 {
		topics := make([]txnTopicPartitions, 0, len(req.Topics))
		for _, t := range req.Topics {
			topics = append(topics, txnTopicPartitions{t.Topic, t.Partitions})
		}
		codes := s.addPartitionsToTxn(ctx, rc, req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch, false, topics)
		for _, t := range codes {
			rt := kmsg.NewAddPartitionsToTxnResponseTopic()
			rt.Topic = t.topic
			for _, p := range t.partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.partition, p.code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
	for _, tr := range req.Transactions {
		topics := make([]txnTopicPartitions, 0, len(tr.Topics))
		for _, t := range tr.Topics {
			topics = append(topics, txnTopicPartitions{t.Topic, t.Partitions})
		}
		codes := s.addPartitionsToTxn(ctx, rc, req.Version, tr.TransactionalID, tr.ProducerID, tr.ProducerEpoch, tr.VerifyOnly, topics)
		rtr := kmsg.NewAddPartitionsToTxnResponseTransaction()
		rtr.TransactionalID = tr.TransactionalID
		for _, t := range codes {
			rt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			rt.Topic = t.topic
			for _, p := range t.partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
				rp.Partition, rp.ErrorCode = p.partition, p.code
				rt.Partitions = append(rt.Partitions, rp)
			}
			rtr.Topics = append(rtr.Topics, rt)
		}
		resp.Transactions = append(resp.Transactions, rtr)
	}
	return resp, nil
}

// txnTopicPartitions is one topic of a request listing partitions.
type txnTopicPartitions struct {
	topic      string
	partitions []int32
}

// txnTopicCodes is one topic of the answer: each partition once, in
// request order.
type txnTopicCodes struct {
	topic      string
	partitions []txnPartitionCode
}

type txnPartitionCode struct {
	partition int32
	code      int16
}

// addPartitionsToTxn adds (or, verifyOnly, verifies) one transaction's
// partitions and returns each partition's code.
func (s *Server) addPartitionsToTxn(ctx context.Context, rc *reqContext, version int16, transactionalID string, producerID int64, producerEpoch int16,
	verifyOnly bool, topics []txnTopicPartitions) []txnTopicCodes {
	out, tps := dedupeTopicPartitions(topics)
	set := func(code func(tp cluster.TopicPartition) int16) []txnTopicCodes {
		for i := range out {
			for j := range out[i].partitions {
				out[i].partitions[j].code = code(cluster.TopicPartition{Topic: out[i].topic, Partition: out[i].partitions[j].partition})
			}
		}
		return out
	}
	if transactionalID == "" {
		return set(func(cluster.TopicPartition) int16 { return kerr.InvalidRequest.Code })
	}
	// A client's request (v0-3) needs Write on the transactional id and
	// on each topic; an internal topic is never authorized, as Kafka
	// leaves it out of the topics it authorizes.
	if version < 4 && !s.authorize(rc, security.OpWrite, security.ResourceTransactionalID, transactionalID) {
		return set(func(cluster.TopicPartition) int16 { return kerr.TransactionalIDAuthorizationFailed.Code })
	}
	writable := s.filterAuthorized(rc, security.OpWrite, security.ResourceTopic, logDenied)
	unauthorized := map[cluster.TopicPartition]bool{}
	unknown := map[cluster.TopicPartition]bool{}
	for _, tp := range tps {
		if version < 4 && (cluster.IsInternalTopic(tp.Topic) || !writable(tp.Topic)) {
			unauthorized[tp] = true
		} else if _, known := s.hasPartition(tp); !known {
			unknown[tp] = true
		}
	}
	if len(unknown) > 0 || len(unauthorized) > 0 {
		return set(func(tp cluster.TopicPartition) int16 {
			if unauthorized[tp] {
				return kerr.TopicAuthorizationFailed.Code
			}
			if unknown[tp] {
				return kerr.UnknownTopicOrPartition.Code
			}
			return kerr.OperationNotAttempted.Code
		})
	}
	if len(tps) == 0 {
		return out
	}
	tctx, cancel := txnTimeout(ctx)
	defer cancel()
	var (
		errs map[cluster.TopicPartition]error
		err  error
	)
	if verifyOnly {
		errs, err = s.cfg.Transactions.VerifyPartitions(tctx, transactionalID, producerID, producerEpoch, tps)
	} else {
		errs, err = s.cfg.Transactions.AddPartitions(tctx, transactionalID, producerID, producerEpoch, tps)
	}
	return set(func(tp cluster.TopicPartition) int16 {
		e := err
		if e == nil {
			e = errs[tp]
		}
		return fencedBefore(s.errorCode(rc, e), version, 2)
	})
}

// dedupeTopicPartitions lists each partition of topics once, in request
// order, both as the answer's skeleton and as a flat list.
func dedupeTopicPartitions(topics []txnTopicPartitions) ([]txnTopicCodes, []cluster.TopicPartition) {
	var (
		out   []txnTopicCodes
		tps   []cluster.TopicPartition
		seen  = map[cluster.TopicPartition]bool{}
		index = map[string]int{}
	)
	for _, t := range topics {
		i, ok := index[t.topic]
		if !ok {
			i = len(out)
			index[t.topic] = i
			out = append(out, txnTopicCodes{topic: t.topic})
		}
		for _, p := range t.partitions {
			tp := cluster.TopicPartition{Topic: t.topic, Partition: p}
			if seen[tp] {
				continue
			}
			seen[tp] = true
			tps = append(tps, tp)
			out[i].partitions = append(out[i].partitions, txnPartitionCode{partition: p})
		}
	}
	return out, tps
}
