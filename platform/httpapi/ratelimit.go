package httpapi

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
)

// RateLimit is the per-client token bucket: PerSecond tokens are added each second up to Burst,
// and each request takes one.
type RateLimit struct {
	PerSecond float64
	Burst     int
	// Disabled turns the limit off (tests, or a deployment that limits at its gateway).
	Disabled bool
}

// Default rate limit per client. Polling a collection every 500 ms to 2 s costs a few requests
// per second per end user; 50/s with a burst of 100 lets a client run dozens of concurrent
// collections while keeping one runaway client from starving the others.
const (
	DefaultRatePerSecond = 50
	DefaultRateBurst     = 100
)

func (r RateLimit) withDefaults() RateLimit {
	if r.PerSecond <= 0 {
		r.PerSecond = DefaultRatePerSecond
	}
	if r.Burst <= 0 {
		r.Burst = DefaultRateBurst
	}
	return r
}

type bucket struct {
	tokens float64
	last   time.Time
}

// limiter holds one bucket per client. Clients are few (tenants, not end users), but idle buckets
// are still swept so that the map cannot grow without bound.
type limiter struct {
	cfg     RateLimit
	now     func() time.Time
	mu      sync.Mutex
	buckets map[string]*bucket
}

// maxIdleBuckets is the map size above which full (idle) buckets are dropped; a dropped bucket is
// recreated full, which is exactly the state it was in.
const maxIdleBuckets = 10_000

func newLimiter(cfg RateLimit, now func() time.Time) *limiter {
	return &limiter{cfg: cfg.withDefaults(), now: now, buckets: make(map[string]*bucket)}
}

// allow takes a token for key, or reports how long until one is available.
func (l *limiter) allow(key string) (bool, time.Duration) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) >= maxIdleBuckets {
			l.sweep(now)
		}
		b = &bucket{tokens: float64(l.cfg.Burst), last: now}
		l.buckets[key] = b
	}
	if elapsed := now.Sub(b.last).Seconds(); elapsed > 0 {
		b.tokens = math.Min(float64(l.cfg.Burst), b.tokens+elapsed*l.cfg.PerSecond)
		b.last = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	wait := time.Duration((1 - b.tokens) / l.cfg.PerSecond * float64(time.Second))
	return false, wait
}

func (l *limiter) sweep(now time.Time) {
	for k, b := range l.buckets {
		if b.tokens+now.Sub(b.last).Seconds()*l.cfg.PerSecond >= float64(l.cfg.Burst) {
			delete(l.buckets, k)
		}
	}
}

func rateLimit(l *limiter) gin.HandlerFunc {
	return func(c *gin.Context) {
		id := ClientID(c)
		if id == "" { // public routes: nothing to key the bucket on
			c.Next()
			return
		}
		ok, wait := l.allow(id)
		if !ok {
			// Retry-After takes whole seconds; round up so that a client that obeys it succeeds.
			secs := int(math.Ceil(wait.Seconds()))
			if secs < 1 {
				secs = 1
			}
			c.Header("Retry-After", strconv.Itoa(secs))
			AbortProblem(c, http.StatusTooManyRequests, CodeRateLimited,
				"Too many requests for this client; retry after the number of seconds in Retry-After.")
			return
		}
		c.Next()
	}
}
