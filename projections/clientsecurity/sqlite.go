package clientsecurity

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/samla/samla/projections/readdb"
)

// sqliteSchema is the read model's SQLite DDL: certificates keyed by serial (every mTLS request
// reads one), settings by client; times in Unix milliseconds (0: none).
const sqliteSchema = `
CREATE TABLE IF NOT EXISTS client_certificates (
	serial        TEXT    NOT NULL PRIMARY KEY,
	client_id     TEXT    NOT NULL,
	environment   TEXT    NOT NULL,
	fingerprint   TEXT    NOT NULL,
	not_before_ms INTEGER NOT NULL,
	not_after_ms  INTEGER NOT NULL,
	revoked       INTEGER NOT NULL,
	revoked_at_ms INTEGER NOT NULL,
	revision      INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS client_settings (
	client_id  TEXT    NOT NULL PRIMARY KEY,
	rate_limit REAL    NOT NULL,
	burst      INTEGER NOT NULL,
	mtls_only  INTEGER NOT NULL,
	revision   INTEGER NOT NULL
) WITHOUT ROWID;
`

const sqliteCertificateColumns = `serial, client_id, environment, fingerprint, not_before_ms, not_after_ms, revoked, revoked_at_ms, revision`

// sqliteUpsertCertificate only overwrites a certificate with a newer revision.
const sqliteUpsertCertificate = `INSERT INTO client_certificates (` + sqliteCertificateColumns + `)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (serial) DO UPDATE SET client_id = excluded.client_id, environment = excluded.environment,
	fingerprint = excluded.fingerprint, not_before_ms = excluded.not_before_ms, not_after_ms = excluded.not_after_ms,
	revoked = excluded.revoked, revoked_at_ms = excluded.revoked_at_ms, revision = excluded.revision
WHERE excluded.revision > client_certificates.revision`

const sqliteUpsertSettings = `INSERT INTO client_settings (client_id, rate_limit, burst, mtls_only, revision)
VALUES (?, ?, ?, ?, ?)
ON CONFLICT (client_id) DO UPDATE SET rate_limit = excluded.rate_limit, burst = excluded.burst,
	mtls_only = excluded.mtls_only, revision = excluded.revision
WHERE excluded.revision > client_settings.revision`

// The two hot reads, prepared once.
const (
	sqliteCertificate = `SELECT ` + sqliteCertificateColumns + ` FROM client_certificates WHERE serial = ?`
	sqliteSettings    = `SELECT client_id, rate_limit, burst, mtls_only, revision FROM client_settings WHERE client_id = ?`
)

// SQLiteStore is the Store on an embedded SQLite database.
type SQLiteStore struct {
	db          *sql.DB
	prepared    readdb.Statements
	certificate *sql.Stmt
	settings    *sql.Stmt
}

var _ Store = (*SQLiteStore)(nil)

// NewSQLite creates the tables in db when missing, prepares the hot reads and returns the store.
// The caller keeps ownership of db and closes the store before it.
func NewSQLite(ctx context.Context, db *sql.DB) (*SQLiteStore, error) {
	if _, err := db.ExecContext(ctx, sqliteSchema); err != nil {
		return nil, fmt.Errorf("migrate sqlite client security: %w", err)
	}
	s := &SQLiteStore{db: db}
	s.certificate = s.prepared.Prepare(ctx, db, sqliteCertificate)
	s.settings = s.prepared.Prepare(ctx, db, sqliteSettings)
	if err := s.prepared.Err(); err != nil {
		return nil, fmt.Errorf("open sqlite client security: %w", err)
	}
	return s, nil
}

// Close releases the prepared statements; the database stays open.
func (s *SQLiteStore) Close() error { return s.prepared.Close() }

// UpsertCertificates implements Store in one transaction; the WHERE clause keeps newer rows.
func (s *SQLiteStore) UpsertCertificates(ctx context.Context, rows []Certificate) error {
	if len(rows) == 0 {
		return nil
	}
	err := readdb.InTx(ctx, s.db, func(tx *sql.Tx) error {
		return readdb.ExecEach(ctx, tx, sqliteUpsertCertificate, rows, func(r Certificate) ([]any, error) {
			return []any{r.Serial, r.ClientID, r.Environment, r.Fingerprint, readdb.Millis(r.NotBefore),
				readdb.Millis(r.NotAfter), r.Revoked, readdb.Millis(r.RevokedAt), int64(r.Revision)}, nil
		})
	})
	if err != nil {
		return fmt.Errorf("upsert client certificates: %w", err)
	}
	return nil
}

// UpsertSettings implements Store in one transaction.
func (s *SQLiteStore) UpsertSettings(ctx context.Context, rows []Settings) error {
	if len(rows) == 0 {
		return nil
	}
	err := readdb.InTx(ctx, s.db, func(tx *sql.Tx) error {
		return readdb.ExecEach(ctx, tx, sqliteUpsertSettings, rows, func(r Settings) ([]any, error) {
			return []any{r.ClientID, r.RateLimit, int64(r.Burst), r.MTLSOnly, int64(r.Revision)}, nil
		})
	})
	if err != nil {
		return fmt.Errorf("upsert client settings: %w", err)
	}
	return nil
}

// Certificate implements Store.
func (s *SQLiteStore) Certificate(ctx context.Context, serial string) (Certificate, error) {
	var (
		r                                 Certificate
		notBefore, notAfter, revokedAt, v int64
	)
	err := s.certificate.QueryRowContext(ctx, serial).Scan(&r.Serial, &r.ClientID, &r.Environment, &r.Fingerprint,
		&notBefore, &notAfter, &r.Revoked, &revokedAt, &v)
	if errors.Is(err, sql.ErrNoRows) {
		return Certificate{}, fmt.Errorf("certificate %s: %w", serial, readdb.ErrNotFound)
	}
	if err != nil {
		return Certificate{}, fmt.Errorf("read certificate %s: %w", serial, err)
	}
	r.NotBefore, r.NotAfter, r.RevokedAt = readdb.FromMillis(notBefore), readdb.FromMillis(notAfter), readdb.FromMillis(revokedAt)
	r.Revision = uint64(v)
	return r, nil
}

// Settings implements Store.
func (s *SQLiteStore) Settings(ctx context.Context, clientID string) (Settings, error) {
	var (
		r            Settings
		burst, revis int64
	)
	err := s.settings.QueryRowContext(ctx, clientID).Scan(&r.ClientID, &r.RateLimit, &burst, &r.MTLSOnly, &revis)
	if errors.Is(err, sql.ErrNoRows) {
		return Settings{}, fmt.Errorf("settings of %s: %w", clientID, readdb.ErrNotFound)
	}
	if err != nil {
		return Settings{}, fmt.Errorf("read settings of %s: %w", clientID, err)
	}
	r.Burst, r.Revision = int(burst), uint64(revis)
	return r, nil
}

// Reset implements Store.
func (s *SQLiteStore) Reset(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM client_certificates; DELETE FROM client_settings`); err != nil {
		return fmt.Errorf("reset client security: %w", err)
	}
	return nil
}
