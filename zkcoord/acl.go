package zkcoord

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/kafkazk/broker/security"
)

// ACLs in ZooKeeper, as Kafka's AclAuthorizer keeps them (ZkData ZkAclStore,
// ZkAclChangeStore):
//
//	/kafka-acl/<Type>/<name>                    literal patterns
//	/kafka-acl-extended/prefixed/<Type>/<name>  prefixed patterns
//	    {"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}
//	/kafka-acl-changes/acl_changes_<seq>           "TOPIC:<name>"
//	/kafka-acl-extended-changes/acl_changes_<seq>  {"version":1,"resourceType":"TOPIC","name":..,"patternType":"PREFIXED"}
//
// A writer changes one resource znode conditionally on its version and then
// creates a change notification in the store of the pattern's type; every
// broker re-reads the resource a notification names.

const (
	// aclMaxUpdateRetries is AclAuthorizer's maxUpdateRetries: how often a
	// conditional write of one resource znode is tried before giving up.
	aclMaxUpdateRetries = 10
	// aclRetryBackoffMax bounds the random pause before re-reading a
	// resource znode another writer changed (Kafka: 100 ms + up to 50).
	aclRetryBackoffMax = 50 * time.Millisecond
)

// aclChangeStores are the two notification roots, each with the decoder of
// its payloads.
var aclChangeStores = []struct {
	path   string
	decode func([]byte) (security.ResourcePattern, error)
}{
	{aclChangesPath, security.DecodeLiteralACLChange},
	{aclExtendedChangesPath, security.DecodeExtendedACLChange},
}

// aclPatternTypes are the pattern types that have a store.
var aclPatternTypes = []security.PatternType{security.PatternLiteral, security.PatternPrefixed}

// aclState is the session goroutine's ACL watch; owned by it.
type aclState struct {
	authz *security.Authorizer // nil until WatchACLs
	seen  map[string]int64     // by change store: the last notification processed
	full  bool                 // a full reload is owed (new session, failed load, missed notification)
	// loaded: the first full load succeeded. Before it a resource znode
	// that cannot be read or parsed fails the load (WatchACLs fails, as
	// Kafka's start-up); after it the resource is denied to everyone
	// until it reads (failClosed).
	loaded bool
}

// WatchACLs loads every ACL znode (/kafka-acl/<Type>/<name> and
// /kafka-acl-extended/prefixed/<Type>/<name>) into a with its znode
// version, then follows /kafka-acl-changes and /kafka-acl-extended-changes
// as Kafka's ZkNodeChangeNotificationListener does: each notification newer
// than the last one processed, in sequence order, re-reads the resource it
// names; notifications older than 15 minutes are purged. It creates the ACL
// paths first, as AclAuthorizer does at start-up. It returns once the
// initial load is done; after a new session every resource is read again
// (Kafka only resumes from its last notification; a full read also covers
// notifications purged while this broker was away).
func (s *Session) WatchACLs(ctx context.Context, a *security.Authorizer) error {
	if a == nil {
		return errors.New("zkcoord: WatchACLs: nil authorizer")
	}
	return s.do(ctx, func() error {
		s.acl = aclState{authz: a, seen: map[string]int64{}, full: true}
		if err := createACLPaths(s.zk); err != nil {
			s.markDirty("create ACL paths", err)
			return err
		}
		if err := s.syncACLs(); err != nil {
			if !zkRetryable(err) {
				// A znode that will not read as it is: refuse to start
				// rather than authorize without its ACLs.
				s.acl = aclState{}
				return fmt.Errorf("zkcoord: WatchACLs: %w", err)
			}
			s.markDirty("load ACLs", err)
			return err
		}
		return nil
	})
}

// zkRetryable reports whether a failed ZooKeeper read may succeed when
// tried again as it is: the outcome is unknown (connection lost, no
// server) or the session was lost. Anything else (NOAUTH, a payload that
// does not parse) fails the same way again.
func zkRetryable(err error) bool {
	return outcomeUnknown(err) || zkSessionLost(err) || zkConnectionLost(err)
}

