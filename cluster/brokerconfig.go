package cluster

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// The sources and types that broker settings add to the topic ones
// (Kafka's DescribeConfigsResponse.ConfigSource and ConfigType ids).
const (
	SourceDynamicBroker        ConfigSource = 2 // DYNAMIC_BROKER_CONFIG: /config/brokers/<id>
	SourceDynamicDefaultBroker ConfigSource = 3 // DYNAMIC_DEFAULT_BROKER_CONFIG: /config/brokers/<default>
	SourceDynamicBrokerLogger  ConfigSource = 6 // DYNAMIC_BROKER_LOGGER_CONFIG: a log level

	TypeUnknown  ConfigType = 0
	TypeShort    ConfigType = 4
	TypePassword ConfigType = 9
)

// BrokerDefaultEntity is the entity name of the cluster-wide dynamic
// defaults, /config/brokers/<default> (Kafka's ZooKeeperInternals.DEFAULT_STRING).
const BrokerDefaultEntity = "<default>"

// ErrBrokerConfigRefused is matched (errors.Is) by every *BrokerConfigError:
// an AlterConfigs or IncrementalAlterConfigs of a broker resource that
// Kafka's ConfigAdminManager refuses in its preprocessing, which answers
// INVALID_REQUEST (KAFKA-13609 keeps that code rather than INVALID_CONFIG,
// for compatibility, even for a value of the wrong type).
var ErrBrokerConfigRefused = errors.New("cluster: broker config refused")

// BrokerConfigError is a refused broker config change with Kafka's message.
type BrokerConfigError struct{ Msg string }

func (e *BrokerConfigError) Error() string { return e.Msg }

// Is makes errors.Is(err, ErrBrokerConfigRefused) true.
func (e *BrokerConfigError) Is(target error) bool { return target == ErrBrokerConfigRefused }

func refused(format string, args ...any) error {
	return &BrokerConfigError{Msg: fmt.Sprintf(format, args...)}
}

// BrokerKeyMode says whether a broker key changes without a restart.
type BrokerKeyMode int8

const (
	// ModeReadOnly keys are read from server.properties only. Altering one
	// is refused ("Cannot update these configs dynamically").
	ModeReadOnly BrokerKeyMode = iota
	// ModeClusterWide keys (Kafka's "cluster-wide" dynamic configs) may
	// be set in /config/brokers/<default> and /config/brokers/<id>; the
	// broker applies a change at once.
	ModeClusterWide
	// ModeQuota keys are Kafka's broker quota configs
	// (QuotaConfigs.brokerQuotaConfigs): dynamic only, never read from
	// server.properties, and, because Kafka's AllDynamicConfigs does not
	// list them, described as read-only although they change at once.
	ModeQuota
)

// BrokerKey is one row of the broker key table.
type BrokerKey struct {
	Name string
	Type ConfigType
	// Default is Kafka's default as DescribeConfigs shows it; HasDefault
	// is false for a key with none (log.retention.ms falls back to
	// log.retention.hours).
	Default    string
	HasDefault bool
	Mode       BrokerKeyMode
	// Min, when HasMin, is the ConfigDef Range.atLeast bound checked on a
	// dynamic update (the server.properties parser checks its own).
	Min    int64
	HasMin bool
	Doc    string
}

// Dynamic reports whether the key may be altered.
func (k BrokerKey) Dynamic() bool { return k.Mode != ModeReadOnly }

type bkOpt func(*BrokerKey)

func noDefault(k *BrokerKey)  { k.HasDefault = false }
func quota(k *BrokerKey)      { k.Mode = ModeQuota }
func dynamicKey(k *BrokerKey) { k.Mode = ModeClusterWide }
func atLeast(n int64) bkOpt   { return func(k *BrokerKey) { k.Min, k.HasMin = n, true } }

func bk(name string, typ ConfigType, def, doc string, opts ...bkOpt) BrokerKey {
	k := BrokerKey{Name: name, Type: typ, Default: def, HasDefault: true, Doc: doc}
	for _, o := range opts {
		o(&k)
	}
	return k
}

