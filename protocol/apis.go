package protocol

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/security"
)

const (
	produceKey            int16 = 0
	apiVersionsKey        int16 = 18
	controlledShutdownKey int16 = 7
)

// apiRange is one row of the version table.
type apiRange struct {
	key      int16
	min, max int16
	// needs is what the server must be configured with to serve the key.
	needs capability
}

// capability is a dependency a row of the table needs in Config.
type capability uint8

const (
	always              capability = iota // served by every server
	needsControlPlane                     // Config.ControlPlane is set
	needsLeaderEpochs                     // Config.LeaderEpochs is set
	needsGroups                           // Config.Groups is set
	needsPartitionAdmin                   // Config.Admin implements PartitionAdmin
	needsConfigAdmin                      // Config.Admin implements ConfigAdmin
	needsRecordDeleter                    // Config.Replicas implements RecordDeleter
	needsLogDirs                          // Config.Replicas implements LogDirs
	needsClusterControl                   // Config.Admin implements ClusterControl
	needsCoordinator                      // Config.Groups or Config.Transactions is set
	needsTransactions                     // Config.Transactions is set
	needsTxnPartitions                    // Config.Replicas implements TxnPartitions
	needsTxnGroups                        // Config.Transactions is set and Config.Groups implements TxnGroups
	needsScramAdmin                       // Config.ScramAdmin is set
)

