package protocol

// DescribeTransactions (key 65), version 0, the whole range
// (Config.Transactions).
//
//   - Each transactional id asked for is answered from
//     Transactions.DescribeTransactions: its state (Kafka's names),
//     timeout, start timestamp (-1 for none), producer id and epoch, and
//     its partitions grouped by topic (sorted). An id this broker does not
//     coordinate answers NOT_COORDINATOR, one still loading
//     COORDINATOR_LOAD_IN_PROGRESS, an unknown one
//     TRANSACTIONAL_ID_NOT_FOUND, as Kafka's coordinator.
//   - An id listed twice is answered twice, as Kafka does.
//   - Authorization: Describe on each transactional id
//     (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); only partitions of topics the
//     principal may Describe are listed.

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/security"
	"github.com/kafkazk/broker/txn"
)

func (s *Server) handleDescribeTransactions(_ context.Context, rc *reqContext, req *kmsg.DescribeTransactionsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	byID := map[string]txn.Description{}
	describable := s.filterAuthorized(rc, security.OpDescribe, security.ResourceTransactionalID, logDenied)
	var ids []string
	for _, id := range req.TransactionalIDs {
		if describable(id) {
			ids = append(ids, id)
		}
	}
	if len(ids) > 0 {
		for _, d := range s.cfg.Transactions.DescribeTransactions(ids) {
			byID[d.TransactionalID] = d
		}
	}
	resp.TransactionStates = make([]kmsg.DescribeTransactionsResponseTransactionState, 0, len(req.TransactionalIDs))
	for _, id := range req.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID = id
		d, ok := byID[id]
		switch {
		case !describable(id):
			st.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		case !ok:
			st.ErrorCode = kerr.TransactionalIDNotFound.Code
		case d.Err != nil:
			st.ErrorCode = s.errorCode(rc, d.Err)
		default:
			st.State, st.TimeoutMillis, st.StartTimestamp = d.State, d.TimeoutMs, d.StartTimestamp
			st.ProducerID, st.ProducerEpoch = d.ProducerID, d.ProducerEpoch
			// Only the partitions of topics the principal may describe.
			topicOK := s.filterAuthorized(rc, security.OpDescribe, security.ResourceTopic, logDenied)
			var tps []cluster.TopicPartition
			for _, tp := range d.Partitions {
				if topicOK(tp.Topic) {
					tps = append(tps, tp)
				}
			}
			st.Topics = describedTopics(tps)
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp, nil
}

// describedTopics groups tps by topic, both sorted.
func describedTopics(tps []cluster.TopicPartition) []kmsg.DescribeTransactionsResponseTransactionStateTopic {
	sorted := append([]cluster.TopicPartition(nil), tps...)
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].Topic != sorted[j].Topic {
			return sorted[i].Topic < sorted[j].Topic
		}
		return sorted[i].Partition < sorted[j].Partition
	})
	out := []kmsg.DescribeTransactionsResponseTransactionStateTopic{}
	for _, tp := range sorted {
		if n := len(out); n == 0 || out[n-1].Topic != tp.Topic {
			t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
			t.Topic = tp.Topic
			out = append(out, t)
		}
		last := &out[len(out)-1]
		last.Partitions = append(last.Partitions, tp.Partition)
	}
	return out
}
