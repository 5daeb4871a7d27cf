package protocol

import (
	"encoding/binary"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/security"
)

const (
	saslHandshakeKey    int16 = 17
	saslAuthenticateKey int16 = 36
)

// minReauthInterval is Kafka's KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND:
// a SaslHandshake within a second of the last re-authentication's start is
// an ordinary request (answered ILLEGAL_SASL_STATE), not a new one.
const minReauthInterval = time.Second

// saslStage is where a connection's SASL exchange is, as the states of
// Kafka's SaslServerAuthenticator.
type saslStage uint8

const (
	// saslStageHandshake: ApiVersions and SaslHandshake are served;
	// anything else fails the authentication.
	saslStageHandshake saslStage = iota
	// saslStageAuthenticate: after SaslHandshake v1, only
	// SaslAuthenticate.
	saslStageAuthenticate
	// saslStageRaw: after SaslHandshake v0, frames are raw SASL tokens
	// answered by raw tokens, without Kafka headers.
	saslStageRaw
	// saslStageDone: authenticated (or not a SASL listener).
	saslStageDone
)

// saslConn is the SASL state of one connection, touched only by its
// readLoop.
type saslConn struct {
	stage     saslStage
	server    security.SASLServer
	mechanism string
	// reauthing: an authenticated connection is re-authenticating
	// (KIP-368); principal and mechanism must stay the same.
	reauthing       bool
	lastReauthStart time.Time
	// expiry is when the session ends (connections.max.reauth.ms); zero
	// for none.
	expiry time.Time
	// versions is how far the one ApiVersions allowed before SaslHandshake
	// has gone.
	versions saslVersions
}

// saslVersions: Kafka's SaslServerAuthenticator serves one ApiVersions
// before SaslHandshake (HANDSHAKE_OR_VERSIONS_REQUEST), staying in that
// state after one at an unsupported version so the client can retry with
// ours. Here that retry is allowed once, so that an unauthenticated
// client cannot keep a connection (and its idle timer) alive forever.
type saslVersions uint8

const (
	saslVersionsNone  saslVersions = iota
	saslVersionsRetry              // one answered UNSUPPORTED_VERSION
	saslVersionsDone               // served: SaslHandshake must follow
)

// preAuth reports whether c is on a SASL listener and not (yet, or while
// re-) authenticated: frames are then bounded by
// sasl.server.max.receive.size and only saslAllows keys are decoded.
func (c *conn) preAuth() bool {
	return c.sec.usesSASL() && (!c.authenticated || c.sasl.reauthing)
}

// saslAllows reports whether the current SASL stage serves key, as
// SaslServerAuthenticator: ApiVersions (once, not while re-authenticating)
// and SaslHandshake at the handshake stage, SaslAuthenticate after it.
func (c *conn) saslAllows(key int16) bool {
	switch c.sasl.stage {
	case saslStageHandshake:
		return key == saslHandshakeKey ||
			key == apiVersionsKey && !c.sasl.reauthing && c.sasl.versions != saslVersionsDone
	case saslStageAuthenticate:
		return key == saslAuthenticateKey
	}
	return false
}

// gateSASLKey refuses, from the api key of its header alone and before
// its body is decoded, a frame the connection's SASL stage does not allow
// before authentication (Kafka raises IllegalSaslState prior to parsing,
// CVE-2022-34917: decoding a refused Produce allocates ~90 times its
// size). The refusal fails the authentication and closes the connection.
func (c *conn) gateSASLKey(frame []byte) (out outFrame, refused bool) {
	if !c.preAuth() {
		return outFrame{}, false
	}
	key := int16(binary.BigEndian.Uint16(frame))
	if c.saslAllows(key) {
		return outFrame{}, false
	}
	return c.authFailed(nil, 0, "unexpected request during SASL authentication",
		kerr.IllegalSaslState, key), true
}

