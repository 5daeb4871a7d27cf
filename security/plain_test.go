package security

import (
	"errors"
	"strings"
	"testing"
)

const kafkaPlainJAAS = `org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";`

func TestPlainServer(t *testing.T) {
	entries, err := ParseJAASConfig(kafkaPlainJAAS)
	if err != nil {
		t.Fatal(err)
	}
	users, err := PlainUsersFromJAAS(entries)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, msg string
		wantUser  string // empty: must fail
		wantState bool   // want ErrIllegalSASLState rather than ErrAuthenticationFailed
	}{
		{name: "no authzid", msg: "\x00alice\x00alice-secret", wantUser: "alice"},
		{name: "authzid equal", msg: "alice\x00alice\x00alice-secret", wantUser: "alice"},
		{name: "admin", msg: "\x00admin\x00admin-secret", wantUser: "admin"},
		{name: "authzid differs", msg: "admin\x00alice\x00alice-secret"},
		{name: "wrong password", msg: "\x00alice\x00admin-secret"},
		{name: "password prefix", msg: "\x00alice\x00alice-secre"},
		{name: "password longer", msg: "\x00alice\x00alice-secret!"},
		{name: "unknown user", msg: "\x00bob\x00alice-secret"},
		{name: "no user", msg: "\x00\x00alice-secret"},
		{name: "no password", msg: "\x00alice\x00"},
		{name: "two tokens", msg: "alice\x00alice-secret"},
		{name: "four tokens", msg: "\x00alice\x00alice-secret\x00"},
		{name: "empty", msg: ""},
		{name: "not utf8", msg: "\x00al\xffice\x00alice-secret"},
		{name: "option is not a user", msg: "\x00username\x00admin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewPlainServer(users)
			if err != nil {
				t.Fatal(err)
			}
			out, err := s.Step([]byte(tc.msg))
			if tc.wantUser != "" {
				if err != nil || !s.Done() || s.AuthorizationID() != tc.wantUser || len(out) != 0 {
					t.Fatalf("err=%v done=%v authzid=%q out=%q", err, s.Done(), s.AuthorizationID(), out)
				}
			} else {
				if !errors.Is(err, ErrAuthenticationFailed) {
					t.Fatalf("err = %v, want ErrAuthenticationFailed", err)
				}
				if s.Done() || s.AuthorizationID() != "" {
					t.Fatal("failed exchange is done")
				}
			}
			if _, err := s.Step([]byte(tc.msg)); !errors.Is(err, ErrIllegalSASLState) {
				t.Fatalf("second step: %v", err)
			}
		})
	}
	if u, p, err := LoginCredentials(entries, PlainLoginModule); err != nil || u != "admin" || p != "admin-secret" {
		t.Fatalf("LoginCredentials = %q %q %v", u, p, err)
	}
}

