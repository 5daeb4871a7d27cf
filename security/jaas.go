package security

import (
	"fmt"
	"sort"
	"strings"
)

// JAASControlFlag is a JAAS login module control flag.
type JAASControlFlag int

const (
	JAASRequired JAASControlFlag = iota + 1
	JAASRequisite
	JAASSufficient
	JAASOptional
)

func (f JAASControlFlag) String() string {
	switch f {
	case JAASRequired:
		return "required"
	case JAASRequisite:
		return "requisite"
	case JAASSufficient:
		return "sufficient"
	case JAASOptional:
		return "optional"
	}
	return fmt.Sprintf("JAASControlFlag(%d)", int(f))
}

// JAASEntry is one login module entry: `<module> <flag> key="value" ... ;`.
type JAASEntry struct {
	LoginModule string
	Flag        JAASControlFlag
	Options     map[string]string
}

// Login module class names this package reads.
const (
	PlainLoginModule         = "org.apache.kafka.common.security.plain.PlainLoginModule"
	ScramLoginModule         = "org.apache.kafka.common.security.scram.ScramLoginModule"
	ZooKeeperDigestModule    = "org.apache.zookeeper.server.auth.DigestLoginModule"
	DefaultZooKeeperJAASName = "Client" // Kafka's zookeeper.sasl.clientconfig default
)

// ParseJAASConfig parses the value of a sasl.jaas.config property (one or
// more entries, each ended by ';'), as Kafka's JaasConfig does: values may be
// quoted with " or ' and use Java escapes (\n, \t, \\, \", octal), //
// and /* */ are comments, the flag is case-insensitive. Unlike Kafka, an
// unquoted value may begin with a digit.
func ParseJAASConfig(s string) ([]JAASEntry, error) {
	p := &jaasParser{lex: jaasLexer{src: s}}
	var entries []JAASEntry
	for {
		tok, err := p.next()
		if err != nil {
			return nil, err
		}
		if tok.kind == jaasEOF {
			break
		}
		e, err := p.entry(tok)
		if err != nil {
			return nil, err
		}
		entries = append(entries, e)
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("login module not specified in JAAS config: %w", ErrInvalidJAAS)
	}
	return entries, nil
}

// ParseJAASFile parses a JAAS file of named sections,
// `Name { entry; entry; };`, such as the Client section ZooKeeper's client
// reads. Section names are case-sensitive, as in Java.
func ParseJAASFile(s string) (map[string][]JAASEntry, error) {
	p := &jaasParser{lex: jaasLexer{src: s}}
	out := make(map[string][]JAASEntry)
	for {
		tok, err := p.next()
		if err != nil {
			return nil, err
		}
		if tok.kind == jaasEOF {
			break
		}
		if tok.kind != jaasWord {
			return nil, p.errorf("expected a section name, got %s", tok)
		}
		name := tok.text
		if _, dup := out[name]; dup {
			return nil, p.errorf("section %q defined twice", name)
		}
		if tok, err = p.next(); err != nil {
			return nil, err
		}
		if !tok.is('{') {
			return nil, p.errorf("expected '{' after section %q, got %s", name, tok)
		}
		var entries []JAASEntry
		for {
			if tok, err = p.next(); err != nil {
				return nil, err
			}
			if tok.is('}') {
				break
			}
			if tok.kind == jaasEOF {
				return nil, p.errorf("section %q not closed by '}'", name)
			}
			e, err := p.entry(tok)
			if err != nil {
				return nil, fmt.Errorf("section %q: %w", name, err)
			}
			entries = append(entries, e)
		}
		if tok, err = p.next(); err != nil {
			return nil, err
		}
		if !tok.is(';') {
			return nil, p.errorf("section %q: '}' not followed by ';'", name)
		}
		if len(entries) == 0 {
			return nil, p.errorf("section %q has no login module", name)
		}
		out[name] = entries
	}
	return out, nil
}

