package clientsecurity

import (
	"context"
	"errors"
	"fmt"

	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/projections/readdb"
)

// Reader serves the HTTP layer's mutual-TLS checks and rate limits: it implements
// httpapi.MTLSLookup and httpapi.ClientLimits over a Store. The engine caches its answers for a
// few seconds (httpapi.MTLSOptions.CacheTTL, httpapi.RateLimitSettingsTTL).
type Reader struct{ store Store }

var (
	_ httpapi.MTLSLookup   = Reader{}
	_ httpapi.ClientLimits = Reader{}
)

// NewReader returns the reader over store.
func NewReader(store Store) Reader { return Reader{store: store} }

// CertificateBySerial implements httpapi.MTLSLookup: an unknown serial is
// httpapi.ErrCertificateNotFound.
func (r Reader) CertificateBySerial(ctx context.Context, serial string) (httpapi.ClientCertificate, error) {
	c, err := r.store.Certificate(ctx, serial)
	if errors.Is(err, readdb.ErrNotFound) {
		return httpapi.ClientCertificate{}, fmt.Errorf("certificate %s: %w", serial, httpapi.ErrCertificateNotFound)
	}
	if err != nil {
		return httpapi.ClientCertificate{}, err
	}
	return httpapi.ClientCertificate{ClientID: c.ClientID, Environment: c.Environment, Fingerprint: c.Fingerprint,
		NotAfter: c.NotAfter, Revoked: c.Revoked}, nil
}

// MTLSOnly implements httpapi.MTLSLookup: a client without settings is not mTLS-only.
func (r Reader) MTLSOnly(ctx context.Context, clientID string) (bool, error) {
	s, err := r.store.Settings(ctx, clientID)
	if errors.Is(err, readdb.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return s.MTLSOnly, nil
}

// ClientRateLimit implements httpapi.ClientLimits: the client's own requests per second and
// burst, 0 for what it never set (the service's default applies).
func (r Reader) ClientRateLimit(ctx context.Context, clientID string) (float64, int, error) {
	s, err := r.store.Settings(ctx, clientID)
	if errors.Is(err, readdb.ErrNotFound) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	return s.RateLimit, s.Burst, nil
}
