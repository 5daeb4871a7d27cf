package zkcoord

import (
	"context"
	"errors"

	"github.com/kafkazk/broker/security"
)

// errNotYet marks API bodies still being written on branch sec-zk.
var errNotYet = errors.New("zkcoord: not implemented yet")

// WatchACLs loads every ACL znode (/kafka-acl/<Type>/<name> and
// /kafka-acl-extended/prefixed/<Type>/<name>) into a, then follows
// /kafka-acl-changes and /kafka-acl-extended-changes as Kafka's
// ZkNodeChangeNotificationListener does: each new notification re-reads the
// resource it names. It returns once the initial load is done.
func (s *Session) WatchACLs(ctx context.Context, a *security.Authorizer) error {
	return errNotYet
}

// ACLAdmin returns the ACL writer of this session (protocol.ACLAdmin's
// method set; cmd/broker adapts).
func (s *Session) ACLAdmin() *ACLStore { return &ACLStore{s: s} }

// ACLStore writes ACLs to ZooKeeper as Kafka's AclAuthorizer does: each
// resource znode conditionally on its version, then a change notification.
type ACLStore struct{ s *Session }

// CreateACLs adds each binding (validated by the caller with
// security.ValidateACLBinding); one error per binding, nil for created.
func (st *ACLStore) CreateACLs(ctx context.Context, bindings []security.ACLBinding) []error {
	errs := make([]error, len(bindings))
	for i := range errs {
		errs[i] = errNotYet
	}
	return errs
}

// DeleteACLs deletes what each filter matches; per filter the deleted
// bindings or an error.
func (st *ACLStore) DeleteACLs(ctx context.Context, filters []security.ACLBindingFilter) ([][]security.ACLBinding, []error) {
	errs := make([]error, len(filters))
	for i := range errs {
		errs[i] = errNotYet
	}
	return make([][]security.ACLBinding, len(filters)), errs
}
