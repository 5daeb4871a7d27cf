package protocol

// Heartbeat (key 12), versions 0-4.
//
//   - Keeps a member's session alive (Groups.Heartbeat). During a
//     rebalance it answers REBALANCE_IN_PROGRESS, so the member rejoins;
//     a stale generation ILLEGAL_GENERATION; an unknown member
//     UNKNOWN_MEMBER_ID; a replaced static member FENCED_INSTANCE_ID (v3+
//     carries group.instance.id).
//   - Authorization: Read on the group, else GROUP_AUTHORIZATION_FAILED.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/group"
	"github.com/kafkazk/broker/security"
)

func (s *Server) handleHeartbeat(_ context.Context, rc *reqContext, req *kmsg.HeartbeatRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	if !s.authorize(rc, security.OpRead, security.ResourceGroup, req.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	err := s.cfg.Groups.Heartbeat(group.HeartbeatRequest{
		Group: req.Group, Generation: req.Generation, MemberID: req.MemberID, InstanceID: req.InstanceID,
	})
	resp.ErrorCode = s.errorCode(rc, err)
	return resp, nil
}