// PlainUsersFromJAAS reads the user_<name>="<password>" options of the
// PlainLoginModule entry, as Kafka's PlainServerCallbackHandler does.
func PlainUsersFromJAAS(entries []JAASEntry) (PlainUsers, error) {
	for _, e := range entries {
		if e.LoginModule != PlainLoginModule {
			continue
		}
		users := PlainUsers{}
		for k, v := range e.Options {
			if name, ok := strings.CutPrefix(k, "user_"); ok {
				if name == "" {
					return nil, fmt.Errorf("option %q names no user: %w", k, ErrInvalidJAAS)
				}
				users[name] = v
			}
		}
		return users, nil
	}
	return nil, fmt.Errorf("no %s entry: %w", PlainLoginModule, ErrInvalidJAAS)
}

// LoginCredentials returns the username and password options of the first
// entry for module: a broker's own credentials for inter-broker SASL
// (PlainLoginModule, ScramLoginModule) or for ZooKeeper digest auth
// (DigestLoginModule in the Client section).
func LoginCredentials(entries []JAASEntry, module string) (user, password string, err error) {
	for _, e := range entries {
		if e.LoginModule != module {
			continue
		}
		u, okU := e.Options["username"]
		p, okP := e.Options["password"]
		switch {
		case !okU:
			return "", "", fmt.Errorf("%s: no username option: %w", module, ErrInvalidJAAS)
		case !okP:
			return "", "", fmt.Errorf("%s: no password option: %w", module, ErrInvalidJAAS)
		}
		return u, p, nil
	}
	return "", "", fmt.Errorf("no %s entry: %w", module, ErrInvalidJAAS)
}

// String renders the entry back in sasl.jaas.config form, options sorted,
// values quoted.
func (e JAASEntry) String() string {
	var b strings.Builder
	b.WriteString(e.LoginModule)
	b.WriteByte(' ')
	b.WriteString(e.Flag.String())
	keys := make([]string, 0, len(e.Options))
	for k := range e.Options {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.WriteString(" " + k + "=\"")
		b.WriteString(strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", `\r`).Replace(e.Options[k]))
		b.WriteByte('"')
	}
	b.WriteByte(';')
	return b.String()
}

type jaasKind int

const (
	jaasEOF jaasKind = iota
	jaasWord
	jaasQuoted
	jaasPunct
)

type jaasToken struct {
	kind jaasKind
	text string
	pos  int
}

func (t jaasToken) is(c byte) bool { return t.kind == jaasPunct && t.text == string(c) }

func (t jaasToken) String() string {
	switch t.kind {
	case jaasEOF:
		return "end of input"
	case jaasQuoted:
		return "a quoted string"
	case jaasPunct:
		return fmt.Sprintf("'%s'", t.text)
	}
	return fmt.Sprintf("%q", t.text)
}

type jaasParser struct {
	lex  jaasLexer
	last jaasToken
}

func (p *jaasParser) next() (jaasToken, error) {
	t, err := p.lex.next()
	p.last = t
	return t, err
}

func (p *jaasParser) errorf(format string, args ...any) error {
	return fmt.Errorf("JAAS config at offset %d: %s: %w", p.last.pos, fmt.Sprintf(format, args...), ErrInvalidJAAS)
}

// entry parses one login module entry whose first token is first.
func (p *jaasParser) entry(first jaasToken) (JAASEntry, error) {
	if first.kind != jaasWord {
		return JAASEntry{}, p.errorf("expected a login module class name, got %s", first)
	}
	e := JAASEntry{LoginModule: first.text, Options: map[string]string{}}
	tok, err := p.next()
	if err != nil {
		return JAASEntry{}, err
	}
	if tok.kind != jaasWord {
		return JAASEntry{}, p.errorf("login module control flag not specified for %s", e.LoginModule)
	}
	switch strings.ToLower(tok.text) {
	case "required":
		e.Flag = JAASRequired
	case "requisite":
		e.Flag = JAASRequisite
	case "sufficient":
		e.Flag = JAASSufficient
	case "optional":
		e.Flag = JAASOptional
	default:
		return JAASEntry{}, p.errorf("invalid login module control flag %q for %s", tok.text, e.LoginModule)
	}
	for {
		if tok, err = p.next(); err != nil {
			return JAASEntry{}, err
		}
		if tok.is(';') {
			return e, nil
		}
		if tok.kind == jaasEOF || tok.is('}') {
			return JAASEntry{}, p.errorf("JAAS config entry for %s not terminated by semi-colon", e.LoginModule)
		}
		if tok.kind != jaasWord {
			return JAASEntry{}, p.errorf("expected an option name in %s, got %s", e.LoginModule, tok)
		}
		key := tok.text
		if tok, err = p.next(); err != nil {
			return JAASEntry{}, err
		}
		if !tok.is('=') {
			return JAASEntry{}, p.errorf("value not specified for key %q in %s", key, e.LoginModule)
		}
		if tok, err = p.next(); err != nil {
			return JAASEntry{}, err
		}
		if tok.kind != jaasWord && tok.kind != jaasQuoted {
			return JAASEntry{}, p.errorf("value not specified for key %q in %s", key, e.LoginModule)
		}
		if _, dup := e.Options[key]; dup {
			return JAASEntry{}, p.errorf("key %q given twice in %s", key, e.LoginModule)
		}
		e.Options[key] = tok.text
	}
}

type jaasLexer struct {
	src string
	i   int
}

func isJAASWordByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '.' || c == '-' || c == '_' || c == '$' || c >= 0x80
}

