package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/samla/samla/platform/metrics"
)

const testKey = "test-key-0123456789abcdef0123456789abcdef"

// fakeKeys is an in-memory KeyLookup that counts lookups.
type fakeKeys struct {
	mu    sync.Mutex
	byKey map[string]string
	err   error
	calls int
}

func newFakeKeys() *fakeKeys {
	return &fakeKeys{byKey: map[string]string{testKey: "acme"}}
}

func (f *fakeKeys) Lookup(_ context.Context, apiKey string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return "", f.err
	}
	id, ok := f.byKey[apiKey]
	if !ok {
		return "", ErrKeyNotFound
	}
	return id, nil
}

func (f *fakeKeys) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type testEnv struct {
	engine *gin.Engine
	keys   *fakeKeys
	clock  *clock
	reg    *prometheus.Registry
	m      *metrics.Metrics
}

func newEnv(t *testing.T, mutate func(*Options)) *testEnv {
	t.Helper()
	env := &testEnv{keys: newFakeKeys(), clock: &clock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}, reg: prometheus.NewRegistry()}
	env.m = metrics.New(env.reg)
	opts := Options{Keys: env.keys, Metrics: env.m, Now: env.clock.now}
	if mutate != nil {
		mutate(&opts)
	}
	env.engine = NewEngine(opts)
	env.engine.GET("/whoami", func(c *gin.Context) {
		c.JSON(http.StatusOK, gin.H{
			"client": ClientID(c), "version": ServiceVersion(c),
			"requestId": RequestID(c.Request.Context()), "correlationId": CorrelationID(c.Request.Context()),
			"ctxClient": ClientIDFrom(c.Request.Context()),
		})
	})
	env.engine.GET("/panic", func(*gin.Context) { panic("boom") })
	env.engine.POST("/echo", func(c *gin.Context) {
		var body struct {
			Name string `json:"name"`
			N    int    `json:"n"`
		}
		if !DecodeJSON(c, &body, Limits{}) {
			return
		}
		c.JSON(http.StatusOK, body)
	})
	env.engine.POST("/big", MaxBody(4<<20), func(c *gin.Context) {
		var body map[string]any
		// Strings as long as the body: the route takes a file in one.
		if !DecodeJSON(c, &body, Limits{MaxStringBytes: -1}) {
			return
		}
		c.Status(http.StatusNoContent)
	})
	return env
}

func (env *testEnv) do(t *testing.T, method, path, body string, headers map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, r)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	env.engine.ServeHTTP(w, req)
	return w
}

func authed(extra ...string) map[string]string {
	h := map[string]string{HeaderAPIKey: testKey}
	for i := 0; i+1 < len(extra); i += 2 {
		h[extra[i]] = extra[i+1]
	}
	return h
}

func decodeProblem(t *testing.T, w *httptest.ResponseRecorder, status int, code string) Problem {
	t.Helper()
	if w.Code != status {
		t.Fatalf("status = %d, want %d; body %s", w.Code, status, w.Body)
	}
	if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, ContentTypeProblem) {
		t.Fatalf("Content-Type = %q, want %s", ct, ContentTypeProblem)
	}
	if w.Header().Get(HeaderServiceVersion) == "" {
		t.Fatalf("problem response without %s header", HeaderServiceVersion)
	}
	var p Problem
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatalf("problem body: %v", err)
	}
	if p.Code != code || p.Status != status || p.Type == "" || p.Title == "" {
		t.Fatalf("problem = %+v, want code %s status %d", p, code, status)
	}
	return p
}

func TestHealthNeedsNoKey(t *testing.T) {
	env := newEnv(t, nil)
	w := env.do(t, http.MethodGet, "/health", "", nil)
	if w.Code != http.StatusOK || strings.TrimSpace(w.Body.String()) != `{"status":"healthy"}` {
		t.Fatalf("health = %d %s", w.Code, w.Body)
	}
	if w.Header().Get(HeaderServiceVersion) != string(V20250101) {
		t.Fatalf("Service-Version = %q", w.Header().Get(HeaderServiceVersion))
	}
	if env.keys.callCount() != 0 {
		t.Fatal("health looked up a key")
	}
}

