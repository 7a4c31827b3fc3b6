package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
)

// fakeLimits is a ClientLimits over a map that counts its lookups.
type fakeLimits struct {
	mu    sync.Mutex
	own   map[string]clientRate
	err   error
	calls int
}

func (f *fakeLimits) ClientRateLimit(_ context.Context, clientID string) (float64, int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	r := f.own[clientID]
	return r.perSecond, r.burst, f.err
}

func (f *fakeLimits) set(clientID string, r clientRate, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.own[clientID], f.err = r, err
}

func (f *fakeLimits) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

const globexKey = "globex-key-0123456789abcdef0123456789abcdef"

func newLimitEnv(t *testing.T) (*testEnv, *fakeLimits) {
	t.Helper()
	limits := &fakeLimits{own: map[string]clientRate{"acme": {perSecond: 5, burst: 5}}}
	env := newEnv(t, func(o *Options) { o.RateLimit = RateLimit{PerSecond: 100, Burst: 200, Clients: limits} })
	env.keys.byKey[globexKey] = "globex"
	return env, limits
}

func rateHeaders(w *httptest.ResponseRecorder) (limit, remaining, reset string) {
	return w.Header().Get("RateLimit-Limit"), w.Header().Get("RateLimit-Remaining"), w.Header().Get("RateLimit-Reset")
}

// TestPerClientRateLimit: a client's own rate and burst apply to it alone, every answer says
// where it stands, and the 429 says when to come back.
func TestPerClientRateLimit(t *testing.T) {
	env, limits := newLimitEnv(t)
	for i := 0; i < 5; i++ {
		w := env.do(t, http.MethodGet, "/whoami", "", authed())
		if w.Code != http.StatusOK {
			t.Fatalf("request %d within acme's burst of 5 = %d", i+1, w.Code)
		}
		// After request i+1: 4-i left; the bucket is full again in (i+1)/5 s, rounded up.
		if l, r, s := rateHeaders(w); l != "5" || r != strconv.Itoa(4-i) || s != "1" {
			t.Fatalf("request %d: RateLimit-Limit %q, -Remaining %q, -Reset %q", i+1, l, r, s)
		}
	}
	w := env.do(t, http.MethodGet, "/whoami", "", authed())
	decodeProblem(t, w, http.StatusTooManyRequests, CodeRateLimited)
	if l, r, s := rateHeaders(w); l != "5" || r != "0" || s != "1" || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("the 6th: RateLimit-Limit %q, -Remaining %q, -Reset %q, Retry-After %q", l, r, s, w.Header().Get("Retry-After"))
	}
	// Another client has the default, unaffected.
	other := env.do(t, http.MethodGet, "/whoami", "", map[string]string{HeaderAPIKey: globexKey})
	if l, r, _ := rateHeaders(other); other.Code != http.StatusOK || l != "200" || r != "199" {
		t.Fatalf("globex while acme is limited: %d, Limit %q Remaining %q", other.Code, l, r)
	}
	// Public routes carry no limit.
	if w := env.do(t, http.MethodGet, "/health", "", nil); w.Code != http.StatusOK || w.Header().Get("RateLimit-Limit") != "" {
		t.Fatalf("health: %d, RateLimit-Limit %q", w.Code, w.Header().Get("RateLimit-Limit"))
	}
	// One token a fifth of a second later.
	env.clock.advance(200 * time.Millisecond)
	if w := env.do(t, http.MethodGet, "/whoami", "", authed()); w.Code != http.StatusOK {
		t.Fatalf("after a token came back = %d", w.Code)
	}
	// The settings are asked once per client and TTL, refusals included.
	if n := limits.callCount(); n != 2 {
		t.Fatalf("settings lookups = %d, want one per client", n)
	}

	// A change applies within the TTL, without a restart: a larger burst fills up at the new
	// rate; a smaller one caps what the bucket holds.
	limits.set("acme", clientRate{perSecond: 50, burst: 60}, nil)
	env.clock.advance(RateLimitSettingsTTL)
	w = env.do(t, http.MethodGet, "/whoami", "", authed())
	if l, r, _ := rateHeaders(w); w.Code != http.StatusOK || l != "60" || r != "59" {
		t.Fatalf("after the change: %d, Limit %q Remaining %q", w.Code, l, r)
	}
	limits.set("acme", clientRate{perSecond: 1, burst: 3}, nil)
	env.clock.advance(RateLimitSettingsTTL)
	w = env.do(t, http.MethodGet, "/whoami", "", authed())
	if l, r, s := rateHeaders(w); w.Code != http.StatusOK || l != "3" || r != "2" || s != "1" {
		t.Fatalf("after a smaller burst: %d, Limit %q Remaining %q Reset %q", w.Code, l, r, s)
	}
	// Only a burst of its own: the rate is the default's.
	limits.set("acme", clientRate{burst: 1}, nil)
	env.clock.advance(RateLimitSettingsTTL)
	w = env.do(t, http.MethodGet, "/whoami", "", authed())
	if l, r, _ := rateHeaders(w); w.Code != http.StatusOK || l != "1" || r != "0" {
		t.Fatalf("a burst alone: %d, Limit %q Remaining %q", w.Code, l, r)
	}
	env.clock.advance(10 * time.Millisecond) // one token at 100/s
	if w := env.do(t, http.MethodGet, "/whoami", "", authed()); w.Code != http.StatusOK {
		t.Fatalf("at the default rate = %d", w.Code)
	}
}

