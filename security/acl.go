package security

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"sort"
	"strings"
)

// ResourceType is Kafka's ACL resource type; the value is Kafka's wire code
// (DescribeAcls, CreateAcls, DeleteAcls).
type ResourceType int8

const (
	ResourceUnknown         ResourceType = 0
	ResourceAny             ResourceType = 1 // filters only
	ResourceTopic           ResourceType = 2
	ResourceGroup           ResourceType = 3
	ResourceCluster         ResourceType = 4
	ResourceTransactionalID ResourceType = 5
	ResourceDelegationToken ResourceType = 6
	ResourceUser            ResourceType = 7
)

// ClusterResourceName is the name of the one Cluster resource.
const ClusterResourceName = "kafka-cluster"

// WildcardResource, WildcardHost and WildcardPrincipal are the "*" values
// of a literal resource name, an ACL host and an ACL principal.
const (
	WildcardResource  = "*"
	WildcardHost      = "*"
	WildcardPrincipal = "User:*"
)

// ConcreteResourceTypes are the types an ACL may name (not Any or Unknown),
// in Kafka's order.
var ConcreteResourceTypes = []ResourceType{ResourceTopic, ResourceGroup, ResourceCluster, ResourceTransactionalID, ResourceDelegationToken, ResourceUser}

var resourceTypeNames = map[ResourceType][2]string{
	ResourceUnknown:         {"Unknown", "UNKNOWN"},
	ResourceAny:             {"Any", "ANY"},
	ResourceTopic:           {"Topic", "TOPIC"},
	ResourceGroup:           {"Group", "GROUP"},
	ResourceCluster:         {"Cluster", "CLUSTER"},
	ResourceTransactionalID: {"TransactionalId", "TRANSACTIONAL_ID"},
	ResourceDelegationToken: {"DelegationToken", "DELEGATION_TOKEN"},
	ResourceUser:            {"User", "USER"},
}

// String is Kafka's PascalCase name ("TransactionalId"), which names the
// /kafka-acl/<type> and /kafka-acl-extended/prefixed/<type> znodes.
func (r ResourceType) String() string {
	if n, ok := resourceTypeNames[r]; ok {
		return n[0]
	}
	return fmt.Sprintf("ResourceType(%d)", int8(r))
}

// EnumName is the Java enum name ("TRANSACTIONAL_ID") that Kafka writes in
// ACL change notifications.
func (r ResourceType) EnumName() string {
	if n, ok := resourceTypeNames[r]; ok {
		return n[1]
	}
	return "UNKNOWN"
}

func normName(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "_", "")) }

// ParseResourceType accepts the PascalCase, upper-case and Java enum names
// ("TransactionalId", "TRANSACTIONALID", "TRANSACTIONAL_ID"), case-insensitive.
func ParseResourceType(s string) (ResourceType, error) {
	for r, n := range resourceTypeNames {
		if normName(n[0]) == normName(s) {
			return r, nil
		}
	}
	return ResourceUnknown, fmt.Errorf("resource type %q: %w", truncate(s, 40), ErrInvalidACL)
}

// PatternType is Kafka's resource pattern type, with its wire code.
type PatternType int8

const (
	PatternUnknown  PatternType = 0
	PatternAny      PatternType = 1 // filters only: LITERAL or PREFIXED, name compared exactly
	PatternMatch    PatternType = 2 // filters only: every pattern that would match the name
	PatternLiteral  PatternType = 3
	PatternPrefixed PatternType = 4
)

var patternTypeNames = map[PatternType]string{
	PatternUnknown: "UNKNOWN", PatternAny: "ANY", PatternMatch: "MATCH", PatternLiteral: "LITERAL", PatternPrefixed: "PREFIXED",
}

// String is the Java enum name ("PREFIXED").
func (p PatternType) String() string {
	if n, ok := patternTypeNames[p]; ok {
		return n
	}
	return fmt.Sprintf("PatternType(%d)", int8(p))
}

// StoreName is the /kafka-acl-extended/<name> segment of a non-literal
// pattern type ("prefixed").
func (p PatternType) StoreName() string { return strings.ToLower(p.String()) }

// ParsePatternType reads a pattern type name, case-insensitive.
func ParsePatternType(s string) (PatternType, error) {
	for p, n := range patternTypeNames {
		if strings.EqualFold(n, s) {
			return p, nil
		}
	}
	return PatternUnknown, fmt.Errorf("pattern type %q: %w", truncate(s, 40), ErrInvalidACL)
}

// Operation is Kafka's ACL operation, with its wire code.
type Operation int8

