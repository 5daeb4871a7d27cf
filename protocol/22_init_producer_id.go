package protocol

// InitProducerId (key 22), versions 0-4 (v5 only adds KIP-890 part 2's
// TRANSACTION_ABORTABLE).
//
//   - ProducerID and ProducerEpoch (v3+, KIP-360) must both be -1 or both
//     be set; one without the other is INVALID_REQUEST, as Kafka checks
//     before anything else.
//   - A null TransactionalID (an idempotent producer) gets a fresh
//     producer id with epoch 0 from ProducerIDs; the KIP-360 fields are
//     otherwise ignored, as Kafka's coordinator "blindly" hands a
//     non-transactional producer a new id.
//   - An empty TransactionalID is INVALID_REQUEST, as in Kafka.
//   - A TransactionalID goes to Transactions.InitProducerID, which
//     allocates or bumps the epoch, fences the previous incarnation and
//     aborts its open transaction (CONCURRENT_TRANSACTIONS while it
//     does). Without Config.Transactions it answers NOT_COORDINATOR, as a
//     Kafka broker that is not the coordinator would; FindCoordinator then
//     answers INVALID_REQUEST for a transactional id, so a client fails
//     instead of retrying forever.
//   - PRODUCER_FENCED answers INVALID_PRODUCER_EPOCH before v4, which
//     older clients do not know, as Kafka does.
//   - ProducerID and ProducerEpoch are -1 on any error.
//   - Authorization: with a transactional id, Write on it
//     (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); without, KIP-679:
//     IdempotentWrite on the cluster or Write on at least one topic
//     (Authorizer.AuthorizeByResourceType), else
//     CLUSTER_AUTHORIZATION_FAILED.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/security"
	"github.com/kafkazk/broker/txn"
)

func (s *Server) handleInitProducerID(ctx context.Context, rc *reqContext, req *kmsg.InitProducerIDRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	switch {
	case req.TransactionalID != nil && !s.authorize(rc, security.OpWrite, security.ResourceTransactionalID, *req.TransactionalID):
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
	case req.TransactionalID == nil && !s.mayWriteIdempotently(rc):
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
	case (req.ProducerID == -1) != (req.ProducerEpoch == -1):
		resp.ErrorCode = kerr.InvalidRequest.Code
	case req.TransactionalID != nil && *req.TransactionalID == "":
		resp.ErrorCode = kerr.InvalidRequest.Code
	case req.TransactionalID != nil && s.cfg.Transactions == nil:
		resp.ErrorCode = kerr.NotCoordinator.Code
	case req.TransactionalID != nil:
		tctx, cancel := txnTimeout(ctx)
		defer cancel()
		id, epoch, err := s.cfg.Transactions.InitProducerID(tctx, txn.InitRequest{
			TransactionalID:      *req.TransactionalID,
			TransactionTimeoutMs: req.TransactionTimeoutMillis,
			ProducerID:           req.ProducerID,
			ProducerEpoch:        req.ProducerEpoch,
		})
		if err != nil {
			resp.ErrorCode = fencedBefore(s.errorCode(rc, err), req.Version, 4)
			break
		}
		resp.ProducerID, resp.ProducerEpoch = id, epoch
	default:
		actx, cancel := adminTimeout(ctx, 0)
		defer cancel()
		id, epoch, err := s.cfg.ProducerIDs.InitProducerID(actx)
		if err != nil {
			resp.ErrorCode = s.errorCode(rc, err)
			break
		}
		resp.ProducerID, resp.ProducerEpoch = id, epoch
	}
	return resp, nil
}
