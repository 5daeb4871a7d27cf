package protocol

// ApiVersions (key 18), versions 0-3.
//
// Answers with Server.apis (the rows of supportedAPIs this server's Config
// can serve), the same table that parseRequest uses to refuse everything
// else, so the broker advertises exactly what it serves.
//
//   - A request above v3 (kgo opens with v5) is not parsed: it is answered
//     with UNSUPPORTED_VERSION (35) in a v0-shaped body that lists the whole
//     table, as Kafka does; kgo and sarama then retry at our max,
//     librdkafka at v0, kafkajs steps down.
//   - v3 requests carry ClientSoftwareName/Version; like Kafka, a value
//     that does not match [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])? gets
//     INVALID_REQUEST (42), still with the table.
//   - v1+ has ThrottleMillis (always 0). v3+ has feature tags, left empty.
//   - The response header never carries tagged fields, even for v3
//     (appendResponse handles that).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func apiVersionsKeys(apis []apiRange) []kmsg.ApiVersionsResponseApiKey {
	keys := make([]kmsg.ApiVersionsResponseApiKey, 0, len(apis))
	for _, r := range apis {
		keys = append(keys, kmsg.ApiVersionsResponseApiKey{ApiKey: r.key, MinVersion: r.min, MaxVersion: r.max})
	}
	return keys
}

// unsupportedApiVersionsResponse is the v0 answer to ApiVersions at a
// version we do not serve.
func unsupportedApiVersionsResponse(apis []apiRange) kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = apiVersionsKeys(apis)
	return resp
}

func (s *Server) handleApiVersions(_ context.Context, rc *reqContext, req *kmsg.ApiVersionsRequest) (kmsg.Response, error) {
	if req.Version >= 3 {
		s.log.Debug().Str("remote_addr", rc.remoteAddr).Str("client_id", rc.clientID).
			Str("client_software_name", req.ClientSoftwareName).Str("client_software_version", req.ClientSoftwareVersion).
			Msg("client software")
	}
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ApiKeys = apiVersionsKeys(s.apis)
	if req.Version >= 3 && (!validSoftwareField(req.ClientSoftwareName) || !validSoftwareField(req.ClientSoftwareVersion)) {
		resp.ErrorCode = kerr.InvalidRequest.Code
	}
	return resp, nil
}

// validSoftwareField matches [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?.
func validSoftwareField(s string) bool {
	if s == "" {
		return false
	}
	alnum := func(c byte) bool {
		return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
	}
	if !alnum(s[0]) || !alnum(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !alnum(c) && c != '-' && c != '.' {
			return false
		}
	}
	return true
}
