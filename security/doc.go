// Package security holds the self-contained building blocks of Kafka's
// ZooKeeper-era security (issue 14): SASL servers, credential and ACL
// payload formats, TLS configuration, principals and the ACL authorizer core.
//
// # SASL
//
// NewSASLServer picks the server for the mechanism a client named in
// SaslHandshake among sasl.enabled.mechanisms (ValidateSASLConfig checks
// them at start-up); an unknown or disabled one is ErrUnsupportedMechanism.
// A SASLServer runs one exchange on one connection; protocol feeds it the
// SaslAuthenticate (or v0 raw) payloads and, once Done, makes
// User:<AuthorizationID> the connection's principal. Every refusal wraps
// ErrAuthenticationFailed (SASL_AUTHENTICATION_FAILED); a step after the
// end gives ErrIllegalSASLState.
//
// ScramServer implements SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677)
// as Kafka's ScramSaslServer, with these checks: the proof is compared in
// constant time; the final nonce must end with the whole server-first
// nonce (CVE-2024-56128, as Kafka checks it: librdkafka before 2.6.1 sends
// its client nonce again in front); an
// authorization id (a=) must equal the user name (CVE-2017-12610); the
// tokenauth extension is refused because this broker issues no delegation
// tokens (other extensions are ignored, as Kafka ignores them); a mandatory
// extension (m=) and channel binding (p=) are refused; the c= attribute must
// carry the gs2 header back; stored credentials below 4096 iterations are
// refused. Credentials come from a ScramCredentialLookup; ScramCredentialCache
// is the in-memory one zkcoord keeps current (Users lists who has one).
// ScramCredentialFromSaltedPassword turns AlterUserScramCredentials' salt and
// salted password into the stored credential, refusing what Kafka refuses:
// ErrUnsupportedMechanism, ErrUnacceptableCredential (iterations outside
// [4096, 16384], empty salt); ErrCredentialNotFound and ErrDuplicateResource
// are the other per-user outcomes zkcoord's store reports (protocol maps
// them to RESOURCE_NOT_FOUND and DUPLICATE_RESOURCE).
//
// PlainServer implements SASL/PLAIN (RFC 4616) as Kafka's PlainSaslServer:
// an authzid, if given, must equal the user name, and PlainUsers compares
// SHA-256 digests of the passwords in constant time. Users come from the
// user_<name>="<password>" options of a PlainLoginModule entry in
// listener.name.<l>.plain.sasl.jaas.config, read by ParseJAASConfig (Kafka's
// JaasConfig grammar: quoted values with Java escapes, comments, the
// required/requisite/sufficient/optional flag, ';' after each entry) and
// PlainUsersFromJAAS. ParseJAASFile reads a JAAS file of named sections, and
// LoginCredentials picks username/password from, say, the Client section's
// DigestLoginModule for ZooKeeper digest authentication.
//
// # TLS
//
// TLSSettingsFromConfig reads Kafka's ssl.* keys for a listener,
// listener.name.<listener>.ssl.<key> overriding ssl.<key>. NewTLSContext
// loads the keystore (PEM from ssl.keystore.location or from
// ssl.keystore.certificate.chain with ssl.keystore.key; PKCS12 through
// golang.org/x/crypto/pkcs12), the private key decrypted with
// ssl.key.password when it is encrypted PKCS#8 (PBES2: PBKDF2 with HMAC-SHA*
// and AES-CBC or 3DES), and the truststore (PEM file or
// ssl.truststore.certificates). It maps ssl.client.auth
// (none/requested/required), ssl.enabled.protocols (TLSv1.2, TLSv1.3) and
// ssl.cipher.suites (IANA/Java names) onto a *tls.Config for a listener
// (ServerConfig) or an outgoing connection (ClientConfig, with
// ssl.endpoint.identification.algorithm). Every config error wraps
// ErrInvalidConfig and begins with the key at fault.
//
// Files given by location are re-read when their modification time or size
// changes, checked at most once per TLSOptions.ReloadInterval during
// handshakes (GetConfigForClient, GetClientCertificate); a changed file that
// does not load keeps the previous material and logs an Error.
//
// Not supported, each refused with an error naming its key: JKS (Kafka's
// default keystore type: ssl.keystore.type must be set to PEM or PKCS12 unless
// the file ends in .pem/.p12); PKCS12 files other than the legacy 3DES/RC2
// form with a SHA-1 MAC (what `openssl pkcs12 -export -legacy` writes),
// including certificate-only PKCS12 truststores, since x/crypto/pkcs12 reads
// no more; PBES1-encrypted and legacy OpenSSL-encrypted (Proc-Type) PEM keys;
// TLSv1 and TLSv1.1. TLS 1.3 cipher suites cannot be restricted in Go; naming
// them is accepted. On the client side a changed truststore applies to
// configs made after the change (ClientConfig reads it when called).
//
// # Principals
//
// KafkaPrincipal is "User:<name>": the SASL authorization id, or for TLS
// (PrincipalFromTLS) the client certificate's subject as Java's
// X500Principal.getName() writes it (DistinguishedName, RFC 2253) mapped by
// ssl.principal.mapping.rules (PrincipalMapper, Kafka's SslPrincipalMapper
// with RE2 patterns), and User:ANONYMOUS without a certificate; a
// certificate the handshake did not verify is ErrUnverifiedCertificate.
//
// # ACLs and the authorizer
//
// The ACL model is Kafka's: ResourceType, PatternType, Operation and
// PermissionType carry Kafka's wire codes and names; ResourcePattern, ACE
// and ACLBinding, and the filters of DescribeAcls/DeleteAcls
// (ResourcePatternFilter with ANY and MATCH, ACEFilter, ACLBindingFilter)
// match as Kafka's do. Authorizer is AclAuthorizer's decision core over an
// in-memory cache keyed by resource pattern: super.users first; a resource
// with no ACL is allowed only with allow.everyone.if.no.acl.found; a Deny for
// the operation or All wins; then an Allow for the operation, All, or an
// implying operation (Read/Write/Delete/Alter imply Describe, AlterConfigs
// implies DescribeConfigs). ACLs apply by literal name, literal "*", and
// prefixed patterns; hosts compare as strings or as equal IP addresses.
// AuthorizeByResourceType is Kafka's check for KIP-679. DeleteCandidates,
// RemoveMatching and AddACLs are the pure halves of CreateAcls/DeleteAcls;
// zkcoord does the conditional znode writes and feeds the results back with
// SetResourceACLs.
//
// # Formats
//
// The /config/users/<user> znode ({"version":1,"config":{"SCRAM-SHA-256":
// "salt=..,stored_key=..,server_key=..,iterations=.."}}) is encoded and
// decoded by EncodeEntityConfig, DecodeEntityConfig, FormatScramCredential
// and ParseScramCredential; the /config/changes payload by
// EncodeConfigChange and DecodeConfigChange; user names in paths by
// SanitizeEntityName (Kafka's Sanitizer). ACL znodes
// ({"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
// "operation":"Read","host":"*"}]}) by EncodeResourceACLs and
// DecodeResourceACLs (entry by entry, as Kafka's AclEntry.fromBytes: an
// operation or permission type it does not know decodes as OpUnknown /
// PermissionUnknown, which the Authorizer matches with nothing, and the
// other entries stay; a znode that does not parse at all is an error, and
// zkcoord then denies its pattern with DenyAllACE); their path segments are ResourceType.String()
// ("Topic": /kafka-acl/Topic/<name>) and PatternType.StoreName()
// ("prefixed": /kafka-acl-extended/prefixed/Topic/<name>). Change
// notifications by EncodeACLChange: "TOPIC:<name>" for /kafka-acl-changes
// and {"version":1,"resourceType":"TOPIC","name":..,"patternType":"PREFIXED"}
// for /kafka-acl-extended-changes, the Java enum names Kafka writes (ZkData
// LiteralAclChangeStore, ExtendedAclChangeStore); the decoders accept any
// spelling, as Kafka's fromString does. Paths themselves are built only by
// zkcoord.
//
// # Concurrency
//
// SASL servers belong to one connection and are not safe for concurrent
// use. ScramCredentialCache, Authorizer and TLSContext are safe for
// concurrent use; each holds one mutex, never across I/O other than
// TLSContext's reads of its own key files, and none calls another, so there
// is no lock order to keep. Everything else is immutable after construction
// or a pure function.
//
// # What this package refuses to do
//
// It imports only the standard library, zerolog and golang.org/x/crypto
// (TestSecurityImports checks): no ZooKeeper client and none of our other
// packages. Znode paths and I/O, watches, request framing and config loading
// stay with zkcoord, protocol and cmd/broker.
//
// # Wiring that remains (issue 14)
//
//   - cmd/broker: parse listeners, listener.security.protocol.map,
//     inter.broker.listener.name, sasl.enabled.mechanisms, super.users,
//     allow.everyone.if.no.acl.found, ssl.principal.mapping.rules; build a
//     TLSContext per SSL/SASL_SSL listener from TLSSettingsFromConfig, PLAIN
//     users from listener.name.<l>.plain.sasl.jaas.config, and the broker's
//     own inter-broker and ZooKeeper credentials with LoginCredentials.
//   - protocol: wrap SSL listeners with ServerConfig; SaslHandshake (17) and
//     SaslAuthenticate (36), v0 raw framing, sasl.server.max.receive.size
//     before authentication, connection.failed.authentication.delay.ms,
//     connections.max.reauth.ms; principals from PrincipalFromTLS or
//     User(AuthorizationID()); Authorize on every API with Kafka's codes;
//     DescribeAcls/CreateAcls/DeleteAcls over ValidateACLBinding,
//     ValidateFilter, ACLs and DeleteCandidates/RemoveMatching/AddACLs;
//     Describe/AlterUserScramCredentials over GenerateScramCredential,
//     NewScramCredential and ScramMaxIterations.
//
// zkcoord's part is done: WatchACLs, WatchScramCredentials, ACLAdmin,
// ScramAdmin (AlterScramUsers over ScramCredentialFromSaltedPassword),
// Config.Digest and Config.SetACL.
package security