const (
	OpUnknown         Operation = 0
	OpAny             Operation = 1 // filters only
	OpAll             Operation = 2
	OpRead            Operation = 3
	OpWrite           Operation = 4
	OpCreate          Operation = 5
	OpDelete          Operation = 6
	OpAlter           Operation = 7
	OpDescribe        Operation = 8
	OpClusterAction   Operation = 9
	OpDescribeConfigs Operation = 10
	OpAlterConfigs    Operation = 11
	OpIdempotentWrite Operation = 12
	OpCreateTokens    Operation = 13
	OpDescribeTokens  Operation = 14
)

var operationNames = map[Operation]string{
	OpUnknown: "Unknown", OpAny: "Any", OpAll: "All", OpRead: "Read", OpWrite: "Write", OpCreate: "Create",
	OpDelete: "Delete", OpAlter: "Alter", OpDescribe: "Describe", OpClusterAction: "ClusterAction",
	OpDescribeConfigs: "DescribeConfigs", OpAlterConfigs: "AlterConfigs", OpIdempotentWrite: "IdempotentWrite",
	OpCreateTokens: "CreateTokens", OpDescribeTokens: "DescribeTokens",
}

// String is Kafka's PascalCase name, as in the ACL znodes.
func (o Operation) String() string {
	if n, ok := operationNames[o]; ok {
		return n
	}
	return fmt.Sprintf("Operation(%d)", int8(o))
}

// ParseOperation reads "ClusterAction", "CLUSTERACTION" or "CLUSTER_ACTION".
func ParseOperation(s string) (Operation, error) {
	for o, n := range operationNames {
		if normName(n) == normName(s) {
			return o, nil
		}
	}
	return OpUnknown, fmt.Errorf("operation %q: %w", truncate(s, 40), ErrInvalidACL)
}

// impliedBy lists the operations whose Allow also allows o (Kafka's ACL
// inheritance): Describe by Read, Write, Delete and Alter; DescribeConfigs
// by AlterConfigs. Deny is never implied.
func (o Operation) impliedBy() []Operation {
	switch o {
	case OpDescribe:
		return []Operation{OpDescribe, OpRead, OpWrite, OpDelete, OpAlter}
	case OpDescribeConfigs:
		return []Operation{OpDescribeConfigs, OpAlterConfigs}
	}
	return []Operation{o}
}

// PermissionType is Allow or Deny, with Kafka's wire code.
type PermissionType int8

const (
	PermissionUnknown PermissionType = 0
	PermissionAny     PermissionType = 1 // filters only
	PermissionDeny    PermissionType = 2
	PermissionAllow   PermissionType = 3
)

func (p PermissionType) String() string {
	switch p {
	case PermissionAny:
		return "Any"
	case PermissionDeny:
		return "Deny"
	case PermissionAllow:
		return "Allow"
	case PermissionUnknown:
		return "Unknown"
	}
	return fmt.Sprintf("PermissionType(%d)", int8(p))
}

// ParsePermissionType reads "Allow"/"Deny" (any case) or "Any".
func ParsePermissionType(s string) (PermissionType, error) {
	for _, p := range []PermissionType{PermissionAny, PermissionDeny, PermissionAllow} {
		if strings.EqualFold(p.String(), s) {
			return p, nil
		}
	}
	return PermissionUnknown, fmt.Errorf("permission type %q: %w", truncate(s, 40), ErrInvalidACL)
}

// ResourcePattern names the resources an ACL applies to.
type ResourcePattern struct {
	Type        ResourceType
	Name        string
	PatternType PatternType
}

func (r ResourcePattern) String() string {
	return fmt.Sprintf("ResourcePattern(resourceType=%s, name=%s, patternType=%s)", r.Type.EnumName(), r.Name, r.PatternType)
}

// ACE is an access control entry: who (principal "User:alice" or
// "User:*"), from where (host, "*" for any), what and whether allowed.
type ACE struct {
	Principal  string
	Host       string
	Operation  Operation
	Permission PermissionType
}

func (e ACE) String() string {
	return fmt.Sprintf("%s has %s permission for operations: %s from hosts: %s", e.Principal, e.Permission, e.Operation, e.Host)
}

// ACLBinding is an ACE bound to a resource pattern.
type ACLBinding struct {
	Pattern ResourcePattern
	Entry   ACE
}

