package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// readyTimeout bounds one readiness check, so that a hung dependency makes the probe fail
// instead of piling up probe requests.
const readyTimeout = 2 * time.Second

// NewOpsHandler serves the ops listener: /metrics (Prometheus), /livez (the process serves
// HTTP) and /readyz (ready(ctx) returns nil: the dependencies answer). It is a separate listener
// from the API so that it needs no client authentication and is never exposed to clients.
//
// With profiling, /debug/pprof/ serves Go's profiles too: they show the code and its timing,
// never request data, and stay off unless the operator asks (they cost nothing until fetched).
func NewOpsHandler(reg prometheus.Gatherer, ready func(context.Context) error, profiling bool) http.Handler {
	mux := http.NewServeMux()
	if profiling {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, _ *http.Request) {
		writeOpsJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if ready != nil {
			ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
			defer cancel()
			if err := ready(ctx); err != nil {
				// The ops listener is internal: the reason helps the operator and reaches no client.
				writeOpsJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "error": err.Error()})
				return
			}
		}
		writeOpsJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	return mux
}

func writeOpsJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
