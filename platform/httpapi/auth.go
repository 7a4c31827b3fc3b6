package httpapi

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
)

// HeaderAPIKey carries the client's API key.
const HeaderAPIKey = "Authorization-token"

// headerAPIKeyCanonical is HeaderAPIKey as net/http keys it, so that reading it on every
// request converts nothing.
var headerAPIKeyCanonical = http.CanonicalHeaderKey(HeaderAPIKey)

// KeyLookup finds the client that owns an API key. How keys are stored (the client aggregate
// keeps only their hashes) is the lookup's business. It returns an error wrapping
// ErrKeyNotFound for a key that is unknown, revoked or past its retirement; any other error is
// a fault of the lookup itself (503).
type KeyLookup interface {
	Lookup(ctx context.Context, apiKey string) (clientID string, err error)
}

// ErrKeyNotFound is what a KeyLookup returns (wrapped) for an unknown, revoked or retired key.
var ErrKeyNotFound = errors.New("api key not found")

// ExpiringKeyLookup is a KeyLookup whose keys may end at a known instant: the old key of a
// rotation, valid for a grace period. The authentication cache keeps such a key no longer than
// its end, so that it stops working at that instant, not up to PositiveTTL later.
type ExpiringKeyLookup interface {
	KeyLookup
	// LookupValidUntil is Lookup, and the instant the key stops authenticating (zero: none).
	LookupValidUntil(ctx context.Context, apiKey string) (clientID string, validUntil time.Time, err error)
}

// KeyInfo is what a lookup knows of a key that authenticates.
type KeyInfo struct {
	ClientID string
	// KeyID is the key's id among its client's keys (never the key or its hash): a session
	// token names the key it was minted with by it, so that revoking the key ends the session.
	KeyID string
	// ValidUntil is the instant a retiring key stops authenticating (zero: none).
	ValidUntil time.Time
}

// KeyInfoLookup is an ExpiringKeyLookup that also names the key it found. The engine prefers it:
// without key ids the sessions a key mints cannot be ended by revoking it.
type KeyInfoLookup interface {
	ExpiringKeyLookup
	// LookupKey is LookupValidUntil, with the key's id.
	LookupKey(ctx context.Context, apiKey string) (KeyInfo, error)
}

// AuthCacheConfig bounds the authentication cache. Revoking a key takes effect on every node
// within PositiveTTL of the node's read model showing it; a newly issued key works after at most
// NegativeTTL if it was tried before. A retiring key (ExpiringKeyLookup) is cached no longer
// than its end.
type AuthCacheConfig struct {
	PositiveTTL time.Duration
	NegativeTTL time.Duration
	MaxEntries  int
}

// Defaults of the authentication cache: long enough to keep key lookups off the per-request
// path under load (one lookup per key and node every 5 s), short enough that a revoked key
// stops working within seconds.
const (
	DefaultAuthPositiveTTL = 5 * time.Second
	DefaultAuthNegativeTTL = time.Second
	DefaultAuthMaxEntries  = 10_000
)

func (c AuthCacheConfig) withDefaults() AuthCacheConfig {
	if c.PositiveTTL <= 0 {
		c.PositiveTTL = DefaultAuthPositiveTTL
	}
	if c.NegativeTTL <= 0 {
		c.NegativeTTL = DefaultAuthNegativeTTL
	}
	if c.MaxEntries <= 0 {
		c.MaxEntries = DefaultAuthMaxEntries
	}
	return c
}

type authEntry struct {
	clientID string // "" for a key known to be bad
	keyID    string // the key's id, when the lookup names it
	expires  time.Time
}

// cacheKey is what the authentication cache is keyed by: a digest of the key, so that the
// process does not keep a table of plain keys in memory. It is the cache's own choice and need
// not match how the key store hashes keys.
type cacheKey [sha256.Size]byte

// authCache remembers lookups by cacheKey. Bad keys are cached too, briefly, so that a client
// hammering with a wrong key does not turn each request into a lookup.
type authCache struct {
	cfg     AuthCacheConfig
	now     func() time.Time
	mu      sync.Mutex
	entries map[cacheKey]authEntry
}

func newAuthCache(cfg AuthCacheConfig, now func() time.Time) *authCache {
	cfg = cfg.withDefaults()
	return &authCache{cfg: cfg, now: now, entries: make(map[cacheKey]authEntry)}
}

func (a *authCache) get(hash cacheKey) (authEntry, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.entries[hash]
	if !ok {
		return authEntry{}, false
	}
	if !a.now().Before(e.expires) {
		delete(a.entries, hash)
		return authEntry{}, false
	}
	return e, true
}

// put caches a lookup: ClientID "" for a bad key, ValidUntil the end of a retiring key (zero:
// none), before which the entry expires.
func (a *authCache) put(hash cacheKey, key KeyInfo) {
	clientID, validUntil := key.ClientID, key.ValidUntil
	ttl := a.cfg.PositiveTTL
	if clientID == "" {
		ttl = a.cfg.NegativeTTL
	}
	now := a.now()
	expires := now.Add(ttl)
	if !validUntil.IsZero() && validUntil.Before(expires) {
		expires = validUntil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, exists := a.entries[hash]; !exists && len(a.entries) >= a.cfg.MaxEntries {
		// Make room: drop what expired, and if that is not enough, arbitrary entries (map order);
		// an evicted entry only costs one more lookup.
		for k, e := range a.entries {
			if !now.Before(e.expires) {
				delete(a.entries, k)
			}
		}
		for k := range a.entries {
			if len(a.entries) < a.cfg.MaxEntries {
				break
			}
			delete(a.entries, k)
		}
	}
	a.entries[hash] = authEntry{clientID: clientID, keyID: key.KeyID, expires: expires}
}

func (a *authCache) len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.entries)
}

