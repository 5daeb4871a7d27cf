package protocol

// ListGroups (key 16), versions 0-4.
//
//   - The groups this broker coordinates (Groups.ListGroups), with
//     COORDINATOR_LOAD_IN_PROGRESS while one of its offsets partitions is
//     still loading (and the groups loaded so far), as Kafka answers.
//   - v4+ filters by state (StatesFilter, case-insensitive, as Kafka) and
//     answers each group's state.

import (
	"context"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleListGroups(_ context.Context, rc *reqContext, req *kmsg.ListGroupsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	groups, err := s.cfg.Groups.ListGroups()
	resp.ErrorCode = s.errorCode(rc, err)
	for _, g := range groups {
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
