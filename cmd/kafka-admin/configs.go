package main

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const configsAbout = `Describe or alter the configs of a topic, a broker, the cluster-wide broker default, a broker's loggers, or a user's SCRAM credentials (kafka-configs.sh).

  --entity-type topics|brokers|broker-loggers|users  --entity-name NAME | --entity-default (brokers)
  --describe [--all]
  --alter --add-config k1=v1,k2=[v1,v2] | --delete-config k1,k2
  users: --alter --add-config 'SCRAM-SHA-512=[iterations=8192,password=P]' | --delete-config SCRAM-SHA-512
         (AlterUserScramCredentials; with --zookeeper HOST:PORT[/chroot] instead of --bootstrap-server the
         credential znode is written directly, as for the first user of a cluster)`

// The entity types served, as kafka-configs.sh names them.
const (
	entityTopics        = "topics"
	entityBrokers       = "brokers"
	entityBrokerLoggers = "broker-loggers"
)

// configArgs is a checked configs command line.
type configArgs struct {
	entityType string
	name       string // "" with --entity-default (the <default> broker resource)
	hasName    bool
	isDefault  bool
	describe   bool
	all        bool
	add        [][2]string // key, value in command-line order
	del        []string
}

func cmdConfigs(ctx context.Context, args []string, out io.Writer) error {
	f := newFlags("configs", configsAbout)
	f.Bool("describe", false, "List configs for the given entity.")
	f.Bool("alter", false, "Alter the configuration for the entity.")
	f.Bool("all", false, "List all configs for the given entity, including static configs if available.")
	entityType := f.String("entity-type", "", "Type of entity (topics/brokers/broker-loggers)")
	entityName := f.String("entity-name", "", "Name of entity (topic name/broker id)")
	f.Bool("entity-default", false, "Default entity name for brokers (the cluster-wide dynamic broker config)")
	addConfig := f.String("add-config", "", "Key Value pairs of configs to add. Square brackets can be used to group values which contain commas: 'k1=v1,k2=[v1,v2,v2],k3=v3'.")
	var deleteConfig stringsFlag
	f.Var(&deleteConfig, "delete-config", "config keys to remove 'k1,k2'")
	zookeeper := f.String("zookeeper", "", "With --entity-type users --alter: write the SCRAM credentials to ZooKeeper HOST:PORT[/chroot] directly, as kafka-configs.sh --zookeeper (digest auth from the Client section of the JAAS file in KAFKA_OPTS).")
	if err := f.parse(args); err != nil {
		return err
	}
	ca, err := checkConfigArgs(f, *entityType, *entityName, *addConfig, deleteConfig)
	if err != nil {
		return err
	}
	if ca.entityType == entityUsers {
		if _, _, err := parseScramConfigs(ca.add, ca.del); err != nil {
			return err
		}
		if f.set["zookeeper"] {
			return alterUsersInZooKeeper(ctx, out, *zookeeper, ca)
		}
		keys := []int16{50}
		if !ca.describe {
			keys = []int16{51}
		}
		return withAdmin(ctx, f.target(), keys, func(ctx context.Context, a *admin) error {
			if ca.describe {
				return a.describeUsers(ctx, out, ca)
			}
			return a.alterUsers(ctx, out, ca)
		})
	}
	keys := []int16{32}
	if !ca.describe {
		keys = append(keys, 44)
	}
	return withAdmin(ctx, f.target(), keys, func(ctx context.Context, a *admin) error {
		if ca.describe {
			return a.describeConfigs(ctx, out, ca)
		}
		return a.alterConfigs(ctx, out, ca)
	})
}