// gateSASL decides what becomes of a parsed request on a SASL listener
// before it reaches dispatch, as Kafka's SaslServerAuthenticator and
// SocketServer do: before authentication only ApiVersions, SaslHandshake
// and SaslAuthenticate pass, at their stage; anything else fails the
// authentication and closes the connection. After authentication a
// SaslHandshake begins a re-authentication when the session has a
// lifetime, and a request past the session's expiry closes the
// connection. On any other listener, and for a SaslHandshake or
// SaslAuthenticate that is not part of an exchange, the answer is
// ILLEGAL_SASL_STATE, as KafkaApis answers. handled false lets the request
// through to dispatch.
func (c *conn) gateSASL(req *request) (out outFrame, handled bool) {
	isSASLKey := req.key == saslHandshakeKey || req.key == saslAuthenticateKey
	if !c.sec.usesSASL() {
		if isSASLKey {
			return c.illegalSASLState(req), true
		}
		return outFrame{}, false
	}
	now := c.s.now()
	if c.authenticated && !c.sasl.reauthing {
		if req.key == saslHandshakeKey && c.mayReauthenticate(now) {
			c.sasl.reauthing, c.sasl.lastReauthStart = true, now
			c.sasl.stage = saslStageHandshake
			c.log.Debug().Str("principal", c.principal.String()).Msg("re-authentication started")
			return c.handleSASLHandshake(req), true
		}
		if !c.sasl.expiry.IsZero() && !now.Before(c.sasl.expiry) {
			c.log.Info().Str("principal", c.principal.String()).Int16("api_key", req.key).
				Dur("connections_max_reauth", c.s.cfg.MaxReauth).
				Msg("closing connection: SASL session expired without re-authentication")
			return outFrame{close: true}, true
		}
		if isSASLKey {
			return c.illegalSASLState(req), true
		}
		return outFrame{}, false
	}
	if !c.saslAllows(req.key) {
		return c.authFailed(nil, 0, "unexpected request during SASL authentication",
			kerr.IllegalSaslState, req.key), true
	}
	switch req.key {
	case apiVersionsKey:
		if req.kreq == nil && c.sasl.versions == saslVersionsNone {
			c.sasl.versions = saslVersionsRetry // above our range: one retry
		} else {
			c.sasl.versions = saslVersionsDone
		}
		return outFrame{}, false
	case saslHandshakeKey:
		return c.handleSASLHandshake(req), true
	default: // saslAuthenticateKey
		return c.handleSASLAuthenticate(req), true
	}
}

// mayReauthenticate is KafkaChannel.maybeBeginServerReauthentication's
// test: the session has a lifetime and the last re-authentication began
// at least a second ago.
func (c *conn) mayReauthenticate(now time.Time) bool {
	if c.sasl.expiry.IsZero() {
		return false
	}
	return c.sasl.lastReauthStart.IsZero() || now.Sub(c.sasl.lastReauthStart) >= minReauthInterval
}

// handleSASLHandshake starts the exchange of the mechanism the client
// names, among sasl.enabled.mechanisms: v0 switches the connection to raw
// tokens, v1 to SaslAuthenticate. An unsupported mechanism answers
// UNSUPPORTED_SASL_MECHANISM with the enabled ones, after the failure
// delay, and closes the connection.
func (c *conn) handleSASLHandshake(req *request) outFrame {
	r := req.kreq.(*kmsg.SASLHandshakeRequest)
	resp := r.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.Version = r.Version
	resp.SupportedMechanisms = c.sec.SASL.EnabledMechanisms
	if resp.SupportedMechanisms == nil {
		resp.SupportedMechanisms = []string{}
	}
	if c.sasl.reauthing && r.Mechanism != c.sasl.mechanism {
		// Kafka's REAUTH_BAD_MECHANISM: the exchange fails without an answer.
		return c.authFailed(nil, 0, "SASL mechanism "+r.Mechanism+" requested for re-authentication of mechanism "+c.sasl.mechanism,
			kerr.UnsupportedSaslMechanism, req.key)
	}
	srv, err := security.NewSASLServer(c.sec.SASL, r.Mechanism)
	if err != nil {
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		return c.authFailed(resp, req.correlationID, err.Error(), kerr.UnsupportedSaslMechanism, req.key)
	}
	c.sasl.server, c.sasl.mechanism = srv, r.Mechanism
	c.sasl.stage = saslStageAuthenticate
	if r.Version == 0 {
		c.sasl.stage = saslStageRaw
	}
	return c.encode(req, resp)
}

// illegalSASLState answers a SaslHandshake or SaslAuthenticate that is not
// part of an exchange, as KafkaApis does.
func (c *conn) illegalSASLState(req *request) outFrame {
	switch r := req.kreq.(type) {
	case *kmsg.SASLHandshakeRequest:
		resp := r.ResponseKind().(*kmsg.SASLHandshakeResponse)
		resp.Version, resp.ErrorCode = r.Version, kerr.IllegalSaslState.Code
		resp.SupportedMechanisms = []string{}
		return c.encode(req, resp)
	case *kmsg.SASLAuthenticateRequest:
		resp := r.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		resp.Version, resp.ErrorCode = r.Version, kerr.IllegalSaslState.Code
		msg := "SaslAuthenticate request received after successful authentication"
		resp.ErrorMessage = &msg
		return c.encode(req, resp)
	}
	return outFrame{close: true}
}

// encode frames resp to req.
func (c *conn) encode(req *request, resp kmsg.Response) outFrame {
	return outFrame{b: appendResponse(getBuf(256), req.correlationID, resp)}
}