// brokerKeyTable is every broker key this broker reads, with Kafka 3.9's
// type, default and documentation (KafkaConfig, ServerLogConfigs,
// CleanerConfig, QuotaConfigs), plus http.listener, which is ours. The
// topic defaults that Kafka's DynamicLogConfig lets change (the first
// broker synonym of every topic key but message.format.version, as
// ServerTopicConfigSynonyms.TOPIC_CONFIG_SYNONYMS lists them: log.retention.ms
// but not log.retention.hours) are marked dynamic from topicKeyTable below,
// so the two tables cannot disagree. Kafka also lets listeners,
// advertised.listeners and listener.security.protocol.map change per
// broker; here they need a restart, so they are read-only.
var brokerKeyTable = func() []BrokerKey {
	const maxLong = "9223372036854775807"
	rows := []BrokerKey{
		bk("broker.id", TypeInt, "-1", "The broker id for this server."),
		bk("broker.rack", TypeString, "", "Rack of the broker, used in rack-aware replication assignment.", noDefault),
		bk("listeners", TypeString, "PLAINTEXT://:9092", "Listener list: comma-separated URIs the broker listens on, with listener names."),
		bk("advertised.listeners", TypeString, "", "Listeners published in ZooKeeper for clients to use, if different from listeners.", noDefault),
		bk("listener.security.protocol.map", TypeString, "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL", "Map between listener names and security protocols."),
		bk("inter.broker.listener.name", TypeString, "", "Name of the listener used between brokers.", noDefault),
		bk("zookeeper.connect", TypeString, "", "ZooKeeper connection string host:port[,host:port][/chroot].", noDefault),
		bk("zookeeper.session.timeout.ms", TypeInt, "18000", "ZooKeeper session timeout."),
		bk("zookeeper.connection.timeout.ms", TypeInt, "", "The max time the broker waits to establish a ZooKeeper session; zookeeper.session.timeout.ms if unset.", noDefault),
		bk("log.dirs", TypeString, "", "The directories in which the log data is kept; log.dir if unset.", noDefault),
		bk("log.dir", TypeString, "/tmp/kafka-logs", "The directory in which the log data is kept (supplemental for log.dirs)."),
		bk("num.partitions", TypeInt, "1", "The default number of log partitions per topic."),
		bk("default.replication.factor", TypeInt, "1", "The default replication factor for automatically created topics."),
		bk("auto.create.topics.enable", TypeBoolean, "true", "Enable auto creation of topic on the server."),
		bk("delete.topic.enable", TypeBoolean, "true", "Enables delete topic."),
		bk("message.max.bytes", TypeInt, "1048588", "The largest record batch size allowed; topic override max.message.bytes.", atLeast(0)),
		bk("socket.request.max.bytes", TypeInt, "104857600", "The maximum number of bytes in a socket request."),
		bk("connections.max.idle.ms", TypeLong, "600000", "Idle connections timeout: connections idle longer than this are closed."),
		bk("queued.max.request.bytes", TypeLong, "104857600", "The number of queued bytes allowed before no more requests are read (here bounded by default)."),
		bk("max.connections", TypeInt, "2147483647", "The maximum number of connections the broker allows at any time, beyond the inter-broker listener.", dynamicKey, atLeast(0)),
		bk("max.connections.per.ip", TypeInt, "2147483647", "The maximum number of connections allowed from each ip address.", dynamicKey, atLeast(0)),
		bk("log.segment.bytes", TypeInt, "1073741824", "The maximum size of a single log file."),
		bk("log.roll.ms", TypeLong, "", "The maximum time before a new log segment is rolled out (in milliseconds); log.roll.hours if unset.", noDefault),
		bk("log.roll.hours", TypeInt, "168", "The maximum time before a new log segment is rolled out (in hours), secondary to log.roll.ms."),
		bk("log.roll.jitter.ms", TypeLong, "", "The maximum jitter subtracted from logRollTimeMillis (in milliseconds); log.roll.jitter.hours if unset.", noDefault),
		bk("log.roll.jitter.hours", TypeInt, "0", "The maximum jitter subtracted from logRollTimeMillis (in hours), secondary to log.roll.jitter.ms."),
		bk("log.retention.ms", TypeLong, "", "The number of milliseconds to keep a log file before deleting it; log.retention.minutes if unset. -1: no time limit.", noDefault),
		bk("log.retention.minutes", TypeInt, "", "The number of minutes to keep a log file before deleting it, secondary to log.retention.ms; log.retention.hours if unset.", noDefault),
		bk("log.retention.hours", TypeInt, "168", "The number of hours to keep a log file before deleting it, tertiary to log.retention.ms."),
		bk("log.retention.bytes", TypeLong, "-1", "The maximum size of the log before deleting it."),
		bk("log.retention.check.interval.ms", TypeLong, "300000", "The frequency in milliseconds that the log cleaner checks whether any log is eligible for deletion."),
		bk("log.flush.interval.messages", TypeLong, maxLong, "The number of messages accumulated on a log partition before messages are flushed to disk."),
		bk("log.flush.interval.ms", TypeLong, "", "The maximum time in ms that a message in any topic is kept in memory before flushed to disk; log.flush.scheduler.interval.ms if unset.", noDefault),
		bk("log.flush.scheduler.interval.ms", TypeLong, maxLong, "The frequency in ms that the log flusher checks whether any log needs to be flushed to disk."),
		bk("num.recovery.threads.per.data.dir", TypeInt, "1", "The number of threads per data directory to be used for log recovery at startup and flushing at shutdown. Here: the goroutines per log dir that open the logs of one LeaderAndIsr request.", dynamicKey, atLeast(1)),
		bk("log.flush.offset.checkpoint.interval.ms", TypeInt, "60000", "The frequency with which we update the persistent record of the last flush which acts as the log recovery point."),
		bk("log.index.interval.bytes", TypeInt, "4096", "The interval with which we add an entry to the offset index."),
		bk("log.index.size.max.bytes", TypeInt, "10485760", "The maximum size in bytes of the offset index."),
		bk("log.message.timestamp.type", TypeString, "CreateTime", "Whether the timestamp in the message is message create time or log append time."),
		bk("log.message.timestamp.difference.max.ms", TypeLong, maxLong, "[DEPRECATED] The maximum difference allowed between the timestamp when a broker receives a message and the timestamp specified in the message."),
		bk("log.message.timestamp.before.max.ms", TypeLong, maxLong, "The maximum difference allowed between the timestamp when a broker receives a message and an earlier timestamp specified in the message."),
		bk("log.message.timestamp.after.max.ms", TypeLong, maxLong, "The maximum difference allowed between the timestamp when a broker receives a message and a later timestamp specified in the message."),
		bk("log.message.format.version", TypeString, "3.0-IV1", "[DEPRECATED] Specify the message format version the broker will use to append messages to the logs."),
		bk("log.message.downconversion.enable", TypeBoolean, "true", "Whether down-conversion of message formats is enabled to satisfy consume requests."),
		bk("log.segment.delete.delay.ms", TypeLong, "60000", "The amount of time to wait before deleting a file from the filesystem."),
		bk("log.preallocate", TypeBoolean, "false", "Should pre allocate file when create new segment?"),
		bk("log.cleanup.policy", TypeList, "delete", "The default cleanup policy for segments beyond the retention window: delete, compact or both."),
		bk("log.local.retention.ms", TypeLong, "-2", "The number of milliseconds to keep the local log segment before it gets deleted (tiered storage)."),
		bk("log.local.retention.bytes", TypeLong, "-2", "The maximum size of local log segments that can grow for a partition before it gets eligible for deletion (tiered storage)."),
		bk("compression.type", TypeString, "producer", "Specify the final compression type for a given topic; producer retains the original compression codec."),
		bk("compression.gzip.level", TypeInt, "-1", "The compression level to use if compression.type is set to gzip."),
		bk("compression.lz4.level", TypeInt, "9", "The compression level to use if compression.type is set to lz4."),
		bk("compression.zstd.level", TypeInt, "3", "The compression level to use if compression.type is set to zstd."),
		bk("min.insync.replicas", TypeInt, "1", "The minimum number of replicas that must acknowledge a write with acks=all."),
		bk("unclean.leader.election.enable", TypeBoolean, "false", "Indicates whether to enable replicas not in the ISR set to be elected as leader as a last resort."),
		bk("replica.high.watermark.checkpoint.interval.ms", TypeLong, "5000", "The frequency with which the high watermark is saved out to disk."),
		bk("replica.lag.time.max.ms", TypeLong, "30000", "A follower that has not caught up to the leader's log end offset for at least this time is removed from the ISR."),
		bk("replica.fetch.max.bytes", TypeInt, "1048576", "The number of bytes of messages to attempt to fetch for each partition."),
		bk("replica.fetch.wait.max.ms", TypeInt, "500", "The maximum wait time for each fetcher request issued by follower replicas."),
		bk("replica.fetch.min.bytes", TypeInt, "1", "Minimum bytes expected for each fetch response."),
		bk("max.incremental.fetch.session.cache.slots", TypeInt, "1000", "The maximum number of incremental fetch sessions that we will maintain.", atLeast(0)),
		bk("controlled.shutdown.enable", TypeBoolean, "true", "Enable controlled shutdown of the server."),
		bk("auto.leader.rebalance.enable", TypeBoolean, "true", "Enables auto leader balancing."),
		bk("offsets.topic.replication.factor", TypeShort, "3", "The replication factor for the offsets topic."),
		bk("offsets.topic.num.partitions", TypeInt, "50", "The number of partitions for the offset commit topic."),
		bk("offsets.topic.segment.bytes", TypeInt, "104857600", "The offsets topic segment bytes."),
		bk("offsets.topic.compression.codec", TypeInt, "0", "Compression codec for the offsets topic."),
		bk("offsets.retention.minutes", TypeInt, "10080", "How long committed offsets of an empty group are kept."),
		bk("offsets.retention.check.interval.ms", TypeLong, "600000", "Frequency at which to check for stale offsets."),
		bk("offsets.commit.timeout.ms", TypeInt, "5000", "Offset commit will be delayed until all replicas for the offsets topic receive the commit or this timeout is reached."),
		bk("transaction.state.log.num.partitions", TypeInt, "50", "The number of partitions for the transaction topic (should not change after deployment).", atLeast(1)),
		bk("transaction.state.log.replication.factor", TypeShort, "3", "The replication factor for the transaction topic (set higher to ensure availability). Internal topic creation will fail until the cluster size meets this replication factor requirement.", atLeast(1)),
		bk("transaction.state.log.min.isr", TypeInt, "2", "The minimum number of replicas that must acknowledge a write to transaction topic in order to be considered successful.", atLeast(1)),
		bk("transaction.state.log.segment.bytes", TypeInt, "104857600", "The transaction topic segment bytes should be kept relatively small in order to facilitate faster log compaction and cache loads.", atLeast(1)),
		bk("transaction.max.timeout.ms", TypeInt, "900000", "The maximum allowed timeout for transactions. If a client's requested transaction time exceed this, then the broker will return an error in InitProducerIdRequest.", atLeast(1)),
		bk("transactional.id.expiration.ms", TypeInt, "604800000", "The time in ms that the transaction coordinator will wait without receiving any transaction status updates for the current transaction before expiring its transactional id.", atLeast(1)),
		bk("transaction.abort.timed.out.transaction.cleanup.interval.ms", TypeInt, "10000", "The interval at which to rollback transactions that have timed out.", atLeast(1)),
		bk("transaction.remove.expired.transaction.cleanup.interval.ms", TypeInt, "3600000", "The interval at which to remove transactions that have expired due to transactional.id.expiration.ms passing.", atLeast(1)),
		bk("transaction.partition.verification.enable", TypeBoolean, "true", "Enable verification that checks that the partition has been added to the transaction before writing transactional records to the partition (KIP-890). Read-only in this broker."),
		bk("group.initial.rebalance.delay.ms", TypeInt, "3000", "The amount of time the group coordinator will wait for more consumers to join a new group before performing the first rebalance."),
		bk("group.min.session.timeout.ms", TypeInt, "6000", "The minimum allowed session timeout for registered consumers."),
		bk("group.max.session.timeout.ms", TypeInt, "1800000", "The maximum allowed session timeout for registered consumers."),
		bk("log.cleaner.enable", TypeBoolean, "true", "Enable the log cleaner process to run on the server."),
		bk("log.cleaner.threads", TypeInt, "1", "The number of background threads to use for log cleaning.", dynamicKey, atLeast(0)),
		bk("log.cleaner.io.max.bytes.per.second", TypeDouble, "1.7976931348623157E308", "The log cleaner will be throttled so that the sum of its read and write i/o will be less than this value on average.", dynamicKey),
		bk("log.cleaner.dedupe.buffer.size", TypeLong, "134217728", "The total memory used for log deduplication across all cleaner threads (each thread's share is capped at 2147483647 bytes).", dynamicKey),
		// Dynamic in Kafka, read-only here: this cleaner's I/O buffer and
		// offset map load factor are fixed, so a change would have no effect.
		bk("log.cleaner.io.buffer.size", TypeInt, "524288", "The total memory used for log cleaner I/O buffers across all cleaner threads. Read and checked only, and not dynamic in this broker: its cleaner buffers 1 MiB per thread.", atLeast(0)),
		bk("log.cleaner.io.buffer.load.factor", TypeDouble, "0.9", "Log cleaner dedupe buffer load factor. Read and checked only, and not dynamic in this broker: the offset map is full at 90%."),
		bk("log.cleaner.backoff.ms", TypeLong, "15000", "The amount of time to sleep when there are no logs to clean.", dynamicKey, atLeast(0)),
		bk("log.cleaner.min.cleanable.ratio", TypeDouble, "0.5", "The minimum ratio of dirty log to total log for a log to eligible for cleaning."),
		bk("log.cleaner.delete.retention.ms", TypeLong, "86400000", "The amount of time to retain tombstone message markers for log compacted topics."),
		bk("log.cleaner.min.compaction.lag.ms", TypeLong, "0", "The minimum time a message will remain uncompacted in the log."),
		bk("log.cleaner.max.compaction.lag.ms", TypeLong, maxLong, "The maximum time a message will remain ineligible for compaction in the log."),
		bk("leader.replication.throttled.rate", TypeLong, maxLong, "A long representing the upper bound (bytes/sec) on replication traffic for leaders enumerated in the property leader.replication.throttled.replicas (for each topic).", quota, atLeast(0)),
		bk("follower.replication.throttled.rate", TypeLong, maxLong, "A long representing the upper bound (bytes/sec) on replication traffic for followers enumerated in the property follower.replication.throttled.replicas (for each topic).", quota, atLeast(0)),
		bk("http.listener", TypeString, "", "Not a Kafka key: host:port of the HTTP listener for /metrics, /v1/partitions and the status page.", noDefault),

		// Security (issue 14): Kafka's KafkaConfig and BrokerSecurityConfigs
		// keys, and AclAuthorizer's. Each ssl.* and sasl.* key may also be
		// set per listener as listener.name.<listener>.<key>; those
		// prefixed keys are not rows (DescribeConfigs lists them as
		// custom, hence sensitive, configs), nor is sasl.jaas.config, which
		// a broker reads only as listener.name.<listener>.<mechanism>.sasl.jaas.config.
		// Passwords and private keys are PASSWORD: described as null.
		bk("security.inter.broker.protocol", TypeString, "PLAINTEXT", "Security protocol used to communicate between brokers: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL. It is an error to set this and inter.broker.listener.name at the same time."),
		bk("sasl.enabled.mechanisms", TypeList, "GSSAPI", "The list of SASL mechanisms enabled in the Kafka server (here PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)."),
		bk("sasl.mechanism.inter.broker.protocol", TypeString, "GSSAPI", "SASL mechanism used for inter-broker communication."),
		bk("sasl.server.max.receive.size", TypeInt, "524288", "The maximum receive size allowed before and during initial SASL authentication."),
		bk("connection.failed.authentication.delay.ms", TypeInt, "100", "Connection close delay on failed authentication: the time by which connection close will be delayed on authentication failure.", atLeast(0)),
		bk("connections.max.reauth.ms", TypeLong, "0", "When explicitly set to a positive number, a session lifetime that will not exceed the configured value is communicated to v2.2.0 or later clients when they authenticate; the broker disconnects any such connection that is not re-authenticated within the session lifetime."),
		bk("authorizer.class.name", TypeString, "", "The fully qualified name of a class that implements the Authorizer interface; here kafka.security.authorizer.AclAuthorizer or empty."),
		bk("super.users", TypeString, "", "AclAuthorizer: semicolon-separated principals (User:name) that may perform any operation.", noDefault),
		bk("allow.everyone.if.no.acl.found", TypeBoolean, "false", "AclAuthorizer: whether a resource without any ACL is open to everyone."),
		bk("zookeeper.set.acl", TypeBoolean, "false", "Set client to use secure ACLs."),
		bk("ssl.keystore.type", TypeString, "JKS", "The file format of the key store file (here PEM or PKCS12)."),
		bk("ssl.keystore.location", TypeString, "", "The location of the key store file.", noDefault),
		bk("ssl.keystore.password", TypePassword, "", "The store password for the key store file.", noDefault),
		bk("ssl.keystore.certificate.chain", TypePassword, "", "Certificate chain in the format specified by ssl.keystore.type (PEM with an X.509 certificate list).", noDefault),
		bk("ssl.keystore.key", TypePassword, "", "Private key in the format specified by ssl.keystore.type (PEM with a PKCS#8 key, encrypted with ssl.key.password if given).", noDefault),
		bk("ssl.key.password", TypePassword, "", "The password of the private key in the key store file or the PEM key specified in ssl.keystore.key.", noDefault),
		bk("ssl.truststore.type", TypeString, "JKS", "The file format of the trust store file (here PEM or PKCS12)."),
		bk("ssl.truststore.location", TypeString, "", "The location of the trust store file.", noDefault),
		bk("ssl.truststore.password", TypePassword, "", "The password for the trust store file.", noDefault),
		bk("ssl.truststore.certificates", TypePassword, "", "Trusted certificates in the format specified by ssl.truststore.type (PEM).", noDefault),
		bk("ssl.client.auth", TypeString, "none", "Whether the broker requests client authentication: required, requested or none."),
		bk("ssl.enabled.protocols", TypeList, "TLSv1.2,TLSv1.3", "The list of protocols enabled for SSL connections."),
		bk("ssl.cipher.suites", TypeList, "", "A list of cipher suites; by default all the available cipher suites are supported."),
		bk("ssl.endpoint.identification.algorithm", TypeString, "https", "The endpoint identification algorithm to validate server hostname using server certificate (inter-broker connections)."),
		bk("ssl.principal.mapping.rules", TypeString, "DEFAULT", "A list of rules for mapping from distinguished name found in the client certificate to short name."),
		// JSSE's knobs: accepted (so Kafka's configs start) but with
		// nothing to choose in Go's TLS stack; ssl.protocol is checked.
		bk("ssl.protocol", TypeString, "TLSv1.3", "The SSL protocol used to generate the SSLContext (TLSv1.2, TLSv1.3 or TLS); here ssl.enabled.protocols alone decides what is negotiated."),
		bk("ssl.provider", TypeString, "", "The name of the security provider used for SSL connections. Accepted and not used: Go's TLS has one provider.", noDefault),
		bk("ssl.keymanager.algorithm", TypeString, "SunX509", "The algorithm used by key manager factory for SSL connections. Accepted and not used."),
		bk("ssl.trustmanager.algorithm", TypeString, "PKIX", "The algorithm used by trust manager factory for SSL connections. Accepted and not used: chains are verified as PKIX."),
		bk("ssl.secure.random.implementation", TypeString, "", "The SecureRandom PRNG implementation to use for SSL cryptography operations. Accepted and not used: crypto/rand.", noDefault),
		bk("ssl.engine.factory.class", TypeString, "", "The class of type SslEngineFactory to provide SSLEngine objects; not supported (must be unset).", noDefault),
	}
	dynamicLog := map[string]bool{}
	for _, tk := range topicKeyTable {
		if len(tk.broker) > 0 && tk.name != "message.format.version" {
			dynamicLog[tk.broker[0].name] = true
		}
	}
	for i := range rows {
		if dynamicLog[rows[i].Name] {
			rows[i].Mode = ModeClusterWide
		}
		if !rows[i].HasDefault {
			rows[i].Default = ""
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Name < rows[j].Name })
	return rows
}()

