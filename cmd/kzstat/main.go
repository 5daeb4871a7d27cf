// Command kzstat prints the cluster's partitions, one line each, from every
// broker's /v1/partitions (http.listener): leader, leader epoch, AR, ISR,
// OSR, HW and each replica's LEO as that replica reports it. It is what
// `scripts/cluster.sh status` shows; `watch scripts/cluster.sh status`
// follows a failover or an ISR shrink live.
//
//	kzstat [-timeout 1s] ID=URL ...     e.g. kzstat 0=http://127.0.0.1:8080 1=http://127.0.0.1:8081
//
// The leader's view gives leader, epoch, AR, ISR and HW. A replica whose
// broker does not answer (paused, killed) shows the LEO its leader last saw
// in its fetches, marked *; a partition whose leader does not answer is
// shown from a follower's view, marked "(leader not answering)".
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kafkazk/broker/observe"
)

type source struct {
	id  int32
	url string
}

type result struct {
	view observe.View
	err  error
}

func main() {
	timeout := flag.Duration("timeout", time.Second, "per-broker HTTP timeout")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: kzstat [-timeout 1s] ID=URL ...")
		flag.PrintDefaults()
	}
	flag.Parse()
	var srcs []source
	for _, arg := range flag.Args() {
		id, url, ok := strings.Cut(arg, "=")
		n, err := strconv.ParseInt(id, 10, 32)
		if !ok || err != nil || url == "" {
			fmt.Fprintf(os.Stderr, "kzstat: want ID=URL, got %q\n", arg)
			os.Exit(2)
		}
		srcs = append(srcs, source{int32(n), strings.TrimRight(url, "/")})
	}
	if len(srcs) == 0 {
		flag.Usage()
		os.Exit(2)
	}
	results := fetchAll(srcs, *timeout)
	answered := 0
	for _, s := range srcs {
		if r := results[s.id]; r.err != nil {
			fmt.Fprintf(os.Stderr, "kzstat: broker %d: %v\n", s.id, r.err)
		} else {
			answered++
		}
	}
	if answered == 0 {
		fmt.Fprintln(os.Stderr, "kzstat: no broker answered")
		os.Exit(1)
	}
	printTable(os.Stdout, results)
}

func fetchAll(srcs []source, timeout time.Duration) map[int32]result {
	out := make(map[int32]result, len(srcs))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, s := range srcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := fetch(s.url+"/v1/partitions", timeout)
			mu.Lock()
			out[s.id] = result{v, err}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

func fetch(url string, timeout time.Duration) (observe.View, error) {
	var v observe.View
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return v, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return v, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return v, err
	}
	if resp.StatusCode != http.StatusOK {
		return v, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return v, json.Unmarshal(body, &v)
}

type tpKey struct {
	topic     string
	partition int32
}

// replicaView is one broker's report of one partition.
type replicaView struct {
	broker int32
	p      observe.PartitionView
}

func printTable(w io.Writer, results map[int32]result) {
	byTP := map[tpKey][]replicaView{}
	for id, r := range results {
		if r.err != nil {
			continue
		}
		for _, p := range r.view.Partitions {
			k := tpKey{p.Topic, p.Partition}
			byTP[k] = append(byTP[k], replicaView{id, p})
		}
	}
	keys := make([]tpKey, 0, len(byTP))
	for k := range byTP {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b tpKey) int {
		return cmp.Or(strings.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
	})
	fmt.Fprintf(w, "%-30s %9s %7s %12s  %-10s %-10s %-8s %8s  %s\n",
		"topic", "partition", "leader", "leader_epoch", "replicas", "isr", "osr", "hw", "leo")
	starred := false
	for _, k := range keys {
		views := byTP[k]
		// The newest epoch's leader report wins; else the newest follower's.
		slices.SortFunc(views, func(a, b replicaView) int {
			return cmp.Or(cmp.Compare(b.p.LeaderEpoch, a.p.LeaderEpoch),
				cmp.Compare(roleRank(a.p.Role), roleRank(b.p.Role)), cmp.Compare(a.broker, b.broker))
		})
		best := views[0].p
		note := ""
		if best.Role != "leader" {
			note = "  (leader not answering)"
		}
		leos := make([]string, 0, len(best.Replicas))
		for _, id := range best.Replicas {
			leos = append(leos, leoOf(id, views, best, &starred))
		}
		fmt.Fprintf(w, "%-30s %9d %7d %12d  %-10s %-10s %-8s %8d  %s%s\n",
			k.topic, k.partition, best.Leader, best.LeaderEpoch, ids(best.Replicas), ids(best.ISR), ids(best.OSR),
			best.HighWatermark, strings.Join(leos, " "), note)
	}
	if len(keys) == 0 {
		fmt.Fprintln(w, "no partitions")
	}
	if starred {
		fmt.Fprintln(w, "* the LEO the leader last saw in that replica's fetches (its broker is not answering)")
	}
}

func roleRank(role string) int {
	if role == "leader" {
		return 0
	}
	return 1
}

// leoOf is "id:LEO" from the replica's own report, or from the leader's
// follower state (marked *), or "id:?".
func leoOf(id int32, views []replicaView, leader observe.PartitionView, starred *bool) string {
	for _, v := range views {
		if v.broker == id {
			return fmt.Sprintf("%d:%d", id, v.p.LogEndOffset)
		}
	}
	if leader.Role == "leader" {
		for _, f := range leader.Followers {
			if f.BrokerID == id && f.LogEndOffset >= 0 {
				*starred = true
				return fmt.Sprintf("%d:%d*", id, f.LogEndOffset)
			}
		}
	}
	return fmt.Sprintf("%d:?", id)
}

func ids(s []int32) string {
	parts := make([]string, len(s))
	for i, id := range s {
		parts[i] = strconv.Itoa(int(id))
	}
	return "[" + strings.Join(parts, ",") + "]"
}
