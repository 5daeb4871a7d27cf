package security

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/crypto/pkcs12"
)

// TLSSettings are the resolved ssl.* settings of one listener (or of the
// inter-broker client). Empty means unset.
type TLSSettings struct {
	KeystoreType             string // ssl.keystore.type: PEM or PKCS12
	KeystoreLocation         string // ssl.keystore.location
	KeystorePassword         string // ssl.keystore.password
	KeystoreCertificateChain string // ssl.keystore.certificate.chain (PEM text)
	KeystoreKey              string // ssl.keystore.key (PEM text)
	KeyPassword              string // ssl.key.password

	TruststoreType         string // ssl.truststore.type: PEM or PKCS12
	TruststoreLocation     string // ssl.truststore.location
	TruststorePassword     string // ssl.truststore.password
	TruststoreCertificates string // ssl.truststore.certificates (PEM text)

	ClientAuth                      string   // ssl.client.auth: none, requested, required
	EnabledProtocols                []string // ssl.enabled.protocols
	CipherSuites                    []string // ssl.cipher.suites
	EndpointIdentificationAlgorithm string   // ssl.endpoint.identification.algorithm: https or empty
}

// The Kafka keys read by TLSSettingsFromConfig, without the "ssl." prefix.
var tlsKeys = []string{
	"keystore.type", "keystore.location", "keystore.password", "keystore.certificate.chain", "keystore.key",
	"key.password", "truststore.type", "truststore.location", "truststore.password", "truststore.certificates",
	"client.auth", "enabled.protocols", "cipher.suites", "endpoint.identification.algorithm",
}

// TLSSettingsFromConfig reads Kafka's ssl.* keys for a listener: a key
// listener.name.<listener, lower-cased>.ssl.<key> overrides ssl.<key>, as
// Kafka's ListenerName.configPrefix lookups do. An empty listener reads only
// ssl.*. Kafka's defaults apply: ssl.enabled.protocols TLSv1.2,TLSv1.3,
// ssl.client.auth none, ssl.endpoint.identification.algorithm https.
func TLSSettingsFromConfig(props map[string]string, listener string) TLSSettings {
	get := func(key string) (string, bool) {
		if listener != "" {
			if v, ok := props["listener.name."+strings.ToLower(listener)+".ssl."+key]; ok {
				return v, true
			}
		}
		v, ok := props["ssl."+key]
		return v, ok
	}
	v := make(map[string]string, len(tlsKeys))
	for _, k := range tlsKeys {
		if s, ok := get(k); ok {
			v[k] = strings.TrimSpace(s)
		}
	}
	s := TLSSettings{
		KeystoreType:             v["keystore.type"],
		KeystoreLocation:         v["keystore.location"],
		KeystorePassword:         v["keystore.password"],
		KeystoreCertificateChain: v["keystore.certificate.chain"],
		KeystoreKey:              v["keystore.key"],
		KeyPassword:              v["key.password"],
		TruststoreType:           v["truststore.type"],
		TruststoreLocation:       v["truststore.location"],
		TruststorePassword:       v["truststore.password"],
		TruststoreCertificates:   v["truststore.certificates"],
		ClientAuth:               v["client.auth"],
		EnabledProtocols:         splitList(v["enabled.protocols"]),
		CipherSuites:             splitList(v["cipher.suites"]),
	}
	if _, ok := get("enabled.protocols"); !ok {
		s.EnabledProtocols = []string{"TLSv1.2", "TLSv1.3"}
	}
	if s.ClientAuth == "" {
		s.ClientAuth = "none"
	}
	if alg, ok := get("endpoint.identification.algorithm"); ok {
		s.EndpointIdentificationAlgorithm = strings.TrimSpace(alg)
	} else {
		s.EndpointIdentificationAlgorithm = "https"
	}
	return s
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func configErr(key, format string, args ...any) error {
	return fmt.Errorf("%s: %s: %w", key, fmt.Sprintf(format, args...), ErrInvalidConfig)
}

// TLSOptions tune a TLSContext.
type TLSOptions struct {
	// ReloadInterval is how often, at most, the keystore and truststore
	// files are checked for a change of modification time or size. Zero
	// means 30 seconds; negative disables reloading.
	ReloadInterval time.Duration
	// Now is the clock; nil is time.Now. Tests pass a fake.
	Now func() time.Time
	Log zerolog.Logger
}

// TLSContext holds a listener's key pair and trust pool, re-read from disk
// when the files change (Kafka's dynamic SSL reconfiguration, done as a file
// reload), and hands out *tls.Config values for a server or a client. A
// changed file that fails to load keeps the previous material and is
// logged; the next change is tried again. Safe for concurrent use.
type TLSContext struct {
	settings   TLSSettings
	minVersion uint16
	maxVersion uint16
	suites     []uint16
	clientAuth tls.ClientAuthType
	verifyHost bool
	interval   time.Duration
	now        func() time.Time
	log        zerolog.Logger

	mu        sync.Mutex
	lastCheck time.Time
	keyFiles  []fileStamp
	trustFile []fileStamp
	cert      *tls.Certificate // nil without a keystore
	pool      *x509.CertPool   // nil without a truststore
}

type fileStamp struct {
	path  string
	mtime time.Time
	size  int64
}

func stampFiles(paths ...string) []fileStamp {
	out := make([]fileStamp, 0, len(paths))
	for _, p := range paths {
		st := fileStamp{path: p}
		if fi, err := os.Stat(p); err == nil {
			st.mtime, st.size = fi.ModTime(), fi.Size()
		}
		out = append(out, st)
	}
	return out
}

func stampsEqual(a, b []fileStamp) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].path != b[i].path || !a[i].mtime.Equal(b[i].mtime) || a[i].size != b[i].size {
			return false
		}
	}
	return true
}

