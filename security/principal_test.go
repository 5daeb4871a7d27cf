package security

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"math/big"
	"testing"
	"time"
)

// Cases follow Kafka's SslPrincipalMapperTest, rewritten.
func TestPrincipalMappingRulesValid(t *testing.T) {
	for _, rules := range []string{
		"DEFAULT",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
		"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
		"RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
		"RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
		"RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
		"RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
	} {
		if _, err := ParsePrincipalMappingRules(rules); err != nil {
			t.Errorf("%q: %v", rules, err)
		}
	}
}

func TestPrincipalMappingRulesInvalid(t *testing.T) {
	for _, rules := range []string{
		"default",
		"DEFAUL",
		"DEFAULT/L",
		"DEFAULT/U",
		"RULE:CN=(.*?),OU=ServiceUsers.*/$1",
		"rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
		"RULE:^CN=(?<=x)y$/$1/", // lookbehind: not RE2
	} {
		if _, err := ParsePrincipalMappingRules(rules); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%q: err = %v, want ErrInvalidConfig", rules, err)
		}
	}
}

func TestPrincipalMapper(t *testing.T) {
	pm, err := ParsePrincipalMappingRules("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, " +
		"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L, " +
		"RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U, " +
		"RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U, " +
		"DEFAULT")
	if err != nil {
		t.Fatal(err)
	}
	for dn, want := range map[string]string{
		"CN=Duke,OU=ServiceUsers,O=Org,C=US":        "duke",
		"CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US": "duke@sme",
		"cn=duke,ou=sme,dc=mycp,dc=com":             "DUKE@SME",
		"cN=duke,OU=JavaSoft,O=Sun Microsystems":    "DUKE",
		"OU=JavaSoft,O=Sun Microsystems,C=US":       "OU=JavaSoft,O=Sun Microsystems,C=US",
	} {
		if got, err := pm.Name(dn); err != nil || got != want {
			t.Errorf("Name(%q) = %q, %v; want %q", dn, got, err, want)
		}
	}
}

func TestPrincipalMapperCommaWithWhitespace(t *testing.T) {
	pm, err := ParsePrincipalMappingRules(`RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT`)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := pm.Name(`CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz`); err != nil || got != `Tkac\, Adam` {
		t.Fatalf("got %q, %v", got, err)
	}
}

func TestPrincipalMapperNoRule(t *testing.T) {
	pm, err := ParsePrincipalMappingRules("RULE:^CN=(.*)$/$1/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pm.Name("O=x"); !errors.Is(err, ErrNoMatchingRule) {
		t.Fatalf("err = %v", err)
	}
	empty, _ := ParsePrincipalMappingRules("")
	if _, err := empty.Name("CN=x"); !errors.Is(err, ErrNoMatchingRule) {
		t.Fatalf("empty rules: %v", err)
	}
}

func TestPrincipalMapperReplacement(t *testing.T) {
	for _, tc := range []struct{ rules, dn, want string }{
		{"RULE:^CN=(.*),O=(.*)$/$2-$1/", "CN=a,O=b", "b-a"},
		{"RULE:^CN=(.*)$/$1@$4/", "CN=a", "a@$4"},           // no group 4: literal
		{"RULE:^CN=(.*)$/$12/", "CN=a", "a2"},               // $12 with one group is $1 then "2"
		{"RULE:^CN=(.*)$/\\$1/", "CN=a", "$1"},              // escaped dollar
		{"RULE:^CN=(.*)$/$0!/", "CN=a", "CN=a!"},            // group 0
		{"RULE:^CN=([a-z]+)(x)?$/<$1$2>/", "CN=ab", "<ab>"}, // unset group is empty
	} {
		pm, err := ParsePrincipalMappingRules(tc.rules)
		if err != nil {
			t.Fatalf("%q: %v", tc.rules, err)
		}
		if got, err := pm.Name(tc.dn); err != nil || got != tc.want {
			t.Errorf("%q on %q = %q, %v; want %q", tc.rules, tc.dn, got, err, tc.want)
		}
	}
}

func TestPrincipalMappingRulesSplitting(t *testing.T) {
	for _, tc := range []struct{ want, rules string }{
		{"[]", ""},
		{"[DEFAULT]", "DEFAULT"},
		{"[RULE:/]", "RULE://"},
		{"[RULE:/.*]", "RULE:/.*/"},
		{"[RULE:/.*/L]", "RULE:/.*/L"},
		{"[RULE:/, DEFAULT]", "RULE://,DEFAULT"},
		{"[RULE:/, DEFAULT]", "  RULE:// ,  DEFAULT  "},
		{"[RULE:   /     , DEFAULT]", "  RULE:   /     / ,  DEFAULT  "},
		{"[RULE:  /     /U, DEFAULT]", "  RULE:  /     /U   ,DEFAULT  "},
		{"[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]", "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  "},
		{"[]", ",   , , ,      , , ,   "},
		{"[RULE:/, DEFAULT]", ",,RULE://,,,DEFAULT,,"},
		{"[RULE: /   , DEFAULT]", ",  , RULE: /   /    ,,,   DEFAULT, ,   "},
		{"[RULE:   /  /U, DEFAULT]", "     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,"},
		{`[RULE:\/\\\(\)\n\t/\/\/]`, `RULE:\/\\\(\)\n\t/\/\//`},
		{`[RULE:\**\/+/*/L, RULE:\/*\**/**]`, `RULE:\**\/+/*/L,RULE:\/*\**/**/`},
		{
			`[RULE:,RULE:,/,RULE:,\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, /DEFAULT, DEFAULT]`,
			`RULE:,RULE:,/,RULE:,\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT`,
		},
	} {
		pm, err := ParsePrincipalMappingRules(tc.rules)
		if err != nil {
			t.Errorf("%q: %v", tc.rules, err)
			continue
		}
		if got, want := pm.String(), "SslPrincipalMapper(rules = "+tc.want+")"; got != want {
			t.Errorf("%q:\n got %s\nwant %s", tc.rules, got, want)
		}
	}
}

