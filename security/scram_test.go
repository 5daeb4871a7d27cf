package security

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"hash"
	"strings"
	"testing"
)

// RFC 7677 §3 example exchange (SCRAM-SHA-256, user "user", password
// "pencil").
const (
	rfc7677ClientFirst = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
	rfc7677ServerNonce = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
	rfc7677ServerFirst = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
	rfc7677ClientFinal = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
	rfc7677ServerFinal = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
	rfc7677Salt        = "W22ZaJ0SNY7soEsUEjb6gQ=="
)

// Stored and server keys for password "pencil" and the RFC 7677 salt at
// 4096 iterations, computed outside Go with Python's hashlib.pbkdf2_hmac and
// hmac (StoredKey = H(HMAC(SaltedPassword, "Client Key")), ServerKey =
// HMAC(SaltedPassword, "Server Key")).
const (
	goldenSHA256StoredKey = "WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY="
	goldenSHA256ServerKey = "wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU="
	goldenSHA512StoredKey = "6AAub3065EYRmyFpM2RNwqK+eGnrkYuEWbXn19LsEmBqzu8QaCXNc1FwpnX9NhH2hK/60dzj9DoO5DvVkOHbvg=="
	goldenSHA512ServerKey = "jZHbYjC1aHh0/hKbxyBuGFjDrgjgKTT1esA7awWiKcRZ0o/0b1yWEebBeSVkkCFewf91nLDfKF24mvD5nmE6rA=="
)

