package protocol

// AddOffsetsToTxn (key 25), versions 0-3 (Config.Transactions; v4 only
// adds KIP-890 part 2's TRANSACTION_ABORTABLE).
//
//   - Transactions.AddOffsets adds the group's partition of
//     __consumer_offsets (group.PartitionFor over
//     offsets.topic.num.partitions) to the producer's transaction, so that
//     the coordinator writes its marker there; the offsets themselves come
//     with TxnOffsetCommit to the group coordinator.
//   - An empty transactional id answers INVALID_REQUEST, as Kafka's
//     coordinator does. PRODUCER_FENCED answers INVALID_PRODUCER_EPOCH
//     before v2.
//   - Authorization: Write on the transactional id
//     (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then Read on the group
//     (GROUP_AUTHORIZATION_FAILED).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/security"
)

func (s *Server) handleAddOffsetsToTxn(ctx context.Context, rc *reqContext, req *kmsg.AddOffsetsToTxnRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	if !s.authorize(rc, security.OpWrite, security.ResourceTransactionalID, req.TransactionalID) {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp, nil
	}
	if !s.authorize(rc, security.OpRead, security.ResourceGroup, req.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	if req.TransactionalID == "" {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil
	}
	tctx, cancel := txnTimeout(ctx)
	defer cancel()
	err := s.cfg.Transactions.AddOffsets(tctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group)
	resp.ErrorCode = fencedBefore(s.errorCode(rc, err), req.Version, 2)
	return resp, nil
}
