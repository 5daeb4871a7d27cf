package protocol

// DescribeUserScramCredentials (key 50), version 0 (the only one), served
// only with Config.ScramAdmin, as Kafka's ZkAdminManager answers it.
//
//   - Describe on the cluster, else CLUSTER_AUTHORIZATION_FAILED at the
//     top and for each user asked for.
//   - Users null or empty: every user with a SCRAM credential, sorted by
//     name. Otherwise one result per distinct user, in request order: an
//     empty name answers RESOURCE_NOT_FOUND, a name asked for twice
//     DUPLICATE_RESOURCE, a user without any credential
//     RESOURCE_NOT_FOUND; the others list their mechanisms and
//     iterations (never salts or keys).
//   - A store that cannot answer fails the request with the top-level
//     error code.

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/security"
)

func (s *Server) handleDescribeUserScramCredentials(ctx context.Context, rc *reqContext, req *kmsg.DescribeUserSCRAMCredentialsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	resp.Results = []kmsg.DescribeUserSCRAMCredentialsResponseResult{}
	result := func(user string, code int16, msg string) kmsg.DescribeUserSCRAMCredentialsResponseResult {
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User, r.ErrorCode = user, code
		if msg != "" {
			r.ErrorMessage = kmsg.StringPtr(msg)
		}
		r.CredentialInfos = []kmsg.DescribeUserSCRAMCredentialsResponseResultCredentialInfo{}
		return r
	}
	if !s.authorizeCluster(rc, security.OpDescribe) {
		code := kerr.ClusterAuthorizationFailed.Code
		resp.ErrorCode, resp.ErrorMessage = code, codeMessage(code)
		for _, u := range req.Users {
			resp.Results = append(resp.Results, result(u.Name, code, *codeMessage(code)))
		}
		return resp, nil
	}
	all := len(req.Users) == 0
	var (
		ask   []string
		order []string
		early = map[string]kmsg.DescribeUserSCRAMCredentialsResponseResult{}
	)
	if !all {
		count := map[string]int{}
		for _, u := range req.Users {
			if count[u.Name] == 0 {
				order = append(order, u.Name)
			}
			count[u.Name]++
		}
		for _, u := range order {
			switch {
			case u == "":
				early[u] = result(u, kerr.ResourceNotFound.Code, "Username must not be empty")
			case count[u] > 1:
				early[u] = result(u, kerr.DuplicateResource.Code,
					"Cannot describe SCRAM credentials for the same user twice in a single request: "+u)
			default:
				ask = append(ask, u)
			}
		}
	}
	var found map[string][]ScramCredentialInfo
	if all || len(ask) > 0 {
		actx, cancel := adminTimeout(ctx, 0)
		defer cancel()
		var err error
		if found, err = s.cfg.ScramAdmin.DescribeScramUsers(actx, ask); err != nil {
			resp.ErrorCode, resp.ErrorMessage = s.errorCode(rc, err), errorMessage(err)
			return resp, nil
		}
	}
	if all {
		for u, infos := range found {
			if len(infos) > 0 {
				order = append(order, u)
			}
		}
		sort.Strings(order)
	}
	for _, u := range order {
		if r, ok := early[u]; ok {
			resp.Results = append(resp.Results, r)
			continue
		}
		infos := found[u]
		if len(infos) == 0 {
			resp.Results = append(resp.Results, result(u, kerr.ResourceNotFound.Code,
				"Attempt to describe a user credential that does not exist: "+u))
			continue
		}
		r := result(u, 0, "")
		for _, ci := range infos {
			c := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
			c.Mechanism, c.Iterations = int8(ci.Mechanism), ci.Iterations
			r.CredentialInfos = append(r.CredentialInfos, c)
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}