func mustB64(t testing.TB, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func fixedNonce(n string) func() (string, error) { return func() (string, error) { return n, nil } }

func cacheWith(t testing.TB, m ScramMechanism, user, password string, iterations int) *ScramCredentialCache {
	t.Helper()
	cred, err := GenerateScramCredential(m, password, iterations)
	if err != nil {
		t.Fatal(err)
	}
	c := &ScramCredentialCache{}
	c.Set(m, user, cred)
	return c
}

func TestScramRFC7677Exchange(t *testing.T) {
	cred, err := NewScramCredential(ScramSHA256, "pencil", mustB64(t, rfc7677Salt), 4096)
	if err != nil {
		t.Fatal(err)
	}
	c := &ScramCredentialCache{}
	c.Set(ScramSHA256, "user", cred)
	s, err := NewScramServer(ScramSHA256, ScramServerConfig{Credentials: c, Nonce: fixedNonce(rfc7677ServerNonce)})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Step([]byte(rfc7677ClientFirst))
	if err != nil {
		t.Fatalf("client-first: %v", err)
	}
	if string(got) != rfc7677ServerFirst {
		t.Fatalf("server-first = %q, want %q", got, rfc7677ServerFirst)
	}
	if s.Done() {
		t.Fatal("done after the first message")
	}
	got, err = s.Step([]byte(rfc7677ClientFinal))
	if err != nil {
		t.Fatalf("client-final: %v", err)
	}
	if string(got) != rfc7677ServerFinal {
		t.Fatalf("server-final = %q, want %q", got, rfc7677ServerFinal)
	}
	if !s.Done() || s.AuthorizationID() != "user" {
		t.Fatalf("done=%v authzid=%q", s.Done(), s.AuthorizationID())
	}
	if _, err := s.Step([]byte(rfc7677ClientFinal)); !errors.Is(err, ErrIllegalSASLState) {
		t.Fatalf("step after completion: %v, want ErrIllegalSASLState", err)
	}
}

func TestScramCredentialGolden(t *testing.T) {
	salt := mustB64(t, rfc7677Salt)
	for _, tc := range []struct {
		m                    ScramMechanism
		storedKey, serverKey string
	}{
		{ScramSHA256, goldenSHA256StoredKey, goldenSHA256ServerKey},
		{ScramSHA512, goldenSHA512StoredKey, goldenSHA512ServerKey},
	} {
		t.Run(tc.m.Name(), func(t *testing.T) {
			cred, err := NewScramCredential(tc.m, "pencil", salt, 4096)
			if err != nil {
				t.Fatal(err)
			}
			want := "salt=" + rfc7677Salt + ",stored_key=" + tc.storedKey + ",server_key=" + tc.serverKey + ",iterations=4096"
			if got := FormatScramCredential(cred); got != want {
				t.Fatalf("credential string\n got %s\nwant %s", got, want)
			}
			back, err := ParseScramCredential(want)
			if err != nil {
				t.Fatal(err)
			}
			if FormatScramCredential(back) != want {
				t.Fatalf("round trip changed the credential: %s", FormatScramCredential(back))
			}
			znode := EncodeEntityConfig(SetScramCredential(nil, tc.m, cred))
			wantZnode := `{"version":1,"config":{"` + tc.m.Name() + `":"` + want + `"}}`
			if string(znode) != wantZnode {
				t.Fatalf("znode\n got %s\nwant %s", znode, wantZnode)
			}
			creds, err := DecodeUserScramCredentials(znode)
			if err != nil {
				t.Fatal(err)
			}
			if len(creds) != 1 || FormatScramCredential(creds[tc.m]) != want {
				t.Fatalf("decoded %v", creds)
			}
		})
	}
}

// A user config written by kafka-configs.sh holding both mechanisms and a
// quota, with the key order Kafka's Jackson happens to use.
func TestDecodeKafkaUserConfig(t *testing.T) {
	sha256Cred := "salt=" + rfc7677Salt + ",stored_key=" + goldenSHA256StoredKey + ",server_key=" + goldenSHA256ServerKey + ",iterations=4096"
	sha512Cred := "iterations=8192,server_key=" + goldenSHA512ServerKey + ",stored_key=" + goldenSHA512StoredKey + ",salt=" + rfc7677Salt
	znode := `{"version":1,"config":{"SCRAM-SHA-512":"` + sha512Cred + `","producer_byte_rate":"1024","SCRAM-SHA-256":"` + sha256Cred + `"}}`
	cfg, err := DecodeEntityConfig([]byte(znode))
	if err != nil {
		t.Fatal(err)
	}
	if cfg["producer_byte_rate"] != "1024" {
		t.Fatalf("quota lost: %v", cfg)
	}
	creds, err := ScramCredentialsFromConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if creds[ScramSHA512].Iterations != 8192 || FormatScramCredential(creds[ScramSHA256]) != sha256Cred {
		t.Fatalf("creds %v", creds)
	}
	if after := DeleteScramCredential(cfg, ScramSHA512); len(after) != 2 || after["SCRAM-SHA-512"] != "" {
		t.Fatalf("delete: %v", after)
	}
	if _, err := DecodeEntityConfig([]byte(`{"version":1,"config":{"a":1}}`)); !errors.Is(err, ErrInvalidCredential) {
		t.Fatalf("non-string value: %v", err)
	}
	if cfg, err := DecodeEntityConfig(nil); err != nil || len(cfg) != 0 {
		t.Fatalf("empty znode: %v %v", cfg, err)
	}
}

func TestParseScramCredentialErrors(t *testing.T) {
	ok := "salt=" + rfc7677Salt + ",stored_key=" + goldenSHA256StoredKey + ",server_key=" + goldenSHA256ServerKey + ",iterations=4096"
	for name, s := range map[string]string{
		"empty":          "",
		"three keys":     "salt=" + rfc7677Salt + ",stored_key=" + goldenSHA256StoredKey + ",iterations=4096",
		"five keys":      ok + ",extra=1",
		"no equals":      "salt,stored_key=a,server_key=b,iterations=1",
		"empty key":      "=x,stored_key=a,server_key=b,iterations=1",
		"bad base64":     strings.Replace(ok, "salt="+rfc7677Salt, "salt=!!!", 1),
		"bad iterations": strings.Replace(ok, "iterations=4096", "iterations=lots", 1),
		"zero iters":     strings.Replace(ok, "iterations=4096", "iterations=0", 1),
		"duplicate":      "salt=a,salt=a,server_key=b,iterations=1",
		"wrong key":      strings.Replace(ok, "salt=", "pepper=", 1),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseScramCredential(s); !errors.Is(err, ErrInvalidCredential) {
				t.Fatalf("ParseScramCredential(%q) = %v, want ErrInvalidCredential", s, err)
			}
		})
	}
}

// scramTestClient is an independent SCRAM client: it derives its keys
// with pbkdf2/hmac directly rather than through the package's helpers.
type scramTestClient struct {
	h                         func() hash.Hash
	user, password, authzid   string
	clientNonce               string
	gs2, clientFirstBare      string
	serverFirst, finalNoProof string
	saltedPassword            []byte
}

