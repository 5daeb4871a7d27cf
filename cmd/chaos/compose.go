package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kafkazk/broker/internal/chaos"
)

// runCompose is `chaos compose`: the workload and checker of the matrix
// against a running docker-compose cluster, with docker faults
// (chaos.ComposeScenarios). scripts/chaos-compose.sh, compose-test.sh and
// demo-failover.sh run it.
//
//	chaos compose -brokers 1=127.0.0.1:39092,... -containers 1=<id>,...
//	    -zk zookeeper=127.0.0.1:39181=<id>[,...] -network <net> [-scenarios kill,pause] [-out f.md]
func runCompose(args []string) int {
	fs := flag.NewFlagSet("chaos compose", flag.ExitOnError)
	brokers := fs.String("brokers", "", "id=host:port of each broker's host listener, comma-separated")
	containers := fs.String("containers", "", "id=container of each broker, comma-separated")
	zks := fs.String("zk", "", "name=host:port=container of each ZooKeeper server, comma-separated")
	network := fs.String("network", "", "the compose network")
	only := fs.String("scenarios", "", "comma-separated scenario names (default: all but random-mix)")
	session := fs.Duration("session", 6*time.Second, "the brokers' zookeeper.session.timeout.ms")
	random := fs.Duration("random", 2*time.Minute, "length of the random mix")
	out := fs.String("out", "", "also write the Markdown report here")
	clientConfig := fs.String("client-config", "", "librdkafka properties (security.protocol, sasl.*, ssl.ca.location) for the secured cluster")
	watchState := fs.Bool("watch", false, "log every change of brokers, controller, leader and ISR (the demo's timeline)")
	seed := fs.Int64("seed", time.Now().UnixNano(), "random seed")
	list := fs.Bool("list", false, "list the scenarios and exit")
	_ = fs.Parse(args)
	logf := func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, a...)...)
	}
	all := chaos.ComposeScenarios(*session, *random)
	if *list {
		for _, s := range all {
			fmt.Printf("%-26s %s\n", s.Name, s.Desc)
		}
		return 0
	}
	var scs []chaos.ComposeScenario
	for _, s := range all {
		if (*only == "" && s.Name != "random-mix") || containsName(*only, s.Name) {
			scs = append(scs, s)
		}
	}
	if len(scs) == 0 {
		logf("no scenario matches %q (see -list)", *only)
		return 2
	}
	cfg := chaos.ComposeConfig{Brokers: map[int32]string{}, Containers: map[int32]string{}, Network: *network,
		Seed: *seed, Logf: logf, Watch: *watchState}
	var err error
	if cfg.Brokers, err = idMap(*brokers); err == nil {
		cfg.Containers, err = idMap(*containers)
	}
	if err == nil {
		for _, z := range strings.Split(*zks, ",") {
			f := strings.Split(z, "=")
			if len(f) != 3 {
				err = fmt.Errorf("-zk %q: want name=host:port=container", z)
				break
			}
			cfg.ZK = append(cfg.ZK, chaos.ZKNode{Name: f[0], HostPort: f[1], Container: f[2]})
		}
	}
	if err == nil && len(cfg.Brokers) != len(cfg.Containers) {
		err = fmt.Errorf("-brokers and -containers name different brokers")
	}
	if err == nil && *clientConfig != "" {
		cfg.ClientOpts, err = clientOpts(*clientConfig)
	}
	if err != nil {
		logf("%v", err)
		return 2
	}
	if cfg.Dir, err = os.MkdirTemp("", "chaos-compose-"); err != nil {
		logf("%v", err)
		return 1
	}
	defer os.RemoveAll(cfg.Dir)
	c, err := chaos.ConnectCompose(cfg)
	if err != nil {
		logf("%v", err)
		return 1
	}
	defer c.ZK.Close()
	d, err := chaos.NewDocker(cfg)
	if err != nil {
		logf("%v", err)
		return 1
	}
	start := time.Now()
	var results []chaos.Result
	ok := true
	for _, sc := range scs {
		r := chaos.RunCompose(cfg, c, d, sc)
		results = append(results, r)
		ok = ok && r.Passed()
	}
	header := fmt.Sprintf("Compose run of %s, %s, seed %d. docker-compose cluster (%d brokers, %d ZooKeeper), a fresh topic of %d partitions at RF 3 with min.insync.replicas=2 per scenario; zookeeper.session.timeout.ms=%d.",
		start.Format(time.RFC3339), time.Since(start).Round(time.Second), *seed, len(cfg.Brokers), len(cfg.ZK), chaos.Partitions, session.Milliseconds())
	chaos.WriteReport(os.Stdout, results, header)
	if *out != "" {
		f, err := os.Create(*out)
		if err == nil {
			chaos.WriteReport(f, results, header)
			err = f.Close()
		}
		if err != nil {
			logf("write %s: %v", *out, err)
			return 1
		}
	}
	// Not go test's "ok"/"FAIL" lines: compose-test.sh prints those per
	// step, and scripts/test.sh counts them.
	for _, r := range results {
		fmt.Printf("scenario %s: %s (%.0fs)\n", r.Scenario, r.Verdict(), r.Duration.Seconds())
	}
	if !ok {
		return 1
	}
	return 0
}

func containsName(list, name string) bool {
	for _, n := range strings.Split(list, ",") {
		if strings.TrimSpace(n) == name {
			return true
		}
	}
	return false
}

// idMap parses "1=a,2=b".
func idMap(s string) (map[int32]string, error) {
	out := map[int32]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		id, err := strconv.Atoi(k)
		if !ok || err != nil || v == "" {
			return nil, fmt.Errorf("%q: want id=value", kv)
		}
		out[int32(id)] = v
	}
	return out, nil
}

// clientOpts reads the librdkafka properties docker/lib.sh's secure_setup
// writes for kcat (security.protocol=SASL_SSL, sasl.mechanisms=SCRAM-SHA-512,
// sasl.username, sasl.password, ssl.ca.location).
func clientOpts(path string) ([]kgo.Opt, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	props := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || l[0] == '#' {
			continue
		}
		if k, v, ok := strings.Cut(l, "="); ok {
			props[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	var opts []kgo.Opt
	proto := strings.ToUpper(props["security.protocol"])
	if proto == "SSL" || proto == "SASL_SSL" {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if ca := props["ssl.ca.location"]; ca != "" {
			pem, err := os.ReadFile(ca)
			if err != nil {
				return nil, err
			}
			tc.RootCAs = x509.NewCertPool()
			if !tc.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("%s: no certificate", ca)
			}
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if strings.HasPrefix(proto, "SASL_") {
		auth := scram.Auth{User: props["sasl.username"], Pass: props["sasl.password"]}
		switch strings.ToUpper(props["sasl.mechanisms"]) {
		case "SCRAM-SHA-512":
			opts = append(opts, kgo.SASL(auth.AsSha512Mechanism()))
		case "SCRAM-SHA-256":
			opts = append(opts, kgo.SASL(auth.AsSha256Mechanism()))
		default:
			return nil, fmt.Errorf("%s: sasl.mechanisms %q not supported", path, props["sasl.mechanisms"])
		}
	}
	return opts, nil
}
