package protocol

// IncrementalAlterConfigs (key 44), versions 0-1 (v1 is flexible).
//
//   - Topic resources (type 2): each op changes one override in
//     /config/topics/<t> through ConfigAdmin, which validates the result
//     and writes a config_change_ notification as Kafka does; every broker
//     sees the change through its watch on /config/topics/<t> and applies
//     it to its live replicas without a restart. Served only when
//     Config.Admin implements ConfigAdmin.
//   - SET needs a value (null: INVALID_REQUEST); DELETE drops the override
//     (the broker default applies again); APPEND and SUBTRACT add or
//     remove comma-separated items of a key of Kafka's LIST type
//     (cleanup.policy and the replication throttle lists), starting from the effective
//     value when there is no override, as Kafka's ConfigAdminManager does;
//     on any other key they are INVALID_CONFIG.
//   - An unknown key or a bad value is INVALID_CONFIG with a message naming
//     it; a key named twice in one resource is INVALID_REQUEST; an unknown
//     topic UNKNOWN_TOPIC_OR_PARTITION. A resource's ops apply all or none.
//   - ValidateOnly checks without writing.
//   - A resource named twice answers INVALID_REQUEST "Each resource must
//     appear at most once." for both copies, as Kafka.
//   - Broker and broker-logger resources (4, 8): see broker_configs.go.
//     Other types are INVALID_REQUEST as in Kafka.
//   - Authorization: AlterConfigs on the topic or, for BROKER and
//     BROKER_LOGGER, on the cluster (TOPIC_/CLUSTER_AUTHORIZATION_FAILED).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/security"
)

// errBrokerConfigs answers alterations of broker resources on a server
// without Config.BrokerConfigs.
var errBrokerConfigs = errors.New("altering broker configs is not supported by this broker: set them in server.properties")

func (s *Server) handleIncrementalAlterConfigs(ctx context.Context, rc *reqContext, req *kmsg.IncrementalAlterConfigsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	actx, cancel := adminTimeout(ctx, 0)
	defer cancel()
	resp.Resources = make([]kmsg.IncrementalAlterConfigsResponseResource, 0, len(req.Resources))
	dup := duplicateResources(len(req.Resources), func(i int) (kmsg.ConfigResourceType, string) {
		return req.Resources[i].ResourceType, req.Resources[i].ResourceName
	})
	for i, r := range req.Resources {
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
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
			if err := s.alterBrokerIncremental(actx, r, req.ValidateOnly); err != nil {
				rr.ErrorCode, rr.ErrorMessage = s.brokerConfigCode(rc, err), errorMessage(err)
			}
			resp.Resources = append(resp.Resources, rr)
			continue
		}
		code, err := s.alterTopicResource(actx, rc, r.ResourceType, r.ResourceName, req.ValidateOnly,
			func() (configChange, error) { return s.incrementalOps(r.ResourceName, r.Configs) })
		rr.ErrorCode, rr.ErrorMessage = code, errorMessage(err)
		resp.Resources = append(resp.Resources, rr)
	}
	return resp, nil
}

// configChange changes a topic's config overrides for ConfigAdmin: given
// the current ones (a map it may modify), it returns the new ones.
type configChange func(current map[string]string) (map[string]string, error)

// alterTopicResource applies one AlterConfigs or IncrementalAlterConfigs
// resource: build turns the request's entries into the change (or a
// request-level error), which ConfigAdmin applies to the topic. It returns
// the error code and error of the resource, or (0, nil).
func (s *Server) alterTopicResource(ctx context.Context, rc *reqContext, typ kmsg.ConfigResourceType, name string, validateOnly bool,
	build func() (configChange, error)) (int16, error) {
	switch typ {
	case kmsg.ConfigResourceTypeTopic: // broker resources: broker_configs.go
	default:
		return kerr.InvalidRequest.Code, fmt.Errorf("unsupported resource type %d", typ)
	}
	if name == "" {
		return kerr.InvalidTopicException.Code, errors.New("empty topic name")
	}
	alter, err := build()
	if err != nil {
		return lookupOr(err, kerr.InvalidRequest.Code), err
	}
	ca := s.cfg.Admin.(ConfigAdmin)
	if err := ca.AlterTopicConfig(ctx, name, alter, validateOnly); err != nil {
		return s.errorCode(rc, err), err
	}
	if !validateOnly {
		requestEvent(s.log.Info(), rc).Str("topic", name).Msg("altered topic config")
	}
	return 0, nil
}

// lookupOr is the table's code for err, or def if err is unmapped.
func lookupOr(err error, def int16) int16 {
	if ke := lookupCode(err); ke != nil {
		return ke.Code
	}
	return def
}

// incrementalOps turns IncrementalAlterConfigs entries into a change of
// the topic's overrides.
func (s *Server) incrementalOps(topic string, ops []kmsg.IncrementalAlterConfigsRequestResourceConfig) (configChange, error) {
	seen := make(map[string]bool, len(ops))
	for _, op := range ops {
		if seen[op.Name] {
			return nil, fmt.Errorf("config %q appears more than once", op.Name)
		}
		seen[op.Name] = true
		switch op.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			if op.Value == nil {
				return nil, fmt.Errorf("null value for config %q", op.Name)
			}
		case kmsg.IncrementalAlterConfigOpDelete:
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			if !cluster.IsTopicConfigKey(op.Name) {
				return nil, fmt.Errorf("%w: unknown topic config %q", cluster.ErrInvalidConfig, op.Name)
			}
			if !cluster.IsListTopicConfigKey(op.Name) {
				return nil, fmt.Errorf("%w: config value %s is not allowed for config key %s, which is not a list",
					cluster.ErrInvalidConfig, strings.ToLower(op.Op.String()), op.Name)
			}
			if op.Value == nil {
				return nil, fmt.Errorf("null value for config %q", op.Name)
			}
		default:
			return nil, fmt.Errorf("unknown config operation %d for %q", op.Op, op.Name)
		}
	}
	return func(cur map[string]string) (map[string]string, error) {
		for _, op := range ops {
			switch op.Op {
			case kmsg.IncrementalAlterConfigOpSet:
				cur[op.Name] = *op.Value
			case kmsg.IncrementalAlterConfigOpDelete:
				delete(cur, op.Name)
			default:
				old, ok := cur[op.Name]
				if !ok {
					old = s.effectiveValue(topic, op.Name)
				}
				cur[op.Name] = applyListOp(op.Op, old, *op.Value)
			}
		}
		return cur, nil
	}, nil
}

// effectiveValue is the topic's current value of a setting, "" if unknown.
func (s *Server) effectiveValue(topic, name string) string {
	entries, err := s.cfg.Admin.TopicConfig(topic)
	if err != nil {
		return ""
	}
	for _, e := range entries {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// splitList splits a LIST config value on commas, dropping empty items.
// applyListOp is IncrementalAlterConfigs' APPEND or SUBTRACT of the
// comma-separated value to the list old (ConfigAdminManager
// prepareIncrementalConfigs): APPEND adds the items not there yet, in
// order; SUBTRACT removes every occurrence.
func applyListOp(op kmsg.IncrementalAlterConfigOp, old, value string) string {
	list := splitList(old)
	for _, v := range splitList(value) {
		if op == kmsg.IncrementalAlterConfigOpAppend {
			if !slices.Contains(list, v) {
				list = append(list, v)
			}
		} else {
			list = slices.DeleteFunc(list, func(x string) bool { return x == v })
		}
	}
	return strings.Join(list, ",")
}

func splitList(v string) []string {
	var out []string
	for _, x := range strings.Split(v, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}