func newTestClient(m ScramMechanism, user, password string) *scramTestClient {
	h := sha256.New
	if m == ScramSHA512 {
		h = sha512.New
	}
	return &scramTestClient{h: h, user: user, password: password, clientNonce: "fyko+d2lbbFgONRv9qkxdawL"}
}

func (c *scramTestClient) first() string {
	c.gs2 = "n,,"
	if c.authzid != "" {
		c.gs2 = "n,a=" + EncodeSaslName(c.authzid) + ","
	}
	c.clientFirstBare = "n=" + EncodeSaslName(c.user) + ",r=" + c.clientNonce
	return c.gs2 + c.clientFirstBare
}

func (c *scramTestClient) mac(key []byte, s string) []byte {
	m := hmac.New(c.h, key)
	m.Write([]byte(s))
	return m.Sum(nil)
}

// final answers serverFirst with the nonce the server sent, unless nonce is
// non-empty; the proof is computed over whatever nonce is sent.
func (c *scramTestClient) final(t testing.TB, serverFirst, nonce string) string {
	t.Helper()
	c.serverFirst = serverFirst
	parts := strings.Split(serverFirst, ",")
	if len(parts) != 3 {
		t.Fatalf("server-first %q", serverFirst)
	}
	if nonce == "" {
		nonce = strings.TrimPrefix(parts[0], "r=")
	}
	salt := mustB64(t, strings.TrimPrefix(parts[1], "s="))
	var iter int
	for _, ch := range strings.TrimPrefix(parts[2], "i=") {
		iter = iter*10 + int(ch-'0')
	}
	sp, err := pbkdf2.Key(c.h, c.password, salt, iter, c.h().Size())
	if err != nil {
		t.Fatal(err)
	}
	c.saltedPassword = sp
	c.finalNoProof = "c=" + base64.StdEncoding.EncodeToString([]byte(c.gs2)) + ",r=" + nonce
	authMsg := c.clientFirstBare + "," + c.serverFirst + "," + c.finalNoProof
	clientKey := c.mac(sp, "Client Key")
	h := c.h()
	h.Write(clientKey)
	sig := c.mac(h.Sum(nil), authMsg)
	proof := make([]byte, len(sig))
	for i := range sig {
		proof[i] = clientKey[i] ^ sig[i]
	}
	return c.finalNoProof + ",p=" + base64.StdEncoding.EncodeToString(proof)
}

func (c *scramTestClient) wantServerFinal() string {
	authMsg := c.clientFirstBare + "," + c.serverFirst + "," + c.finalNoProof
	return "v=" + base64.StdEncoding.EncodeToString(c.mac(c.mac(c.saltedPassword, "Server Key"), authMsg))
}

func TestScramExchange(t *testing.T) {
	for _, m := range ScramMechanisms {
		t.Run(m.Name(), func(t *testing.T) {
			c := cacheWith(t, m, "alice", "alice-secret", 4096)
			s, err := NewScramServer(m, ScramServerConfig{Credentials: c})
			if err != nil {
				t.Fatal(err)
			}
			cl := newTestClient(m, "alice", "alice-secret")
			sf, err := s.Step([]byte(cl.first()))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(sf), "r="+cl.clientNonce) || len(sf) <= len("r="+cl.clientNonce) {
				t.Fatalf("server-first %q lacks a server nonce", sf)
			}
			fin, err := s.Step([]byte(cl.final(t, string(sf), "")))
			if err != nil {
				t.Fatal(err)
			}
			if string(fin) != cl.wantServerFinal() {
				t.Fatalf("server-final %q, want %q", fin, cl.wantServerFinal())
			}
			if !s.Done() || s.AuthorizationID() != "alice" || s.Mechanism() != m.Name() {
				t.Fatalf("done=%v authzid=%q mech=%q", s.Done(), s.AuthorizationID(), s.Mechanism())
			}
		})
	}
}

