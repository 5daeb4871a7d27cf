package security

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"hash"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// ScramMechanism is one of Kafka's SCRAM mechanisms. Its value is Kafka's
// mechanism type byte, as DescribeUserScramCredentials and
// AlterUserScramCredentials carry it.
type ScramMechanism int8

const (
	// ScramSHA256 is SCRAM-SHA-256 (RFC 7677).
	ScramSHA256 ScramMechanism = 1
	// ScramSHA512 is SCRAM-SHA-512.
	ScramSHA512 ScramMechanism = 2
)

const (
	// ScramMinIterations is Kafka's minimum iteration count for both
	// mechanisms; a stored credential with fewer is refused at login.
	ScramMinIterations = 4096
	// ScramMaxIterations is Kafka's maximum for AlterUserScramCredentials.
	ScramMaxIterations = 16384
	// ScramDefaultIterations is what kafka-configs.sh uses when a
	// mechanism is given without iterations.
	ScramDefaultIterations = 4096
)

// ScramMechanisms lists the mechanisms in Kafka's order.
var ScramMechanisms = []ScramMechanism{ScramSHA256, ScramSHA512}

// Name is the SASL mechanism name, also the key in the user config znode.
func (m ScramMechanism) Name() string {
	switch m {
	case ScramSHA256:
		return "SCRAM-SHA-256"
	case ScramSHA512:
		return "SCRAM-SHA-512"
	}
	return "SCRAM-UNKNOWN(" + strconv.Itoa(int(m)) + ")"
}

func (m ScramMechanism) String() string { return m.Name() }

// Valid reports whether m is a mechanism this package implements.
func (m ScramMechanism) Valid() bool { return m == ScramSHA256 || m == ScramSHA512 }

// ParseScramMechanism maps a SASL mechanism name ("SCRAM-SHA-512") to its
// mechanism; ok is false for any other name.
func ParseScramMechanism(name string) (m ScramMechanism, ok bool) {
	switch name {
	case "SCRAM-SHA-256":
		return ScramSHA256, true
	case "SCRAM-SHA-512":
		return ScramSHA512, true
	}
	return 0, false
}

func (m ScramMechanism) newHash() func() hash.Hash {
	if m == ScramSHA512 {
		return sha512.New
	}
	return sha256.New
}

func (m ScramMechanism) hmac(key []byte, parts ...string) []byte {
	mac := hmac.New(m.newHash(), key)
	for _, p := range parts {
		mac.Write([]byte(p))
	}
	return mac.Sum(nil)
}

func (m ScramMechanism) hash(b []byte) []byte {
	h := m.newHash()()
	h.Write(b)
	return h.Sum(nil)
}

func (m ScramMechanism) size() int { return m.newHash()().Size() }

// ScramCredential is what the server stores for one user and mechanism
// (RFC 5802 §3): never the password.
type ScramCredential struct {
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int
}

// saltedPassword is RFC 5802's Hi(Normalize(password), salt, i). Kafka does
// not apply SASLprep: the password's UTF-8 bytes are used as they are, and so
// are they here, so that credentials made by either side verify on the other.
func (m ScramMechanism) saltedPassword(password string, salt []byte, iterations int) ([]byte, error) {
	return pbkdf2.Key(m.newHash(), password, salt, iterations, m.size())
}

// NewScramCredential derives the stored credential for password with the
// given salt and iteration count.
func NewScramCredential(m ScramMechanism, password string, salt []byte, iterations int) (ScramCredential, error) {
	if !m.Valid() {
		return ScramCredential{}, fmt.Errorf("scram credential: mechanism %d: %w", m, ErrUnsupportedMechanism)
	}
	if iterations < ScramMinIterations {
		return ScramCredential{}, fmt.Errorf("scram credential: iterations %d below the minimum %d for %s: %w",
			iterations, ScramMinIterations, m, ErrInvalidCredential)
	}
	if len(salt) == 0 {
		return ScramCredential{}, fmt.Errorf("scram credential: empty salt: %w", ErrInvalidCredential)
	}
	sp, err := m.saltedPassword(password, salt, iterations)
	if err != nil {
		return ScramCredential{}, fmt.Errorf("scram credential: %w", err)
	}
	clientKey := m.hmac(sp, "Client Key")
	return ScramCredential{
		Salt:       append([]byte(nil), salt...),
		StoredKey:  m.hash(clientKey),
		ServerKey:  m.hmac(sp, "Server Key"),
		Iterations: iterations,
	}, nil
}