// syncACLs does what the ACL watch owes: the full load if one is pending,
// then the notifications not yet processed. Before a full load it lists the
// notifications (arming the watches) and takes the newest as seen: what
// the load reads is at least as new as what they announce, and a change
// after the listing fires the watch. Caller is the session goroutine.
func (s *Session) syncACLs() error {
	if s.acl.authz == nil {
		return nil
	}
	if s.acl.full {
		for _, st := range aclChangeStores {
			kids, err := s.readChildren(watchKey{kind: wACLChanges, topic: st.path}, st.path)
			if err != nil {
				return err
			}
			last := int64(-1)
			for _, n := range sortedNotifications(kids, aclChangeNamePrefix, -1) {
				last = n.seq
			}
			s.acl.seen[st.path] = last
		}
		if err := s.loadACLs(); err != nil {
			return err
		}
		s.acl.full = false
		s.acl.loaded = true
	}
	var first error
	for _, st := range aclChangeStores {
		if err := s.refreshACLChanges(st.path); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// loadACLs reads every resource znode into the authorizer and drops cached
// resources whose znode is gone (AclAuthorizer.loadCache). An unknown
// resource type directory is skipped with a warning, as Kafka does.
func (s *Session) loadACLs() error {
	found := map[security.ResourcePattern]bool{}
	for _, pt := range aclPatternTypes {
		types, _, err := s.zk.Children(aclStorePath(pt))
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return fmt.Errorf("load ACLs: children %s: %w", aclStorePath(pt), err)
		}
		for _, tn := range types {
			rt, err := security.ParseResourceType(tn)
			if err != nil || !concreteResourceType(rt) {
				s.log.Warn().Str("zk_path", aclStorePath(pt)+"/"+tn).Msg("ignoring unknown ACL resource type")
				continue
			}
			names, _, err := s.zk.Children(aclTypePath(pt, rt))
			if errors.Is(err, zk.ErrNoNode) {
				continue
			}
			if err != nil {
				return fmt.Errorf("load ACLs: children %s: %w", aclTypePath(pt, rt), err)
			}
			for _, name := range names {
				p := security.ResourcePattern{Type: rt, Name: name, PatternType: pt}
				found[p] = true
				if err := s.refreshACLResource(p); err != nil {
					return err
				}
			}
		}
	}
	for _, p := range s.acl.authz.Resources() {
		if !found[p] {
			s.acl.authz.SetResourceACLs(p, nil, -1)
		}
	}
	s.log.Info().Int("resources", len(found)).Msg("loaded ACLs from zookeeper")
	return nil
}

func concreteResourceType(rt security.ResourceType) bool {
	for _, c := range security.ConcreteResourceTypes {
		if c == rt {
			return true
		}
	}
	return false
}

// refreshACLResource reads one resource znode into the authorizer; a
// missing znode removes the resource. A read that may succeed when retried
// (zkRetryable) returns its error. A znode that cannot be read otherwise
// (NOAUTH) or parsed at all fails closed: before the first full load it is
// an error (WatchACLs fails), after it the pattern gets
// security.DenyAllACE in place of its ACLs until a later read succeeds,
// logged at Error. Caller is the session goroutine.
func (s *Session) refreshACLResource(p security.ResourcePattern) error {
	path := aclResourcePath(p)
	data, stat, err := s.zk.Get(path)
	if errors.Is(err, zk.ErrNoNode) {
		s.acl.authz.SetResourceACLs(p, nil, -1)
		return nil
	}
	if err != nil {
		err = fmt.Errorf("read ACLs: get %s: %w", path, err)
		if zkRetryable(err) {
			return err
		}
		return s.failClosed(p, err)
	}
	acls, err := security.DecodeResourceACLs(data)
	if err != nil {
		return s.failClosed(p, fmt.Errorf("read ACLs: %s: %w", path, err))
	}
	s.acl.authz.SetResourceACLs(p, acls, stat.Version)
	s.log.Debug().Str("zk_path", path).Int("acls", len(acls)).Int32("zk_version", stat.Version).Msg("read ACLs")
	return nil
}

// failClosed handles a resource znode that cannot be read or parsed (err):
// before the first full load it returns err; after it, it denies the
// pattern to everyone (security.DenyAllACE, version -1 so the next read
// replaces it) and logs at Error. Caller is the session goroutine.
func (s *Session) failClosed(p security.ResourcePattern, err error) error {
	if !s.acl.loaded {
		return err
	}
	s.acl.authz.SetResourceACLs(p, []security.ACE{security.DenyAllACE}, -1)
	s.log.Error().Err(err).Str("zk_path", aclResourcePath(p)).
		Msg("ACL znode cannot be read: denying every operation on it to everyone until it reads")
	return nil
}

// refreshACLChanges processes the notifications of one change store newer
// than the last processed, in sequence order, then purges the expired
// ones. A notification that does not decode is skipped (logged at Error,
// as Kafka). One that vanished before it was read (purged by a broker
// whose clock runs ahead) or cannot be read (NOAUTH) names a change this
// broker would miss, so it owes a full reload, done here. A read that may
// succeed when retried (zkRetryable) stops here and is retried, from the
// same notification, by the next fire or resync. A resource that cannot
// be read fails closed (refreshACLResource). Caller is the session
// goroutine.
func (s *Session) refreshACLChanges(store string) error {
	if s.acl.authz == nil {
		return nil
	}
	kids, err := s.readChildren(watchKey{kind: wACLChanges, topic: store}, store)
	if err != nil {
		return err
	}
	decode := security.DecodeLiteralACLChange
	if store == aclExtendedChangesPath {
		decode = security.DecodeExtendedACLChange
	}
	for _, n := range sortedNotifications(kids, aclChangeNamePrefix, s.acl.seen[store]) {
		p := aclChangeNodePath(store, n.name)
		if s.beforeNotificationRead != nil {
			s.beforeNotificationRead(p)
		}
		data, _, err := s.zk.Get(p)
		switch {
		case errors.Is(err, zk.ErrNoNode):
			s.log.Warn().Str("zk_path", p).Msg("ACL change notification vanished before it was read: reloading every ACL")
			s.acl.full = true
		case err != nil && zkRetryable(err):
			return fmt.Errorf("read ACL change: get %s: %w", p, err)
		case err != nil:
			s.log.Error().Err(err).Str("zk_path", p).Msg("ACL change notification cannot be read: reloading every ACL")
			s.acl.full = true
		default:
			rp, derr := decode(data)
			if derr != nil {
				s.log.Error().Err(derr).Str("zk_path", p).Msg("ignoring ACL change notification")
				break
			}
			if err := s.refreshACLResource(rp); err != nil {
				return err
			}
		}
		s.acl.seen[store] = n.seq
		if s.acl.full {
			break
		}
	}
	s.purgeNotifications(store, aclChangeNamePrefix, kids)
	if s.acl.full {
		return s.syncACLs()
	}
	return nil
}

// createACLPaths creates the ACL stores, one directory per resource type
// in each, and the change stores (KafkaZkClient.createAclPaths).
func createACLPaths(z *zkConn) error {
	paths := []string{aclLiteralPath, aclExtendedPath}
	for _, pt := range aclPatternTypes {
		if pt != security.PatternLiteral {
			paths = append(paths, aclStorePath(pt))
		}
		for _, rt := range security.ConcreteResourceTypes {
			paths = append(paths, aclTypePath(pt, rt))
		}
	}
	paths = append(paths, aclChangesPath, aclExtendedChangesPath)
	for _, p := range paths {
		if err := z.createPersistent(p); err != nil {
			return err
		}
	}
	return nil
}

// ACLAdmin returns the ACL writer of this session (protocol.ACLAdmin's
// method set; cmd/broker adapts).
func (s *Session) ACLAdmin() *ACLStore { return &ACLStore{s: s, z: s.zk} }

// ACLStore writes ACLs to ZooKeeper as Kafka's AclAuthorizer does: each
// resource znode read, changed and written back conditionally on its
// version (created when absent, deleted when its last ACL goes), retried
// on a lost race, then a change notification. Safe for concurrent use:
// concurrent writers (on this broker or others) serialise on the znode
// versions, so no ACL is lost.
type ACLStore struct {
	s *Session
	z aclZK
}

// aclZK is the part of ZooKeeper the ACL writes use; *zkConn implements
// it, and the unit tests a fake that injects races.
type aclZK interface {
	Get(p string) ([]byte, *zk.Stat, error)
	Children(p string) ([]string, *zk.Stat, error)
	Create(p string, data []byte, flags int32) (string, error)
	Set(p string, data []byte, version int32) (*zk.Stat, error)
	Delete(p string, version int32) error
}

// CreateACLs adds each binding (validated by the caller with
// security.ValidateACLBinding), grouped by resource pattern: one
// conditional write and one notification per pattern. One error per
// binding, nil for created (also when it existed already, as in Kafka).
func (st *ACLStore) CreateACLs(ctx context.Context, bindings []security.ACLBinding) []error {
	errs := make([]error, len(bindings))
	var order []security.ResourcePattern
	byPattern := map[security.ResourcePattern][]int{}
	for i, b := range bindings {
		if _, ok := byPattern[b.Pattern]; !ok {
			order = append(order, b.Pattern)
		}
		byPattern[b.Pattern] = append(byPattern[b.Pattern], i)
	}
	for _, p := range order {
		idx := byPattern[p]
		add := make([]security.ACE, 0, len(idx))
		for _, i := range idx {
			add = append(add, bindings[i].Entry)
		}
		err := st.update(ctx, p, func(cur []security.ACE) []security.ACE { return security.AddACLs(cur, add) }, nil)
		if err != nil {
			err = fmt.Errorf("create ACLs for %s: %w", p, err)
		}
		for _, i := range idx {
			errs[i] = err
		}
	}
	return errs
}

// DeleteACLs deletes what each filter matches. It visits every resource
// znode in ZooKeeper that some filter's pattern matches (not this broker's
// cache, which may lag), one conditional write and notification per
// changed resource. Per filter: the deleted bindings (a binding several
// filters match is reported under the first, as Kafka does), or the error
// of a resource it matched that could not be written.
func (st *ACLStore) DeleteACLs(ctx context.Context, filters []security.ACLBindingFilter) ([][]security.ACLBinding, []error) {
	deleted := make([][]security.ACLBinding, len(filters))
	errs := make([]error, len(filters))
	patterns, err := st.candidates(filters)
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return deleted, errs
	}
	for _, p := range patterns {
		var idx []int
		var fs []security.ACLBindingFilter
		for i, f := range filters {
			if f.Pattern.Matches(p) {
				idx = append(idx, i)
				fs = append(fs, f)
			}
		}
		if len(idx) == 0 {
			continue
		}
		// removed is what the last attempt's change removed; pending what
		// an attempt whose write had an unknown outcome removed. When that
		// write landed, the retry finds nothing left to remove, yet those
		// bindings are what this call deleted.
		var removed, pending [][]security.ACLBinding
		err := st.update(ctx, p, func(cur []security.ACE) []security.ACE {
			remaining, del := security.RemoveMatching(p, cur, fs)
			removed = del
			return remaining
		}, func() { pending = removed })
		if pending != nil && noBindings(removed) {
			removed = pending
		}
		for j, i := range idx {
			if err != nil {
				if errs[i] == nil {
					errs[i] = fmt.Errorf("delete ACLs of %s: %w", p, err)
				}
				continue
			}
			if j < len(removed) {
				deleted[i] = append(deleted[i], removed[j]...)
			}
		}
	}
	return deleted, errs
}

