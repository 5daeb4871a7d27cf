package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/protocol"
	"github.com/kafkazk/broker/security"
	"github.com/kafkazk/broker/zkcoord"
)

// aclAuthorizerClass is the one authorizer.class.name served: Kafka 3.x's
// ZooKeeper-mode AclAuthorizer (kafka.security.auth.SimpleAclAuthorizer
// was removed in Kafka 3.0).
const aclAuthorizerClass = "kafka.security.authorizer.AclAuthorizer"

// securityProtocols are the values of listener.security.protocol.map and
// security.inter.broker.protocol.
var securityProtocols = []string{protocol.ProtocolPlaintext, protocol.ProtocolSSL,
	protocol.ProtocolSASLPlaintext, protocol.ProtocolSASLSSL}

// ListenerSecurity is the parsed security of one listener: its keys as
// Kafka reads them, listener.name.<listener>.<key> over <key>.
type ListenerSecurity struct {
	Name     string
	Protocol string
	// TLS is the listener's ssl.* settings (SSL, SASL_SSL).
	TLS security.TLSSettings
	// PrincipalMapper is ssl.principal.mapping.rules (SSL).
	PrincipalMapper *security.PrincipalMapper
	// Mechanisms is sasl.enabled.mechanisms (SASL_*).
	Mechanisms []string
	// PlainUsers are the user_<name> entries of the listener's
	// plain.sasl.jaas.config (PLAIN enabled).
	PlainUsers security.PlainUsers
	// JAAS is each mechanism's listener.name.<l>.<mechanism>.sasl.jaas.config.
	JAAS map[string][]security.JAASEntry
}

func (ls *ListenerSecurity) usesTLS() bool {
	return ls.Protocol == protocol.ProtocolSSL || ls.Protocol == protocol.ProtocolSASLSSL
}

func (ls *ListenerSecurity) usesSASL() bool {
	return ls.Protocol == protocol.ProtocolSASLPlaintext || ls.Protocol == protocol.ProtocolSASLSSL
}

// SecurityConfig is the parsed security configuration.
type SecurityConfig struct {
	Listeners map[string]*ListenerSecurity // by listener name
	// InterBrokerMechanism is sasl.mechanism.inter.broker.protocol, and
	// InterBrokerUser/Password the username and password of that
	// mechanism's JAAS entry on the inter-broker listener (SASL only).
	InterBrokerMechanism string
	InterBrokerUser      string
	InterBrokerPassword  string
	MaxReceiveBeforeAuth int32         // sasl.server.max.receive.size
	FailedAuthDelay      time.Duration // connection.failed.authentication.delay.ms
	MaxReauth            time.Duration // connections.max.reauth.ms
	// Authorizer: authorizer.class.name is AclAuthorizer.
	Authorizer                bool
	SuperUsers                []security.KafkaPrincipal // super.users
	AllowEveryoneIfNoACLFound bool                      // allow.everyone.if.no.acl.found
	ZooKeeperSetACL           bool                      // zookeeper.set.acl
}

// listenerPrefixedKey reports whether k is a listener.name.<listener>.<key>
// form this broker reads: an ssl.* or sasl.* key of the table, or
// <mechanism>.sasl.jaas.config for a mechanism it serves.
func listenerPrefixedKey(k string) bool {
	rest, ok := strings.CutPrefix(k, "listener.name.")
	if !ok {
		return false
	}
	name, suffix, ok := strings.Cut(rest, ".")
	if !ok || name == "" {
		return false
	}
	if _, known := keyDefaults[suffix]; known &&
		(strings.HasPrefix(suffix, "ssl.") || suffix == "sasl.enabled.mechanisms") {
		return true
	}
	mech, tail, ok := strings.Cut(suffix, ".")
	return ok && tail == "sasl.jaas.config" && slices.Contains(security.SupportedSASLMechanisms, strings.ToUpper(mech))
}

func listenerPrefix(listener string) string {
	return "listener.name." + strings.ToLower(listener) + "."
}