func TestAuthentication(t *testing.T) {
	env := newEnv(t, nil)
	p := decodeProblem(t, env.do(t, http.MethodGet, "/whoami", "", nil), http.StatusUnauthorized, CodeUnauthorized)
	if !strings.Contains(p.Detail, HeaderAPIKey) {
		t.Errorf("detail %q does not name the header", p.Detail)
	}
	w := env.do(t, http.MethodGet, "/whoami", "", map[string]string{HeaderAPIKey: "wrong"})
	decodeProblem(t, w, http.StatusUnauthorized, CodeUnauthorized)
	if w.Header().Get("WWW-Authenticate") == "" {
		t.Error("401 without WWW-Authenticate")
	}
	// Unknown routes are not revealed to the unauthenticated either.
	decodeProblem(t, env.do(t, http.MethodGet, "/nope", "", nil), http.StatusUnauthorized, CodeUnauthorized)

	w = env.do(t, http.MethodGet, "/whoami", "", authed())
	if w.Code != http.StatusOK {
		t.Fatalf("authed = %d %s", w.Code, w.Body)
	}
	var got map[string]string
	_ = json.Unmarshal(w.Body.Bytes(), &got)
	if got["client"] != "acme" || got["ctxClient"] != "acme" {
		t.Fatalf("client id not in context: %v", got)
	}
}

func TestAuthCache(t *testing.T) {
	env := newEnv(t, nil)
	for i := 0; i < 5; i++ {
		if w := env.do(t, http.MethodGet, "/whoami", "", authed()); w.Code != http.StatusOK {
			t.Fatalf("request %d = %d", i, w.Code)
		}
	}
	if n := env.keys.callCount(); n != 1 {
		t.Fatalf("lookups = %d, want 1 (cached)", n)
	}
	env.clock.advance(DefaultAuthPositiveTTL)
	env.do(t, http.MethodGet, "/whoami", "", authed())
	if n := env.keys.callCount(); n != 2 {
		t.Fatalf("lookups after TTL = %d, want 2", n)
	}

	bad := map[string]string{HeaderAPIKey: "bad"}
	env.do(t, http.MethodGet, "/whoami", "", bad)
	env.do(t, http.MethodGet, "/whoami", "", bad)
	if n := env.keys.callCount(); n != 3 {
		t.Fatalf("lookups for a bad key = %d, want one (negative cache)", n-2)
	}
	env.clock.advance(DefaultAuthNegativeTTL)
	env.do(t, http.MethodGet, "/whoami", "", bad)
	if n := env.keys.callCount(); n != 4 {
		t.Fatalf("negative entry outlived its TTL: %d lookups", n)
	}
}

func TestAuthLookupFailureIs503AndNotCached(t *testing.T) {
	env := newEnv(t, nil)
	env.keys.err = errors.New("database down")
	decodeProblem(t, env.do(t, http.MethodGet, "/whoami", "", authed()), http.StatusServiceUnavailable, CodeServiceUnavailable)
	env.keys.err = nil
	if w := env.do(t, http.MethodGet, "/whoami", "", authed()); w.Code != http.StatusOK {
		t.Fatalf("after recovery = %d; a fault must not be cached as a bad key", w.Code)
	}
}

func TestAuthCacheIsBounded(t *testing.T) {
	clk := &clock{t: time.Now()}
	c := newAuthCache(AuthCacheConfig{MaxEntries: 3}, clk.now)
	for i := 0; i < 10; i++ {
		c.put(cacheKey{byte(i)}, KeyInfo{ClientID: "acme"})
	}
	if n := c.len(); n > 3 {
		t.Fatalf("cache holds %d entries, bound 3", n)
	}
}

