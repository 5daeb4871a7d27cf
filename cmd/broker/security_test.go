package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/protocol"
	"github.com/kafkazk/broker/security"
)

// fixtures are security's throwaway TLS files (security/testdata).
var fixtures, _ = filepath.Abs("../../security/testdata")

// securedProps is a broker with a SASL_SSL, an SSL and a PLAINTEXT
// listener, the inter-broker one picked by security.inter.broker.protocol.
func securedProps(t *testing.T) string {
	keystore := filepath.Join(t.TempDir(), "keystore.pem")
	var pem []byte
	for _, f := range []string{"broker.pem", "broker.key"} {
		b, err := os.ReadFile(filepath.Join(fixtures, f))
		if err != nil {
			t.Fatal(err)
		}
		pem = append(pem, b...)
	}
	if err := os.WriteFile(keystore, pem, 0o600); err != nil {
		t.Fatal(err)
	}
	return minimal + `listeners=SASL_SSL://:9094,SSL://:9093,PLAINTEXT://:9092
listener.security.protocol.map=SASL_SSL:SASL_SSL,SSL:SSL,PLAINTEXT:PLAINTEXT
security.inter.broker.protocol=SASL_SSL
sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="admin-secret";
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \
  username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";
ssl.keystore.type=PEM
ssl.keystore.location=` + keystore + `
ssl.truststore.type=PEM
ssl.truststore.location=` + fixtures + `/ca.pem
ssl.endpoint.identification.algorithm=
ssl.protocol=TLSv1.2
ssl.keymanager.algorithm=SunX509
listener.name.ssl.ssl.trustmanager.algorithm=PKIX
listener.name.ssl.ssl.client.auth=required
listener.name.ssl.ssl.principal.mapping.rules=RULE:^CN=([^,]+).*$/$1/L,DEFAULT
sasl.server.max.receive.size=65536
connection.failed.authentication.delay.ms=250
connections.max.reauth.ms=3600000
authorizer.class.name=kafka.security.authorizer.AclAuthorizer
super.users=User:admin;User:CN=broker1,OU=Brokers,O=Test,C=US
allow.everyone.if.no.acl.found=true
zookeeper.set.acl=true
`
}

