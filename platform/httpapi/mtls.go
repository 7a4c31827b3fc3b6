package httpapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
)

// Mutual TLS. The engine is served on the plain listener and, wrapped in MTLSListener, on the
// mutual-TLS listener, whose TLS handshake already required a client certificate that chains
// to the operator's CA. After authentication, the engine's mutualTLS middleware checks:
//
//   - on the mTLS listener, the certificate against the read model (MTLSLookup): known by its
//     serial and fingerprint, not revoked, not expired, of the listener's environment, and of
//     the client the request authenticated as. Public routes (GET /health) check the
//     certificate alone, so that a client can test a certificate with /health.
//   - on the plain listener, a request that carries an API key of a client set to mTLS-only is
//     refused (MTLS_REQUIRED). A user's session token alone is not refused: end users' devices
//     hold no client certificate.
//
// Both lookups sit behind a short cache (MTLSOptions.CacheTTL), so that a revocation or a
// setting takes effect within seconds, without a restart.

// Problem codes of mutual TLS; each is a 401.
const (
	CodeCertificateRequired         = "CERTIFICATE_REQUIRED"
	CodeCertificateUnknown          = "CERTIFICATE_UNKNOWN"
	CodeCertificateRevoked          = "CERTIFICATE_REVOKED"
	CodeCertificateExpired          = "CERTIFICATE_EXPIRED"
	CodeCertificateWrongEnvironment = "CERTIFICATE_WRONG_ENVIRONMENT"
	CodeCertificateClientMismatch   = "CERTIFICATE_CLIENT_MISMATCH"
	CodeMTLSRequired                = "MTLS_REQUIRED"
)

// ClientCertificate is what the read model knows of a certificate the operator's CA signed.
type ClientCertificate struct {
	ClientID    string
	Environment string // test or production
	Fingerprint string // hex SHA-256 of the DER certificate
	NotAfter    time.Time
	Revoked     bool
}

// MTLSLookup is the port to the client certificates and settings.
type MTLSLookup interface {
	// CertificateBySerial returns the certificate with this serial (lowercase hex without
	// leading zeros), or an error wrapping ErrCertificateNotFound. Other errors are faults of
	// the lookup (503).
	CertificateBySerial(ctx context.Context, serial string) (ClientCertificate, error)
	// MTLSOnly reports whether the client's API key is refused on the plain listener (false for
	// a client without settings).
	MTLSOnly(ctx context.Context, clientID string) (bool, error)
}

// ErrCertificateNotFound is what an MTLSLookup returns (wrapped) for an unknown serial.
var ErrCertificateNotFound = errors.New("client certificate not found")

// DefaultMTLSCacheTTL is how long a certificate's or a client's mTLS-only status is cached: the
// longest a revocation (once in the read model) takes to refuse a request.
const DefaultMTLSCacheTTL = 2 * time.Second

// MaxMTLSCacheTTL bounds it: a revocation must not wait longer.
const MaxMTLSCacheTTL = 10 * time.Second

// MTLSOptions configure the engine's mutual-TLS checks.
type MTLSOptions struct {
	// Lookup finds certificates and settings. Without it, a request on the mTLS listener is
	// refused (503: the listener cannot check what it must) and nobody is mTLS-only.
	Lookup MTLSLookup
	// Environment is this deployment's: test or production. A certificate of the other one is
	// refused (CERTIFICATE_WRONG_ENVIRONMENT).
	Environment string
	// CacheTTL is DefaultMTLSCacheTTL when 0, at most MaxMTLSCacheTTL.
	CacheTTL time.Duration
}

type mtlsListenerKey struct{}

// MTLSListener marks every request h serves as arriving on the mutual-TLS listener; wrap the
// engine in it for that listener's http.Server only.
func MTLSListener(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), mtlsListenerKey{}, true)))
	})
}

func onMTLSListener(r *http.Request) bool {
	on, _ := r.Context().Value(mtlsListenerKey{}).(bool)
	return on
}

// certResult is a cached certificate lookup: found false for an unknown serial.
type certResult struct {
	cert  ClientCertificate
	found bool
}

