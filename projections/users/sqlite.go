package users

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/samla/samla/projections/readdb"
)

// sqliteSchema is the read model's SQLite DDL. Times are Unix milliseconds (readdb.Millis), 0 for
// none; personal is the sealed personal data, ” when none is kept.
const sqliteSchema = `
CREATE TABLE IF NOT EXISTS users (
	user_uuid     TEXT    NOT NULL PRIMARY KEY,
	tenant        TEXT    NOT NULL,
	personal      BLOB    NOT NULL DEFAULT '',
	created_at_ms INTEGER NOT NULL,
	deleted_at_ms INTEGER NOT NULL DEFAULT 0,
	revision      INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS user_external_ids (
	external_id_key TEXT    NOT NULL PRIMARY KEY,
	tenant          TEXT    NOT NULL,
	user_uuid       TEXT    NOT NULL,
	released        INTEGER NOT NULL,
	revision        INTEGER NOT NULL
) WITHOUT ROWID;
`

const sqliteColumns = `user_uuid, tenant, personal, created_at_ms, deleted_at_ms, revision`

// sqliteUpsert only overwrites a row with a newer revision.
const sqliteUpsert = `INSERT INTO users (` + sqliteColumns + `) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (user_uuid) DO UPDATE SET tenant = excluded.tenant, personal = excluded.personal,
	created_at_ms = excluded.created_at_ms, deleted_at_ms = excluded.deleted_at_ms,
	revision = excluded.revision
WHERE excluded.revision > users.revision`

const sqliteUpsertExternalID = `INSERT INTO user_external_ids (external_id_key, tenant, user_uuid, released, revision)
VALUES (?, ?, ?, ?, ?)
ON CONFLICT (external_id_key) DO UPDATE SET tenant = excluded.tenant, user_uuid = excluded.user_uuid,
	released = excluded.released, revision = excluded.revision
WHERE excluded.revision > user_external_ids.revision`

// sqliteGet serves GET /users/{id} and every session's liveness check, prepared once.
const sqliteGet = `SELECT ` + sqliteColumns + ` FROM users WHERE user_uuid = ? AND tenant = ?`

// sqliteFind serves GET /users?externalId=, prepared once.
const sqliteFind = `SELECT u.user_uuid, u.tenant, u.personal, u.created_at_ms, u.deleted_at_ms, u.revision
FROM user_external_ids x JOIN users u ON u.user_uuid = x.user_uuid AND u.tenant = x.tenant
WHERE x.external_id_key = ? AND x.tenant = ? AND x.released = 0 AND u.deleted_at_ms = 0`

// SQLiteStore is the Store on an embedded SQLite database.
type SQLiteStore struct {
	db       *sql.DB
	prepared readdb.Statements
	get      *sql.Stmt
	find     *sql.Stmt
}

var _ Store = (*SQLiteStore)(nil)

// NewSQLite creates the read model's tables in db when missing, prepares its hot reads and
// returns the store. The caller keeps ownership of db and closes the store before it.
func NewSQLite(ctx context.Context, db *sql.DB) (*SQLiteStore, error) {
	if _, err := db.ExecContext(ctx, sqliteSchema); err != nil {
		return nil, fmt.Errorf("migrate sqlite users: %w", err)
	}
	s := &SQLiteStore{db: db}
	s.get = s.prepared.Prepare(ctx, db, sqliteGet)
	s.find = s.prepared.Prepare(ctx, db, sqliteFind)
	if err := s.prepared.Err(); err != nil {
		return nil, fmt.Errorf("open sqlite users: %w", err)
	}
	return s, nil
}

// Close releases the prepared statements; the database stays open.
func (s *SQLiteStore) Close() error { return s.prepared.Close() }

// GetMany implements Store.
func (s *SQLiteStore) GetMany(ctx context.Context, ids []string) (map[string]Row, error) {
	out := make(map[string]Row, len(ids))
	err := readdb.SQLiteByKeys(ctx, s.db, "users", scanSQLiteRow, func(r Row) { out[r.UserUUID] = r },
		`SELECT `+sqliteColumns+` FROM users WHERE user_uuid IN`, ids)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Upsert implements Store in one transaction; the WHERE clause keeps newer rows.
func (s *SQLiteStore) Upsert(ctx context.Context, rows []Row) error {
	if len(rows) == 0 {
		return nil
	}
	err := readdb.InTx(ctx, s.db, func(tx *sql.Tx) error {
		return readdb.ExecEach(ctx, tx, sqliteUpsert, rows, func(r Row) ([]any, error) {
			return []any{r.UserUUID, r.Tenant, personalArg(r.Personal), readdb.Millis(r.CreatedAt),
				readdb.Millis(r.DeletedAt), int64(r.Revision)}, nil
		})
	})
	if err != nil {
		return fmt.Errorf("upsert users: %w", err)
	}
	return nil
}

// UpsertExternalIDs implements Store in one transaction.
func (s *SQLiteStore) UpsertExternalIDs(ctx context.Context, rows []ExternalIDRow) error {
	if len(rows) == 0 {
		return nil
	}
	err := readdb.InTx(ctx, s.db, func(tx *sql.Tx) error {
		return readdb.ExecEach(ctx, tx, sqliteUpsertExternalID, rows, func(r ExternalIDRow) ([]any, error) {
			return []any{r.Key, r.Tenant, r.UserUUID, r.Released, int64(r.Revision)}, nil
		})
	})
	if err != nil {
		return fmt.Errorf("upsert user external ids: %w", err)
	}
	return nil
}

// Get implements Store.
func (s *SQLiteStore) Get(ctx context.Context, tenant, userUUID string) (Row, error) {
	return s.one(ctx, s.get, "user "+userUUID, userUUID, tenant)
}

// FindByExternalIDKey implements Store.
func (s *SQLiteStore) FindByExternalIDKey(ctx context.Context, tenant, key string) (Row, error) {
	return s.one(ctx, s.find, "user by external id", key, tenant)
}

func (s *SQLiteStore) one(ctx context.Context, stmt *sql.Stmt, what string, args ...any) (Row, error) {
	var (
		found Row
		ok    bool
	)
	if err := readdb.SQLiteStmtEach(ctx, stmt, "users", scanSQLiteRow, func(r Row) { found, ok = r, true }, args...); err != nil {
		return Row{}, err
	}
	if !ok {
		return Row{}, fmt.Errorf("%s: %w", what, readdb.ErrNotFound)
	}
	return found, nil
}

// Reset implements Store.
func (s *SQLiteStore) Reset(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM users; DELETE FROM user_external_ids`); err != nil {
		return fmt.Errorf("reset users: %w", err)
	}
	return nil
}

// personalArg is the stored form of Row.Personal: the bytes, or an empty blob for none.
func personalArg(p []byte) []byte {
	if p == nil {
		return []byte{}
	}
	return p
}

func scanSQLiteRow(rows readdb.Rows) (Row, error) {
	var (
		r                Row
		personal         []byte
		created, deleted int64
		revision         int64
	)
	if err := rows.Scan(&r.UserUUID, &r.Tenant, &personal, &created, &deleted, &revision); err != nil {
		return Row{}, fmt.Errorf("scan user: %w", err)
	}
	if len(personal) > 0 {
		r.Personal = personal
	}
	r.CreatedAt, r.DeletedAt, r.Revision = readdb.FromMillis(created), readdb.FromMillis(deleted), uint64(revision)
	return r, nil
}