func TestSecurityConfig(t *testing.T) {
	cfg, err := loadConfig([]string{writeProps(t, securedProps(t))})
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Security
	if cfg.InterBrokerListenerName != "SASL_SSL" {
		t.Errorf("inter-broker listener %q, want SASL_SSL (security.inter.broker.protocol)", cfg.InterBrokerListenerName)
	}
	sasl := s.Listeners["SASL_SSL"]
	if sasl.Protocol != protocol.ProtocolSASLSSL || strings.Join(sasl.Mechanisms, ",") != "SCRAM-SHA-512,PLAIN" {
		t.Errorf("SASL_SSL listener %+v (the listener.name mechanisms override sasl.enabled.mechanisms)", sasl)
	}
	if ok, _ := sasl.PlainUsers.AuthenticatePlain("alice", "alice-secret"); !ok {
		t.Error("PLAIN user alice from the listener's plain.sasl.jaas.config")
	}
	if s.InterBrokerMechanism != "SCRAM-SHA-512" || s.InterBrokerUser != "admin" || s.InterBrokerPassword != "admin-secret" {
		t.Errorf("inter-broker login %s %s/%s", s.InterBrokerMechanism, s.InterBrokerUser, s.InterBrokerPassword)
	}
	ssl := s.Listeners["SSL"]
	if ssl.TLS.ClientAuth != "required" || !strings.HasSuffix(ssl.TLS.KeystoreLocation, "/keystore.pem") {
		t.Errorf("SSL listener TLS %+v", ssl.TLS)
	}
	if sasl.TLS.ClientAuth != "none" {
		t.Errorf("listener.name.ssl.ssl.client.auth leaked to SASL_SSL: %q", sasl.TLS.ClientAuth)
	}

	// KIP-684: a broker-wide ssl.client.auth applies to SSL listeners but
	// not to SASL_SSL ones, where only the listener-prefixed key counts.
	wide, err := loadConfig([]string{writeProps(t, strings.Replace(securedProps(t), "listener.name.ssl.ssl.client.auth=required", "ssl.client.auth=required", 1))})
	if err != nil {
		t.Fatal(err)
	}
	if got := wide.Security.Listeners["SASL_SSL"].TLS.ClientAuth; got != "none" {
		t.Errorf("broker-wide ssl.client.auth on SASL_SSL: %q, want none", got)
	}
	if got := wide.Security.Listeners["SSL"].TLS.ClientAuth; got != "required" {
		t.Errorf("broker-wide ssl.client.auth on SSL: %q, want required", got)
	}
	prefixed, err := loadConfig([]string{writeProps(t, securedProps(t)+"listener.name.sasl_ssl.ssl.client.auth=requested\n")})
	if err != nil {
		t.Fatal(err)
	}
	if got := prefixed.Security.Listeners["SASL_SSL"].TLS.ClientAuth; got != "requested" {
		t.Errorf("listener.name.sasl_ssl.ssl.client.auth: %q, want requested", got)
	}
	if name, err := ssl.PrincipalMapper.Name("CN=Broker1,OU=Brokers,O=Test,C=US"); err != nil || name != "broker1" {
		t.Errorf("mapping rules: %q, %v", name, err)
	}
	if p := s.Listeners["PLAINTEXT"]; p.Protocol != "PLAINTEXT" || p.usesTLS() || p.usesSASL() {
		t.Errorf("PLAINTEXT listener %+v", p)
	}
	if s.MaxReceiveBeforeAuth != 65536 || s.FailedAuthDelay != 250*time.Millisecond || s.MaxReauth != time.Hour {
		t.Errorf("limits %d %v %v", s.MaxReceiveBeforeAuth, s.FailedAuthDelay, s.MaxReauth)
	}
	if !s.Authorizer || !s.AllowEveryoneIfNoACLFound || !s.ZooKeeperSetACL || len(s.SuperUsers) != 2 ||
		s.SuperUsers[1] != security.User("CN=broker1,OU=Brokers,O=Test,C=US") {
		t.Errorf("authorizer %v everyone %v set.acl %v super %v", s.Authorizer, s.AllowEveryoneIfNoACLFound, s.ZooKeeperSetACL, s.SuperUsers)
	}

	// The server's and the inter-broker client's views: a TLS context per
	// TLS listener, SASL with the PLAIN users and the SCRAM cache, and
	// the client on SASL_SSL with TLS and SCRAM-SHA-512.
	cache := &security.ScramCredentialCache{}
	ls, client, err := listenerSecurity(cfg, cache, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if ls["SSL"].TLS == nil || ls["SASL_SSL"].TLS == nil || ls["PLAINTEXT"].TLS != nil {
		t.Errorf("TLS contexts %+v", ls)
	}
	if ls["SASL_SSL"].SASL.Scram != cache || ls["SASL_SSL"].SASL.Plain == nil {
		t.Errorf("SASL config %+v", ls["SASL_SSL"].SASL)
	}
	if client.TLS != ls["SASL_SSL"].TLS || client.SASL == nil || client.SASL.Name() != "SCRAM-SHA-512" {
		t.Errorf("inter-broker client %+v", client)
	}
}

func TestSecurityDefaults(t *testing.T) {
	cfg, err := loadConfig([]string{writeProps(t, minimal)})
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Security
	if s.MaxReceiveBeforeAuth != 524288 || s.FailedAuthDelay != 100*time.Millisecond || s.MaxReauth != 0 ||
		s.Authorizer || s.AllowEveryoneIfNoACLFound || s.ZooKeeperSetACL || s.SuperUsers != nil {
		t.Errorf("defaults %+v", s)
	}
	if s.Listeners["PLAINTEXT"].Protocol != "PLAINTEXT" {
		t.Errorf("listener %+v", s.Listeners["PLAINTEXT"])
	}
	ls, client, err := listenerSecurity(cfg, &security.ScramCredentialCache{}, zerolog.Nop())
	if err != nil || ls["PLAINTEXT"].Protocol != "PLAINTEXT" || client.TLS != nil || client.SASL != nil {
		t.Errorf("plaintext wiring %+v %+v %v", ls, client, err)
	}
}

func TestSecurityConfigErrorsNameTheKey(t *testing.T) {
	saslPlain := minimal + "listeners=SASL_PLAINTEXT://:9092\nlistener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT\n"
	jaas := `listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="b" user_a="b";` + "\n"
	cases := []struct {
		name, body, key string
	}{
		{"both inter-broker keys", minimal + "inter.broker.listener.name=PLAINTEXT\nsecurity.inter.broker.protocol=PLAINTEXT\n", "security.inter.broker.protocol"},
		{"inter-broker protocol without its listener", minimal + "security.inter.broker.protocol=SSL\n", "security.inter.broker.protocol"},
		{"bad inter-broker protocol", minimal + "security.inter.broker.protocol=TLS\n", "security.inter.broker.protocol"},
		{"inter-broker listener unknown", minimal + "inter.broker.listener.name=INTERNAL\n", "inter.broker.listener.name"},
		{"GSSAPI default", saslPlain, "sasl.enabled.mechanisms"},
		{"unsupported mechanism", saslPlain + "sasl.enabled.mechanisms=OAUTHBEARER\n", "sasl.enabled.mechanisms"},
		{"PLAIN without jaas", saslPlain + "sasl.enabled.mechanisms=PLAIN\nsasl.mechanism.inter.broker.protocol=PLAIN\n", "listener.name.sasl_plaintext.plain.sasl.jaas.config"},
		{"bad jaas", saslPlain + "sasl.enabled.mechanisms=PLAIN\nlistener.name.sasl_plaintext.plain.sasl.jaas.config=PlainLoginModule required user_a=\"b\"\n", "listener.name.sasl_plaintext.plain.sasl.jaas.config"},
		{"inter-broker mechanism not enabled", saslPlain + "sasl.enabled.mechanisms=PLAIN\n" + jaas, "sasl.mechanism.inter.broker.protocol"},
		{"inter-broker login missing", saslPlain + "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256\nsasl.mechanism.inter.broker.protocol=SCRAM-SHA-256\n" + jaas, "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config"},
		{"removed authorizer", minimal + "authorizer.class.name=kafka.security.auth.SimpleAclAuthorizer\n", "authorizer.class.name"},
		{"bad super.users", minimal + "super.users=alice\n", "super.users"},
		{"bad allow.everyone", minimal + "allow.everyone.if.no.acl.found=maybe\n", "allow.everyone.if.no.acl.found"},
		{"bad set.acl", minimal + "zookeeper.set.acl=on\n", "zookeeper.set.acl"},
		{"bad receive size", minimal + "sasl.server.max.receive.size=0\n", "sasl.server.max.receive.size"},
		{"negative delay", minimal + "connection.failed.authentication.delay.ms=-1\n", "connection.failed.authentication.delay.ms"},
		{"bad reauth", minimal + "connections.max.reauth.ms=soon\n", "connections.max.reauth.ms"},
		{"unknown prefixed key", minimal + "listener.name.plaintext.foo.bar=1\n", "listener.name.plaintext.foo.bar"},
		{"prefixed gssapi jaas", minimal + "listener.name.plaintext.gssapi.sasl.jaas.config=x\n", "listener.name.plaintext.gssapi.sasl.jaas.config"},
		{"prefix of an unknown listener", minimal + "listener.name.external.ssl.client.auth=required\n", "listener.name.external.ssl.client.auth"},
		{"bad mapping rules", minimal + "listeners=SSL://:9093\nlistener.security.protocol.map=SSL:SSL\nssl.principal.mapping.rules=RULE:nope\n", "ssl.principal.mapping.rules"},
		{"old ssl.protocol", minimal + "listeners=SSL://:9093\nlistener.security.protocol.map=SSL:SSL\nssl.protocol=TLSv1.1\n", "ssl.protocol"},
		{"engine factory", minimal + "listeners=SSL://:9093\nlistener.security.protocol.map=SSL:SSL\nlistener.name.ssl.ssl.engine.factory.class=com.example.Engine\n", "listener.name.ssl.ssl.engine.factory.class"},
		{"bad client auth", minimal + "listeners=SSL://:9093\nlistener.security.protocol.map=SSL:SSL\nlistener.name.ssl.ssl.client.auth=always\n", "listener.name.ssl.ssl.client.auth"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := loadConfig([]string{writeProps(t, c.body)})
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("want a ConfigError, got %v", err)
			}
			if ce.Key != c.key {
				t.Fatalf("error %q should name %q", err, c.key)
			}
		})
	}
}