// scramRun drives one exchange; mutate may change the client between the
// two messages; returns the error of whichever step failed.
func scramRun(t *testing.T, m ScramMechanism, cl *scramTestClient, creds ScramCredentialLookup, finalNonce func(serverNonce string) string) (*ScramServer, error) {
	t.Helper()
	s, err := NewScramServer(m, ScramServerConfig{Credentials: creds})
	if err != nil {
		t.Fatal(err)
	}
	sf, err := s.Step([]byte(cl.first()))
	if err != nil {
		return s, err
	}
	nonce := ""
	if finalNonce != nil {
		full := strings.TrimPrefix(strings.Split(string(sf), ",")[0], "r=")
		nonce = finalNonce(strings.TrimPrefix(full, cl.clientNonce))
	}
	_, err = s.Step([]byte(cl.final(t, string(sf), nonce)))
	return s, err
}

func TestScramRefusals(t *testing.T) {
	creds := cacheWith(t, ScramSHA512, "alice", "alice-secret", 4096)
	for _, tc := range []struct {
		name       string
		user, pass string
		authzid    string
		finalNonce func(string) string
		wantErr    bool
	}{
		{name: "good", user: "alice", pass: "alice-secret"},
		{name: "authzid equal to user", user: "alice", pass: "alice-secret", authzid: "alice"},
		{name: "wrong password", user: "alice", pass: "wrong", wantErr: true},
		{name: "unknown user", user: "mallory", pass: "alice-secret", wantErr: true},
		// CVE-2017-12610: authenticate as alice, ask to act as admin.
		{name: "authzid differs", user: "alice", pass: "alice-secret", authzid: "admin", wantErr: true},
		// CVE-2024-56128: a final nonce that does not end with the whole
		// server-first nonce (client and server parts), with a proof valid
		// for it, must fail: here it ends with the server's part only.
		{name: "nonce suffix only", user: "alice", pass: "alice-secret",
			finalNonce: func(sn string) string { return "other" + sn }, wantErr: true},
		{name: "server nonce alone", user: "alice", pass: "alice-secret",
			finalNonce: func(sn string) string { return sn }, wantErr: true},
		{name: "nonce extended", user: "alice", pass: "alice-secret",
			finalNonce: func(sn string) string { return "fyko+d2lbbFgONRv9qkxdawL" + sn + "x" }, wantErr: true},
		// librdkafka before 2.6.1 (librdkafka#4895) sends its client nonce
		// again in front of the whole nonce; Kafka accepts it (endsWith).
		{name: "client nonce repeated in front (librdkafka < 2.6.1)", user: "alice", pass: "alice-secret",
			finalNonce: func(sn string) string { return "fyko+d2lbbFgONRv9qkxdawL" + "fyko+d2lbbFgONRv9qkxdawL" + sn }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := newTestClient(ScramSHA512, tc.user, tc.pass)
			cl.authzid = tc.authzid
			s, err := scramRun(t, ScramSHA512, cl, creds, tc.finalNonce)
			if !tc.wantErr {
				if err != nil || !s.Done() {
					t.Fatalf("err=%v done=%v", err, s.Done())
				}
				return
			}
			if !errors.Is(err, ErrAuthenticationFailed) {
				t.Fatalf("err = %v, want ErrAuthenticationFailed", err)
			}
			if s.Done() || s.AuthorizationID() != "" {
				t.Fatalf("failed exchange reports done=%v authzid=%q", s.Done(), s.AuthorizationID())
			}
			if _, err := s.Step([]byte("c=biws,r=x,p=AAAA")); !errors.Is(err, ErrIllegalSASLState) {
				t.Fatalf("step after failure: %v", err)
			}
		})
	}
}

func TestScramLowIterationsRefused(t *testing.T) {
	salt := []byte("0123456789abcdef")
	if _, err := NewScramCredential(ScramSHA256, "p", salt, 4095); !errors.Is(err, ErrInvalidCredential) {
		t.Fatalf("NewScramCredential(4095) = %v", err)
	}
	// A znode written by hand (or an old tool) with too few iterations.
	cred, err := ParseScramCredential("salt=" + rfc7677Salt + ",stored_key=" + goldenSHA256StoredKey + ",server_key=" + goldenSHA256ServerKey + ",iterations=1024")
	if err != nil {
		t.Fatal(err)
	}
	c := &ScramCredentialCache{}
	c.Set(ScramSHA256, "user", cred)
	s, _ := NewScramServer(ScramSHA256, ScramServerConfig{Credentials: c})
	if _, err := s.Step([]byte(rfc7677ClientFirst)); !errors.Is(err, ErrAuthenticationFailed) || !strings.Contains(err.Error(), "minimum") {
		t.Fatalf("err = %v", err)
	}
}

