package security

import (
	"fmt"
	"strings"
)

// SASLConfig holds what the SASL servers of one listener need;
// sasl.enabled.mechanisms decides which of them a client may pick.
type SASLConfig struct {
	// EnabledMechanisms is sasl.enabled.mechanisms (Kafka's default is
	// GSSAPI, which this package does not implement).
	EnabledMechanisms []string
	// Plain checks PLAIN logins, usually the PlainUsers of the
	// listener's plain.sasl.jaas.config.
	Plain PlainAuthenticator
	// Scram looks up SCRAM credentials, usually a ScramCredentialCache.
	Scram ScramCredentialLookup
}

// SupportedSASLMechanisms lists the mechanisms this package implements.
var SupportedSASLMechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}

// ValidateSASLConfig refuses an enabled mechanism this package cannot
// serve, or one whose credential source is missing.
func ValidateSASLConfig(c SASLConfig) error {
	if len(c.EnabledMechanisms) == 0 {
		return configErr("sasl.enabled.mechanisms", "empty")
	}
	for _, m := range c.EnabledMechanisms {
		switch _, isScram := ParseScramMechanism(m); {
		case m == "PLAIN" && c.Plain == nil:
			return configErr("sasl.enabled.mechanisms", "PLAIN needs users from plain.sasl.jaas.config")
		case m == "PLAIN":
		case isScram && c.Scram == nil:
			return configErr("sasl.enabled.mechanisms", "%s needs a SCRAM credential store", m)
		case isScram:
		default:
			return configErr("sasl.enabled.mechanisms", "%s is not supported (supported: %s)", m, strings.Join(SupportedSASLMechanisms, ", "))
		}
	}
	return nil
}

// NewSASLServer starts the exchange a client asked for in SaslHandshake.
// A mechanism that is not enabled gives ErrUnsupportedMechanism
// (UNSUPPORTED_SASL_MECHANISM); its text lists the enabled ones, as Kafka's
// SaslHandshake response does.
func NewSASLServer(c SASLConfig, mechanism string) (SASLServer, error) {
	enabled := false
	for _, m := range c.EnabledMechanisms {
		enabled = enabled || m == mechanism
	}
	if !enabled {
		return nil, fmt.Errorf("mechanism %q, enabled %v: %w", truncate(mechanism, 40), c.EnabledMechanisms, ErrUnsupportedMechanism)
	}
	if mechanism == "PLAIN" {
		return NewPlainServer(c.Plain)
	}
	if m, ok := ParseScramMechanism(mechanism); ok {
		return NewScramServer(m, ScramServerConfig{Credentials: c.Scram})
	}
	return nil, fmt.Errorf("mechanism %q: %w", truncate(mechanism, 40), ErrUnsupportedMechanism)
}
