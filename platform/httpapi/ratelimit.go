package httpapi

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
)

// Rate limits. Every authenticated request takes a token from its client's bucket (a user's
// session counts against the client whose user it is); each client's bucket refills at the
// client's own rate up to its own burst (`samla clients set --rate-limit N --burst M`, read from
// ClientLimits behind a cache of RateLimitSettingsTTL, so that a change applies within seconds
// without a restart), else at the service's default. A request with a session token also takes
// one from its user's bucket (RateLimit.SessionPerSecond and SessionBurst), and only when both
// have one: a single user's app, looping or hostile, then cannot use up what the client's
// backend and its other users share. An empty bucket answers 429 RATE_LIMITED with Retry-After.
//
// Every answer that passed the limiter carries the limit in the IETF draft's separate fields
// (draft-ietf-httpapi-ratelimit-headers-06; the later combined RateLimit/RateLimit-Policy form
// changed syntax between drafts, and the separate fields are what gateways and client libraries
// read today):
//
//	RateLimit-Limit:     the client's burst: requests it may make at once
//	RateLimit-Remaining: requests it may still make at once (0 on a 429)
//	RateLimit-Reset:     seconds until the bucket is full again, Remaining back at Limit
//
// A refusal costs a few map lookups under one mutex and a body rendered once at start: no read
// model is asked beyond the cached settings and no JSON is encoded (BenchmarkRefusedRequest).

// RateLimit configures the limiter: the service's default rate and burst, and where each
// client's own come from.
type RateLimit struct {
	// PerSecond tokens are added each second, up to Burst; each request takes one.
	PerSecond float64
	Burst     int
	// Disabled turns the limit off (tests, or a deployment that limits at its gateway).
	Disabled bool
	// Clients gives each client's own rate and burst; nil: every client has the default.
	Clients ClientLimits
	// SettingsTTL is how long a client's settings are cached: RateLimitSettingsTTL when 0.
	SettingsTTL time.Duration
	// SessionPerSecond and SessionBurst are each session user's bucket, taken from besides its
	// client's (DefaultSessionRatePerSecond and DefaultSessionRateBurst when 0).
	SessionPerSecond float64
	SessionBurst     int
}

// ClientLimits is the port to the clients' own rate limits (clientsecurity.Reader).
type ClientLimits interface {
	// ClientRateLimit returns the client's requests per second and burst; 0 for either means
	// the service's default (a client that never set one). An error is a fault of the lookup:
	// the default applies meanwhile.
	ClientRateLimit(ctx context.Context, clientID string) (perSecond float64, burst int, err error)
}

// Default rate limit per client. A B2B client polls each of its end users' collections every
// 0.5 to 2 s while it runs, so one client with a thousand collections in flight sends about a
// thousand requests a second; the old 50/s capped a client at a few dozen concurrent end users.
// 1000/s with a burst of 2000 (a whole polling round of 2000 collections at once, or a batch of
// starts) fits that, while one runaway client still cannot take more than a fraction of what a
// node serves. A client that needs more, or must have less, gets its own with
// `samla clients set`; SAMLA_RATE_LIMIT and SAMLA_RATE_BURST change the default.
const (
	DefaultRatePerSecond = 1000
	DefaultRateBurst     = 2000
)

// Default rate limit per session user. An end user's app polls the status of the user's own
// collections about once a second each and reads a few lists: a handful of requests a second.
// 20/s with a burst of 40 leaves room for a user with a dozen collections in flight, and keeps
// any one user below 2 % of a client's default.
const (
	DefaultSessionRatePerSecond = 20
	DefaultSessionRateBurst     = 40
)

// RateLimitSettingsTTL is how long a client's own rate limit is cached: the longest a change
// takes to apply once the read model shows it.
const RateLimitSettingsTTL = 2 * time.Second

// Header names of the rate limit, in the form Go writes them (canonical, so that setting them
// costs no conversion).
const (
	HeaderRateLimitLimit     = "Ratelimit-Limit"
	HeaderRateLimitRemaining = "Ratelimit-Remaining"
	HeaderRateLimitReset     = "Ratelimit-Reset"
	HeaderRetryAfter         = "Retry-After"
)

func (r RateLimit) withDefaults() RateLimit {
	if r.PerSecond <= 0 {
		r.PerSecond = DefaultRatePerSecond
	}
	if r.Burst <= 0 {
		r.Burst = DefaultRateBurst
	}
	if r.SettingsTTL <= 0 {
		r.SettingsTTL = RateLimitSettingsTTL
	}
	if r.SessionPerSecond <= 0 {
		r.SessionPerSecond = DefaultSessionRatePerSecond
	}
	if r.SessionBurst <= 0 {
		r.SessionBurst = DefaultSessionRateBurst
	}
	return r
}

