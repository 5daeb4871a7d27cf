package security

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// KafkaPrincipal is Kafka's "<type>:<name>" identity of a connection.
type KafkaPrincipal struct {
	Type string
	Name string
}

// PrincipalTypeUser is the only principal type Kafka's built-in principal
// builder makes.
const PrincipalTypeUser = "User"

// Anonymous is the principal of an unauthenticated connection (PLAINTEXT, or
// TLS without a client certificate).
var Anonymous = KafkaPrincipal{PrincipalTypeUser, "ANONYMOUS"}

// User returns User:<name>.
func User(name string) KafkaPrincipal { return KafkaPrincipal{PrincipalTypeUser, name} }

func (p KafkaPrincipal) String() string { return p.Type + ":" + p.Name }

// ParseKafkaPrincipal reads "<type>:<name>", splitting at the first ':' as
// Kafka's SecurityUtils.parseKafkaPrincipal does.
func ParseKafkaPrincipal(s string) (KafkaPrincipal, error) {
	t, n, ok := strings.Cut(s, ":")
	if !ok || s == "" {
		return KafkaPrincipal{}, fmt.Errorf("principal %q: expected principalType:principalName: %w", truncate(s, 60), ErrInvalidACL)
	}
	return KafkaPrincipal{t, n}, nil
}

// ErrUnverifiedCertificate is returned by PrincipalFromTLS for a client
// certificate that the TLS handshake did not verify.
var ErrUnverifiedCertificate = errors.New("security: client certificate not verified")

// PrincipalFromTLS is Kafka's principal for a TLS connection: the peer
// certificate's subject in RFC 2253 form mapped by ssl.principal.mapping.rules
// (mapper nil means DEFAULT), or User:ANONYMOUS when the client sent no
// certificate. An error (no rule applies) fails the connection's
// authentication, as in Kafka. A certificate is used only when it was
// verified (cs.VerifiedChains non-empty): a connection whose config asked
// for a certificate without verifying it (tls.RequestClientCert) gets
// ErrUnverifiedCertificate rather than the name the client chose.
func PrincipalFromTLS(cs tls.ConnectionState, mapper *PrincipalMapper) (KafkaPrincipal, error) {
	if len(cs.PeerCertificates) == 0 {
		return Anonymous, nil
	}
	if len(cs.VerifiedChains) == 0 {
		return KafkaPrincipal{}, ErrUnverifiedCertificate
	}
	dn := DistinguishedName(cs.PeerCertificates[0])
	if mapper == nil {
		return User(dn), nil
	}
	name, err := mapper.Name(dn)
	if err != nil {
		return KafkaPrincipal{}, err
	}
	return User(name), nil
}

type rawATV struct {
	Type  asn1.ObjectIdentifier
	Value asn1.RawValue
}

type rawRDNSET []rawATV

// rfc2253Keywords are the attribute types Java's X500Principal.getName()
// writes by name; every other type is written as its OID with the value as
// '#' and the hex of its DER encoding.
var rfc2253Keywords = map[string]string{
	"2.5.4.3":                    "CN",
	"2.5.4.6":                    "C",
	"2.5.4.7":                    "L",
	"2.5.4.8":                    "ST",
	"2.5.4.10":                   "O",
	"2.5.4.11":                   "OU",
	"2.5.4.9":                    "STREET",
	"0.9.2342.19200300.100.1.25": "DC",
	"0.9.2342.19200300.100.1.1":  "UID",
}

// DistinguishedName renders cert's subject as Java's
// X500Principal.getName() (RFC 2253) does, which is the string Kafka's
// principal mapping rules see: most specific RDN first, "," between RDNs,
// "+" inside a multi-valued RDN, and the characters , = + < > # ; " \
// escaped with '\', as are a leading or trailing space.
func DistinguishedName(cert *x509.Certificate) string {
	var rdns []rawRDNSET
	if rest, err := asn1.Unmarshal(cert.RawSubject, &rdns); err != nil || len(rest) != 0 {
		// The certificate parsed, so its subject is a valid Name; this is
		// unreachable in practice. Fall back to Go's rendering.
		return cert.Subject.String()
	}
	parts := make([]string, 0, len(rdns))
	for i := len(rdns) - 1; i >= 0; i-- {
		avas := make([]string, 0, len(rdns[i]))
		for _, atv := range rdns[i] {
			avas = append(avas, formatATV(atv))
		}
		parts = append(parts, strings.Join(avas, "+"))
	}
	return strings.Join(parts, ",")
}

func formatATV(atv rawATV) string {
	oid := atv.Type.String()
	kw, ok := rfc2253Keywords[oid]
	if ok {
		var s string
		if rest, err := asn1.Unmarshal(atv.Value.FullBytes, &s); err == nil && len(rest) == 0 {
			return kw + "=" + escapeRFC2253(s)
		}
		return kw + "=#" + hex.EncodeToString(atv.Value.FullBytes)
	}
	return oid + "=#" + hex.EncodeToString(atv.Value.FullBytes)
}

