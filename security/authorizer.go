package security

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/rs/zerolog"
)

// AuthorizerConfig is the configuration of Kafka's AclAuthorizer.
type AuthorizerConfig struct {
	// SuperUsers bypass every ACL (super.users; see ParseSuperUsers).
	SuperUsers []KafkaPrincipal
	// AllowEveryoneIfNoACLFound allows any operation on a resource that has
	// no ACL at all (allow.everyone.if.no.acl.found).
	AllowEveryoneIfNoACLFound bool
	// Log receives one Debug line per decision (Kafka's authorizer
	// audit log logs denials at Info; protocol can log those with context).
	Log zerolog.Logger
}

// ParseSuperUsers reads super.users: principals separated by ';'.
func ParseSuperUsers(s string) ([]KafkaPrincipal, error) {
	var out []KafkaPrincipal
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	for _, part := range strings.Split(s, ";") {
		p, err := ParseKafkaPrincipal(strings.TrimSpace(part))
		if err != nil {
			return nil, fmt.Errorf("super.users: %v: %w", err, ErrInvalidConfig)
		}
		out = append(out, p)
	}
	return out, nil
}

// VersionedACLs are the ACLs of one resource pattern with the version of
// the znode they were read from, for conditional writes.
type VersionedACLs struct {
	ACLs      []ACE
	ZkVersion int32
}

// Authorizer is the decision core of Kafka's AclAuthorizer over an
// in-memory cache of ACLs keyed by resource pattern. zkcoord fills the
// cache from /kafka-acl and /kafka-acl-extended and keeps it current from
// the change notifications (SetResourceACLs); protocol asks Authorize.
// Safe for concurrent use; readers see each resource's update whole.
type Authorizer struct {
	mu    sync.RWMutex
	cache map[ResourcePattern]VersionedACLs

	superUsers map[KafkaPrincipal]bool
	allowIfNo  bool
	log        zerolog.Logger
}

// NewAuthorizer returns an authorizer with an empty cache.
func NewAuthorizer(cfg AuthorizerConfig) *Authorizer {
	su := make(map[KafkaPrincipal]bool, len(cfg.SuperUsers))
	for _, p := range cfg.SuperUsers {
		su[p] = true
	}
	return &Authorizer{cache: make(map[ResourcePattern]VersionedACLs), superUsers: su, allowIfNo: cfg.AllowEveryoneIfNoACLFound, log: cfg.Log}
}

// SetResourceACLs replaces the cached ACLs of one resource pattern, as
// reading its znode does; no ACLs (a deleted znode) removes the entry.
// The slice is copied.
func (a *Authorizer) SetResourceACLs(p ResourcePattern, acls []ACE, zkVersion int32) {
	acls = dedupACEs(acls)
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(acls) == 0 {
		delete(a.cache, p)
		return
	}
	a.cache[p] = VersionedACLs{ACLs: acls, ZkVersion: zkVersion}
}

// ResourceACLs returns the cached ACLs of exactly p; the slice is the
// caller's.
func (a *Authorizer) ResourceACLs(p ResourcePattern) (VersionedACLs, bool) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	v, ok := a.cache[p]
	if !ok {
		return VersionedACLs{}, false
	}
	return VersionedACLs{ACLs: append([]ACE(nil), v.ACLs...), ZkVersion: v.ZkVersion}, true
}

// Resources lists the cached resource patterns.
func (a *Authorizer) Resources() []ResourcePattern {
	a.mu.RLock()
	defer a.mu.RUnlock()
	out := make([]ResourcePattern, 0, len(a.cache))
	for p := range a.cache {
		out = append(out, p)
	}
	sortPatterns(out)
	return out
}

func sortPatterns(ps []ResourcePattern) {
	sort.Slice(ps, func(i, j int) bool { return lessPattern(ps[i], ps[j]) })
}

func lessPattern(a, b ResourcePattern) bool {
	if a.Type != b.Type {
		return a.Type < b.Type
	}
	if a.PatternType != b.PatternType {
		return a.PatternType < b.PatternType
	}
	return a.Name < b.Name
}

