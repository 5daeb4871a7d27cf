package protocol

// ControlledShutdown (key 7), versions 0-3, served only with
// Config.ControlPlane.
//
// A broker about to stop asks the controller to move leadership off it
// (reference §2.5). Every broker serves the key; only the controller
// answers it with success, the others with NOT_CONTROLLER
// (ControlPlane.ControlledShutdown returns cluster.ErrNotController).
//
//   - v0 is sent with a request header that has no client id (parseRequest
//     reads it so, as Kafka does); v1 is the same body with a normal
//     header; v2 adds BrokerEpoch (KIP-380), passed on as -1 before that;
//     v3 is flexible.
//   - The controller's checks are ControlPlane's: NOT_CONTROLLER,
//     BROKER_NOT_AVAILABLE for an unknown broker id, STALE_BROKER_EPOCH for
//     an epoch older than the registered one.
//   - PartitionsRemaining lists what the broker still leads; it is empty on
//     error.
//   - Authorization: ClusterAction on the cluster, else
//     CLUSTER_AUTHORIZATION_FAILED before the control plane is asked.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/security"
)

func (s *Server) handleControlledShutdown(ctx context.Context, rc *reqContext, req *kmsg.ControlledShutdownRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ControlledShutdownResponse)
	log := s.log.With().Str("remote_addr", rc.remoteAddr).Int32("correlation_id", rc.correlationID).
		Int32("shutdown_broker_id", req.BrokerID).Logger()
	brokerEpoch := int64(-1)
	if req.Version >= 2 {
		brokerEpoch = req.BrokerEpoch
	}
	if !s.authorizeCluster(rc, security.OpClusterAction) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	log.Info().Int64("broker_epoch", brokerEpoch).Msg("controlled shutdown requested")
	remaining, err := s.cfg.ControlPlane.ControlledShutdown(ctx, req.BrokerID, brokerEpoch)
	if err != nil {
		resp.ErrorCode = errorCode(&log, err)
		return resp, nil
	}
	resp.PartitionsRemaining = make([]kmsg.ControlledShutdownResponsePartitionsRemaining, 0, len(remaining))
	for _, tp := range remaining {
		p := kmsg.NewControlledShutdownResponsePartitionsRemaining()
		p.Topic, p.Partition = tp.Topic, tp.Partition
		resp.PartitionsRemaining = append(resp.PartitionsRemaining, p)
	}
	return resp, nil
}
