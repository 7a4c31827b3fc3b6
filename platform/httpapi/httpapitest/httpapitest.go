// Package httpapitest holds what the HTTP handlers' tests share: an in-memory key lookup and
// mutual-TLS lookup, a request helper and a check of problem+json answers.
package httpapitest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/samla/samla/platform/httpapi"
)

// Keys is an httpapi.KeyLookup (an httpapi.KeyInfoLookup) over a map from API key to client id.
// A key's id is KeyID of the key.
type Keys map[string]string

var _ httpapi.KeyInfoLookup = Keys{}

// KeyID is the id Keys gives a key: derived from it, as the service's are, and never the key.
func KeyID(apiKey string) string {
	sum := sha256.Sum256([]byte(apiKey))
	return "k-" + hex.EncodeToString(sum[:6])
}

// Lookup implements httpapi.KeyLookup.
func (k Keys) Lookup(_ context.Context, apiKey string) (string, error) {
	if id, ok := k[apiKey]; ok {
		return id, nil
	}
	return "", httpapi.ErrKeyNotFound
}

// LookupValidUntil implements httpapi.ExpiringKeyLookup; no key of Keys ends.
func (k Keys) LookupValidUntil(ctx context.Context, apiKey string) (string, time.Time, error) {
	id, err := k.Lookup(ctx, apiKey)
	return id, time.Time{}, err
}

// LookupKey implements httpapi.KeyInfoLookup.
func (k Keys) LookupKey(ctx context.Context, apiKey string) (httpapi.KeyInfo, error) {
	id, err := k.Lookup(ctx, apiKey)
	if err != nil {
		return httpapi.KeyInfo{}, err
	}
	return httpapi.KeyInfo{ClientID: id, KeyID: KeyID(apiKey)}, nil
}

// MTLS is an httpapi.MTLSLookup over maps: certificates by serial, and the clients set to
// mTLS-only. Err, when set, is every lookup's answer.
type MTLS struct {
	Certificates map[string]httpapi.ClientCertificate
	Only         map[string]bool
	Err          error
}

// CertificateBySerial implements httpapi.MTLSLookup.
func (m MTLS) CertificateBySerial(_ context.Context, serial string) (httpapi.ClientCertificate, error) {
	if m.Err != nil {
		return httpapi.ClientCertificate{}, m.Err
	}
	if c, ok := m.Certificates[serial]; ok {
		return c, nil
	}
	return httpapi.ClientCertificate{}, httpapi.ErrCertificateNotFound
}

// MTLSOnly implements httpapi.MTLSLookup.
func (m MTLS) MTLSOnly(_ context.Context, clientID string) (bool, error) {
	return m.Only[clientID], m.Err
}

// Get serves a GET of path with API key key and, unless it is empty, Service-Version version.
func Get(h http.Handler, path, key, version string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.Header.Set(httpapi.HeaderAPIKey, key)
	if version != "" {
		r.Header.Set(httpapi.HeaderServiceVersion, version)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// Problem checks that w answered status with a problem+json body, and returns the problem.
func Problem(t testing.TB, w *httptest.ResponseRecorder, status int) httpapi.Problem {
	t.Helper()
	if w.Code != status {
		t.Fatalf("status = %d, want %d: %s", w.Code, status, w.Body)
	}
	if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, httpapi.ContentTypeProblem) {
		t.Fatalf("Content-Type = %q", ct)
	}
	var p httpapi.Problem
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatalf("problem body: %v", err)
	}
	return p
}
