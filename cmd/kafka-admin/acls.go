package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const aclsAbout = `Add, remove or list ACLs (kafka-acls.sh), through CreateAcls (30), DeleteAcls (31) and DescribeAcls (29).

  --add | --remove | --list
  resources: --topic T, --group G, --cluster, --transactional-id X (each repeatable), --resource-pattern-type
  --allow-principal User:P, --deny-principal User:P, --allow-host H, --deny-host H, --operation OP (repeatable)
  --producer / --consumer: the operations a producer or a consumer (with --group) needs
  --list [--principal User:P]`

// aclResource is one resource named on the command line.
type aclResource struct {
	typ  kmsg.ACLResourceType
	name string
}

// validOperations are AclCommand's ResourceTypeToValidOperations.
var validOperations = map[kmsg.ACLResourceType][]kmsg.ACLOperation{
	kmsg.ACLResourceTypeTopic: {kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationCreate, kmsg.ACLOperationDescribe,
		kmsg.ACLOperationDelete, kmsg.ACLOperationAlter, kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs, kmsg.ACLOperationAll},
	kmsg.ACLResourceTypeGroup: {kmsg.ACLOperationRead, kmsg.ACLOperationDescribe, kmsg.ACLOperationDelete, kmsg.ACLOperationAll},
	kmsg.ACLResourceTypeCluster: {kmsg.ACLOperationCreate, kmsg.ACLOperationClusterAction, kmsg.ACLOperationDescribeConfigs,
		kmsg.ACLOperationAlterConfigs, kmsg.ACLOperationIdempotentWrite, kmsg.ACLOperationAlter, kmsg.ACLOperationDescribe, kmsg.ACLOperationAll},
	kmsg.ACLResourceTypeTransactionalId: {kmsg.ACLOperationDescribe, kmsg.ACLOperationWrite, kmsg.ACLOperationAll},
}

// aclArgs is a checked acls command line.
type aclArgs struct {
	action    string
	resources []aclResource
	pattern   kmsg.ACLResourcePatternType
	// entries are the (principal, host, operation, permission) to add or,
	// for --remove, the filters.
	allow, deny           []string
	allowHosts, denyHosts []string
	ops                   []kmsg.ACLOperation
	producer, consumer    bool
	idempotent            bool // --producer --idempotent: IdempotentWrite on the cluster too
	patternGiven          bool // --resource-pattern-type was given
	listPrincipals        []string
}

func cmdACLs(ctx context.Context, args []string, out io.Writer) error {
	f := newFlags("acls", aclsAbout)
	f.Bool("add", false, "Indicates you are trying to add ACLs.")
	f.Bool("remove", false, "Indicates you are trying to remove ACLs.")
	f.Bool("list", false, "List ACLs for the specified resource, use --topic <topic> or --group <group> or --cluster to specify a resource.")
	var topics, groups, txids, allow, deny, allowHosts, denyHosts, ops, principals stringsFlag
	f.Var(&topics, "topic", "topic to which ACLs should be added or removed. A value of '*' indicates ACL should apply to all topics.")
	f.Var(&groups, "group", "Consumer Group to which the ACLs should be added or removed. A value of '*' indicates the ACLs should apply to all groups.")
	f.Var(&txids, "transactional-id", "The transactionalId to which ACLs should be added or removed. A value of '*' indicates the ACLs should apply to all transactionalIds.")
	f.Bool("cluster", false, "Add/Remove cluster ACLs.")
	patternType := f.String("resource-pattern-type", "", "The type of the resource pattern or pattern filter: LITERAL or PREFIXED when adding; also ANY or MATCH when listing or removing (default LITERAL).")
	f.Var(&allow, "allow-principal", "principal is in principalType:name format; User:* is the wildcard. Repeatable.")
	f.Var(&deny, "deny-principal", "principal is in principalType:name format. Repeatable.")
	f.Var(&allowHosts, "allow-host", "Host from which principals listed in --allow-principal will have access (default * with --allow-principal).")
	f.Var(&denyHosts, "deny-host", "Host from which principals listed in --deny-principal will be denied access (default * with --deny-principal).")
	f.Var(&ops, "operation", "Operation that is being allowed or denied: Read, Write, Create, Delete, Alter, Describe, ClusterAction, AlterConfigs, DescribeConfigs, IdempotentWrite, All (default All).")
	f.Var(&principals, "principal", "List ACLs for the specified principal (with --list). Repeatable.")
	f.Bool("producer", false, "Convenience option to add/remove ACLs for the producer role: Write, Describe and Create on the topic(s).")
	f.Bool("consumer", false, "Convenience option to add/remove ACLs for the consumer role: Read and Describe on the topic(s), Read on the group(s).")
	f.Bool("idempotent", false, "With --producer: also IdempotentWrite on the cluster.")
	f.Bool("force", false, "Assume Yes to all queries and do not prompt (this tool never prompts).")
	if err := f.parse(args); err != nil {
		return err
	}
	aa, err := checkACLArgs(f, topics, groups, txids, *patternType, allow, deny, allowHosts, denyHosts, ops, principals)
	if err != nil {
		return err
	}
	key := map[string]int16{"add": 30, "remove": 31, "list": 29}[aa.action]
	return withAdmin(ctx, f.target(), []int16{key}, func(ctx context.Context, a *admin) error {
		switch aa.action {
		case "add":
			return a.addACLs(ctx, out, aa)
		case "remove":
			return a.removeACLs(ctx, out, aa)
		default:
			return a.listACLs(ctx, out, aa)
		}
	})
}

