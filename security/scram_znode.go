package security

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// This file holds the payloads of Kafka's user config znodes,
// /config/users/<sanitized user>, and of the /config/changes notification
// that announces a change to one. zkcoord owns the paths and the I/O.
//
// A user config znode is {"version":1,"config":{...}} with one entry per
// SCRAM mechanism:
//
//	{"version":1,"config":{"SCRAM-SHA-256":"salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=4096"}}
//
// (Kafka's ConfigEntityZNode and ScramCredentialUtils). Quota entries such
// as "producer_byte_rate" may share the znode and are kept as they are.

// FormatScramCredential renders cred as Kafka's credential string.
func FormatScramCredential(cred ScramCredential) string {
	enc := base64.StdEncoding.EncodeToString
	return "salt=" + enc(cred.Salt) + ",stored_key=" + enc(cred.StoredKey) +
		",server_key=" + enc(cred.ServerKey) + ",iterations=" + strconv.Itoa(cred.Iterations)
}

// ParseScramCredential reads Kafka's credential string. As Kafka, it wants
// exactly the four keys salt, stored_key, server_key and iterations, in any
// order.
func ParseScramCredential(s string) (ScramCredential, error) {
	props := make(map[string]string, 4)
	for _, tok := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(tok, "=")
		if !ok || k == "" {
			return ScramCredential{}, fmt.Errorf("scram credential: token %q is not key=value: %w", truncate(tok, 40), ErrInvalidCredential)
		}
		if _, dup := props[k]; dup {
			return ScramCredential{}, fmt.Errorf("scram credential: key %q twice: %w", k, ErrInvalidCredential)
		}
		props[k] = v
	}
	if len(props) != 4 {
		return ScramCredential{}, fmt.Errorf("scram credential: want salt, stored_key, server_key and iterations, got %d keys: %w", len(props), ErrInvalidCredential)
	}
	var cred ScramCredential
	for _, f := range []struct {
		key string
		dst *[]byte
	}{{"salt", &cred.Salt}, {"stored_key", &cred.StoredKey}, {"server_key", &cred.ServerKey}} {
		v, ok := props[f.key]
		if !ok {
			return ScramCredential{}, fmt.Errorf("scram credential: no %s: %w", f.key, ErrInvalidCredential)
		}
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return ScramCredential{}, fmt.Errorf("scram credential: %s is not base64: %w", f.key, ErrInvalidCredential)
		}
		*f.dst = b
	}
	it, ok := props["iterations"]
	if !ok {
		return ScramCredential{}, fmt.Errorf("scram credential: no iterations: %w", ErrInvalidCredential)
	}
	n, err := strconv.Atoi(it)
	if err != nil || n <= 0 {
		return ScramCredential{}, fmt.Errorf("scram credential: iterations %q is not a positive integer: %w", truncate(it, 20), ErrInvalidCredential)
	}
	cred.Iterations = n
	return cred, nil
}

type entityConfigJSON struct {
	Version int               `json:"version"`
	Config  map[string]string `json:"config"`
}

// EncodeEntityConfig renders a config znode ({"version":1,"config":{...}}),
// keys sorted so the bytes are stable.
func EncodeEntityConfig(config map[string]string) []byte {
	if config == nil {
		config = map[string]string{}
	}
	b, err := json.Marshal(entityConfigJSON{Version: 1, Config: config})
	if err != nil {
		panic(fmt.Sprintf("security: marshal entity config: %v", err)) // a map of strings always marshals
	}
	return b
}

