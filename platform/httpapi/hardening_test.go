package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/gin-gonic/gin"
)

func TestDuplicateAPIKeysAreRefusedBeforeLookup(t *testing.T) {
	env := newEnv(t, nil)
	for _, second := range []string{"other-clients-key", testKey} {
		req := httptest.NewRequest(http.MethodGet, "/whoami", nil)
		req.Header.Add(HeaderAPIKey, testKey)
		req.Header.Add(HeaderAPIKey, second)
		w := httptest.NewRecorder()
		env.engine.ServeHTTP(w, req)
		p := decodeProblem(t, w, http.StatusBadRequest, CodeValidationFailed)
		if len(p.Errors) != 1 || p.Errors[0].Field != HeaderAPIKey {
			t.Errorf("errors = %+v, want one on %s", p.Errors, HeaderAPIKey)
		}
	}
	if n := env.keys.callCount(); n != 0 {
		t.Errorf("%d key lookups for duplicate credentials, want none", n)
	}
	// /health needs no key, so what is sent there does not matter.
	req := httptest.NewRequest(http.MethodGet, "/health", nil)
	req.Header.Add(HeaderAPIKey, "a")
	req.Header.Add(HeaderAPIKey, "b")
	w := httptest.NewRecorder()
	env.engine.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		t.Errorf("/health with two keys = %d", w.Code)
	}
}

func TestOversizeHeadersAre431Problems(t *testing.T) {
	env := newEnv(t, nil)
	// Many headers, each within its bound, past the total.
	many := authed()
	for i := 0; i < MaxHeaderBytes/MaxHeaderValueBytes+1; i++ {
		many[fmt.Sprintf("X-Filler-%d", i)] = strings.Repeat("v", MaxHeaderValueBytes)
	}
	decodeProblem(t, env.do(t, http.MethodGet, "/whoami", "", many), http.StatusRequestHeaderFieldsTooLarge, CodeHeadersTooLarge)

	// One value past its bound, named without its value.
	long := strings.Repeat("c", MaxHeaderValueBytes+1)
	w := env.do(t, http.MethodGet, "/whoami", "", authed("Cookie", long))
	p := decodeProblem(t, w, http.StatusRequestHeaderFieldsTooLarge, CodeHeadersTooLarge)
	if !strings.Contains(p.Detail, "Cookie") || strings.Contains(w.Body.String(), long[:100]) {
		t.Errorf("problem = %+v", p)
	}
	// Refused before authentication: no lookup for a request that is refused anyway.
	if n := env.keys.callCount(); n != 0 {
		t.Errorf("%d key lookups, want none", n)
	}
	// Within the bounds all is well.
	if w := env.do(t, http.MethodGet, "/whoami", "", authed("Cookie", long[:MaxHeaderValueBytes])); w.Code != http.StatusOK {
		t.Errorf("headers within the bounds = %d %s", w.Code, w.Body)
	}
}

func TestCanonicalPath(t *testing.T) {
	for p, want := range map[string]bool{
		"/": true, "/collections": true, "/collections/x/status": true, "/collections/": true,
		"/a.b/..c/...": true, "": false, "*": false, "collections": false,
		"//collections": false, "/collections//x": false, "/collections/x//": false,
		"/./collections": false, "/collections/./x": false, "/collections/x/.": false,
		"/../collections": false, "/collections/../x": false, "/collections/x/..": false,
	} {
		if got := CanonicalPath(p); got != want {
			t.Errorf("CanonicalPath(%q) = %v, want %v", p, got, want)
		}
	}
}

func TestNonCanonicalPathsAre404ProblemsWithoutRedirect(t *testing.T) {
	env := newEnv(t, nil)
	env.engine.GET("/collections/:collectionId/status", func(c *gin.Context) { c.String(http.StatusOK, c.Param("collectionId")) })
	for _, path := range []string{
		"//collections/x/status", "/collections//status", "/collections/./status", "/collections/../status",
		"/collections/x/./status", "/./whoami", "/x/../whoami", "/whoami/.", "/collections/%2e%2e/status",
	} {
		for _, headers := range []map[string]string{authed(), nil} {
			w := env.do(t, http.MethodGet, path, "", headers)
			decodeProblem(t, w, http.StatusNotFound, CodeNotFound)
			if loc := w.Header().Get("Location"); loc != "" {
				t.Errorf("%s: Location %q", path, loc)
			}
		}
	}
	if n := env.keys.callCount(); n != 0 {
		t.Errorf("%d key lookups for paths that name nothing, want none", n)
	}
	if v := counterValue(env.m.HTTPRequests.WithLabelValues("GET", "/collections/:collectionId/status", "404")); v != 0 {
		t.Errorf("a refused path counted under the route it matched: %v", v)
	}
}

// recordingHandler keeps the log records of a test and signals each access-log line.
type recordingHandler struct {
	mu      *sync.Mutex
	records *[]slog.Record
	access  chan slog.Record
	attrs   []slog.Attr
}

