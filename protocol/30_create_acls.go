package protocol

// CreateAcls (key 30), versions 0-3, as Kafka's AclApis.handleCreateAcls
// over AclAuthorizer.createAcls.
//
//   - Alter on the cluster, else every creation answers
//     CLUSTER_AUTHORIZATION_FAILED.
//   - Without Config.Authorizer, or without Config.ACLAdmin to write
//     them, every creation answers SECURITY_DISABLED ("No Authorizer is
//     configured.").
//   - Each creation (v0: a LITERAL pattern) is checked as Kafka does: a
//     CLUSTER resource not named kafka-cluster, an empty name, and what
//     security.ValidateACLBinding refuses (unknown or filter-only values,
//     a malformed principal, a '/' in the name) answer INVALID_REQUEST
//     with the reason. The valid ones go to ACLAdmin.CreateACLs in one
//     call; its error for a binding becomes that creation's code.
//   - Results are in request order, one per creation. Created bindings
//     are logged at Info (who changed which ACL).

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/security"
)

func (s *Server) handleCreateACLs(ctx context.Context, rc *reqContext, req *kmsg.CreateACLsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(req.Creations))
	for i := range resp.Results {
		resp.Results[i] = kmsg.NewCreateACLsResponseResult()
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
		valid []security.ACLBinding
		at    []int // index in the request of each of valid
	)
	for i, c := range req.Creations {
		b := aclBinding(req.Version, c)
		if err := validateACLCreation(b); err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.InvalidRequest.Code, errorMessage(err)
			continue
		}
		valid = append(valid, b)
		at = append(at, i)
	}
	if len(valid) == 0 {
		return resp, nil
	}
	actx, cancel := adminTimeout(ctx, 0)
	defer cancel()
	errs := s.cfg.ACLAdmin.CreateACLs(actx, valid)
	for j, b := range valid {
		var err error
		if j < len(errs) {
			err = errs[j]
		}
		r := &resp.Results[at[j]]
		if err != nil {
			r.ErrorCode, r.ErrorMessage = s.errorCode(rc, err), errorMessage(err)
			continue
		}
		requestEvent(s.log.Info(), rc).Str("principal", rc.principal.String()).Str("resource", b.Pattern.String()).
			Str("acl_principal", b.Entry.Principal).Str("acl_host", b.Entry.Host).
			Str("operation", b.Entry.Operation.String()).Str("permission", b.Entry.Permission.String()).Msg("created ACL")
	}
	return resp, nil
}

// aclBinding is one creation in the security model; before v1 every
// pattern is LITERAL.
func aclBinding(version int16, c kmsg.CreateACLsRequestCreation) security.ACLBinding {
	pt := security.PatternType(c.ResourcePatternType)
	if version < 1 {
		pt = security.PatternLiteral
	}
	return security.ACLBinding{
		Pattern: security.ResourcePattern{Type: security.ResourceType(c.ResourceType), Name: c.ResourceName, PatternType: pt},
		Entry: security.ACE{Principal: c.Principal, Host: c.Host,
			Operation: security.Operation(c.Operation), Permission: security.PermissionType(c.PermissionType)},
	}
}

// validateACLCreation is Kafka's check of one creation: KafkaApis' own
// (the cluster's one name, no empty name), then the authorizer's.
func validateACLCreation(b security.ACLBinding) error {
	switch {
	case b.Pattern.Type == security.ResourceCluster && b.Pattern.Name != security.ClusterResourceName:
		return fmt.Errorf("the only valid name for the CLUSTER resource is %s", security.ClusterResourceName)
	case b.Pattern.Name == "":
		return fmt.Errorf("invalid empty resource name")
	}
	if err := security.ValidateACLBinding(b); err != nil {
		return fmt.Errorf("failed to create ACL: %w", err)
	}
	return nil
}

// aclWriteRefusal is the request-wide refusal of CreateAcls and DeleteAcls,
// checked in Kafka's order: CLUSTER_AUTHORIZATION_FAILED without Alter on
// the cluster, then SECURITY_DISABLED without an authorizer and an ACL
// store. refused false: neither applies.
func (s *Server) aclWriteRefusal(rc *reqContext) (code int16, msg *string, refused bool) {
	if !s.authorizeCluster(rc, security.OpAlter) {
		return kerr.ClusterAuthorizationFailed.Code, codeMessage(kerr.ClusterAuthorizationFailed.Code), true
	}
	if s.cfg.Authorizer == nil || s.cfg.ACLAdmin == nil {
		return kerr.SecurityDisabled.Code, kmsg.StringPtr("No Authorizer is configured."), true
	}
	return 0, nil, false
}
