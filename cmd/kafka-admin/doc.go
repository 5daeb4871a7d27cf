// Command kafka-admin operates a running cluster through the Kafka protocol,
// with the subcommands and flags of Apache Kafka's shell tools, so that what
// an operator knows of those tools carries over:
//
//	kafka-admin reassign-partitions   kafka-reassign-partitions.sh: --generate, --execute
//	                                  [--throttle B/s] [--timeout ms], --verify,
//	                                  --cancel [--timeout ms], --list
//	kafka-admin leader-election       kafka-leader-election.sh: PREFERRED or UNCLEAN
//	kafka-admin configs               kafka-configs.sh: --describe / --alter of topics,
//	                                  brokers and broker-loggers
//	kafka-admin consumer-groups       kafka-consumer-groups.sh --delete-offsets
//	kafka-admin transactions          kafka-transactions.sh: list [--duration-filter ms],
//	                                  describe --transactional-id ID, describe-producers
//	                                  --topic T --partition P [--broker-id B], abort --topic T
//	                                  --partition P --start-offset O (or --producer-id,
//	                                  --producer-epoch, --coordinator-epoch), find-hanging
//	                                  --topic T [--partition P] | --broker-id B
//	kafka-admin acls                  kafka-acls.sh: --add / --remove / --list with --topic,
//	                                  --group, --cluster, --transactional-id,
//	                                  --resource-pattern-type, --allow-principal,
//	                                  --deny-principal, --allow-host, --deny-host, --operation,
//	                                  --producer, --consumer, --principal (list)
//	kafka-admin topics                kafka-topics.sh: --create, --list, --describe, --delete
//	kafka-admin configs --entity-type users
//	                                  kafka-configs.sh for SCRAM users: --alter --add-config
//	                                  'SCRAM-SHA-512=[iterations=8192,password=P]',
//	                                  --delete-config SCRAM-SHA-512, --describe
//
// Every subcommand takes --bootstrap-server host:port[,host:port] and prints
// its usage with --help. --command-config FILE reads Kafka client properties
// (Java properties syntax, backslash continuations included) so the tool
// talks to a secured cluster: security.protocol PLAINTEXT, SSL,
// SASL_PLAINTEXT or SASL_SSL; sasl.mechanism PLAIN, SCRAM-SHA-256 or
// SCRAM-SHA-512 with username and password from sasl.jaas.config; the ssl.*
// keys as the broker reads them (security.TLSSettingsFromConfig: PEM or
// PKCS12 truststore and keystore for mTLS,
// ssl.endpoint.identification.algorithm). GSSAPI, OAUTHBEARER and JKS stores
// are refused with an error naming the key.
//
// Users: configs --entity-type users sends AlterUserScramCredentials (51)
// (kadm salts the password and runs PBKDF2 on the client, as Kafka's Admin
// client does) and DescribeUserScramCredentials (50). With --zookeeper
// HOST:PORT[/chroot] instead of --bootstrap-server, --alter writes
// /config/users/<user> and the /config/changes notification directly, as
// kafka-configs.sh --zookeeper does: that is how the first SCRAM user (the
// brokers' inter-broker principal) exists before a broker runs. ZooKeeper
// digest credentials come from the Client section of the JAAS file named by
// -Djava.security.auth.login.config= in KAFKA_OPTS, as for Kafka's tools;
// with them the znodes get digest ACLs (the credential znode no world
// access), without them world ACLs (zookeeper.set.acl=false).
//
// ACLs: CreateAcls (30), DeleteAcls (31) and DescribeAcls (29), printed as
// kafka-acls.sh prints them ("Current ACLs for resource
// `ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`: ...");
// operations are checked per resource type as AclCommand does; --list
// without a resource lists every ACL (pattern ANY). The JSON files read and written (topics to move,
// reassignment plans, election lists) are byte-for-byte Kafka's formats, so
// a plan made by one tool runs with the other.
//
// Requests go through franz-go's kadm: AlterPartitionReassignments (45),
// ListPartitionReassignments (46), ElectLeaders (43), DescribeConfigs (32),
// IncrementalAlterConfigs (44), OffsetDelete (47) and Metadata; transactions
// through ListTransactions (66), DescribeTransactions (65), DescribeProducers
// (61) and WriteTxnMarkers (27). abort does what kafka-transactions.sh does:
// DescribeProducers on the partition's leader finds the producer whose
// CurrentTxnStartOffset is --start-offset, then WriteTxnMarkers to that
// leader writes an ABORT marker with the producer's id and epoch and its
// coordinator epoch (0 when it has none). list --duration-filter sends
// ListTransactions v1's filter where every broker serves v1 and otherwise
// filters on the start times DescribeTransactions reports. find-hanging
// is Kafka's: open transactions (DescribeProducers) older than
// --max-transaction-timeout whose producer no transactional id lists
// (ListTransactions by producer id), whose id is not found, or whose
// transaction (DescribeTransactions) does not include the partition. Throttles are
// set as kafka-reassign-partitions.sh sets them (KIP-73): the broker keys
// leader.replication.throttled.rate and follower.replication.throttled.rate
// on every broker that sends or receives a moving replica, and the topic keys
// leader.replication.throttled.replicas (the current replicas of each moving
// partition) and follower.replication.throttled.replicas (the replicas being
// added). --verify removes them once no reassignment is in progress, unless
// --preserve-throttles.
//
// Exit status: 0 on success, 1 when the cluster refused or failed a request
// (the message names Kafka's error, e.g. UNKNOWN_TOPIC_OR_PARTITION), 2 for
// bad arguments. Replica moves between log directories (non-"any" log_dirs,
// --replica-alter-log-dirs-throttle) are not supported: the broker keeps one
// log directory per replica.
package main
