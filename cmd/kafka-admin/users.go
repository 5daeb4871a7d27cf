package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkazk/broker/security"
)

// entityUsers is kafka-configs.sh's users entity type; only its SCRAM
// credentials are served (quotas are not).
const entityUsers = "users"

// scramDefaultIterations is kafka-configs.sh's default when the
// --add-config value names none.
const scramDefaultIterations = 4096

// scramAdd is one SCRAM-SHA-*=[iterations=N,password=P] of --add-config.
type scramAdd struct {
	mech       security.ScramMechanism
	iterations int
	password   string
}

// parseScramConfigs checks a users entity's --add-config and
// --delete-config keys: only SCRAM-SHA-256 and SCRAM-SHA-512.
func parseScramConfigs(add [][2]string, del []string) ([]scramAdd, []security.ScramMechanism, error) {
	var adds []scramAdd
	for _, kv := range add {
		m, ok := security.ParseScramMechanism(kv[0])
		if !ok {
			return nil, nil, usageErrorf("Invalid config for users: %s (only SCRAM-SHA-256 and SCRAM-SHA-512 credentials are supported)", kv[0])
		}
		sa := scramAdd{mech: m, iterations: scramDefaultIterations}
		for _, part := range strings.Split(kv[1], ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
			switch {
			case !ok:
				return nil, nil, usageErrorf("Invalid credential property %q for %s: want iterations=N,password=P", part, kv[0])
			case k == "iterations":
				n, err := strconv.Atoi(v)
				if err != nil || n < security.ScramMinIterations {
					return nil, nil, usageErrorf("Invalid iterations %q for %s: at least %d", v, kv[0], security.ScramMinIterations)
				}
				sa.iterations = n
			case k == "password":
				sa.password = v
			default:
				return nil, nil, usageErrorf("Invalid credential property %q for %s: want iterations=N,password=P", k, kv[0])
			}
		}
		if sa.password == "" {
			return nil, nil, usageErrorf("Invalid credential for %s: no password", kv[0])
		}
		adds = append(adds, sa)
	}
	var dels []security.ScramMechanism
	for _, k := range del {
		m, ok := security.ParseScramMechanism(k)
		if !ok {
			return nil, nil, usageErrorf("Invalid config for users: %s (only SCRAM-SHA-256 and SCRAM-SHA-512 credentials are supported)", k)
		}
		dels = append(dels, m)
	}
	return adds, dels, nil
}

func kadmMechanism(m security.ScramMechanism) kadm.ScramMechanism {
	if m == security.ScramSHA256 {
		return kadm.ScramSha256
	}
	return kadm.ScramSha512
}

// alterUsers sends AlterUserScramCredentials (51); kadm salts the password
// and runs PBKDF2 on the client, as Kafka's Admin client does.
func (a *admin) alterUsers(ctx context.Context, out io.Writer, ca configArgs) error {
	adds, dels, err := parseScramConfigs(ca.add, ca.del)
	if err != nil {
		return err
	}
	var ups []kadm.UpsertSCRAM
	for _, sa := range adds {
		ups = append(ups, kadm.UpsertSCRAM{User: ca.name, Mechanism: kadmMechanism(sa.mech), Iterations: int32(sa.iterations), Password: sa.password})
	}
	var ds []kadm.DeleteSCRAM
	for _, m := range dels {
		ds = append(ds, kadm.DeleteSCRAM{User: ca.name, Mechanism: kadmMechanism(m)})
	}
	res, err := a.adm.AlterUserSCRAMs(ctx, ds, ups)
	if err != nil {
		return fmt.Errorf("AlterUserScramCredentials %s: %w", ca.name, err)
	}
	for _, r := range res.Sorted() {
		if r.Err != nil {
			return fmt.Errorf("AlterUserScramCredentials %s: %w", r.User, withMessageString(r.Err, r.ErrMessage))
		}
	}
	fmt.Fprintf(out, "Completed updating config for user %s.\n", ca.name)
	return nil
}

func withMessageString(err error, msg string) error {
	if msg == "" {
		return err
	}
	return fmt.Errorf("%w: %s", err, msg)
}

// describeUsers prints each user's SCRAM mechanisms as kafka-configs.sh
// does: "SCRAM credential configs for user-principal 'alice' are
// SCRAM-SHA-256=iterations=4096, SCRAM-SHA-512=iterations=8192".
func (a *admin) describeUsers(ctx context.Context, out io.Writer, ca configArgs) error {
	var users []string
	if ca.hasName {
		users = []string{ca.name}
	}
	described, err := a.adm.DescribeUserSCRAMs(ctx, users...)
	if err != nil {
		return fmt.Errorf("DescribeUserScramCredentials: %w", err)
	}
	for _, d := range described.Sorted() {
		if d.Err != nil {
			if errors.Is(d.Err, kerr.ResourceNotFound) {
				fmt.Fprintf(out, "No SCRAM credential configs for user-principal '%s'\n", d.User)
				continue
			}
			return fmt.Errorf("DescribeUserScramCredentials %s: %w", d.User, withMessageString(d.Err, d.ErrMessage))
		}
		var parts []string
		for _, c := range d.CredInfos {
			name := "SCRAM-SHA-512"
			if c.Mechanism == kadm.ScramSha256 {
				name = "SCRAM-SHA-256"
			}
			parts = append(parts, fmt.Sprintf("%s=iterations=%d", name, c.Iterations))
		}
		fmt.Fprintf(out, "SCRAM credential configs for user-principal '%s' are %s\n", d.User, strings.Join(parts, ", "))
	}
	return nil
}

