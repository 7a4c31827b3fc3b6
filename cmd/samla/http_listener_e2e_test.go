package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/samla/samla/platform/httpapi"
)

// TestListenerAnswersHostileRequestsWithProblems drives the API listener as it is assembled
// (the sandbox beside the engine, the http.Server's own limits) with the requests an
// adversarial probe sent: every answer the server can still give is problem+json, and nothing
// redirects.
func TestListenerAnswersHostileRequestsWithProblems(t *testing.T) {
	svc := start(t, testConfig(t, t.TempDir()))
	defer stop(t, svc)
	base := "http://" + svc.HTTPAddr()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	send := func(method, path string, header http.Header) (int, http.Header, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header = header.Clone()
		if req.Header == nil {
			req.Header = http.Header{}
		}
		if req.Header.Get(httpapi.HeaderAPIKey) == "" {
			req.Header.Set(httpapi.HeaderAPIKey, testAPIKey)
		}
		res, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, res.Header, body
	}
	problem := func(what string, code int, h http.Header, body []byte, wantStatus int, wantCode string) {
		t.Helper()
		var p httpapi.Problem
		if code != wantStatus || !strings.HasPrefix(h.Get("Content-Type"), httpapi.ContentTypeProblem) ||
			json.Unmarshal(body, &p) != nil || p.Code != wantCode {
			t.Errorf("%s = %d %s %q, want a %d %s problem", what, code, h.Get("Content-Type"), body, wantStatus, wantCode)
		}
		if loc := h.Get("Location"); loc != "" {
			t.Errorf("%s redirects to %s", what, loc)
		}
	}

	t.Run("non-canonical paths", func(t *testing.T) {
		for _, path := range []string{
			"//collections/x/status", "/collections/./x/status", "/collections/../collections/x/status",
			"/collections/x/status/..", "/sandbox/../collections/x/status", "/sandbox//companies", "/sandbox/./companies",
		} {
			code, h, body := send(http.MethodGet, path, nil)
			problem("GET "+path, code, h, body, http.StatusNotFound, httpapi.CodeNotFound)
		}
		// The sandbox still answers beside the API, at its canonical paths.
		if code, _, body := send(http.MethodGet, "/sandbox/companies", nil); code != http.StatusOK {
			t.Errorf("GET /sandbox/companies = %d %s", code, body)
		}
	})

	t.Run("oversize headers", func(t *testing.T) {
		h := http.Header{}
		for i := range 12 { // 12 × 8 KiB: past Samla's 32 KiB, far below the server's bound
			h.Set(fmt.Sprintf("X-Filler-%d", i), strings.Repeat("v", httpapi.MaxHeaderValueBytes))
		}
		code, rh, body := send(http.MethodGet, "/companies", h)
		problem("headers of 96 KiB", code, rh, body, http.StatusRequestHeaderFieldsTooLarge, httpapi.CodeHeadersTooLarge)
		h = http.Header{"Cookie": {strings.Repeat("c", httpapi.MaxHeaderValueBytes+1)}}
		code, rh, body = send(http.MethodGet, "/companies", h)
		problem("one long header", code, rh, body, http.StatusRequestHeaderFieldsTooLarge, httpapi.CodeHeadersTooLarge)
	})

	// Past the servers' own bounds net/http refuses before any handler runs: it holds a
	// connection's header bytes until they end, so the bound is what a slow sender can make it
	// hold. The ops listener, whose callers send a few hundred bytes, has the lower one.
	t.Run("headers past the server's bound", func(t *testing.T) {
		long := http.Header{"X-Filler": {strings.Repeat("v", httpapi.ServerMaxHeaderBytes+8<<10)}}
		// net/http's own 431 is plain text; the engine's (below the bound) is problem+json.
		if code, h, body := send(http.MethodGet, "/companies", long); code != http.StatusRequestHeaderFieldsTooLarge ||
			strings.HasPrefix(h.Get("Content-Type"), httpapi.ContentTypeProblem) {
			t.Errorf("API headers past %d bytes = %d %s %s, want net/http's 431", httpapi.ServerMaxHeaderBytes, code, h.Get("Content-Type"), body)
		}
		req, err := http.NewRequest(http.MethodGet, "http://"+svc.OpsAddr()+"/livez", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Filler", strings.Repeat("v", httpapi.OpsMaxHeaderBytes+8<<10))
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		if res.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("ops headers past %d bytes = %d, want 431", httpapi.OpsMaxHeaderBytes, res.StatusCode)
		}
		if res, err := client.Get("http://" + svc.OpsAddr() + "/livez"); err != nil || res.StatusCode != http.StatusOK {
			t.Errorf("GET /livez = %v, %v", res, err)
		} else {
			_ = res.Body.Close()
		}
	})

	t.Run("duplicate credentials", func(t *testing.T) {
		h := http.Header{httpapi.HeaderAPIKey: {testAPIKey, "samla_sandbox_another_clients_key"}}
		code, rh, body := send(http.MethodGet, "/companies", h)
		problem("two Authorization-token headers", code, rh, body, http.StatusBadRequest, httpapi.CodeValidationFailed)
	})
}