// TestRateLimitSettingsLookupFailure: a read model that is down leaves the default in force,
// asked once per TTL rather than on every request.
func TestRateLimitSettingsLookupFailure(t *testing.T) {
	env, limits := newLimitEnv(t)
	limits.set("acme", clientRate{}, errors.New("read model down"))
	for i := 0; i < 3; i++ {
		w := env.do(t, http.MethodGet, "/whoami", "", authed())
		if l, _, _ := rateHeaders(w); w.Code != http.StatusOK || l != "200" {
			t.Fatalf("request %d: %d, Limit %q; want the default", i, w.Code, l)
		}
	}
	if n := limits.callCount(); n != 1 {
		t.Fatalf("lookups during the outage = %d, want 1", n)
	}
	limits.set("acme", clientRate{perSecond: 5, burst: 5}, nil)
	env.clock.advance(RateLimitSettingsTTL)
	if w := env.do(t, http.MethodGet, "/whoami", "", authed()); w.Header().Get("RateLimit-Limit") != "5" {
		t.Fatalf("after the outage: Limit %q", w.Header().Get("RateLimit-Limit"))
	}
}

// TestRateLimitHeadersOnEveryAuthenticatedAnswer: errors of handlers and of later middleware
// carry them too; answers refused before authentication do not.
func TestRateLimitHeadersOnEveryAuthenticatedAnswer(t *testing.T) {
	env, _ := newLimitEnv(t)
	for name, w := range map[string]*httptest.ResponseRecorder{
		"a 404":        env.do(t, http.MethodGet, "/nope", "", authed()),
		"a 415":        env.do(t, http.MethodPost, "/echo", `{"name":"a"}`, authed("Content-Type", "text/plain")),
		"a 400 (JSON)": env.do(t, http.MethodPost, "/echo", `{`, authed("Content-Type", "application/json")),
		"a 500":        env.do(t, http.MethodGet, "/panic", "", authed()),
	} {
		if l, r, s := rateHeaders(w); l != "5" || r == "" || s == "" {
			t.Errorf("%s (%d): RateLimit-Limit %q, -Remaining %q, -Reset %q", name, w.Code, l, r, s)
		}
	}
	if w := env.do(t, http.MethodGet, "/whoami", "", nil); w.Code != http.StatusUnauthorized || w.Header().Get("RateLimit-Limit") != "" {
		t.Fatalf("a 401: %d, RateLimit-Limit %q", w.Code, w.Header().Get("RateLimit-Limit"))
	}
}

func TestRateLimitDefaultFitsPolling(t *testing.T) {
	// The issue: 50/s capped a client at a few dozen end users polling their collections.
	if DefaultRatePerSecond < 1000 || DefaultRateBurst < DefaultRatePerSecond {
		t.Fatalf("default %d/s burst %d", DefaultRatePerSecond, DefaultRateBurst)
	}
}

// TestLimiterEvictsIdleBuckets: a bucket that refilled is dropped, at the latest a sweep
// interval later, and the map never passes its bound.
func TestLimiterEvictsIdleBuckets(t *testing.T) {
	clk := &clock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	l := newLimiter(RateLimit{PerSecond: 10, Burst: 10}, clk.now)
	for i := 0; i < 100; i++ {
		l.take(fmt.Sprint("client-", i), 10, 10, "")
	}
	if n := l.len(); n != 100 {
		t.Fatalf("%d buckets", n)
	}
	clk.advance(limiterSweepEvery)
	l.take("client-0", 10, 10, "")
	if n := l.len(); n != 1 {
		t.Fatalf("%d buckets after the idle ones refilled, want the one in use", n)
	}
	for i := 0; i < maxIdleBuckets+50; i++ {
		clk.advance(time.Second) // each refilled before the next is made
		l.take(fmt.Sprint("many-", i), 10, 10, "")
	}
	if n := l.len(); n > maxIdleBuckets {
		t.Fatalf("%d buckets, bound %d", n, maxIdleBuckets)
	}
}

