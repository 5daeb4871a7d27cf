package protocol

// Authorization (issue 14): the one set of helpers every handler asks,
// modelled on Kafka's AuthHelper.
//
//   - Config.Authorizer nil allows everything, as Kafka without
//     authorizer.class.name; no handler checks for nil itself.
//   - Every check is of a literal resource name with the request's
//     principal and host (reqContext): authorize for one resource,
//     authorizeCluster for kafka-cluster, filterAuthorized for the many
//     names of one request (each distinct name asked once, as Kafka's
//     filterByAuthorized counts references), authorizeByResourceType for
//     KIP-679, authorizedOperations for the bit fields of Metadata,
//     DescribeGroups and DescribeCluster.
//   - A denial logs one Info line (Kafka's kafka.authorizer.logger logs
//     denials at INFO): principal, operation, resource, host and
//     remote_addr. Checks Kafka makes with logIfDenied=false (a
//     Metadata request for all topics, the Create on the cluster before
//     per-topic Create, ListGroups' filter) pass quiet and log nothing.

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/security"
)

// errClusterAuthorizationFailed fails a whole request whose cluster
// check failed (Kafka's ClusterAuthorizationException).
var errClusterAuthorizationFailed = kerr.ClusterAuthorizationFailed

// authzLog says whether a denial is logged.
type authzLog bool

const (
	logDenied authzLog = true
	quiet     authzLog = false
)

// authorize reports whether rc's principal may perform op on the literal
// resource (typ, name), logging a denial.
func (s *Server) authorize(rc *reqContext, op security.Operation, typ security.ResourceType, name string) bool {
	return s.authorizeLog(rc, op, typ, name, logDenied)
}

// authorizeLog is authorize with the choice of logging a denial.
func (s *Server) authorizeLog(rc *reqContext, op security.Operation, typ security.ResourceType, name string, l authzLog) bool {
	a := s.cfg.Authorizer
	if a == nil {
		return true
	}
	if a.Authorize(rc.principal, rc.host, op, typ, name) {
		return true
	}
	if l {
		s.logDenied(rc, op, typ, name)
	}
	return false
}

// authorizeCluster is authorize on the cluster resource.
func (s *Server) authorizeCluster(rc *reqContext, op security.Operation) bool {
	return s.authorize(rc, op, security.ResourceCluster, security.ClusterResourceName)
}

// authorizeByResourceType reports whether rc's principal may perform op
// on at least one resource of typ (KIP-679), logging a denial.
func (s *Server) authorizeByResourceType(rc *reqContext, op security.Operation, typ security.ResourceType) bool {
	a := s.cfg.Authorizer
	if a == nil {
		return true
	}
	if a.AuthorizeByResourceType(rc.principal, rc.host, op, typ) {
		return true
	}
	s.logDenied(rc, op, typ, "")
	return false
}

// filterAuthorized returns a check of op on resources of typ for rc's
// principal that asks the Authorizer (and logs a denial) at most once per
// name, as Kafka's filterByAuthorized does for the names of one request.
// Not safe for concurrent use; one per request.
func (s *Server) filterAuthorized(rc *reqContext, op security.Operation, typ security.ResourceType, l authzLog) func(name string) bool {
	if s.cfg.Authorizer == nil {
		return func(string) bool { return true }
	}
	seen := map[string]bool{}
	return func(name string) bool {
		ok, done := seen[name]
		if !done {
			ok = s.authorizeLog(rc, op, typ, name, l)
			seen[name] = ok
		}
		return ok
	}
}

// supportedOperations are the operations Kafka's AclEntry.supportedOperations
// lists per resource type, for the authorized-operations bit fields.
var supportedOperations = map[security.ResourceType][]security.Operation{
	security.ResourceTopic: {security.OpRead, security.OpWrite, security.OpCreate, security.OpDescribe,
		security.OpDelete, security.OpAlter, security.OpDescribeConfigs, security.OpAlterConfigs},
	security.ResourceGroup: {security.OpRead, security.OpDescribe, security.OpDelete},
	security.ResourceCluster: {security.OpCreate, security.OpClusterAction, security.OpDescribeConfigs,
		security.OpAlterConfigs, security.OpIdempotentWrite, security.OpAlter, security.OpDescribe},
	security.ResourceTransactionalID: {security.OpDescribe, security.OpWrite},
}

// authorizedOperations is Kafka's authorizedOperations: a bit field with
// bit 1<<op set for each supported operation on (typ, name) that rc's
// principal may perform (all of them without an Authorizer). Nothing is
// logged.
func (s *Server) authorizedOperations(rc *reqContext, typ security.ResourceType, name string) int32 {
	var bits int32
	for _, op := range supportedOperations[typ] {
		if s.authorizeLog(rc, op, typ, name, quiet) {
			bits |= 1 << uint(op)
		}
	}
	return bits
}

// logDenied is the audit line of a denial. An empty name is a check by
// resource type (KIP-679).
func (s *Server) logDenied(rc *reqContext, op security.Operation, typ security.ResourceType, name string) {
	e := s.log.Info().Str("principal", rc.principal.String()).Str("operation", op.String()).
		Str("resource_type", typ.String()).Str("host", rc.host)
	if name != "" {
		e = e.Str("resource", name)
	}
	requestEvent(e, rc).Str("client_id", rc.clientID).Msg("authorization denied")
}

