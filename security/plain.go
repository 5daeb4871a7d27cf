package security

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"strings"
	"unicode/utf8"
)

// PlainAuthenticator checks a SASL/PLAIN user name and password. err is for
// a store that cannot answer; a wrong password or unknown user is
// ok == false.
type PlainAuthenticator interface {
	AuthenticatePlain(user, password string) (ok bool, err error)
}

// PlainUsers maps user names to passwords, as the user_<name>="<password>"
// options of Kafka's PlainLoginModule do. It must not be modified while in
// use.
type PlainUsers map[string]string

// AuthenticatePlain implements PlainAuthenticator. It compares SHA-256
// digests in constant time, so that neither the password's content nor its
// length shows in the timing, and does the same work for an unknown user.
func (u PlainUsers) AuthenticatePlain(user, password string) (bool, error) {
	want, known := u[user]
	if !known {
		want = "\x00unknown user\x00"
	}
	a := sha256.Sum256([]byte(password))
	b := sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1 && known, nil
}

// PlainServer is the server side of SASL/PLAIN (RFC 4616) as Kafka's
// PlainSaslServer: a single client message "authzid NUL authcid NUL passwd"
// and an empty answer.
type PlainServer struct {
	auth    PlainAuthenticator
	user    string
	done    bool
	stepped bool
}

// NewPlainServer returns a server for one exchange.
func NewPlainServer(auth PlainAuthenticator) (*PlainServer, error) {
	if auth == nil {
		return nil, fmt.Errorf("plain server: no authenticator: %w", ErrInvalidConfig)
	}
	return &PlainServer{auth: auth}, nil
}

// Mechanism implements SASLServer.
func (s *PlainServer) Mechanism() string { return "PLAIN" }

// Done implements SASLServer.
func (s *PlainServer) Done() bool { return s.done }

// AuthorizationID implements SASLServer; empty until Done.
func (s *PlainServer) AuthorizationID() string {
	if !s.done {
		return ""
	}
	return s.user
}

// Step implements SASLServer.
func (s *PlainServer) Step(msg []byte) ([]byte, error) {
	if s.stepped {
		return nil, fmt.Errorf("PLAIN: message after the exchange ended: %w", ErrIllegalSASLState)
	}
	s.stepped = true
	if !utf8.Valid(msg) {
		return nil, authFailed("PLAIN: response is not UTF-8")
	}
	tokens := strings.Split(string(msg), "\x00")
	if len(tokens) != 3 {
		return nil, authFailed("PLAIN: invalid response: expected 3 tokens, got %d", len(tokens))
	}
	authzid, user, password := tokens[0], tokens[1], tokens[2]
	if user == "" {
		return nil, authFailed("PLAIN: user name not specified")
	}
	if password == "" {
		return nil, authFailed("PLAIN: password not specified")
	}
	ok, err := s.auth.AuthenticatePlain(user, password)
	if err != nil {
		return nil, fmt.Errorf("PLAIN: credentials for user could not be verified: %v: %w", err, ErrAuthenticationFailed)
	}
	if !ok {
		return nil, authFailed("PLAIN: invalid user name or password")
	}
	// CVE-2017-12610.
	if authzid != "" && authzid != user {
		return nil, authFailed("PLAIN: client requested an authorization id that is different from the user name")
	}
	s.user = user
	s.done = true
	return []byte{}, nil
}
