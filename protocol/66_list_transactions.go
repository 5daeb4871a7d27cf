package protocol

// ListTransactions (key 66), version 0 (Config.Transactions; v1 adds
// KIP-994's duration filter, v2 a transactional id pattern).
//
//   - Lists the transactional ids this broker coordinates
//     (Transactions.ListTransactions), filtered by StateFilters and
//     ProducerIDFilters (empty: any), with each id's producer id and state.
//   - A state filter that is not one of Kafka's state names is listed in
//     UnknownStateFilters and matches nothing, as in Kafka: filters that
//     are all unknown list nothing.
//   - A coordinator still loading a partition answers
//     COORDINATOR_LOAD_IN_PROGRESS with no states.
//   - Authorization: only the transactional ids the principal may Describe
//     are listed.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/security"
)

// txnStateNames are Kafka's TransactionState names.
var txnStateNames = map[string]bool{
	"Empty": true, "Ongoing": true, "PrepareCommit": true, "PrepareAbort": true,
	"CompleteCommit": true, "CompleteAbort": true, "Dead": true, "PrepareEpochFence": true,
}

func (s *Server) handleListTransactions(_ context.Context, rc *reqContext, req *kmsg.ListTransactionsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	resp.UnknownStateFilters = []string{}
	for _, st := range req.StateFilters {
		if !txnStateNames[st] {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, st)
		}
	}
	// Unknown names go to the coordinator too: a state is never one of
	// them, so they match nothing, and filters all unknown match no id.
	listed, err := s.cfg.Transactions.ListTransactions(req.StateFilters, req.ProducerIDFilters)
	if err != nil {
		resp.ErrorCode = s.errorCode(rc, err)
		return resp, nil
	}
	resp.TransactionStates = make([]kmsg.ListTransactionsResponseTransactionState, 0, len(listed))
	describable := s.filterAuthorized(rc, security.OpDescribe, security.ResourceTransactionalID, logDenied)
	for _, l := range listed {
		if !describable(l.TransactionalID) {
			continue
		}
		ts := kmsg.NewListTransactionsResponseTransactionState()
		ts.TransactionalID, ts.ProducerID, ts.TransactionState = l.TransactionalID, l.ProducerID, l.State
		resp.TransactionStates = append(resp.TransactionStates, ts)
	}
	return resp, nil
}
