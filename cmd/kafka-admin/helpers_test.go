package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeCluster is a kfake cluster of 3 brokers (ids 0, 1, 2) with the
// given topics, each with 3 partitions and replication factor 3.
type fakeCluster struct {
	*kfake.Cluster
	bootstrap string

	mu   sync.Mutex
	seen map[int16][]kmsg.Request                   // requests observed by record and answer, by key
	fns  map[int16]func(kmsg.Request) kmsg.Response // answer's current answers
}

func newFakeCluster(t *testing.T, topics ...string) *fakeCluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	fc := &fakeCluster{Cluster: c, bootstrap: strings.Join(c.ListenAddrs(), ","), seen: make(map[int16][]kmsg.Request), fns: make(map[int16]func(kmsg.Request) kmsg.Response)}
	if len(topics) > 0 {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := kadm.NewClient(cl).CreateTopics(ctx, 3, 3, nil, topics...)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatalf("create topics: %v", err)
		}
	}
	return fc
}

// record keeps every request of key, then lets kfake answer it.
func (fc *fakeCluster) record(key int16) {
	fc.ControlKey(key, func(req kmsg.Request) (kmsg.Response, error, bool) {
		fc.KeepControl()
		fc.mu.Lock()
		fc.seen[key] = append(fc.seen[key], req)
		fc.mu.Unlock()
		return nil, nil, false
	})
}

// answer answers every request of key with fn, keeping the requests; a
// later answer for the same key replaces fn.
func (fc *fakeCluster) answer(key int16, fn func(kmsg.Request) kmsg.Response) {
	fc.mu.Lock()
	_, registered := fc.fns[key]
	fc.fns[key] = fn
	fc.mu.Unlock()
	if registered {
		return
	}
	fc.ControlKey(key, func(req kmsg.Request) (kmsg.Response, error, bool) {
		fc.KeepControl()
		fc.mu.Lock()
		fc.seen[key] = append(fc.seen[key], req)
		fn := fc.fns[key]
		fc.mu.Unlock()
		return fn(req), nil, true
	})
}

func (fc *fakeCluster) requests(key int16) []kmsg.Request {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return append([]kmsg.Request(nil), fc.seen[key]...)
}

// okAlterConfigs answers IncrementalAlterConfigs with success for every
// resource: kfake refuses the throttle keys, which this broker serves.
func okAlterConfigs(req kmsg.Request) kmsg.Response {
	r := req.(*kmsg.IncrementalAlterConfigsRequest)
	resp := r.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, rr := range r.Resources {
		sr := kmsg.NewIncrementalAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		resp.Resources = append(resp.Resources, sr)
	}
	return resp
}

// alterOps flattens recorded IncrementalAlterConfigs requests into
// "TYPE name op key=value" strings, sorted, for comparison.
func alterOps(reqs []kmsg.Request) []string {
	var out []string
	for _, req := range reqs {
		for _, rr := range req.(*kmsg.IncrementalAlterConfigsRequest).Resources {
			for _, c := range rr.Configs {
				v := "<nil>"
				if c.Value != nil {
					v = *c.Value
				}
				out = append(out, rr.ResourceType.String()+" "+rr.ResourceName+" "+c.Op.String()+" "+c.Name+"="+v)
			}
		}
	}
	slices.Sort(out)
	return out
}

// runAdmin runs the command line and returns exit status, stdout, stderr.
func runAdmin(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code := run(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