func escapeRFC2253(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case strings.IndexByte(`,=+<>#;"\`, c) >= 0:
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == ' ' && (i == 0 || i == len(s)-1):
			b.WriteString(`\ `)
		case c == 0:
			b.WriteString(`\00`)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// PrincipalMapper applies ssl.principal.mapping.rules, as Kafka's
// SslPrincipalMapper: a comma-separated list of DEFAULT (the DN unchanged)
// and RULE:<pattern>/<replacement>/[L|U] rules, the first that applies
// wins. A RULE applies when its pattern matches the whole DN; the result is
// the DN with the pattern's matches replaced (Java replacement syntax: $n
// groups, \ escapes), lower- or upper-cased by L or U. Patterns are Go
// regular expressions (RE2), which accept the usual Java syntax except
// backreferences, lookaround and possessive quantifiers; such a rule is a
// config error naming the rule.
type PrincipalMapper struct {
	rules []mappingRule
}

type mappingRule struct {
	isDefault    bool
	pattern      string
	re           *regexp.Regexp
	whole        *regexp.Regexp
	replacement  string
	lower, upper bool
}

const rulePattern = `(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)`

var (
	ruleSplitter = regexp.MustCompile(`\s*(` + rulePattern + `)\s*(,\s*|$)`)
	ruleParser   = regexp.MustCompile(`^(?:` + rulePattern + `)`)
)

// DefaultPrincipalMappingRules is Kafka's default ssl.principal.mapping.rules.
const DefaultPrincipalMappingRules = "DEFAULT"

// ParsePrincipalMappingRules parses ssl.principal.mapping.rules. Empty rules
// between commas are ignored; an empty string gives a mapper with no rules,
// which maps nothing (as in Kafka; the config default is "DEFAULT").
func ParsePrincipalMappingRules(rules string) (*PrincipalMapper, error) {
	var out []mappingRule
	for _, m := range ruleSplitter.FindAllStringSubmatch(strings.TrimSpace(rules), -1) {
		rule := m[1]
		loc := ruleParser.FindStringSubmatchIndex(rule)
		if loc == nil || loc[1] != len(rule) {
			end := 0
			if loc != nil {
				end = loc[1]
			}
			return nil, fmt.Errorf("ssl.principal.mapping.rules: invalid rule %q, unmatched substring %q: %w", rule, rule[end:], ErrInvalidConfig)
		}
		group := func(i int) (string, bool) {
			if loc[2*i] < 0 {
				return "", false
			}
			return rule[loc[2*i]:loc[2*i+1]], true
		}
		if _, ok := group(1); ok {
			out = append(out, mappingRule{isDefault: true})
			continue
		}
		pattern, ok := group(2)
		if !ok {
			continue // an empty rule
		}
		repl, _ := group(4)
		flag, _ := group(6)
		re, err := regexp.Compile(pattern)
		if err != nil {
			return nil, fmt.Errorf("ssl.principal.mapping.rules: rule %q: pattern: %v: %w", rule, err, ErrInvalidConfig)
		}
		whole, err := regexp.Compile(`^(?:` + pattern + `)$`)
		if err != nil {
			return nil, fmt.Errorf("ssl.principal.mapping.rules: rule %q: pattern: %v: %w", rule, err, ErrInvalidConfig)
		}
		out = append(out, mappingRule{pattern: pattern, re: re, whole: whole, replacement: repl, lower: flag == "L", upper: flag == "U"})
	}
	return &PrincipalMapper{rules: out}, nil
}

// Name maps a distinguished name to a principal name, or returns
// ErrNoMatchingRule.
func (pm *PrincipalMapper) Name(dn string) (string, error) {
	for _, r := range pm.rules {
		if name, ok := r.apply(dn); ok {
			return name, nil
		}
	}
	return "", fmt.Errorf("no rules apply to %q, rules %v: %w", dn, pm.ruleStrings(), ErrNoMatchingRule)
}

func (pm *PrincipalMapper) ruleStrings() []string {
	out := make([]string, len(pm.rules))
	for i, r := range pm.rules {
		out[i] = r.String()
	}
	return out
}

// String is Kafka's SslPrincipalMapper.toString.
func (pm *PrincipalMapper) String() string {
	return "SslPrincipalMapper(rules = [" + strings.Join(pm.ruleStrings(), ", ") + "])"
}

func (r mappingRule) String() string {
	if r.isDefault {
		return "DEFAULT"
	}
	s := "RULE:" + r.pattern + "/" + r.replacement
	switch {
	case r.lower:
		s += "/L"
	case r.upper:
		s += "/U"
	}
	return s
}

func (r mappingRule) apply(dn string) (string, bool) {
	if r.isDefault {
		return dn, true
	}
	if !r.whole.MatchString(dn) {
		return "", false
	}
	var b strings.Builder
	last := 0
	for _, loc := range r.re.FindAllStringSubmatchIndex(dn, -1) {
		b.WriteString(dn[last:loc[0]])
		expandJava(&b, r.replacement, dn, loc)
		last = loc[1]
	}
	b.WriteString(dn[last:])
	out := b.String()
	switch {
	case r.lower:
		out = strings.ToLower(out)
	case r.upper:
		out = strings.ToUpper(out)
	}
	return out, true
}

// expandJava writes repl with Java's Matcher replacement rules as Kafka
// uses them: "\c" is a literal c; "$n" is group n, taking further digits
// while the number stays a valid group; a "$n" beyond the group count is
// literal text (Kafka escapes those before calling replaceAll).
func expandJava(b *strings.Builder, repl, s string, loc []int) {
	groups := len(loc)/2 - 1
	for i := 0; i < len(repl); i++ {
		c := repl[i]
		switch {
		case c == '\\' && i+1 < len(repl):
			i++
			b.WriteByte(repl[i])
		case c == '$' && i+1 < len(repl) && '0' <= repl[i+1] && repl[i+1] <= '9':
			n := int(repl[i+1] - '0')
			if n > groups {
				b.WriteByte('$')
				continue
			}
			i++
			for i+1 < len(repl) && '0' <= repl[i+1] && repl[i+1] <= '9' {
				next := n*10 + int(repl[i+1]-'0')
				if next > groups {
					break
				}
				n = next
				i++
			}
			if loc[2*n] >= 0 {
				b.WriteString(s[loc[2*n]:loc[2*n+1]])
			}
		default:
			b.WriteByte(c)
		}
	}
}