// ValidateACLBinding refuses what Kafka's AclAuthorizer refuses to create:
// unknown or filter-only values, a malformed principal, and a resource name
// containing '/', which would escape its znode.
func ValidateACLBinding(b ACLBinding) error {
	switch {
	case !validConcreteType(b.Pattern.Type):
		return fmt.Errorf("ACL binding: resource type %s: %w", b.Pattern.Type, ErrInvalidACL)
	case b.Pattern.PatternType != PatternLiteral && b.Pattern.PatternType != PatternPrefixed:
		return fmt.Errorf("ACL binding: pattern type %s: %w", b.Pattern.PatternType, ErrInvalidACL)
	case b.Pattern.Name == "":
		return fmt.Errorf("ACL binding: empty resource name: %w", ErrInvalidACL)
	case strings.Contains(b.Pattern.Name, "/"):
		return fmt.Errorf("ACL binding contains invalid resource name %q: %w", b.Pattern.Name, ErrInvalidACL)
	case b.Entry.Operation <= OpAny || b.Entry.Operation > OpDescribeTokens:
		return fmt.Errorf("ACL binding: operation %s: %w", b.Entry.Operation, ErrInvalidACL)
	case b.Entry.Permission != PermissionAllow && b.Entry.Permission != PermissionDeny:
		return fmt.Errorf("ACL binding: permission type %s: %w", b.Entry.Permission, ErrInvalidACL)
	case b.Entry.Host == "":
		return fmt.Errorf("ACL binding: empty host: %w", ErrInvalidACL)
	}
	if _, err := ParseKafkaPrincipal(b.Entry.Principal); err != nil {
		return fmt.Errorf("ACL binding: %w", err)
	}
	return nil
}

func validConcreteType(t ResourceType) bool { return t >= ResourceTopic && t <= ResourceUser }

// ResourcePatternFilter selects resource patterns (DescribeAcls,
// DeleteAcls). A nil Name matches every name.
type ResourcePatternFilter struct {
	Type        ResourceType
	Name        *string
	PatternType PatternType
}

// Matches is Kafka's ResourcePatternFilter.matches. With PatternMatch and a
// name it selects the literal pattern of that name, the literal wildcard,
// and every prefixed pattern the name starts with.
func (f ResourcePatternFilter) Matches(p ResourcePattern) bool {
	if f.Type != ResourceAny && f.Type != p.Type {
		return false
	}
	if f.PatternType != PatternAny && f.PatternType != PatternMatch && f.PatternType != p.PatternType {
		return false
	}
	if f.Name == nil {
		return true
	}
	if f.PatternType == PatternAny || f.PatternType == p.PatternType {
		return *f.Name == p.Name
	}
	switch p.PatternType {
	case PatternLiteral:
		return *f.Name == p.Name || p.Name == WildcardResource
	case PatternPrefixed:
		return strings.HasPrefix(*f.Name, p.Name)
	}
	return false
}

// IndefiniteField is Kafka's findIndefiniteField: why the filter may match
// more than one pattern, or "" if it matches at most one.
func (f ResourcePatternFilter) IndefiniteField() string {
	switch {
	case f.Type == ResourceAny:
		return "Resource type is ANY."
	case f.Type == ResourceUnknown:
		return "Resource type is UNKNOWN."
	case f.Name == nil:
		return "Resource name is NULL."
	case f.PatternType == PatternMatch:
		return "Resource pattern type is MATCH."
	case f.PatternType == PatternUnknown:
		return "Resource pattern type is UNKNOWN."
	}
	return ""
}

// ACEFilter selects entries; a nil Principal or Host matches any, and
// OpAny / PermissionAny match any operation / permission.
type ACEFilter struct {
	Principal  *string
	Host       *string
	Operation  Operation
	Permission PermissionType
}

// Matches is Kafka's AccessControlEntryFilter.matches.
func (f ACEFilter) Matches(e ACE) bool {
	return (f.Principal == nil || *f.Principal == e.Principal) &&
		(f.Host == nil || *f.Host == e.Host) &&
		(f.Operation == OpAny || f.Operation == e.Operation) &&
		(f.Permission == PermissionAny || f.Permission == e.Permission)
}

// ACLBindingFilter is a DescribeAcls or DeleteAcls filter.
type ACLBindingFilter struct {
	Pattern ResourcePatternFilter
	Entry   ACEFilter
}

// Matches reports whether b passes both halves of the filter.
func (f ACLBindingFilter) Matches(b ACLBinding) bool {
	return f.Pattern.Matches(b.Pattern) && f.Entry.Matches(b.Entry)
}

