package protocol

// Broker and broker-logger resources of DescribeConfigs (32), AlterConfigs
// (33) and IncrementalAlterConfigs (44), as Kafka 3.9's ConfigHelper and
// ConfigAdminManager serve them in ZooKeeper mode.
//
//   - BROKER (4) named by this broker's id describes every setting
//     (cluster.BrokerConfigLayers.BrokerEntries) with source, synonyms
//     (with IncludeSynonyms), read-only flag, sensitivity, type (v3+) and
//     documentation (v3+ with IncludeDocumentation); named "" it
//     describes the cluster defaults in /config/brokers/<default>. Another
//     id answers INVALID_REQUEST ("Unexpected broker id, expected 1 or
//     empty string, but received 2"), a name that is not a number
//     INVALID_REQUEST.
//   - Altering BROKER "" or this broker's id replaces (AlterConfigs) or
//     edits (IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT on
//     LIST keys) /config/brokers/<default> or /config/brokers/<id>
//     through BrokerConfigs, which refuses keys that need a restart and
//     bad values with INVALID_REQUEST and Kafka's message (KAFKA-13609:
//     Kafka answers so, not INVALID_CONFIG, for compatibility). A key
//     named twice or a null value is INVALID_REQUEST; APPEND or SUBTRACT
//     on an unknown or non-LIST key INVALID_CONFIG.
//   - BROKER_LOGGER (8) describes the loggers of BrokerLoggers with their
//     levels (source DYNAMIC_BROKER_LOGGER_CONFIG); IncrementalAlterConfigs
//     SETs a level (ALL, DEBUG, ERROR, FATAL, INFO, OFF, TRACE, WARN) or
//     DELETEs one (the logger follows root again), without persisting it,
//     as Kafka's RuntimeLoggerManager; AlterConfigs refuses it.
//   - Without Config.BrokerConfigs / BrokerLoggers these resources answer
//     INVALID_REQUEST saying so.
//   - A successful alter is in effect when the response is sent: a
//     DescribeConfigs or alter that follows sees it (BrokerConfigs
//     reloads before returning). Other brokers apply it when their
//     ZooKeeper watch fires, shortly after.
//   - A resource named twice in one AlterConfigs or
//     IncrementalAlterConfigs (of any type) answers INVALID_REQUEST "Each
//     resource must appear at most once." for every copy, as Kafka.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
)

// BrokerConfigs serves the BROKER resources; cmd/broker implements it.
type BrokerConfigs interface {
	// DescribeBroker describes this broker's settings (perBroker) or the
	// cluster-wide dynamic defaults.
	DescribeBroker(perBroker bool) []cluster.BrokerConfigEntry
	// AlterBroker replaces this broker's dynamic configs (perBroker) or the
	// cluster-wide defaults with what alter returns given the current ones
	// (a map alter may modify), after checking the result as Kafka's
	// DynamicBrokerConfig.validate does (a *cluster.BrokerConfigError), and
	// writes them with a change notification unless validateOnly. An error
	// from alter is returned as is. When it returns after a write, the
	// change is in effect for this broker: DescribeBroker shows it.
	AlterBroker(ctx context.Context, perBroker bool, alter func(current map[string]string) (map[string]string, error), validateOnly bool) error
}

// LoggerLevel is one logger of the broker with its effective level, by
// Kafka's level names (INFO, DEBUG, ...).
type LoggerLevel struct {
	Name  string
	Level string
}

// BrokerLoggers serves the BROKER_LOGGER resources; cmd/broker implements it.
type BrokerLoggers interface {
	// Loggers lists every logger ("root" among them) with its level.
	Loggers() []LoggerLevel
	// SetLogLevel sets a logger's level (a Kafka level name), or with
	// level "" makes it follow root again. The name and level were
	// checked against Loggers and kafkaLogLevels.
	SetLogLevel(logger, level string)
}

// rootLogger is the name of Kafka's root logger (Log4jController.ROOT_LOGGER).
const rootLogger = "root"

