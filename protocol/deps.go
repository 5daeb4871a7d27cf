package protocol

import (
	"context"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/group"
	"github.com/kafkazk/broker/partition"
	"github.com/kafkazk/broker/security"
	"github.com/kafkazk/broker/txn"
)

// Replicas is the broker's store of partition replicas. partition.Manager
// implements it; tests use fakes.
type Replicas interface {
	// Append validates records (one or more v2 record batches as received)
	// and appends them as leader of tp, assigning offsets. acks is the
	// produce request's acks (-1, 0 or 1); with -1 it checks
	// min.insync.replicas first. It does not wait for replication: see
	// WaitCommitted.
	Append(tp cluster.TopicPartition, records []byte, acks int16) (partition.AppendResult, error)
	// WaitCommitted blocks until the high watermark of tp passes lastOffset
	// (returns nil), the ISR falls below min.insync.replicas
	// (partition.ErrNotEnoughReplicasAfterAppend), this broker stops
	// leading at some point after leaderEpoch, the append's
	// (partition.ErrNotLeader, even if it leads again; a new epoch in
	// which it stays leader is not a loss) or ctx ends
	// (partition.ErrRequestTimedOut).
	WaitCommitted(ctx context.Context, tp cluster.TopicPartition, lastOffset int64, leaderEpoch int32) error
	// Read returns whole batches from req.FetchOffset, bounded by the high
	// watermark for consumers.
	Read(tp cluster.TopicPartition, req partition.ReadRequest) (partition.ReadResult, error)
	// ListOffset resolves a ListOffsets timestamp (partition.LatestTimestamp,
	// partition.EarliestTimestamp, partition.MaxTimestamp or a time in ms)
	// to an offset, the timestamp found (-1 for latest and earliest) and the
	// leader epoch, bounded as asker may see (the HW for consumers, the LEO
	// for other replica ids; partition.ErrOffsetNotAvailable per KIP-207).
	ListOffset(tp cluster.TopicPartition, timestamp int64, currentLeaderEpoch int32, asker partition.OffsetsAsker) (offset, ts int64, leaderEpoch int32, err error)
	// Changed returns a channel closed the next time a replica changes in
	// a way a fetch could see; long-polling fetches wait on it. A
	// follower's fetch (replica true) is woken by new records below a
	// leader's log end offset, a consumer's by new records below the high
	// watermark; both by any change of a replica's state.
	Changed(replica bool) <-chan struct{}
}

// Metadata is the broker's view of the cluster, for Metadata requests.
type Metadata interface {
	ClusterID() string
	// ControllerID is the broker id of the controller, or -1 if none.
	ControllerID() int32
	// Brokers lists live brokers sorted by id.
	Brokers() []cluster.Broker
	// Topics lists every topic sorted by name.
	Topics() []cluster.TopicInfo
	// Topic returns one topic, or false if it does not exist.
	Topic(name string) (cluster.TopicInfo, bool)
}

// PartitionLookup is a capability beside Metadata: whether a topic and one
// of its partitions exist, answered without copying the topic out as
// Topic does. A request for a partition this broker holds no replica of
// asks it (see unknownPartitionCode); with a Metadata that does not
// implement it, the server looks through Topic instead. MetadataCache
// implements it.
type PartitionLookup interface {
	// HasPartition reports whether tp's topic exists, and whether tp does.
	HasPartition(tp cluster.TopicPartition) (topicExists, partitionExists bool)
}

// CreateTopicRequest is one topic of a CreateTopics request, after defaults
// (num.partitions, default.replication.factor) have been applied unless an
// explicit Assignment is given.
type CreateTopicRequest struct {
	Name              string
	NumPartitions     int32             // -1 with Assignment set
	ReplicationFactor int16             // -1 with Assignment set
	Assignment        map[int32][]int32 // explicit replica assignment, or nil
	Configs           map[string]string // topic-level overrides
	ValidateOnly      bool
}

// Admin performs topic administration. Errors are cluster.Err* sentinels,
// possibly wrapped.
type Admin interface {
	CreateTopic(ctx context.Context, req CreateTopicRequest) error
	DeleteTopic(ctx context.Context, name string) error
	// TopicConfig returns every topic-level setting of the topic with its
	// effective value.
	TopicConfig(name string) ([]cluster.ConfigEntry, error)
}

