package client

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/samla/samla/domain"
)

// The client's security settings: mutual-TLS certificates the operator's CA signed for it, its
// own rate limit, mTLS-only, and API keys retired after a grace period (rotation).
const (
	EventCertificateIssued  = "client.certificate-issued"
	EventCertificateRevoked = "client.certificate-revoked"
	EventSettingsChanged    = "client.settings-changed"
	EventAPIKeyRetiring     = "client.api-key-retiring"
)

// Environment is where a client certificate is valid: the spec's test and production pairs.
type Environment string

const (
	EnvironmentTest       Environment = "test"
	EnvironmentProduction Environment = "production"
)

// Valid reports whether e is test or production.
func (e Environment) Valid() bool { return e == EnvironmentTest || e == EnvironmentProduction }

// CertificateIssued records a client certificate the operator's CA signed for the client. The
// certificate names no person; its serial and fingerprint identify it on the mTLS listener.
type CertificateIssued struct {
	Serial      string      `json:"serial"`      // lowercase hex, no leading zeros
	Fingerprint string      `json:"fingerprint"` // hex SHA-256 of the DER certificate
	Environment Environment `json:"environment"`
	Subject     string      `json:"subject"` // the certificate's subject, as the CA wrote it
	NotBefore   time.Time   `json:"notBefore"`
	NotAfter    time.Time   `json:"notAfter"`
	IssuedAt    time.Time   `json:"issuedAt"`
}

// CertificateRevoked records that a certificate may no longer authenticate.
type CertificateRevoked struct {
	Serial    string    `json:"serial"`
	RevokedAt time.Time `json:"revokedAt"`
}

// SettingsChanged records the operator's change of a client's settings; a nil member is left as
// it was.
type SettingsChanged struct {
	// RateLimit is requests per second, Burst the bucket's size.
	RateLimit *float64 `json:"rateLimit,omitempty"`
	Burst     *int     `json:"burst,omitempty"`
	// MTLSOnly refuses the client's API key on the plain listener (401 MTLS_REQUIRED).
	MTLSOnly  *bool     `json:"mtlsOnly,omitempty"`
	ChangedAt time.Time `json:"changedAt"`
}

// APIKeyRetiring records that a key stops authenticating at ValidUntil: the old key of a
// rotation, kept for a grace period so that the client can switch without an outage.
type APIKeyRetiring struct {
	KeyID      string    `json:"keyId"`
	ValidUntil time.Time `json:"validUntil"`
	At         time.Time `json:"at"`
}

func (CertificateIssued) EventType() string  { return EventCertificateIssued }
func (CertificateRevoked) EventType() string { return EventCertificateRevoked }
func (SettingsChanged) EventType() string    { return EventSettingsChanged }
func (APIKeyRetiring) EventType() string     { return EventAPIKeyRetiring }

// Certificate is a certificate of the client as its events tell.
type Certificate struct {
	CertificateIssued
	Revoked   bool
	RevokedAt time.Time
}

// Settings are the client's own settings; a zero RateLimit means the service's default.
type Settings struct {
	RateLimit float64
	Burst     int
	MTLSOnly  bool
}

// Limits of the settings: a rate below one request in ten seconds locks a client out, one above
// 100 000 per second is no limit on this kind of service.
const (
	MinRateLimit = 0.1
	MaxRateLimit = 100_000
	MaxBurst     = 1_000_000
	// MaxKeyGrace bounds how long a rotated key stays valid.
	MaxKeyGrace = 90 * 24 * time.Hour
)

var (
	serialPattern      = regexp.MustCompile(`^[0-9a-f]{1,40}$`)
	fingerprintPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)
	// ErrUnknownCertificate is a revocation of a serial the client never had.
	ErrUnknownCertificate = fmt.Errorf("unknown certificate: %w", domain.ErrConflict)
)

// Certificates lists the client's certificates in the order they were issued.
func (c *Client) Certificates() []Certificate { return slices.Clone(c.certs) }

// Settings are the client's settings.
func (c *Client) Settings() Settings { return c.settings }

// APIKey is what the client's events tell of one of its keys, for the operator: never its hash.
type APIKey struct {
	ID        string
	IssuedAt  time.Time
	Revoked   bool
	RevokedAt time.Time // zero unless revoked
	// ValidUntil is when a retiring key (the old key of a rotation) stops authenticating; zero
	// for a key without an end.
	ValidUntil time.Time
}

// ActiveAt reports whether the key authenticates at now: not revoked, not past its retirement.
func (k APIKey) ActiveAt(now time.Time) bool {
	return !k.Revoked && (k.ValidUntil.IsZero() || now.Before(k.ValidUntil))
}