// TestRetiringKeyIsCachedNoLongerThanItsEnd: a key with an end stops at it, not up to the
// cache's TTL later.
func TestRetiringKeyIsCachedNoLongerThanItsEnd(t *testing.T) {
	keys := &expiringKeys{fakeKeys: newFakeKeys()}
	clk := &clock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	keys.now, keys.until = clk.now, clk.now().Add(2*time.Second)
	env := newEnv(t, func(o *Options) { o.Keys, o.Now = keys, clk.now })
	if w := env.do(t, http.MethodGet, "/whoami", "", authed()); w.Code != http.StatusOK {
		t.Fatalf("before its end = %d", w.Code)
	}
	clk.advance(1999 * time.Millisecond)
	if w := env.do(t, http.MethodGet, "/whoami", "", authed()); w.Code != http.StatusOK || keys.callCount() != 1 {
		t.Fatalf("just before its end = %d after %d lookups", w.Code, keys.callCount())
	}
	clk.advance(time.Millisecond)
	decodeProblem(t, env.do(t, http.MethodGet, "/whoami", "", authed()), http.StatusUnauthorized, CodeUnauthorized)
}

// expiringKeys is fakeKeys whose keys end at until.
type expiringKeys struct {
	*fakeKeys
	now   func() time.Time
	until time.Time
}

func (e *expiringKeys) LookupValidUntil(ctx context.Context, apiKey string) (string, time.Time, error) {
	id, err := e.Lookup(ctx, apiKey)
	if err == nil && !e.now().Before(e.until) {
		return "", time.Time{}, ErrKeyNotFound
	}
	return id, e.until, err
}

func TestAuthPositiveTTLIsAFewSeconds(t *testing.T) {
	// How long a revoked key keeps working on a node after its read model shows the revocation.
	if DefaultAuthPositiveTTL > 5*time.Second {
		t.Fatalf("DefaultAuthPositiveTTL = %s", DefaultAuthPositiveTTL)
	}
}

// discardWriter is a ResponseWriter that keeps nothing, so that a benchmark measures the engine.
type discardWriter struct {
	h      http.Header
	status int
}

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardWriter) WriteHeader(status int)      { d.status = status }

// benchmarkRefused serves req again and again; every answer must be a 429.
func benchmarkRefused(b *testing.B, env *testEnv, req *http.Request) {
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		clear(w.h)
		w.status = 0
		env.engine.ServeHTTP(w, req)
		if w.status != http.StatusTooManyRequests {
			b.Fatalf("status %d", w.status)
		}
	}
}

// BenchmarkRefusedRequest is a request of a client whose bucket is empty: its key and settings
// are cached, and the refusal is a few map lookups and a body rendered once. What it allocates
// beyond the limiter is the engine's own per-request work (request id, access log).
func BenchmarkRefusedRequest(b *testing.B) {
	limits := &fakeLimits{own: map[string]clientRate{"acme": {perSecond: 0.1, burst: 1}}}
	env := newBenchEnv(b, func(o *Options) { o.RateLimit = RateLimit{Clients: limits} })
	req := httptest.NewRequest(http.MethodGet, "/whoami", nil)
	req.Header.Set(HeaderAPIKey, testKey)
	env.engine.ServeHTTP(httptest.NewRecorder(), req) // takes the only token
	benchmarkRefused(b, env, req)
	if n := limits.callCount(); n != 1 {
		b.Fatalf("settings lookups = %d", n)
	}
}

// BenchmarkRefusedByAuthFailures is a request from a source that failed too often: refused
// before its key is looked at.
func BenchmarkRefusedByAuthFailures(b *testing.B) {
	env := newBenchEnv(b, nil)
	req := httptest.NewRequest(http.MethodGet, "/whoami", nil)
	req.Header.Set(HeaderAPIKey, "guess")
	for i := 0; i < DefaultAuthFailureMax; i++ {
		env.engine.ServeHTTP(httptest.NewRecorder(), req)
	}
	calls := env.keys.callCount()
	benchmarkRefused(b, env, req)
	if env.keys.callCount() != calls {
		b.Fatal("a refused source's key was looked up")
	}
}

// BenchmarkLimiterRefusal is the limiter's own work for a refusal.
func BenchmarkLimiterRefusal(b *testing.B) {
	l := newLimiter(RateLimit{}, time.Now)
	l.take("acme", 0.001, 1, "")
	b.ReportAllocs()
	for b.Loop() {
		if d := l.take("acme", 0.001, 1, ""); d.allowed {
			b.Fatal("allowed")
		}
	}
}

// newBenchEnv is newEnv for a benchmark (fixed clock, no logger output).
func newBenchEnv(b *testing.B, mutate func(*Options)) *testEnv {
	b.Helper()
	env := &testEnv{keys: newFakeKeys(), clock: &clock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}}
	opts := Options{Keys: env.keys, Now: env.clock.now}
	if mutate != nil {
		mutate(&opts)
	}
	env.engine = NewEngine(opts)
	env.engine.GET("/whoami", func(c *gin.Context) { c.Status(http.StatusOK) })
	return env
}

