// Package clientsecurity is the read model the mutual-TLS checks ask on every request: the
// client certificates the operator's CA signed, by serial (client, environment, fingerprint,
// validity, revoked), and each client's settings (rate limit, burst, mTLS-only), built from
// client.certificate-issued, client.certificate-revoked and client.settings-changed. The Store
// port, its SQLite and ClickHouse adapters with their DDL, the Projector, and the Reader that
// serves the HTTP layer's httpapi.MTLSLookup live here; clientsecuritytest is the contract
// suite both adapters pass.
package clientsecurity

import (
	"context"
	"time"
)

// Certificate is one client certificate. Serials are 128 random bits drawn by the CA, so a
// serial names one certificate of one client.
type Certificate struct {
	Serial      string // lowercase hex, no leading zeros
	ClientID    string
	Environment string // test or production
	Fingerprint string // hex SHA-256 of the DER certificate
	NotBefore   time.Time
	NotAfter    time.Time
	Revoked     bool
	RevokedAt   time.Time // zero unless revoked
	// Revision is the revision of the client stream's last event folded into the row.
	Revision uint64
}

// Settings are one client's settings; a client without a row has the service's defaults and is
// not mTLS-only.
type Settings struct {
	ClientID  string
	RateLimit float64 // requests per second; 0: the service's default
	Burst     int     // 0: the service's default
	MTLSOnly  bool
	Revision  uint64
}

// Store holds certificates and settings.
type Store interface {
	// UpsertCertificates writes rows in one batch. A row whose Revision is not greater than the
	// stored row's (same Serial) is ignored, so a redelivered issue never un-revokes a
	// certificate; within one call, the first row with the highest revision per serial wins.
	UpsertCertificates(ctx context.Context, rows []Certificate) error
	// Certificate returns the certificate with this serial, revoked or not, or
	// readdb.ErrNotFound.
	Certificate(ctx context.Context, serial string) (Certificate, error)
	// UpsertSettings is UpsertCertificates for settings, by ClientID.
	UpsertSettings(ctx context.Context, rows []Settings) error
	// Settings returns the client's settings, or readdb.ErrNotFound for a client that never
	// changed any.
	Settings(ctx context.Context, clientID string) (Settings, error)
	// Reset removes every row, before a rebuild from the event store.
	Reset(ctx context.Context) error
}

func certificateKey(r Certificate) string      { return r.Serial }
func certificateRevision(r Certificate) uint64 { return r.Revision }
func settingsKey(r Settings) string            { return r.ClientID }
func settingsRevision(r Settings) uint64       { return r.Revision }