func selfSigned(t *testing.T, subject pkix.Name) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: subject, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func TestDistinguishedName(t *testing.T) {
	emailOID := asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 1}
	uidOID := asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 1}
	for _, tc := range []struct {
		name    string
		subject pkix.Name
		want    string
	}{
		{"plain", pkix.Name{CommonName: "Duke", OrganizationalUnit: []string{"ServiceUsers"}, Organization: []string{"Org"}, Country: []string{"US"}},
			"CN=Duke,OU=ServiceUsers,O=Org,C=US"},
		{"locality", pkix.Name{CommonName: "Duke", OrganizationalUnit: []string{"SME"}, Organization: []string{"mycp"}, Locality: []string{"Fulton"}, Province: []string{"MD"}, Country: []string{"US"}},
			"CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US"},
		{"escapes", pkix.Name{CommonName: `Tkac, Adam+x=y "q" #1;<a>\`},
			`CN=Tkac\, Adam\+x\=y \"q\" \#1\;\<a\>\\`},
		{"spaces", pkix.Name{CommonName: " lead and trail "}, `CN=\ lead and trail\ `},
		{"email is an OID", pkix.Name{CommonName: "a", ExtraNames: []pkix.AttributeTypeAndValue{{Type: emailOID, Value: "a@b.c"}}},
			// Go encodes the value as a UTF8String (0x0c) of length 5.
			"1.2.840.113549.1.9.1=#0c056140622e63,CN=a"},
		{"uid keyword", pkix.Name{ExtraNames: []pkix.AttributeTypeAndValue{{Type: uidOID, Value: "duke"}}}, "UID=duke"},
		{"utf8", pkix.Name{CommonName: "Jürgen"}, "CN=Jürgen"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cert := selfSigned(t, tc.subject)
			if got := DistinguishedName(cert); got != tc.want {
				t.Fatalf("DistinguishedName = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestPrincipalFromTLS(t *testing.T) {
	cert := selfSigned(t, pkix.Name{CommonName: "Duke", OrganizationalUnit: []string{"ServiceUsers"}, Organization: []string{"Org"}})
	if p, err := PrincipalFromTLS(tls.ConnectionState{}, nil); err != nil || p != Anonymous || p.String() != "User:ANONYMOUS" {
		t.Fatalf("no certificate: %v %v", p, err)
	}
	verified := func(c *x509.Certificate) tls.ConnectionState {
		return tls.ConnectionState{PeerCertificates: []*x509.Certificate{c}, VerifiedChains: [][]*x509.Certificate{{c}}}
	}
	// A certificate nobody verified names no one.
	if _, err := PrincipalFromTLS(tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}, nil); !errors.Is(err, ErrUnverifiedCertificate) {
		t.Fatalf("unverified certificate: %v, want ErrUnverifiedCertificate", err)
	}
	if p, _ := PrincipalFromTLS(verified(cert), nil); p.String() != "User:CN=Duke,OU=ServiceUsers,O=Org" {
		t.Fatalf("default: %v", p)
	}
	pm, _ := ParsePrincipalMappingRules("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L")
	if p, err := PrincipalFromTLS(verified(cert), pm); err != nil || p != User("duke") {
		t.Fatalf("mapped: %v %v", p, err)
	}
	other := selfSigned(t, pkix.Name{CommonName: "x"})
	if _, err := PrincipalFromTLS(verified(other), pm); !errors.Is(err, ErrNoMatchingRule) {
		t.Fatalf("unmapped: %v", err)
	}
}

func TestParseKafkaPrincipal(t *testing.T) {
	p, err := ParseKafkaPrincipal("User:CN=a:b")
	if err != nil || p.Type != "User" || p.Name != "CN=a:b" {
		t.Fatalf("%v %v", p, err)
	}
	for _, bad := range []string{"", "alice"} {
		if _, err := ParseKafkaPrincipal(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestDistinguishedNameMultiValuedRDN(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	uidOID := asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 1}
	raw, err := asn1.Marshal(pkix.RDNSequence{
		{{Type: asn1.ObjectIdentifier{2, 5, 4, 10}, Value: "Org"}},
		{{Type: asn1.ObjectIdentifier{2, 5, 4, 3}, Value: "duke"}, {Type: uidOID, Value: "d1"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), RawSubject: raw, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	if got := DistinguishedName(cert); got != "CN=duke+UID=d1,O=Org" {
		t.Fatalf("got %q", got)
	}
}
