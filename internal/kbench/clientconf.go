package kbench

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

// ClientConfigOpts reads a file of Kafka client properties (key=value,
// '#' comments, backslash continuations) and returns the kgo options of
// ClientOpts: the secured target of kbench --secure-brokers.
func ClientConfigOpts(path string) ([]kgo.Opt, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	props := map[string]string{}
	sc := bufio.NewScanner(f)
	var line strings.Builder
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if line.Len() == 0 && (l == "" || l[0] == '#' || l[0] == '!') {
			continue
		}
		if strings.HasSuffix(l, `\`) {
			line.WriteString(strings.TrimSuffix(l, `\`))
			continue
		}
		line.WriteString(l)
		k, v, _ := strings.Cut(line.String(), "=")
		props[strings.TrimSpace(k)] = strings.TrimSpace(v)
		line.Reset()
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return ClientOpts(props)
}

// ClientOpts are kgo options for Kafka's client security properties:
// security.protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL),
// sasl.mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) with username and
// password from sasl.jaas.config, and the ssl.* keys as the broker reads
// them (security.TLSSettingsFromConfig).
func ClientOpts(props map[string]string) ([]kgo.Opt, error) {
	proto := strings.ToUpper(props["security.protocol"])
	var opts []kgo.Opt
	switch proto {
	case "", "PLAINTEXT":
		return nil, nil
	case "SSL", "SASL_SSL":
		tctx, err := security.NewTLSContext(security.TLSSettingsFromConfig(props, ""), security.TLSOptions{ReloadInterval: -1})
		if err != nil {
			return nil, err
		}
		nd := &net.Dialer{Timeout: 10 * time.Second}
		opts = append(opts, kgo.Dialer(func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			return (&tls.Dialer{NetDialer: nd, Config: tctx.ClientConfig(host)}).DialContext(ctx, network, addr)
		}))
	case "SASL_PLAINTEXT":
	default:
		return nil, fmt.Errorf("security.protocol %q: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", props["security.protocol"])
	}
	if !strings.HasPrefix(proto, "SASL_") {
		return opts, nil
	}
	entries, err := security.ParseJAASConfig(props["sasl.jaas.config"])
	if err != nil || len(entries) != 1 {
		return nil, fmt.Errorf("sasl.jaas.config: one login module with username and password wanted (%v)", err)
	}
	user, pass := entries[0].Options["username"], entries[0].Options["password"]
	var m sasl.Mechanism
	switch strings.ToUpper(props["sasl.mechanism"]) {
	case "PLAIN":
		m = plain.Auth{User: user, Pass: pass}.AsMechanism()
	case "SCRAM-SHA-256":
		m = scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		m = scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()
	default:
		return nil, fmt.Errorf("sasl.mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", props["sasl.mechanism"])
	}
	return append(opts, kgo.SASL(m)), nil
}
