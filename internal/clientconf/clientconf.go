// Package clientconf turns Kafka client properties (a --command-config or
// --secure-config file) into kgo options: security.protocol,
// sasl.mechanism with the credentials of sasl.jaas.config, and the ssl.*
// keys as the broker reads them. kafka-admin and kbench share it.
//
// It imports only the standard library, franz-go and security: never
// protocol, zkcoord or a cmd package (TestImports).
package clientconf

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kafkazk/broker/security"
)

// ReadProperties reads a Java properties file as Kafka's tools do
// (Utils.loadProps): key=value or key:value or key value, '#' and '!'
// comments, a trailing backslash continuing the line (leading blanks of the
// next line dropped), and \t \n \\ escapes.
func ReadProperties(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseProperties(bufio.NewScanner(f))
}

// ParseProperties is ReadProperties for the lines of sc.
func ParseProperties(sc *bufio.Scanner) (map[string]string, error) {
	props := map[string]string{}
	var logical strings.Builder
	cont := false
	for sc.Scan() {
		line := strings.TrimLeft(sc.Text(), " \t\f")
		if !cont && (line == "" || line[0] == '#' || line[0] == '!') {
			continue
		}
		// An odd number of trailing backslashes continues the line.
		n := len(line) - len(strings.TrimRight(line, `\`))
		cont = n%2 == 1
		if cont {
			line = line[:len(line)-1]
		}
		logical.WriteString(line)
		if cont {
			continue
		}
		k, v := splitProperty(logical.String())
		props[k] = v
		logical.Reset()
	}
	if logical.Len() > 0 {
		k, v := splitProperty(logical.String())
		props[k] = v
	}
	return props, sc.Err()
}

// splitProperty splits at the first unescaped '=', ':' or blank.
func splitProperty(line string) (string, string) {
	for i := 0; i < len(line); i++ {
		switch line[i] {
		case '\\':
			i++
		case '=', ':', ' ', '\t':
			key := line[:i]
			rest := strings.TrimLeft(line[i+1:], " \t")
			if line[i] == ' ' || line[i] == '\t' {
				if len(rest) > 0 && (rest[0] == '=' || rest[0] == ':') {
					rest = strings.TrimLeft(rest[1:], " \t")
				}
			}
			return unescapeProperty(key), unescapeProperty(rest)
		}
	}
	return unescapeProperty(line), ""
}

func unescapeProperty(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// FileOpts is Opts for the properties file at path.
func FileOpts(path string, dialTimeout time.Duration) ([]kgo.Opt, error) {
	props, err := ReadProperties(path)
	if err != nil {
		return nil, err
	}
	return Opts(props, dialTimeout)
}

// Opts are kgo options for Kafka's client security properties:
// security.protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL; empty is
// PLAINTEXT, which needs no options), sasl.mechanism (PLAIN, SCRAM-SHA-256,
// SCRAM-SHA-512; Kafka's default is GSSAPI, which is not supported) with
// username and password from sasl.jaas.config's PlainLoginModule or
// ScramLoginModule, and the ssl.* keys as the broker reads them
// (security.TLSSettingsFromConfig: PEM or PKCS12 keystore and truststore,
// ssl.endpoint.identification.algorithm). dialTimeout bounds the TLS dial.
func Opts(props map[string]string, dialTimeout time.Duration) ([]kgo.Opt, error) {
	proto := strings.ToUpper(strings.TrimSpace(props["security.protocol"]))
	if proto == "" {
		proto = "PLAINTEXT"
	}
	var opts []kgo.Opt
	switch proto {
	case "PLAINTEXT":
		return nil, nil
	case "SSL", "SASL_SSL":
		tctx, err := security.NewTLSContext(security.TLSSettingsFromConfig(props, ""), security.TLSOptions{ReloadInterval: -1})
		if err != nil {
			return nil, err
		}
		dialer := &net.Dialer{Timeout: dialTimeout}
		opts = append(opts, kgo.Dialer(func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			td := &tls.Dialer{NetDialer: dialer, Config: tctx.ClientConfig(host)}
			return td.DialContext(ctx, network, addr)
		}))
	case "SASL_PLAINTEXT":
	default:
		return nil, fmt.Errorf("security.protocol %q: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", props["security.protocol"])
	}
	if proto == "SASL_PLAINTEXT" || proto == "SASL_SSL" {
		m, err := saslMechanism(props)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

// saslMechanism is the client side of sasl.mechanism with the credentials
// of sasl.jaas.config.
func saslMechanism(props map[string]string) (sasl.Mechanism, error) {
	mech := strings.ToUpper(strings.TrimSpace(props["sasl.mechanism"]))
	if mech == "" {
		mech = "GSSAPI"
	}
	jaas := props["sasl.jaas.config"]
	if jaas == "" {
		return nil, fmt.Errorf("sasl.jaas.config is required for %s (JAAS files through java.security.auth.login.config are not read)", mech)
	}
	entries, err := security.ParseJAASConfig(jaas)
	if err != nil {
		return nil, fmt.Errorf("sasl.jaas.config: %w", err)
	}
	if len(entries) != 1 {
		return nil, fmt.Errorf("sasl.jaas.config must hold one login module, has %d", len(entries))
	}
	user, pass := entries[0].Options["username"], entries[0].Options["password"]
	if user == "" {
		return nil, fmt.Errorf("sasl.jaas.config has no username")
	}
	switch mech {
	case "PLAIN":
		return plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism(), nil
	default:
		return nil, fmt.Errorf("sasl.mechanism %s is not supported (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)", mech)
	}
}
