package httpapi

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/samla/samla/platform/sessiontoken"
)

// doFrom is env.do from the remote address remote.
func (env *testEnv) doFrom(t *testing.T, remote, path string, headers map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.RemoteAddr = remote
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	env.engine.ServeHTTP(w, req)
	return w
}

const (
	attacker  = "203.0.113.7:40000"
	bystander = "198.51.100.9:50000"
)

var guess = map[string]string{HeaderAPIKey: "guessed-key-0000000000000000000000000000"}

// TestAuthFailuresAreLimitedPerSource: after the limit, a source's failures are 429 rather than
// 401, whatever header names another address, while a valid key from it still works (nobody can
// lock out the others behind a shared address); other sources are not affected, and its
// failures drain at Max per Window.
func TestAuthFailuresAreLimitedPerSource(t *testing.T) {
	env := newEnv(t, func(o *Options) { o.RateLimit.Disabled = true })
	for i := 0; i < DefaultAuthFailureMax; i++ {
		decodeProblem(t, env.doFrom(t, attacker, "/whoami", guess), http.StatusUnauthorized, CodeUnauthorized)
		// Another source's success in between resets nothing.
		if w := env.doFrom(t, bystander, "/whoami", authed()); w.Code != http.StatusOK {
			t.Fatalf("the bystander = %d", w.Code)
		}
	}
	for _, h := range []map[string]string{guess, {"X-Forwarded-For": "192.0.2.50", HeaderAPIKey: "another-guess-000000000000000000000000"}} {
		w := env.doFrom(t, attacker, "/whoami", h)
		p := decodeProblem(t, w, http.StatusTooManyRequests, CodeRateLimited)
		if !strings.Contains(p.Detail, "failed authentications") || w.Header().Get("Retry-After") != "3" {
			t.Fatalf("refused source: %q, Retry-After %q", p.Detail, w.Header().Get("Retry-After"))
		}
	}
	if w := env.doFrom(t, attacker, "/whoami", authed()); w.Code != http.StatusOK {
		t.Fatalf("a valid key from the source over its limit = %d", w.Code)
	}
	// Public routes stay open to it; other sources are untouched, even with a bad key.
	if w := env.doFrom(t, attacker, "/health", nil); w.Code != http.StatusOK {
		t.Fatalf("health from the refused source = %d", w.Code)
	}
	decodeProblem(t, env.doFrom(t, bystander, "/whoami", guess), http.StatusUnauthorized, CodeUnauthorized)
	// A header naming another address changes nothing: the connection's address counts.
	decodeProblem(t, env.doFrom(t, attacker, "/whoami", map[string]string{"X-Forwarded-For": "198.51.100.1", HeaderAPIKey: guess[HeaderAPIKey]}),
		http.StatusTooManyRequests, CodeRateLimited)

	// One failure fits again after Window/Max (3 s), then the source is refused again.
	env.clock.advance(3 * time.Second)
	decodeProblem(t, env.doFrom(t, attacker, "/whoami", guess), http.StatusUnauthorized, CodeUnauthorized)
	decodeProblem(t, env.doFrom(t, attacker, "/whoami", guess), http.StatusTooManyRequests, CodeRateLimited)
	// A whole window later it has all of them back; its good key works.
	env.clock.advance(DefaultAuthFailureWindow)
	if w := env.doFrom(t, attacker, "/whoami", authed()); w.Code != http.StatusOK {
		t.Fatalf("after the window = %d", w.Code)
	}
}

