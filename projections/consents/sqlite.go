package consents

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/samla/samla/projections/internal/sealed"
	"github.com/samla/samla/projections/readdb"
)

// sqliteSchema is the read model's SQLite DDL. Times are Unix milliseconds (readdb.Millis), 0 for
// none; scope is encodeScope's comma-separated list; personal is the sealed order, empty for
// none; the other texts are ” for none.
const sqliteSchema = `
CREATE TABLE IF NOT EXISTS consents (
	consent_id      TEXT    NOT NULL PRIMARY KEY,
	tenant          TEXT    NOT NULL,
	user_uuid       TEXT    NOT NULL,
	company         TEXT    NOT NULL,
	login_method    TEXT    NOT NULL,
	status          TEXT    NOT NULL,
	scope           TEXT    NOT NULL,
	bank_consent_id TEXT    NOT NULL DEFAULT '',
	error_code      TEXT    NOT NULL DEFAULT '',
	error_message   TEXT    NOT NULL DEFAULT '',
	revoke_reason   TEXT    NOT NULL DEFAULT '',
	personal        BLOB    NOT NULL DEFAULT '',
	created_at_ms   INTEGER NOT NULL,
	updated_at_ms   INTEGER NOT NULL,
	authorization_started_at_ms INTEGER NOT NULL DEFAULT 0,
	authorization_deadline_ms   INTEGER NOT NULL DEFAULT 0,
	authorized_at_ms INTEGER NOT NULL DEFAULT 0,
	expires_at_ms    INTEGER NOT NULL DEFAULT 0,
	revision        INTEGER NOT NULL
) WITHOUT ROWID;
-- ListByUser reads one user's consents in the list's order; ErasePersonal finds them by it too.
CREATE INDEX IF NOT EXISTS consents_by_user ON consents (tenant, user_uuid, created_at_ms, consent_id);
-- ListNonFinal reads the few live consents among the many ended ones; the index holds the
-- primary key after its columns, so a page's position is a range in it.
CREATE INDEX IF NOT EXISTS consents_by_status ON consents (status, created_at_ms);
`

const sqliteColumns = `consent_id, tenant, user_uuid, company, login_method, status, scope, bank_consent_id,
	error_code, error_message, revoke_reason, personal, created_at_ms, updated_at_ms,
	authorization_started_at_ms, authorization_deadline_ms, authorized_at_ms, expires_at_ms, revision`

// sqliteUpsert only overwrites a row with a newer revision, so that one statement makes the write
// idempotent and order-safe (at-least-once delivery, rebuilds racing late deliveries).
const sqliteUpsert = `INSERT INTO consents (` + sqliteColumns + `)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (consent_id) DO UPDATE SET
	tenant = excluded.tenant, user_uuid = excluded.user_uuid, company = excluded.company,
	login_method = excluded.login_method, status = excluded.status, scope = excluded.scope,
	bank_consent_id = excluded.bank_consent_id, error_code = excluded.error_code,
	error_message = excluded.error_message, revoke_reason = excluded.revoke_reason,
	personal = excluded.personal, created_at_ms = excluded.created_at_ms,
	updated_at_ms = excluded.updated_at_ms,
	authorization_started_at_ms = excluded.authorization_started_at_ms,
	authorization_deadline_ms = excluded.authorization_deadline_ms,
	authorized_at_ms = excluded.authorized_at_ms, expires_at_ms = excluded.expires_at_ms,
	revision = excluded.revision
WHERE excluded.revision > consents.revision`

// sqliteGet is the status poll's read, prepared once.
const sqliteGet = `SELECT ` + sqliteColumns + ` FROM consents WHERE consent_id = ? AND tenant = ?`

// SQLiteStore is the Store on an embedded SQLite database.
type SQLiteStore struct {
	db       *sql.DB
	prepared readdb.Statements
	get      *sql.Stmt
	getMany  *sql.Stmt
}

var _ Store = (*SQLiteStore)(nil)

// NewSQLite creates the read model's table in db when missing, prepares its hot read and returns
// the store. The caller keeps ownership of db and closes the store before it.
func NewSQLite(ctx context.Context, db *sql.DB) (*SQLiteStore, error) {
	if _, err := db.ExecContext(ctx, sqliteSchema); err != nil {
		return nil, fmt.Errorf("migrate sqlite consents: %w", err)
	}
	s := &SQLiteStore{db: db}
	s.get = s.prepared.Prepare(ctx, db, sqliteGet)
	s.getMany = s.prepared.Prepare(ctx, db, `SELECT `+sqliteColumns+` FROM consents WHERE consent_id `+readdb.SQLiteInKeys)
	if err := s.prepared.Err(); err != nil {
		return nil, fmt.Errorf("open sqlite consents: %w", err)
	}
	return s, nil
}

// Close releases the prepared statements; the database stays open.
func (s *SQLiteStore) Close() error { return s.prepared.Close() }

// GetMany implements Store.
func (s *SQLiteStore) GetMany(ctx context.Context, ids []string) (map[string]Row, error) {
	return readdb.SQLiteMapByKeys(ctx, s.getMany, "consents", scanSQLiteRow, func(r Row) string { return r.ConsentID }, ids)
}