// kafkaLogLevels are LogLevelConfig.VALID_LOG_LEVELS, sorted.
var kafkaLogLevels = []string{"ALL", "DEBUG", "ERROR", "FATAL", "INFO", "OFF", "TRACE", "WARN"}

// resourceError is a resource-level error with Kafka's message.
type resourceError struct {
	code int16
	msg  string
}

func (e *resourceError) Error() string { return e.msg }

func invalidRequest(format string, args ...any) error {
	return &resourceError{code: kerr.InvalidRequest.Code, msg: fmt.Sprintf(format, args...)}
}

func invalidConfig(format string, args ...any) error {
	return &resourceError{code: kerr.InvalidConfig.Code, msg: fmt.Sprintf(format, args...)}
}

// errDuplicateResource answers every copy of a resource named more than
// once in one AlterConfigs or IncrementalAlterConfigs, as Kafka's
// ConfigAdminManager.preprocess does; the other resources are served.
var errDuplicateResource = invalidRequest("Each resource must appear at most once.")

// duplicateResources returns a function reporting whether the i-th of n
// resources, of type and name typ(i) and name(i), shares them with another.
func duplicateResources(n int, key func(i int) (kmsg.ConfigResourceType, string)) func(i int) bool {
	type res struct {
		typ  kmsg.ConfigResourceType
		name string
	}
	count := make(map[res]int, n)
	for i := range n {
		t, nm := key(i)
		count[res{t, nm}]++
	}
	return func(i int) bool {
		t, nm := key(i)
		return count[res{t, nm}] > 1
	}
}

// brokerConfigCode is the code of a broker resource's error.
func (s *Server) brokerConfigCode(rc *reqContext, err error) int16 {
	var re *resourceError
	switch {
	case errors.As(err, &re):
		return re.code
	case errors.Is(err, cluster.ErrBrokerConfigRefused):
		return kerr.InvalidRequest.Code
	}
	return s.errorCode(rc, err)
}

// describeBrokerResource answers one BROKER or BROKER_LOGGER resource of
// DescribeConfigs.
func (s *Server) describeBrokerResource(req *kmsg.DescribeConfigsRequest, r kmsg.DescribeConfigsRequestResource) ([]kmsg.DescribeConfigsResponseResourceConfig, error) {
	want := func(name string) bool {
		return len(r.ConfigNames) == 0 || slices.Contains(r.ConfigNames, name)
	}
	if r.ResourceType == kmsg.ConfigResourceTypeBrokerLogger {
		if s.cfg.BrokerLoggers == nil {
			return nil, invalidRequest("describing broker loggers is not supported by this broker")
		}
		if r.ResourceName == "" {
			return nil, invalidRequest("Broker id must not be empty")
		}
		id, err := strconv.ParseInt(r.ResourceName, 10, 32)
		if err != nil {
			return nil, invalidRequest("Broker id must be an integer, but it is: %s", r.ResourceName)
		}
		if int32(id) != s.cfg.BrokerID {
			return nil, invalidRequest("Unexpected broker id, expected %d but received %s", s.cfg.BrokerID, r.ResourceName)
		}
		var out []kmsg.DescribeConfigsResponseResourceConfig
		for _, l := range s.cfg.BrokerLoggers.Loggers() {
			if !want(l.Name) {
				continue
			}
			c := kmsg.NewDescribeConfigsResponseResourceConfig()
			lvl := l.Level
			c.Name, c.Value = l.Name, &lvl
			c.Source = kmsg.ConfigSourceDynamicBrokerLoggerConfig
			c.ConfigSynonyms = []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{}
			out = append(out, c)
		}
		return out, nil
	}
	if s.cfg.BrokerConfigs == nil {
		return nil, invalidRequest("describing broker configs is not supported by this broker")
	}
	perBroker := r.ResourceName != ""
	if perBroker {
		id, err := strconv.ParseInt(r.ResourceName, 10, 32)
		if err != nil {
			return nil, invalidRequest("Broker id must be an integer, but it is: %s", r.ResourceName)
		}
		if int32(id) != s.cfg.BrokerID {
			return nil, invalidRequest("Unexpected broker id, expected %d or empty string, but received %s", s.cfg.BrokerID, r.ResourceName)
		}
	}
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, e := range s.cfg.BrokerConfigs.DescribeBroker(perBroker) {
		if !want(e.Name) {
			continue
		}
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name, c.Value = e.Name, e.Value
		c.ReadOnly, c.IsSensitive = e.ReadOnly, e.Sensitive
		c.IsDefault = e.Source == cluster.SourceDefault
		c.Source = kmsg.ConfigSource(e.Source)
		if req.IncludeSynonyms && req.Version >= 1 {
			c.ConfigSynonyms = make([]kmsg.DescribeConfigsResponseResourceConfigConfigSynonym, 0, len(e.Synonyms))
			for _, sy := range e.Synonyms {
				syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
				syn.Name, syn.Value, syn.Source = sy.Name, sy.Value, kmsg.ConfigSource(sy.Source)
				c.ConfigSynonyms = append(c.ConfigSynonyms, syn)
			}
		}
		if req.Version >= 3 {
			c.ConfigType = kmsg.ConfigType(e.Type)
			if req.IncludeDocumentation {
				doc := e.Documentation
				c.Documentation = &doc
			}
		}
		out = append(out, c)
	}
	return out, nil
}