// TestListenerSecurityKeystoreErrorNamesTheKey: a keystore that does not
// load stops the broker with security's error, which names the key.
func TestListenerSecurityKeystoreErrorNamesTheKey(t *testing.T) {
	body := minimal + "listeners=SSL://:9093\nlistener.security.protocol.map=SSL:SSL\nssl.keystore.location=" + fixtures + "/missing.pem\n"
	cfg, err := loadConfig([]string{writeProps(t, body)})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = listenerSecurity(cfg, &security.ScramCredentialCache{}, zerolog.Nop())
	if err == nil || !strings.Contains(err.Error(), "ssl.keystore.location") || !errors.Is(err, security.ErrInvalidConfig) {
		t.Fatalf("error %v should name ssl.keystore.location", err)
	}
}

// TestSecretsDescribedAsNull: passwords, private keys and JAAS configs
// (listener-prefixed keys are custom configs) are sensitive, so
// DescribeConfigs shows null.
func TestSecretsDescribedAsNull(t *testing.T) {
	cfg, err := loadConfig([]string{writeProps(t, securedProps(t)+"ssl.key.password=k\nssl.keystore.password=s\nssl.truststore.password=t\n")})
	if err != nil {
		t.Fatal(err)
	}
	entries := cluster.BrokerConfigLayers{Static: cfg.StaticProps}.BrokerEntries(true)
	byName := map[string]cluster.BrokerConfigEntry{}
	for _, e := range entries {
		byName[e.Name] = e
	}
	for _, k := range []string{"ssl.key.password", "ssl.keystore.password", "ssl.truststore.password", "ssl.keystore.key",
		"listener.name.sasl_ssl.plain.sasl.jaas.config", "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"} {
		e, ok := byName[k]
		if !ok || !e.Sensitive || e.Value != nil {
			t.Errorf("%s: listed %v sensitive %v value %v", k, ok, e.Sensitive, e.Value)
		}
		for _, s := range e.Synonyms {
			if s.Value != nil {
				t.Errorf("%s: synonym %s shows its value", k, s.Name)
			}
		}
	}
	if e := byName["sasl.enabled.mechanisms"]; e.Sensitive || e.Value == nil || *e.Value != "SCRAM-SHA-512" {
		t.Errorf("sasl.enabled.mechanisms: %+v", e)
	}
}