// supportedAPIs is the one table of what this package can serve. A
// Server serves (and ApiVersions advertises) exactly the rows whose
// capability its Config provides (Server.apis); parseRequest refuses
// everything else. Sorted by key.
//
// Why these ranges (reference/clients.md):
//   - Produce from 3: v3 is the first with record batches (magic 2); no
//     client in our matrix sends less. Up to 9: v10+ only adds tags we
//     would not fill, v13 addresses topics by id.
//   - Fetch from 4 (record batches, isolation level) to 12: v13+ uses topic
//     ids. kafka-go needs a max of at least 10.
//   - ListOffsets 0-7: kafka-go's Reader sends v1; v8+ is tiered storage.
//   - Metadata 0-9: v10+ returns topic ids, which we do not have.
//   - The controller's requests stop before topic ids and KRaft:
//     LeaderAndIsr 0-4 (v5 adds topic ids and the request type),
//     StopReplica 0-3 (v4 is KRaft's), UpdateMetadata 0-6 (v7 adds topic
//     ids). ControlledShutdown 0-3 is the whole range (v0 has a header
//     without a client id, handled in parseRequest). OffsetForLeaderEpoch
//     0-4 is the whole range.
//   - ApiVersions 0-3: v4 only changes the error behaviour; kgo asks v5,
//     gets UNSUPPORTED_VERSION and retries at 3.
//   - CreateTopics 0-7, DeleteTopics 0-6, InitProducerId 0-4,
//     DescribeConfigs 0-4: the versions up to which nothing in the request
//     needs features we lack (InitProducerId v5 only adds KIP-890 part 2's
//     TRANSACTION_ABORTABLE).
//   - The transaction keys (Config.Transactions) stop before KIP-890 part
//     2 (TRANSACTION_ABORTABLE, epoch bump per transaction):
//     AddPartitionsToTxn 0-4 (v4 is the brokers' batched form with
//     VerifyOnly, KIP-890 part 1; v5 adds TRANSACTION_ABORTABLE),
//     AddOffsetsToTxn 0-3 and EndTxn 0-3 (v4 TRANSACTION_ABORTABLE, EndTxn
//     v5 the epoch bump), TxnOffsetCommit 0-3 (v3 is KIP-447's group
//     metadata, v4 TRANSACTION_ABORTABLE, v6 topic ids),
//     DescribeTransactions 0 and ListTransactions 0 (v1 is KIP-994's
//     duration filter, v2 a transactional id pattern). The partition
//     leader's keys (Config.Replicas implements TxnPartitions):
//     WriteTxnMarkers 0-1 (v2 carries KIP-890 part 2's transaction
//     version) and DescribeProducers 0, the whole range.
//   - The group keys (Config.Groups) stop before topic ids and KIP-848's
//     consumer protocol: OffsetCommit 0-9 and OffsetFetch 0-9 (v10 uses
//     topic ids; OffsetFetch v8+ is kgo's multi-group layout),
//     FindCoordinator 0-4 (v4 batches keys; v6 is share groups), JoinGroup
//     0-9 (MEMBER_ID_REQUIRED from v4), Heartbeat 0-4, LeaveGroup 0-5,
//     SyncGroup 0-5, DescribeGroups 0-5, ListGroups 0-4 (v5 filters by
//     group type), DeleteGroups 0-2, OffsetDelete 0 (the only version).
//     kafka-go's Reader needs FindCoordinator 0, JoinGroup 1-2,
//     SyncGroup/Heartbeat/LeaveGroup 0, OffsetCommit 2 and OffsetFetch 1.
//   - The topic tools: DeleteRecords 0-2, AlterConfigs 0-1 (v2 only adds
//     flexible encoding), DescribeLogDirs 0-2 (v3 adds a top-level error
//     code, v4 dir sizes), CreatePartitions 0-3, IncrementalAlterConfigs
//     0-1 (the whole range), DescribeCluster 0-1 (v2 lists fenced brokers,
//     a KRaft notion).
//   - The ACL keys DescribeAcls, CreateAcls and DeleteAcls 0-3 (v1 adds
//     prefixed patterns, v2 is flexible, v3 USER resources) are always
//     advertised, as Kafka's are, and answer SECURITY_DISABLED without
//     Config.Authorizer (and, for writes, Config.ACLAdmin);
//     DescribeUserScramCredentials 0 and AlterUserScramCredentials 0 (the
//     whole ranges) only with Config.ScramAdmin.
//   - The controller's admin operations (Config.Admin implements
//     ClusterControl): ElectLeaders 0-2 (the whole range: v1 adds the
//     election type, v2 is flexible), AlterPartitionReassignments 0 (v1 is
//     KIP-860's allowReplicationFactorChange, of Kafka 4.0) and
//     ListPartitionReassignments 0 (the whole range), as Kafka 3.x serves
//     them; kadm and kafka-reassign-partitions.sh use these.
var supportedAPIs = []apiRange{
	{key: 0, min: 3, max: 9},                              // Produce
	{key: 1, min: 4, max: 12},                             // Fetch
	{key: 2, min: 0, max: 7},                              // ListOffsets
	{key: 3, min: 0, max: 9},                              // Metadata
	{key: 4, min: 0, max: 4, needs: needsControlPlane},    // LeaderAndIsr
	{key: 5, min: 0, max: 3, needs: needsControlPlane},    // StopReplica
	{key: 6, min: 0, max: 6, needs: needsControlPlane},    // UpdateMetadata
	{key: 7, min: 0, max: 3, needs: needsControlPlane},    // ControlledShutdown
	{key: 8, min: 0, max: 9, needs: needsGroups},          // OffsetCommit
	{key: 9, min: 0, max: 9, needs: needsGroups},          // OffsetFetch
	{key: 10, min: 0, max: 4, needs: needsCoordinator},    // FindCoordinator
	{key: 11, min: 0, max: 9, needs: needsGroups},         // JoinGroup
	{key: 12, min: 0, max: 4, needs: needsGroups},         // Heartbeat
	{key: 13, min: 0, max: 5, needs: needsGroups},         // LeaveGroup
	{key: 14, min: 0, max: 5, needs: needsGroups},         // SyncGroup
	{key: 15, min: 0, max: 5, needs: needsGroups},         // DescribeGroups
	{key: 16, min: 0, max: 4, needs: needsGroups},         // ListGroups
	{key: 17, min: 0, max: 1},                             // SaslHandshake (17_sasl_handshake.go: served before dispatch)
	{key: 18, min: 0, max: 3},                             // ApiVersions
	{key: 19, min: 0, max: 7},                             // CreateTopics
	{key: 20, min: 0, max: 6},                             // DeleteTopics
	{key: 21, min: 0, max: 2, needs: needsRecordDeleter},  // DeleteRecords
	{key: 22, min: 0, max: 4},                             // InitProducerId
	{key: 23, min: 0, max: 4, needs: needsLeaderEpochs},   // OffsetForLeaderEpoch
	{key: 24, min: 0, max: 4, needs: needsTransactions},   // AddPartitionsToTxn
	{key: 25, min: 0, max: 3, needs: needsTransactions},   // AddOffsetsToTxn
	{key: 26, min: 0, max: 3, needs: needsTransactions},   // EndTxn
	{key: 27, min: 0, max: 1, needs: needsTxnPartitions},  // WriteTxnMarkers
	{key: 28, min: 0, max: 3, needs: needsTxnGroups},      // TxnOffsetCommit
	{key: 29, min: 0, max: 3},                             // DescribeAcls
	{key: 30, min: 0, max: 3},                             // CreateAcls
	{key: 31, min: 0, max: 3},                             // DeleteAcls
	{key: 32, min: 0, max: 4},                             // DescribeConfigs
	{key: 33, min: 0, max: 1, needs: needsConfigAdmin},    // AlterConfigs
	{key: 35, min: 0, max: 2, needs: needsLogDirs},        // DescribeLogDirs
	{key: 36, min: 0, max: 2},                             // SaslAuthenticate (served before dispatch)
	{key: 37, min: 0, max: 3, needs: needsPartitionAdmin}, // CreatePartitions
	{key: 42, min: 0, max: 2, needs: needsGroups},         // DeleteGroups
	{key: 43, min: 0, max: 2, needs: needsClusterControl}, // ElectLeaders
	{key: 44, min: 0, max: 1, needs: needsConfigAdmin},    // IncrementalAlterConfigs
	{key: 45, min: 0, max: 0, needs: needsClusterControl}, // AlterPartitionReassignments
	{key: 46, min: 0, max: 0, needs: needsClusterControl}, // ListPartitionReassignments
	{key: 47, min: 0, max: 0, needs: needsGroups},         // OffsetDelete
	{key: 50, min: 0, max: 0, needs: needsScramAdmin},     // DescribeUserScramCredentials
	{key: 51, min: 0, max: 0, needs: needsScramAdmin},     // AlterUserScramCredentials
	{key: 60, min: 0, max: 1},                             // DescribeCluster
	{key: 61, min: 0, max: 0, needs: needsTxnPartitions},  // DescribeProducers
	{key: 65, min: 0, max: 0, needs: needsTransactions},   // DescribeTransactions
	{key: 66, min: 0, max: 0, needs: needsTransactions},   // ListTransactions
}