// bucketKey names a bucket: a client's (user empty) or a session user's of that client. A struct
// rather than a joined string, so that finding a user's bucket allocates nothing.
type bucketKey struct{ client, user string }

// bucket is one client's or session user's token bucket, with the rate and burst it was last
// filled at.
type bucket struct {
	tokens float64
	last   time.Time
	rate   float64
	burst  float64
	// limit is burst as the RateLimit-Limit header says it, formatted when the burst changes.
	limit []string
}

// full reports whether the bucket would be full at now: dropping it loses nothing, as a new
// bucket starts full.
func (b *bucket) full(now time.Time) bool {
	return b.tokens+now.Sub(b.last).Seconds()*b.rate >= b.burst
}

// limiter holds one bucket per client and per session user. Only authenticated clients and
// users get one, so the map holds those that called lately; idle (full) buckets are swept every
// limiterSweepEvery, and at most once a second while the map holds maxIdleBuckets or more. Past
// maxBuckets no new user bucket is made (such a user is held by its client's bucket alone), so
// the map stays bounded even while every bucket in it is in use.
type limiter struct {
	cfg      RateLimit
	now      func() time.Time
	settings *ttlCache[clientRate] // nil without cfg.Clients
	mu       sync.Mutex
	buckets  map[bucketKey]*bucket
	swept    time.Time
}

// clientRate is a client's own rate and burst; zero members take the default.
type clientRate struct {
	perSecond float64
	burst     int
}

// maxIdleBuckets is the map size from which full (idle) buckets are dropped once a second
// rather than once a limiterSweepEvery; maxBuckets the size past which no user bucket is made
// (a bucket is about 100 bytes).
const (
	maxIdleBuckets = 10_000
	maxBuckets     = 100_000
)

// crowdedSweepEvery is how often a crowded map is swept: a sweep walks every bucket, so not on
// every request.
const crowdedSweepEvery = time.Second

// limiterSweepEvery is how often idle buckets are dropped anyway.
const limiterSweepEvery = time.Minute

func newLimiter(cfg RateLimit, now func() time.Time) *limiter {
	cfg = cfg.withDefaults()
	l := &limiter{cfg: cfg, now: now, buckets: make(map[bucketKey]*bucket), swept: now()}
	if cfg.Clients != nil {
		l.settings = newTTLCache[clientRate](cfg.SettingsTTL, now)
	}
	return l
}

// rateOf is the client's rate and burst: its own, else the default.
func (l *limiter) rateOf(ctx context.Context, clientID string) (float64, int) {
	rate, burst := l.cfg.PerSecond, l.cfg.Burst
	if l.settings == nil {
		return rate, burst
	}
	own, err := l.settings.get(clientID, func() (clientRate, error) {
		r, b, err := l.cfg.Clients.ClientRateLimit(ctx, clientID)
		if err != nil {
			if ctx.Err() != nil {
				return clientRate{}, err // the request went away: nothing learnt, nothing cached
			}
			// Cached like an answer: a read model that is down is asked once per TTL, not on
			// every request, and the default applies meanwhile.
			Logger(ctx).Warn("client rate limit lookup failed; the default applies", "error", err)
			return clientRate{}, nil
		}
		return clientRate{perSecond: r, burst: b}, nil
	})
	if err != nil {
		return rate, burst
	}
	if own.perSecond > 0 {
		rate = own.perSecond
	}
	if own.burst > 0 {
		burst = own.burst
	}
	return rate, burst
}

// decision is what the limiter decided for one request, for its headers.
type decision struct {
	allowed   bool
	limit     []string      // RateLimit-Limit
	remaining int           // whole tokens left
	reset     time.Duration // until the bucket is full
	wait      time.Duration // until a token is available (refused only)
}

// take takes a token from the client's bucket of rate and burst, and, for a session (user not
// empty), from the user's bucket too: from both or from neither. The decision's headers are
// those of the bucket that binds: the one that refused (the later to refill if both did), else
// the one with fewer tokens left.
func (l *limiter) take(client string, rate float64, burst int, user string) decision {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if since := now.Sub(l.swept); since >= limiterSweepEvery || (len(l.buckets) >= maxIdleBuckets && since >= crowdedSweepEvery) {
		l.sweep(now)
	}
	b := l.bucket(bucketKey{client: client}, rate, burst, now, true)
	var u *bucket
	if user != "" {
		u = l.bucket(bucketKey{client: client, user: user}, l.cfg.SessionPerSecond, l.cfg.SessionBurst, now, len(l.buckets) < maxBuckets)
	}
	if b.tokens >= 1 && (u == nil || u.tokens >= 1) {
		b.tokens--
		binding := b
		if u != nil {
			u.tokens--
			if u.tokens < b.tokens {
				binding = u
			}
		}
		return binding.decision(true)
	}
	binding := b
	if b.tokens >= 1 || (u != nil && u.tokens < 1 && u.wait() > b.wait()) {
		binding = u
	}
	return binding.decision(false)
}