func TestZooKeeperCredentialsFromKafkaOpts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jaas.conf")
	jaas := `// brokers' JAAS file
KafkaServer {
  org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="x";
};
Client {
  org.apache.zookeeper.server.auth.DigestLoginModule required
  username="kafka"
  password="zk-secret";
};
`
	if err := os.WriteFile(path, []byte(jaas), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := zooKeeperCredentials("-Xmx1G -Djava.security.auth.login.config=" + path + " -Dfoo=bar")
	if err != nil || d == nil || d.User != "kafka" || d.Password != "zk-secret" {
		t.Fatalf("credentials %+v, %v", d, err)
	}
	if d, err := zooKeeperCredentials("-Xmx1G"); d != nil || err != nil {
		t.Fatalf("without a JAAS file: %+v, %v", d, err)
	}
	if _, err := zooKeeperCredentials("-Djava.security.auth.login.config=" + path + ".missing"); err == nil {
		t.Fatal("missing JAAS file accepted")
	}
	noClient := filepath.Join(t.TempDir(), "server-only.conf")
	os.WriteFile(noClient, []byte("KafkaServer {\n org.apache.kafka.common.security.plain.PlainLoginModule required;\n};\n"), 0o600)
	if d, err := zooKeeperCredentials("-Djava.security.auth.login.config=" + noClient); d != nil || err != nil {
		t.Fatalf("without a Client section: %+v, %v", d, err)
	}
}