// NewTLSContext validates s and loads its keystore and truststore.
func NewTLSContext(s TLSSettings, opts TLSOptions) (*TLSContext, error) {
	c := &TLSContext{settings: s, interval: opts.ReloadInterval, now: opts.Now, log: opts.Log}
	if c.interval == 0 {
		c.interval = 30 * time.Second
	}
	if c.now == nil {
		c.now = time.Now
	}
	var err error
	if c.minVersion, c.maxVersion, err = parseProtocols(s.EnabledProtocols); err != nil {
		return nil, err
	}
	if c.suites, err = CipherSuitesFromNames(s.CipherSuites); err != nil {
		return nil, err
	}
	switch strings.ToLower(s.ClientAuth) {
	case "", "none":
		c.clientAuth = tls.NoClientCert
	case "requested":
		c.clientAuth = tls.VerifyClientCertIfGiven
	case "required":
		c.clientAuth = tls.RequireAndVerifyClientCert
	default:
		return nil, configErr("ssl.client.auth", "%q is not none, requested or required", s.ClientAuth)
	}
	switch strings.ToLower(s.EndpointIdentificationAlgorithm) {
	case "https":
		c.verifyHost = true
	case "":
	default:
		return nil, configErr("ssl.endpoint.identification.algorithm", "%q is not https or empty", s.EndpointIdentificationAlgorithm)
	}
	if c.cert, err = loadKeystore(s); err != nil {
		return nil, err
	}
	if c.pool, err = loadTruststore(s); err != nil {
		return nil, err
	}
	if c.clientAuth != tls.NoClientCert && c.pool == nil {
		return nil, configErr("ssl.client.auth", "%s needs a truststore (ssl.truststore.location or ssl.truststore.certificates) to verify client certificates", s.ClientAuth)
	}
	if s.KeystoreLocation != "" {
		c.keyFiles = stampFiles(s.KeystoreLocation)
	}
	if s.TruststoreLocation != "" {
		c.trustFile = stampFiles(s.TruststoreLocation)
	}
	c.lastCheck = c.now()
	return c, nil
}

func parseProtocols(protos []string) (uint16, uint16, error) {
	if len(protos) == 0 {
		return 0, 0, configErr("ssl.enabled.protocols", "empty")
	}
	var lo, hi uint16
	for _, p := range protos {
		var v uint16
		switch p {
		case "TLSv1.2":
			v = tls.VersionTLS12
		case "TLSv1.3":
			v = tls.VersionTLS13
		case "TLSv1", "TLSv1.1", "SSLv3", "SSLv2Hello":
			return 0, 0, configErr("ssl.enabled.protocols", "%s is not supported; use TLSv1.2 and/or TLSv1.3", p)
		default:
			return 0, 0, configErr("ssl.enabled.protocols", "unknown protocol %q", p)
		}
		if lo == 0 || v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
	}
	return lo, hi, nil
}