// Authorize decides whether principal, connecting from host (the client's
// IP address), may perform op on the literal resource (typ, name), as
// AclAuthorizer.authorizeAction: super users are allowed; a resource with
// no ACL at all is allowed only with allow.everyone.if.no.acl.found;
// otherwise a matching Deny (for op itself or All) refuses, and then a
// matching Allow (for op, All, or an operation implying op) allows. ACLs
// match by the literal name, the literal wildcard "*", and every prefixed
// pattern the name begins with; by principal or User:*; by host or "*".
func (a *Authorizer) Authorize(principal KafkaPrincipal, host string, op Operation, typ ResourceType, name string) bool {
	allowed, why := a.decide(principal, host, op, typ, name)
	a.log.Debug().Str("principal", principal.String()).Str("host", host).Str("operation", op.String()).
		Str("resource_type", typ.String()).Str("resource", name).Bool("allowed", allowed).Str("reason", why).Msg("authorize")
	return allowed
}

func (a *Authorizer) decide(principal KafkaPrincipal, host string, op Operation, typ ResourceType, name string) (bool, string) {
	if a.superUsers[principal] {
		return true, "super user"
	}
	a.mu.RLock()
	acls := a.matchingACLsLocked(typ, name)
	a.mu.RUnlock()
	if len(acls) == 0 {
		if a.allowIfNo {
			return true, "no ACL, allow.everyone.if.no.acl.found"
		}
		return false, "no ACL"
	}
	p := principal.String()
	if matchingACLExists(acls, p, host, op, PermissionDeny) {
		return false, "deny ACL"
	}
	for _, o := range op.impliedBy() {
		if matchingACLExists(acls, p, host, o, PermissionAllow) {
			return true, "allow ACL"
		}
	}
	return false, "no allow ACL"
}

// matchingACLsLocked gathers the ACLs of every pattern that covers the
// literal resource. Caller holds a.mu.
func (a *Authorizer) matchingACLsLocked(typ ResourceType, name string) []ACE {
	var out []ACE
	out = append(out, a.cache[ResourcePattern{typ, WildcardResource, PatternLiteral}].ACLs...)
	if name != WildcardResource {
		out = append(out, a.cache[ResourcePattern{typ, name, PatternLiteral}].ACLs...)
	}
	for i := 1; i <= len(name); i++ {
		out = append(out, a.cache[ResourcePattern{typ, name[:i], PatternPrefixed}].ACLs...)
	}
	return out
}

func matchingACLExists(acls []ACE, principal, host string, op Operation, perm PermissionType) bool {
	for _, e := range acls {
		if e.Permission == perm &&
			(e.Principal == principal || e.Principal == WildcardPrincipal) &&
			(e.Operation == op || e.Operation == OpAll) &&
			hostMatches(e.Host, host) {
			return true
		}
	}
	return false
}

