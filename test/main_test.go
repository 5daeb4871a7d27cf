package test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/kafkazk/broker/internal/zktest"
)

var (
	// brokerBin is the broker binary built by TestMain.
	brokerBin string
	// zkAddr is the shared ZooKeeper's host:port; empty when zkSkip says why.
	zkAddr string
	zkSkip string
	// zkConn is the harness's own session, shared by every cluster.
	zkConn *zk.Conn
)

// TestMain builds cmd/broker once and starts one ZooKeeper for the package.
// A build failure stops the package with the compiler's output: every test
// here needs the binary. A missing ZooKeeper only skips (each test says why),
// because the Debian zookeeper package may not be installed.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "broker-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "test: temp dir:", err)
		return 1
	}
	defer os.RemoveAll(tmp)

	if bin := os.Getenv("BROKER_TEST_BINARY"); bin != "" {
		brokerBin = bin
	} else {
		brokerBin = filepath.Join(tmp, "broker")
		if err := buildBroker(brokerBin); err != nil {
			fmt.Fprintln(os.Stderr, "test: building cmd/broker failed:\n"+err.Error())
			return 1
		}
	}

	switch {
	case os.Getenv("BROKER_TEST_ZK") != "":
		zkAddr = os.Getenv("BROKER_TEST_ZK")
	default:
		if _, err := os.Stat(zktest.Jar); err != nil {
			zkSkip = "no ZooKeeper: install Debian's zookeeper package (" + zktest.Jar + " missing) or set BROKER_TEST_ZK=host:port"
			break
		}
		if _, err := exec.LookPath("java"); err != nil {
			zkSkip = "no ZooKeeper: java is not on PATH (install Debian's default-jre-headless)"
			break
		}
		srv, err := zktest.Launch(filepath.Join(tmp, "zk"))
		if err != nil {
			fmt.Fprintln(os.Stderr, "test: starting ZooKeeper:", err)
			return 1
		}
		defer srv.Stop()
		zkAddr = srv.Addr
	}
	if zkSkip == "" {
		start := time.Now()
		conn, err := connectZK(zkAddr)
		if err != nil {
			fmt.Fprintf(os.Stderr, "test: ZooKeeper %s: %v\n", zkAddr, err)
			return 1
		}
		defer conn.Close()
		zkConn = conn
		fmt.Fprintf(os.Stderr, "test: ZooKeeper session at %s after %s\n", zkAddr, time.Since(start).Round(time.Millisecond))
	}
	return m.Run()
}

// buildBroker compiles cmd/broker as a static binary into out.
func buildBroker(out string) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	start := time.Now()
	cmd := exec.Command("go", "build", "-o", out, "./cmd/broker")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/broker in %s: %w\n%s", root, err, b)
	}
	fmt.Fprintf(os.Stderr, "test: built %s in %s\n", out, time.Since(start).Round(time.Millisecond))
	return nil
}

// moduleRoot walks up from the working directory to the go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}