// tls13Suites are TLS 1.3's suites, which Go always enables and does not let
// a config restrict; naming them in ssl.cipher.suites is accepted.
var tls13Suites = map[string]bool{"TLS_AES_128_GCM_SHA256": true, "TLS_AES_256_GCM_SHA384": true, "TLS_CHACHA20_POLY1305_SHA256": true}

// CipherSuitesFromNames maps ssl.cipher.suites (Java/IANA names, with
// Java's SSL_ prefix accepted for TLS_) to Go's TLS 1.2 suite IDs. TLS 1.3
// names are accepted and need no ID. An unknown name is a config error
// naming it.
func CipherSuitesFromNames(names []string) ([]uint16, error) {
	if len(names) == 0 {
		return nil, nil
	}
	byName := map[string]uint16{}
	for _, cs := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
		byName[cs.Name] = cs.ID
	}
	var out []uint16
	for _, n := range names {
		name := n
		if rest, ok := strings.CutPrefix(name, "SSL_"); ok {
			name = "TLS_" + rest
		}
		if tls13Suites[name] {
			continue
		}
		id, ok := byName[name]
		if !ok {
			return nil, configErr("ssl.cipher.suites", "unknown or unsupported cipher suite %q", n)
		}
		out = append(out, id)
	}
	return out, nil
}

func keystoreType(s TLSSettings) (string, error) {
	t := strings.ToUpper(s.KeystoreType)
	switch t {
	case "PEM", "PKCS12":
		return t, nil
	case "":
		switch {
		case s.KeystoreCertificateChain != "" || s.KeystoreKey != "":
			return "PEM", nil
		case strings.HasSuffix(strings.ToLower(s.KeystoreLocation), ".pem"):
			return "PEM", nil
		case strings.HasSuffix(strings.ToLower(s.KeystoreLocation), ".p12"), strings.HasSuffix(strings.ToLower(s.KeystoreLocation), ".pfx"):
			return "PKCS12", nil
		}
		return "", configErr("ssl.keystore.type", "unset, and Kafka's default JKS is not supported; set PEM or PKCS12")
	case "JKS":
		return "", configErr("ssl.keystore.type", "JKS is not supported; convert the keystore to PKCS12 or PEM")
	}
	return "", configErr("ssl.keystore.type", "%q is not PEM or PKCS12", s.KeystoreType)
}

// loadKeystore returns the key pair, or nil without any keystore setting.
func loadKeystore(s TLSSettings) (*tls.Certificate, error) {
	if s.KeystoreLocation == "" && s.KeystoreCertificateChain == "" && s.KeystoreKey == "" {
		return nil, nil
	}
	typ, err := keystoreType(s)
	if err != nil {
		return nil, err
	}
	if typ == "PKCS12" {
		if s.KeystoreCertificateChain != "" || s.KeystoreKey != "" {
			return nil, configErr("ssl.keystore.certificate.chain", "only with ssl.keystore.type=PEM")
		}
		if s.KeystoreLocation == "" {
			return nil, configErr("ssl.keystore.location", "required for a PKCS12 keystore")
		}
		return loadPKCS12Keystore(s)
	}
	var chainPEM, keyPEM []byte
	switch {
	case s.KeystoreLocation != "" && (s.KeystoreCertificateChain != "" || s.KeystoreKey != ""):
		return nil, configErr("ssl.keystore.location", "set either it or ssl.keystore.certificate.chain with ssl.keystore.key, not both")
	case s.KeystoreLocation != "":
		b, err := os.ReadFile(s.KeystoreLocation)
		if err != nil {
			return nil, configErr("ssl.keystore.location", "%v", err)
		}
		chainPEM, keyPEM = b, b
	case s.KeystoreCertificateChain == "":
		return nil, configErr("ssl.keystore.certificate.chain", "required with ssl.keystore.key")
	case s.KeystoreKey == "":
		return nil, configErr("ssl.keystore.key", "required with ssl.keystore.certificate.chain")
	default:
		chainPEM, keyPEM = []byte(s.KeystoreCertificateChain), []byte(s.KeystoreKey)
	}
	keyKey := "ssl.keystore.key"
	if s.KeystoreLocation != "" {
		keyKey = "ssl.keystore.location"
	}
	certs, err := parsePEMCertificates(chainPEM)
	if err != nil || len(certs) == 0 {
		if err == nil {
			err = errors.New("no CERTIFICATE block")
		}
		return nil, configErr(keyKey, "certificate chain: %v", err)
	}
	key, err := parsePEMPrivateKey(keyPEM, s.KeyPassword, keyKey)
	if err != nil {
		return nil, err
	}
	return keyPair(certs, key, keyKey)
}

