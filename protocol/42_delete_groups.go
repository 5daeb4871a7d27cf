package protocol

// DeleteGroups (key 42), versions 0-2.
//
//   - Each group through Groups.DeleteGroups: only an Empty group is
//     deleted (its offsets and metadata get tombstones in
//     __consumer_offsets); one with members answers NON_EMPTY_GROUP, an
//     unknown one GROUP_ID_NOT_FOUND, one coordinated elsewhere
//     NOT_COORDINATOR.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/security"
)

func (s *Server) handleDeleteGroups(ctx context.Context, rc *reqContext, req *kmsg.DeleteGroupsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	deletable := s.filterAuthorized(rc, security.OpDelete, security.ResourceGroup, logDenied)
	var ids []string
	for _, id := range req.Groups {
		if deletable(id) {
			ids = append(ids, id)
		}
	}
	var errs map[string]error
	if len(ids) > 0 {
		errs = s.cfg.Groups.DeleteGroups(ctx, ids)
	}
	for _, id := range req.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group = id
		if !deletable(id) {
			rg.ErrorCode = kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		rg.ErrorCode = s.errorCode(rc, errs[id])
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}