// ProducerIDs hands out idempotent producer ids.
type ProducerIDs interface {
	// InitProducerID returns a fresh producer id with epoch 0.
	InitProducerID(ctx context.Context) (producerID int64, producerEpoch int16, err error)
}

// ControlPlane applies the controller's requests on this broker;
// cmd/broker implements it. The server has already refused a request from
// a deposed controller (older controller epoch) or for an earlier
// incarnation of this broker (older broker epoch) before calling, and
// calls LeaderAndIsr, StopReplica and UpdateMetadata one at a time.
type ControlPlane interface {
	// LeaderAndIsr makes this broker's replicas leaders or followers. The
	// map holds per-partition errors (partitions absent from it
	// succeeded); a non-nil error fails every partition.
	LeaderAndIsr(ctx context.Context, req cluster.LeaderAndIsrRequest) (map[cluster.TopicPartition]error, error)
	// StopReplica stops (and with DeletePartitions deletes) replicas, with
	// per-partition errors as for LeaderAndIsr (partition.ErrFencedLeaderEpoch
	// for a stale leader epoch).
	StopReplica(ctx context.Context, req cluster.StopReplicaRequest) (map[cluster.TopicPartition]error, error)
	// UpdateMetadata updates this broker's metadata cache.
	UpdateMetadata(ctx context.Context, req cluster.UpdateMetadataRequest) error
	// ControlledShutdown is served only by the controller
	// (cluster.ErrNotController otherwise). It moves leadership off
	// brokerID and returns the partitions it still leads; brokerEpoch is -1
	// when the request does not carry one.
	ControlledShutdown(ctx context.Context, brokerID int32, brokerEpoch int64) (remaining []cluster.TopicPartition, err error)
}

// LeaderEpochs serves OffsetForLeaderEpoch; partition.Manager implements it.
type LeaderEpochs interface {
	// OffsetForLeaderEpoch returns the largest leader epoch at or below
	// leaderEpoch in tp's log and the offset where it ends, after checking
	// currentLeaderEpoch (-1: no check) against the replica's epoch
	// (partition.ErrFencedLeaderEpoch, partition.ErrUnknownLeaderEpoch).
	OffsetForLeaderEpoch(tp cluster.TopicPartition, currentLeaderEpoch, leaderEpoch int32) (epoch int32, endOffset int64, err error)
}

// The topic tools are capabilities beside Admin and Replicas: a server
// serves (and advertises) CreatePartitions, AlterConfigs and
// IncrementalAlterConfigs only when its Admin implements PartitionAdmin or
// ConfigAdmin, and DeleteRecords and DescribeLogDirs only when its
// Replicas implements RecordDeleter or LogDirs.

// PartitionAdmin adds partitions to topics (CreatePartitions).
type PartitionAdmin interface {
	// CreatePartitions grows topic to count partitions with the topic's
	// replication factor. assignment, when not nil, lists the replicas of
	// each new partition in order. Errors are cluster.Err* sentinels
	// (ErrUnknownTopic, ErrInvalidPartitions, ErrInvalidReplicaAssignment,
	// ErrInvalidReplicationFactor), possibly wrapped.
	CreatePartitions(ctx context.Context, topic string, count int32, assignment [][]int32, validateOnly bool) error
}

// ConfigAdmin changes topic config overrides (AlterConfigs,
// IncrementalAlterConfigs).
type ConfigAdmin interface {
	// AlterTopicConfig replaces the overrides of topic with what alter
	// returns given the current ones (a map alter may modify), after
	// validating them (cluster.ErrInvalidConfig names the key), and
	// notifies every broker; an error from alter is returned as is.
	// Unknown topic: cluster.ErrUnknownTopic.
	AlterTopicConfig(ctx context.Context, topic string, alter func(current map[string]string) (map[string]string, error), validateOnly bool) error
}

