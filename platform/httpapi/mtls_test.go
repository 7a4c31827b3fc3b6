package httpapi_test

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/platform/httpapi/httpapitest"
)

const (
	acmeKey = "acme-key-0123456789abcdef0123456789abcdef"
	betaKey = "beta-key-0123456789abcdef0123456789abcdef"
)

var mtlsNow = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

type mtlsClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *mtlsClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *mtlsClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// countingMTLS counts the lookups that reach the read model.
type countingMTLS struct {
	httpapitest.MTLS
	mu           sync.Mutex
	certs, onlys int
}

func (c *countingMTLS) CertificateBySerial(ctx context.Context, serial string) (httpapi.ClientCertificate, error) {
	c.mu.Lock()
	c.certs++
	c.mu.Unlock()
	return c.MTLS.CertificateBySerial(ctx, serial)
}

func (c *countingMTLS) MTLSOnly(ctx context.Context, clientID string) (bool, error) {
	c.mu.Lock()
	c.onlys++
	c.mu.Unlock()
	return c.MTLS.MTLSOnly(ctx, clientID)
}

// peer is a client certificate as the TLS handshake hands it over; the middleware reads only
// its serial and DER bytes, so it need not be signed.
func peer(serial int64, der string) *x509.Certificate {
	return &x509.Certificate{SerialNumber: big.NewInt(serial), Raw: []byte(der)}
}

func fingerprint(der string) string {
	sum := sha256.Sum256([]byte(der))
	return hex.EncodeToString(sum[:])
}

type mtlsEnv struct {
	engine http.Handler
	lookup *countingMTLS
	clock  *mtlsClock
}

func newMTLSEnv(t *testing.T, env string) *mtlsEnv {
	t.Helper()
	e := &mtlsEnv{clock: &mtlsClock{t: mtlsNow}, lookup: &countingMTLS{MTLS: httpapitest.MTLS{
		Certificates: map[string]httpapi.ClientCertificate{
			"a1": {ClientID: "acme", Environment: "test", Fingerprint: fingerprint("acme-test"), NotAfter: mtlsNow.Add(time.Hour)},
			"a2": {ClientID: "acme", Environment: "production", Fingerprint: fingerprint("acme-prod"), NotAfter: mtlsNow.Add(time.Hour)},
			"a3": {ClientID: "acme", Environment: "test", Fingerprint: fingerprint("acme-old"), NotAfter: mtlsNow.Add(time.Hour), Revoked: true},
			"a4": {ClientID: "acme", Environment: "test", Fingerprint: fingerprint("acme-expired"), NotAfter: mtlsNow},
			"b1": {ClientID: "beta", Environment: "test", Fingerprint: fingerprint("beta-test"), NotAfter: mtlsNow.Add(time.Hour)},
		},
		Only: map[string]bool{"beta": true},
	}}}
	engine := httpapi.NewEngine(httpapi.Options{
		Keys:      httpapitest.Keys{acmeKey: "acme", betaKey: "beta"},
		Now:       e.clock.now,
		RateLimit: httpapi.RateLimit{Disabled: true},
		MTLS:      httpapi.MTLSOptions{Lookup: e.lookup, Environment: env},
	})
	engine.GET("/whoami", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"client": httpapi.ClientID(c)}) })
	e.engine = engine
	return e
}

// serve sends a GET of path with key (none when empty) as the plain listener would, or, with
// cert, as the mTLS listener would after a verified handshake.
func (e *mtlsEnv) serve(path, key string, cert *x509.Certificate, mtls bool) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	if key != "" {
		r.Header.Set(httpapi.HeaderAPIKey, key)
	}
	if cert != nil {
		r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}, VerifiedChains: [][]*x509.Certificate{{cert}}}
	}
	w := httptest.NewRecorder()
	var h http.Handler = e.engine
	if mtls {
		h = httpapi.MTLSListener(h)
	}
	h.ServeHTTP(w, r)
	return w
}

func wantCode(t *testing.T, w *httptest.ResponseRecorder, status int, code string) {
	t.Helper()
	p := httpapitest.Problem(t, w, status)
	if p.Code != code {
		t.Fatalf("code %s, want %s: %s", p.Code, code, w.Body)
	}
	if status == http.StatusUnauthorized && w.Header().Get("WWW-Authenticate") == "" {
		t.Fatal("a 401 without a challenge")
	}
}