func noBindings(bs [][]security.ACLBinding) bool {
	for _, b := range bs {
		if len(b) > 0 {
			return false
		}
	}
	return true
}

// candidates lists the resource patterns DeleteACLs visits: every resource
// znode some filter matches, plus the ones a definite filter names.
func (st *ACLStore) candidates(filters []security.ACLBindingFilter) ([]security.ResourcePattern, error) {
	seen := map[security.ResourcePattern]bool{}
	var out []security.ResourcePattern
	add := func(p security.ResourcePattern) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, f := range filters {
		for _, p := range security.FilterResources(f.Pattern) {
			add(p)
		}
	}
	for _, pt := range aclPatternTypes {
		for _, rt := range security.ConcreteResourceTypes {
			if !anyFilterCovers(filters, pt, rt) {
				continue
			}
			names, _, err := st.z.Children(aclTypePath(pt, rt))
			if errors.Is(err, zk.ErrNoNode) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("delete ACLs: children %s: %w", aclTypePath(pt, rt), err)
			}
			for _, n := range names {
				add(security.ResourcePattern{Type: rt, Name: n, PatternType: pt})
			}
		}
	}
	return out, nil
}

// anyFilterCovers reports whether some filter may match a pattern of type
// rt and pattern type pt, so its directory must be listed.
func anyFilterCovers(filters []security.ACLBindingFilter, pt security.PatternType, rt security.ResourceType) bool {
	for _, f := range filters {
		if f.Pattern.Type != security.ResourceAny && f.Pattern.Type != rt {
			continue
		}
		switch f.Pattern.PatternType {
		case security.PatternAny, security.PatternMatch, pt:
			return true
		}
	}
	return false
}

