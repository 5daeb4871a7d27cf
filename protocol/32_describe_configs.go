package protocol

// DescribeConfigs (key 32), versions 0-4.
//
//   - Topic resources (type 2): every topic-level setting from
//     Admin.TopicConfig, filtered by ConfigNames when it is non-null
//     (unknown names are left out, as in Kafka). v0 marks defaults with
//     IsDefault; v1+ also sets Source: DEFAULT_CONFIG (5) for a default,
//     TOPIC_CONFIG (1) for an override. With IncludeSynonyms (v1+) each
//     entry lists itself as its one synonym; the broker-level synonyms
//     Kafka also lists are not known here. ConfigType (v3+) is guessed
//     from the value; documentation is null. Nothing is sensitive or
//     read-only.
//   - An unknown topic is UNKNOWN_TOPIC_OR_PARTITION; an empty name
//     INVALID_TOPIC_EXCEPTION.
//   - Broker and broker-logger resources (4, 8) are not served: they
//     answer INVALID_REQUEST with a message saying so, rather than an
//     empty list that would look like "no settings". Other types are
//     INVALID_REQUEST as in Kafka.

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleDescribeConfigs(_ context.Context, rc *reqContext, req *kmsg.DescribeConfigsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	resp.Resources = make([]kmsg.DescribeConfigsResponseResource, 0, len(req.Resources))
	for _, r := range req.Resources {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType = r.ResourceType
		rr.ResourceName = r.ResourceName
		fail := func(code int16, err error) {
			rr.ErrorCode = code
			msg := err.Error()
			rr.ErrorMessage = &msg
		}
		switch r.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			if r.ResourceName == "" {
				fail(kerr.InvalidTopicException.Code, errors.New("empty topic name"))
				break
			}
			entries, err := s.cfg.Admin.TopicConfig(r.ResourceName)
			if err != nil {
				fail(s.errorCode(rc, err), err)
				break
			}
			var want map[string]bool
			if r.ConfigNames != nil {
				want = make(map[string]bool, len(r.ConfigNames))
				for _, n := range r.ConfigNames {
					want[n] = true
				}
			}
			rr.Configs = make([]kmsg.DescribeConfigsResponseResourceConfig, 0, len(entries))
			for _, e := range entries {
				if want != nil && !want[e.Name] {
					continue
				}
				c := kmsg.NewDescribeConfigsResponseResourceConfig()
				c.Name = e.Name
				v := e.Value
				c.Value = &v
				c.IsDefault = e.IsDefault
				if req.Version >= 1 {
					c.Source = configSource(e.IsDefault)
					if req.IncludeSynonyms {
						syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
						syn.Name, syn.Value, syn.Source = e.Name, c.Value, c.Source
						c.ConfigSynonyms = []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{syn}
					}
				}
				if req.Version >= 3 {
					c.ConfigType = configType(e.Value)
				}
				rr.Configs = append(rr.Configs, c)
			}
		case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
			fail(kerr.InvalidRequest.Code, errors.New("describing broker configs is not supported by this broker"))
		default:
			fail(kerr.InvalidRequest.Code, errors.New("unsupported resource type"))
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return resp, nil
}
