package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/kafkazk/broker/internal/zktest"
	"github.com/kafkazk/broker/security"
)

// TestZKUsersAlterInZooKeeper: configs --zookeeper writes the credential
// znode in Kafka's format (checked against NewScramCredential for the
// stored salt), keeps other mechanisms on a second run, announces each
// change in /config/changes, and with the JAAS Client section in
// KAFKA_OPTS puts a digest-only ACL on it.
func TestZKUsersAlterInZooKeeper(t *testing.T) {
	srv := zktest.Start(t)
	jaas := filepath.Join(t.TempDir(), "jaas.conf")
	if err := os.WriteFile(jaas, []byte("Client {\n org.apache.zookeeper.server.auth.DigestLoginModule required\n username=\"kafka\"\n password=\"zk-secret\";\n};\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KAFKA_OPTS", "-Xmx1G -Djava.security.auth.login.config="+jaas)
	for _, add := range []string{"SCRAM-SHA-512=[iterations=8192,password=admin-secret]", "SCRAM-SHA-256=[password=admin-256]"} {
		code, out, errOut := runAdmin(t, "configs", "--zookeeper", srv.Connect(), "--entity-type", "users", "--entity-name", "admin", "--alter", "--add-config", add)
		if code != 0 || !strings.Contains(out, "Completed updating config for entity: user-principal 'admin'.") {
			t.Fatalf("exit %d: %s%s", code, out, errOut)
		}
	}
	conn, _, err := zk.Connect([]string{srv.Addr}, 10*time.Second, zk.WithLogger(zkQuiet{}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	path := srv.Chroot + "/config/users/admin"
	if _, _, err := conn.Get(path); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("unauthenticated read of %s: %v, want NoAuth", path, err)
	}
	if err := conn.AddAuth("digest", []byte("kafka:zk-secret")); err != nil {
		t.Fatal(err)
	}
	data, _, err := conn.Get(path)
	if err != nil {
		t.Fatalf("get %s: %v", path, err)
	}
	var node struct {
		Version int               `json:"version"`
		Config  map[string]string `json:"config"`
	}
	if err := json.Unmarshal(data, &node); err != nil || node.Version != 1 || len(node.Config) != 2 {
		t.Fatalf("znode %s: %v", data, err)
	}
	for mech, pass := range map[security.ScramMechanism]string{security.ScramSHA512: "admin-secret", security.ScramSHA256: "admin-256"} {
		cred, err := security.ParseScramCredential(node.Config[mech.Name()])
		if err != nil {
			t.Fatalf("%s: %v", mech.Name(), err)
		}
		want, _ := security.NewScramCredential(mech, pass, cred.Salt, cred.Iterations)
		if !bytes.Equal(cred.StoredKey, want.StoredKey) || !bytes.Equal(cred.ServerKey, want.ServerKey) {
			t.Errorf("%s: stored %q does not derive from the password", mech.Name(), node.Config[mech.Name()])
		}
	}
	if cred, _ := security.ParseScramCredential(node.Config["SCRAM-SHA-256"]); cred.Iterations != scramDefaultIterations {
		t.Errorf("SCRAM-SHA-256 iterations %d, want kafka-configs.sh's default %d", cred.Iterations, scramDefaultIterations)
	}
	acl, _, err := conn.GetACL(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(acl) != 1 || acl[0].Scheme != "digest" || !strings.HasPrefix(acl[0].ID, "kafka:") {
		t.Errorf("ACL of %s: %+v, want digest kafka only", path, acl)
	}
	kids, _, err := conn.Children(srv.Chroot + "/config/changes")
	if err != nil || len(kids) != 2 {
		t.Fatalf("/config/changes: %v %v, want two notifications", kids, err)
	}
	note, _, _ := conn.Get(srv.Chroot + "/config/changes/" + kids[0])
	if entity, err := security.DecodeConfigChange(note); err != nil || entity != "users/admin" {
		t.Errorf("notification %s: %q %v", note, entity, err)
	}
}