func TestScramExtensions(t *testing.T) {
	creds := cacheWith(t, ScramSHA256, "alice", "pw", 4096)
	for _, tc := range []struct {
		first   string
		wantErr bool
	}{
		{"n,,n=alice,r=abc,tokenauth=true", true},
		{"n,,n=alice,r=abc,tokenauth=TRUE", true},
		{"n,,n=alice,r=abc,tokenauth=false", false},
		{"n,,n=alice,r=abc,unknownext=1", false}, // ignored, as Kafka does
		{"n,,m=mandatory,n=alice,r=abc", true},
	} {
		s, _ := NewScramServer(ScramSHA256, ScramServerConfig{Credentials: creds})
		_, err := s.Step([]byte(tc.first))
		if gotErr := err != nil; gotErr != tc.wantErr {
			t.Errorf("%q: err = %v, wantErr %v", tc.first, err, tc.wantErr)
		}
	}
}

func TestScramExtensionsInFinalAreSigned(t *testing.T) {
	// An extension in the client-final message is part of the auth message;
	// the client signs what it sent and the server verifies the same bytes.
	creds := cacheWith(t, ScramSHA256, "alice", "pw", 4096)
	s, _ := NewScramServer(ScramSHA256, ScramServerConfig{Credentials: creds})
	cl := newTestClient(ScramSHA256, "alice", "pw")
	sf, err := s.Step([]byte(cl.first()))
	if err != nil {
		t.Fatal(err)
	}
	nonce := strings.TrimPrefix(strings.Split(string(sf), ",")[0], "r=")
	final := cl.final(t, string(sf), nonce+",ext=1")
	if _, err := s.Step([]byte(final)); err != nil {
		t.Fatalf("final with extension: %v", err)
	}
}

func TestScramMalformed(t *testing.T) {
	creds := cacheWith(t, ScramSHA256, "alice", "pw", 4096)
	firsts := []string{
		"", ",", "n", "n,", "x,,n=alice,r=abc", "p=tls-unique,,n=alice,r=abc",
		"n,b=alice,n=alice,r=abc", "n,a=,n=alice,r=abc", "n,,n=alice", "n,,r=abc,n=alice",
		"n,,n=,r=abc", "n,,n=al=ce,r=abc", "n,,n=alice,r=", "n,,n=alice,r=a b",
		"n,,n=alice,r=abc,=1", "n,,n=alice,r=abc,1x=2", "n,,n=alice,r=abc,novalue",
		"n,,n=alice,r=abc\x00", "n,,n=\xff,r=abc", "n,,n=alice,r=abc\xc3\xa9",
	}
	for _, f := range firsts {
		s, _ := NewScramServer(ScramSHA256, ScramServerConfig{Credentials: creds})
		if _, err := s.Step([]byte(f)); !errors.Is(err, ErrAuthenticationFailed) {
			t.Errorf("client-first %q: err = %v, want ErrAuthenticationFailed", f, err)
		}
	}
	finals := []func(nonce, good string) string{
		func(n, g string) string { return "" },
		func(n, g string) string { return "c=biws,r=" + n },
		func(n, g string) string { return "r=" + n + ",c=biws,p=" + strings.SplitN(g, ",p=", 2)[1] },
		func(n, g string) string { return strings.Replace(g, "c=biws", "c=!!", 1) },
		func(n, g string) string { return strings.Replace(g, "c=biws", "c=eSws", 1) }, // "y,,"
		func(n, g string) string { return strings.SplitN(g, ",p=", 2)[0] + ",p=!!!!" },
		func(n, g string) string { return strings.SplitN(g, ",p=", 2)[0] + ",p=AAAA" },
		func(n, g string) string { return strings.SplitN(g, ",p=", 2)[0] + ",p=" },
		func(n, g string) string { return strings.Replace(g, ",p=", ",bad,p=", 1) },
	}
	for i, f := range finals {
		s, _ := NewScramServer(ScramSHA256, ScramServerConfig{Credentials: creds})
		cl := newTestClient(ScramSHA256, "alice", "pw")
		sf, err := s.Step([]byte(cl.first()))
		if err != nil {
			t.Fatal(err)
		}
		nonce := strings.TrimPrefix(strings.Split(string(sf), ",")[0], "r=")
		msg := f(nonce, cl.final(t, string(sf), ""))
		if _, err := s.Step([]byte(msg)); !errors.Is(err, ErrAuthenticationFailed) {
			t.Errorf("client-final %d %q: err = %v, want ErrAuthenticationFailed", i, msg, err)
		}
	}
}