// ScramCredentialFromSaltedPassword derives the stored credential from a
// salt and the salted password (Hi(password, salt, iterations)) a client
// computed, as AlterUserScramCredentials carries them and Kafka's
// ScramFormatter.generateCredential turns them into stored_key and
// server_key. An unknown mechanism wraps ErrUnsupportedMechanism;
// iterations out of Kafka's range or an empty salt or salted password wrap
// ErrUnacceptableCredential.
func ScramCredentialFromSaltedPassword(m ScramMechanism, salt, saltedPassword []byte, iterations int) (ScramCredential, error) {
	if !m.Valid() {
		return ScramCredential{}, fmt.Errorf("scram credential: mechanism %d: %w", m, ErrUnsupportedMechanism)
	}
	if iterations < ScramMinIterations || iterations > ScramMaxIterations {
		return ScramCredential{}, fmt.Errorf("scram credential: iterations %d outside [%d, %d]: %w",
			iterations, ScramMinIterations, ScramMaxIterations, ErrUnacceptableCredential)
	}
	if len(salt) == 0 || len(saltedPassword) == 0 {
		return ScramCredential{}, fmt.Errorf("scram credential: empty salt or salted password: %w", ErrUnacceptableCredential)
	}
	clientKey := m.hmac(saltedPassword, "Client Key")
	return ScramCredential{
		Salt:       append([]byte(nil), salt...),
		StoredKey:  m.hash(clientKey),
		ServerKey:  m.hmac(saltedPassword, "Server Key"),
		Iterations: iterations,
	}, nil
}

// GenerateScramCredential makes a credential from a password with a fresh
// random salt, as kafka-configs.sh --add-config 'SCRAM-SHA-256=[password=...]'
// does. Kafka's salt is the bytes of a random base-36 string; here it is 32
// random bytes, which Kafka reads the same way since it only base64-decodes it.
func GenerateScramCredential(m ScramMechanism, password string, iterations int) (ScramCredential, error) {
	salt := make([]byte, 32)
	if _, err := rand.Read(salt); err != nil {
		return ScramCredential{}, fmt.Errorf("scram credential: salt: %w", err)
	}
	return NewScramCredential(m, password, salt, iterations)
}

// ScramCredentialLookup finds the stored credential of a user. ok is false
// for an unknown user; err is for a store that cannot answer. The returned
// credential is not modified by the caller.
type ScramCredentialLookup interface {
	LookupScramCredential(m ScramMechanism, user string) (cred ScramCredential, ok bool, err error)
}

// ScramCredentialCache is an in-memory ScramCredentialLookup, safe for
// concurrent use. zkcoord fills it from /config/users and keeps it current
// from /config/changes; SASL servers read it.
type ScramCredentialCache struct {
	mu    sync.RWMutex
	creds map[scramKey]ScramCredential
}

type scramKey struct {
	m    ScramMechanism
	user string
}

// Set stores or replaces the credential of user for m.
func (c *ScramCredentialCache) Set(m ScramMechanism, user string, cred ScramCredential) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.creds == nil {
		c.creds = make(map[scramKey]ScramCredential)
	}
	c.creds[scramKey{m, user}] = cred
}

// Delete removes the credential of user for m, if any.
func (c *ScramCredentialCache) Delete(m ScramMechanism, user string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.creds, scramKey{m, user})
}

// SetUser replaces every SCRAM credential of user with creds, as a changed
// /config/users/<user> znode does (a mechanism absent from creds is removed).
func (c *ScramCredentialCache) SetUser(user string, creds map[ScramMechanism]ScramCredential) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.creds == nil {
		c.creds = make(map[scramKey]ScramCredential)
	}
	for _, m := range ScramMechanisms {
		if cred, ok := creds[m]; ok {
			c.creds[scramKey{m, user}] = cred
		} else {
			delete(c.creds, scramKey{m, user})
		}
	}
}