// ValidateFilter refuses an UNKNOWN element, which Kafka's
// DescribeAcls/DeleteAcls answer with INVALID_REQUEST.
func ValidateFilter(f ACLBindingFilter) error {
	switch {
	case f.Pattern.Type == ResourceUnknown:
		return fmt.Errorf("ACL filter: resource type UNKNOWN: %w", ErrInvalidACL)
	case f.Pattern.PatternType == PatternUnknown:
		return fmt.Errorf("ACL filter: pattern type UNKNOWN: %w", ErrInvalidACL)
	case f.Entry.Operation == OpUnknown:
		return fmt.Errorf("ACL filter: operation UNKNOWN: %w", ErrInvalidACL)
	case f.Entry.Permission == PermissionUnknown:
		return fmt.Errorf("ACL filter: permission type UNKNOWN: %w", ErrInvalidACL)
	}
	return nil
}

// FilterResources is Kafka's filterToResources: the patterns a definite
// filter (IndefiniteField() == "") names, so DeleteAcls can reach a
// resource this broker's cache has not seen yet.
func FilterResources(f ResourcePatternFilter) []ResourcePattern {
	if f.IndefiniteField() != "" {
		return nil
	}
	switch f.PatternType {
	case PatternLiteral, PatternPrefixed:
		return []ResourcePattern{{f.Type, *f.Name, f.PatternType}}
	case PatternAny:
		return []ResourcePattern{{f.Type, *f.Name, PatternLiteral}, {f.Type, *f.Name, PatternPrefixed}}
	}
	return nil
}

// hostMatches compares an ACL host with a client address: equal strings,
// or equal IP addresses however written (Java writes IPv6 in full, Go
// compressed).
func hostMatches(aclHost, clientHost string) bool {
	if aclHost == clientHost || aclHost == WildcardHost {
		return true
	}
	a, errA := netip.ParseAddr(aclHost)
	c, errC := netip.ParseAddr(clientHost)
	return errA == nil && errC == nil && a.Unmap() == c.Unmap()
}

// ---- znode payloads ----

type aclJSON struct {
	Principal      string `json:"principal"`
	PermissionType string `json:"permissionType"`
	Operation      string `json:"operation"`
	Host           string `json:"host"`
}

type resourceACLsJSON struct {
	Version int       `json:"version"`
	ACLs    []aclJSON `json:"acls"`
}

// SortACEs orders entries by principal, host, operation, permission, so
// encodings are stable.
func SortACEs(acls []ACE) {
	sort.Slice(acls, func(i, j int) bool { return lessACE(acls[i], acls[j]) })
}

func lessACE(a, b ACE) bool {
	if a.Principal != b.Principal {
		return a.Principal < b.Principal
	}
	if a.Host != b.Host {
		return a.Host < b.Host
	}
	if a.Operation != b.Operation {
		return a.Operation < b.Operation
	}
	return a.Permission < b.Permission
}

// EncodeResourceACLs renders the payload of /kafka-acl/<type>/<name> or
// /kafka-acl-extended/prefixed/<type>/<name>:
// {"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}.
// Duplicates are dropped, as Kafka keeps a set.
func EncodeResourceACLs(acls []ACE) []byte {
	acls = dedupACEs(acls)
	out := resourceACLsJSON{Version: 1, ACLs: make([]aclJSON, 0, len(acls))}
	for _, e := range acls {
		out.ACLs = append(out.ACLs, aclJSON{e.Principal, e.Permission.String(), e.Operation.String(), e.Host})
	}
	b, err := json.Marshal(out)
	if err != nil {
		panic(fmt.Sprintf("security: marshal ACLs: %v", err))
	}
	return b
}

func dedupACEs(acls []ACE) []ACE {
	seen := make(map[ACE]bool, len(acls))
	out := make([]ACE, 0, len(acls))
	for _, e := range acls {
		if !seen[e] {
			seen[e] = true
			out = append(out, e)
		}
	}
	SortACEs(out)
	return out
}