// APIKeys lists the client's keys in the order they were issued (by key id within one instant).
func (c *Client) APIKeys() []APIKey {
	out := make([]APIKey, 0, len(c.keys))
	for id, k := range c.keys {
		out = append(out, APIKey{ID: id, IssuedAt: k.issuedAt, Revoked: k.revoked, RevokedAt: k.revokedAt, ValidUntil: k.validUntil})
	}
	slices.SortFunc(out, func(a, b APIKey) int {
		if c := a.IssuedAt.Compare(b.IssuedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// ActiveKeyHashesAt lists the hashes of the keys that authenticate at now: not revoked, and not
// past a retirement.
func (c *Client) ActiveKeyHashesAt(now time.Time) []string {
	var out []string
	for _, k := range c.keys {
		if !k.revoked && (k.validUntil.IsZero() || now.Before(k.validUntil)) {
			out = append(out, k.hash)
		}
	}
	return out
}

func (c *Client) applySecurity(e domain.Event) (bool, error) {
	switch ev := e.(type) {
	case CertificateIssued:
		c.certs = append(c.certs, Certificate{CertificateIssued: ev})
	case CertificateRevoked:
		for i := range c.certs {
			if c.certs[i].Serial == ev.Serial {
				c.certs[i].Revoked, c.certs[i].RevokedAt = true, ev.RevokedAt
			}
		}
	case SettingsChanged:
		if ev.RateLimit != nil {
			c.settings.RateLimit = *ev.RateLimit
		}
		if ev.Burst != nil {
			c.settings.Burst = *ev.Burst
		}
		if ev.MTLSOnly != nil {
			c.settings.MTLSOnly = *ev.MTLSOnly
		}
	case APIKeyRetiring:
		k := c.keys[ev.KeyID]
		k.validUntil = ev.ValidUntil
		c.keys[ev.KeyID] = k
	default:
		return false, nil
	}
	return true, nil
}

// RecordCertificate records a certificate the operator's CA signed for the client. Invalid input
// is a *domain.FieldError; a serial the client has already is domain.ErrConflict.
func (c *Client) RecordCertificate(cert CertificateIssued, now time.Time) error {
	if !c.Exists() {
		return fmt.Errorf("client does not exist: %w", domain.ErrConflict)
	}
	switch {
	case !serialPattern.MatchString(cert.Serial):
		return &domain.FieldError{Field: "serial", Reason: "must be lowercase hex, at most 160 bits"}
	case !fingerprintPattern.MatchString(cert.Fingerprint):
		return &domain.FieldError{Field: "fingerprint", Reason: "must be a hex SHA-256"}
	case !cert.Environment.Valid():
		return &domain.FieldError{Field: "environment", Reason: "must be test or production"}
	case !cert.NotAfter.After(cert.NotBefore):
		return &domain.FieldError{Field: "notAfter", Reason: "must be after notBefore"}
	}
	if slices.ContainsFunc(c.certs, func(x Certificate) bool { return x.Serial == cert.Serial }) {
		return fmt.Errorf("certificate %s is recorded already: %w", cert.Serial, domain.ErrConflict)
	}
	cert.NotBefore, cert.NotAfter, cert.IssuedAt = cert.NotBefore.UTC(), cert.NotAfter.UTC(), now.UTC()
	return domain.Record(c, cert)
}

// RevokeCertificate stops a certificate from authenticating; a revoked one records nothing.
func (c *Client) RevokeCertificate(serial string, now time.Time) error {
	i := slices.IndexFunc(c.certs, func(x Certificate) bool { return x.Serial == serial })
	if i < 0 {
		return fmt.Errorf("certificate %q of client %s: %w", serial, c.id, ErrUnknownCertificate)
	}
	if c.certs[i].Revoked {
		return nil
	}
	return domain.Record(c, CertificateRevoked{Serial: serial, RevokedAt: now.UTC()})
}

// ChangeSettings records the settings given (nil: unchanged); nothing given, or nothing
// different, records nothing. Out-of-range values are a *domain.FieldError.
func (c *Client) ChangeSettings(rateLimit *float64, burst *int, mtlsOnly *bool, now time.Time) error {
	if !c.Exists() {
		return fmt.Errorf("client does not exist: %w", domain.ErrConflict)
	}
	if rateLimit != nil && (*rateLimit < MinRateLimit || *rateLimit > MaxRateLimit) {
		return &domain.FieldError{Field: "rateLimit", Reason: fmt.Sprintf("must be %g to %d requests per second", MinRateLimit, MaxRateLimit)}
	}
	if burst != nil && (*burst < 1 || *burst > MaxBurst) {
		return &domain.FieldError{Field: "burst", Reason: fmt.Sprintf("must be 1 to %d", MaxBurst)}
	}
	ev := SettingsChanged{ChangedAt: now.UTC()}
	if rateLimit != nil && *rateLimit != c.settings.RateLimit {
		ev.RateLimit = rateLimit
	}
	if burst != nil && *burst != c.settings.Burst {
		ev.Burst = burst
	}
	if mtlsOnly != nil && *mtlsOnly != c.settings.MTLSOnly {
		ev.MTLSOnly = mtlsOnly
	}
	if ev.RateLimit == nil && ev.Burst == nil && ev.MTLSOnly == nil {
		return nil
	}
	return domain.Record(c, ev)
}

// RotateAPIKey issues a new key and retires every other active key: at now+grace, or at once
// (revoked) for a zero grace. The caller generates the key and shows it once.
func (c *Client) RotateAPIKey(keyID, plainKey string, grace time.Duration, now time.Time) error {
	if grace < 0 || grace > MaxKeyGrace {
		return &domain.FieldError{Field: "grace", Reason: fmt.Sprintf("must be 0 to %s", MaxKeyGrace)}
	}
	others := make([]string, 0, len(c.keys))
	for id, k := range c.keys {
		if !k.revoked && (k.validUntil.IsZero() || now.Before(k.validUntil)) {
			others = append(others, id)
		}
	}
	slices.Sort(others) // the events' order does not depend on the map's
	if err := c.IssueAPIKey(keyID, plainKey, now); err != nil {
		return err
	}
	for _, id := range others {
		var err error
		if grace == 0 {
			err = c.RevokeAPIKey(id, now)
		} else if until := now.UTC().Add(grace); c.keys[id].validUntil.IsZero() || until.Before(c.keys[id].validUntil) {
			err = domain.Record(c, APIKeyRetiring{KeyID: id, ValidUntil: until, At: now.UTC()})
		}
		if err != nil {
			return err
		}
	}
	return nil
}