// TestAuthFailuresWhatCounts: no credentials is no guess; an expired token this service signed
// is none either; a forged token is.
func TestAuthFailuresWhatCounts(t *testing.T) {
	env := newSessionEnv(t)
	tok := env.token(t, "acme", sessUser)
	for i := 0; i < 3*DefaultAuthFailureMax; i++ {
		decodeProblem(t, env.doFrom(t, attacker, "/whoami", nil), http.StatusUnauthorized, CodeUnauthorized)
	}
	env.clock.advance(sessiontoken.DefaultTTL + sessiontoken.ClockSkew)
	for i := 0; i < 3*DefaultAuthFailureMax; i++ {
		decodeProblem(t, env.doFrom(t, attacker, "/users/"+sessUser, bearer(tok)), http.StatusUnauthorized, CodeTokenExpired)
	}
	fresh := env.token(t, "acme", sessUser)
	forged := fresh[:strings.LastIndexByte(fresh, '.')+1] + "AAAA"
	for i := 0; i < DefaultAuthFailureMax; i++ {
		w := env.doFrom(t, attacker, "/users/"+sessUser, bearer(forged))
		if w.Code != http.StatusUnauthorized {
			t.Fatalf("forged token %d = %d", i, w.Code)
		}
	}
	decodeProblem(t, env.doFrom(t, attacker, "/users/"+sessUser, bearer(forged)), http.StatusTooManyRequests, CodeRateLimited)
	if w := env.doFrom(t, attacker, "/users/"+sessUser, bearer(fresh)); w.Code != http.StatusOK {
		t.Fatalf("a valid token from the source over its limit = %d", w.Code)
	}
	// An Authorization header of another scheme is a failure too.
	for i := 0; i < DefaultAuthFailureMax; i++ {
		w := env.doFrom(t, bystander, "/users/"+sessUser, map[string]string{HeaderAuthorization: "Basic YTpi", HeaderServiceVersion: string(V20260401)})
		if w.Code != http.StatusUnauthorized {
			t.Fatalf("Basic credentials %d = %d", i, w.Code)
		}
	}
	decodeProblem(t, env.doFrom(t, bystander, "/users/"+sessUser, map[string]string{HeaderAuthorization: "Basic YTpi",
		HeaderServiceVersion: string(V20260401)}), http.StatusTooManyRequests, CodeRateLimited)
}

// TestAuthFailuresIPv6CountByPrefix: the addresses of one /64 are one source.
func TestAuthFailuresIPv6CountByPrefix(t *testing.T) {
	env := newEnv(t, func(o *Options) { o.AuthFailures = AuthFailureLimit{Max: 3, Window: time.Minute} })
	for i := 1; i <= 3; i++ {
		decodeProblem(t, env.doFrom(t, "[2001:db8:1:2::"+string(rune('0'+i))+"]:443", "/whoami", guess), http.StatusUnauthorized, CodeUnauthorized)
	}
	decodeProblem(t, env.doFrom(t, "[2001:db8:1:2:ffff::1]:443", "/whoami", guess), http.StatusTooManyRequests, CodeRateLimited)
	if w := env.doFrom(t, "[2001:db8:1:3::1]:443", "/whoami", authed()); w.Code != http.StatusOK {
		t.Fatalf("another /64 = %d", w.Code)
	}
	// An IPv4-mapped address is its IPv4 address.
	for i := 0; i < 3; i++ {
		decodeProblem(t, env.doFrom(t, "[::ffff:192.0.2.77]:1", "/whoami", guess), http.StatusUnauthorized, CodeUnauthorized)
	}
	decodeProblem(t, env.doFrom(t, "192.0.2.77:2", "/whoami", guess), http.StatusTooManyRequests, CodeRateLimited)
}

func TestAuthFailuresDisabledAndUntracked(t *testing.T) {
	env := newEnv(t, func(o *Options) { o.AuthFailures.Disabled = true; o.RateLimit.Disabled = true })
	for i := 0; i < 2*DefaultAuthFailureMax; i++ {
		decodeProblem(t, env.doFrom(t, attacker, "/whoami", guess), http.StatusUnauthorized, CodeUnauthorized)
	}
	if w := env.doFrom(t, attacker, "/whoami", authed()); w.Code != http.StatusOK {
		t.Fatalf("disabled: %d", w.Code)
	}
	// A request without an IP address (a Unix socket) is not tracked.
	env = newEnv(t, nil)
	for i := 0; i < 2*DefaultAuthFailureMax; i++ {
		decodeProblem(t, env.doFrom(t, "@", "/whoami", guess), http.StatusUnauthorized, CodeUnauthorized)
	}
}

// TestFailureLimiterIsBounded: sources that drained are dropped, and the map never passes its
// bound however many sources fail.
func TestFailureLimiterIsBounded(t *testing.T) {
	clk := &clock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	f := newFailureLimiter(AuthFailureLimit{}, clk.now)
	for i := 0; i < maxFailureSources+1000; i++ {
		f.record(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}))
	}
	if n := f.len(); n > maxFailureSources {
		t.Fatalf("%d sources, bound %d", n, maxFailureSources)
	}
	clk.advance(DefaultAuthFailureWindow)
	f.record(netip.MustParseAddr("192.0.2.1"))
	if n := f.len(); n != 1 {
		t.Fatalf("%d sources after they drained, want 1", n)
	}
	if newFailureLimiter(AuthFailureLimit{Disabled: true}, clk.now) != nil {
		t.Fatal("a disabled limiter")
	}
}
