package security

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

func TestNewSASLServer(t *testing.T) {
	creds := cacheWith(t, ScramSHA512, "alice", "pw", 4096)
	c := SASLConfig{EnabledMechanisms: []string{"PLAIN", "SCRAM-SHA-512"}, Plain: PlainUsers{"bob": "bob-pw"}, Scram: creds}
	if err := ValidateSASLConfig(c); err != nil {
		t.Fatal(err)
	}
	s, err := NewSASLServer(c, "PLAIN")
	if err != nil || s.Mechanism() != "PLAIN" {
		t.Fatalf("PLAIN: %v", err)
	}
	if _, err := s.Step([]byte("\x00bob\x00bob-pw")); err != nil || s.AuthorizationID() != "bob" {
		t.Fatalf("PLAIN login: %v", err)
	}
	s, err = NewSASLServer(c, "SCRAM-SHA-512")
	if err != nil {
		t.Fatal(err)
	}
	cl := newTestClient(ScramSHA512, "alice", "pw")
	sf, err := s.Step([]byte(cl.first()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Step([]byte(cl.final(t, string(sf), ""))); err != nil || !s.Done() || s.AuthorizationID() != "alice" {
		t.Fatalf("SCRAM login: %v", err)
	}
	for _, m := range []string{"SCRAM-SHA-256", "GSSAPI", "OAUTHBEARER", "plain"} {
		if _, err := NewSASLServer(c, m); !errors.Is(err, ErrUnsupportedMechanism) {
			t.Errorf("%s: %v", m, err)
		}
	}
	for _, bad := range []SASLConfig{
		{},
		{EnabledMechanisms: []string{"GSSAPI"}},
		{EnabledMechanisms: []string{"PLAIN"}},
		{EnabledMechanisms: []string{"SCRAM-SHA-256"}, Plain: PlainUsers{}},
	} {
		if err := ValidateSASLConfig(bad); !errors.Is(err, ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "sasl.enabled.mechanisms:") {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}

// TestSecurityImports checks the package arrow of STYLE.md §1: security
// imports the standard library, zerolog, golang.org/x/crypto and kmsg
// only; never zk nor our other packages.
func TestSecurityImports(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not on PATH; cannot list dependencies")
	}
	out, err := exec.Command(gobin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	allowed := []string{"github.com/kafkazk/broker/security", "github.com/rs/zerolog", "golang.org/x/crypto/",
		"github.com/twmb/franz-go/pkg/kmsg", "github.com/mattn/go-colorable", "github.com/mattn/go-isatty", "golang.org/x/sys/"}
	for _, dep := range strings.Fields(string(out)) {
		ok := false
		for _, a := range allowed {
			ok = ok || dep == a || (strings.HasSuffix(a, "/") && strings.HasPrefix(dep, a)) || strings.HasPrefix(dep, a+"/")
		}
		if !ok {
			t.Errorf("security depends on %s", dep)
		}
	}
}

func FuzzParsePrincipalMappingRules(f *testing.F) {
	f.Add("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT", "CN=Duke,OU=ServiceUsers,O=Org,C=US")
	f.Add(`RULE:,RULE:,/,RULE:,\//U,RULE:,/RULE:,/`, "RULE:,x")
	f.Add("RULE:(a)/$9$1$0\\/", "a")
	f.Fuzz(func(t *testing.T, rules, dn string) {
		pm, err := ParsePrincipalMappingRules(rules)
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error class: %v", err)
			}
			return
		}
		_ = pm.String()
		if _, err := pm.Name(dn); err != nil && !errors.Is(err, ErrNoMatchingRule) {
			t.Fatalf("Name error class: %v", err)
		}
	})
}
