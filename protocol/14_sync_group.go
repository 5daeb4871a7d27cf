package protocol

// SyncGroup (key 14), versions 0-5.
//
//   - Passed to Groups.SyncGroup: the leader's assignments are written to
//     __consumer_offsets (acks=all) and then handed to every member;
//     followers park only their own connection until then. A rebalance
//     starting meanwhile answers REBALANCE_IN_PROGRESS.
//   - v3+ carries group.instance.id; v5+ carries protocol type and name,
//     checked against the group's (INCONSISTENT_GROUP_PROTOCOL), and
//     answers them (null on errors).
//   - Authorization: Read on the group, else GROUP_AUTHORIZATION_FAILED.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/group"
	"github.com/kafkazk/broker/security"
)

func (s *Server) handleSyncGroup(ctx context.Context, rc *reqContext, req *kmsg.SyncGroupRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	sr := group.SyncRequest{
		Group: req.Group, Generation: req.Generation, MemberID: req.MemberID, InstanceID: req.InstanceID,
	}
	if req.Version >= 5 {
		sr.ProtocolType, sr.Protocol = req.ProtocolType, req.Protocol
	}
	if len(req.GroupAssignment) > 0 {
		sr.Assignments = make(map[string][]byte, len(req.GroupAssignment))
		for _, a := range req.GroupAssignment {
			sr.Assignments[a.MemberID] = a.MemberAssignment
		}
	}
	var (
		res group.SyncResult
		err error
	)
	if s.authorize(rc, security.OpRead, security.ResourceGroup, req.Group) {
		res, err = s.cfg.Groups.SyncGroup(ctx, sr)
	} else {
		err = kerr.GroupAuthorizationFailed
	}
	resp.ErrorCode = s.errorCode(rc, err)
	resp.MemberAssignment = []byte{}
	if err != nil {
		return resp, nil
	}
	if res.Assignment != nil {
		resp.MemberAssignment = res.Assignment
	}
	resp.ProtocolType = kmsg.StringPtr(res.ProtocolType)
	resp.Protocol = kmsg.StringPtr(res.Protocol)
	return resp, nil
}