func keyPair(certs []*x509.Certificate, key crypto.PrivateKey, source string) (*tls.Certificate, error) {
	if !publicKeyMatches(certs[0].PublicKey, key) {
		return nil, configErr(source, "private key does not match the first certificate (%s)", certs[0].Subject)
	}
	c := &tls.Certificate{PrivateKey: key, Leaf: certs[0]}
	for _, x := range certs {
		c.Certificate = append(c.Certificate, x.Raw)
	}
	return c, nil
}

func publicKeyMatches(pub crypto.PublicKey, key crypto.PrivateKey) bool {
	type publicKeyer interface{ Public() crypto.PublicKey }
	type equaler interface{ Equal(crypto.PublicKey) bool }
	pk, ok := key.(publicKeyer)
	if !ok {
		return false
	}
	eq, ok := pk.Public().(equaler)
	return ok && eq.Equal(pub)
}

func parsePEMCertificates(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return out, nil
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
}

// parsePEMPrivateKey finds the private key block: PKCS#8 ("PRIVATE KEY"),
// encrypted PKCS#8 ("ENCRYPTED PRIVATE KEY", PBES2 with PBKDF2 and AES-CBC
// or 3DES, decrypted with ssl.key.password), or the unencrypted PKCS#1 and
// SEC 1 forms. Legacy OpenSSL-encrypted PEM (Proc-Type: 4,ENCRYPTED) is
// refused: it is weak and Kafka does not read it either.
func parsePEMPrivateKey(data []byte, password, source string) (crypto.PrivateKey, error) {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return nil, configErr(source, "no PRIVATE KEY block")
		}
		if _, enc := b.Headers["Proc-Type"]; enc {
			return nil, configErr(source, "legacy encrypted PEM key (Proc-Type header) is not supported; use encrypted PKCS#8 (openssl pkcs8 -topk8 -v2 aes-256-cbc)")
		}
		var (
			key any
			err error
		)
		switch b.Type {
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(b.Bytes)
		case "ENCRYPTED PRIVATE KEY":
			if password == "" {
				return nil, configErr("ssl.key.password", "required for the encrypted private key in %s", source)
			}
			var der []byte
			if der, err = decryptPKCS8(b.Bytes, []byte(password)); err != nil {
				return nil, configErr("ssl.key.password", "cannot decrypt the private key in %s: %v", source, err)
			}
			key, err = x509.ParsePKCS8PrivateKey(der)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(b.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(b.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, configErr(source, "private key: %v", err)
		}
		switch key.(type) {
		case *rsa.PrivateKey, *ecdsa.PrivateKey, ed25519.PrivateKey:
			return key, nil
		}
		return nil, configErr(source, "unsupported private key type %T", key)
	}
}

func parseDERPrivateKey(der []byte) (crypto.PrivateKey, error) {
	if k, err := x509.ParsePKCS8PrivateKey(der); err == nil {
		return k, nil
	}
	if k, err := x509.ParseECPrivateKey(der); err == nil {
		return k, nil
	}
	return x509.ParsePKCS1PrivateKey(der)
}

