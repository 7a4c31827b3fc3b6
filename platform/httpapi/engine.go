package httpapi

import (
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/sync/semaphore"

	"github.com/samla/samla/platform/metrics"
)

// Options configure the engine. Keys is required; everything else has a default.
type Options struct {
	// Keys authenticates clients by API key.
	Keys KeyLookup
	// Logger receives the access log and errors; nil discards them.
	Logger *slog.Logger
	// Metrics records requests by route template and status; nil records nothing.
	Metrics *metrics.Metrics
	// AuthCache bounds the cache in front of Keys; zero values take the defaults.
	AuthCache AuthCacheConfig
	// RateLimit is the per-client limit: the default (zero values take DefaultRatePerSecond and
	// DefaultRateBurst) and each client's own (RateLimit.Clients).
	RateLimit RateLimit
	// AuthFailures limits failed authentications per source address; zero values take the
	// defaults (see authfailures.go).
	AuthFailures AuthFailureLimit
	// MaxBodyBytes is the body limit of routes that set none with MaxBody; 0 means
	// DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// LargeBodyBudget bounds the bytes of large bodies (above DefaultMaxBodyBytes, on routes
	// whose MaxBody allows them) in flight at once; 0 means DefaultLargeBodyBudget.
	LargeBodyBudget int64
	// Now is the clock of the auth cache and the rate limiter; nil means time.Now.
	Now func() time.Time
	// Sessions verifies users' session tokens (2026-04-01, Authorization: Bearer), and
	// SessionUsers tells whether a token's user is still live; both or neither. Without them a
	// request authenticates by API key only.
	Sessions     SessionVerifier
	SessionUsers SessionUsers
	// SessionKeys tells whether the API key that minted a session token (its akid claim) still
	// authenticates; a revoked key's sessions end with it. Cached like Keys (AuthCache). Nil:
	// tokens are not checked against their keys (only for tests; the service sets it).
	SessionKeys SessionKeys
	// JWKS, when set, is served at JWKSPath without authentication: the session tokens' public
	// keys as a JWK Set (sessiontoken.KeySet.JWKSJSON).
	JWKS []byte
	// MTLS checks client certificates on the mutual-TLS listener (requests that MTLSListener
	// marks) and refuses mTLS-only clients' API keys elsewhere; see mtls.go.
	MTLS MTLSOptions
}

// NewEngine builds the Gin engine every API role mounts its routes on, with the whole middleware
// chain, /health, and 404/405 answered as problems. It panics when opts.Keys is nil: that is a
// wiring mistake that must stop the process at start, not a request-time condition.
//
// The chain, outermost first: request/correlation ids → metrics and access log → recovery →
// Service-Version → header limits (431) → canonical path (404) → authentication (a source
// address with too many failed authentications: 429 before any lookup; API key and user
// sessions, with the sessions' route scope: 403) → mutual TLS (the client certificate on the
// mTLS listener, mTLS-only clients elsewhere: 401) → rate limit (429, RateLimit-* headers on
// every answer past it) → query parameters given once (400) → body limit → JSON content type.
// Mutual TLS comes before the rate limit so that a stolen key without its certificate cannot
// spend its client's requests. Metrics sit outside recovery so panics count as the 500s they
// become; the version is negotiated before anything can refuse the request, so that even a 401
// says which version it speaks. A listener serving the engine sets its http.Server's
// MaxHeaderBytes to ServerMaxHeaderBytes, so that oversize headers reach the header limits.
func NewEngine(opts Options) *gin.Engine {
	if opts.Keys == nil {
		panic("httpapi.NewEngine: Options.Keys is required")
	}
	if (opts.Sessions == nil) != (opts.SessionUsers == nil) {
		panic("httpapi.NewEngine: Options.Sessions and Options.SessionUsers go together")
	}
	if opts.SessionKeys != nil && opts.Sessions == nil {
		panic("httpapi.NewEngine: Options.SessionKeys needs Options.Sessions")
	}
	if opts.MTLS.Lookup != nil && opts.MTLS.Environment != "test" && opts.MTLS.Environment != "production" {
		panic("httpapi.NewEngine: Options.MTLS.Environment must be test or production")
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	maxBody := opts.MaxBodyBytes
	if maxBody <= 0 {
		maxBody = DefaultMaxBodyBytes
	}

	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	// Redirects would answer without a problem body and leak route shapes; a wrong path is 404.
	e.RedirectTrailingSlash = false
	e.RedirectFixedPath = false
	e.HandleMethodNotAllowed = true
	// Gin's context then falls back to the request context (deadlines, request ids).
	e.ContextWithFallback = true
	// No proxy is trusted unless the deployment says so; ClientIP must not be spoofable.
	_ = e.SetTrustedProxies(nil)

	chain := []gin.HandlerFunc{requestContext(logger), observe(opts.Metrics), recovery, versionMiddleware,
		limitHeaders, canonicalPath}
	chain = append(chain, authenticate(opts.Keys, newAuthCache(opts.AuthCache, now),
		sessionAuth{verifier: opts.Sessions, users: opts.SessionUsers, keys: opts.SessionKeys,
			keyCache: newAuthCache(opts.AuthCache, now)}, newFailureLimiter(opts.AuthFailures, now)),
		mutualTLS(opts.MTLS, now))
	if !opts.RateLimit.Disabled {
		chain = append(chain, rateLimit(newLimiter(opts.RateLimit, now)))
	}
	budget := opts.LargeBodyBudget
	if budget <= 0 {
		budget = DefaultLargeBodyBudget
	}
	chain = append(chain, singleQueryValues,
		bodyLimit(maxBody, &largeBodies{sem: semaphore.NewWeighted(budget), budget: budget, wait: LargeBodyWait}), requireJSON)
	e.Use(securityHeaders) // outermost: every answer, a 404, 405 or recovered panic too, carries the security headers
	e.Use(chain...)

	e.NoRoute(func(c *gin.Context) {
		AbortProblem(c, http.StatusNotFound, CodeNotFound, "No such resource.")
	})
	e.NoMethod(func(c *gin.Context) {
		AbortProblem(c, http.StatusMethodNotAllowed, CodeMethodNotAllowed,
			"The resource does not support this method; see the Allow header.")
	})
	e.GET("/health", Health)
	if opts.JWKS != nil {
		e.GET(JWKSPath, jwksHandler(opts.JWKS))
	}
	return e
}

// Health answers the liveness probe of clients and load balancers, without authentication.
func Health(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"status": "healthy"})
}
