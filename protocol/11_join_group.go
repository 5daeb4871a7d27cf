package protocol

// JoinGroup (key 11), versions 0-9.
//
//   - Passed to Groups.JoinGroup, which parks only this connection until
//     the rebalance completes (bounded by the group's rebalance timeout).
//   - v0 has no rebalance timeout: the session timeout stands in for it,
//     as in Kafka. v4+ sets RequireKnownMemberID: a dynamic member's first
//     join answers MEMBER_ID_REQUIRED with its member id (KIP-394). v5+
//     carries group.instance.id (static membership).
//   - ClientHost is "/" + the peer's IP, as Kafka writes it.
//   - The answer: generation, protocol name (null on errors from v7),
//     protocol type (v7+), leader, member id, and the members with their
//     metadata for the leader only. Errors answer generation -1 and the
//     member id (the new one for MEMBER_ID_REQUIRED). SkipAssignment (v9)
//     is always false.
//   - Authorization: Read on the group, else GROUP_AUTHORIZATION_FAILED.

import (
	"context"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/group"
	"github.com/kafkazk/broker/security"
)

func (s *Server) handleJoinGroup(ctx context.Context, rc *reqContext, req *kmsg.JoinGroupRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	rebalance := req.RebalanceTimeoutMillis
	if req.Version == 0 {
		rebalance = req.SessionTimeoutMillis
	}
	jr := group.JoinRequest{
		Group: req.Group, MemberID: req.MemberID, InstanceID: req.InstanceID,
		ClientID: rc.clientID, ClientHost: clientHost(rc.remoteAddr),
		ProtocolType:         req.ProtocolType,
		SessionTimeout:       time.Duration(req.SessionTimeoutMillis) * time.Millisecond,
		RebalanceTimeout:     time.Duration(rebalance) * time.Millisecond,
		RequireKnownMemberID: req.Version >= 4,
	}
	for _, p := range req.Protocols {
		jr.Protocols = append(jr.Protocols, group.Protocol{Name: p.Name, Metadata: p.Metadata})
	}
	var (
		res group.JoinResult
		err error
	)
	if s.authorize(rc, security.OpRead, security.ResourceGroup, req.Group) {
		res, err = s.cfg.Groups.JoinGroup(ctx, jr)
	} else {
		err = kerr.GroupAuthorizationFailed
	}
	resp.ErrorCode = s.errorCode(rc, err)
	resp.MemberID = res.MemberID
	resp.Generation = res.Generation
	if err != nil {
		resp.Generation = -1
		if req.Version < 7 {
			resp.Protocol = kmsg.StringPtr("")
		}
		resp.Members = []kmsg.JoinGroupResponseMember{}
		return resp, nil
	}
	resp.LeaderID = res.Leader
	resp.Protocol = kmsg.StringPtr(res.Protocol)
	resp.ProtocolType = kmsg.StringPtr(res.ProtocolType)
	resp.Members = make([]kmsg.JoinGroupResponseMember, 0, len(res.Members))
	for _, m := range res.Members {
		rm := kmsg.NewJoinGroupResponseMember()
		rm.MemberID, rm.InstanceID, rm.ProtocolMetadata = m.MemberID, m.InstanceID, m.Metadata
		if rm.ProtocolMetadata == nil {
			rm.ProtocolMetadata = []byte{}
		}
		resp.Members = append(resp.Members, rm)
	}
	return resp, nil
}

// clientHost is how Kafka shows a member's host: "/" and the peer's IP.
func clientHost(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	return "/" + host
}
