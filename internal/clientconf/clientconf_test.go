package clientconf

import (
	"bufio"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseProperties(t *testing.T) {
	in := "# comment\n! also\n  a=1\nb : 2\nc 3\nd=x\\\n   y\\\\\ne=tab\\there\nempty=\n"
	got, err := ParseProperties(bufio.NewScanner(strings.NewReader(in)))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": "1", "b": "2", "c": "3", "d": `xy\`, "e": "tab\there", "empty": ""}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

func TestOpts(t *testing.T) {
	for _, props := range []string{
		"",
		"security.protocol=PLAINTEXT\n",
		"security.protocol=sasl_plaintext\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n  username=\"u\" password=\"p\";\n",
		"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config=x required username=\"u\" password=\"p\";\n",
	} {
		opts, err := FileOpts(writeFile(t, props), 5*time.Second)
		if err != nil {
			t.Errorf("%q: %v", props, err)
		}
		if strings.Contains(strings.ToUpper(props), "SASL") != (len(opts) == 1) {
			t.Errorf("%q: %d options", props, len(opts))
		}
	}
}

func TestOptsErrors(t *testing.T) {
	cases := map[string]string{
		"security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI\nsasl.jaas.config=x required username=\"a\";\n":      "GSSAPI is not supported",
		"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n":                                              "sasl.jaas.config is required",
		"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config=x required password=\"p\";\n": "no username",
		"security.protocol=TLS\n": "want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
		"security.protocol=SSL\nssl.truststore.location=/nonexistent/ca.pem\nssl.truststore.type=PEM\n": "ssl.truststore",
	}
	for props, want := range cases {
		_, err := FileOpts(writeFile(t, props), 5*time.Second)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error with %q", props, err, want)
		}
	}
	if _, err := FileOpts(filepath.Join(t.TempDir(), "missing"), time.Second); err == nil {
		t.Error("missing file: no error")
	}
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.properties")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestImports keeps the arrow: an internal package never imports protocol,
// zkcoord or a cmd package.
func TestImports(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			for _, bad := range []string{"/protocol", "/zkcoord", "/cmd/"} {
				if strings.HasPrefix(path, "github.com/kafkazk/broker") && strings.Contains(path, bad) {
					t.Errorf("%s imports %s", name, path)
				}
			}
		}
	}
}