var brokerKeys = func() map[string]*BrokerKey {
	m := make(map[string]*BrokerKey, len(brokerKeyTable))
	for i := range brokerKeyTable {
		m[brokerKeyTable[i].Name] = &brokerKeyTable[i]
	}
	return m
}()

// BrokerKeys returns the broker key table, sorted by name.
func BrokerKeys() []BrokerKey { return append([]BrokerKey(nil), brokerKeyTable...) }

// LookupBrokerKey returns the row of a broker key.
func LookupBrokerKey(name string) (BrokerKey, bool) {
	k, ok := brokerKeys[name]
	if !ok {
		return BrokerKey{}, false
	}
	return *k, true
}

// StaticBrokerKeyDefaults maps every key server.properties may set to its
// default ("" for none): the table without the dynamic-only quota keys.
func StaticBrokerKeyDefaults() map[string]string {
	out := make(map[string]string, len(brokerKeyTable))
	for _, k := range brokerKeyTable {
		if k.Mode != ModeQuota {
			out[k.Name] = k.Default
		}
	}
	return out
}

// brokerSynonymGroups are Kafka's DynamicBrokerConfig.brokerConfigSynonyms:
// keys that set one setting, in order of precedence. Any other key is its
// own only synonym.
var brokerSynonymGroups = [][]string{
	{"log.roll.ms", "log.roll.hours"},
	{"log.roll.jitter.ms", "log.roll.jitter.hours"},
	{"log.retention.ms", "log.retention.minutes", "log.retention.hours"},
}