func TestParseJAASConfig(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []JAASEntry
	}{
		{
			name: "kafka plain", in: kafkaPlainJAAS,
			want: []JAASEntry{{PlainLoginModule, JAASRequired, map[string]string{
				"username": "admin", "password": "admin-secret", "user_admin": "admin-secret", "user_alice": "alice-secret"}}},
		},
		{
			name: "escapes and single quotes",
			in:   `a.B required k1="x\"y\\z" k2='it"s' k3="tab\there\nnl" k4="\101\60" k5="\q";`,
			want: []JAASEntry{{"a.B", JAASRequired, map[string]string{
				"k1": `x"y\z`, "k2": `it"s`, "k3": "tab\there\nnl", "k4": "A0", "k5": "q"}}},
		},
		{
			name: "flags case-insensitive, several entries, comments",
			in: `// comment
			m1 REQUISITE; /* block
			comment */ m2 Sufficient a=b; m3 optional
			  x="1"  y = unquoted_$-word ;`,
			want: []JAASEntry{
				{"m1", JAASRequisite, map[string]string{}},
				{"m2", JAASSufficient, map[string]string{"a": "b"}},
				{"m3", JAASOptional, map[string]string{"x": "1", "y": "unquoted_$-word"}},
			},
		},
		{
			name: "empty value and utf-8",
			in:   `m required user_ü="" k="pässwörd";`,
			want: []JAASEntry{{"m", JAASRequired, map[string]string{"user_ü": "", "k": "pässwörd"}}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseJAASConfig(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d entries: %v", len(got), got)
			}
			for i := range got {
				if got[i].String() != tc.want[i].String() {
					t.Errorf("entry %d\n got %s\nwant %s", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestParseJAASConfigErrors(t *testing.T) {
	for _, tc := range []struct{ in, wantText string }{
		{"", "login module not specified"},
		{"   // only a comment", "login module not specified"},
		{"org.Module", "control flag not specified"},
		{"org.Module ;", "control flag not specified"},
		{"org.Module mandatory;", `invalid login module control flag "mandatory"`},
		{`org.Module required username="a"`, "not terminated by semi-colon"},
		{`org.Module required username;`, `value not specified for key "username"`},
		{`org.Module required username=;`, `value not specified for key "username"`},
		{`org.Module required username="a`, "unterminated quoted string"},
		{"org.Module required username=\"a\nb\";", "past the end of the line"},
		{`org.Module required a="1" a="2";`, `key "a" given twice`},
		{`org.Module required a="1"; /* open`, "unterminated /* comment"},
		{`org.Module required a@="1";`, "unexpected character '@'"},
		{`"quoted" required;`, "expected a login module class name"},
		{`org.Module required ="x";`, "expected an option name"},
		{`org.Module required a="\`, "escape at end of input"},
	} {
		_, err := ParseJAASConfig(tc.in)
		if !errors.Is(err, ErrInvalidJAAS) || !strings.Contains(err.Error(), tc.wantText) {
			t.Errorf("ParseJAASConfig(%q) = %v, want an ErrInvalidJAAS naming %q", tc.in, err, tc.wantText)
		}
	}
}

func TestParseJAASFileZooKeeperClient(t *testing.T) {
	file := `
KafkaServer {
   org.apache.kafka.common.security.plain.PlainLoginModule required
   username="admin"
   password="admin-secret"
   user_admin="admin-secret";
};

// ZooKeeper digest credentials of the broker.
Client {
   org.apache.zookeeper.server.auth.DigestLoginModule required
   username="kafka"
   password="kafka-zk-secret";
};
`
	sections, err := ParseJAASFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(sections) != 2 {
		t.Fatalf("sections %v", sections)
	}
	u, p, err := LoginCredentials(sections[DefaultZooKeeperJAASName], ZooKeeperDigestModule)
	if err != nil || u != "kafka" || p != "kafka-zk-secret" {
		t.Fatalf("zk credentials %q %q %v", u, p, err)
	}
	users, err := PlainUsersFromJAAS(sections["KafkaServer"])
	if err != nil || len(users) != 1 || users["admin"] != "admin-secret" {
		t.Fatalf("users %v %v", users, err)
	}
	if _, _, err := LoginCredentials(sections["KafkaServer"], ZooKeeperDigestModule); !errors.Is(err, ErrInvalidJAAS) {
		t.Fatalf("missing module: %v", err)
	}
	for _, tc := range []struct{ in, wantText string }{
		{`Client { m required; }`, "not followed by ';'"},
		{`Client { m required; `, "not closed"},
		{`Client m required; };`, "expected '{'"},
		{`Client { };`, "no login module"},
		{`Client { m required a="b" };`, "not terminated by semi-colon"},
		{`Client { m required; }; Client { m required; };`, "defined twice"},
		{`{ m required; };`, "expected a section name"},
	} {
		_, err := ParseJAASFile(tc.in)
		if !errors.Is(err, ErrInvalidJAAS) || !strings.Contains(err.Error(), tc.wantText) {
			t.Errorf("ParseJAASFile(%q) = %v, want an error naming %q", tc.in, err, tc.wantText)
		}
	}
	entries, _ := ParseJAASConfig(`org.apache.zookeeper.server.auth.DigestLoginModule required password="x";`)
	if _, _, err := LoginCredentials(entries, ZooKeeperDigestModule); err == nil || !strings.Contains(err.Error(), "username") {
		t.Fatalf("no username: %v", err)
	}
}

func FuzzParseJAASConfig(f *testing.F) {
	f.Add(kafkaPlainJAAS)
	f.Add(`Client { m required a="\101\n"; };`)
	f.Add(`m required a="\15";`)
	f.Fuzz(func(t *testing.T, s string) {
		entries, err := ParseJAASConfig(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidJAAS) {
				t.Fatalf("error class: %v", err)
			}
			return
		}
		// What parsed renders back to an equal configuration.
		var b strings.Builder
		for _, e := range entries {
			b.WriteString(e.String() + " ")
		}
		again, err := ParseJAASConfig(b.String())
		if err != nil || len(again) != len(entries) {
			t.Fatalf("re-parse of %q: %v", b.String(), err)
		}
		for i := range again {
			if again[i].String() != entries[i].String() {
				t.Fatalf("entry %d changed: %s vs %s", i, again[i], entries[i])
			}
		}
		_, _ = ParseJAASFile(s)
	})
}