// servedAPIs returns the rows of supportedAPIs that cfg can serve.
func servedAPIs(cfg *Config) []apiRange {
	var out []apiRange
	for _, r := range supportedAPIs {
		switch {
		case r.needs == needsControlPlane && cfg.ControlPlane == nil:
		case r.needs == needsLeaderEpochs && cfg.LeaderEpochs == nil:
		case r.needs == needsGroups && cfg.Groups == nil:
		case r.needs == needsPartitionAdmin && !implements[PartitionAdmin](cfg.Admin):
		case r.needs == needsConfigAdmin && !implements[ConfigAdmin](cfg.Admin):
		case r.needs == needsRecordDeleter && !implements[RecordDeleter](cfg.Replicas):
		case r.needs == needsLogDirs && !implements[LogDirs](cfg.Replicas):
		case r.needs == needsClusterControl && !implements[ClusterControl](cfg.Admin):
		case r.needs == needsCoordinator && cfg.Groups == nil && cfg.Transactions == nil:
		case r.needs == needsTransactions && cfg.Transactions == nil:
		case r.needs == needsTxnPartitions && !implements[TxnPartitions](cfg.Replicas):
		case r.needs == needsTxnGroups && (cfg.Transactions == nil || !implements[TxnGroups](cfg.Groups)):
		case r.needs == needsScramAdmin && cfg.ScramAdmin == nil:
		default:
			out = append(out, r)
		}
	}
	return out
}

// implements reports whether v implements the capability interface T.
func implements[T any](v any) bool {
	_, ok := v.(T)
	return ok
}