func (l *jaasLexer) next() (jaasToken, error) {
	for l.i < len(l.src) {
		c := l.src[l.i]
		switch {
		case c <= ' ':
			l.i++
		case strings.HasPrefix(l.src[l.i:], "//"):
			if j := strings.IndexAny(l.src[l.i:], "\r\n"); j >= 0 {
				l.i += j
			} else {
				l.i = len(l.src)
			}
		case strings.HasPrefix(l.src[l.i:], "/*"):
			j := strings.Index(l.src[l.i+2:], "*/")
			if j < 0 {
				return jaasToken{pos: l.i}, fmt.Errorf("JAAS config at offset %d: unterminated /* comment: %w", l.i, ErrInvalidJAAS)
			}
			l.i += 2 + j + 2
		case c == '"' || c == '\'':
			return l.quoted(c)
		case isJAASWordByte(c):
			start := l.i
			for l.i < len(l.src) && isJAASWordByte(l.src[l.i]) {
				l.i++
			}
			return jaasToken{kind: jaasWord, text: l.src[start:l.i], pos: start}, nil
		case c == ';' || c == '=' || c == '{' || c == '}':
			l.i++
			return jaasToken{kind: jaasPunct, text: string(c), pos: l.i - 1}, nil
		default:
			return jaasToken{pos: l.i}, fmt.Errorf("JAAS config at offset %d: unexpected character %q: %w", l.i, c, ErrInvalidJAAS)
		}
	}
	return jaasToken{kind: jaasEOF, pos: l.i}, nil
}

// quoted reads a string in Java StreamTokenizer's rules: the escapes \a \b
// \f \n \r \t \v, up to three octal digits, and \<c> for any other c.
func (l *jaasLexer) quoted(q byte) (jaasToken, error) {
	start := l.i
	l.i++
	var b strings.Builder
	for l.i < len(l.src) {
		c := l.src[l.i]
		switch {
		case c == q:
			l.i++
			return jaasToken{kind: jaasQuoted, text: b.String(), pos: start}, nil
		case c == '\n' || c == '\r':
			return jaasToken{pos: start}, fmt.Errorf("JAAS config at offset %d: quoted string runs past the end of the line: %w", start, ErrInvalidJAAS)
		case c == '\\':
			l.i++
			if l.i >= len(l.src) {
				return jaasToken{pos: start}, fmt.Errorf("JAAS config at offset %d: escape at end of input: %w", start, ErrInvalidJAAS)
			}
			e := l.src[l.i]
			l.i++
			switch e {
			case 'a':
				b.WriteByte(7)
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'v':
				b.WriteByte('\v')
			default:
				if '0' <= e && e <= '7' {
					v := int(e - '0')
					max := 2
					if e > '3' {
						max = 1 // as Java: at most \377
					}
					for k := 0; k < max && l.i < len(l.src) && '0' <= l.src[l.i] && l.src[l.i] <= '7'; k++ {
						v = v*8 + int(l.src[l.i]-'0')
						l.i++
					}
					b.WriteRune(rune(v))
				} else {
					b.WriteByte(e)
				}
			}
		default:
			b.WriteByte(c)
			l.i++
		}
	}
	return jaasToken{pos: start}, fmt.Errorf("JAAS config at offset %d: unterminated quoted string: %w", start, ErrInvalidJAAS)
}