// checkAlterBrokerName is ConfigAdminManager.validateResourceNameIsCurrentNodeId.
func (s *Server) checkAlterBrokerName(name string) error {
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil {
		return invalidRequest("Node id must be an integer, but it is: %s", name)
	}
	if int32(id) != s.cfg.BrokerID {
		return invalidRequest("Unexpected broker id, expected %d, but received %s", s.cfg.BrokerID, name)
	}
	return nil
}

// checkNamesAndValues is the start of ConfigAdminManager.preprocess: no
// key twice, no null value but for deleteOp's.
func checkNamesAndValues(names []string, values []*string, isDelete func(i int) bool) error {
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if seen[n] {
			return invalidRequest("Error due to duplicate config keys")
		}
		seen[n] = true
	}
	var nulls []string
	for i, v := range values {
		if v == nil && !isDelete(i) {
			nulls = append(nulls, names[i])
		}
	}
	if len(nulls) > 0 {
		return invalidRequest("Null value not supported for : %s", strings.Join(nulls, ", "))
	}
	return nil
}

// alterBrokerReplace applies an AlterConfigs BROKER resource: its entries
// replace the entity's dynamic configs.
func (s *Server) alterBrokerReplace(ctx context.Context, r kmsg.AlterConfigsRequestResource, validateOnly bool) error {
	if r.ResourceType == kmsg.ConfigResourceTypeBrokerLogger {
		return invalidRequest("Unknown resource type %d", r.ResourceType)
	}
	if s.cfg.BrokerConfigs == nil {
		return invalidRequest("%v", errBrokerConfigs)
	}
	names := make([]string, len(r.Configs))
	values := make([]*string, len(r.Configs))
	for i, c := range r.Configs {
		names[i], values[i] = c.Name, c.Value
	}
	if err := checkNamesAndValues(names, values, func(int) bool { return false }); err != nil {
		return err
	}
	perBroker := r.ResourceName != ""
	if perBroker {
		if err := s.checkAlterBrokerName(r.ResourceName); err != nil {
			return err
		}
	}
	next := make(map[string]string, len(r.Configs))
	for _, c := range r.Configs {
		next[c.Name] = *c.Value
	}
	return s.cfg.BrokerConfigs.AlterBroker(ctx, perBroker,
		func(map[string]string) (map[string]string, error) { return next, nil }, validateOnly)
}