// DecodeResourceACLs reads an ACL znode. Empty data is no ACLs, as in
// Kafka; version must be 1; names are read as Kafka's SecurityUtils does.
// Entries decode one by one as Kafka's AclEntry.fromBytes: an operation or
// permission type this broker does not know (a newer Kafka may write one)
// becomes OpUnknown / PermissionUnknown, which the authorizer matches with
// nothing (neither allows nor denies, as Kafka's UNKNOWN), and every other
// entry is kept; the host is taken as written. What fails the whole znode
// (the caller then fails closed): JSON that does not parse, a version
// other than 1, no acls array, or an entry whose principal does not parse
// (Kafka throws there too: nobody can tell whom it names).
func DecodeResourceACLs(data []byte) ([]ACE, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || string(data) == "null" {
		return nil, nil
	}
	var raw struct {
		Version *int       `json:"version"`
		ACLs    *[]aclJSON `json:"acls"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("ACL znode: %v: %w", err, ErrInvalidACL)
	}
	if raw.Version == nil || *raw.Version != 1 {
		return nil, fmt.Errorf("ACL znode: version must be 1: %w", ErrInvalidACL)
	}
	if raw.ACLs == nil {
		return nil, fmt.Errorf("ACL znode: no acls: %w", ErrInvalidACL)
	}
	out := make([]ACE, 0, len(*raw.ACLs))
	for i, a := range *raw.ACLs {
		p, err := ParseKafkaPrincipal(a.Principal)
		if err != nil {
			return nil, fmt.Errorf("ACL znode entry %d: %w", i, err)
		}
		perm, err := ParsePermissionType(a.PermissionType)
		if err != nil || perm == PermissionAny {
			perm = PermissionUnknown
		}
		op, err := ParseOperation(a.Operation)
		if err != nil || op == OpAny {
			op = OpUnknown
		}
		out = append(out, ACE{p.String(), a.Host, op, perm})
	}
	return dedupACEs(out), nil
}

// DenyAllACE is the entry a broker puts on a resource pattern whose znode
// it cannot read or parse, until it can: every operation denied to every
// principal from every host (super users still pass).
var DenyAllACE = ACE{Principal: WildcardPrincipal, Host: WildcardHost, Operation: OpAll, Permission: PermissionDeny}

// EncodeACLChange renders an ACL change notification: for a literal
// pattern the /kafka-acl-changes/acl_changes_ payload "<TYPE>:<name>"
// (Kafka writes the Java enum name, "TOPIC:orders"); for any other pattern
// the /kafka-acl-extended-changes/acl_changes_ payload
// {"version":1,"resourceType":"TOPIC","name":"orders","patternType":"PREFIXED"}.
// extended says which store the payload belongs to.
func EncodeACLChange(p ResourcePattern) (payload []byte, extended bool) {
	if p.PatternType == PatternLiteral {
		return []byte(p.Type.EnumName() + ":" + p.Name), false
	}
	b, err := json.Marshal(struct {
		Version      int    `json:"version"`
		ResourceType string `json:"resourceType"`
		Name         string `json:"name"`
		PatternType  string `json:"patternType"`
	}{1, p.Type.EnumName(), p.Name, p.PatternType.String()})
	if err != nil {
		panic(fmt.Sprintf("security: marshal ACL change: %v", err))
	}
	return b, true
}

// DecodeLiteralACLChange reads a /kafka-acl-changes payload, "Type:name"
// with any spelling of the type ("Topic", "TOPIC").
func DecodeLiteralACLChange(data []byte) (ResourcePattern, error) {
	t, name, ok := strings.Cut(string(data), ":")
	if !ok {
		return ResourcePattern{}, fmt.Errorf("ACL change %q: expected ResourceType:ResourceName: %w", truncate(string(data), 60), ErrInvalidACL)
	}
	rt, err := ParseResourceType(t)
	if err != nil || !validConcreteType(rt) {
		return ResourcePattern{}, fmt.Errorf("ACL change %q: resource type: %w", truncate(string(data), 60), ErrInvalidACL)
	}
	return ResourcePattern{rt, name, PatternLiteral}, nil
}

// DecodeExtendedACLChange reads a /kafka-acl-extended-changes payload.
func DecodeExtendedACLChange(data []byte) (ResourcePattern, error) {
	var raw struct {
		Version      int    `json:"version"`
		ResourceType string `json:"resourceType"`
		Name         string `json:"name"`
		PatternType  string `json:"patternType"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return ResourcePattern{}, fmt.Errorf("extended ACL change: %v: %w", err, ErrInvalidACL)
	}
	if raw.Version > 1 {
		return ResourcePattern{}, fmt.Errorf("extended ACL change: unsupported version %d: %w", raw.Version, ErrInvalidACL)
	}
	rt, err := ParseResourceType(raw.ResourceType)
	if err != nil || !validConcreteType(rt) {
		return ResourcePattern{}, fmt.Errorf("extended ACL change: resource type %q: %w", raw.ResourceType, ErrInvalidACL)
	}
	pt, err := ParsePatternType(raw.PatternType)
	if err != nil || (pt != PatternLiteral && pt != PatternPrefixed) {
		return ResourcePattern{}, fmt.Errorf("extended ACL change: pattern type %q: %w", raw.PatternType, ErrInvalidACL)
	}
	return ResourcePattern{rt, raw.Name, pt}, nil
}