func TestScramSaslName(t *testing.T) {
	for _, user := range []string{"a,b", "a=b", "=2C", "plain", "ünï"} {
		enc := EncodeSaslName(user)
		if strings.ContainsAny(strings.NewReplacer("=2C", "", "=3D", "").Replace(enc), ",=") {
			t.Errorf("EncodeSaslName(%q) = %q leaves a separator", user, enc)
		}
		if got, err := decodeSaslName(enc); err != nil || got != user {
			t.Errorf("decode(encode(%q)) = %q, %v", user, got, err)
		}
	}
	// A user whose name needs escaping authenticates end to end.
	creds := cacheWith(t, ScramSHA256, "a,b=c", "pw", 4096)
	s, err := scramRun(t, ScramSHA256, newTestClient(ScramSHA256, "a,b=c", "pw"), creds, nil)
	if err != nil || s.AuthorizationID() != "a,b=c" {
		t.Fatalf("err=%v authzid=%q", err, s.AuthorizationID())
	}
}

func TestGenerateScramCredential(t *testing.T) {
	a, err := GenerateScramCredential(ScramSHA256, "pw", 4096)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := GenerateScramCredential(ScramSHA256, "pw", 4096)
	if string(a.Salt) == string(b.Salt) || len(a.Salt) < 16 {
		t.Fatalf("salts not fresh: %x %x", a.Salt, b.Salt)
	}
	if _, err := GenerateScramCredential(ScramMechanism(9), "pw", 4096); !errors.Is(err, ErrUnsupportedMechanism) {
		t.Fatalf("bad mechanism: %v", err)
	}
	if m, ok := ParseScramMechanism("SCRAM-SHA-512"); !ok || m != ScramSHA512 {
		t.Fatal("ParseScramMechanism")
	}
	if _, ok := ParseScramMechanism("SCRAM-SHA-1"); ok {
		t.Fatal("SCRAM-SHA-1 accepted")
	}
}

func TestScramCredentialCacheSetUser(t *testing.T) {
	c := cacheWith(t, ScramSHA256, "alice", "pw", 4096)
	cred, _ := GenerateScramCredential(ScramSHA512, "pw2", 4096)
	c.SetUser("alice", map[ScramMechanism]ScramCredential{ScramSHA512: cred})
	if _, ok, _ := c.LookupScramCredential(ScramSHA256, "alice"); ok {
		t.Fatal("SHA-256 credential survived SetUser without it")
	}
	if _, ok, _ := c.LookupScramCredential(ScramSHA512, "alice"); !ok {
		t.Fatal("SHA-512 credential missing")
	}
	c.Delete(ScramSHA512, "alice")
	if _, ok, _ := c.LookupScramCredential(ScramSHA512, "alice"); ok {
		t.Fatal("deleted credential found")
	}
}