// checkACLArgs applies AclCommand's checkArgs.
func checkACLArgs(f *flags, topics, groups, txids []string, patternType string, allow, deny, allowHosts, denyHosts, ops, principals []string) (aclArgs, error) {
	action, err := f.action("add", "remove", "list")
	if err != nil {
		return aclArgs{}, err
	}
	aa := aclArgs{action: action, allow: allow, deny: deny, allowHosts: allowHosts, denyHosts: denyHosts,
		producer: f.set["producer"], consumer: f.set["consumer"], idempotent: f.set["idempotent"],
		patternGiven: patternType != "", listPrincipals: principals}
	if f.bootstrap == "" {
		return aa, usageErrorf("Missing required argument: --bootstrap-server")
	}
	resourceFlags := []string{"topic", "group", "cluster", "transactional-id", "resource-pattern-type"}
	switch action {
	case "list":
		if err := f.permit(action, append(resourceFlags, "principal")...); err != nil {
			return aa, err
		}
	default:
		if err := f.permit(action, append(resourceFlags, "allow-principal", "deny-principal", "allow-host", "deny-host", "operation", "producer", "consumer", "idempotent", "force")...); err != nil {
			return aa, err
		}
	}
	for _, t := range topics {
		aa.resources = append(aa.resources, aclResource{kmsg.ACLResourceTypeTopic, t})
	}
	for _, g := range groups {
		aa.resources = append(aa.resources, aclResource{kmsg.ACLResourceTypeGroup, g})
	}
	for _, x := range txids {
		aa.resources = append(aa.resources, aclResource{kmsg.ACLResourceTypeTransactionalId, x})
	}
	if f.set["cluster"] {
		aa.resources = append(aa.resources, aclResource{kmsg.ACLResourceTypeCluster, "kafka-cluster"})
	}
	aa.pattern = kmsg.ACLResourcePatternTypeLiteral
	if patternType != "" {
		if aa.pattern, err = kmsg.ParseACLResourcePatternType(patternType); err != nil || aa.pattern == kmsg.ACLResourcePatternTypeUnknown {
			return aa, usageErrorf("--resource-pattern-type %q: want LITERAL, PREFIXED, ANY or MATCH", patternType)
		}
		if action == "add" && aa.pattern != kmsg.ACLResourcePatternTypeLiteral && aa.pattern != kmsg.ACLResourcePatternTypePrefixed {
			return aa, usageErrorf("A '--resource-pattern-type' value of '%s' is not valid when adding acls.", strings.ToUpper(patternType))
		}
	}
	for _, p := range append(append(append([]string(nil), allow...), deny...), principals...) {
		if typ, name, ok := strings.Cut(p, ":"); !ok || typ == "" || name == "" {
			return aa, usageErrorf("principal %q is not in principalType:name format", p)
		}
	}
	if action == "add" {
		if len(allow) == 0 && len(deny) == 0 {
			return aa, usageErrorf("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
		}
		if len(aa.resources) == 0 {
			return aa, usageErrorf("You must specify one of: --topic, --cluster, --group, --transactional-id when trying to add ACLs.")
		}
	}
	if action == "remove" && len(aa.resources) == 0 {
		return aa, usageErrorf("You must specify one of: --topic, --cluster, --group, --transactional-id when trying to remove ACLs.")
	}
	if aa.producer || aa.consumer {
		if len(ops) > 0 {
			return aa, usageErrorf("Option \"--operation\" can't be used with \"--producer\" or \"--consumer\"")
		}
		if len(topics) == 0 {
			return aa, usageErrorf("With --producer or --consumer you must specify a --topic")
		}
		if aa.consumer && len(groups) == 0 {
			return aa, usageErrorf("With --consumer you must specify a --group")
		}
		return aa, nil
	}
	if action == "list" {
		return aa, nil
	}
	if len(ops) == 0 {
		ops = []string{"All"}
	}
	for _, o := range ops {
		op, err := kmsg.ParseACLOperation(o)
		if err != nil || op == kmsg.ACLOperationAny || op == kmsg.ACLOperationUnknown {
			return aa, usageErrorf("--operation %q: unknown operation", o)
		}
		aa.ops = append(aa.ops, op)
	}
	for _, r := range aa.resources {
		for _, op := range aa.ops {
			if !slices.Contains(validOperations[r.typ], op) {
				return aa, usageErrorf("ResourceType %s only supports operations %s", resourceTypeName(r.typ), opNames(validOperations[r.typ]))
			}
		}
	}
	return aa, nil
}

func opNames(ops []kmsg.ACLOperation) string {
	s := make([]string, len(ops))
	for i, o := range ops {
		s[i] = o.String()
	}
	return strings.Join(s, ",")
}

func resourceTypeName(t kmsg.ACLResourceType) string {
	if t == kmsg.ACLResourceTypeTransactionalId {
		return "TRANSACTIONAL_ID"
	}
	return t.String()
}

// aclEntry is an ACE as kafka-acls.sh prints it.
type aclEntry struct {
	principal, host string
	op              kmsg.ACLOperation
	perm            kmsg.ACLPermissionType
}

func (e aclEntry) String() string {
	return fmt.Sprintf("(principal=%s, host=%s, operation=%s, permissionType=%s)", e.principal, e.host, e.op, e.perm)
}

func patternString(typ kmsg.ACLResourceType, name string, pattern kmsg.ACLResourcePatternType) string {
	return fmt.Sprintf("ResourcePattern(resourceType=%s, name=%s, patternType=%s)", resourceTypeName(typ), name, pattern)
}

// entriesFor expands the principals, hosts and operations of aa for r: the
// explicit operations, or the --producer/--consumer roles.
func (aa aclArgs) entriesFor(r aclResource) []aclEntry {
	ops := aa.ops
	if aa.producer || aa.consumer {
		ops = nil
		switch r.typ {
		case kmsg.ACLResourceTypeTopic:
			if aa.producer {
				ops = append(ops, kmsg.ACLOperationWrite, kmsg.ACLOperationDescribe, kmsg.ACLOperationCreate)
			}
			if aa.consumer {
				ops = append(ops, kmsg.ACLOperationRead, kmsg.ACLOperationDescribe)
			}
		case kmsg.ACLResourceTypeGroup:
			if aa.consumer {
				ops = append(ops, kmsg.ACLOperationRead)
			}
		case kmsg.ACLResourceTypeTransactionalId:
			if aa.producer {
				ops = append(ops, kmsg.ACLOperationWrite, kmsg.ACLOperationDescribe)
			}
		case kmsg.ACLResourceTypeCluster:
			if aa.producer {
				ops = append(ops, kmsg.ACLOperationIdempotentWrite)
			}
		}
	}
	hostsOr := func(h []string) []string {
		if len(h) == 0 {
			return []string{"*"}
		}
		return h
	}
	var out []aclEntry
	for _, p := range aa.allow {
		for _, h := range hostsOr(aa.allowHosts) {
			for _, op := range ops {
				e := aclEntry{p, h, op, kmsg.ACLPermissionTypeAllow}
				if !slices.Contains(out, e) {
					out = append(out, e)
				}
			}
		}
	}
	for _, p := range aa.deny {
		for _, h := range hostsOr(aa.denyHosts) {
			for _, op := range ops {
				e := aclEntry{p, h, op, kmsg.ACLPermissionTypeDeny}
				if !slices.Contains(out, e) {
					out = append(out, e)
				}
			}
		}
	}
	return out
}

// allResources are the resources named, plus the cluster when
// --producer --idempotent needs it.
func (aa aclArgs) allResources(withCluster bool) []aclResource {
	rs := aa.resources
	if withCluster && !slices.ContainsFunc(rs, func(r aclResource) bool { return r.typ == kmsg.ACLResourceTypeCluster }) {
		rs = append(append([]aclResource(nil), rs...), aclResource{kmsg.ACLResourceTypeCluster, "kafka-cluster"})
	}
	return rs
}

func (a *admin) addACLs(ctx context.Context, out io.Writer, aa aclArgs) error {
	req := kmsg.NewPtrCreateACLsRequest()
	type added struct {
		r aclResource
		e []aclEntry
	}
	var plan []added
	for _, r := range aa.allResources(aa.producer && aa.idempotent) {
		es := aa.entriesFor(r)
		if len(es) == 0 {
			continue
		}
		plan = append(plan, added{r, es})
		for _, e := range es {
			c := kmsg.NewCreateACLsRequestCreation()
			c.ResourceType, c.ResourceName, c.ResourcePatternType = r.typ, r.name, aa.pattern
			c.Principal, c.Host, c.Operation, c.PermissionType = e.principal, e.host, e.op, e.perm
			req.Creations = append(req.Creations, c)
		}
	}
	for _, p := range plan {
		fmt.Fprintf(out, "Adding ACLs for resource `%s`: \n", patternString(p.r.typ, p.r.name, aa.pattern))
		for _, e := range p.e {
			fmt.Fprintf(out, " \t%s \n", e)
		}
		fmt.Fprintln(out)
	}
	resp, err := req.RequestWith(ctx, a.kcl)
	if err != nil {
		return fmt.Errorf("CreateAcls: %w", err)
	}
	var failed []string
	for i, r := range resp.Results {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			c := req.Creations[i]
			failed = append(failed, fmt.Sprintf("%s %s: %v", patternString(c.ResourceType, c.ResourceName, c.ResourcePatternType),
				aclEntry{c.Principal, c.Host, c.Operation, c.PermissionType}, withMessage(err, r.ErrorMessage)))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("CreateAcls: %s", strings.Join(failed, "; "))
	}
	return a.printCurrent(ctx, out, aa)
}

// filtersFor are DeleteAcls/DescribeAcls filters for aa: one per resource
// and entry, or per resource matching every entry when none is given.
func (aa aclArgs) filtersFor(r aclResource) []kmsg.DeleteACLsRequestFilter {
	es := aa.entriesFor(r)
	base := func() kmsg.DeleteACLsRequestFilter {
		f := kmsg.NewDeleteACLsRequestFilter()
		f.ResourceType, f.ResourceName, f.ResourcePatternType = r.typ, kmsg.StringPtr(r.name), aa.pattern
		f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		return f
	}
	if len(aa.allow) == 0 && len(aa.deny) == 0 {
		return []kmsg.DeleteACLsRequestFilter{base()}
	}
	var out []kmsg.DeleteACLsRequestFilter
	for _, e := range es {
		f := base()
		f.Principal, f.Host, f.Operation, f.PermissionType = kmsg.StringPtr(e.principal), kmsg.StringPtr(e.host), e.op, e.perm
		out = append(out, f)
	}
	return out
}

func (a *admin) removeACLs(ctx context.Context, out io.Writer, aa aclArgs) error {
	req := kmsg.NewPtrDeleteACLsRequest()
	for _, r := range aa.resources {
		req.Filters = append(req.Filters, aa.filtersFor(r)...)
	}
	resp, err := req.RequestWith(ctx, a.kcl)
	if err != nil {
		return fmt.Errorf("DeleteAcls: %w", err)
	}
	var failed []string
	for _, r := range resp.Results {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			failed = append(failed, withMessage(err, r.ErrorMessage).Error())
			continue
		}
		for _, m := range r.MatchingACLs {
			if err := kerr.ErrorForCode(m.ErrorCode); err != nil {
				failed = append(failed, withMessage(err, m.ErrorMessage).Error())
				continue
			}
			fmt.Fprintf(out, "Removed ACL for resource `%s`: \n \t%s \n\n", patternString(m.ResourceType, m.ResourceName, m.ResourcePatternType),
				aclEntry{m.Principal, m.Host, m.Operation, m.PermissionType})
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("DeleteAcls: %s", strings.Join(failed, "; "))
	}
	return a.printCurrent(ctx, out, aa)
}

// describe runs one DescribeAcls and groups the result by resource
// pattern, in the broker's order.
func (a *admin) describeACLs(ctx context.Context, typ kmsg.ACLResourceType, name *string, pattern kmsg.ACLResourcePatternType, principal *string) ([]string, map[string][]aclEntry, error) {
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourceName, req.ResourcePatternType = typ, name, pattern
	req.Principal, req.Operation, req.PermissionType = principal, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	resp, err := req.RequestWith(ctx, a.kcl)
	if err != nil {
		return nil, nil, fmt.Errorf("DescribeAcls: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, nil, fmt.Errorf("DescribeAcls: %w", withMessage(err, resp.ErrorMessage))
	}
	var order []string
	by := map[string][]aclEntry{}
	for _, r := range resp.Resources {
		k := patternString(r.ResourceType, r.ResourceName, r.ResourcePatternType)
		if _, ok := by[k]; !ok {
			order = append(order, k)
		}
		for _, e := range r.ACLs {
			by[k] = append(by[k], aclEntry{e.Principal, e.Host, e.Operation, e.PermissionType})
		}
	}
	return order, by, nil
}

// printCurrent lists the ACLs of aa's resources after --add/--remove.
func (a *admin) printCurrent(ctx context.Context, out io.Writer, aa aclArgs) error {
	for _, r := range aa.resources {
		order, by, err := a.describeACLs(ctx, r.typ, kmsg.StringPtr(r.name), aa.pattern, nil)
		if err != nil {
			return err
		}
		if len(order) == 0 {
			continue
		}
		for _, k := range order {
			fmt.Fprintf(out, "Current ACLs for resource `%s`: \n", k)
			for _, e := range by[k] {
				fmt.Fprintf(out, " \t%s \n", e)
			}
			fmt.Fprintln(out)
		}
	}
	return nil
}

func (a *admin) listACLs(ctx context.Context, out io.Writer, aa aclArgs) error {
	type query struct {
		typ  kmsg.ACLResourceType
		name *string
	}
	var qs []query
	for _, r := range aa.resources {
		qs = append(qs, query{r.typ, kmsg.StringPtr(r.name)})
	}
	pattern := aa.pattern
	if len(qs) == 0 {
		qs = []query{{kmsg.ACLResourceTypeAny, nil}}
		if !aa.patternSet() {
			pattern = kmsg.ACLResourcePatternTypeAny
		}
	}
	principals := []*string{nil}
	if len(aa.listPrincipals) > 0 {
		principals = nil
		for _, p := range aa.listPrincipals {
			principals = append(principals, kmsg.StringPtr(p))
		}
	}
	for _, p := range principals {
		for _, q := range qs {
			order, by, err := a.describeACLs(ctx, q.typ, q.name, pattern, p)
			if err != nil {
				return err
			}
			for _, k := range order {
				if p != nil {
					fmt.Fprintf(out, "ACLs for principal `%s`\n", *p)
				}
				fmt.Fprintf(out, "Current ACLs for resource `%s`: \n", k)
				for _, e := range by[k] {
					fmt.Fprintf(out, " \t%s \n", e)
				}
				fmt.Fprintln(out)
			}
		}
	}
	return nil
}

// patternSet is whether --resource-pattern-type was given (listing
// everything defaults to ANY then, as kafka-acls.sh --list does).
func (aa aclArgs) patternSet() bool { return aa.patternGiven }
