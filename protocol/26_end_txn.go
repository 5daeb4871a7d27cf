package protocol

// EndTxn (key 26), versions 0-3 (Config.Transactions; v4 only adds
// KIP-890 part 2's TRANSACTION_ABORTABLE, v5 its epoch bump per
// transaction).
//
//   - Transactions.EndTxn persists PrepareCommit or PrepareAbort and
//     answers once that is replicated; the markers are written to the
//     transaction's partitions after the answer, and a following
//     InitProducerId, AddPartitionsToTxn or EndTxn meanwhile answers
//     CONCURRENT_TRANSACTIONS, which producers retry.
//   - An empty transactional id answers INVALID_REQUEST, as Kafka's
//     coordinator does. PRODUCER_FENCED answers INVALID_PRODUCER_EPOCH
//     before v2.
//   - Authorization: Write on the transactional id, else
//     TRANSACTIONAL_ID_AUTHORIZATION_FAILED.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/security"
)

func (s *Server) handleEndTxn(ctx context.Context, rc *reqContext, req *kmsg.EndTxnRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	if !s.authorize(rc, security.OpWrite, security.ResourceTransactionalID, req.TransactionalID) {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp, nil
	}
	if req.TransactionalID == "" {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil
	}
	tctx, cancel := txnTimeout(ctx)
	defer cancel()
	err := s.cfg.Transactions.EndTxn(tctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit)
	resp.ErrorCode = fencedBefore(s.errorCode(rc, err), req.Version, 2)
	return resp, nil
}