// TestSessionUserRateLimit: a session takes from its user's bucket and its client's, from both
// or neither; one user's empty bucket leaves the client's other users and its API key alone,
// and the headers describe the bucket that binds.
func TestSessionUserRateLimit(t *testing.T) {
	// Rates of one token in 1000 s: no bucket refills during the test.
	env := newSessionEnv(t, func(o *Options) {
		o.RateLimit = RateLimit{PerSecond: 0.001, Burst: 10, SessionPerSecond: 0.001, SessionBurst: 3}
	})
	first, second := env.token(t, "acme", sessUser), env.token(t, "acme", otherUser)
	for i := range 3 {
		w := env.do(t, http.MethodGet, "/users/"+sessUser, "", bearer(first))
		if l, r, _ := rateHeaders(w); w.Code != http.StatusOK || l != "3" || r != strconv.Itoa(2-i) {
			t.Fatalf("session request %d: %d, Limit %q Remaining %q; want the user's bucket of 3", i+1, w.Code, l, r)
		}
	}
	w := env.do(t, http.MethodGet, "/users/"+sessUser, "", bearer(first))
	decodeProblem(t, w, http.StatusTooManyRequests, CodeRateLimited)
	if l, r := w.Header().Get("RateLimit-Limit"), w.Header().Get("RateLimit-Remaining"); l != "3" || r != "0" || w.Header().Get("Retry-After") == "" {
		t.Fatalf("the user's 4th: Limit %q Remaining %q Retry-After %q", l, r, w.Header().Get("Retry-After"))
	}
	// Another user of the same client has a bucket of its own.
	w = env.do(t, http.MethodGet, "/users/"+otherUser, "", bearer(second))
	if l, r, _ := rateHeaders(w); w.Code != http.StatusOK || l != "3" || r != "2" {
		t.Fatalf("the other user: %d, Limit %q Remaining %q", w.Code, l, r)
	}
	// The client's bucket gave one token to each allowed session request and none to the
	// refused one: 10 - 4 = 6, one of which this API-key request takes.
	w = env.do(t, http.MethodGet, "/whoami", "", authed())
	if l, r, _ := rateHeaders(w); w.Code != http.StatusOK || l != "10" || r != "5" {
		t.Fatalf("the client's API key: %d, Limit %q Remaining %q; want 5 of 10 left", w.Code, l, r)
	}
	for i := range 5 {
		if w := env.do(t, http.MethodGet, "/whoami", "", authed()); w.Code != http.StatusOK {
			t.Fatalf("API-key request %d of the last 5: %d", i+1, w.Code)
		}
	}
	// The client's bucket is empty: it binds a user that still has tokens.
	w = env.do(t, http.MethodGet, "/users/"+otherUser, "", bearer(second))
	decodeProblem(t, w, http.StatusTooManyRequests, CodeRateLimited)
	if l := w.Header().Get("RateLimit-Limit"); l != "10" {
		t.Fatalf("a session refused by its client's bucket: Limit %q, want the client's 10", l)
	}
	// Another client is untouched by all of it.
	w = env.do(t, http.MethodGet, "/users/"+sessUser, "", bearer(env.token(t, "other", sessUser)))
	if w.Code != http.StatusOK {
		t.Fatalf("a session of another client: %d", w.Code)
	}
}

// TestLimiterBoundsUserBuckets: past maxBuckets no user bucket is made, the client's bucket
// still holds the request, and the map stays bounded though every bucket is in use.
func TestLimiterBoundsUserBuckets(t *testing.T) {
	clk := &clock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	l := newLimiter(RateLimit{PerSecond: 1e9, Burst: 1 << 30, SessionPerSecond: 1, SessionBurst: 1}, clk.now)
	for i := range maxBuckets + 100 {
		if d := l.take("acme", 1e9, 1<<30, fmt.Sprint("user-", i)); !d.allowed {
			t.Fatalf("user %d's first request refused", i)
		}
	}
	if n := l.len(); n != maxBuckets {
		t.Fatalf("%d buckets, want the bound %d", n, maxBuckets)
	}
	// The bucketless user is held by the client's bucket alone; a user with a bucket by its own.
	if d := l.take("acme", 1e9, 1<<30, fmt.Sprint("user-", maxBuckets+50)); !d.allowed {
		t.Fatal("a user past the bound was refused though its client has tokens")
	}
	if d := l.take("acme", 1e9, 1<<30, "user-7"); d.allowed {
		t.Fatal("a user with an empty bucket of its own was allowed")
	}
	// Once they have refilled, a sweep drops them.
	clk.advance(limiterSweepEvery)
	l.take("acme", 1e9, 1<<30, "")
	if n := l.len(); n != 1 {
		t.Fatalf("%d buckets after the users' refilled, want the client's", n)
	}
}
