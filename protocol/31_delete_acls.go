package protocol

// DeleteAcls (key 31), versions 0-3, as Kafka's AclApis.handleDeleteAcls
// over AclAuthorizer.deleteAcls.
//
//   - Alter on the cluster, else every filter answers
//     CLUSTER_AUTHORIZATION_FAILED.
//   - Without Config.Authorizer, or without Config.ACLAdmin, every filter
//     answers SECURITY_DISABLED.
//   - A filter (v0: LITERAL patterns) with an UNKNOWN element answers
//     INVALID_REQUEST (security.ValidateFilter); the others go to
//     ACLAdmin.DeleteACLs in one call, which deletes what each matches
//     (including resources this broker's cache has not seen yet) and
//     answers per filter the deleted bindings or an error.
//   - Results are in request order, one per filter, each deleted binding
//     with error code 0. Deleted bindings are logged at Info.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/security"
)

func (s *Server) handleDeleteACLs(ctx context.Context, rc *reqContext, req *kmsg.DeleteACLsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(req.Filters))
	for i := range resp.Results {
		resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
		resp.Results[i].MatchingACLs = []kmsg.DeleteACLsResponseResultMatchingACL{}
	}
	all := func(code int16, msg *string) (kmsg.Response, error) {
		for i := range resp.Results {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, msg
		}
		return resp, nil
	}
	if code, msg, refused := s.aclWriteRefusal(rc); refused {
		return all(code, msg)
	}
	var (
		valid []security.ACLBindingFilter
		at    []int
	)
	for i, f := range req.Filters {
		bf := aclFilter(req.Version, f.ResourceType, f.ResourceName, f.ResourcePatternType,
			f.Principal, f.Host, f.Operation, f.PermissionType)
		if err := security.ValidateFilter(bf); err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.InvalidRequest.Code, errorMessage(err)
			continue
		}
		valid = append(valid, bf)
		at = append(at, i)
	}
	if len(valid) == 0 {
		return resp, nil
	}
	actx, cancel := adminTimeout(ctx, 0)
	defer cancel()
	deleted, errs := s.cfg.ACLAdmin.DeleteACLs(actx, valid)
	for j := range valid {
		r := &resp.Results[at[j]]
		if j < len(errs) && errs[j] != nil {
			r.ErrorCode, r.ErrorMessage = s.errorCode(rc, errs[j]), errorMessage(errs[j])
			continue
		}
		if j >= len(deleted) {
			continue
		}
		for _, b := range deleted[j] {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName = kmsg.ACLResourceType(b.Pattern.Type), b.Pattern.Name
			m.ResourcePatternType = kmsg.ACLResourcePatternType(b.Pattern.PatternType)
			m.Principal, m.Host = b.Entry.Principal, b.Entry.Host
			m.Operation, m.PermissionType = kmsg.ACLOperation(b.Entry.Operation), kmsg.ACLPermissionType(b.Entry.Permission)
			r.MatchingACLs = append(r.MatchingACLs, m)
			requestEvent(s.log.Info(), rc).Str("principal", rc.principal.String()).Str("resource", b.Pattern.String()).
				Str("acl_principal", b.Entry.Principal).Str("acl_host", b.Entry.Host).
				Str("operation", b.Entry.Operation.String()).Str("permission", b.Entry.Permission.String()).Msg("deleted ACL")
		}
	}
	return resp, nil
}