// AuthorizeByResourceType is AclAuthorizer.authorizeByResourceType: whether
// principal may perform op on at least one resource of typ, which Kafka
// uses for KIP-679's idempotent producer check (Write on any topic). A
// literal wildcard Deny refuses; allow.everyone.if.no.acl.found then
// allows; otherwise an Allow on a literal or prefixed pattern allows unless
// a Deny covers that name (a literal Deny of it or a prefixed Deny of one
// of its prefixes).
func (a *Authorizer) AuthorizeByResourceType(principal KafkaPrincipal, host string, op Operation, typ ResourceType) bool {
	if a.superUsers[principal] {
		return true
	}
	p := principal.String()
	matches := func(e ACE, perm PermissionType) bool {
		return e.Permission == perm && (e.Principal == p || e.Principal == WildcardPrincipal) &&
			(e.Operation == op || e.Operation == OpAll) && hostMatches(e.Host, host)
	}
	denyLiteral, denyPrefix := map[string]bool{}, map[string]bool{}
	var allowLiteral, allowPrefix []string
	a.mu.RLock()
	for res, v := range a.cache {
		if res.Type != typ {
			continue
		}
		for _, e := range v.ACLs {
			switch {
			case matches(e, PermissionDeny) && res.PatternType == PatternLiteral:
				denyLiteral[res.Name] = true
			case matches(e, PermissionDeny) && res.PatternType == PatternPrefixed:
				denyPrefix[res.Name] = true
			case matches(e, PermissionAllow) && res.PatternType == PatternLiteral:
				allowLiteral = append(allowLiteral, res.Name)
			case matches(e, PermissionAllow) && res.PatternType == PatternPrefixed:
				allowPrefix = append(allowPrefix, res.Name)
			}
		}
	}
	a.mu.RUnlock()
	if denyLiteral[WildcardResource] {
		return false
	}
	if a.allowIfNo {
		return true
	}
	dominantDeny := func(name string) bool {
		for i := 1; i <= len(name); i++ {
			if denyPrefix[name[:i]] {
				return true
			}
		}
		return false
	}
	for _, n := range allowPrefix {
		if !dominantDeny(n) {
			return true
		}
	}
	for _, n := range allowLiteral {
		if n == WildcardResource || (!denyLiteral[n] && !dominantDeny(n)) {
			return true
		}
	}
	return false
}

// ACLs returns the cached bindings that pass filter (DescribeAcls), in a
// stable order.
func (a *Authorizer) ACLs(filter ACLBindingFilter) []ACLBinding {
	a.mu.RLock()
	defer a.mu.RUnlock()
	var out []ACLBinding
	for p, v := range a.cache {
		for _, e := range v.ACLs {
			if b := (ACLBinding{p, e}); filter.Matches(b) {
				out = append(out, b)
			}
		}
	}
	sortBindings(out)
	return out
}

func sortBindings(bs []ACLBinding) {
	sort.Slice(bs, func(i, j int) bool {
		if bs[i].Pattern != bs[j].Pattern {
			return lessPattern(bs[i].Pattern, bs[j].Pattern)
		}
		return lessACE(bs[i].Entry, bs[j].Entry)
	})
}

// DeleteCandidates is the set of resource patterns DeleteAcls must visit
// for filters: every cached pattern some filter matches, plus the patterns
// a definite filter names even if this cache lacks them (their znode may
// exist though its notification has not arrived).
func (a *Authorizer) DeleteCandidates(filters []ACLBindingFilter) []ResourcePattern {
	set := map[ResourcePattern]bool{}
	for _, p := range a.Resources() {
		set[p] = true
	}
	for _, f := range filters {
		for _, p := range FilterResources(f.Pattern) {
			set[p] = true
		}
	}
	var out []ResourcePattern
	for p := range set {
		for _, f := range filters {
			if f.Pattern.Matches(p) {
				out = append(out, p)
				break
			}
		}
	}
	sortPatterns(out)
	return out
}

// RemoveMatching applies DeleteAcls filters to the current ACLs of one
// pattern, as read from its znode: remaining is what to write back (none:
// delete the znode), and deleted[i] lists the bindings filter i removed. A
// binding several filters match is reported under the first of them, as
// Kafka does.
func RemoveMatching(p ResourcePattern, current []ACE, filters []ACLBindingFilter) (remaining []ACE, deleted [][]ACLBinding) {
	deleted = make([][]ACLBinding, len(filters))
	for _, e := range dedupACEs(current) {
		b := ACLBinding{p, e}
		removed := false
		for i, f := range filters {
			if f.Matches(b) {
				deleted[i] = append(deleted[i], b)
				removed = true
				break
			}
		}
		if !removed {
			remaining = append(remaining, e)
		}
	}
	return remaining, deleted
}

// AddACLs returns current with add merged in, without duplicates, as
// CreateAcls does to a resource's znode.
func AddACLs(current, add []ACE) []ACE {
	return dedupACEs(append(append([]ACE(nil), current...), add...))
}
