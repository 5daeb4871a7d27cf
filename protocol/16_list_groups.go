package protocol

// ListGroups (key 16), versions 0-4.
//
//   - The groups this broker coordinates (Groups.ListGroups), with
//     COORDINATOR_LOAD_IN_PROGRESS while one of its offsets partitions is
//     still loading (and the groups loaded so far), as Kafka answers.
//   - v4+ filters by state (StatesFilter, case-insensitive, as Kafka) and
//     answers each group's state.
//   - Authorization: Describe on the cluster lists every group, else only
//     the groups the principal may Describe (denials not logged, as
//     Kafka's).

import (
	"context"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/security"
)

func (s *Server) handleListGroups(_ context.Context, rc *reqContext, req *kmsg.ListGroupsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	groups, err := s.cfg.Groups.ListGroups()
	resp.ErrorCode = s.errorCode(rc, err)
	// Describe on the cluster lists every group; otherwise only those the
	// principal may describe. Kafka logs neither denial.
	all := s.authorizeLog(rc, security.OpDescribe, security.ResourceCluster, security.ClusterResourceName, quiet)
	describable := s.filterAuthorized(rc, security.OpDescribe, security.ResourceGroup, quiet)
	for _, g := range groups {
		if !all && !describable(g.Group) {
			continue
		}
		if req.Version >= 4 && len(req.StatesFilter) > 0 {
			match := false
			for _, st := range req.StatesFilter {
				match = match || strings.EqualFold(st, g.State)
			}
			if !match {
				continue
			}
		}
		rg := kmsg.NewListGroupsResponseGroup()
		rg.Group, rg.ProtocolType, rg.GroupState = g.Group, g.ProtocolType, g.State
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}
