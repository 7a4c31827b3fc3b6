package users

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/samla/samla/projections/internal/sealed"
	"github.com/samla/samla/projections/readdb"
)

// sqliteSchema is the read model's SQLite DDL. Times are Unix milliseconds (readdb.Millis), 0 for
// none; personal and holder are sealed personal data, empty when none is kept. The reservations'
// table of before, which held its holders in plain text, is dropped (the projection is "-v2" and
// fills the new one from the start).
const sqliteSchema = `
CREATE TABLE IF NOT EXISTS users (
	user_uuid     TEXT    NOT NULL PRIMARY KEY,
	tenant        TEXT    NOT NULL,
	personal      BLOB    NOT NULL DEFAULT '',
	created_at_ms INTEGER NOT NULL,
	deleted_at_ms INTEGER NOT NULL DEFAULT 0,
	revision      INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS user_external_ids_v2 (
	external_id_key TEXT    NOT NULL PRIMARY KEY,
	tenant          TEXT    NOT NULL,
	holder          BLOB    NOT NULL DEFAULT '',
	released        INTEGER NOT NULL,
	revision        INTEGER NOT NULL
) WITHOUT ROWID;
DROP TABLE IF EXISTS user_external_ids;
`

const sqliteColumns = `user_uuid, tenant, personal, created_at_ms, deleted_at_ms, revision`

// sqliteUpsert only overwrites a row with a newer revision.
const sqliteUpsert = `INSERT INTO users (` + sqliteColumns + `) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (user_uuid) DO UPDATE SET tenant = excluded.tenant, personal = excluded.personal,
	created_at_ms = excluded.created_at_ms, deleted_at_ms = excluded.deleted_at_ms,
	revision = excluded.revision
WHERE excluded.revision > users.revision`

const sqliteExternalIDColumns = `external_id_key, tenant, holder, released, revision`

const sqliteUpsertExternalID = `INSERT INTO user_external_ids_v2 (` + sqliteExternalIDColumns + `)
VALUES (?, ?, ?, ?, ?)
ON CONFLICT (external_id_key) DO UPDATE SET tenant = excluded.tenant, holder = excluded.holder,
	released = excluded.released, revision = excluded.revision
WHERE excluded.revision > user_external_ids_v2.revision`

// sqliteGet serves GET /users/{id} and every session's liveness check, prepared once.
const sqliteGet = `SELECT ` + sqliteColumns + ` FROM users WHERE user_uuid = ? AND tenant = ?`

// sqliteGetExternalID serves GET /users?externalId=, prepared once.
const sqliteGetExternalID = `SELECT ` + sqliteExternalIDColumns + ` FROM user_external_ids_v2
WHERE external_id_key = ? AND tenant = ?`

// SQLiteStore is the Store on an embedded SQLite database.
type SQLiteStore struct {
	db       *sql.DB
	prepared readdb.Statements
	get      *sql.Stmt
	getMany  *sql.Stmt
	getID    *sql.Stmt
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
	s.getMany = s.prepared.Prepare(ctx, db, `SELECT `+sqliteColumns+` FROM users WHERE user_uuid `+readdb.SQLiteInKeys)
	s.getID = s.prepared.Prepare(ctx, db, sqliteGetExternalID)
	if err := s.prepared.Err(); err != nil {
		return nil, fmt.Errorf("open sqlite users: %w", err)
	}
	return s, nil
}

// Close releases the prepared statements; the database stays open.
func (s *SQLiteStore) Close() error { return s.prepared.Close() }

// GetMany implements Store.
func (s *SQLiteStore) GetMany(ctx context.Context, ids []string) (map[string]Row, error) {
	return readdb.SQLiteMapByKeys(ctx, s.getMany, "users", scanSQLiteRow, func(r Row) string { return r.UserUUID }, ids)
}

// Upsert implements Store in one transaction; the WHERE clause keeps newer rows.
func (s *SQLiteStore) Upsert(ctx context.Context, rows []Row) error {
	return readdb.Upsert(ctx, s.db, "users", sqliteUpsert, rows, func(r Row) ([]any, error) {
		return []any{r.UserUUID, r.Tenant, personalArg(r.Personal), readdb.Millis(r.CreatedAt),
			readdb.Millis(r.DeletedAt), int64(r.Revision)}, nil
	})
}

// UpsertExternalIDs implements Store in one transaction.
func (s *SQLiteStore) UpsertExternalIDs(ctx context.Context, rows []ExternalIDRow) error {
	return readdb.Upsert(ctx, s.db, "user external ids", sqliteUpsertExternalID, rows, func(r ExternalIDRow) ([]any, error) {
		return []any{r.Key, r.Tenant, personalArg(r.Holder.Bytes()), r.Released, int64(r.Revision)}, nil
	})
}

// Get implements Store.
func (s *SQLiteStore) Get(ctx context.Context, tenant, userUUID string) (Row, error) {
	return s.one(ctx, s.get, "user "+userUUID, userUUID, tenant)
}

// GetExternalID implements Store.
func (s *SQLiteStore) GetExternalID(ctx context.Context, tenant, key string) (ExternalIDRow, error) {
	var (
		found ExternalIDRow
		ok    bool
	)
	err := readdb.SQLiteStmtEach(ctx, s.getID, "user external ids", scanSQLiteExternalID,
		func(r ExternalIDRow) { found, ok = r, true }, key, tenant)
	if err != nil {
		return ExternalIDRow{}, err
	}
	if !ok {
		return ExternalIDRow{}, fmt.Errorf("user external id: %w", readdb.ErrNotFound)
	}
	return found, nil
}

func scanSQLiteExternalID(rows readdb.Rows) (ExternalIDRow, error) {
	var (
		r        ExternalIDRow
		holder   []byte
		revision int64
	)
	if err := rows.Scan(&r.Key, &r.Tenant, &holder, &r.Released, &revision); err != nil {
		return ExternalIDRow{}, fmt.Errorf("scan user external id: %w", err)
	}
	var err error
	if r.Holder, err = sealed.FromStored(holder); err != nil {
		return ExternalIDRow{}, fmt.Errorf("user external id: %w", err)
	}
	r.Revision = uint64(revision)
	return r, nil
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
	if _, err := s.db.ExecContext(ctx, `DELETE FROM users; DELETE FROM user_external_ids_v2`); err != nil {
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
