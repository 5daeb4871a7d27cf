package protocol

// AlterUserScramCredentials (key 51), version 0 (the only one), served
// only with Config.ScramAdmin, with the validations of Kafka's
// ZkAdminManager.alterUserScramCredentials.
//
//   - Alter on the cluster, else every user named answers
//     CLUSTER_AUTHORIZATION_FAILED.
//   - Per user, the first reason found fails all of that user's changes
//     and nothing of it is written: an empty name answers
//     UNACCEPTABLE_CREDENTIAL ("Username must not be empty"); an unknown
//     mechanism UNSUPPORTED_SASL_MECHANISM; an upsertion's iterations
//     outside [4096, 16384] UNACCEPTABLE_CREDENTIAL ("Too few iterations"
//     / "Too many iterations"); the same user and mechanism twice in the
//     request DUPLICATE_RESOURCE; deleting a credential the user does not
//     have (an unknown user included) RESOURCE_NOT_FOUND.
//   - The remaining changes go to ScramAdmin.AlterScramUsers in one call
//     (salt and salted password as the client sent them; the store
//     derives stored_key and server_key), whose per-user error becomes
//     that user's code.
//   - One result per user, in order of first mention (upsertions, then
//     deletions). Changed users are logged at Info, never a credential.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/security"
)

func (s *Server) handleAlterUserScramCredentials(ctx context.Context, rc *reqContext, req *kmsg.AlterUserSCRAMCredentialsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	var order []string
	seen := map[string]bool{}
	mention := func(u string) {
		if !seen[u] {
			seen[u] = true
			order = append(order, u)
		}
	}
	for _, u := range req.Upsertions {
		mention(u.Name)
	}
	for _, d := range req.Deletions {
		mention(d.Name)
	}
	type failure struct {
		code int16
		msg  string
	}
	failed := map[string]failure{}
	fail := func(u string, code int16, msg string) {
		if _, ok := failed[u]; !ok {
			failed[u] = failure{code, msg}
		}
	}
	respond := func() (kmsg.Response, error) {
		resp.Results = make([]kmsg.AlterUserSCRAMCredentialsResponseResult, 0, len(order))
		for _, u := range order {
			r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			r.User = u
			if f, ok := failed[u]; ok {
				r.ErrorCode = f.code
				if f.msg != "" {
					r.ErrorMessage = kmsg.StringPtr(f.msg)
				}
			}
			resp.Results = append(resp.Results, r)
		}
		return resp, nil
	}
	if !s.authorizeCluster(rc, security.OpAlter) {
		for _, u := range order {
			fail(u, kerr.ClusterAuthorizationFailed.Code, *codeMessage(kerr.ClusterAuthorizationFailed.Code))
		}
		return respond()
	}

	// Malformed changes.
	for _, d := range req.Deletions {
		switch {
		case d.Name == "":
			fail(d.Name, kerr.UnacceptableCredential.Code, "Username must not be empty")
		case !security.ScramMechanism(d.Mechanism).Valid():
			fail(d.Name, kerr.UnsupportedSaslMechanism.Code, "Unknown SCRAM mechanism")
		}
	}
	for _, u := range req.Upsertions {
		switch {
		case u.Name == "":
			fail(u.Name, kerr.UnacceptableCredential.Code, "Username must not be empty")
		case !security.ScramMechanism(u.Mechanism).Valid():
			fail(u.Name, kerr.UnsupportedSaslMechanism.Code, "Unknown SCRAM mechanism")
		case u.Iterations < security.ScramMinIterations:
			fail(u.Name, kerr.UnacceptableCredential.Code, "Too few iterations")
		case u.Iterations > security.ScramMaxIterations:
			fail(u.Name, kerr.UnacceptableCredential.Code, "Too many iterations")
		}
	}
	// The same credential twice.
	type userMechanism struct {
		user string
		m    int8
	}
	pairs := map[userMechanism]int{}
	for _, u := range req.Upsertions {
		pairs[userMechanism{u.Name, u.Mechanism}]++
	}
	for _, d := range req.Deletions {
		pairs[userMechanism{d.Name, d.Mechanism}]++
	}
	for p, n := range pairs {
		if _, bad := failed[p.user]; !bad && n > 1 {
			failed[p.user] = failure{kerr.DuplicateResource.Code, "A user credential cannot be altered twice in the same request"}
		}
	}
	// Deletions of credentials that do not exist.
	var deleting []string
	for _, d := range req.Deletions {
		if _, bad := failed[d.Name]; !bad {
			deleting = append(deleting, d.Name)
		}
	}
	actx, cancel := adminTimeout(ctx, 0)
	defer cancel()
	if len(deleting) > 0 {
		have, err := s.cfg.ScramAdmin.DescribeScramUsers(actx, deleting)
		if err != nil {
			code := s.errorCode(rc, err)
			for _, u := range deleting {
				fail(u, code, err.Error())
			}
		}
		for _, d := range req.Deletions {
			if _, bad := failed[d.Name]; bad {
				continue
			}
			if !hasMechanism(have[d.Name], security.ScramMechanism(d.Mechanism)) {
				fail(d.Name, kerr.ResourceNotFound.Code, "Attempt to delete a user credential that does not exist")
			}
		}
	}

	var (
		upserts   []ScramUpsert
		deletions []ScramDeletion
		users     []string
	)
	for _, u := range req.Upsertions {
		if _, bad := failed[u.Name]; !bad {
			upserts = append(upserts, ScramUpsert{User: u.Name, Mechanism: security.ScramMechanism(u.Mechanism),
				Iterations: u.Iterations, Salt: u.Salt, SaltedPassword: u.SaltedPassword})
		}
	}
	for _, d := range req.Deletions {
		if _, bad := failed[d.Name]; !bad {
			deletions = append(deletions, ScramDeletion{User: d.Name, Mechanism: security.ScramMechanism(d.Mechanism)})
		}
	}
	for _, u := range order {
		if _, bad := failed[u]; !bad {
			users = append(users, u)
		}
	}
	if len(users) == 0 {
		return respond()
	}
	errs := s.cfg.ScramAdmin.AlterScramUsers(actx, upserts, deletions)
	for _, u := range users {
		if err := errs[u]; err != nil {
			fail(u, s.errorCode(rc, err), err.Error())
			continue
		}
		requestEvent(s.log.Info(), rc).Str("principal", rc.principal.String()).Str("user", u).
			Msg("altered SCRAM credentials")
	}
	return respond()
}

// hasMechanism reports whether infos lists m.
func hasMechanism(infos []ScramCredentialInfo, m security.ScramMechanism) bool {
	for _, ci := range infos {
		if ci.Mechanism == m {
			return true
		}
	}
	return false
}