// update applies change to one resource's ACLs conditionally on the znode
// version (onUncertain, if set, runs after each write whose outcome is
// unknown), re-reads this broker's cache (as AclAuthorizer updates its
// cache after a write; also on the error path), then creates the change
// notification. It notifies whenever the resource may have been written,
// and also when there was nothing to change: that repairs a notification
// an earlier call lost (a client retrying a request whose answer it did
// not get finds nothing to change), and a duplicate is harmless. The
// notification create is retried until it succeeds while its outcome is
// unknown, bounded only by the session closing: once the resource write
// landed, a lost notification would leave the old ACLs live on every
// other broker.
func (st *ACLStore) update(ctx context.Context, p security.ResourcePattern, change func([]security.ACE) []security.ACE, onUncertain func()) error {
	if err := checkACLResourceName(p.Name); err != nil {
		return err
	}
	written, err := updateResourceACLs(ctx, st.z, p, change, onUncertain)
	st.refreshOwnCache(ctx, p)
	if err != nil && !written {
		return err
	}
	payload, _ := security.EncodeACLChange(p)
	seqPrefix := aclChangeNodePath(aclChangeStorePath(p.PatternType), aclChangeNamePrefix)
	if nerr := createNotification(st.z, st.done(), seqPrefix, payload); nerr != nil {
		return errors.Join(err, fmt.Errorf("ACLs of %s written but not announced: %w", p, nerr))
	}
	if err != nil {
		return err
	}
	if st.s != nil {
		st.s.log.Info().Str("zk_path", aclResourcePath(p)).Msg("changed ACLs")
	}
	return nil
}