func loadPKCS12Keystore(s TLSSettings) (*tls.Certificate, error) {
	data, err := os.ReadFile(s.KeystoreLocation)
	if err != nil {
		return nil, configErr("ssl.keystore.location", "%v", err)
	}
	blocks, err := pkcs12.ToPEM(data, s.KeystorePassword)
	if err != nil && s.KeyPassword != "" && s.KeyPassword != s.KeystorePassword {
		blocks, err = pkcs12.ToPEM(data, s.KeyPassword)
	}
	if err != nil {
		return nil, configErr("ssl.keystore.location", "PKCS12 %s: %v (only the legacy 3DES/RC2 and SHA-1 MAC form is supported, as openssl pkcs12 -export -legacy writes; or use ssl.keystore.type=PEM)", s.KeystoreLocation, err)
	}
	var certs []*x509.Certificate
	var key crypto.PrivateKey
	for _, b := range blocks {
		switch b.Type {
		case "CERTIFICATE":
			c, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				return nil, configErr("ssl.keystore.location", "certificate: %v", err)
			}
			certs = append(certs, c)
		case "PRIVATE KEY":
			if key != nil {
				return nil, configErr("ssl.keystore.location", "more than one private key in %s", s.KeystoreLocation)
			}
			// x/crypto/pkcs12 labels every key "PRIVATE KEY" but hands EC
			// keys over in SEC 1 form and RSA keys in PKCS#1.
			if key, err = parseDERPrivateKey(b.Bytes); err != nil {
				return nil, configErr("ssl.keystore.location", "private key: %v", err)
			}
		}
	}
	if key == nil || len(certs) == 0 {
		return nil, configErr("ssl.keystore.location", "%s holds no private key with a certificate", s.KeystoreLocation)
	}
	// Put the certificate of the key first, then the rest of the chain.
	for i, c := range certs {
		if publicKeyMatches(c.PublicKey, key) {
			certs[0], certs[i] = certs[i], certs[0]
			break
		}
	}
	return keyPair(certs, key, "ssl.keystore.location")
}

