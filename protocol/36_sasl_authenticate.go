package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/security"
)

// handleSASLAuthenticate feeds one SaslAuthenticate payload to the
// connection's SASL server. A refused step answers
// SASL_AUTHENTICATION_FAILED (ILLEGAL_SASL_STATE for a step after the
// end) after connection.failed.authentication.delay.ms and closes the
// connection; the message names the mechanism only, as Kafka's does, so
// that it tells nothing of the user. The step that completes the exchange
// answers SessionLifetimeMs (v1+): connections.max.reauth.ms.
func (c *conn) handleSASLAuthenticate(req *request) outFrame {
	r := req.kreq.(*kmsg.SASLAuthenticateRequest)
	resp := r.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	resp.Version = r.Version
	msg, lifetime, err := c.saslStep(r.SASLAuthBytes)
	if err != nil {
		code := kerr.SaslAuthenticationFailed
		if errors.Is(err, security.ErrIllegalSASLState) {
			code = kerr.IllegalSaslState
		}
		text := c.failureText(err)
		resp.ErrorCode, resp.ErrorMessage = code.Code, &text
		return c.authFailed(resp, req.correlationID, err.Error(), code, req.key)
	}
	resp.SASLAuthBytes = msg
	if resp.SASLAuthBytes == nil {
		resp.SASLAuthBytes = []byte{}
	}
	resp.SessionLifetimeMillis = lifetime.Milliseconds()
	return c.encode(req, resp)
}

// handleRawToken is handleSASLAuthenticate for a raw token after
// SaslHandshake v0: the answer is the server's token with a size prefix,
// and a failure closes the connection without one (the v0 framing has
// no room for an error).
func (c *conn) handleRawToken(tok []byte) outFrame {
	msg, _, err := c.saslStep(tok)
	if err != nil {
		return c.authFailed(nil, 0, err.Error(), kerr.SaslAuthenticationFailed, -1)
	}
	b := getBuf(4 + len(msg))
	b = binary.BigEndian.AppendUint32(b, uint32(len(msg)))
	return outFrame{b: append(b, msg...)}
}

// saslStep runs one step of the exchange and, when it completes it,
// makes the authorization id the connection's principal and starts the
// session's lifetime.
func (c *conn) saslStep(clientMsg []byte) ([]byte, time.Duration, error) {
	srv := c.sasl.server
	if srv == nil {
		return nil, 0, fmt.Errorf("no SASL exchange in progress: %w", security.ErrIllegalSASLState)
	}
	msg, err := srv.Step(clientMsg)
	if err != nil {
		return nil, 0, err
	}
	if !srv.Done() {
		return msg, 0, nil
	}
	p := security.User(srv.AuthorizationID())
	if c.sasl.reauthing && p != c.principal {
		return nil, 0, fmt.Errorf("cannot change principals during re-authentication from %s: %s: %w",
			c.principal, p, security.ErrAuthenticationFailed)
	}
	now := c.s.now()
	c.principal, c.authenticated = p, true
	c.sasl.stage, c.sasl.server = saslStageDone, nil
	lifetime := c.s.cfg.MaxReauth
	c.sasl.expiry = time.Time{}
	if lifetime > 0 {
		c.sasl.expiry = now.Add(lifetime)
	}
	ev := c.log.Debug().Str("principal", p.String()).Str("mechanism", srv.Mechanism()).Dur("session_lifetime", lifetime)
	if c.sasl.reauthing {
		ev.Msg("re-authenticated")
	} else {
		ev.Msg("authenticated")
	}
	if hook := c.s.cfg.onAuthenticated; hook != nil {
		hook(c.listener, p, c.sasl.reauthing)
	}
	c.sasl.reauthing = false
	return msg, lifetime, nil
}

// failureText is the error message a failed SaslAuthenticate carries.
func (c *conn) failureText(err error) string {
	what := "authentication"
	if c.sasl.reauthing {
		what = "re-authentication"
	}
	if errors.Is(err, security.ErrIllegalSASLState) {
		return "SASL exchange is over: unexpected SaslAuthenticate during " + what
	}
	return fmt.Sprintf("Authentication failed during %s due to invalid credentials with SASL mechanism %s", what, c.sasl.mechanism)
}

// authFailed ends a failed authentication as Kafka's delayed close does:
// it waits connection.failed.authentication.delay.ms (less if the server
// closes), then returns resp, if any, as the connection's last response.
// Kafka logs failed authentications at INFO.
func (c *conn) authFailed(resp kmsg.Response, correlationID int32, reason string, code *kerr.Error, apiKey int16) outFrame {
	c.log.Info().Str("listener", c.listener).Str("mechanism", c.sasl.mechanism).Int16("api_key", apiKey).
		Str("error_code", code.Message).Bool("reauthentication", c.sasl.reauthing).Str("reason", reason).
		Msg("closing connection: failed authentication")
	c.sasl.server = nil
	// The frame is done with (resp aliases none of it): its
	// queued.max.request.bytes share must not wait out the delay.
	c.frame.release(false)
	if d := c.s.cfg.FailedAuthDelay; d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-c.ctx.Done():
			t.Stop()
		}
	}
	if resp == nil {
		return outFrame{close: true}
	}
	return outFrame{b: appendResponse(getBuf(256), correlationID, resp), close: true}
}