// done is the session's closing channel; nil (never) without a session.
func (st *ACLStore) done() <-chan struct{} {
	if st.s == nil {
		return nil
	}
	return st.s.done
}

// refreshOwnCache re-reads p into this broker's authorizer, if WatchACLs
// made one, even when ctx is cancelled (the write may have landed).
func (st *ACLStore) refreshOwnCache(ctx context.Context, p security.ResourcePattern) {
	if st.s == nil {
		return
	}
	if err := st.s.do(context.WithoutCancel(ctx), func() error {
		if st.s.acl.authz == nil {
			return nil
		}
		return st.s.refreshACLResource(p)
	}); err != nil {
		st.s.log.Warn().Err(err).Str("zk_path", aclResourcePath(p)).
			Msg("re-reading ACLs after writing them; the notification will")
	}
}

// notificationRetryBackoff is the pause between tries of a notification
// create whose outcome is unknown (Kafka's retry backoff: 100 ms).
const notificationRetryBackoff = 100 * time.Millisecond

// createNotification creates a sequential change notification at prefix,
// making the missing parents (a store no watch has made yet). A create
// whose outcome is unknown (connection lost, no server, session expired)
// is tried again until it succeeds or the session closes (done, or the
// client's ErrClosing): a duplicate notification only makes the brokers
// re-read once more, a lost one leaves them on stale ACLs or credentials.
func createNotification(z aclZK, done <-chan struct{}, prefix string, payload []byte) error {
	madeParents := false
	for {
		_, err := z.Create(prefix, payload, zk.FlagSequence)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, zk.ErrNoNode) && !madeParents:
			madeParents = true
			if perr := createParents(z, prefix); perr != nil && !zkRetryable(perr) {
				return perr
			}
			continue
		case errors.Is(err, zk.ErrClosing):
			return fmt.Errorf("create %s: %w", prefix, err)
		case !zkRetryable(err):
			return fmt.Errorf("create %s: %w", prefix, err)
		}
		t := time.NewTimer(notificationRetryBackoff + randBackoff())
		select {
		case <-t.C:
		case <-done:
			t.Stop()
			return fmt.Errorf("create %s: %w", prefix, ErrClosed)
		}
	}
}