// checkConfigArgs applies kafka-configs.sh's checkArgs to the flags.
func checkConfigArgs(f *flags, entityType, entityName, addConfig string, deleteConfig []string) (configArgs, error) {
	action, err := f.action("describe", "alter")
	if err != nil {
		return configArgs{}, err
	}
	ca := configArgs{entityType: entityType, name: entityName, hasName: f.set["entity-name"], isDefault: f.set["entity-default"], describe: action == "describe", all: f.set["all"]}
	zkMode := f.set["zookeeper"]
	switch {
	case zkMode && f.bootstrap != "":
		return ca, usageErrorf("Only one of --bootstrap-server or --zookeeper must be specified")
	case zkMode && (entityType != entityUsers || ca.describe):
		return ca, usageErrorf("--zookeeper is supported only with --entity-type users --alter (the first SCRAM credentials of a cluster)")
	case !zkMode && f.bootstrap == "":
		return ca, usageErrorf("One of the required --bootstrap-server or --zookeeper arguments must be specified")
	}
	if ca.describe {
		if err := f.permit(action, "all", "entity-type", "entity-name", "entity-default"); err != nil {
			return ca, err
		}
	} else if err := f.permit(action, "entity-type", "entity-name", "entity-default", "add-config", "delete-config", "zookeeper"); err != nil {
		return ca, err
	}
	switch entityType {
	case entityTopics, entityBrokers, entityBrokerLoggers, entityUsers:
	case "":
		return ca, usageErrorf("At least one entity type must be specified")
	default:
		return ca, usageErrorf("Invalid entity type %s, the entity type must be one of %s, %s, %s, %s with a --bootstrap-server argument",
			entityType, entityTopics, entityBrokers, entityBrokerLoggers, entityUsers)
	}
	if entityType == entityUsers && ca.isDefault {
		return ca, usageErrorf("--entity-default is not supported for users (no user quotas)")
	}
	if ca.hasName && ca.isDefault {
		return ca, usageErrorf("Only one of --entity-name and --entity-default may be given for one --entity-type")
	}
	if ca.hasName && entityType != entityTopics && entityType != entityUsers {
		if _, err := strconv.ParseInt(entityName, 10, 32); err != nil {
			return ca, usageErrorf("The entity name for %s must be a valid integer broker id, but it is: %s", entityType, entityName)
		}
	}
	if ca.hasName && (entityType == entityTopics || entityType == entityUsers) && entityName == "" {
		return ca, usageErrorf("An entity name must be specified with --%s of %s", action, entityType)
	}
	if ca.describe {
		if ca.isDefault && entityType != entityBrokers {
			return ca, usageErrorf("--entity-default must not be specified with --describe of %s", entityType)
		}
		if entityType == entityBrokerLoggers && !ca.hasName {
			return ca, usageErrorf("An entity name must be specified with --describe of %s", entityType)
		}
		return ca, nil
	}
	switch {
	case entityType == entityBrokers && !ca.hasName && !ca.isDefault:
		return ca, usageErrorf("An entity-name or default entity must be specified with --alter of users, clients, brokers or ips")
	case entityType != entityBrokers && !ca.hasName:
		return ca, usageErrorf("An entity name must be specified with --alter of %s", entityType)
	case !f.set["add-config"] && !f.set["delete-config"]:
		return ca, usageErrorf("At least one of --add-config, --add-config-file, or --delete-config must be specified with --alter")
	}
	if f.set["add-config"] {
		if ca.add, err = parseAddConfig(addConfig); err != nil {
			return ca, err
		}
	}
	for _, d := range deleteConfig {
		for _, k := range strings.Split(d, ",") {
			if k = strings.TrimSpace(k); k != "" {
				ca.del = append(ca.del, k)
			}
		}
	}
	return ca, nil
}

var configKeyRE = regexp.MustCompile(`^[a-zA-Z0-9._-]*$`)

// parseAddConfig splits 'k1=v1,k2=[v1,v2],k3=v3' as kafka-configs.sh does:
// on commas and '=' outside square brackets, each pair exactly key=value
// (the value may be empty), brackets then dropped from values.
func parseAddConfig(s string) ([][2]string, error) {
	var out [][2]string
	for _, pair := range splitOutsideBrackets(s, ',') {
		kv := splitOutsideBrackets(pair, '=')
		if len(kv) != 2 {
			return nil, usageErrorf(`Invalid entity config: all configs to be added must be in the format "key=val".`)
		}
		key := strings.TrimSpace(kv[0])
		if !configKeyRE.MatchString(key) {
			return nil, usageErrorf("Invalid character found for config key: %s", key)
		}
		value := strings.TrimSpace(strings.NewReplacer("[", "", "]", "").Replace(kv[1]))
		// A repeated key keeps its last value, as Kafka's Properties do
		// (one operation per key: a broker refuses duplicates).
		if i := slices.IndexFunc(out, func(e [2]string) bool { return e[0] == key }); i >= 0 {
			out[i][1] = value
			continue
		}
		out = append(out, [2]string{key, value})
	}
	return out, nil
}

