package protocol

// AlterConfigs (key 33), versions 0-1 (v2 is flexible and not served).
//
//   - Topic resources (type 2): the given entries replace every override
//     of the topic, as in Kafka (settings left out return to the broker
//     default). Validation, ValidateOnly, the change notification and the
//     errors are those of IncrementalAlterConfigs (44): INVALID_CONFIG for
//     an unknown key or bad value, INVALID_REQUEST for a null value or a
//     key named twice, UNKNOWN_TOPIC_OR_PARTITION for an unknown topic.
//     Served only when Config.Admin implements ConfigAdmin.
//   - Broker resources replace /config/brokers/<id> or <default>
//     (broker_configs.go); broker-logger resources are INVALID_REQUEST,
//     as in Kafka; other types INVALID_REQUEST.
//   - A resource named twice answers INVALID_REQUEST "Each resource must
//     appear at most once." for both copies, as Kafka.
//   - Authorization: AlterConfigs on the topic or, for brokers, on the
//     cluster (TOPIC_/CLUSTER_AUTHORIZATION_FAILED), after the duplicate
//     check.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/security"
)

func (s *Server) handleAlterConfigs(ctx context.Context, rc *reqContext, req *kmsg.AlterConfigsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	actx, cancel := adminTimeout(ctx, 0)
	defer cancel()
	resp.Resources = make([]kmsg.AlterConfigsResponseResource, 0, len(req.Resources))
	dup := duplicateResources(len(req.Resources), func(i int) (kmsg.ConfigResourceType, string) {
		return req.Resources[i].ResourceType, req.Resources[i].ResourceName
	})
	for i, r := range req.Resources {
		rr := kmsg.NewAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		if dup(i) {
			rr.ErrorCode, rr.ErrorMessage = kerr.InvalidRequest.Code, errorMessage(errDuplicateResource)
			resp.Resources = append(resp.Resources, rr)
			continue
		}
		if code := s.configRefusal(rc, security.OpAlterConfigs, r.ResourceType, r.ResourceName); code != 0 {
			rr.ErrorCode = code
			resp.Resources = append(resp.Resources, rr)
			continue
		}
		if r.ResourceType == kmsg.ConfigResourceTypeBroker || r.ResourceType == kmsg.ConfigResourceTypeBrokerLogger {
			if err := s.alterBrokerReplace(actx, r, req.ValidateOnly); err != nil {
				rr.ErrorCode, rr.ErrorMessage = s.brokerConfigCode(rc, err), errorMessage(err)
			}
			resp.Resources = append(resp.Resources, rr)
			continue
		}
		code, err := s.alterTopicResource(actx, rc, r.ResourceType, r.ResourceName, req.ValidateOnly,
			func() (configChange, error) { return replacedConfigs(r.Configs) })
		rr.ErrorCode, rr.ErrorMessage = code, errorMessage(err)
		resp.Resources = append(resp.Resources, rr)
	}
	return resp, nil
}

// replacedConfigs turns AlterConfigs entries into a change that replaces
// the topic's overrides with them.
func replacedConfigs(configs []kmsg.AlterConfigsRequestResourceConfig) (configChange, error) {
	next := make(map[string]string, len(configs))
	for _, c := range configs {
		if _, dup := next[c.Name]; dup {
			return nil, fmt.Errorf("config %q appears more than once", c.Name)
		}
		if c.Value == nil {
			return nil, fmt.Errorf("null value for config %q", c.Name)
		}
		next[c.Name] = *c.Value
	}
	return func(map[string]string) (map[string]string, error) { return next, nil }, nil
}
