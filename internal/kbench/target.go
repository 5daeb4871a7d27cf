package kbench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Target is a cluster to benchmark: a bootstrap list and an admin client.
type Target struct {
	Name      string
	Bootstrap []string
	// RF is min(3, brokers); MinInsync is min(2, RF).
	RF, MinInsync int
	// Conn are the connection options every client of this target gets
	// beside the seeds: TLS and SASL for a secured listener (clientconf.Opts).
	Conn []kgo.Opt

	cl  *kgo.Client
	adm *kadm.Client
}

// NewTarget connects to a cluster and counts its brokers; conn are the
// connection options of every client (nil: PLAINTEXT).
func NewTarget(ctx context.Context, name string, bootstrap []string, conn ...kgo.Opt) (*Target, error) {
	t := &Target{Name: name, Bootstrap: bootstrap, Conn: conn}
	cl, err := kgo.NewClient(t.seeds()...)
	if err != nil {
		return nil, err
	}
	t.cl, t.adm = cl, kadm.NewClient(cl)
	var md kadm.Metadata
	for attempt := 0; ; attempt++ {
		md, err = t.adm.BrokerMetadata(ctx)
		if err == nil && len(md.Brokers) > 0 {
			break
		}
		if attempt == 20 || ctx.Err() != nil {
			cl.Close()
			return nil, fmt.Errorf("%s: metadata from %s: %v", name, strings.Join(bootstrap, ","), err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.RF = min(3, len(md.Brokers))
	t.MinInsync = min(2, t.RF)
	return t, nil
}

// seeds are the options every client of t starts from: the bootstrap list
// and the connection options, then extra.
func (t *Target) seeds(extra ...kgo.Opt) []kgo.Opt {
	out := append([]kgo.Opt{kgo.SeedBrokers(t.Bootstrap...)}, t.Conn...)
	return append(out, extra...)
}

// Close closes the admin client.
func (t *Target) Close() { t.cl.Close() }

// CreateTopic creates a topic with RF replicas and min.insync.replicas, and
// waits until every partition has a leader and a full ISR.
func (t *Target) CreateTopic(ctx context.Context, topic string, partitions int) error {
	return t.CreateTopicConfigs(ctx, topic, partitions, nil)
}

// CreateTopicConfigs is CreateTopic with more topic configs.
func (t *Target) CreateTopicConfigs(ctx context.Context, topic string, partitions int, configs map[string]string) error {
	minISR := strconv.Itoa(t.MinInsync)
	cfg := map[string]*string{"min.insync.replicas": &minISR}
	for k, v := range configs {
		cfg[k] = &v
	}
	resp, err := t.adm.CreateTopic(ctx, int32(partitions), int16(t.RF), cfg, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("%s: create topic %s: %w", t.Name, topic, err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		why := t.notReady(ctx, topic, partitions)
		if why == "" {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s: topic %s not ready: %s", t.Name, topic, why)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// notReady says why topic is not ready, or "" when it is.
func (t *Target) notReady(ctx context.Context, topic string, partitions int) string {
	md, err := t.adm.Metadata(ctx, topic)
	if err != nil {
		return err.Error()
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil {
		return fmt.Sprintf("topic: %v", td.Err)
	}
	if len(td.Partitions) != partitions {
		return fmt.Sprintf("%d of %d partitions", len(td.Partitions), partitions)
	}
	for _, p := range td.Partitions {
		if p.Err != nil || p.Leader < 0 || len(p.ISR) < t.RF {
			return fmt.Sprintf("partition %d: leader %d, isr %v, err %v", p.Partition, p.Leader, p.ISR, p.Err)
		}
	}
	return ""
}

// DeleteTopic deletes topic; failures are returned but are not fatal to a run.
func (t *Target) DeleteTopic(ctx context.Context, topic string) error {
	resp, err := t.adm.DeleteTopics(ctx, topic)
	if err != nil {
		return err
	}
	for _, r := range resp {
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}

// endOffsets returns each partition's end offset.
func (t *Target) endOffsets(ctx context.Context, topic string) (map[int32]int64, error) {
	// A leader named in Metadata may not have applied its LeaderAndIsr yet
	// (the controller tells each broker on its own queue), and answers
	// UNKNOWN_TOPIC_OR_PARTITION meanwhile: retry retriable errors, as
	// clients do, for a few seconds.
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := t.listEndOffsets(ctx, topic)
		if err == nil || !kerr.IsRetriable(err) || time.Now().After(deadline) || ctx.Err() != nil {
			return out, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (t *Target) listEndOffsets(ctx context.Context, topic string) (map[int32]int64, error) {
	listed, err := t.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	if err := listed.Error(); err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	listed.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	if len(out) == 0 {
		return nil, errors.New("no partitions listed")
	}
	return out, nil
}
