package protocol

// InitProducerId (key 22), versions 0-4 (v5 belongs to KIP-890
// transactions).
//
//   - Idempotent producers only: a null TransactionalID gets a fresh
//     producer id with epoch 0 from ProducerIDs. The KIP-360 fields
//     (ProducerID/ProducerEpoch, v3+) are ignored: a producer that asks to
//     bump its epoch gets a new id, which Kafka also does for
//     non-transactional producers.
//   - A TransactionalID answers NOT_COORDINATOR (16): that is what a Kafka
//     broker answers for a transactional id whose coordinator it is not,
//     and here no broker coordinates transactions. A client following the
//     protocol then looks the coordinator up with FindCoordinator, which
//     answers INVALID_REQUEST for a transactional id (10_find_coordinator.go),
//     so it fails instead of retrying forever (as COORDINATOR_NOT_AVAILABLE
//     would make it). An empty, non-null id is INVALID_REQUEST, as in Kafka.
//   - A ProducerIDs failure maps through the error table; ProducerID is -1
//     on any error.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleInitProducerID(ctx context.Context, rc *reqContext, req *kmsg.InitProducerIDRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	switch {
	case req.TransactionalID != nil && *req.TransactionalID == "":
		resp.ErrorCode = kerr.InvalidRequest.Code
	case req.TransactionalID != nil:
		resp.ErrorCode = kerr.NotCoordinator.Code
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
