package main

import (
	"sort"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/protocol"
)

// brokerLoggers are the loggers a BROKER_LOGGER resource names: Kafka's
// log4j logger names for the parts of Kafka our components stand for,
// each mapped to the component whose zerolog logger it levels (the
// "component" field of its lines). "root" is every other line (startup,
// shutdown) and the level a logger without its own follows.
var brokerLoggers = []struct{ name, component string }{
	{"kafka.network.SocketServer", "protocol"},            // requests and connections
	{"kafka.server.ReplicaManager", "replicas"},           // replicas, fetchers, retention, the log cleaner
	{"kafka.controller.KafkaController", "zkcoord"},       // ZooKeeper session, controller
	{"kafka.coordinator.group.GroupCoordinator", "group"}, // consumer groups and offsets
	{"org.apache.kafka.clients.NetworkClient", "client"},  // the inter-broker client
	{"state.change.logger", "controlplane"},               // LeaderAndIsr, StopReplica, UpdateMetadata applied here
	{"kafka.server.DynamicConfigManager", "topicconfig"},  // topic and broker config changes
	{"kafka.server.DynamicBrokerConfig", "dynamicconfig"}, // dynamic broker configs
}

// kafkaToZerolog maps Kafka's log levels to zerolog's.
var kafkaToZerolog = map[string]zerolog.Level{
	"ALL": zerolog.TraceLevel, "TRACE": zerolog.TraceLevel, "DEBUG": zerolog.DebugLevel,
	"INFO": zerolog.InfoLevel, "WARN": zerolog.WarnLevel, "ERROR": zerolog.ErrorLevel,
	"FATAL": zerolog.FatalLevel, "OFF": zerolog.Disabled,
}

// kafkaLevelName is the Kafka name of a zerolog level.
func kafkaLevelName(l zerolog.Level) string {
	switch {
	case l <= zerolog.TraceLevel:
		return "TRACE"
	case l == zerolog.DebugLevel:
		return "DEBUG"
	case l == zerolog.InfoLevel:
		return "INFO"
	case l == zerolog.WarnLevel:
		return "WARN"
	case l == zerolog.ErrorLevel:
		return "ERROR"
	case l == zerolog.FatalLevel || l == zerolog.PanicLevel:
		return "FATAL"
	}
	return "OFF"
}

// logLevels holds each logger's level, changeable at run time. A logger
// from logger() carries a sampler reading its level atomically, so a
// disabled level costs what zerolog's own level check does (no event is
// built); the loggers themselves are created at trace level.
type logLevels struct {
	mu    sync.Mutex
	own   map[string]string        // Kafka level name set for a logger; absent follows root
	vars  map[string]*atomic.Int32 // effective zerolog level by logger name
	names []string                 // every logger, sorted
}

func newLogLevels(root zerolog.Level) *logLevels {
	l := &logLevels{own: map[string]string{protocolRoot: kafkaLevelName(root)}, vars: map[string]*atomic.Int32{}}
	l.vars[protocolRoot] = new(atomic.Int32)
	l.names = append(l.names, protocolRoot)
	for _, b := range brokerLoggers {
		l.vars[b.name] = new(atomic.Int32)
		l.names = append(l.names, b.name)
	}
	sort.Strings(l.names)
	l.refreshLocked()
	return l
}

// protocolRoot is Kafka's root logger name.
const protocolRoot = "root"

// levelSampler passes the events at or above its logger's level.
type levelSampler struct{ v *atomic.Int32 }

func (s levelSampler) Sample(lvl zerolog.Level) bool { return int32(lvl) >= s.v.Load() }

// root levels base as the root logger.
func (l *logLevels) root(base zerolog.Logger) zerolog.Logger {
	return base.Level(zerolog.TraceLevel).Sample(levelSampler{l.vars[protocolRoot]})
}

// component is base with the component field of the logger that levels
// it, or root's level for a component no logger names.
func (l *logLevels) component(base zerolog.Logger, component string) zerolog.Logger {
	v := l.vars[protocolRoot]
	for _, b := range brokerLoggers {
		if b.component == component {
			v = l.vars[b.name]
		}
	}
	return base.With().Str("component", component).Logger().Level(zerolog.TraceLevel).Sample(levelSampler{v})
}

// refreshLocked recomputes every effective level. Caller holds l.mu.
func (l *logLevels) refreshLocked() {
	root := kafkaToZerolog[l.own[protocolRoot]]
	for name, v := range l.vars {
		lvl := root
		if own, ok := l.own[name]; ok {
			lvl = kafkaToZerolog[own]
		}
		v.Store(int32(lvl))
	}
}

// Loggers is protocol.BrokerLoggers.
func (l *logLevels) Loggers() []protocol.LoggerLevel {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]protocol.LoggerLevel, 0, len(l.names))
	for _, n := range l.names {
		lvl, ok := l.own[n]
		if !ok {
			lvl = l.own[protocolRoot]
		}
		out = append(out, protocol.LoggerLevel{Name: n, Level: lvl})
	}
	return out
}

// SetLogLevel is protocol.BrokerLoggers; the protocol checked the name
// and level. Nothing is persisted: a restart starts from root's level, as
// Kafka's log4j levels set at run time are lost at a restart.
func (l *logLevels) SetLogLevel(name, level string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.vars[name]; !ok {
		return
	}
	if level == "" {
		delete(l.own, name)
	} else {
		l.own[name] = level
	}
	l.refreshLocked()
}

var _ protocol.BrokerLoggers = (*logLevels)(nil)
