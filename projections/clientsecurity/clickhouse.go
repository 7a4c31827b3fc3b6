package clientsecurity

import (
	"context"
	"fmt"
	"math"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/samla/samla/projections/readdb"
)

// The read model's ClickHouse DDL for 18.16 and current servers: flags are UInt8 (no Bool on
// 18.16), times Unix milliseconds in UInt64 (0: none). ReplacingMergeTree(revision) keeps the
// newest version of a row; reads collapse versions with FINAL, filtering only on the sorting key
// (which every version of a row shares) before it.
const (
	clickhouseCertificateSchema = `
CREATE TABLE IF NOT EXISTS client_certificates (
	serial        String,
	client_id     String,
	environment   String,
	fingerprint   String,
	not_before_ms UInt64,
	not_after_ms  UInt64,
	revoked       UInt8,
	revoked_at_ms UInt64,
	revision      UInt64
) ENGINE = ReplacingMergeTree(revision)
ORDER BY serial`

	clickhouseSettingsSchema = `
CREATE TABLE IF NOT EXISTS client_settings (
	client_id  String,
	rate_limit Float64,
	burst      UInt32,
	mtls_only  UInt8,
	revision   UInt64
) ENGINE = ReplacingMergeTree(revision)
ORDER BY client_id`

	clickhouseCertificateColumns = `serial, client_id, environment, fingerprint, not_before_ms, not_after_ms, revoked, revoked_at_ms, revision`
	clickhouseSettingsColumns    = `client_id, rate_limit, burst, mtls_only, revision`
)

// ClickHouseStore is the Store on a ClickHouse database.
type ClickHouseStore struct {
	conn driver.Conn
}

var _ Store = (*ClickHouseStore)(nil)

// NewClickHouse creates the tables when missing and returns the store. The caller keeps
// ownership of conn.
func NewClickHouse(ctx context.Context, conn driver.Conn) (*ClickHouseStore, error) {
	for _, ddl := range []string{clickhouseCertificateSchema, clickhouseSettingsSchema} {
		if err := conn.Exec(ctx, ddl); err != nil {
			return nil, fmt.Errorf("migrate clickhouse client security: %w", err)
		}
	}
	return &ClickHouseStore{conn: conn}, nil
}