// Users lists the users that have at least one credential, sorted.
func (c *ScramCredentialCache) Users() []string {
	c.mu.RLock()
	seen := make(map[string]bool, len(c.creds))
	for k := range c.creds {
		seen[k.user] = true
	}
	c.mu.RUnlock()
	out := make([]string, 0, len(seen))
	for u := range seen {
		out = append(out, u)
	}
	sort.Strings(out)
	return out
}

// LookupScramCredential implements ScramCredentialLookup.
func (c *ScramCredentialCache) LookupScramCredential(m ScramMechanism, user string) (ScramCredential, bool, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	cred, ok := c.creds[scramKey{m, user}]
	return cred, ok, nil
}

// SASLServer is the server side of one SASL exchange on one connection. Step
// takes the client's next message and returns the server's answer; after an
// error the exchange is over and every further Step returns
// ErrIllegalSASLState. A SASLServer is not safe for concurrent use: one
// connection drives it.
type SASLServer interface {
	// Mechanism is the SASL mechanism name.
	Mechanism() string
	// Step consumes one client message. The returned slice is the server's
	// message, possibly empty; it belongs to the caller.
	Step(clientMsg []byte) ([]byte, error)
	// Done reports whether the exchange completed successfully.
	Done() bool
	// AuthorizationID is the authenticated user name once Done; the
	// connection's principal is User:<AuthorizationID>.
	AuthorizationID() string
}

// ScramServerConfig configures a SCRAM server.
type ScramServerConfig struct {
	Credentials ScramCredentialLookup
	// Nonce makes the server part of the nonce. Nil uses 24 random bytes
	// in base64; tests set it to replay a known exchange.
	Nonce func() (string, error)
	// TokenAuth enables the "tokenauth=true" extension (delegation
	// tokens). It is nil here since this broker does not issue tokens; a
	// client asking for token authentication is then refused rather than
	// authenticated as the token id (the path of CVE-2017-12610's kind).
	TokenAuth ScramCredentialLookup
}

type scramState int

const (
	scramWantClientFirst scramState = iota
	scramWantClientFinal
	scramComplete
	scramFailed
)

// ScramServer is the server side of SCRAM-SHA-256/512 (RFC 5802), as
// Kafka's ScramSaslServer: client-first -> server-first, client-final ->
// server-final. Channel binding is not supported.
type ScramServer struct {
	m     ScramMechanism
	cfg   ScramServerConfig
	state scramState

	user            string
	gs2Header       string
	clientFirstBare string
	serverFirst     string
	nonce           string // client nonce + server nonce
	cred            ScramCredential
}

// NewScramServer returns a server for one exchange with mechanism m.
func NewScramServer(m ScramMechanism, cfg ScramServerConfig) (*ScramServer, error) {
	if !m.Valid() {
		return nil, fmt.Errorf("scram server: mechanism %d: %w", m, ErrUnsupportedMechanism)
	}
	if cfg.Credentials == nil {
		return nil, fmt.Errorf("scram server %s: no credential lookup: %w", m, ErrInvalidConfig)
	}
	return &ScramServer{m: m, cfg: cfg}, nil
}

// Mechanism implements SASLServer.
func (s *ScramServer) Mechanism() string { return s.m.Name() }

// Done implements SASLServer.
func (s *ScramServer) Done() bool { return s.state == scramComplete }

// AuthorizationID implements SASLServer; empty until Done.
func (s *ScramServer) AuthorizationID() string {
	if s.state != scramComplete {
		return ""
	}
	return s.user
}

// Step implements SASLServer.
func (s *ScramServer) Step(msg []byte) ([]byte, error) {
	var (
		out []byte
		err error
	)
	switch s.state {
	case scramWantClientFirst:
		out, err = s.clientFirst(string(msg))
	case scramWantClientFinal:
		out, err = s.clientFinal(string(msg))
	default:
		return nil, fmt.Errorf("%s: message after the exchange ended: %w", s.m, ErrIllegalSASLState)
	}
	if err != nil {
		s.state = scramFailed
		s.cred = ScramCredential{}
		return nil, fmt.Errorf("%s: %w", s.m, err)
	}
	return out, nil
}

func authFailed(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, ErrAuthenticationFailed)...)
}