// DecodeEntityConfig reads a config znode. Empty or null data is an empty
// config, as in Kafka; so is a JSON object without "config". Every value
// must be a string.
func DecodeEntityConfig(data []byte) (map[string]string, error) {
	out := map[string]string{}
	data = bytes.TrimSpace(data)
	if len(data) == 0 || string(data) == "null" {
		return out, nil
	}
	var raw struct {
		Config map[string]json.RawMessage `json:"config"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("entity config: %v: %w", err, ErrInvalidCredential)
	}
	for k, v := range raw.Config {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, fmt.Errorf("entity config: value of %q is not a string: %w", k, ErrInvalidCredential)
		}
		out[k] = s
	}
	return out, nil
}

// ScramCredentialsFromConfig picks the SCRAM credentials out of a user's
// config; other keys are ignored.
func ScramCredentialsFromConfig(config map[string]string) (map[ScramMechanism]ScramCredential, error) {
	out := make(map[ScramMechanism]ScramCredential)
	for _, m := range ScramMechanisms {
		v, ok := config[m.Name()]
		if !ok {
			continue
		}
		cred, err := ParseScramCredential(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m, err)
		}
		out[m] = cred
	}
	return out, nil
}

// DecodeUserScramCredentials reads the SCRAM credentials of a
// /config/users/<user> znode.
func DecodeUserScramCredentials(data []byte) (map[ScramMechanism]ScramCredential, error) {
	cfg, err := DecodeEntityConfig(data)
	if err != nil {
		return nil, err
	}
	return ScramCredentialsFromConfig(cfg)
}

// SetScramCredential returns a copy of config with cred stored for m, as
// AlterUserScramCredentials' upsertion does to the user's znode.
func SetScramCredential(config map[string]string, m ScramMechanism, cred ScramCredential) map[string]string {
	out := make(map[string]string, len(config)+1)
	for k, v := range config {
		out[k] = v
	}
	out[m.Name()] = FormatScramCredential(cred)
	return out
}

// DeleteScramCredential returns a copy of config without m's credential.
func DeleteScramCredential(config map[string]string, m ScramMechanism) map[string]string {
	out := make(map[string]string, len(config))
	for k, v := range config {
		if k != m.Name() {
			out[k] = v
		}
	}
	return out
}

// EncodeConfigChange renders the payload of a /config/changes/config_change_
// sequential znode, {"version":2,"entity_path":"users/<sanitized user>"}.
func EncodeConfigChange(entityPath string) []byte {
	b, err := json.Marshal(struct {
		Version    int    `json:"version"`
		EntityPath string `json:"entity_path"`
	}{2, entityPath})
	if err != nil {
		panic(fmt.Sprintf("security: marshal config change: %v", err))
	}
	return b
}

// DecodeConfigChange reads a /config/changes notification. Version 2 carries
// "entity_path" ("users/alice"); version 1, from old Kafka, carries
// "entity_type" and "entity_name", turned here into the same path.
func DecodeConfigChange(data []byte) (entityPath string, err error) {
	var raw struct {
		Version    *int   `json:"version"`
		EntityPath string `json:"entity_path"`
		EntityType string `json:"entity_type"`
		EntityName string `json:"entity_name"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return "", fmt.Errorf("config change: %v: %w", err, ErrInvalidConfig)
	}
	switch {
	case raw.Version == nil:
		return "", fmt.Errorf("config change: no version: %w", ErrInvalidConfig)
	case *raw.Version == 2 && raw.EntityPath != "":
		return raw.EntityPath, nil
	case *raw.Version == 1 && raw.EntityType != "" && raw.EntityName != "":
		return raw.EntityType + "/" + raw.EntityName, nil
	}
	return "", fmt.Errorf("config change: version %d without its entity fields: %w", *raw.Version, ErrInvalidConfig)
}

// SanitizeEntityName encodes a user name for a znode path as Kafka's
// Sanitizer does: URL encoding with "*" as %2A and a space as %20.
func SanitizeEntityName(name string) string {
	var b strings.Builder
	for _, c := range []byte(name) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '-', c == '_':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// DesanitizeEntityName undoes SanitizeEntityName (URL decoding, "+" is a
// space).
func DesanitizeEntityName(name string) (string, error) {
	s, err := url.QueryUnescape(name)
	if err != nil {
		return "", fmt.Errorf("desanitize %q: %v: %w", truncate(name, 40), err, ErrInvalidConfig)
	}
	return s, nil
}