// findVersions returns the version range of key in apis, or false if the
// key is not served.
func findVersions(apis []apiRange, key int16) (min, max int16, ok bool) {
	for _, r := range apis {
		if r.key == key {
			return r.min, r.max, true
		}
	}
	return 0, 0, false
}

// reqContext is what a handler knows of the request beyond its body.
type reqContext struct {
	listener      string
	clientID      string
	correlationID int32
	remoteAddr    string
	// principal is who the connection authenticated as: User:ANONYMOUS
	// until authenticated (and on PLAINTEXT), else from the TLS client
	// certificate or the SASL exchange.
	principal security.KafkaPrincipal
	// host is the client's IP address, as Kafka's ACL host matching uses.
	host string
	// securityProtocol is the listener's: PLAINTEXT, SSL, SASL_PLAINTEXT
	// or SASL_SSL.
	securityProtocol string
	frame            *requestFrame // see releaseFrame
	// sizeHint is the size of the connection's previous response, for a
	// handler sizing a buffer it fills (Fetch's records).
	sizeHint int
	// encodeBuf is a pooled buffer the response aliases (Fetch's
	// records); it goes back to the pools once the response is encoded.
	encodeBuf []byte
	// complete, if a handler sets it, finishes the response the handler
	// returned (an acks=all Produce's wait for replication); the
	// connection runs it off its read loop and sends the response when it
	// returns (see conn). It must give up when ctx ends.
	complete func(ctx context.Context)
}

// encoded gives back rc.encodeBuf once the response is encoded.
func (rc *reqContext) encoded() {
	putBuf(rc.encodeBuf)
	rc.encodeBuf = nil
}

// dispatch runs the handler of req's key. A nil response with a nil error
// means no response is sent (acks=0 produce); an error closes the
// connection.
//
// A handler that finishes its response later (acks=all Produce) sets
// rc.complete; the request's observed latency then ends when complete does.
func (s *Server) dispatch(ctx context.Context, rc *reqContext, req kmsg.Request) (kmsg.Response, error) {
	o := s.cfg.RequestObserver
	if o == nil {
		return s.handle(ctx, rc, req)
	}
	o.RequestStart(req.Key())
	start := time.Now()
	resp, err := s.handle(ctx, rc, req)
	if complete := rc.complete; complete != nil && err == nil && resp != nil {
		rc.complete = func(ctx context.Context) {
			complete(ctx)
			observeEnd(o, req.Key(), start)
		}
	} else {
		observeEnd(o, req.Key(), start)
	}
	return resp, err
}

