package security

import "errors"

var (
	// ErrAuthenticationFailed wraps every refused SASL exchange: a malformed
	// message, an unknown user, a wrong password or proof, a mismatched
	// authorization id or nonce. protocol maps it to SASL_AUTHENTICATION_FAILED.
	// The wrapping text names the problem but never a secret.
	ErrAuthenticationFailed = errors.New("security: authentication failed")
	// ErrIllegalSASLState is returned by a SASL server stepped after it has
	// completed or failed. protocol maps it to ILLEGAL_SASL_STATE.
	ErrIllegalSASLState = errors.New("security: illegal SASL state")
	// ErrUnsupportedMechanism is returned by NewSASLServer for a mechanism this
	// package does not implement. protocol maps it to UNSUPPORTED_SASL_MECHANISM.
	ErrUnsupportedMechanism = errors.New("security: unsupported SASL mechanism")
	// ErrInvalidCredential wraps a SCRAM credential string or user config
	// payload that cannot be decoded.
	ErrInvalidCredential = errors.New("security: invalid SCRAM credential")
	// ErrInvalidJAAS wraps a JAAS configuration string that cannot be parsed
	// or lacks an option a login module needs.
	ErrInvalidJAAS = errors.New("security: invalid JAAS configuration")
	// ErrInvalidConfig wraps a TLS or principal-mapping setting that cannot be
	// used; the text names the config key.
	ErrInvalidConfig = errors.New("security: invalid config")
	// ErrNoMatchingRule is returned by PrincipalMapper.Name when no rule of
	// ssl.principal.mapping.rules applies to a distinguished name.
	ErrNoMatchingRule = errors.New("security: no principal mapping rule applies")
	// ErrUnacceptableCredential wraps a SCRAM credential change that Kafka's
	// AlterUserScramCredentials refuses: an empty user name, iterations
	// outside [ScramMinIterations, ScramMaxIterations], an empty salt or
	// salted password. protocol maps it to UNACCEPTABLE_CREDENTIAL.
	ErrUnacceptableCredential = errors.New("security: unacceptable credential")
	// ErrCredentialNotFound is the deletion (or description) of a SCRAM
	// credential that does not exist. protocol maps it to RESOURCE_NOT_FOUND.
	ErrCredentialNotFound = errors.New("security: credential not found")
	// ErrDuplicateResource is a user named twice for the same mechanism in
	// one AlterUserScramCredentials (or twice in one
	// DescribeUserScramCredentials). protocol maps it to DUPLICATE_RESOURCE.
	ErrDuplicateResource = errors.New("security: resource named twice in one request")
	// ErrInvalidACL wraps an ACL, resource pattern, filter or ACL znode
	// payload that cannot be decoded or may not be stored.
	ErrInvalidACL = errors.New("security: invalid ACL")
)
