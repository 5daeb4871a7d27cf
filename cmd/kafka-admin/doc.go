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
//
// Every subcommand takes --bootstrap-server host:port[,host:port] and prints
// its usage with --help. The JSON files read and written (topics to move,
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
// --replica-alter-log-dirs-throttle) and --command-config are not supported:
// the broker keeps one log directory per replica and speaks PLAINTEXT only.
package main
