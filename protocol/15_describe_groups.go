package protocol

// DescribeGroups (key 15), versions 0-5.
//
//   - Each group from Groups.DescribeGroup: state, protocol type, and
//     members with client id and host; protocol, member metadata and
//     assignments only when Stable, as Kafka. An unknown group is "Dead"
//     with no error; a group this broker does not coordinate answers
//     NOT_COORDINATOR. v4+ adds group.instance.id; authorized operations
//     (v3+) stay at Kafka's "not requested" value.
//   - Authorization: Describe on each group (GROUP_AUTHORIZATION_FAILED);
//     v3+ IncludeAuthorizedOperations fills the group's authorized
//     operations.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/security"
)

func (s *Server) handleDescribeGroups(_ context.Context, rc *reqContext, req *kmsg.DescribeGroupsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, id := range req.Groups {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group = id
		if !s.authorize(rc, security.OpDescribe, security.ResourceGroup, id) {
			rg.ErrorCode = kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		d, err := s.cfg.Groups.DescribeGroup(id)
		rg.ErrorCode = s.errorCode(rc, err)
		if err == nil && req.Version >= 3 && req.IncludeAuthorizedOperations {
			rg.AuthorizedOperations = s.authorizedOperations(rc, security.ResourceGroup, id)
		}
		if err == nil {
			rg.State, rg.ProtocolType, rg.Protocol = d.State, d.ProtocolType, d.Protocol
			for _, m := range d.Members {
				rm := kmsg.NewDescribeGroupsResponseGroupMember()
				rm.MemberID, rm.InstanceID, rm.ClientID, rm.ClientHost = m.MemberID, m.InstanceID, m.ClientID, m.ClientHost
				rm.ProtocolMetadata, rm.MemberAssignment = m.Metadata, m.Assignment
				rg.Members = append(rg.Members, rm)
			}
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}