func mutualTLS(opts MTLSOptions, now func() time.Time) gin.HandlerFunc {
	ttl := opts.CacheTTL
	if ttl <= 0 {
		ttl = DefaultMTLSCacheTTL
	}
	ttl = min(ttl, MaxMTLSCacheTTL)
	certs := newTTLCache[certResult](ttl, now)
	mtlsOnly := newTTLCache[bool](ttl, now)
	lookup := opts.Lookup
	return func(c *gin.Context) {
		r := c.Request
		ctx := r.Context()
		if !onMTLSListener(r) {
			// The plain listener: an mTLS-only client's API key is refused here.
			clientID := ClientID(c)
			if lookup == nil || clientID == "" || !sentAPIKey(r) {
				c.Next()
				return
			}
			only, err := mtlsOnly.get(clientID, func() (bool, error) { return lookup.MTLSOnly(ctx, clientID) })
			if err != nil {
				mtlsUnavailable(c, "client settings lookup failed", err)
				return
			}
			if only {
				certificateRefused(c, CodeMTLSRequired, "This client must call Samla on its mutual-TLS address, with its client certificate.")
				return
			}
			c.Next()
			return
		}
		if lookup == nil {
			mtlsUnavailable(c, "mutual TLS has no certificate lookup", errors.New("no MTLSOptions.Lookup"))
			return
		}
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.PeerCertificates) == 0 {
			certificateRefused(c, CodeCertificateRequired, "A client certificate signed by the operator's CA is required.")
			return
		}
		leaf := r.TLS.PeerCertificates[0]
		serial := leaf.SerialNumber.Text(16)
		res, err := certs.get(serial, func() (certResult, error) {
			cert, err := lookup.CertificateBySerial(ctx, serial)
			if errors.Is(err, ErrCertificateNotFound) {
				return certResult{}, nil
			}
			return certResult{cert: cert, found: err == nil}, err
		})
		if err != nil {
			mtlsUnavailable(c, "client certificate lookup failed", err)
			return
		}
		sum := sha256.Sum256(leaf.Raw)
		switch cert := res.cert; {
		case !res.found || cert.Fingerprint != hex.EncodeToString(sum[:]):
			// A certificate the CA signed but Samla never recorded (or not yet: the read model
			// shows a new one within seconds), or one that only shares a serial.
			certificateRefused(c, CodeCertificateUnknown, "The client certificate is not one Samla issued.")
		case cert.Revoked:
			certificateRefused(c, CodeCertificateRevoked, "The client certificate has been revoked.")
		case !now().Before(cert.NotAfter):
			certificateRefused(c, CodeCertificateExpired, "The client certificate has expired.")
		case cert.Environment != opts.Environment:
			certificateRefused(c, CodeCertificateWrongEnvironment,
				fmt.Sprintf("The client certificate is for the %s environment; this address serves %s.", cert.Environment, opts.Environment))
		case ClientID(c) != "" && ClientID(c) != cert.ClientID:
			certificateRefused(c, CodeCertificateClientMismatch, "The client certificate belongs to another client than the credentials sent.")
		default:
			c.Next()
		}
	}
}

func certificateRefused(c *gin.Context, code, detail string) {
	c.Header("WWW-Authenticate", fmt.Sprintf("%s realm=%q", HeaderAPIKey, "samla"))
	AbortProblem(c, http.StatusUnauthorized, code, detail)
}

func mtlsUnavailable(c *gin.Context, msg string, err error) {
	Logger(c.Request.Context()).Error(msg, "error", err)
	AbortProblem(c, http.StatusServiceUnavailable, CodeServiceUnavailable,
		"Authentication is temporarily unavailable; retry shortly.")
}

// ttlCache remembers values by key for ttl. It is bounded: when full, expired entries go first,
// then arbitrary ones (another lookup is all an eviction costs).
type ttlCache[V any] struct {
	ttl     time.Duration
	now     func() time.Time
	mu      sync.Mutex
	entries map[string]ttlEntry[V]
}

type ttlEntry[V any] struct {
	value   V
	expires time.Time
}

// maxTTLCacheEntries bounds each mutual-TLS cache: certificates and clients are few.
const maxTTLCacheEntries = 10_000

func newTTLCache[V any](ttl time.Duration, now func() time.Time) *ttlCache[V] {
	return &ttlCache[V]{ttl: ttl, now: now, entries: map[string]ttlEntry[V]{}}
}

// get returns the cached value of key, or loads, caches and returns it; a load's error is not
// cached.
func (c *ttlCache[V]) get(key string, load func() (V, error)) (V, error) {
	now := c.now()
	c.mu.Lock()
	e, ok := c.entries[key]
	c.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.value, nil
	}
	v, err := load()
	if err != nil {
		return v, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, exists := c.entries[key]; !exists && len(c.entries) >= maxTTLCacheEntries {
		for k, e := range c.entries {
			if !now.Before(e.expires) {
				delete(c.entries, k)
			}
		}
		for k := range c.entries {
			if len(c.entries) < maxTTLCacheEntries {
				break
			}
			delete(c.entries, k)
		}
	}
	c.entries[key] = ttlEntry[V]{value: v, expires: now.Add(c.ttl)}
	return v, nil
}

// sentAPIKey reports whether the request carries a non-empty API key header.
func sentAPIKey(r *http.Request) bool {
	v := r.Header[headerAPIKeyCanonical]
	return len(v) > 0 && v[0] != ""
}