// listenerStr is key for listener: the listener.name form over the plain one.
func (p *propReader) listenerStr(listener, key string) (value, setAs string) {
	if k := listenerPrefix(listener) + key; p.props[k] != "" {
		return p.props[k], k
	}
	return p.str(key), key
}

// security parses the security keys for c's listeners.
func (p *propReader) security(c *Config) SecurityConfig {
	s := SecurityConfig{Listeners: map[string]*ListenerSecurity{}}
	known := map[string]bool{}
	for _, l := range c.Listeners {
		known[strings.ToLower(l.Name)] = true
	}
	for k := range p.props {
		if rest, ok := strings.CutPrefix(k, "listener.name."); ok {
			if name, _, _ := strings.Cut(rest, "."); !known[name] {
				p.fail(k, "no listener %s in listeners", strings.ToUpper(name))
			}
		}
	}
	for _, l := range c.Listeners {
		ls := &ListenerSecurity{Name: l.Name, Protocol: c.SecurityProtocolMap[l.Name], JAAS: map[string][]security.JAASEntry{}}
		s.Listeners[l.Name] = ls
		if ls.usesTLS() {
			ls.TLS = security.TLSSettingsFromConfig(p.props, l.Name)
			v, key := p.listenerStr(l.Name, "ssl.client.auth")
			if !slices.Contains([]string{"none", "requested", "required"}, v) {
				p.fail(key, "%q is not none, requested or required", v)
			}
			if v, key := p.listenerStr(l.Name, "ssl.protocol"); !slices.Contains([]string{"TLSv1.2", "TLSv1.3", "TLS"}, v) {
				p.fail(key, "%q is not TLSv1.2, TLSv1.3 or TLS (older protocols are not supported)", v)
			}
			if v, key := p.listenerStr(l.Name, "ssl.engine.factory.class"); v != "" {
				p.fail(key, "SslEngineFactory plugins are not supported")
			}
			// As Kafka's ChannelBuilders: on SASL_SSL only the
			// listener-prefixed ssl.client.auth applies (KIP-684).
			if ls.Protocol == protocol.ProtocolSASLSSL && key == "ssl.client.auth" {
				ls.TLS.ClientAuth = "none"
			}
		}
		if ls.Protocol == protocol.ProtocolSSL {
			v, key := p.listenerStr(l.Name, "ssl.principal.mapping.rules")
			m, err := security.ParsePrincipalMappingRules(v)
			if err != nil {
				p.fail(key, "%v", err)
			}
			ls.PrincipalMapper = m
		}
		if !ls.usesSASL() {
			continue
		}
		v, key := p.listenerStr(l.Name, "sasl.enabled.mechanisms")
		for _, m := range strings.Split(v, ",") {
			if m = strings.TrimSpace(m); m == "" {
				continue
			}
			if !slices.Contains(security.SupportedSASLMechanisms, m) {
				p.fail(key, "mechanism %s (listener %s) is not supported: enable some of %s", m, l.Name,
					strings.Join(security.SupportedSASLMechanisms, ", "))
				continue
			}
			ls.Mechanisms = append(ls.Mechanisms, m)
		}
		if len(ls.Mechanisms) == 0 {
			p.fail(key, "names no mechanism for SASL listener %s", l.Name)
		}
		for _, m := range security.SupportedSASLMechanisms {
			jk := listenerPrefix(l.Name) + strings.ToLower(m) + ".sasl.jaas.config"
			text, ok := p.props[jk]
			if !ok {
				continue
			}
			entries, err := security.ParseJAASConfig(text)
			if err != nil {
				p.fail(jk, "%v", err)
				continue
			}
			ls.JAAS[m] = entries
		}
		if slices.Contains(ls.Mechanisms, "PLAIN") {
			jk := listenerPrefix(l.Name) + "plain.sasl.jaas.config"
			if ls.JAAS["PLAIN"] == nil {
				p.fail(jk, "is required with PLAIN enabled on listener %s (its user_<name>=\"<password>\" entries are the users)", l.Name)
			} else if users, err := security.PlainUsersFromJAAS(ls.JAAS["PLAIN"]); err != nil {
				p.fail(jk, "%v", err)
			} else {
				ls.PlainUsers = users
			}
		}
	}

	if ib := s.Listeners[c.InterBrokerListenerName]; ib != nil && ib.usesSASL() {
		mech := p.str("sasl.mechanism.inter.broker.protocol")
		s.InterBrokerMechanism = mech
		if !slices.Contains(ib.Mechanisms, mech) {
			p.fail("sasl.mechanism.inter.broker.protocol", "%s must be in sasl.enabled.mechanisms of the inter-broker listener %s (%s)",
				mech, ib.Name, strings.Join(ib.Mechanisms, ","))
		} else {
			module := security.ScramLoginModule
			if mech == "PLAIN" {
				module = security.PlainLoginModule
			}
			jk := listenerPrefix(ib.Name) + strings.ToLower(mech) + ".sasl.jaas.config"
			u, pw, err := security.LoginCredentials(ib.JAAS[mech], module)
			if err != nil {
				p.fail(jk, "the broker's own inter-broker login (username and password): %v", err)
			}
			s.InterBrokerUser, s.InterBrokerPassword = u, pw
		}
	}

	s.MaxReceiveBeforeAuth = int32(p.int("sasl.server.max.receive.size", 1, math.MaxInt32))
	s.FailedAuthDelay = p.intMs("connection.failed.authentication.delay.ms", 0)
	s.MaxReauth = p.ms("connections.max.reauth.ms", 0)
	switch class := p.str("authorizer.class.name"); class {
	case "":
	case aclAuthorizerClass:
		s.Authorizer = true
	default:
		p.fail("authorizer.class.name", "%q is not supported (only %s, or empty for none)", class, aclAuthorizerClass)
	}
	if v := p.str("super.users"); v != "" {
		users, err := security.ParseSuperUsers(v)
		if err != nil {
			p.fail("super.users", "%v", err)
		}
		s.SuperUsers = users
	}
	s.AllowEveryoneIfNoACLFound = p.bool("allow.everyone.if.no.acl.found")
	s.ZooKeeperSetACL = p.bool("zookeeper.set.acl")
	return s
}