// BrokerSynonyms is Kafka's brokerConfigSynonyms(name): the keys that set
// the same setting as name, most precedent first, name among them.
func BrokerSynonyms(name string) []string {
	if name == "log.flush.interval.ms" { // log.flush.scheduler.interval.ms is its default
		return []string{"log.flush.interval.ms", "log.flush.scheduler.interval.ms"}
	}
	for _, g := range brokerSynonymGroups {
		for _, n := range g {
			if n == name {
				return g
			}
		}
	}
	return []string{name}
}

// BrokerConfigLayers are the broker's settings by source.
type BrokerConfigLayers struct {
	Static         map[string]string // server.properties and --override, as written
	DynamicDefault map[string]string // /config/brokers/<default>
	DynamicBroker  map[string]string // /config/brokers/<id>
}

// Merged is the broker's effective properties, as Kafka's
// DynamicBrokerConfig.updateCurrentConfig builds them: the static ones,
// overridden by the dynamic defaults and then by the broker's own, where
// setting a key removes its synonyms first (a dynamic log.retention.ms
// wins over a static log.retention.hours, and a dynamic log.roll.hours
// over a static log.roll.ms). Quota keys and keys not in the table stay in
// the result; the caller picks what it reads.
func (l BrokerConfigLayers) Merged() map[string]string {
	out := make(map[string]string, len(l.Static)+len(l.DynamicDefault)+len(l.DynamicBroker))
	for k, v := range l.Static {
		out[k] = v
	}
	for _, layer := range []map[string]string{l.DynamicDefault, l.DynamicBroker} {
		names := make([]string, 0, len(layer))
		for k := range layer {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			for _, s := range BrokerSynonyms(k) {
				delete(out, s)
			}
			out[k] = layer[k]
		}
	}
	return out
}

