package protocol

// DescribeAcls (key 29), versions 0-3 (v1 adds the pattern type, v2 is
// flexible, v3 only adds USER resources to what v2 may name), as Kafka's
// AclApis.handleDescribeAcls.
//
//   - Describe on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
//   - Without Config.Authorizer: SECURITY_DISABLED ("No Authorizer is
//     configured on the broker"), as Kafka without authorizer.class.name.
//     The key is advertised either way, as Kafka's is.
//   - The request is one filter (v0: LITERAL patterns, the only kind
//     before KIP-290); an UNKNOWN element answers INVALID_REQUEST
//     (security.ValidateFilter). Otherwise the Authorizer's matching
//     bindings, grouped by resource pattern in its stable order.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/security"
)

func (s *Server) handleDescribeACLs(_ context.Context, rc *reqContext, req *kmsg.DescribeACLsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	resp.Resources = []kmsg.DescribeACLsResponseResource{}
	if !s.authorizeCluster(rc, security.OpDescribe) {
		resp.ErrorCode, resp.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, codeMessage(kerr.ClusterAuthorizationFailed.Code)
		return resp, nil
	}
	if s.cfg.Authorizer == nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.SecurityDisabled.Code, kmsg.StringPtr("No Authorizer is configured on the broker")
		return resp, nil
	}
	f := aclFilter(req.Version, req.ResourceType, req.ResourceName, req.ResourcePatternType,
		req.Principal, req.Host, req.Operation, req.PermissionType)
	if err := security.ValidateFilter(f); err != nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, errorMessage(err)
		return resp, nil
	}
	for _, b := range s.cfg.Authorizer.ACLs(f) {
		n := len(resp.Resources)
		if n == 0 || aclResourcePattern(resp.Resources[n-1]) != b.Pattern {
			rr := kmsg.NewDescribeACLsResponseResource()
			rr.ResourceType = kmsg.ACLResourceType(b.Pattern.Type)
			rr.ResourceName = b.Pattern.Name
			rr.ResourcePatternType = kmsg.ACLResourcePatternType(b.Pattern.PatternType)
			resp.Resources = append(resp.Resources, rr)
			n++
		}
		ra := kmsg.NewDescribeACLsResponseResourceACL()
		ra.Principal, ra.Host = b.Entry.Principal, b.Entry.Host
		ra.Operation, ra.PermissionType = kmsg.ACLOperation(b.Entry.Operation), kmsg.ACLPermissionType(b.Entry.Permission)
		resp.Resources[n-1].ACLs = append(resp.Resources[n-1].ACLs, ra)
	}
	return resp, nil
}

// aclResourcePattern is the pattern a DescribeAcls resource stands for.
func aclResourcePattern(r kmsg.DescribeACLsResponseResource) security.ResourcePattern {
	return security.ResourcePattern{Type: security.ResourceType(r.ResourceType), Name: r.ResourceName,
		PatternType: security.PatternType(r.ResourcePatternType)}
}

// aclFilter is a DescribeAcls or DeleteAcls filter in the security
// model; before v1 every pattern is LITERAL.
func aclFilter(version int16, typ kmsg.ACLResourceType, name *string, pt kmsg.ACLResourcePatternType,
	principal, host *string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) security.ACLBindingFilter {
	patternType := security.PatternType(pt)
	if version < 1 {
		patternType = security.PatternLiteral
	}
	return security.ACLBindingFilter{
		Pattern: security.ResourcePatternFilter{Type: security.ResourceType(typ), Name: name, PatternType: patternType},
		Entry: security.ACEFilter{Principal: principal, Host: host,
			Operation: security.Operation(op), Permission: security.PermissionType(perm)},
	}
}