func newRecordingHandler() *recordingHandler {
	return &recordingHandler{mu: &sync.Mutex{}, records: new([]slog.Record), access: make(chan slog.Record, 16)}
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	r = r.Clone()
	r.AddAttrs(h.attrs...)
	h.mu.Lock()
	*h.records = append(*h.records, r)
	h.mu.Unlock()
	if r.Message == "http request" {
		h.access <- r
	}
	return nil
}

func (h *recordingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), attrs...)
	return &c
}

func (h *recordingHandler) WithGroup(string) slog.Handler { return h }

func (h *recordingHandler) all() []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]slog.Record(nil), *h.records...)
}

func attrOf(r slog.Record, key string) (slog.Value, bool) {
	var v slog.Value
	found := false
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v, found = a.Value, true
			return false
		}
		return true
	})
	return v, found
}

func TestClientThatGoesAwayIs499NotAnError(t *testing.T) {
	logs := newRecordingHandler()
	env := newEnv(t, func(o *Options) { o.Logger = slog.New(logs) })
	started := make(chan struct{})
	env.engine.POST("/slow", func(c *gin.Context) {
		close(started)
		<-c.Request.Context().Done() // the command's outcome is not known yet when the client leaves
		AbortInternal(c, fmt.Errorf("outcome unknown: %w", c.Request.Context().Err()))
	})
	srv := httptest.NewServer(env.engine)
	defer srv.Close()

	ctx, giveUp := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/slow", nil)
	req.Header.Set(HeaderAPIKey, testKey)
	done := make(chan error, 1)
	go func() {
		res, err := srv.Client().Do(req)
		if err == nil {
			res.Body.Close()
		}
		done <- err
	}()
	<-started
	giveUp()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("client error = %v, want context.Canceled", err)
	}

	access := <-logs.access
	if access.Level != slog.LevelWarn {
		t.Errorf("access log level = %v, want WARN", access.Level)
	}
	if v, _ := attrOf(access, "status"); v.Int64() != StatusClientClosedRequest {
		t.Errorf("access log status = %v, want 499", v)
	}
	if v, ok := attrOf(access, "written_status"); !ok || v.Int64() != http.StatusInternalServerError {
		t.Errorf("access log written_status = %v, want the 500 the handler wrote", v)
	}
	for _, r := range logs.all() {
		if r.Level >= slog.LevelError {
			t.Errorf("ERROR logged for a client that went away: %s", r.Message)
		}
	}
	if v := counterValue(env.m.HTTPRequests.WithLabelValues("POST", "/slow", "499")); v != 1 {
		t.Errorf("499 counted %v times, want 1", v)
	}
	if v := counterValue(env.m.HTTPRequests.WithLabelValues("POST", "/slow", "500")); v != 0 {
		t.Errorf("500 counted %v times, want 0", v)
	}
}

func TestCanceledOutsideTheClientIsStillAnError(t *testing.T) {
	logs := newRecordingHandler()
	env := newEnv(t, func(o *Options) { o.Logger = slog.New(logs) })
	env.engine.GET("/fails", func(c *gin.Context) {
		// A context of the server's own making ended, while the client still waits.
		AbortInternal(c, fmt.Errorf("store: %w", context.Canceled))
	})
	decodeProblem(t, env.do(t, http.MethodGet, "/fails", "", authed()), http.StatusInternalServerError, CodeInternal)
	access := <-logs.access
	if v, _ := attrOf(access, "status"); v.Int64() != http.StatusInternalServerError || access.Level != slog.LevelError {
		t.Errorf("access log = %v at %v, want 500 at ERROR", v, access.Level)
	}
	var errorLogged bool
	for _, r := range logs.all() {
		errorLogged = errorLogged || r.Level == slog.LevelError && r.Message == "request failed"
	}
	if !errorLogged {
		t.Error("the failure was not logged as an error")
	}
}

// Errors are logged under "error" as errors, not as their text, so that a handler can tell them
// apart (errors.Is) and keep what it must not print.
func TestFailuresLogTheErrorItself(t *testing.T) {
	logs := newRecordingHandler()
	env := newEnv(t, func(o *Options) { o.Logger = slog.New(logs) })
	errStore := errors.New("store down")
	env.engine.GET("/fails", func(c *gin.Context) { AbortInternal(c, fmt.Errorf("load: %w", errStore)) })
	errDB := errors.New("database down")
	env.keys.err = errDB
	env.do(t, http.MethodGet, "/whoami", "", authed())
	env.keys.err = nil
	env.do(t, http.MethodGet, "/fails", "", authed())
	for message, want := range map[string]error{"request failed": errStore, "api key lookup failed": errDB} {
		var found bool
		for _, r := range logs.all() {
			if r.Message != message {
				continue
			}
			found = true
			v, ok := attrOf(r, "error")
			if err, isErr := v.Any().(error); !ok || !isErr || !errors.Is(err, want) {
				t.Errorf("%s: error attribute = %#v, want an error wrapping %v", message, v.Any(), want)
			}
		}
		if !found {
			t.Errorf("no %q record", message)
		}
	}
}