// loadTruststore returns the pool, or nil without any truststore setting.
func loadTruststore(s TLSSettings) (*x509.CertPool, error) {
	if s.TruststoreLocation == "" && s.TruststoreCertificates == "" {
		return nil, nil
	}
	if s.TruststoreLocation != "" && s.TruststoreCertificates != "" {
		return nil, configErr("ssl.truststore.location", "set either it or ssl.truststore.certificates, not both")
	}
	typ := strings.ToUpper(s.TruststoreType)
	if typ == "" {
		switch {
		case s.TruststoreCertificates != "", strings.HasSuffix(strings.ToLower(s.TruststoreLocation), ".pem"), strings.HasSuffix(strings.ToLower(s.TruststoreLocation), ".crt"):
			typ = "PEM"
		case strings.HasSuffix(strings.ToLower(s.TruststoreLocation), ".p12"), strings.HasSuffix(strings.ToLower(s.TruststoreLocation), ".pfx"):
			typ = "PKCS12"
		default:
			return nil, configErr("ssl.truststore.type", "unset, and Kafka's default JKS is not supported; set PEM or PKCS12")
		}
	}
	var certs []*x509.Certificate
	switch typ {
	case "PEM":
		data := []byte(s.TruststoreCertificates)
		key := "ssl.truststore.certificates"
		if s.TruststoreLocation != "" {
			key = "ssl.truststore.location"
			var err error
			if data, err = os.ReadFile(s.TruststoreLocation); err != nil {
				return nil, configErr(key, "%v", err)
			}
		}
		var err error
		if certs, err = parsePEMCertificates(data); err != nil {
			return nil, configErr(key, "%v", err)
		}
	case "PKCS12":
		if s.TruststoreCertificates != "" {
			return nil, configErr("ssl.truststore.certificates", "only with ssl.truststore.type=PEM")
		}
		data, err := os.ReadFile(s.TruststoreLocation)
		if err != nil {
			return nil, configErr("ssl.truststore.location", "%v", err)
		}
		blocks, err := pkcs12.ToPEM(data, s.TruststorePassword)
		if err != nil {
			return nil, configErr("ssl.truststore.location", "PKCS12 %s: %v (golang.org/x/crypto/pkcs12 reads only the legacy 3DES/RC2 form with a SHA-1 MAC holding one private key and its chain, so certificate-only PKCS12 truststores do not load; use ssl.truststore.type=PEM)", s.TruststoreLocation, err)
		}
		for _, b := range blocks {
			if b.Type == "CERTIFICATE" {
				c, err := x509.ParseCertificate(b.Bytes)
				if err != nil {
					return nil, configErr("ssl.truststore.location", "certificate: %v", err)
				}
				certs = append(certs, c)
			}
		}
	case "JKS":
		return nil, configErr("ssl.truststore.type", "JKS is not supported; convert the truststore to PKCS12 or PEM")
	default:
		return nil, configErr("ssl.truststore.type", "%q is not PEM or PKCS12", s.TruststoreType)
	}
	if len(certs) == 0 {
		return nil, configErr("ssl.truststore.location", "no certificates")
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

// maybeReload re-reads changed files at most once per interval.
func (c *TLSContext) maybeReload() (*tls.Certificate, *x509.CertPool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if c.interval < 0 || now.Sub(c.lastCheck) < c.interval {
		return c.cert, c.pool
	}
	c.lastCheck = now
	if len(c.keyFiles) > 0 {
		if st := stampFiles(c.settings.KeystoreLocation); !stampsEqual(st, c.keyFiles) {
			c.keyFiles = st
			if cert, err := loadKeystore(c.settings); err != nil {
				c.log.Error().Err(err).Str("file", c.settings.KeystoreLocation).Msg("keystore changed but does not load; keeping the previous key pair")
			} else {
				c.cert = cert
				c.log.Info().Str("file", c.settings.KeystoreLocation).Str("subject", cert.Leaf.Subject.String()).
					Time("not_after", cert.Leaf.NotAfter).Msg("keystore reloaded")
			}
		}
	}
	if len(c.trustFile) > 0 {
		if st := stampFiles(c.settings.TruststoreLocation); !stampsEqual(st, c.trustFile) {
			c.trustFile = st
			if pool, err := loadTruststore(c.settings); err != nil {
				c.log.Error().Err(err).Str("file", c.settings.TruststoreLocation).Msg("truststore changed but does not load; keeping the previous one")
			} else {
				c.pool = pool
				c.log.Info().Str("file", c.settings.TruststoreLocation).Msg("truststore reloaded")
			}
		}
	}
	return c.cert, c.pool
}

// Certificate returns the current key pair (nil without a keystore),
// reloading it first if due.
func (c *TLSContext) Certificate() *tls.Certificate {
	cert, _ := c.maybeReload()
	return cert
}

func (c *TLSContext) base() *tls.Config {
	return &tls.Config{MinVersion: c.minVersion, MaxVersion: c.maxVersion, CipherSuites: c.suites}
}

// ServerConfig returns the config of a TLS listener. Every handshake gets
// the current key pair and client CA pool through GetConfigForClient.
func (c *TLSContext) ServerConfig() (*tls.Config, error) {
	if c.cert == nil {
		return nil, configErr("ssl.keystore.location", "a TLS listener needs a keystore (ssl.keystore.location, or ssl.keystore.certificate.chain with ssl.keystore.key)")
	}
	outer := c.base()
	outer.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		cert, pool := c.maybeReload()
		cfg := c.base()
		cfg.Certificates = []tls.Certificate{*cert}
		cfg.ClientAuth = c.clientAuth
		cfg.ClientCAs = pool
		return cfg, nil
	}
	return outer, nil
}

// ClientConfig returns the config of an outgoing (inter-broker)
// connection to serverName. The client certificate is the current key pair
// at each handshake; the trust pool is the one current now (nil: the
// system roots). With ssl.endpoint.identification.algorithm empty the chain
// is verified but not the host name, as in Kafka.
func (c *TLSContext) ClientConfig(serverName string) *tls.Config {
	_, pool := c.maybeReload()
	cfg := c.base()
	cfg.ServerName = serverName
	cfg.RootCAs = pool
	if c.cert != nil {
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return c.Certificate(), nil
		}
	}
	if !c.verifyHost {
		// Verify the chain ourselves without a DNS name.
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("security: server sent no certificate")
			}
			inter := x509.NewCertPool()
			for _, x := range cs.PeerCertificates[1:] {
				inter.AddCert(x)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter})
			return err
		}
	}
	return cfg
}
