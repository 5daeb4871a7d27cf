package zkcoord

import (
	"context"

	"github.com/kafkazk/broker/security"
)

// ScramCredentialInfo is one stored credential as DescribeUserScramCredentials
// shows it (protocol.ScramCredentialInfo's mirror).
type ScramCredentialInfo struct {
	Mechanism  security.ScramMechanism
	Iterations int32
}

// ScramUpsert is one AlterUserScramCredentials upsertion (protocol.ScramUpsert's
// mirror): the client sends the salt and the salted password, never the password.
type ScramUpsert struct {
	User           string
	Mechanism      security.ScramMechanism
	Iterations     int32
	Salt           []byte
	SaltedPassword []byte
}

// ScramDeletion is one AlterUserScramCredentials deletion (protocol.ScramDeletion's mirror).
type ScramDeletion struct {
	User      string
	Mechanism security.ScramMechanism
}

// WatchScramCredentials loads every /config/users/<sanitized user> into c,
// then follows the /config/changes notifications for users/<user>. It
// returns once the initial load is done.
func (s *Session) WatchScramCredentials(ctx context.Context, c *security.ScramCredentialCache) error {
	return errNotYet
}

// ScramAdmin returns the SCRAM credential writer of this session
// (protocol.ScramAdmin's method set; cmd/broker adapts).
func (s *Session) ScramAdmin() *ScramStore { return &ScramStore{s: s} }

// ScramStore reads and writes SCRAM credentials under /config/users.
type ScramStore struct{ s *Session }

// DescribeScramUsers returns the credentials of users (nil: every user with
// one), read from ZooKeeper. A named user without credentials is absent.
func (st *ScramStore) DescribeScramUsers(ctx context.Context, users []string) (map[string][]ScramCredentialInfo, error) {
	return nil, errNotYet
}

// AlterScramUsers applies upserts and deletions, one znode write per user;
// the result has an entry per user named, nil for success.
func (st *ScramStore) AlterScramUsers(ctx context.Context, upserts []ScramUpsert, deletions []ScramDeletion) map[string]error {
	out := map[string]error{}
	for _, u := range upserts {
		out[u.User] = errNotYet
	}
	for _, d := range deletions {
		out[d.User] = errNotYet
	}
	return out
}