// bucket is the bucket of key with rate and burst, refilled to now; made when missing if create
// (else nil).
func (l *limiter) bucket(key bucketKey, rate float64, burst int, now time.Time, create bool) *bucket {
	b, ok := l.buckets[key]
	if !ok {
		if !create {
			return nil
		}
		b = &bucket{tokens: float64(burst), last: now}
		l.buckets[key] = b
	}
	if b.rate != rate || b.burst != float64(burst) {
		// A new bucket, or the client's settings changed: what it holds stays, up to the new
		// burst.
		b.rate, b.burst = rate, float64(burst)
		b.tokens = math.Min(b.tokens, b.burst)
		b.limit = []string{strconv.Itoa(burst)}
	}
	if elapsed := now.Sub(b.last).Seconds(); elapsed > 0 {
		b.tokens = math.Min(b.burst, b.tokens+elapsed*b.rate)
		b.last = now
	}
	return b
}

// wait is how long until the bucket has a token.
func (b *bucket) wait() time.Duration { return seconds((1 - b.tokens) / b.rate) }

// decision describes the bucket after a request it allowed (a token already taken) or refused.
func (b *bucket) decision(allowed bool) decision {
	d := decision{allowed: allowed, limit: b.limit, remaining: int(b.tokens),
		reset: seconds((b.burst - b.tokens) / b.rate)}
	if !allowed {
		d.wait = b.wait()
	}
	return d
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func (l *limiter) sweep(now time.Time) {
	l.swept = now
	for k, b := range l.buckets {
		if b.full(now) {
			delete(l.buckets, k)
		}
	}
}

func (l *limiter) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}

// ceilSeconds is d in whole seconds, rounded up: a client that waits that long finds what the
// header promised.
func ceilSeconds(d time.Duration) int {
	return int(math.Ceil(d.Seconds()))
}

// smallIntValues are header values of 0 to 255, shared by every answer that needs one (net/http
// only reads them), so that the seconds and counts most answers carry cost no allocation.
var smallIntValues = func() [][]string {
	v := make([][]string, 256)
	for i := range v {
		v[i] = []string{strconv.Itoa(i)}
	}
	return v
}()

// setInt sets a header to n.
func setInt(h http.Header, name string, n int) {
	if n >= 0 && n < len(smallIntValues) {
		h[name] = smallIntValues[n]
		return
	}
	h[name] = []string{strconv.Itoa(n)}
}

// rateLimitedBody is the problem of a refusal, rendered once: a refused request encodes nothing.
var rateLimitedBody = mustJSON(NewProblem(http.StatusTooManyRequests, CodeRateLimited,
	"Too many requests for this client, or for this session's user; retry after the number of seconds in Retry-After."))

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// Shared values of a refusal's headers.
var (
	headerProblemType = []string{ContentTypeProblem}
	headerNoStore     = []string{"no-store"}
)

// abortRendered answers status with a problem body rendered once (rateLimitedBody), as
// WriteProblem would, and aborts the chain.
func abortRendered(c *gin.Context, status int, body []byte) {
	h := c.Writer.Header()
	h["Content-Type"] = headerProblemType
	h["Cache-Control"] = headerNoStore
	c.Writer.WriteHeader(status)
	_, _ = c.Writer.Write(body)
	c.Abort()
}

func rateLimit(l *limiter) gin.HandlerFunc {
	return func(c *gin.Context) {
		id := ClientID(c)
		if id == "" { // public routes: nothing to key the bucket on
			c.Next()
			return
		}
		rate, burst := l.rateOf(c.Request.Context(), id)
		user, _ := SessionUser(c)
		d := l.take(id, rate, burst, user)
		h := c.Writer.Header()
		h[HeaderRateLimitLimit] = d.limit
		setInt(h, HeaderRateLimitRemaining, d.remaining)
		setInt(h, HeaderRateLimitReset, ceilSeconds(d.reset))
		if !d.allowed {
			setInt(h, HeaderRetryAfter, max(1, ceilSeconds(d.wait)))
			abortRendered(c, http.StatusTooManyRequests, rateLimitedBody)
			return
		}
		c.Next()
	}
}
