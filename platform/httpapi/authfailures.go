package httpapi

import (
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
)

// Failed authentications are limited per source address, so that nobody can guess API keys or
// session tokens at the speed of the network. Each failure from a source fills its level by one;
// the level drains evenly, Max failures per Window. While one more failure would take the level
// above Max, every request from the source that needs authentication is refused with 429
// RATE_LIMITED and Retry-After (the seconds until one more failure fits) before its credentials
// are looked at: no key lookup, no token verification. With the defaults a source may fail 20
// times at once and then once every 3 seconds.
//
// What counts as a failure: an API key that is unknown, revoked or retired, and a session token
// that is malformed, of another algorithm, signed by an unknown key or not at all, or of another
// audience or issuer, or an Authorization header of another scheme: credentials that could be a
// guess. A token this service signed that has expired, is not yet valid or belongs to a deleted
// user is no guess and does not count, nor does a request without credentials (it guesses
// nothing). A success resets nothing, neither its own source's level (a client holding one good
// key could otherwise interleave it with guesses) nor anyone else's.
//
// The source is the connection's remote address, never X-Forwarded-For or the like: a header is
// the client's to forge, and no proxy is trusted by default. An IPv6 source counts by its /64,
// the block one host is usually given. A deployment behind a reverse proxy sees the proxy as the
// only source; it must limit failures at the proxy and turn this off (Disabled,
// SAMLA_AUTH_FAILURE_LIMIT=0), or pass the clients' addresses through at the transport level.

// AuthFailureLimit configures the limit of failed authentications per source address.
type AuthFailureLimit struct {
	// Max failures per Window; DefaultAuthFailureMax and DefaultAuthFailureWindow when 0.
	Max    int
	Window time.Duration
	// Disabled turns the limit off.
	Disabled bool
}

// Defaults of the failed-authentication limit: far more failures than a client that mistyped or
// rotated a key makes before someone notices, far fewer than guessing needs (API keys carry 256
// random bits).
const (
	DefaultAuthFailureMax    = 20
	DefaultAuthFailureWindow = time.Minute
)

// maxFailureSources bounds the sources tracked at once (a few MiB). Only sources that failed are
// tracked, and drained ones are dropped; when more sources than this fail within one window,
// arbitrary ones are forgotten, which only gives each of them its first Max failures again.
const maxFailureSources = 65_536

// ipv6SourceBits is the prefix an IPv6 source is counted by.
const ipv6SourceBits = 64

func (a AuthFailureLimit) withDefaults() AuthFailureLimit {
	if a.Max <= 0 {
		a.Max = DefaultAuthFailureMax
	}
	if a.Window <= 0 {
		a.Window = DefaultAuthFailureWindow
	}
	return a
}

// failureLimiter holds each failing source's level.
type failureLimiter struct {
	max     float64
	drain   float64 // per second
	window  time.Duration
	now     func() time.Time
	mu      sync.Mutex
	sources map[netip.Addr]failureLevel
	swept   time.Time
}

// failureLevel is a source's level at an instant.
type failureLevel struct {
	level float64
	at    time.Time
}

// newFailureLimiter returns the limiter, nil when it is disabled.
func newFailureLimiter(cfg AuthFailureLimit, now func() time.Time) *failureLimiter {
	if cfg.Disabled {
		return nil
	}
	cfg = cfg.withDefaults()
	return &failureLimiter{max: float64(cfg.Max), drain: float64(cfg.Max) / cfg.Window.Seconds(), window: cfg.Window,
		now: now, sources: make(map[netip.Addr]failureLevel), swept: now()}
}

// sourceOf is the request's source: its connection's remote address, an IPv6 one cut to its
// /64. ok is false for a request without an IP address (a Unix socket, a test's made-up one).
func sourceOf(r *http.Request) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}, false
	}
	addr := ap.Addr().Unmap()
	if addr.Is6() {
		prefix, err := addr.Prefix(ipv6SourceBits)
		if err != nil {
			return netip.Addr{}, false
		}
		addr = prefix.Addr()
	}
	return addr, true
}

func (e failureLevel) drained(now time.Time, drain float64) float64 {
	if elapsed := now.Sub(e.at).Seconds(); elapsed > 0 {
		return max(0, e.level-elapsed*drain)
	}
	return e.level
}

// blocked reports whether one more failure from src would take it above the limit, and how
// long until it would not.
func (f *failureLimiter) blocked(src netip.Addr) (time.Duration, bool) {
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.sources[src]
	if !ok {
		return 0, false
	}
	level := e.drained(now, f.drain)
	if level+1 <= f.max {
		return 0, false
	}
	return seconds((level + 1 - f.max) / f.drain), true
}

// record counts one failure of src.
func (f *failureLimiter) record(src netip.Addr) {
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.sources[src]
	if !ok && (len(f.sources) >= maxFailureSources || now.Sub(f.swept) >= f.window) {
		f.sweep(now)
	}
	f.sources[src] = failureLevel{level: e.drained(now, f.drain) + 1, at: now}
}

// sweep drops the sources that drained, and arbitrary ones (map order) while the map is full.
func (f *failureLimiter) sweep(now time.Time) {
	f.swept = now
	for src, e := range f.sources {
		if e.drained(now, f.drain) == 0 {
			delete(f.sources, src)
		}
	}
	for src := range f.sources {
		if len(f.sources) < maxFailureSources {
			break
		}
		delete(f.sources, src)
	}
}

func (f *failureLimiter) len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.sources)
}

// authFailedBody is the problem of a source refused for its failures, rendered once.
var authFailedBody = mustJSON(NewProblem(http.StatusTooManyRequests, CodeRateLimited,
	"Too many failed authentications from this address; retry after the number of seconds in Retry-After."))

// authGate is the failed-authentication limit as authentication uses it; its zero value (no
// limiter, or no source) lets everything through and counts nothing.
type authGate struct {
	limiter *failureLimiter
	src     netip.Addr
	tracked bool
}

func (f *failureLimiter) gate(r *http.Request) authGate {
	if f == nil {
		return authGate{}
	}
	src, ok := sourceOf(r)
	return authGate{limiter: f, src: src, tracked: ok}
}

// failed counts a failed authentication of the request's source and, when the source has
// failed too often, answers 429 with Retry-After in place of the 401 (reporting true): valid
// credentials are never refused for their address, only failures are slowed.
func (g authGate) failed(c *gin.Context) bool {
	if !g.tracked {
		return false
	}
	wait, blocked := g.limiter.blocked(g.src)
	if !blocked {
		g.limiter.record(g.src)
		return false
	}
	setInt(c.Writer.Header(), HeaderRetryAfter, max(1, ceilSeconds(wait)))
	abortRendered(c, http.StatusTooManyRequests, authFailedBody)
	return true
}