func (s *ScramServer) clientFirst(msg string) ([]byte, error) {
	if !utf8.ValidString(msg) || strings.IndexByte(msg, 0) >= 0 {
		return nil, authFailed("client-first message: not UTF-8 text")
	}
	// gs2-header: cbind-flag "," [authzid] ","
	flag, rest, ok := strings.Cut(msg, ",")
	if !ok {
		return nil, authFailed("client-first message: no gs2 header")
	}
	switch {
	case flag == "n" || flag == "y":
		// "y": the client could bind a channel but thinks we cannot,
		// which is true (RFC 5802 §6).
	case strings.HasPrefix(flag, "p="):
		return nil, authFailed("client-first message: channel binding is not supported")
	default:
		return nil, authFailed("client-first message: bad gs2 channel binding flag")
	}
	authzField, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return nil, authFailed("client-first message: gs2 header not terminated")
	}
	var authzid string
	if authzField != "" {
		enc, found := strings.CutPrefix(authzField, "a=")
		if !found {
			return nil, authFailed("client-first message: bad authorization id field")
		}
		var err error
		if authzid, err = decodeSaslName(enc); err != nil {
			return nil, authFailed("client-first message: authorization id: %v", err)
		}
	}
	s.gs2Header = msg[:len(flag)+1+len(authzField)+1]
	s.clientFirstBare = bare

	fields := strings.Split(bare, ",")
	if len(fields) > 0 && strings.HasPrefix(fields[0], "m=") {
		return nil, authFailed("client-first message: mandatory extension not supported")
	}
	if len(fields) < 2 || !strings.HasPrefix(fields[0], "n=") || !strings.HasPrefix(fields[1], "r=") {
		return nil, authFailed("client-first message: want n=<user>,r=<nonce>")
	}
	user, err := decodeSaslName(fields[0][2:])
	if err != nil {
		return nil, authFailed("client-first message: user name: %v", err)
	}
	clientNonce := fields[1][2:]
	if !validNonce(clientNonce) {
		return nil, authFailed("client-first message: bad nonce")
	}
	ext, err := parseExtensions(fields[2:])
	if err != nil {
		return nil, authFailed("client-first message: %v", err)
	}
	lookup := s.cfg.Credentials
	if v, ok := ext["tokenauth"]; ok && strings.EqualFold(v, "true") {
		if s.cfg.TokenAuth == nil {
			return nil, authFailed("token authentication is not supported")
		}
		lookup = s.cfg.TokenAuth
	}
	// CVE-2017-12610: a client may not authenticate as one user and act as
	// another.
	if authzid != "" && authzid != user {
		return nil, authFailed("client requested an authorization id that is different from the user name")
	}
	cred, ok, err := lookup.LookupScramCredential(s.m, user)
	if err != nil {
		return nil, fmt.Errorf("credentials could not be obtained: %v: %w", err, ErrAuthenticationFailed)
	}
	if !ok {
		return nil, authFailed("invalid user credentials")
	}
	if cred.Iterations < ScramMinIterations {
		return nil, authFailed("iterations %d is less than the minimum %d", cred.Iterations, ScramMinIterations)
	}
	if len(cred.StoredKey) != s.m.size() || len(cred.ServerKey) != s.m.size() {
		return nil, authFailed("stored credential has keys of the wrong length")
	}
	serverNonce, err := s.newNonce()
	if err != nil {
		return nil, fmt.Errorf("server nonce: %v: %w", err, ErrAuthenticationFailed)
	}
	s.user = user
	s.cred = cred
	s.nonce = clientNonce + serverNonce
	s.serverFirst = "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(cred.Salt) + ",i=" + strconv.Itoa(cred.Iterations)
	s.state = scramWantClientFinal
	return []byte(s.serverFirst), nil
}

func (s *ScramServer) newNonce() (string, error) {
	if s.cfg.Nonce != nil {
		n, err := s.cfg.Nonce()
		if err == nil && !validNonce(n) {
			err = fmt.Errorf("nonce %q has characters outside printable ASCII without ','", n)
		}
		return n, err
	}
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawStdEncoding.EncodeToString(b), nil
}