// SigningCallbackPath is the route of the signing providers' callbacks (httpcmd serves it). It
// answers without client authentication: a provider holds no Samla API key, and proves itself
// with a signature made with the client's provider key, which the handler checks.
const SigningCallbackPath = "/callbacks/signing/:clientId"

// isPublicRoute reports the routes that answer without client authentication.
func isPublicRoute(route string) bool {
	return route == "/health" || route == JWKSPath || route == SigningCallbackPath
}

// authenticate finds the request's principal: an API key's client, a user's session, or both.
//
// Keys are never compared as strings: a key is found by its SHA-256 digest, here in the cache
// (a map keyed by the digest) and in the key store (the digest its primary key). An attacker
// who measures how long a lookup takes learns about digests of its own guesses, not about any
// stored key. Session tokens are checked by their Ed25519 signature.
//
// A source that failed too often (failures) gets 429 instead of 401 for every further failure:
// a guesser learns nothing and is slowed, while a valid credential from the same address (a
// shared NAT, a client's egress) still authenticates, so that nobody can lock others out by
// failing on purpose.
func authenticate(keys KeyLookup, cache *authCache, sessions sessionAuth, failures *failureLimiter) gin.HandlerFunc {
	expiring, _ := keys.(ExpiringKeyLookup)
	identifying, _ := keys.(KeyInfoLookup)
	return func(c *gin.Context) {
		if isPublicRoute(c.FullPath()) {
			c.Next()
			return
		}
		gate := failures.gate(c.Request)
		token, hasToken, ok := bearerToken(c, sessions, gate)
		if !ok {
			return
		}
		sent := c.Request.Header[headerAPIKeyCanonical]
		if len(sent) > 1 {
			// Which of several keys counts is not for the server to guess: taking the first
			// would let a proxy's or another client's key act for this one.
			WriteProblem(c, ValidationProblem("Send one Authorization-token header.",
				FieldError{Field: HeaderAPIKey, Message: "must be sent once"}))
			return
		}
		var key string
		if len(sent) == 1 {
			key = sent[0]
		}
		if key == "" && hasToken {
			// The token alone: its audience is the client.
			if authenticateSession(c, sessions, gate, token, "") {
				c.Next()
			}
			return
		}
		if key == "" {
			detail := "The Authorization-token header with an API key is required."
			if sessions.enabled() && sessionsIn(ServiceVersion(c)) {
				detail = "The Authorization-token header with an API key, or a user's session token in Authorization: Bearer, is required."
			}
			unauthorized(c, detail)
			return
		}
		hash := cacheKey(sha256.Sum256([]byte(key)))
		entry, ok := cache.get(hash)
		if !ok {
			ctx := c.Request.Context()
			var (
				found KeyInfo
				err   error
			)
			switch {
			case identifying != nil:
				found, err = identifying.LookupKey(ctx, key)
			case expiring != nil:
				found.ClientID, found.ValidUntil, err = expiring.LookupValidUntil(ctx, key)
			default:
				found.ClientID, err = keys.Lookup(ctx, key)
			}
			switch {
			case errors.Is(err, ErrKeyNotFound):
				found = KeyInfo{}
			case err != nil:
				Logger(ctx).Error("api key lookup failed", "error", err)
				AbortProblem(c, http.StatusServiceUnavailable, CodeServiceUnavailable,
					"Authentication is temporarily unavailable; retry shortly.")
				return
			case found.ClientID == "":
				// A lookup that finds a key must name its client; treat anything else as a fault
				// rather than authenticating an anonymous tenant.
				Logger(ctx).Error("api key lookup returned no client id")
				AbortProblem(c, http.StatusServiceUnavailable, CodeServiceUnavailable,
					"Authentication is temporarily unavailable; retry shortly.")
				return
			}
			cache.put(hash, found)
			entry = authEntry{clientID: found.ClientID, keyID: found.KeyID}
		}
		if entry.clientID == "" {
			if gate.failed(c) {
				return
			}
			unauthorized(c, "The API key is not valid.")
			return
		}
		if hasToken {
			// Both credentials: the key decides the client, and the token must be one of its
			// users' sessions; the request then acts as that session.
			if authenticateSession(c, sessions, gate, token, entry.clientID) {
				c.Next()
			}
			return
		}
		setClient(c, entry.clientID)
		if info := infoFrom(c.Request.Context()); info != nil {
			info.apiKeyID = entry.keyID
		}
		c.Next()
	}
}

func setClient(c *gin.Context, clientID string) {
	if info := infoFrom(c.Request.Context()); info != nil {
		info.clientID = clientID
		info.addLogAttrs(slog.String("client_id", clientID))
	}
}

func unauthorized(c *gin.Context, detail string) {
	// RFC 9110 requires a challenge on 401; the scheme names the header the key goes in.
	c.Header("WWW-Authenticate", fmt.Sprintf("%s realm=%q", HeaderAPIKey, "samla"))
	AbortProblem(c, http.StatusUnauthorized, CodeUnauthorized, detail)
}