// interBrokerListener resolves inter.broker.listener.name or
// security.inter.broker.protocol (a listener named after the protocol, as
// Kafka's ListenerName.forSecurityProtocol), of which at most one may be
// set; "" when neither is.
func (p *propReader) interBrokerListener(listeners []Listener) string {
	name, nameSet := p.props["inter.broker.listener.name"]
	proto, protoSet := p.props["security.inter.broker.protocol"]
	key := "inter.broker.listener.name"
	switch {
	case nameSet && protoSet:
		p.fail("security.inter.broker.protocol", "only one of inter.broker.listener.name and security.inter.broker.protocol may be set")
		return ""
	case protoSet:
		if !slices.Contains(securityProtocols, proto) {
			p.fail("security.inter.broker.protocol", "%q is not one of %s", proto, strings.Join(securityProtocols, ", "))
			return ""
		}
		name, key = proto, "security.inter.broker.protocol"
	case !nameSet:
		return ""
	}
	name = strings.ToUpper(name)
	for _, l := range listeners {
		if l.Name == name {
			return name
		}
	}
	p.fail(key, "no listener %s in listeners", name)
	return ""
}

// zooKeeperCredentials reads the broker's ZooKeeper digest identity as
// Kafka's JVM does: the JAAS file named by
// -Djava.security.auth.login.config=<file> in KAFKA_OPTS, section Client,
// DigestLoginModule's username and password. Nil without such a file or
// section.
func zooKeeperCredentials(kafkaOpts string) (*zkcoord.DigestCredentials, error) {
	var path string
	for _, f := range strings.Fields(kafkaOpts) {
		if v, ok := strings.CutPrefix(f, "-Djava.security.auth.login.config="); ok {
			path = strings.Trim(v, `"'`)
		}
	}
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("KAFKA_OPTS -Djava.security.auth.login.config: %w", err)
	}
	sections, err := security.ParseJAASFile(string(b))
	if err != nil {
		return nil, fmt.Errorf("JAAS file %s: %w", path, err)
	}
	entries, ok := sections["Client"]
	if !ok {
		return nil, nil
	}
	u, pw, err := security.LoginCredentials(entries, security.ZooKeeperDigestModule)
	if err != nil {
		return nil, fmt.Errorf("JAAS file %s, section Client: %w", path, err)
	}
	return &zkcoord.DigestCredentials{User: u, Password: pw}, nil
}