// splitOutsideBrackets splits s at every sep that is not inside [...].
func splitOutsideBrackets(s string, sep byte) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			depth++
		case ']':
			if depth > 0 {
				depth--
			}
		case sep:
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// resourceType maps an entity type to DescribeConfigs' resource type.
func resourceType(entityType string) kmsg.ConfigResourceType {
	switch entityType {
	case entityBrokers:
		return kmsg.ConfigResourceTypeBroker
	case entityBrokerLoggers:
		return kmsg.ConfigResourceTypeBrokerLogger
	default:
		return kmsg.ConfigResourceTypeTopic
	}
}

// dynamicSource is the source --describe keeps without --all: what was set
// on this very resource. Broker loggers are shown whole.
func dynamicSource(entityType, name string) (kmsg.ConfigSource, bool) {
	switch {
	case entityType == entityTopics:
		return kmsg.ConfigSourceDynamicTopicConfig, true
	case entityType == entityBrokers && name == "":
		return kmsg.ConfigSourceDynamicDefaultBrokerConfig, true
	case entityType == entityBrokers:
		return kmsg.ConfigSourceDynamicBrokerConfig, true
	default:
		return 0, false
	}
}

// resourceConfig describes one resource, with synonyms, sorted by key;
// without all only the dynamic entries are kept.
func (a *admin) resourceConfig(ctx context.Context, entityType, name string, all bool) ([]kmsg.DescribeConfigsResponseResourceConfig, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms = true
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType = resourceType(entityType)
	rr.ResourceName = name
	req.Resources = append(req.Resources, rr)
	shards := a.kcl.RequestSharded(ctx, req)
	var configs []kmsg.DescribeConfigsResponseResourceConfig
	for _, sh := range shards {
		if sh.Err != nil {
			return nil, fmt.Errorf("DescribeConfigs %s %q: %w", entityType, name, sh.Err)
		}
		for _, r := range sh.Resp.(*kmsg.DescribeConfigsResponse).Resources {
			if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
				return nil, fmt.Errorf("DescribeConfigs %s %q: %w", entityType, name, withMessage(err, r.ErrorMessage))
			}
			configs = append(configs, r.Configs...)
		}
	}
	src, filter := dynamicSource(entityType, name)
	if filter && !all {
		configs = slices.DeleteFunc(configs, func(c kmsg.DescribeConfigsResponseResourceConfig) bool { return c.Source != src })
	}
	slices.SortFunc(configs, func(x, y kmsg.DescribeConfigsResponseResourceConfig) int { return strings.Compare(x.Name, y.Name) })
	return configs, nil
}

// formatConfig is one --describe line:
// "  name=value sensitive=false synonyms={SOURCE:name=value, ...}".
func formatConfig(c kmsg.DescribeConfigsResponseResourceConfig) string {
	syn := make([]string, len(c.ConfigSynonyms))
	for i, s := range c.ConfigSynonyms {
		syn[i] = fmt.Sprintf("%s:%s=%s", s.Source, s.Name, javaString(s.Value))
	}
	return fmt.Sprintf("  %s=%s sensitive=%t synonyms={%s}", c.Name, javaString(c.Value), c.IsSensitive, strings.Join(syn, ", "))
}

// javaString prints a nullable string as Java's string concatenation does.
func javaString(s *string) string {
	if s == nil {
		return "null"
	}
	return *s
}

