// Package txn is the transaction coordinator, as Kafka 3.x's
// TransactionCoordinator and TransactionStateManager in ZooKeeper mode
// (KIP-98, KIP-360, KIP-447, KIP-890 part 1): InitProducerId with a
// transactional id, AddPartitionsToTxn (and its verify-only form),
// AddOffsetsToTxn, EndTxn, ListTransactions and DescribeTransactions, for
// the transactional ids whose partition of __transaction_state this broker
// leads. It writes transaction markers through a MarkerWriter.
//
// A transactional id lives in partition PartitionFor(id, n) of Topic (the
// same hash as group.PartitionFor) and is coordinated by that partition's
// leader. txn imports cluster, partition (types and errors) and kmsg, never
// protocol, zkcoord or logstore.
package txn