// The texts of the authorization errors, for the responses that carry a
// message.
var (
	errTopicAuthorization           = errors.New("topic authorization failed")
	errTransactionalIDAuthorization = errors.New("transactional id authorization failed")
)

// mayCreateTopic is Kafka's check before creating topic for a request
// that did not ask for it explicitly (auto.create.topics.enable): Create
// on the cluster, asked quietly, else Create on the topic.
func (s *Server) mayCreateTopic(rc *reqContext, topic string) bool {
	return s.authorizeLog(rc, security.OpCreate, security.ResourceCluster, security.ClusterResourceName, quiet) ||
		s.authorize(rc, security.OpCreate, security.ResourceTopic, topic)
}

// mayWriteIdempotently is KIP-679's check for an idempotent producer's
// InitProducerId: IdempotentWrite on the cluster (a denial not logged,
// as Kafka's), else Write on at least one topic.
func (s *Server) mayWriteIdempotently(rc *reqContext) bool {
	return s.authorizeLog(rc, security.OpIdempotentWrite, security.ResourceCluster, security.ClusterResourceName, quiet) ||
		s.authorizeByResourceType(rc, security.OpWrite, security.ResourceTopic)
}

// mayWriteTxnMarkers is WriteTxnMarkers' check: Alter on the cluster
// (asked quietly), else ClusterAction.
func (s *Server) mayWriteTxnMarkers(rc *reqContext) bool {
	return s.authorizeLog(rc, security.OpAlter, security.ResourceCluster, security.ClusterResourceName, quiet) ||
		s.authorizeCluster(rc, security.OpClusterAction)
}

// writeTxnMarkersRefused answers every partition of every marker with
// CLUSTER_AUTHORIZATION_FAILED, as Kafka's getErrorResponse.
func writeTxnMarkersRefused(req *kmsg.WriteTxnMarkersRequest, resp *kmsg.WriteTxnMarkersResponse) *kmsg.WriteTxnMarkersResponse {
	resp.Markers = make([]kmsg.WriteTxnMarkersResponseMarker, 0, len(req.Markers))
	for _, m := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		for _, t := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition, rp.ErrorCode = p, kerr.ClusterAuthorizationFailed.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return resp
}

// txnOffsetCommitRefusal is the code every partition of a TxnOffsetCommit
// answers when the request is refused as a whole: Write on the
// transactional id, then Read on the group. 0 when both pass.
func (s *Server) txnOffsetCommitRefusal(rc *reqContext, req *kmsg.TxnOffsetCommitRequest) int16 {
	if !s.authorize(rc, security.OpWrite, security.ResourceTransactionalID, req.TransactionalID) {
		return kerr.TransactionalIDAuthorizationFailed.Code
	}
	if !s.authorize(rc, security.OpRead, security.ResourceGroup, req.Group) {
		return kerr.GroupAuthorizationFailed.Code
	}
	return 0
}

// configRefusal is the check of DescribeConfigs, AlterConfigs and
// IncrementalAlterConfigs on one config resource: op on the cluster for
// BROKER and BROKER_LOGGER (CLUSTER_AUTHORIZATION_FAILED), on the topic
// for TOPIC (TOPIC_AUTHORIZATION_FAILED). It returns the refusal's code,
// or 0; other resource types are left to the handler, which refuses
// them as invalid.
func (s *Server) configRefusal(rc *reqContext, op security.Operation, typ kmsg.ConfigResourceType, name string) int16 {
	switch typ {
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
		if !s.authorizeCluster(rc, op) {
			return kerr.ClusterAuthorizationFailed.Code
		}
	case kmsg.ConfigResourceTypeTopic:
		if !s.authorize(rc, op, security.ResourceTopic, name) {
			return kerr.TopicAuthorizationFailed.Code
		}
	}
	return 0
}

// codeMessage is Kafka's default message of an error code, for a refusal
// that carries one.
func codeMessage(code int16) *string {
	if ke, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		return &ke.Message
	}
	return nil
}

// handleSecurityKeys runs the handlers of the ACL and SCRAM admin keys;
// ok is false for any other key.
func (s *Server) handleSecurityKeys(ctx context.Context, rc *reqContext, req kmsg.Request) (resp kmsg.Response, ok bool, err error) {
	switch r := req.(type) {
	case *kmsg.DescribeACLsRequest:
		resp, err = s.handleDescribeACLs(ctx, rc, r)
	case *kmsg.CreateACLsRequest:
		resp, err = s.handleCreateACLs(ctx, rc, r)
	case *kmsg.DeleteACLsRequest:
		resp, err = s.handleDeleteACLs(ctx, rc, r)
	case *kmsg.DescribeUserSCRAMCredentialsRequest:
		resp, err = s.handleDescribeUserScramCredentials(ctx, rc, r)
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		resp, err = s.handleAlterUserScramCredentials(ctx, rc, r)
	default:
		return nil, false, nil
	}
	return resp, true, err
}