// TestDynamicReloadKeepsListenerSecurity: a dynamic config reload parses
// the merged layers again; the listener.name.* keys of server.properties
// stay, and one written to a dynamic layer is ignored.
func TestDynamicReloadKeepsListenerSecurity(t *testing.T) {
	props, err := ParseProperties(writeProps(t, securedProps(t)))
	if err != nil {
		t.Fatal(err)
	}
	evil := `org.apache.kafka.common.security.plain.PlainLoginModule required user_mallory="m";`
	cfg, err := buildDynamic(cluster.BrokerConfigLayers{Static: props,
		DynamicBroker: map[string]string{"listener.name.sasl_ssl.plain.sasl.jaas.config": evil, "log.retention.ms": "1000"}})
	if err != nil {
		t.Fatal(err)
	}
	users := cfg.Security.Listeners["SASL_SSL"].PlainUsers
	if ok, _ := users.AuthenticatePlain("alice", "alice-secret"); !ok {
		t.Error("server.properties' PLAIN users lost on reload")
	}
	if ok, _ := users.AuthenticatePlain("mallory", "m"); ok {
		t.Error("a dynamic layer changed the JAAS config")
	}
	if cfg.LogDefaults.RetentionMs != 1000 || cfg.Security.InterBrokerUser != "admin" {
		t.Errorf("reloaded config: retention %d, inter-broker user %q", cfg.LogDefaults.RetentionMs, cfg.Security.InterBrokerUser)
	}
}

// TestAdvertisedEndpointsCarryTheSecurityProtocol: the endpoints zkcoord
// registers (listener_security_protocol_map) carry each listener's real
// protocol, so clients and brokers reading /brokers/ids know to speak TLS
// or SASL.
func TestAdvertisedEndpointsCarryTheSecurityProtocol(t *testing.T) {
	cfg, err := loadConfig([]string{writeProps(t, securedProps(t)+"advertised.listeners=SASL_SSL://b1:9094,SSL://b1:9093,PLAINTEXT://b1:9092\n")})
	if err != nil {
		t.Fatal(err)
	}
	eps, err := advertisedEndpoints(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"SASL_SSL": "SASL_SSL", "SSL": "SSL", "PLAINTEXT": "PLAINTEXT"}
	if len(eps) != 3 {
		t.Fatalf("endpoints %+v", eps)
	}
	for _, e := range eps {
		if e.SecurityProtocol != want[e.Listener] || e.Host != "b1" {
			t.Errorf("endpoint %+v", e)
		}
	}
}

// TestDefaultProtocolMapNamesEveryProtocol: as in Kafka, a listener named
// after its security protocol needs no listener.security.protocol.map.
func TestDefaultProtocolMapNamesEveryProtocol(t *testing.T) {
	for _, proto := range []string{"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"} {
		if got := keyDefaults["listener.security.protocol.map"]; !strings.Contains(","+got+",", ","+proto+":"+proto+",") {
			t.Errorf("default listener.security.protocol.map %q lacks %s:%s", got, proto, proto)
		}
	}
}
