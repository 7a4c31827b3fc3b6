// Package httpapitest holds what the HTTP handlers' tests share: an in-memory key lookup and
// mutual-TLS lookup, a request helper and a check of problem+json answers.
package httpapitest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/samla/samla/platform/httpapi"
)

// Keys is an httpapi.KeyLookup over a map from API key to client id.
type Keys map[string]string

// Lookup implements httpapi.KeyLookup.
func (k Keys) Lookup(_ context.Context, apiKey string) (string, error) {
	if id, ok := k[apiKey]; ok {
		return id, nil
	}
	return "", httpapi.ErrKeyNotFound
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
