package protocol

// LeaveGroup (key 13), versions 0-5.
//
//   - v0-2 name one member (MemberID); its result is the top-level error.
//   - v3+ batch members by member id and/or group.instance.id (KIP-345),
//     each answered with its own error (UNKNOWN_MEMBER_ID,
//     FENCED_INSTANCE_ID); the top-level error is for the group
//     (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, INVALID_GROUP_ID).
//     The reason (v5) is only logged.
//   - Authorization: Read on the group, else GROUP_AUTHORIZATION_FAILED (top
//     level).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/group"
	"github.com/kafkazk/broker/security"
)

func (s *Server) handleLeaveGroup(_ context.Context, rc *reqContext, req *kmsg.LeaveGroupRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	if !s.authorize(rc, security.OpRead, security.ResourceGroup, req.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	members := []group.LeaveMember{{MemberID: req.MemberID}}
	if req.Version >= 3 {
		members = members[:0]
		for _, m := range req.Members {
			members = append(members, group.LeaveMember{MemberID: m.MemberID, InstanceID: m.InstanceID})
		}
	}
	errs, err := s.cfg.Groups.LeaveGroup(req.Group, members)
	if err != nil {
		resp.ErrorCode = s.errorCode(rc, err)
		return resp, nil
	}
	if req.Version < 3 {
		resp.ErrorCode = s.errorCode(rc, errs[0])
		return resp, nil
	}
	resp.Members = make([]kmsg.LeaveGroupResponseMember, 0, len(members))
	for i, m := range req.Members {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID = m.MemberID, m.InstanceID
		rm.ErrorCode = s.errorCode(rc, errs[i])
		resp.Members = append(resp.Members, rm)
	}
	return resp, nil
}
