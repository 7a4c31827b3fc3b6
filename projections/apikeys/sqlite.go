package apikeys

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/samla/samla/projections/readdb"
)

// sqliteSchema is the key table's SQLite DDL: keyed by hash for Lookup, indexed by
// (client_id, key_id) for revocations and retirements. valid_until_ms is the end of a retiring
// key in Unix milliseconds, 0 for none.
const sqliteSchema = `
CREATE TABLE IF NOT EXISTS api_keys (
	key_hash       TEXT    NOT NULL PRIMARY KEY,
	client_id      TEXT    NOT NULL,
	key_id         TEXT    NOT NULL,
	revoked        INTEGER NOT NULL,
	revision       INTEGER NOT NULL,
	valid_until_ms INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS api_keys_by_key_id ON api_keys (client_id, key_id);
`

const sqliteColumns = `key_hash, client_id, key_id, revoked, valid_until_ms, revision`

// sqliteUpsert only overwrites a key with a newer revision.
const sqliteUpsert = `INSERT INTO api_keys (` + sqliteColumns + `)
VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (key_hash) DO UPDATE SET client_id = excluded.client_id, key_id = excluded.key_id,
	revoked = excluded.revoked, valid_until_ms = excluded.valid_until_ms, revision = excluded.revision
WHERE excluded.revision > api_keys.revision`

// sqliteLookup authenticates every request that misses the HTTP layer's cache, prepared once:
// the key must be unrevoked and, when retiring, not past its end.
const sqliteLookup = `SELECT ` + sqliteColumns + ` FROM api_keys
WHERE key_hash = ? AND revoked = 0 AND (valid_until_ms = 0 OR valid_until_ms > ?)`

// SQLiteStore is the Store on an embedded SQLite database.
type SQLiteStore struct {
	db       *sql.DB
	prepared readdb.Statements
	lookup   *sql.Stmt
}

var _ Store = (*SQLiteStore)(nil)

// NewSQLite creates the key table in db when missing, prepares its hot read and returns the
// store. The caller keeps ownership of db and closes the store before it.
func NewSQLite(ctx context.Context, db *sql.DB) (*SQLiteStore, error) {
	if _, err := db.ExecContext(ctx, sqliteSchema); err != nil {
		return nil, fmt.Errorf("migrate sqlite api_keys: %w", err)
	}
	// A table made before retirements existed has no end column; every key in it has none.
	if err := readdb.EnsureSQLiteColumns(ctx, db, "api_keys", []string{"valid_until_ms"}, "INTEGER NOT NULL DEFAULT 0"); err != nil {
		return nil, fmt.Errorf("migrate sqlite api_keys: %w", err)
	}
	s := &SQLiteStore{db: db}
	s.lookup = s.prepared.Prepare(ctx, db, sqliteLookup)
	if err := s.prepared.Err(); err != nil {
		return nil, fmt.Errorf("open sqlite api_keys: %w", err)
	}
	return s, nil
}

// Close releases the prepared statements; the database stays open.
func (s *SQLiteStore) Close() error { return s.prepared.Close() }

// Upsert implements Store in one transaction; the WHERE clause keeps newer rows.
func (s *SQLiteStore) Upsert(ctx context.Context, rows []Row) error {
	if len(rows) == 0 {
		return nil
	}
	err := readdb.InTx(ctx, s.db, func(tx *sql.Tx) error {
		return readdb.ExecEach(ctx, tx, sqliteUpsert, rows, func(r Row) ([]any, error) {
			return []any{r.KeyHash, r.ClientID, r.KeyID, r.Revoked, readdb.Millis(r.ValidUntil), int64(r.Revision)}, nil
		})
	})
	if err != nil {
		return fmt.Errorf("upsert api keys: %w", err)
	}
	return nil
}

// Lookup implements Store.
func (s *SQLiteStore) Lookup(ctx context.Context, keyHash string, at time.Time) (Row, error) {
	r, err := scanRow(s.lookup.QueryRowContext(ctx, keyHash, at.UnixMilli()))
	if errors.Is(err, sql.ErrNoRows) {
		return Row{}, fmt.Errorf("api key: %w", readdb.ErrNotFound)
	}
	if err != nil {
		return Row{}, fmt.Errorf("look up api key: %w", err)
	}
	return r, nil
}

// ByKeyID implements Store.
func (s *SQLiteStore) ByKeyID(ctx context.Context, clientID, keyID string) (Row, error) {
	r, err := scanRow(s.db.QueryRowContext(ctx, `SELECT `+sqliteColumns+` FROM api_keys
		WHERE client_id = ? AND key_id = ? ORDER BY revision DESC LIMIT 1`, clientID, keyID))
	if errors.Is(err, sql.ErrNoRows) {
		return Row{}, fmt.Errorf("key %s of client %s: %w", keyID, clientID, readdb.ErrNotFound)
	}
	if err != nil {
		return Row{}, fmt.Errorf("read key %s of client %s: %w", keyID, clientID, err)
	}
	return r, nil
}

// scanRow reads the sqliteColumns of one row.
func scanRow(row *sql.Row) (Row, error) {
	var (
		r                    Row
		validUntil, revision int64
	)
	if err := row.Scan(&r.KeyHash, &r.ClientID, &r.KeyID, &r.Revoked, &validUntil, &revision); err != nil {
		return Row{}, err
	}
	r.ValidUntil, r.Revision = readdb.FromMillis(validUntil), uint64(revision)
	return r, nil
}

// Reset implements Store.
func (s *SQLiteStore) Reset(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM api_keys`); err != nil {
		return fmt.Errorf("reset api_keys: %w", err)
	}
	return nil
}