func TestServiceVersion(t *testing.T) {
	env := newEnv(t, nil)
	cases := []struct {
		header, want string
		status       int
	}{
		{"", "2025-01-01", http.StatusOK},
		{"2025-01-01", "2025-01-01", http.StatusOK},
		{"2026-04-01", "2026-04-01", http.StatusOK},
		{"2024-01-01", "2025-01-01", http.StatusBadRequest},
		{"latest", "2025-01-01", http.StatusBadRequest},
	}
	for _, tc := range cases {
		h := authed()
		if tc.header != "" {
			h[HeaderServiceVersion] = tc.header
		}
		w := env.do(t, http.MethodGet, "/whoami", "", h)
		if w.Code != tc.status || w.Header().Get(HeaderServiceVersion) != tc.want {
			t.Errorf("Service-Version %q: %d %q, want %d %q", tc.header, w.Code, w.Header().Get(HeaderServiceVersion), tc.status, tc.want)
		}
		if tc.status == http.StatusBadRequest {
			p := decodeProblem(t, w, http.StatusBadRequest, CodeValidationFailed)
			if len(p.Errors) != 1 || p.Errors[0].Field != HeaderServiceVersion {
				t.Errorf("errors = %+v", p.Errors)
			}
		} else {
			var got map[string]string
			_ = json.Unmarshal(w.Body.Bytes(), &got)
			if got["version"] != tc.want {
				t.Errorf("handler saw version %q, want %q", got["version"], tc.want)
			}
		}
	}
	// Errors carry the negotiated version too.
	w := env.do(t, http.MethodGet, "/nope", "", authed(HeaderServiceVersion, "2026-04-01"))
	decodeProblem(t, w, http.StatusNotFound, CodeNotFound)
	if w.Header().Get(HeaderServiceVersion) != "2026-04-01" {
		t.Errorf("404 Service-Version = %q", w.Header().Get(HeaderServiceVersion))
	}
}

func TestNotFoundAndMethodNotAllowed(t *testing.T) {
	env := newEnv(t, nil)
	decodeProblem(t, env.do(t, http.MethodGet, "/nope", "", authed()), http.StatusNotFound, CodeNotFound)
	w := env.do(t, http.MethodDelete, "/whoami", "", authed())
	decodeProblem(t, w, http.StatusMethodNotAllowed, CodeMethodNotAllowed)
	if w.Header().Get("Allow") != http.MethodGet {
		t.Errorf("Allow = %q", w.Header().Get("Allow"))
	}
}

func TestContentType415(t *testing.T) {
	env := newEnv(t, nil)
	decodeProblem(t, env.do(t, http.MethodPost, "/echo", `{"name":"a"}`, authed("Content-Type", "text/plain")),
		http.StatusUnsupportedMediaType, CodeUnsupportedMediaType)
	decodeProblem(t, env.do(t, http.MethodPost, "/echo", `{"name":"a"}`, authed()),
		http.StatusUnsupportedMediaType, CodeUnsupportedMediaType)
	if w := env.do(t, http.MethodPost, "/echo", `{"name":"a"}`, authed("Content-Type", "application/json; charset=utf-8")); w.Code != http.StatusOK {
		t.Fatalf("json with charset = %d %s", w.Code, w.Body)
	}
}

func TestBodyLimit413(t *testing.T) {
	env := newEnv(t, nil)
	big := `{"name":"` + strings.Repeat("a", int(DefaultMaxBodyBytes)) + `"}`
	decodeProblem(t, env.do(t, http.MethodPost, "/echo", big, authed("Content-Type", "application/json")),
		http.StatusRequestEntityTooLarge, CodePayloadTooLarge)

	// Without Content-Length (chunked) the limit holds while reading.
	req := httptest.NewRequest(http.MethodPost, "/echo", io.MultiReader(strings.NewReader(big)))
	req.ContentLength = -1
	req.Header.Set(HeaderAPIKey, testKey)
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	env.engine.ServeHTTP(w, req)
	decodeProblem(t, w, http.StatusRequestEntityTooLarge, CodePayloadTooLarge)

	// A route that raised its limit takes the same body.
	if w := env.do(t, http.MethodPost, "/big", big, authed("Content-Type", "application/json")); w.Code != http.StatusNoContent {
		t.Fatalf("raised limit = %d %s", w.Code, w.Body)
	}
	huge := `{"a":"` + strings.Repeat("a", 4<<20) + `"}`
	decodeProblem(t, env.do(t, http.MethodPost, "/big", huge, authed("Content-Type", "application/json")),
		http.StatusRequestEntityTooLarge, CodePayloadTooLarge)
}

