package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The embedded sandbox's client opens at most embeddedSandboxConns connections however many
// requests are in flight; the others wait for one and all are answered.
func TestEmbeddedSandboxClientBoundsConnections(t *testing.T) {
	var open, most atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(5 * time.Millisecond) // a company's latency: requests pile up meanwhile
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			n := open.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	srv.Start()
	defer srv.Close()
	client := embeddedSandboxClient()
	defer client.CloseIdleConnections()
	const requests = 4 * embeddedSandboxConns
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range requests {
		wg.Go(func() {
			resp, err := client.Get(srv.URL)
			if err != nil {
				failed.Add(1)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNoContent {
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d of %d requests failed", n, requests)
	}
	if m := most.Load(); m > embeddedSandboxConns {
		t.Fatalf("%d connections open at once, want at most %d", m, embeddedSandboxConns)
	}
}