// checkACLResourceName refuses a name ZooKeeper cannot hold as one path
// segment (Kafka would fail on the znode path too, with a ZooKeeper
// error): empty, containing '/', or "." / "..".
func checkACLResourceName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("resource name %q cannot be stored as a znode name: %w", name, security.ErrInvalidACL)
	}
	return nil
}

// updateResourceACLs is AclAuthorizer.updateResourceAcls: read the
// resource znode, compute its new ACLs, and write them conditionally on
// the version read (create if absent, delete if none remain), re-reading
// and retrying when another writer got there first. written reports
// whether the znode may have been written: a write succeeded, or one
// whose answer was lost may have landed (onUncertain, if set, runs right
// after such a write; the retry then sees no difference).
func updateResourceACLs(ctx context.Context, z aclZK, p security.ResourcePattern, change func([]security.ACE) []security.ACE, onUncertain func()) (written bool, err error) {
	path := aclResourcePath(p)
	uncertain := false
	for attempt := 0; attempt < aclMaxUpdateRetries; attempt++ {
		if attempt > 0 {
			if err := sleepCtx(ctx, randBackoff()); err != nil {
				return uncertain, err
			}
		}
		if err := ctx.Err(); err != nil {
			return uncertain, err
		}
		var cur []security.ACE
		version := int32(-1) // -1: no znode
		data, stat, err := z.Get(path)
		switch {
		case errors.Is(err, zk.ErrNoNode):
		case err != nil:
			if outcomeUnknown(err) {
				continue
			}
			return uncertain, fmt.Errorf("get %s: %w", path, err)
		default:
			if cur, err = security.DecodeResourceACLs(data); err != nil {
				return uncertain, fmt.Errorf("%s: %w", path, err)
			}
			version = stat.Version
		}
		next := change(cur)
		if sameACEs(cur, next) {
			return uncertain, nil
		}
		switch {
		case len(next) == 0:
			err = z.Delete(path, version)
		case version < 0:
			_, err = z.Create(path, security.EncodeResourceACLs(next), 0)
			if errors.Is(err, zk.ErrNoNode) { // a parent is missing: make it, then retry
				if perr := createParents(z, path); perr != nil {
					return uncertain, perr
				}
				continue
			}
		default:
			_, err = z.Set(path, security.EncodeResourceACLs(next), version)
		}
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNodeExists), errors.Is(err, zk.ErrNoNode):
			continue // another writer won: re-read
		case outcomeUnknown(err):
			uncertain = true
			if onUncertain != nil {
				onUncertain()
			}
			continue
		default:
			return uncertain, fmt.Errorf("write %s: %w", path, err)
		}
	}
	return uncertain, fmt.Errorf("%s: %w after %d attempts", path, ErrConcurrentModification, aclMaxUpdateRetries)
}

// createParents creates every missing ancestor of p.
func createParents(z aclZK, p string) error {
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i := 1; i < len(parts); i++ {
		anc := "/" + strings.Join(parts[:i], "/")
		if _, err := z.Create(anc, nil, 0); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", anc, err)
		}
	}
	return nil
}

// sameACEs compares two ACL sets.
func sameACEs(a, b []security.ACE) bool {
	set := make(map[security.ACE]bool, len(a))
	for _, e := range a {
		set[e] = true
	}
	other := make(map[security.ACE]bool, len(b))
	for _, e := range b {
		if !set[e] {
			return false
		}
		other[e] = true
	}
	return len(other) == len(set)
}

// randBackoff is the pause before retrying a lost conditional write.
func randBackoff() time.Duration { return rand.N(aclRetryBackoffMax) }

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
