package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const topUsage = `kafka-admin: operate a cluster with the subcommands of Kafka's tools.

Usage: kafka-admin SUBCOMMAND --bootstrap-server HOST:PORT [flags]

Subcommands:
  reassign-partitions   generate, execute, verify, cancel or list partition reassignments
  leader-election       elect preferred or unclean leaders
  configs               describe or alter topic, broker and broker-logger configs
  consumer-groups       delete a group's committed offsets (--delete-offsets)
  transactions          list, describe and abort transactions; describe a partition's producers
  acls                  add, remove and list ACLs
  topics                create, delete, describe and list topics

Every subcommand takes --command-config FILE with Kafka client properties
(security.protocol, sasl.mechanism, sasl.jaas.config, ssl.truststore.location,
...) to talk to a secured cluster. SCRAM users: configs --entity-type users.

Run "kafka-admin SUBCOMMAND --help" for a subcommand's flags.
`

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// subcommand runs one subcommand: it parses args itself and writes its
// report to out.
type subcommand func(ctx context.Context, args []string, out io.Writer) error

var subcommands = map[string]subcommand{
	"reassign-partitions": cmdReassign,
	"leader-election":     cmdLeaderElection,
	"configs":             cmdConfigs,
	"consumer-groups":     cmdConsumerGroups,
	"transactions":        cmdTransactions,
	"acls":                cmdACLs,
	"topics":              cmdTopics,
}

// run is main without the process: it returns the exit status, 0 on
// success, 1 when a request failed, 2 for bad arguments.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, topUsage)
		return 2
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, topUsage)
		return 0
	}
	cmd, ok := subcommands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "kafka-admin: unknown subcommand %q\n\n%s", args[0], topUsage)
		return 2
	}
	err := cmd(ctx, args[1:], stdout)
	var help *helpRequest
	switch {
	case err == nil:
		return 0
	case errors.As(err, &help):
		fmt.Fprint(stdout, help.usage)
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "Error: %s\nRun \"kafka-admin %s --help\" for usage.\n", strings.TrimPrefix(err.Error(), "usage: "), args[0])
		return 2
	default:
		fmt.Fprintf(stderr, "Error: %v\n", err)
		return 1
	}
}

// helpRequest is returned by parse for --help: run prints usage, exit 0.
type helpRequest struct{ usage string }

func (h *helpRequest) Error() string { return "help requested" }

// flags wraps a FlagSet with what every subcommand needs: the
// --bootstrap-server flag, Kafka's one-action rule, and the flags the
// user actually gave.
type flags struct {
	*flag.FlagSet
	name      string
	about     string
	bootstrap string
	// commandConfig is --command-config: a file of Kafka client
	// properties (security.protocol, sasl.*, ssl.*).
	commandConfig string
	set           map[string]bool
}

// target is where and how to connect: the bootstrap servers and the
// client properties of --command-config.
type target struct {
	bootstrap     string
	commandConfig string
}

func (f *flags) target() target {
	return target{bootstrap: f.bootstrap, commandConfig: f.commandConfig}
}

func newFlags(name, about string) *flags {
	f := &flags{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError), name: name, about: about}
	f.SetOutput(io.Discard)
	f.StringVar(&f.bootstrap, "bootstrap-server", "", "REQUIRED: the broker(s) to connect to, host:port[,host:port...]")
	f.StringVar(&f.commandConfig, "command-config", "", "Property file of Kafka client configs (security.protocol, sasl.mechanism, sasl.jaas.config, ssl.truststore.location, ...) for a secured cluster.")
	return f
}

// usage is the subcommand's help text: what it does and each flag.
func (f *flags) usage() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\nUsage: kafka-admin %s [flags]\n\n", f.about, f.name)
	f.SetOutput(&b)
	f.PrintDefaults()
	f.SetOutput(io.Discard)
	return b.String()
}

func (f *flags) parse(args []string) error {
	if err := f.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return &helpRequest{usage: f.usage()}
		}
		return usageErrorf("%v", err)
	}
	if f.NArg() > 0 {
		return usageErrorf("unexpected argument %q", f.Arg(0))
	}
	f.set = make(map[string]bool)
	f.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	return nil
}

// action returns the one action flag given, as Kafka's tools demand
// ("Command must include exactly one action: ...").
func (f *flags) action(actions ...string) (string, error) {
	var given []string
	for _, a := range actions {
		if f.set[a] {
			given = append(given, a)
		}
	}
	if len(given) != 1 {
		return "", usageErrorf("Command must include exactly one action: --%s", strings.Join(actions, ", --"))
	}
	return given[0], nil
}