func TestStrictDecoding(t *testing.T) {
	env := newEnv(t, nil)
	h := authed("Content-Type", "application/json")
	p := decodeProblem(t, env.do(t, http.MethodPost, "/echo", `{"name":"a","extra":1}`, h), http.StatusBadRequest, CodeValidationFailed)
	if len(p.Errors) != 1 || p.Errors[0].Field != "extra" {
		t.Errorf("unknown member errors = %+v", p.Errors)
	}
	p = decodeProblem(t, env.do(t, http.MethodPost, "/echo", `{"n":"x"}`, h), http.StatusBadRequest, CodeValidationFailed)
	if len(p.Errors) != 1 || p.Errors[0].Field != "n" || !strings.Contains(p.Errors[0].Message, "integer") {
		t.Errorf("type errors = %+v", p.Errors)
	}
	decodeProblem(t, env.do(t, http.MethodPost, "/echo", `{"name":"a"} {}`, h), http.StatusBadRequest, CodeMalformedJSON)
	decodeProblem(t, env.do(t, http.MethodPost, "/echo", `{"name":"a"`, h), http.StatusBadRequest, CodeMalformedJSON)
	decodeProblem(t, env.do(t, http.MethodPost, "/echo", `[1]`, h), http.StatusBadRequest, CodeMalformedJSON)
	decodeProblem(t, env.do(t, http.MethodPost, "/echo", ``, h), http.StatusBadRequest, CodeMalformedJSON)
}

func TestRateLimit(t *testing.T) {
	env := newEnv(t, func(o *Options) { o.RateLimit = RateLimit{PerSecond: 1, Burst: 2} })
	for i := 0; i < 2; i++ {
		if w := env.do(t, http.MethodGet, "/whoami", "", authed()); w.Code != http.StatusOK {
			t.Fatalf("request %d within burst = %d", i, w.Code)
		}
	}
	w := env.do(t, http.MethodGet, "/whoami", "", authed())
	decodeProblem(t, w, http.StatusTooManyRequests, CodeRateLimited)
	if w.Header().Get("Retry-After") != "1" {
		t.Fatalf("Retry-After = %q, want 1", w.Header().Get("Retry-After"))
	}
	// Health is not limited, and other clients have their own bucket.
	if w := env.do(t, http.MethodGet, "/health", "", nil); w.Code != http.StatusOK {
		t.Fatalf("health while limited = %d", w.Code)
	}
	const otherKey = "other-key-0123456789abcdef0123456789abcdef"
	env.keys.byKey[otherKey] = "globex"
	if w := env.do(t, http.MethodGet, "/whoami", "", map[string]string{HeaderAPIKey: otherKey}); w.Code != http.StatusOK {
		t.Fatalf("another client while the first is limited = %d", w.Code)
	}
	env.clock.advance(time.Second)
	if w := env.do(t, http.MethodGet, "/whoami", "", authed()); w.Code != http.StatusOK {
		t.Fatalf("after refill = %d", w.Code)
	}
}

func TestRateLimitDefaultsAndDisabled(t *testing.T) {
	l := newLimiter(RateLimit{}, time.Now)
	if l.cfg.PerSecond != DefaultRatePerSecond || l.cfg.Burst != DefaultRateBurst {
		t.Fatalf("defaults = %+v", l.cfg)
	}
	env := newEnv(t, func(o *Options) { o.RateLimit = RateLimit{PerSecond: 1, Burst: 1, Disabled: true} })
	for i := 0; i < 5; i++ {
		if w := env.do(t, http.MethodGet, "/whoami", "", authed()); w.Code != http.StatusOK {
			t.Fatalf("disabled limit answered %d", w.Code)
		}
	}
}