// ClusterControl is a capability beside Admin: the controller's admin
// operations, served (and advertised) only when Config.Admin implements
// it. Each is answered by the controller only; another broker returns
// cluster.ErrNotController (the top-level NOT_CONTROLLER), as Kafka's.
type ClusterControl interface {
	// AlterPartitionReassignments starts the reassignment of each
	// partition in reqs to its target replicas, or cancels it for a nil
	// target, and returns each partition's outcome (nil: started), with
	// errors wrapping cluster.ErrInvalidReplicaAssignment,
	// ErrUnknownTopic or ErrNoReassignmentInProgress.
	AlterPartitionReassignments(ctx context.Context, reqs map[cluster.TopicPartition][]int32) (map[cluster.TopicPartition]error, error)
	// ListPartitionReassignments lists the partitions of tps (nil: all)
	// being reassigned; others are left out.
	ListPartitionReassignments(ctx context.Context, tps []cluster.TopicPartition) ([]cluster.PartitionReassignment, error)
	// ElectLeaders elects leaders of typ for tps (nil: all partitions) and
	// returns each partition's outcome (nil: elected), with errors
	// wrapping cluster.ErrUnknownTopic, ErrElectionNotNeeded,
	// ErrPreferredLeaderNotAvailable, ErrEligibleLeadersNotAvailable or
	// ErrTopicBeingDeleted.
	ElectLeaders(ctx context.Context, typ cluster.ElectionType, tps []cluster.TopicPartition) (map[cluster.TopicPartition]error, error)
}

// RecordDeleter serves DeleteRecords; partition.Manager implements it.
type RecordDeleter interface {
	// DeleteRecords moves the log start offset of tp, led here, to offset
	// (-1: the high watermark) and waits until every replica alive says is
	// alive has reached it, returning that low watermark. Errors:
	// partition.ErrNotLeader, ErrUnknownTopicOrPartition,
	// ErrOffsetOutOfRange (above the high watermark), ErrRequestTimedOut
	// (ctx ended first).
	DeleteRecords(ctx context.Context, tp cluster.TopicPartition, offset int64, alive func(brokerID int32) bool) (lowWatermark int64, err error)
}

// ReplicationQuota is the leader side of the replication throttle
// (KIP-73); partition.Manager implements it. Without it, no fetch is
// recorded against a quota.
type ReplicationQuota interface {
	// RecordLeaderReplication counts n bytes sent to a follower for
	// partitions whose read was partition.ReadResult.Throttled.
	RecordLeaderReplication(n int64)
}

// LogDirs serves DescribeLogDirs; partition.Manager implements it.
type LogDirs interface {
	// DescribeLogDirs lists this broker's log dirs with their replicas,
	// sorted by topic and partition within each dir.
	DescribeLogDirs() []partition.LogDirInfo
}

// Groups is the group coordinator (group.Coordinator implements it). Its
// errors are group.Err* sentinels, mapped in errors.go.
type Groups interface {
	// PartitionFor is the partition of __consumer_offsets holding groupID.
	PartitionFor(groupID string) int32
	JoinGroup(ctx context.Context, req group.JoinRequest) (group.JoinResult, error)
	SyncGroup(ctx context.Context, req group.SyncRequest) (group.SyncResult, error)
	Heartbeat(req group.HeartbeatRequest) error
	LeaveGroup(groupID string, members []group.LeaveMember) ([]error, error)
	CommitOffsets(ctx context.Context, req group.CommitRequest) (map[cluster.TopicPartition]error, error)
	// FetchOffsets returns committed offsets of tps (nil: all); partitions
	// without a commit are absent. With requireStable (OffsetFetch v7+,
	// KIP-447) a partition whose commit is not stable yet comes back with
	// Offset.Err set (group.ErrUnstableOffsetCommit).
	FetchOffsets(groupID string, tps []cluster.TopicPartition, requireStable bool) (map[cluster.TopicPartition]group.Offset, error)
	ListGroups() ([]group.GroupListing, error)
	DescribeGroup(groupID string) (group.GroupDescription, error)
	DeleteGroups(ctx context.Context, groupIDs []string) map[string]error
	// DeleteOffsets deletes a group's committed offsets of tps
	// (OffsetDelete): a group-level error, or one entry per partition.
	DeleteOffsets(ctx context.Context, groupID string, tps []cluster.TopicPartition) (map[cluster.TopicPartition]error, error)
}