// permit fails for any flag given that is neither the action nor allowed
// with it ("Option "--x" can't be used with action "--y"").
func (f *flags) permit(action string, allowed ...string) error {
	var bad []string
	for name := range f.set {
		if name != action && name != "bootstrap-server" && name != "command-config" && !slices.Contains(allowed, name) {
			bad = append(bad, name)
		}
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		return usageErrorf("Option \"--%s\" can't be used with action \"--%s\"", bad[0], action)
	}
	return nil
}

// require fails when a flag the action needs is missing.
func (f *flags) require(names ...string) error {
	var missing []string
	for _, n := range names {
		if !f.set[n] {
			missing = append(missing, "--"+n)
		}
	}
	if len(missing) > 0 {
		return usageErrorf("Missing required argument(s): %s", strings.Join(missing, ", "))
	}
	return nil
}

// admin is a connection to the cluster: kadm for what it covers and the
// kgo client for requests kadm does not wrap (BROKER_LOGGER configs, an
// unfiltered ListPartitionReassignments).
type admin struct {
	adm   *kadm.Client
	kcl   *kgo.Client
	seeds []string
	// timeoutMillis is the TimeoutMillis of the requests that carry one.
	timeoutMillis int32
}

// requestTimeout bounds each subcommand's conversation with the cluster.
const requestTimeout = 60 * time.Second

func connect(tg target) (*admin, error) {
	bootstrap := tg.bootstrap
	if bootstrap == "" {
		return nil, usageErrorf("Missing required argument: --bootstrap-server")
	}
	var seeds []string
	for _, s := range strings.Split(bootstrap, ",") {
		if s = strings.TrimSpace(s); s != "" {
			seeds = append(seeds, s)
		}
	}
	secOpts, err := commandConfigOpts(tg.commandConfig)
	if err != nil {
		return nil, err
	}
	kcl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.ClientID("kafka-admin"),
		kgo.RetryTimeout(15 * time.Second),
		kgo.DialTimeout(5 * time.Second),
	}, secOpts...)...)
	if err != nil {
		return nil, usageErrorf("--bootstrap-server %q: %v", bootstrap, err)
	}
	adm := kadm.NewClient(kcl)
	adm.SetTimeoutMillis(30000)
	return &admin{adm: adm, kcl: kcl, seeds: seeds, timeoutMillis: 30000}, nil
}

// withDeadline bounds the rest of the conversation by d (a --timeout) and
// makes it the TimeoutMillis of the requests that carry one.
func (a *admin) withDeadline(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	a.timeoutMillis = int32(d.Milliseconds())
	a.adm.SetTimeoutMillis(a.timeoutMillis)
	return context.WithTimeout(ctx, d)
}

func (a *admin) close() { a.kcl.Close() }

// withAdmin connects, checks that the cluster serves the API keys the
// action needs, runs fn under requestTimeout, and closes.
func withAdmin(ctx context.Context, tg target, keys []int16, fn func(context.Context, *admin) error) error {
	a, err := connect(tg)
	if err != nil {
		return err
	}
	defer a.close()
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	if err := a.requireAPIs(ctx, keys); err != nil {
		return err
	}
	return fn(ctx, a)
}

// requireAPIs fails with UNSUPPORTED_VERSION, naming the request, when no
// broker advertises one of keys in ApiVersions: clearer than the client's
// "broker is too old" once the request is sent.
func (a *admin) requireAPIs(ctx context.Context, keys []int16) error {
	if len(keys) == 0 {
		return nil
	}
	versions, err := a.adm.ApiVersions(ctx)
	if err != nil {
		return fmt.Errorf("ApiVersions: %w", err)
	}
	for _, key := range keys {
		served, answered := false, false
		versions.Each(func(v kadm.BrokerApiVersions) {
			if v.Err != nil {
				return
			}
			answered = true
			if _, ok := v.KeyMaxVersion(key); ok {
				served = true
			}
		})
		if !answered {
			return fmt.Errorf("ApiVersions: no broker answered at %s", strings.Join(a.seeds, ","))
		}
		if !served {
			return fmt.Errorf("%w: the cluster does not serve %s (API key %d)", kerr.UnsupportedVersion, apiName(key), key)
		}
	}
	return nil
}

// apiName is the request's name in Kafka's protocol (kmsg says
// AlterPartitionAssignments for AlterPartitionReassignments).
func apiName(key int16) string {
	if key == 45 {
		return "AlterPartitionReassignments"
	}
	return kmsg.NameForKey(key)
}
