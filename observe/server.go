package observe

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kafkazk/broker/partition"
)

// Handler serves the three views:
//
//	/metrics         Prometheus text format
//	/v1/partitions   the View as JSON
//	/                the View as an HTML page that reloads itself
//	/debug/pprof/    Go's runtime profiles (CPU, heap, goroutines), for
//	                 `go tool pprof http://host:port/debug/pprof/profile?seconds=10`
func (o *Observer) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(o.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /v1/partitions", o.servePartitions)
	mux.HandleFunc("GET /{$}", o.servePage)
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	return mux
}

// View is the current picture of this broker's replicas.
func (o *Observer) View() View {
	var sts []partition.ReplicaStatus
	if o.cfg.Sources.Partitions != nil {
		sts = o.cfg.Sources.Partitions.PartitionStatus()
	}
	ctrl := o.cfg.Sources.Controller != nil && o.cfg.Sources.Controller.IsController()
	v := BuildView(o.cfg.BrokerID, ctrl, o.cfg.ReplicaLagTimeMax, sts, o.cfg.Now())
	if o.cfg.Sources.Quotas != nil {
		v.ReplicationThrottle = throttleView(o.cfg.Sources.Quotas)
	}
	return v
}

func (o *Observer) servePartitions(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(o.View())
}

// Server is the HTTP listener of the views.
type Server struct {
	srv *http.Server
}

// Serve serves Handler on ln until Close.
func (o *Observer) Serve(ln net.Listener) *Server {
	s := &Server{
		srv: &http.Server{Handler: o.Handler(), ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute},
	}
	go func() { _ = s.srv.Serve(ln) }() // returns ErrServerClosed after Close
	return s
}

// Close stops the listener, giving requests in progress a second. Safe to
// call twice.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = s.srv.Close()
	}
	return err
}