func flag(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// UpsertCertificates implements Store. Among equal revisions ReplacingMergeTree keeps whichever
// version it merges last, so the revision rule is applied before inserting, against the stored
// maximum; one consumer per partition writes a client's rows, so nothing interleaves with it.
func (s *ClickHouseStore) UpsertCertificates(ctx context.Context, rows []Certificate) error {
	rows = readdb.LatestPerKey(rows, certificateKey, certificateRevision)
	if len(rows) == 0 {
		return nil
	}
	keys := make([]string, len(rows))
	for i, r := range rows {
		keys[i] = r.Serial
	}
	stored, err := readdb.StoredRevisions(ctx, s.conn, "client_certificates", "serial", keys)
	if err != nil {
		return fmt.Errorf("upsert client certificates: %w", err)
	}
	rows = readdb.KeepNewer(rows, stored, certificateKey, certificateRevision)
	err = readdb.InsertBatch(ctx, s.conn, "client_certificates", clickhouseCertificateColumns, rows, func(r Certificate) ([]any, error) {
		return []any{r.Serial, r.ClientID, r.Environment, r.Fingerprint, readdb.UMillis(r.NotBefore),
			readdb.UMillis(r.NotAfter), flag(r.Revoked), readdb.UMillis(r.RevokedAt), r.Revision}, nil
	})
	if err != nil {
		return fmt.Errorf("upsert client certificates: %w", err)
	}
	return nil
}

// UpsertSettings implements Store as UpsertCertificates does.
func (s *ClickHouseStore) UpsertSettings(ctx context.Context, rows []Settings) error {
	rows = readdb.LatestPerKey(rows, settingsKey, settingsRevision)
	if len(rows) == 0 {
		return nil
	}
	keys := make([]string, len(rows))
	for i, r := range rows {
		keys[i] = r.ClientID
	}
	stored, err := readdb.StoredRevisions(ctx, s.conn, "client_settings", "client_id", keys)
	if err != nil {
		return fmt.Errorf("upsert client settings: %w", err)
	}
	rows = readdb.KeepNewer(rows, stored, settingsKey, settingsRevision)
	err = readdb.InsertBatch(ctx, s.conn, "client_settings", clickhouseSettingsColumns, rows, func(r Settings) ([]any, error) {
		if r.Burst < 0 || r.Burst > math.MaxUint32 {
			return nil, fmt.Errorf("burst %d of %s out of range", r.Burst, r.ClientID)
		}
		return []any{r.ClientID, r.RateLimit, uint32(r.Burst), flag(r.MTLSOnly), r.Revision}, nil
	})
	if err != nil {
		return fmt.Errorf("upsert client settings: %w", err)
	}
	return nil
}

// Certificate implements Store.
func (s *ClickHouseStore) Certificate(ctx context.Context, serial string) (Certificate, error) {
	var (
		found Certificate
		ok    bool
	)
	err := readdb.ClickHouseEach(ctx, s.conn, "client certificate", func(rows readdb.Rows) (Certificate, error) {
		var (
			r                              Certificate
			notBefore, notAfter, revokedAt uint64
			revoked                        uint8
		)
		if err := rows.Scan(&r.Serial, &r.ClientID, &r.Environment, &r.Fingerprint, &notBefore, &notAfter,
			&revoked, &revokedAt, &r.Revision); err != nil {
			return Certificate{}, fmt.Errorf("scan client certificate: %w", err)
		}
		r.NotBefore, r.NotAfter, r.RevokedAt = readdb.FromUMillis(notBefore), readdb.FromUMillis(notAfter), readdb.FromUMillis(revokedAt)
		r.Revoked = revoked != 0
		return r, nil
	}, func(r Certificate) { found, ok = r, true },
		`SELECT `+clickhouseCertificateColumns+` FROM client_certificates FINAL WHERE serial = ? LIMIT 1`, serial)
	if err != nil {
		return Certificate{}, fmt.Errorf("read certificate %s: %w", serial, err)
	}
	if !ok {
		return Certificate{}, fmt.Errorf("certificate %s: %w", serial, readdb.ErrNotFound)
	}
	return found, nil
}

// Settings implements Store.
func (s *ClickHouseStore) Settings(ctx context.Context, clientID string) (Settings, error) {
	var (
		found Settings
		ok    bool
	)
	err := readdb.ClickHouseEach(ctx, s.conn, "client settings", func(rows readdb.Rows) (Settings, error) {
		var (
			r        Settings
			burst    uint32
			mtlsOnly uint8
		)
		if err := rows.Scan(&r.ClientID, &r.RateLimit, &burst, &mtlsOnly, &r.Revision); err != nil {
			return Settings{}, fmt.Errorf("scan client settings: %w", err)
		}
		r.Burst, r.MTLSOnly = int(burst), mtlsOnly != 0
		return r, nil
	}, func(r Settings) { found, ok = r, true },
		`SELECT `+clickhouseSettingsColumns+` FROM client_settings FINAL WHERE client_id = ? LIMIT 1`, clientID)
	if err != nil {
		return Settings{}, fmt.Errorf("read settings of %s: %w", clientID, err)
	}
	if !ok {
		return Settings{}, fmt.Errorf("settings of %s: %w", clientID, readdb.ErrNotFound)
	}
	return found, nil
}

// Reset implements Store.
func (s *ClickHouseStore) Reset(ctx context.Context) error {
	for _, table := range []string{"client_certificates", "client_settings"} {
		if err := s.conn.Exec(ctx, `TRUNCATE TABLE `+table); err != nil {
			return fmt.Errorf("reset %s: %w", table, err)
		}
	}
	return nil
}