// BrokerConfigSynonym is one source of a described broker value. Value is
// nil for a sensitive key.
type BrokerConfigSynonym struct {
	Name   string
	Value  *string
	Source ConfigSource
}

// BrokerConfigEntry is one described broker setting (DescribeConfigs of a
// BROKER resource). Value is nil for a sensitive key or a key that is
// unset and has no default.
type BrokerConfigEntry struct {
	Name          string
	Value         *string
	Source        ConfigSource
	Type          ConfigType
	ReadOnly      bool
	Sensitive     bool
	Synonyms      []BrokerConfigSynonym // in precedence order; the first is Source
	Documentation string
}

// BrokerEntries describes the broker's settings as Kafka's
// ConfigHelper.createBrokerConfigEntry does. For a broker (perBroker) it
// lists every key of the table and every other key set at some layer
// (Kafka's "custom" configs: of unknown type, so sensitive); for the
// cluster default resource only the keys in /config/brokers/<default>,
// with only their DYNAMIC_DEFAULT_BROKER_CONFIG synonyms. A key's
// synonyms are those of BrokerSynonyms found in the dynamic broker layer,
// then the dynamic defaults, then the static layer, then Kafka's defaults,
// from the first one that names the key itself (so log.retention.hours
// does not list a log.retention.ms set above it); the first is the
// source, DEFAULT_CONFIG if there is none. The value is the key's own:
// that of its first synonym, else nil (log.retention.ms unset shows null
// and no synonym, as in Kafka, whose list drops every synonym before the
// first that names the key).
// Sensitive values (PASSWORD and unknown types) are never returned.
// Entries are sorted by name.
func (l BrokerConfigLayers) BrokerEntries(perBroker bool) []BrokerConfigEntry {
	names := map[string]bool{}
	if perBroker {
		for _, k := range brokerKeyTable {
			names[k.Name] = true
		}
		for _, layer := range []map[string]string{l.Static, l.DynamicDefault, l.DynamicBroker} {
			for k := range layer {
				names[k] = true
			}
		}
	} else {
		for k := range l.DynamicDefault {
			names[k] = true
		}
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	out := make([]BrokerConfigEntry, 0, len(sorted))
	for _, name := range sorted {
		out = append(out, l.brokerEntry(name, perBroker))
	}
	return out
}

func (l BrokerConfigLayers) brokerEntry(name string, perBroker bool) BrokerConfigEntry {
	typ, readOnly, doc := TypeUnknown, true, ""
	if k, ok := brokerKeys[name]; ok {
		typ, readOnly, doc = k.Type, k.Mode != ModeClusterWide, k.Doc
	}
	sensitive := typ == TypeUnknown || typ == TypePassword
	value := func(v string) *string {
		if sensitive {
			return nil
		}
		return &v
	}
	syns := BrokerSynonyms(name)
	var all []BrokerConfigSynonym
	layers := []struct {
		m   map[string]string
		src ConfigSource
	}{{l.DynamicBroker, SourceDynamicBroker}, {l.DynamicDefault, SourceDynamicDefaultBroker}, {l.Static, SourceStaticBroker}}
	for _, layer := range layers {
		for _, s := range syns {
			if v, ok := layer.m[s]; ok {
				all = append(all, BrokerConfigSynonym{Name: s, Value: value(v), Source: layer.src})
			}
		}
	}
	for _, s := range syns {
		if k, ok := brokerKeys[s]; ok && k.HasDefault {
			all = append(all, BrokerConfigSynonym{Name: s, Value: value(k.Default), Source: SourceDefault})
		}
	}
	for len(all) > 0 && all[0].Name != name {
		all = all[1:]
	}
	if !perBroker {
		kept := all[:0]
		for _, s := range all {
			if s.Source == SourceDynamicDefaultBroker {
				kept = append(kept, s)
			}
		}
		all = kept
	}
	e := BrokerConfigEntry{Name: name, Source: SourceDefault, Type: typ, ReadOnly: readOnly,
		Sensitive: sensitive, Synonyms: all, Documentation: doc}
	if len(all) > 0 {
		e.Source = all[0].Source
		e.Value = all[0].Value
	}
	return e
}

// CheckBrokerConfigUpdate is Kafka's DynamicBrokerConfig.validateConfigs
// for the whole new content of /config/brokers/<id> or <default>: keys
// that need a restart are refused ("Cannot update these configs
// dynamically: Set(...)"), then every value must parse as its key's type
// and meet its lower bound, with ConfigDef's messages naming the key.
// Kafka also keeps keys it does not know ("custom" configs, for plugins);
// this broker has no plugin to read them, and some are Kafka's own
// security keys it does not serve (sasl.jaas.config, whose dynamic update
// was CVE-2023-25194's way in), so a key not in the table is refused with
// the same message. Errors are *BrokerConfigError.
func CheckBrokerConfigUpdate(props map[string]string) error {
	var static []string
	for name := range props {
		if k, ok := brokerKeys[name]; !ok || !k.Dynamic() {
			static = append(static, name)
		}
	}
	if len(static) > 0 {
		sort.Strings(static)
		return refused("Cannot update these configs dynamically: Set(%s)", strings.Join(static, ", "))
	}
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := brokerKeys[name].parse(props[name]); err != nil {
			return err
		}
	}
	return nil
}

