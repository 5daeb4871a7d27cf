package protocol

// DescribeConfigs (key 32), versions 0-4.
//
//   - Topic resources (type 2): every topic-level key of Kafka 3.x from
//     Admin.TopicConfig (cluster's one table), filtered by ConfigNames
//     when it is non-empty (null or empty lists every key, and unknown
//     names are left out, as in Kafka's ConfigHelper). v1+
//     sets Source as Kafka's ConfigHelper.createTopicConfigEntry:
//     DYNAMIC_TOPIC_CONFIG (1) for an override, STATIC_BROKER_CONFIG (4)
//     when the broker key that sets the default (log.cleaner.delete.
//     retention.ms for delete.retention.ms, ...) is in server.properties,
//     else DEFAULT_CONFIG (5); v0's IsDefault is Source == DEFAULT_CONFIG.
//     With IncludeSynonyms (v1+) the synonyms are the override, then the
//     broker keys set in server.properties, then the broker keys' Kafka
//     defaults. ConfigType (v3+) is Kafka's type of the key;
//     documentation is null. Nothing is sensitive or read-only.
//   - An unknown topic is UNKNOWN_TOPIC_OR_PARTITION; an empty name
//     INVALID_TOPIC_EXCEPTION.
//   - Broker and broker-logger resources (4, 8): see broker_configs.go.
//     Other types are INVALID_REQUEST as in Kafka.
//   - Authorization: DescribeConfigs on the topic
//     (TOPIC_AUTHORIZATION_FAILED) or, for BROKER and BROKER_LOGGER, on the
//     cluster (CLUSTER_AUTHORIZATION_FAILED), with no configs.

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/security"
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
		if code := s.configRefusal(rc, security.OpDescribeConfigs, r.ResourceType, r.ResourceName); code != 0 {
			rr.ErrorCode, rr.ErrorMessage = code, codeMessage(code)
			rr.Configs = []kmsg.DescribeConfigsResponseResourceConfig{}
			resp.Resources = append(resp.Resources, rr)
			continue
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
			if len(r.ConfigNames) > 0 {
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
					c.Source = kmsg.ConfigSource(e.Source)
					if req.IncludeSynonyms {
						c.ConfigSynonyms = make([]kmsg.DescribeConfigsResponseResourceConfigConfigSynonym, 0, len(e.Synonyms))
						for _, sy := range e.Synonyms {
							syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
							sv := sy.Value
							syn.Name, syn.Value, syn.Source = sy.Name, &sv, kmsg.ConfigSource(sy.Source)
							c.ConfigSynonyms = append(c.ConfigSynonyms, syn)
						}
					}
				}
				if req.Version >= 3 {
					c.ConfigType = kmsg.ConfigType(e.Type)
				}
				rr.Configs = append(rr.Configs, c)
			}
		case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
			configs, err := s.describeBrokerResource(req, r)
			if err != nil {
				fail(s.brokerConfigCode(rc, err), err)
				break
			}
			rr.Configs = configs
		default:
			fail(kerr.InvalidRequest.Code, errors.New("unsupported resource type"))
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return resp, nil
}
