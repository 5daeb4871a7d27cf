// Command kafka-admin operates a running cluster through the Kafka protocol,
// with the subcommands and flags of Apache Kafka's shell tools, so that what
// an operator knows of those tools carries over:
//
//	kafka-admin reassign-partitions   kafka-reassign-partitions.sh: --generate, --execute
//	                                  [--throttle B/s], --verify, --cancel, --list
//	kafka-admin leader-election       kafka-leader-election.sh: PREFERRED or UNCLEAN
//	kafka-admin configs               kafka-configs.sh: --describe / --alter of topics,
//	                                  brokers and broker-loggers
//	kafka-admin consumer-groups       kafka-consumer-groups.sh --delete-offsets
//
// Every subcommand takes --bootstrap-server host:port[,host:port] and prints
// its usage with --help. The JSON files read and written (topics to move,
// reassignment plans, election lists) are byte-for-byte Kafka's formats, so
// a plan made by one tool runs with the other.
//
// Requests go through franz-go's kadm: AlterPartitionReassignments (45),
// ListPartitionReassignments (46), ElectLeaders (43), DescribeConfigs (32),
// IncrementalAlterConfigs (44), OffsetDelete (47) and Metadata. Throttles are
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
// --replica-alter-log-dirs-throttle) and --command-config are not supported:
// the broker keeps one log directory per replica and speaks PLAINTEXT only.
package main