// Upsert implements Store in one transaction; the WHERE clause keeps newer rows.
func (s *SQLiteStore) Upsert(ctx context.Context, rows []Row) error {
	return readdb.Upsert(ctx, s.db, "consents", sqliteUpsert, rows, func(r Row) ([]any, error) {
		personal := r.Personal.Bytes()
		if personal == nil {
			personal = []byte{}
		}
		return []any{r.ConsentID, r.Tenant, r.UserUUID, r.Company, r.LoginMethod, r.Status, encodeScope(r.Scope),
			r.BankConsentID, r.ErrorCode, r.ErrorMessage, r.RevokeReason, personal,
			readdb.Millis(r.CreatedAt), readdb.Millis(r.UpdatedAt), readdb.Millis(r.AuthorizationStartedAt),
			readdb.Millis(r.AuthorizationDeadline), readdb.Millis(r.AuthorizedAt), readdb.Millis(r.ExpiresAt),
			int64(r.Revision)}, nil
	})
}

// Get implements Store.
func (s *SQLiteStore) Get(ctx context.Context, tenant, consentID string) (Row, error) {
	var (
		found Row
		ok    bool
	)
	err := readdb.SQLiteStmtEach(ctx, s.get, "consents", scanSQLiteRow, func(r Row) { found, ok = r, true }, consentID, tenant)
	if err != nil {
		return Row{}, err
	}
	if !ok {
		return Row{}, fmt.Errorf("consent %s: %w", consentID, readdb.ErrNotFound)
	}
	return found, nil
}

// ListByUser implements Store through the index consents_by_user.
func (s *SQLiteStore) ListByUser(ctx context.Context, tenant, userUUID string, after *UserPosition, limit int) ([]Row, error) {
	if userUUID == "" || limit <= 0 {
		return nil, nil
	}
	where, args := byUserFilter(tenant, userUUID, after, true)
	var out []Row
	err := s.query(ctx, func(r Row) { out = append(out, r) }, `SELECT `+sqliteColumns+` FROM consents
		WHERE `+where+` ORDER BY created_at_ms DESC, consent_id DESC LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("list consents of user %s: %w", userUUID, err)
	}
	return out, nil
}

// ListNonFinal implements Store.
func (s *SQLiteStore) ListNonFinal(ctx context.Context, after *NonFinalPosition, limit int) ([]Row, error) {
	statuses := nonFinalStatuses()
	args := make([]any, 0, len(statuses)+3)
	for _, st := range statuses {
		args = append(args, st)
	}
	where := `status IN (` + readdb.Placeholders(len(statuses)) + `)`
	if cond, condArgs := nonFinalAfter(after, true); cond != "" {
		where += ` AND ` + cond
		args = append(args, condArgs...)
	}
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	var out []Row
	err := s.query(ctx, func(r Row) { out = append(out, r) }, `SELECT `+sqliteColumns+` FROM consents
		WHERE `+where+` ORDER BY created_at_ms, consent_id LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("list non-final consents: %w", err)
	}
	return out, nil
}

// ErasePersonal implements Store in one statement, which the index of ListByUser serves. The
// row keeps its revision: the erasure is no event of the consent's stream.
func (s *SQLiteStore) ErasePersonal(ctx context.Context, tenant, userUUID string) error {
	if userUUID == "" {
		return nil
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE consents SET personal = X''
		WHERE tenant = ? AND user_uuid = ? AND length(personal) > 0`, tenant, userUUID); err != nil {
		return fmt.Errorf("erase the personal parts of user %s's consents: %w", userUUID, err)
	}
	return nil
}

// Reset implements Store.
func (s *SQLiteStore) Reset(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM consents`); err != nil {
		return fmt.Errorf("reset consents: %w", err)
	}
	return nil
}

func (s *SQLiteStore) query(ctx context.Context, each func(Row), q string, args ...any) error {
	return readdb.SQLiteEach(ctx, s.db, "consents", scanSQLiteRow, each, q, args...)
}

func scanSQLiteRow(rows readdb.Rows) (Row, error) {
	var (
		r                                                  Row
		scope                                              string
		personal                                           []byte
		created, updated, started, deadline, authed, expir int64
		revision                                           int64
	)
	if err := rows.Scan(&r.ConsentID, &r.Tenant, &r.UserUUID, &r.Company, &r.LoginMethod, &r.Status, &scope,
		&r.BankConsentID, &r.ErrorCode, &r.ErrorMessage, &r.RevokeReason, &personal, &created, &updated,
		&started, &deadline, &authed, &expir, &revision); err != nil {
		return Row{}, fmt.Errorf("scan consent: %w", err)
	}
	var err error
	if r.Personal, err = sealed.FromStored(personal); err != nil {
		return Row{}, fmt.Errorf("consent %s: %w", r.ConsentID, err)
	}
	r.Scope = decodeScope(scope)
	r.CreatedAt, r.UpdatedAt = readdb.FromMillis(created), readdb.FromMillis(updated)
	r.AuthorizationStartedAt, r.AuthorizationDeadline = readdb.FromMillis(started), readdb.FromMillis(deadline)
	r.AuthorizedAt, r.ExpiresAt = readdb.FromMillis(authed), readdb.FromMillis(expir)
	r.Revision = uint64(revision)
	return r, nil
}