// handle runs the handler of req's key.
func (s *Server) handle(ctx context.Context, rc *reqContext, req kmsg.Request) (kmsg.Response, error) {
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		return s.handleProduce(ctx, rc, r)
	case *kmsg.FetchRequest:
		return s.handleFetch(ctx, rc, r)
	case *kmsg.ListOffsetsRequest:
		return s.handleListOffsets(ctx, rc, r)
	case *kmsg.MetadataRequest:
		return s.handleMetadata(ctx, rc, r)
	case *kmsg.ApiVersionsRequest:
		return s.handleApiVersions(ctx, rc, r)
	case *kmsg.CreateTopicsRequest:
		return s.handleCreateTopics(ctx, rc, r)
	case *kmsg.DeleteTopicsRequest:
		return s.handleDeleteTopics(ctx, rc, r)
	case *kmsg.InitProducerIDRequest:
		return s.handleInitProducerID(ctx, rc, r)
	case *kmsg.DescribeConfigsRequest:
		return s.handleDescribeConfigs(ctx, rc, r)
	case *kmsg.CreatePartitionsRequest:
		return s.handleCreatePartitions(ctx, rc, r)
	case *kmsg.DeleteRecordsRequest:
		return s.handleDeleteRecords(ctx, rc, r)
	case *kmsg.IncrementalAlterConfigsRequest:
		return s.handleIncrementalAlterConfigs(ctx, rc, r)
	case *kmsg.AlterConfigsRequest:
		return s.handleAlterConfigs(ctx, rc, r)
	case *kmsg.DescribeClusterRequest:
		return s.handleDescribeCluster(ctx, rc, r)
	case *kmsg.DescribeLogDirsRequest:
		return s.handleDescribeLogDirs(ctx, rc, r)
	case *kmsg.LeaderAndISRRequest:
		return s.handleLeaderAndIsr(ctx, rc, r)
	case *kmsg.StopReplicaRequest:
		return s.handleStopReplica(ctx, rc, r)
	case *kmsg.UpdateMetadataRequest:
		return s.handleUpdateMetadata(ctx, rc, r)
	case *kmsg.ControlledShutdownRequest:
		return s.handleControlledShutdown(ctx, rc, r)
	case *kmsg.OffsetForLeaderEpochRequest:
		return s.handleOffsetForLeaderEpoch(ctx, rc, r)
	case *kmsg.OffsetCommitRequest:
		return s.handleOffsetCommit(ctx, rc, r)
	case *kmsg.OffsetFetchRequest:
		return s.handleOffsetFetch(ctx, rc, r)
	case *kmsg.FindCoordinatorRequest:
		return s.handleFindCoordinator(ctx, rc, r)
	case *kmsg.JoinGroupRequest:
		return s.handleJoinGroup(ctx, rc, r)
	case *kmsg.HeartbeatRequest:
		return s.handleHeartbeat(ctx, rc, r)
	case *kmsg.LeaveGroupRequest:
		return s.handleLeaveGroup(ctx, rc, r)
	case *kmsg.SyncGroupRequest:
		return s.handleSyncGroup(ctx, rc, r)
	case *kmsg.DescribeGroupsRequest:
		return s.handleDescribeGroups(ctx, rc, r)
	case *kmsg.ListGroupsRequest:
		return s.handleListGroups(ctx, rc, r)
	case *kmsg.DeleteGroupsRequest:
		return s.handleDeleteGroups(ctx, rc, r)
	case *kmsg.OffsetDeleteRequest:
		return s.handleOffsetDelete(ctx, rc, r)
	}
	return s.handleTxnKeys(ctx, rc, req)
}

// handleTxnKeys runs the handlers of the transaction keys.
func (s *Server) handleTxnKeys(ctx context.Context, rc *reqContext, req kmsg.Request) (kmsg.Response, error) {
	switch r := req.(type) {
	case *kmsg.AddPartitionsToTxnRequest:
		return s.handleAddPartitionsToTxn(ctx, rc, r)
	case *kmsg.AddOffsetsToTxnRequest:
		return s.handleAddOffsetsToTxn(ctx, rc, r)
	case *kmsg.EndTxnRequest:
		return s.handleEndTxn(ctx, rc, r)
	case *kmsg.WriteTxnMarkersRequest:
		return s.handleWriteTxnMarkers(ctx, rc, r)
	case *kmsg.TxnOffsetCommitRequest:
		return s.handleTxnOffsetCommit(ctx, rc, r)
	case *kmsg.DescribeProducersRequest:
		return s.handleDescribeProducers(ctx, rc, r)
	case *kmsg.DescribeTransactionsRequest:
		return s.handleDescribeTransactions(ctx, rc, r)
	case *kmsg.ListTransactionsRequest:
		return s.handleListTransactions(ctx, rc, r)
	}
	return s.handleClusterControl(ctx, rc, req)
}

// handleClusterControl runs the handlers of the controller's admin
// operations (ClusterControl).
func (s *Server) handleClusterControl(ctx context.Context, rc *reqContext, req kmsg.Request) (kmsg.Response, error) {
	switch r := req.(type) {
	case *kmsg.ElectLeadersRequest:
		return s.handleElectLeaders(ctx, rc, r)
	case *kmsg.AlterPartitionAssignmentsRequest:
		return s.handleAlterPartitionReassignments(ctx, rc, r)
	case *kmsg.ListPartitionReassignmentsRequest:
		return s.handleListPartitionReassignments(ctx, rc, r)
	}
	if resp, ok, err := s.handleSecurityKeys(ctx, rc, req); ok {
		return resp, err
	}
	// parseRequest only builds requests for keys in supportedAPIs, so this
	// is a table without a handler: a programming error.
	panic(fmt.Sprintf("protocol: no handler for api key %d", req.Key()))
}