// jaasFileRE finds -Djava.security.auth.login.config=<file> in KAFKA_OPTS.
var jaasFileRE = regexp.MustCompile(`-Djava\.security\.auth\.login\.config=("[^"]*"|\S+)`)

// zkDigestFromEnv reads the Client section's DigestLoginModule credentials
// from the JAAS file KAFKA_OPTS names, as Kafka's tools do through the JVM;
// ok is false without one.
func zkDigestFromEnv() (user, pass string, ok bool, err error) {
	m := jaasFileRE.FindStringSubmatch(os.Getenv("KAFKA_OPTS"))
	if m == nil {
		return "", "", false, nil
	}
	path := strings.Trim(m[1], `"`)
	data, err := os.ReadFile(path)
	if err != nil {
		return "", "", false, fmt.Errorf("KAFKA_OPTS java.security.auth.login.config: %w", err)
	}
	sections, err := security.ParseJAASFile(string(data))
	if err != nil {
		return "", "", false, fmt.Errorf("JAAS file %s: %w", path, err)
	}
	client, found := sections["Client"]
	if !found {
		return "", "", false, nil
	}
	user, pass, err = security.LoginCredentials(client, security.ZooKeeperDigestModule)
	if err != nil {
		return "", "", false, fmt.Errorf("JAAS file %s, section Client: %w", path, err)
	}
	return user, pass, true, nil
}

// alterUsersInZooKeeper is kafka-configs.sh --zookeeper --entity-type users
// --alter: it writes /config/users/<sanitized user> in Kafka's format and
// announces it in /config/changes, which is how the first SCRAM user (the
// brokers' own, for inter-broker SASL) exists before any broker runs. With
// ZooKeeper credentials in KAFKA_OPTS's JAAS file (section Client), the
// session authenticates with digest and new znodes get the ACLs of
// zookeeper.set.acl=true (the credential znode readable by that user only).
func alterUsersInZooKeeper(ctx context.Context, out io.Writer, connect string, ca configArgs) error {
	adds, dels, err := parseScramConfigs(ca.add, ca.del)
	if err != nil {
		return err
	}
	hosts, chroot, _ := strings.Cut(connect, "/")
	if chroot != "" {
		chroot = "/" + strings.TrimSuffix(chroot, "/")
	}
	user, pass, secure, err := zkDigestFromEnv()
	if err != nil {
		return err
	}
	conn, events, err := zk.Connect(strings.Split(hosts, ","), 30*time.Second, zk.WithLogger(zkQuiet{}))
	if err != nil {
		return fmt.Errorf("zookeeper %s: %w", hosts, err)
	}
	defer conn.Close()
	if err := waitZKSession(ctx, events); err != nil {
		return fmt.Errorf("zookeeper %s: %w", hosts, err)
	}
	acl := func(sensitive bool) []zk.ACL { return zk.WorldACL(zk.PermAll) }
	if secure {
		if err := conn.AddAuth("digest", []byte(user+":"+pass)); err != nil {
			return fmt.Errorf("zookeeper digest auth as %s: %w", user, err)
		}
		acl = func(sensitive bool) []zk.ACL {
			a := zk.DigestACL(zk.PermAll, user, pass)
			if !sensitive {
				a = append(a, zk.WorldACL(zk.PermRead)...)
			}
			return a
		}
	}
	for _, p := range []struct {
		path      string
		sensitive bool
	}{{chroot, false}, {chroot + "/config", false}, {chroot + "/config/users", true}, {chroot + "/config/changes", false}} {
		if p.path == "" {
			continue
		}
		if _, err := conn.Create(p.path, nil, 0, acl(p.sensitive)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", p.path, err)
		}
	}
	entity := security.SanitizeEntityName(ca.name)
	path := chroot + "/config/users/" + entity
	for {
		data, stat, err := conn.Get(path)
		exists := err == nil
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return fmt.Errorf("read %s: %w", path, err)
		}
		config := map[string]string{}
		if exists && len(data) > 0 {
			if config, err = security.DecodeEntityConfig(data); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
		}
		for _, sa := range adds {
			cred, err := security.GenerateScramCredential(sa.mech, sa.password, sa.iterations)
			if err != nil {
				return fmt.Errorf("%s for %s: %w", sa.mech.Name(), ca.name, err)
			}
			config = security.SetScramCredential(config, sa.mech, cred)
		}
		for _, m := range dels {
			config = security.DeleteScramCredential(config, m)
		}
		payload := security.EncodeEntityConfig(config)
		if exists {
			_, err = conn.Set(path, payload, stat.Version)
		} else {
			_, err = conn.Create(path, payload, 0, acl(true))
		}
		if errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNodeExists) {
			continue // changed meanwhile: re-read, never overwrite
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		break
	}
	if _, err := conn.Create(chroot+"/config/changes/config_change_", security.EncodeConfigChange("users/"+entity), zk.FlagSequence, acl(false)); err != nil {
		return fmt.Errorf("notify %s/config/changes: %w", chroot, err)
	}
	fmt.Fprintf(out, "Completed updating config for entity: user-principal '%s'.\n", ca.name)
	return nil
}

func waitZKSession(ctx context.Context, events <-chan zk.Event) error {
	t := time.NewTimer(30 * time.Second)
	defer t.Stop()
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return nil
			}
			if ev.State == zk.StateAuthFailed {
				return errors.New("authentication failed")
			}
		case <-t.C:
			return errors.New("no session within 30s")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

type zkQuiet struct{}

func (zkQuiet) Printf(string, ...any) {}