// alterBrokerIncremental applies an IncrementalAlterConfigs BROKER or
// BROKER_LOGGER resource.
func (s *Server) alterBrokerIncremental(ctx context.Context, r kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) error {
	names := make([]string, len(r.Configs))
	values := make([]*string, len(r.Configs))
	for i, c := range r.Configs {
		names[i], values[i] = c.Name, c.Value
	}
	isDelete := func(i int) bool { return r.Configs[i].Op == kmsg.IncrementalAlterConfigOpDelete }
	if err := checkNamesAndValues(names, values, isDelete); err != nil {
		return err
	}
	if r.ResourceType == kmsg.ConfigResourceTypeBrokerLogger {
		return s.alterLoggers(r, validateOnly)
	}
	if s.cfg.BrokerConfigs == nil {
		return invalidRequest("%v", errBrokerConfigs)
	}
	perBroker := r.ResourceName != ""
	if perBroker {
		if err := s.checkAlterBrokerName(r.ResourceName); err != nil {
			return err
		}
	}
	for _, op := range r.Configs {
		switch op.Op {
		case kmsg.IncrementalAlterConfigOpSet, kmsg.IncrementalAlterConfigOpDelete:
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			k, ok := cluster.LookupBrokerKey(op.Name)
			if !ok {
				return invalidConfig("Unknown config name: %s", op.Name)
			}
			if k.Type != cluster.TypeList {
				return invalidConfig("Config value %s is not allowed for config key: %s", strings.ToLower(op.Op.String()), op.Name)
			}
		default:
			return invalidRequest("Unknown operations type %d", op.Op)
		}
	}
	return s.cfg.BrokerConfigs.AlterBroker(ctx, perBroker, func(cur map[string]string) (map[string]string, error) {
		for _, op := range r.Configs {
			switch op.Op {
			case kmsg.IncrementalAlterConfigOpSet:
				cur[op.Name] = *op.Value
			case kmsg.IncrementalAlterConfigOpDelete:
				delete(cur, op.Name)
			default:
				// ConfigAdminManager.prepareIncrementalConfigs: from the
				// current value, else the key's default.
				old, ok := cur[op.Name]
				if !ok {
					k, _ := cluster.LookupBrokerKey(op.Name)
					old = k.Default
				}
				cur[op.Name] = applyListOp(op.Op, old, *op.Value)
			}
		}
		return cur, nil
	}, validateOnly)
}

// alterLoggers is Kafka's RuntimeLoggerManager.applyChangesForResource:
// every op is checked before any level changes.
func (s *Server) alterLoggers(r kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) error {
	if s.cfg.BrokerLoggers == nil {
		return invalidRequest("altering broker loggers is not supported by this broker")
	}
	id, err := strconv.ParseInt(r.ResourceName, 10, 32)
	if err != nil {
		return invalidRequest("Node id must be an integer, but it is: %s", r.ResourceName)
	}
	if int32(id) != s.cfg.BrokerID {
		return invalidRequest("Unexpected node id. Expected %d, but received %s", s.cfg.BrokerID, r.ResourceName)
	}
	known := map[string]bool{}
	for _, l := range s.cfg.BrokerLoggers.Loggers() {
		known[l.Name] = true
	}
	exists := func(name string) error {
		if !known[name] {
			return invalidConfig("Logger %s does not exist!", name)
		}
		return nil
	}
	for _, op := range r.Configs {
		switch op.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			if err := exists(op.Name); err != nil {
				return err
			}
			if !slices.Contains(kafkaLogLevels, *op.Value) {
				return invalidConfig("Cannot set the log level of %s to %s as it is not a supported log level. Valid log levels are %s",
					op.Name, *op.Value, strings.Join(kafkaLogLevels, ", "))
			}
		case kmsg.IncrementalAlterConfigOpDelete:
			if err := exists(op.Name); err != nil {
				return err
			}
			if op.Name == rootLogger {
				return invalidRequest("Removing the log level of the %s logger is not allowed", rootLogger)
			}
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			return invalidRequest("%s operation is not allowed for the BROKER_LOGGER resource", op.Op.String())
		default:
			return invalidRequest("Unknown operation type %d is not allowed for the BROKER_LOGGER resource", op.Op)
		}
	}
	if validateOnly {
		return nil
	}
	for _, op := range r.Configs {
		level := ""
		if op.Op == kmsg.IncrementalAlterConfigOpSet {
			level = *op.Value
		}
		s.cfg.BrokerLoggers.SetLogLevel(op.Name, level)
		s.log.Warn().Str("logger", op.Name).Str("level", level).Msg("updated log level")
	}
	return nil
}