func TestRecoveryAndMetrics(t *testing.T) {
	env := newEnv(t, nil)
	decodeProblem(t, env.do(t, http.MethodGet, "/panic", "", authed()), http.StatusInternalServerError, CodeInternal)
	// The engine still serves after the panic.
	if w := env.do(t, http.MethodGet, "/whoami", "", authed()); w.Code != http.StatusOK {
		t.Fatalf("after panic = %d", w.Code)
	}
	env.do(t, http.MethodGet, "/nope/123", "", authed())
	if v := counterValue(env.m.HTTPRequests.WithLabelValues("GET", "/panic", "500")); v != 1 {
		t.Errorf("panic counted %v times", v)
	}
	if v := counterValue(env.m.HTTPRequests.WithLabelValues("GET", "unmatched", "404")); v != 1 {
		t.Errorf("unmatched counted %v times", v)
	}
	if v := counterValue(env.m.HTTPRequests.WithLabelValues("GET", "/whoami", "200")); v != 1 {
		t.Errorf("whoami counted %v times", v)
	}
}

func TestRequestAndCorrelationIDs(t *testing.T) {
	env := newEnv(t, nil)
	w := env.do(t, http.MethodGet, "/whoami", "", authed(HeaderRequestID, "req-1"))
	var got map[string]string
	_ = json.Unmarshal(w.Body.Bytes(), &got)
	if got["requestId"] != "req-1" || got["correlationId"] != "req-1" {
		t.Fatalf("ids = %v", got)
	}
	if w.Header().Get(HeaderRequestID) != "req-1" || w.Header().Get(HeaderCorrelationID) != "req-1" {
		t.Fatalf("response ids = %q %q", w.Header().Get(HeaderRequestID), w.Header().Get(HeaderCorrelationID))
	}
	w = env.do(t, http.MethodGet, "/whoami", "", authed(HeaderRequestID, "bad id\nforged", HeaderCorrelationID, "corr-9"))
	_ = json.Unmarshal(w.Body.Bytes(), &got)
	if got["requestId"] == "bad id\nforged" || got["requestId"] == "" || got["correlationId"] != "corr-9" {
		t.Fatalf("ids = %v", got)
	}
	// Errors carry the request id too.
	w = env.do(t, http.MethodGet, "/whoami", "", nil)
	if w.Header().Get(HeaderRequestID) == "" {
		t.Fatal("401 without X-Request-Id")
	}
}

func TestIdempotencyKey(t *testing.T) {
	e := gin.New()
	e.GET("/", func(c *gin.Context) {
		key, fe := IdempotencyKey(c)
		if fe != nil {
			c.String(http.StatusBadRequest, fe.Message)
			return
		}
		c.String(http.StatusOK, key)
	})
	for _, tc := range []struct {
		key    string
		status int
	}{
		{"abc-123", http.StatusOK},
		{strings.Repeat("k", MaxIdempotencyKeyLength), http.StatusOK},
		{strings.Repeat("k", MaxIdempotencyKeyLength+1), http.StatusBadRequest},
		{"tab\tkey", http.StatusBadRequest},
		{"åäö", http.StatusBadRequest},
	} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set(HeaderIdempotencyKey, tc.key)
		w := httptest.NewRecorder()
		e.ServeHTTP(w, req)
		if w.Code != tc.status {
			t.Errorf("key %q = %d, want %d", tc.key, w.Code, tc.status)
		}
	}
}

func TestOpsHandler(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	m.RelayPublished.Inc()
	var readyErr error
	h := NewOpsHandler(reg, func(context.Context) error { return readyErr }, false)
	get := func(path string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		return w
	}
	if w := get("/metrics"); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "samla_relay_published_events_total 1") {
		t.Fatalf("/metrics = %d", w.Code)
	}
	if w := get("/livez"); w.Code != http.StatusOK {
		t.Fatalf("/livez = %d", w.Code)
	}
	if w := get("/readyz"); w.Code != http.StatusOK {
		t.Fatalf("/readyz = %d", w.Code)
	}
	readyErr = errors.New("event store unreachable")
	if w := get("/readyz"); w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "unreachable") {
		t.Fatalf("/readyz failing = %d %s", w.Code, w.Body)
	}
	if w := get("/debug/pprof/"); w.Code != http.StatusNotFound {
		t.Fatalf("/debug/pprof/ without profiling = %d, want 404", w.Code)
	}
	profiled := NewOpsHandler(reg, nil, true)
	w := httptest.NewRecorder()
	profiled.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/debug/pprof/goroutine?debug=1", nil))
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "goroutine profile") {
		t.Fatalf("/debug/pprof/goroutine with profiling = %d %.80s", w.Code, w.Body)
	}
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