// OffsetsTopicConfig is how __consumer_offsets is created on first use.
type OffsetsTopicConfig struct {
	Partitions        int32 // offsets.topic.num.partitions
	ReplicationFactor int16 // offsets.topic.replication.factor
	SegmentBytes      int64 // offsets.topic.segment.bytes
}

// The transaction keys (InitProducerId with a transactional id,
// AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit,
// DescribeTransactions, ListTransactions, FindCoordinator key type 1) are
// served and advertised only when Config.Transactions is set; the
// partition leader's side of transactions (WriteTxnMarkers,
// DescribeProducers, verified transactional produce) only when
// Config.Replicas implements TxnPartitions.

// Transactions is the transaction coordinator (txn.Coordinator implements
// it). Its errors are txn.Err* sentinels, mapped in errors.go.
type Transactions interface {
	// PartitionFor is the partition of __transaction_state holding
	// transactionalID.
	PartitionFor(transactionalID string) int32
	InitProducerID(ctx context.Context, req txn.InitRequest) (producerID int64, producerEpoch int16, err error)
	// AddPartitions adds tps to the producer's transaction: per-partition
	// errors, or one error for all.
	AddPartitions(ctx context.Context, transactionalID string, producerID int64, producerEpoch int16, tps []cluster.TopicPartition) (map[cluster.TopicPartition]error, error)
	// VerifyPartitions (AddPartitionsToTxn v4 VerifyOnly, KIP-890): nil
	// for each partition in the producer's ongoing transaction,
	// txn.ErrInvalidTxnState for the others; an error applies to all.
	VerifyPartitions(ctx context.Context, transactionalID string, producerID int64, producerEpoch int16, tps []cluster.TopicPartition) (map[cluster.TopicPartition]error, error)
	AddOffsets(ctx context.Context, transactionalID string, producerID int64, producerEpoch int16, groupID string) error
	EndTxn(ctx context.Context, transactionalID string, producerID int64, producerEpoch int16, commit bool) error
	// ListTransactions lists the transactional ids coordinated here whose
	// state is one of states and producer id one of producerIDs (empty:
	// any).
	ListTransactions(states []string, producerIDs []int64) ([]txn.Listing, error)
	DescribeTransactions(ids []string) []txn.Description
}

// WakeBatcher is the capability of Replicas to collect the wake-ups of
// long-polling fetches that a Produce's appends owe and send them once,
// after the request's last append (partition.Manager implements it):
// AppendWith is Replicas.Append with options, opts.Wakes collecting.
type WakeBatcher interface {
	AppendWith(tp cluster.TopicPartition, records []byte, opts partition.AppendOptions) (partition.AppendResult, error)
	Wake(ws *partition.Wakes)
}

var _ WakeBatcher = (*partition.Manager)(nil)

// TxnPartitions is the partition leader's side of transactions, a
// capability beside Replicas (partition.Manager implements it).
type TxnPartitions interface {
	// WriteTxnMarker appends a COMMIT or ABORT control batch as leader of
	// tp (min.insync.replicas checked as for acks -1); the caller waits
	// for it with Replicas.WaitCommitted.
	WriteTxnMarker(tp cluster.TopicPartition, mk partition.TxnMarker) (partition.AppendResult, error)
	// AppendWith is Replicas.Append with options (the verification guard
	// of a transactional batch).
	AppendWith(tp cluster.TopicPartition, records []byte, opts partition.AppendOptions) (partition.AppendResult, error)
	// TxnVerificationGuard returns (0, false, nil) when producerID has an
	// ongoing transaction on tp, else a fresh guard to verify with the
	// coordinator and append with.
	TxnVerificationGuard(tp cluster.TopicPartition, producerID int64) (guard uint64, needed bool, err error)
	// DescribeProducers lists the active producers of tp, led here.
	DescribeProducers(tp cluster.TopicPartition) ([]partition.ProducerInfo, error)
}

