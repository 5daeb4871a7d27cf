package protocol

// DescribeCluster (key 60), versions 0-1 (both flexible).
//
//   - The live brokers with their endpoint for the listener the request
//     arrived on (the first endpoint if they have none there; brokers
//     without endpoints are left out), as in Metadata; the cluster id and
//     the controller id (-1 when none is known).
//   - v1 EndpointType: 1 (brokers) is answered; 2 (KRaft controllers) is
//     UNSUPPORTED_ENDPOINT_TYPE, since this cluster has no KRaft
//     controllers. The response echoes the type.
//   - ClusterAuthorizedOperations stays at Kafka's "not provided" value
//     (INT32_MIN): this broker has no authorizer.
//   - Authorization: nothing to see the cluster;
//     IncludeClusterAuthorizedOperations answers the cluster's authorized
//     operations, 0 without Describe on it.

import (
	"context"
	"errors"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/security"
)

func (s *Server) handleDescribeCluster(_ context.Context, rc *reqContext, req *kmsg.DescribeClusterRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.ClusterAuthorizedOperations = math.MinInt32
	resp.EndpointType = 1
	if req.Version >= 1 {
		resp.EndpointType = req.EndpointType
		if req.EndpointType != 1 {
			resp.ErrorCode = kerr.UnsupportedEndpointType.Code
			msg := errors.New("only broker endpoints (type 1) are served: this cluster has no KRaft controllers").Error()
			resp.ErrorMessage = &msg
			return resp, nil
		}
	}
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = 0
		if s.authorizeCluster(rc, security.OpDescribe) {
			resp.ClusterAuthorizedOperations = s.authorizedOperations(rc, security.ResourceCluster, security.ClusterResourceName)
		}
	}
	resp.ClusterID = s.cfg.Metadata.ClusterID()
	resp.ControllerID = s.cfg.Metadata.ControllerID()
	for _, b := range s.cfg.Metadata.Brokers() {
		ep, ok := clientEndpoint(b, rc.listener)
		if !ok {
			continue
		}
		rb := kmsg.NewDescribeClusterResponseBroker()
		rb.NodeID, rb.Host, rb.Port, rb.Rack = b.ID, ep.Host, ep.Port, b.Rack
		resp.Brokers = append(resp.Brokers, rb)
	}
	return resp, nil
}