// listenerSecurity builds the server's view of every listener: the TLS
// contexts (loading the key files, which reload when they change), the
// SASL servers' credentials (PLAIN users, SCRAM from scram), and the
// inter-broker client's TLS and SASL.
func listenerSecurity(cfg *Config, scram security.ScramCredentialLookup, log zerolog.Logger) (map[string]protocol.ListenerSecurity, protocol.ClientSecurity, error) {
	out := map[string]protocol.ListenerSecurity{}
	var client protocol.ClientSecurity
	for _, l := range cfg.Listeners {
		ls := cfg.Security.Listeners[l.Name]
		ps := protocol.ListenerSecurity{Protocol: ls.Protocol, PrincipalMapper: ls.PrincipalMapper}
		if ls.usesTLS() {
			tc, err := security.NewTLSContext(ls.TLS, security.TLSOptions{Log: log.With().Str("listener", l.Name).Logger()})
			if err != nil {
				return nil, client, fmt.Errorf("listener %s: %w", l.Name, err)
			}
			ps.TLS = tc
		}
		if ls.usesSASL() {
			ps.SASL = security.SASLConfig{EnabledMechanisms: ls.Mechanisms, Scram: scram}
			if ls.PlainUsers != nil {
				ps.SASL.Plain = ls.PlainUsers
			}
			if err := security.ValidateSASLConfig(ps.SASL); err != nil {
				return nil, client, fmt.Errorf("listener %s: %w", l.Name, err)
			}
		}
		out[l.Name] = ps
		if l.Name == cfg.InterBrokerListenerName {
			client.TLS = ps.TLS
			if ls.usesSASL() {
				m, err := protocol.SASLMechanism(cfg.Security.InterBrokerMechanism, cfg.Security.InterBrokerUser, cfg.Security.InterBrokerPassword)
				if err != nil {
					return nil, client, fmt.Errorf("sasl.mechanism.inter.broker.protocol: %w", err)
				}
				client.SASL = m
			}
		}
	}
	return out, client, nil
}

// scramAdmin adapts zkcoord's ScramStore to protocol.ScramAdmin.
type scramAdmin struct{ st *zkcoord.ScramStore }

func (a scramAdmin) DescribeScramUsers(ctx context.Context, users []string) (map[string][]protocol.ScramCredentialInfo, error) {
	got, err := a.st.DescribeScramUsers(ctx, users)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]protocol.ScramCredentialInfo, len(got))
	for u, infos := range got {
		for _, i := range infos {
			out[u] = append(out[u], protocol.ScramCredentialInfo{Mechanism: i.Mechanism, Iterations: i.Iterations})
		}
	}
	return out, nil
}

func (a scramAdmin) AlterScramUsers(ctx context.Context, upserts []protocol.ScramUpsert, deletions []protocol.ScramDeletion) map[string]error {
	ups := make([]zkcoord.ScramUpsert, len(upserts))
	for i, u := range upserts {
		ups[i] = zkcoord.ScramUpsert{User: u.User, Mechanism: u.Mechanism, Iterations: u.Iterations, Salt: u.Salt, SaltedPassword: u.SaltedPassword}
	}
	dels := make([]zkcoord.ScramDeletion, len(deletions))
	for i, d := range deletions {
		dels[i] = zkcoord.ScramDeletion{User: d.User, Mechanism: d.Mechanism}
	}
	return a.st.AlterScramUsers(ctx, ups, dels)
}