func TestAccessLogCarriesIDsAndNoBody(t *testing.T) {
	var buf strings.Builder
	var mu sync.Mutex
	logger := slog.New(slog.NewJSONHandler(&lockedWriter{w: &buf, mu: &mu}, nil))
	env := newEnv(t, func(o *Options) { o.Logger = logger })
	env.do(t, http.MethodPost, "/echo?pn=199001010017", `{"name":"Tolvan Tolvansson 199001010017"}`,
		authed("Content-Type", "application/json", HeaderRequestID, "req-log"))
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	for _, want := range []string{`"request_id":"req-log"`, `"correlation_id":"req-log"`, `"client_id":"acme"`, `"route":"/echo"`, `"status":200`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s: %s", want, out)
		}
	}
	for _, secret := range []string{"199001010017", "Tolvan", testKey} {
		if strings.Contains(out, secret) {
			t.Errorf("log leaks %q: %s", secret, out)
		}
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestConcurrentRequests(t *testing.T) {
	env := newEnv(t, func(o *Options) { o.RateLimit = RateLimit{PerSecond: 1000, Burst: 1000} })
	var wg sync.WaitGroup
	codes := make(chan int, 64)
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			key := testKey
			if i%4 == 0 {
				key = "wrong"
			}
			req := httptest.NewRequest(http.MethodGet, "/whoami", nil)
			req.Header.Set(HeaderAPIKey, key)
			w := httptest.NewRecorder()
			env.engine.ServeHTTP(w, req)
			codes <- w.Code
		}(i)
	}
	wg.Wait()
	close(codes)
	ok, unauthorized := 0, 0
	for c := range codes {
		switch c {
		case http.StatusOK:
			ok++
		case http.StatusUnauthorized:
			unauthorized++
		}
	}
	if ok != 48 || unauthorized != 16 {
		t.Fatalf("ok %d, unauthorized %d", ok, unauthorized)
	}
}

// A successful poll (QuietAccessLog) is logged at debug (clients poll every collection every
// second); a failed one, other reads and anything that changes state at info or above.
func TestAccessLogLevels(t *testing.T) {
	logs := newRecordingHandler()
	env := newEnv(t, func(o *Options) { o.Logger = slog.New(logs) })
	env.engine.GET("/poll/:code", func(c *gin.Context) {
		QuietAccessLog(c)
		if c.Param("code") != "ok" {
			AbortProblem(c, http.StatusNotFound, "COLLECTION_NOT_FOUND", "No such collection.")
			return
		}
		c.JSON(http.StatusOK, gin.H{"status": "RUNNING"})
	})
	env.do(t, http.MethodGet, "/poll/ok", "", authed(HeaderRequestID, "poll-ok"))
	env.do(t, http.MethodGet, "/poll/missing", "", authed(HeaderRequestID, "poll-404"))
	env.do(t, http.MethodGet, "/whoami", "", authed(HeaderRequestID, "read-ok"))
	env.do(t, http.MethodPost, "/echo", `{"name":"x"}`, authed("Content-Type", "application/json", HeaderRequestID, "write"))
	want := map[string]slog.Level{"poll-ok": slog.LevelDebug, "poll-404": slog.LevelInfo, "read-ok": slog.LevelInfo, "write": slog.LevelInfo}
	for range want {
		select {
		case r := <-logs.access:
			var id string
			r.Attrs(func(a slog.Attr) bool {
				if a.Key == "request_id" {
					id = a.Value.String()
				}
				return true
			})
			if lvl, ok := want[id]; !ok || r.Level != lvl {
				t.Errorf("access line of %q at %s, want %s", id, r.Level, lvl)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("missing access lines")
		}
	}
}