// TxnGroups is the group coordinator's side of transactions, a capability
// beside Groups (group.Coordinator implements it): TxnOffsetCommit is
// served only when Groups implements it, and WriteTxnMarkers completes
// the transactional offsets of a __consumer_offsets partition through it.
type TxnGroups interface {
	// CommitTxnOffsets writes the offsets as pending in the producer's
	// transaction: per-partition errors, or one error for all.
	CommitTxnOffsets(ctx context.Context, req group.TxnCommitRequest) (map[cluster.TopicPartition]error, error)
	// CompleteTxn makes the producer's pending offsets of partition p of
	// __consumer_offsets appended below markerOffset committed (commit)
	// or drops them, once its marker there, at markerOffset, is
	// committed.
	CompleteTxn(p int32, producerID int64, markerOffset int64, commit bool)
}

// TxnVerifier asks another broker's transaction coordinator whether
// partitions are in a producer's transaction (AddPartitionsToTxn v4 with
// VerifyOnly); BrokerClient implements it. The answer is as
// Transactions.VerifyPartitions'.
type TxnVerifier interface {
	VerifyPartitionsInTxn(ctx context.Context, to cluster.Broker, transactionalID string, producerID int64, producerEpoch int16, tps []cluster.TopicPartition) (map[cluster.TopicPartition]error, error)
}

// TransactionTopicConfig is how __transaction_state is created on first
// use (FindCoordinator key type 1).
type TransactionTopicConfig struct {
	Partitions        int32 // transaction.state.log.num.partitions
	ReplicationFactor int16 // transaction.state.log.replication.factor
	MinISR            int32 // transaction.state.log.min.isr
	SegmentBytes      int64 // transaction.state.log.segment.bytes
}

// Authorizer decides ACL checks; *security.Authorizer implements it.
// Config.Authorizer nil means no authorizer.class.name: everything is
// allowed, as Kafka without an authorizer. host is the client's IP
// address; name is a literal resource name (security.ClusterResourceName
// for the cluster).
type Authorizer interface {
	Authorize(p security.KafkaPrincipal, host string, op security.Operation, typ security.ResourceType, name string) bool
	// AuthorizeByResourceType is whether p may perform op on at least one
	// resource of typ (KIP-679's idempotent producer check).
	AuthorizeByResourceType(p security.KafkaPrincipal, host string, op security.Operation, typ security.ResourceType) bool
	// ACLs returns the bindings that pass filter (DescribeAcls).
	ACLs(filter security.ACLBindingFilter) []security.ACLBinding
}

// ACLAdmin changes ACLs in ZooKeeper (zkcoord implements it; every
// broker's Authorizer cache follows through the change notifications).
// CreateAcls and DeleteAcls are served only with both Config.ACLAdmin and
// Config.Authorizer.
type ACLAdmin interface {
	// CreateACLs adds each binding (validated with
	// security.ValidateACLBinding first by the caller); one error per
	// binding, nil for created.
	CreateACLs(ctx context.Context, bindings []security.ACLBinding) []error
	// DeleteACLs deletes what each filter matches; per filter the deleted
	// bindings or an error.
	DeleteACLs(ctx context.Context, filters []security.ACLBindingFilter) ([][]security.ACLBinding, []error)
}

// ScramAdmin stores SCRAM credentials under /config/users (zkcoord
// implements it). DescribeUserScramCredentials and
// AlterUserScramCredentials are served only with Config.ScramAdmin.
type ScramAdmin interface {
	// DescribeScramUsers returns the mechanisms and iterations of each of
	// users (nil: all users with a credential); a user without any
	// credential is absent.
	DescribeScramUsers(ctx context.Context, users []string) (map[string][]ScramCredentialInfo, error)
	// AlterScramUsers applies the upserts and deletions (validated by the
	// caller), one write per user: the error of each user's write, nil for
	// done.
	AlterScramUsers(ctx context.Context, upserts []ScramUpsert, deletions []ScramDeletion) map[string]error
}

// ScramCredentialInfo is one mechanism a user has a credential for.
type ScramCredentialInfo struct {
	Mechanism  security.ScramMechanism
	Iterations int32
}

// ScramUpsert sets one user's credential for one mechanism, from the salt
// and salted password the client computed (Kafka's
// AlterUserScramCredentials never carries the password).
type ScramUpsert struct {
	User           string
	Mechanism      security.ScramMechanism
	Iterations     int32
	Salt           []byte
	SaltedPassword []byte
}

// ScramDeletion removes one user's credential for one mechanism.
type ScramDeletion struct {
	User      string
	Mechanism security.ScramMechanism
}