// singular is kafka-configs.sh's entityType.dropRight(1): "topic", "broker", "broker-logger".
func singular(entityType string) string { return strings.TrimSuffix(entityType, "s") }

func (a *admin) describeConfigs(ctx context.Context, out io.Writer, ca configArgs) error {
	var names []string
	switch {
	case ca.hasName:
		names = []string{ca.name}
	case ca.isDefault:
		names = []string{""}
	case ca.entityType == entityTopics:
		topics, err := a.adm.ListTopicsWithInternal(ctx)
		if err != nil {
			return fmt.Errorf("Metadata: %w", err)
		}
		names = topics.Names()
	default:
		brokers, err := a.adm.ListBrokers(ctx)
		if err != nil {
			return fmt.Errorf("Metadata: %w", err)
		}
		for _, id := range brokers.NodeIDs() {
			names = append(names, strconv.Itoa(int(id)))
		}
		names = append(names, "")
	}
	for _, name := range names {
		configs, err := a.resourceConfig(ctx, ca.entityType, name, ca.all)
		if err != nil {
			return err
		}
		if name == "" && ca.entityType == entityBrokers {
			fmt.Fprintf(out, "Default configs for %s in the cluster are:\n", ca.entityType)
		} else {
			which := "Dynamic"
			if ca.all {
				which = "All"
			}
			fmt.Fprintf(out, "%s configs for %s %s are:\n", which, singular(ca.entityType), name)
		}
		for _, c := range configs {
			fmt.Fprintln(out, formatConfig(c))
		}
	}
	return nil
}

// alterConfigs checks the keys to delete against the resource's dynamic
// config (loggers: against its loggers) as kafka-configs.sh does, then
// sends one IncrementalAlterConfigs: SET for each added key, DELETE for
// each deleted one.
func (a *admin) alterConfigs(ctx context.Context, out io.Writer, ca configArgs) error {
	name := ca.name
	if ca.isDefault {
		name = ""
	}
	existing, err := a.resourceConfig(ctx, ca.entityType, name, false)
	if err != nil {
		return err
	}
	have := make(map[string]bool, len(existing))
	for _, c := range existing {
		have[c.Name] = true
	}
	var invalid []string
	for _, k := range ca.del {
		if !have[k] {
			invalid = append(invalid, k)
		}
	}
	if ca.entityType == entityBrokerLoggers {
		for _, kv := range ca.add {
			if !have[kv[0]] {
				invalid = append(invalid, kv[0])
			}
		}
		if len(invalid) > 0 {
			return fmt.Errorf("%w: Invalid broker logger(s): %s", kerr.InvalidConfig, strings.Join(invalid, ","))
		}
	} else if len(invalid) > 0 {
		return fmt.Errorf("%w: Invalid config(s): %s", kerr.InvalidConfig, strings.Join(invalid, ","))
	}

	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType = resourceType(ca.entityType)
	rr.ResourceName = name
	for _, kv := range ca.add {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value, c.Op = kv[0], kadm.StringPtr(kv[1]), kmsg.IncrementalAlterConfigOpSet
		rr.Configs = append(rr.Configs, c)
	}
	for _, k := range ca.del {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op = k, kmsg.IncrementalAlterConfigOpDelete
		rr.Configs = append(rr.Configs, c)
	}
	req.Resources = append(req.Resources, rr)
	for _, sh := range a.kcl.RequestSharded(ctx, req) {
		if sh.Err != nil {
			return fmt.Errorf("IncrementalAlterConfigs %s %q: %w", ca.entityType, name, sh.Err)
		}
		for _, r := range sh.Resp.(*kmsg.IncrementalAlterConfigsResponse).Resources {
			if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
				return fmt.Errorf("IncrementalAlterConfigs %s %q: %w", ca.entityType, name, withMessage(err, r.ErrorMessage))
			}
		}
	}
	if name == "" {
		fmt.Fprintf(out, "Completed updating default config for %s in the cluster.\n", ca.entityType)
	} else {
		fmt.Fprintf(out, "Completed updating config for %s %s.\n", singular(ca.entityType), name)
	}
	return nil
}