func TestMTLSListenerChecksTheCertificate(t *testing.T) {
	e := newMTLSEnv(t, "test")
	acmeTest := peer(0xa1, "acme-test")
	if w := e.serve("/whoami", acmeKey, acmeTest, true); w.Code != http.StatusOK {
		t.Fatalf("acme's test certificate with acme's key: %d %s", w.Code, w.Body)
	}
	if w := e.serve("/health", "", acmeTest, true); w.Code != http.StatusOK || w.Body.String() != `{"status":"healthy"}` {
		t.Fatalf("/health: %d %s", w.Code, w.Body)
	}
	// beta is mTLS-only: on the mTLS listener that is just what it must do.
	if w := e.serve("/whoami", betaKey, peer(0xb1, "beta-test"), true); w.Code != http.StatusOK {
		t.Fatalf("beta on the mTLS listener: %d %s", w.Code, w.Body)
	}
	for name, tc := range map[string]struct {
		path, key string
		cert      *x509.Certificate
		status    int
		code      string
	}{
		"another client's certificate":   {"/whoami", betaKey, acmeTest, 401, httpapi.CodeCertificateClientMismatch},
		"the production certificate":     {"/whoami", acmeKey, peer(0xa2, "acme-prod"), 401, httpapi.CodeCertificateWrongEnvironment},
		"production on /health":          {"/health", "", peer(0xa2, "acme-prod"), 401, httpapi.CodeCertificateWrongEnvironment},
		"a revoked certificate":          {"/whoami", acmeKey, peer(0xa3, "acme-old"), 401, httpapi.CodeCertificateRevoked},
		"revoked on /health":             {"/health", "", peer(0xa3, "acme-old"), 401, httpapi.CodeCertificateRevoked},
		"an expired certificate":         {"/whoami", acmeKey, peer(0xa4, "acme-expired"), 401, httpapi.CodeCertificateExpired},
		"an unknown serial":              {"/whoami", acmeKey, peer(0xff, "acme-test"), 401, httpapi.CodeCertificateUnknown},
		"a known serial, another cert":   {"/whoami", acmeKey, peer(0xa1, "forged"), 401, httpapi.CodeCertificateUnknown},
		"no certificate":                 {"/whoami", acmeKey, nil, 401, httpapi.CodeCertificateRequired},
		"no API key":                     {"/whoami", "", acmeTest, 401, httpapi.CodeUnauthorized},
		"an unknown route stays its 404": {"/nothing", acmeKey, acmeTest, 404, httpapi.CodeNotFound},
	} {
		t.Run(name, func(t *testing.T) {
			wantCode(t, e.serve(tc.path, tc.key, tc.cert, true), tc.status, tc.code)
		})
	}
}

func TestMTLSProductionListenerTakesProductionCertificates(t *testing.T) {
	e := newMTLSEnv(t, "production")
	if w := e.serve("/whoami", acmeKey, peer(0xa2, "acme-prod"), true); w.Code != http.StatusOK {
		t.Fatalf("production certificate: %d %s", w.Code, w.Body)
	}
	wantCode(t, e.serve("/whoami", acmeKey, peer(0xa1, "acme-test"), true), 401, httpapi.CodeCertificateWrongEnvironment)
}

func TestPlainListenerRefusesMTLSOnlyClients(t *testing.T) {
	e := newMTLSEnv(t, "test")
	if w := e.serve("/whoami", acmeKey, nil, false); w.Code != http.StatusOK {
		t.Fatalf("acme on the plain listener: %d %s", w.Code, w.Body)
	}
	wantCode(t, e.serve("/whoami", betaKey, nil, false), 401, httpapi.CodeMTLSRequired)
	// A certificate somehow on a plain request does not make it an mTLS one.
	wantCode(t, e.serve("/whoami", betaKey, peer(0xb1, "beta-test"), false), 401, httpapi.CodeMTLSRequired)
	if w := e.serve("/health", "", nil, false); w.Code != http.StatusOK {
		t.Fatalf("/health: %d", w.Code)
	}
	// Lifted: effective once the cache entry expires.
	e.lookup.Only["beta"] = false
	wantCode(t, e.serve("/whoami", betaKey, nil, false), 401, httpapi.CodeMTLSRequired)
	e.clock.advance(httpapi.DefaultMTLSCacheTTL)
	if w := e.serve("/whoami", betaKey, nil, false); w.Code != http.StatusOK {
		t.Fatalf("beta after mTLS-only was lifted: %d %s", w.Code, w.Body)
	}
}

func TestMTLSRevocationTakesEffectWithinTheCacheTTL(t *testing.T) {
	e := newMTLSEnv(t, "test")
	acmeTest := peer(0xa1, "acme-test")
	for range 5 {
		if w := e.serve("/whoami", acmeKey, acmeTest, true); w.Code != http.StatusOK {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
	}
	if e.lookup.certs != 1 {
		t.Fatalf("%d certificate lookups for five requests in the cache's lifetime, want 1", e.lookup.certs)
	}
	c := e.lookup.Certificates["a1"]
	c.Revoked = true
	e.lookup.Certificates["a1"] = c
	e.clock.advance(httpapi.DefaultMTLSCacheTTL - time.Millisecond)
	if w := e.serve("/whoami", acmeKey, acmeTest, true); w.Code != http.StatusOK {
		t.Fatalf("within the cache's lifetime: %d", w.Code)
	}
	e.clock.advance(time.Millisecond)
	wantCode(t, e.serve("/whoami", acmeKey, acmeTest, true), 401, httpapi.CodeCertificateRevoked)
}

func TestMTLSLookupFailuresAreUnavailable(t *testing.T) {
	e := newMTLSEnv(t, "test")
	e.lookup.Err = errors.New("read model down")
	wantCode(t, e.serve("/whoami", acmeKey, peer(0xa1, "acme-test"), true), 503, httpapi.CodeServiceUnavailable)
	wantCode(t, e.serve("/whoami", acmeKey, nil, false), 503, httpapi.CodeServiceUnavailable)

	// An engine without a lookup serves the plain listener, and refuses to serve an mTLS one.
	plain := httpapi.NewEngine(httpapi.Options{Keys: httpapitest.Keys{acmeKey: "acme"}, RateLimit: httpapi.RateLimit{Disabled: true}})
	if w := httpapitest.Get(plain, "/health", "", ""); w.Code != http.StatusOK {
		t.Fatalf("plain /health: %d", w.Code)
	}
	r := httptest.NewRequest(http.MethodGet, "/health", nil)
	w := httptest.NewRecorder()
	httpapi.MTLSListener(plain).ServeHTTP(w, r)
	wantCode(t, w, 503, httpapi.CodeServiceUnavailable)
}

func TestNewEngineRefusesAnMTLSLookupWithoutEnvironment(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	httpapi.NewEngine(httpapi.Options{Keys: httpapitest.Keys{}, MTLS: httpapi.MTLSOptions{Lookup: httpapitest.MTLS{}}})
}