func TestConfigChangeAndSanitize(t *testing.T) {
	if got := string(EncodeConfigChange("users/alice")); got != `{"version":2,"entity_path":"users/alice"}` {
		t.Fatalf("EncodeConfigChange = %s", got)
	}
	for in, want := range map[string]string{
		`{"version":2,"entity_path":"users/alice"}`:                 "users/alice",
		`{"version":1,"entity_type":"users","entity_name":"alice"}`: "users/alice",
	} {
		if got, err := DecodeConfigChange([]byte(in)); err != nil || got != want {
			t.Errorf("DecodeConfigChange(%s) = %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{``, `{}`, `{"version":2}`, `[1]`} {
		if _, err := DecodeConfigChange([]byte(bad)); err == nil {
			t.Errorf("DecodeConfigChange(%q) accepted", bad)
		}
	}
	// Expected values are what Kafka's Sanitizer (URLEncoder plus its two
	// replacements) gives.
	for in, want := range map[string]string{
		"alice": "alice", "a b": "a%20b", "a*b": "a%2Ab", "CN=x,O=y": "CN%3Dx%2CO%3Dy",
		"us.er-_1": "us.er-_1", "ü": "%C3%BC", "a/b": "a%2Fb", "a+b": "a%2Bb",
	} {
		if got := SanitizeEntityName(in); got != want {
			t.Errorf("SanitizeEntityName(%q) = %q, want %q", in, got, want)
		}
		if back, err := DesanitizeEntityName(want); err != nil || back != in {
			t.Errorf("DesanitizeEntityName(%q) = %q, %v", want, back, err)
		}
	}
}

func FuzzScramServer(f *testing.F) {
	f.Add([]byte(rfc7677ClientFirst), []byte(rfc7677ClientFinal))
	f.Add([]byte("n,a=user,n=user,r=x,tokenauth=true"), []byte("c=biws,r=x,p="))
	f.Add([]byte("y,,n=us=3Der,r=abc"), []byte(",p=,p=,p="))
	cred, err := NewScramCredential(ScramSHA256, "pencil", mustB64(f, rfc7677Salt), 4096)
	if err != nil {
		f.Fatal(err)
	}
	c := &ScramCredentialCache{}
	c.Set(ScramSHA256, "user", cred)
	f.Fuzz(func(t *testing.T, first, final []byte) {
		s, _ := NewScramServer(ScramSHA256, ScramServerConfig{Credentials: c, Nonce: fixedNonce(rfc7677ServerNonce)})
		if _, err := s.Step(first); err != nil {
			if !errors.Is(err, ErrAuthenticationFailed) {
				t.Fatalf("unexpected error class: %v", err)
			}
			return
		}
		if _, err := s.Step(final); err == nil && !s.Done() {
			t.Fatal("no error but not done")
		}
	})
}

// TestScramCredentialFromSaltedPassword: AlterUserScramCredentials' salted
// password (Hi computed by the client) gives the RFC-derived golden keys;
// Kafka's refusals wrap their sentinels.
func TestScramCredentialFromSaltedPassword(t *testing.T) {
	salt := mustB64(t, rfc7677Salt)
	for _, tc := range []struct {
		m                    ScramMechanism
		storedKey, serverKey string
	}{
		{ScramSHA256, goldenSHA256StoredKey, goldenSHA256ServerKey},
		{ScramSHA512, goldenSHA512StoredKey, goldenSHA512ServerKey},
	} {
		sp, err := tc.m.saltedPassword("pencil", salt, 4096)
		if err != nil {
			t.Fatal(err)
		}
		cred, err := ScramCredentialFromSaltedPassword(tc.m, salt, sp, 4096)
		if err != nil {
			t.Fatal(err)
		}
		want := "salt=" + rfc7677Salt + ",stored_key=" + tc.storedKey + ",server_key=" + tc.serverKey + ",iterations=4096"
		if got := FormatScramCredential(cred); got != want {
			t.Fatalf("%s\n got %s\nwant %s", tc.m, got, want)
		}
	}
	for _, tc := range []struct {
		m    ScramMechanism
		salt []byte
		sp   []byte
		iter int
		want error
	}{
		{0, salt, salt, 4096, ErrUnsupportedMechanism},
		{ScramSHA256, salt, salt, 4095, ErrUnacceptableCredential},
		{ScramSHA256, salt, salt, ScramMaxIterations + 1, ErrUnacceptableCredential},
		{ScramSHA256, nil, salt, 4096, ErrUnacceptableCredential},
		{ScramSHA256, salt, nil, 4096, ErrUnacceptableCredential},
	} {
		if _, err := ScramCredentialFromSaltedPassword(tc.m, tc.salt, tc.sp, tc.iter); !errors.Is(err, tc.want) {
			t.Errorf("%v/%d: %v, want %v", tc.m, tc.iter, err, tc.want)
		}
	}
}

func TestScramCredentialCacheUsers(t *testing.T) {
	c := &ScramCredentialCache{}
	cred := ScramCredential{Salt: []byte("s"), StoredKey: []byte("k"), ServerKey: []byte("v"), Iterations: 4096}
	c.Set(ScramSHA256, "bob", cred)
	c.Set(ScramSHA512, "bob", cred)
	c.Set(ScramSHA512, "alice", cred)
	if got := c.Users(); len(got) != 2 || got[0] != "alice" || got[1] != "bob" {
		t.Fatalf("users %v", got)
	}
	c.SetUser("alice", nil)
	if got := c.Users(); len(got) != 1 || got[0] != "bob" {
		t.Fatalf("users %v", got)
	}
}