// parse checks v as ConfigDef.parseType and the key's Range validator do.
func (k *BrokerKey) parse(v string) error {
	t := strings.TrimSpace(v)
	bad := func(msg string) error {
		return refused("Invalid value %s for configuration %s: %s", v, k.Name, msg)
	}
	var n int64
	switch k.Type {
	case TypeBoolean:
		if !strings.EqualFold(t, "true") && !strings.EqualFold(t, "false") {
			return bad("Expected value to be either true or false")
		}
		return nil
	case TypeShort, TypeInt, TypeLong:
		bits := map[ConfigType]int{TypeShort: 16, TypeInt: 32, TypeLong: 64}[k.Type]
		x, err := strconv.ParseInt(t, 10, bits)
		if err != nil {
			return bad("Not a number of type " + map[ConfigType]string{TypeShort: "SHORT", TypeInt: "INT", TypeLong: "LONG"}[k.Type])
		}
		n = x
	case TypeDouble:
		f, err := strconv.ParseFloat(t, 64)
		if err != nil || math.IsNaN(f) {
			return bad("Not a number of type DOUBLE")
		}
		return nil
	default:
		return nil
	}
	if k.HasMin && n < k.Min {
		return bad(fmt.Sprintf("Value must be at least %d", k.Min))
	}
	return nil
}