func (s *ScramServer) clientFinal(msg string) ([]byte, error) {
	i := strings.LastIndex(msg, ",p=")
	if i < 0 {
		return nil, authFailed("client-final message: no proof")
	}
	withoutProof, proofB64 := msg[:i], msg[i+3:]
	fields := strings.Split(withoutProof, ",")
	if len(fields) < 2 || !strings.HasPrefix(fields[0], "c=") || !strings.HasPrefix(fields[1], "r=") {
		return nil, authFailed("client-final message: want c=<binding>,r=<nonce>,...,p=<proof>")
	}
	if _, err := parseExtensions(fields[2:]); err != nil {
		return nil, authFailed("client-final message: %v", err)
	}
	cbind, err := base64.StdEncoding.Strict().DecodeString(fields[0][2:])
	if err != nil {
		return nil, authFailed("client-final message: channel binding is not base64")
	}
	// Without channel binding, c= carries the gs2 header back (RFC 5802
	// §7): a mismatch means the header was altered in flight.
	if string(cbind) != s.gs2Header {
		return nil, authFailed("client-final message: channel binding does not match the gs2 header")
	}
	// CVE-2024-56128: the final nonce must end with the whole nonce of the
	// server-first message (client nonce and the server's fresh part), as
	// Kafka's fix checks it (endsWith), so a replayed exchange fails. Not
	// equality: librdkafka before 2.6.1 (Debian's is 2.0.2) sends its own
	// nonce again in front of it (librdkafka#4895), and Kafka accepts that.
	if !strings.HasSuffix(fields[1][2:], s.nonce) {
		return nil, authFailed("invalid client nonce in the final client message")
	}
	proof, err := base64.StdEncoding.Strict().DecodeString(proofB64)
	if err != nil {
		return nil, authFailed("client-final message: proof is not base64")
	}
	if len(proof) != s.m.size() {
		return nil, authFailed("client-final message: proof has the wrong length")
	}
	authMessage := s.clientFirstBare + "," + s.serverFirst + "," + withoutProof
	clientSignature := s.m.hmac(s.cred.StoredKey, authMessage)
	clientKey := make([]byte, len(proof))
	for j := range proof {
		clientKey[j] = proof[j] ^ clientSignature[j]
	}
	if subtle.ConstantTimeCompare(s.m.hash(clientKey), s.cred.StoredKey) != 1 {
		return nil, authFailed("invalid client credentials")
	}
	serverSignature := s.m.hmac(s.cred.ServerKey, authMessage)
	s.cred = ScramCredential{}
	s.state = scramComplete
	return []byte("v=" + base64.StdEncoding.EncodeToString(serverSignature)), nil
}

// decodeSaslName undoes RFC 5802's saslname escaping: "=2C" is ',' and "=3D"
// is '='; any other '=' or a bare ',' is an error, as in Kafka.
func decodeSaslName(s string) (string, error) {
	if s == "" {
		return "", fmt.Errorf("empty")
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '=':
			switch {
			case strings.HasPrefix(s[i:], "=2C"):
				b.WriteByte(',')
			case strings.HasPrefix(s[i:], "=3D"):
				b.WriteByte('=')
			default:
				return "", fmt.Errorf("'=' not followed by 2C or 3D")
			}
			i += 2
		case ',', 0:
			return "", fmt.Errorf("bad character %q", c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// EncodeSaslName escapes a user name for the n= and a= fields.
func EncodeSaslName(user string) string {
	return strings.NewReplacer("=", "=3D", ",", "=2C").Replace(user)
}

// validNonce: printable ASCII except ',' (RFC 5802 "printable").
func validNonce(n string) bool {
	if n == "" {
		return false
	}
	for i := 0; i < len(n); i++ {
		if c := n[i]; c < 0x21 || c > 0x7e || c == ',' {
			return false
		}
	}
	return true
}

// parseExtensions reads "key=value" fields: key is ASCII letters, value is
// ASCII without ',' (Kafka's SCRAM extension grammar).
func parseExtensions(fields []string) (map[string]string, error) {
	ext := make(map[string]string, len(fields))
	for _, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("malformed extension %q", truncate(f, 32))
		}
		for i := 0; i < len(k); i++ {
			if c := k[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
				return nil, fmt.Errorf("extension name %q is not letters", truncate(k, 32))
			}
		}
		for i := 0; i < len(v); i++ {
			if c := v[i]; c == 0 || c > 0x7f {
				return nil, fmt.Errorf("extension %s has a non-ASCII value", k)
			}
		}
		ext[k] = v
	}
	return ext, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
