package chaos

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoseTail: the newest segment of each partition of a stopped broker
// loses its last n bytes (older segments keep theirs), a segment shorter
// than n is emptied, and the clean-shutdown marker is removed.
func TestLoseTail(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	write := func(p int, name string, size int) string {
		dir := filepath.Join(data, fmt.Sprintf("%s-%d", Topic, p))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	old := write(0, "00000000000000000000.log", 5000)
	newest := write(0, "00000000000000000100.log", 3000)
	short := write(1, "00000000000000000000.log", 100)
	marker := filepath.Join(data, ".kafka_cleanshutdown")
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	e := &Env{C: &Cluster{Brokers: []*Broker{{ID: 1, DataDir: data}}}, Topic: Topic, Parts: 2, Logf: func(string, ...any) {}}
	e.LoseTail(1, 1024)
	for path, want := range map[string]int64{old: 5000, newest: 3000 - 1024, short: 0} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() != want {
			t.Errorf("%s: %d bytes, want %d", filepath.Base(path), fi.Size(), want)
		}
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Errorf("clean-shutdown marker still there: %v", err)
	}
	if len(e.Notes) != 1 || !strings.Contains(e.Notes[0], "p0 3000->1976") {
		t.Errorf("notes %q", e.Notes)
	}
}

// TestMetric sums a counter over its label sets and does not take a
// metric whose name merely starts with the one asked for.
func TestMetric(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "# HELP kafka_server_replicamanager_isrshrinks_total x\n"+
			"kafka_server_replicamanager_isrshrinks_total 3\n"+
			"kafka_server_replicamanager_isrshrinks_total_other 100\n"+
			"kafka_x{a=\"1\"} 2\nkafka_x{a=\"2\"} 5\n")
	}))
	defer srv.Close()
	b := &Broker{ID: 1, HTTPAddr: strings.TrimPrefix(srv.URL, "http://")}
	if v, err := b.Metric("kafka_server_replicamanager_isrshrinks_total"); err != nil || v != 3 {
		t.Errorf("shrinks = %v, %v; want 3", v, err)
	}
	if v, err := b.Metric("kafka_x"); err != nil || v != 7 {
		t.Errorf("kafka_x = %v, %v; want 7", v, err)
	}
	if _, err := b.Metric("kafka_missing"); err == nil {
		t.Error("a missing metric read without error")
	}
}