// EntriesWithBrokerLayers is Entries with the dynamic broker layers too:
// a topic default set in /config/brokers/<id> or <default> is listed as a
// DYNAMIC_BROKER_CONFIG or DYNAMIC_DEFAULT_BROKER_CONFIG synonym before
// the static ones, as Kafka's ConfigHelper.configSynonyms orders them. c
// is the effective config (broker defaults from layers.Merged with the
// topic's overrides).
func (c LogConfig) EntriesWithBrokerLayers(overrides map[string]string, layers BrokerConfigLayers) []ConfigEntry {
	out := c.Entries(overrides, layers.Static)
	if len(layers.DynamicBroker) == 0 && len(layers.DynamicDefault) == 0 {
		return out
	}
	for i := range out {
		e := &out[i]
		k := topicKeys[e.Name]
		if len(k.broker) == 0 {
			continue
		}
		var broker []ConfigSynonym
		for _, layer := range []struct {
			m   map[string]string
			src ConfigSource
		}{{layers.DynamicBroker, SourceDynamicBroker}, {layers.DynamicDefault, SourceDynamicDefaultBroker}, {layers.Static, SourceStaticBroker}} {
			for _, s := range k.broker {
				if v, ok := layer.m[s.name]; ok {
					broker = append(broker, ConfigSynonym{Name: s.name, Value: v, Source: layer.src})
				}
			}
		}
		for _, s := range k.broker {
			if s.hasDefault {
				broker = append(broker, ConfigSynonym{Name: s.name, Value: s.def, Source: SourceDefault})
			}
		}
		for len(broker) > 0 && broker[0].Name != k.broker[0].name {
			broker = broker[1:]
		}
		var syns []ConfigSynonym
		if len(e.Synonyms) > 0 && e.Synonyms[0].Source == SourceDynamicTopic {
			syns = append(syns, e.Synonyms[0])
		}
		e.Synonyms = append(syns, broker...)
		e.Source = SourceDefault
		if len(e.Synonyms) > 0 {
			e.Source = e.Synonyms[0].Source
		}
		e.IsDefault = e.Source == SourceDefault
	}
	return out
}
