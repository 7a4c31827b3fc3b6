package cancellations

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/samla/samla/projections/internal/sealed"
	"github.com/samla/samla/projections/readdb"
)

// sqliteSchema is the read model's SQLite DDL. Times are Unix milliseconds (readdb.Millis), 0 for
// none; is_signed_and_sealed is 0 or 1; the other texts are ” for none. The sealed PDF lives in
// cancellation_documents (a rowid table: its rows are large), personal_content empty once erased.
const sqliteSchema = `
CREATE TABLE IF NOT EXISTS cancellations (
	document_id      TEXT    NOT NULL PRIMARY KEY,
	tenant           TEXT    NOT NULL,
	collection_id    TEXT    NOT NULL,
	user_uuid        TEXT    NOT NULL DEFAULT '',
	company          TEXT    NOT NULL,
	insurance_id     TEXT    NOT NULL,
	insurance_type   TEXT    NOT NULL DEFAULT '',
	delivery_method  TEXT    NOT NULL,
	template_version INTEGER NOT NULL,
	status           TEXT    NOT NULL,
	is_signed_and_sealed INTEGER NOT NULL DEFAULT 0,
	requested_at_ms  INTEGER NOT NULL,
	sent_at_ms       INTEGER NOT NULL DEFAULT 0,
	deadline_ms      INTEGER NOT NULL DEFAULT 0,
	signed_at_ms     INTEGER NOT NULL DEFAULT 0,
	ended_at_ms      INTEGER NOT NULL DEFAULT 0,
	cancel_reason    TEXT    NOT NULL DEFAULT '',
	error_code       TEXT    NOT NULL DEFAULT '',
	updated_at_ms    INTEGER NOT NULL,
	revision         INTEGER NOT NULL
) WITHOUT ROWID;
-- ListByCollection reads one collection's cancellations in the list's order.
CREATE INDEX IF NOT EXISTS cancellations_by_collection ON cancellations (tenant, collection_id, requested_at_ms, document_id);
-- ListByUser reads one user's cancellations in the list's order; ErasePersonal finds them by it too.
CREATE INDEX IF NOT EXISTS cancellations_by_user ON cancellations (tenant, user_uuid, requested_at_ms, document_id);
-- ListNeedingProvider reads the few open cancellations among the many ended ones; the index holds
-- the primary key after its columns, so a page's position is a range in it.
CREATE INDEX IF NOT EXISTS cancellations_by_status ON cancellations (status, requested_at_ms);
CREATE TABLE IF NOT EXISTS cancellation_documents (
	document_id      TEXT    NOT NULL PRIMARY KEY,
	tenant           TEXT    NOT NULL,
	personal_content BLOB    NOT NULL DEFAULT X'',
	revision         INTEGER NOT NULL
);
`

const sqliteColumns = `document_id, tenant, collection_id, user_uuid, company, insurance_id, insurance_type,
	delivery_method, template_version, status, is_signed_and_sealed, requested_at_ms, sent_at_ms, deadline_ms,
	signed_at_ms, ended_at_ms, cancel_reason, error_code, updated_at_ms, revision`

// sqliteUpsert only overwrites a row with a newer revision, so that one statement makes the write
// idempotent and order-safe (at-least-once delivery, rebuilds racing late deliveries).
const sqliteUpsert = `INSERT INTO cancellations (` + sqliteColumns + `)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (document_id) DO UPDATE SET
	tenant = excluded.tenant, collection_id = excluded.collection_id, user_uuid = excluded.user_uuid,
	company = excluded.company, insurance_id = excluded.insurance_id, insurance_type = excluded.insurance_type,
	delivery_method = excluded.delivery_method, template_version = excluded.template_version,
	status = excluded.status, is_signed_and_sealed = excluded.is_signed_and_sealed,
	requested_at_ms = excluded.requested_at_ms, sent_at_ms = excluded.sent_at_ms,
	deadline_ms = excluded.deadline_ms, signed_at_ms = excluded.signed_at_ms,
	ended_at_ms = excluded.ended_at_ms, cancel_reason = excluded.cancel_reason,
	error_code = excluded.error_code, updated_at_ms = excluded.updated_at_ms, revision = excluded.revision
WHERE excluded.revision > cancellations.revision`

const sqliteDocUpsert = `INSERT INTO cancellation_documents (document_id, tenant, personal_content, revision)
VALUES (?, ?, ?, ?)
ON CONFLICT (document_id) DO UPDATE SET
	tenant = excluded.tenant, personal_content = excluded.personal_content, revision = excluded.revision
WHERE excluded.revision > cancellation_documents.revision`

// The endpoints' reads, prepared once.
const (
	sqliteGet      = `SELECT ` + sqliteColumns + ` FROM cancellations WHERE document_id = ? AND tenant = ?`
	sqliteDocument = `SELECT document_id, tenant, personal_content, revision FROM cancellation_documents
		WHERE document_id = ? AND tenant = ?`
)

// SQLiteStore is the Store on an embedded SQLite database.
type SQLiteStore struct {
	db                    *sql.DB
	prepared              readdb.Statements
	get, getMany, getDocs *sql.Stmt
}

var _ Store = (*SQLiteStore)(nil)

// NewSQLite creates the read model's tables in db when missing, prepares its hot reads and
// returns the store. The caller keeps ownership of db and closes the store before it.
func NewSQLite(ctx context.Context, db *sql.DB) (*SQLiteStore, error) {
	if _, err := db.ExecContext(ctx, sqliteSchema); err != nil {
		return nil, fmt.Errorf("migrate sqlite cancellations: %w", err)
	}
	s := &SQLiteStore{db: db}
	s.get = s.prepared.Prepare(ctx, db, sqliteGet)
	s.getMany = s.prepared.Prepare(ctx, db, `SELECT `+sqliteColumns+` FROM cancellations WHERE document_id `+readdb.SQLiteInKeys)
	s.getDocs = s.prepared.Prepare(ctx, db, sqliteDocument)
	if err := s.prepared.Err(); err != nil {
		return nil, fmt.Errorf("open sqlite cancellations: %w", err)
	}
	return s, nil
}

// Close releases the prepared statements; the database stays open.
func (s *SQLiteStore) Close() error { return s.prepared.Close() }

// GetMany implements Store.
func (s *SQLiteStore) GetMany(ctx context.Context, ids []string) (map[string]Row, error) {
	return readdb.SQLiteMapByKeys(ctx, s.getMany, "cancellations", scanSQLiteRow, func(r Row) string { return r.DocumentID }, ids)
}

// Upsert implements Store in one transaction: documents and rows commit together; the WHERE
// clauses keep newer versions.
func (s *SQLiteStore) Upsert(ctx context.Context, rows []Row, docs []Document) error {
	if len(rows) == 0 && len(docs) == 0 {
		return nil
	}
	err := readdb.InTx(ctx, s.db, func(tx *sql.Tx) error {
		if err := readdb.ExecEach(ctx, tx, sqliteDocUpsert, docs, func(d Document) ([]any, error) {
			content := d.Content.Bytes()
			if content == nil {
				content = []byte{}
			}
			return []any{d.DocumentID, d.Tenant, content, int64(d.Revision)}, nil
		}); err != nil {
			return fmt.Errorf("documents: %w", err)
		}
		return readdb.ExecEach(ctx, tx, sqliteUpsert, rows, func(r Row) ([]any, error) {
			return []any{r.DocumentID, r.Tenant, r.CollectionID, r.UserUUID, r.Company, r.InsuranceID, r.InsuranceType,
				r.DeliveryMethod, r.TemplateVersion, r.Status, r.IsSignedAndSealed, readdb.Millis(r.RequestedAt),
				readdb.Millis(r.SentAt), readdb.Millis(r.Deadline), readdb.Millis(r.SignedAt), readdb.Millis(r.EndedAt),
				r.CancelReason, r.ErrorCode, readdb.Millis(r.UpdatedAt), int64(r.Revision)}, nil
		})
	})
	if err != nil {
		return fmt.Errorf("upsert cancellations: %w", err)
	}
	return nil
}

// Get implements Store.
func (s *SQLiteStore) Get(ctx context.Context, tenant, documentID string) (Row, error) {
	var (
		found Row
		ok    bool
	)
	err := readdb.SQLiteStmtEach(ctx, s.get, "cancellations", scanSQLiteRow, func(r Row) { found, ok = r, true }, documentID, tenant)
	if err != nil {
		return Row{}, err
	}
	if !ok {
		return Row{}, fmt.Errorf("cancellation %s: %w", documentID, readdb.ErrNotFound)
	}
	return found, nil
}

// ListByCollection implements Store through the index cancellations_by_collection.
func (s *SQLiteStore) ListByCollection(ctx context.Context, tenant, collectionID string, limit int) ([]Row, error) {
	if collectionID == "" || limit <= 0 {
		return nil, nil
	}
	var out []Row
	err := s.query(ctx, func(r Row) { out = append(out, r) }, `SELECT `+sqliteColumns+` FROM cancellations
		WHERE tenant = ? AND collection_id = ? ORDER BY requested_at_ms, document_id LIMIT ?`, tenant, collectionID, limit)
	if err != nil {
		return nil, fmt.Errorf("list cancellations of collection %s: %w", collectionID, err)
	}
	return out, nil
}

// ListByUser implements Store through the index cancellations_by_user.
func (s *SQLiteStore) ListByUser(ctx context.Context, tenant, userUUID string, after *Position, limit int) ([]Row, error) {
	if userUUID == "" || limit <= 0 {
		return nil, nil
	}
	where, args := byUserFilter(tenant, userUUID, after, true)
	var out []Row
	err := s.query(ctx, func(r Row) { out = append(out, r) }, `SELECT `+sqliteColumns+` FROM cancellations
		WHERE `+where+` ORDER BY requested_at_ms, document_id LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("list cancellations of user %s: %w", userUUID, err)
	}
	return out, nil
}

// ListNeedingProvider implements Store through the index cancellations_by_status.
func (s *SQLiteStore) ListNeedingProvider(ctx context.Context, after *Position, limit int) ([]Row, error) {
	statuses := openStatuses()
	args := make([]any, 0, len(statuses)+4)
	for _, st := range statuses {
		args = append(args, st)
	}
	args = append(args, closed)
	where := `status IN (` + readdb.Placeholders(len(statuses)) + `) AND NOT (status = ? AND is_signed_and_sealed)`
	if cond, condArgs := positionAfter(after, true); cond != "" {
		where += ` AND ` + cond
		args = append(args, condArgs...)
	}
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	var out []Row
	err := s.query(ctx, func(r Row) { out = append(out, r) }, `SELECT `+sqliteColumns+` FROM cancellations
		WHERE `+where+` ORDER BY requested_at_ms, document_id LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("list cancellations needing the provider: %w", err)
	}
	return out, nil
}

// Document implements Store.
func (s *SQLiteStore) Document(ctx context.Context, tenant, documentID string) (Document, error) {
	var (
		found Document
		ok    bool
	)
	err := readdb.SQLiteStmtEach(ctx, s.getDocs, "cancellation documents", scanSQLiteDoc,
		func(d Document) { found, ok = d, true }, documentID, tenant)
	if err != nil {
		return Document{}, err
	}
	if !ok {
		return Document{}, fmt.Errorf("cancellation document %s: %w", documentID, readdb.ErrNotFound)
	}
	return found, nil
}

// ErasePersonal implements Store in one statement, which the index of ListByUser serves. The
// documents keep their revisions: the erasure is no event of the cancellations' streams.
func (s *SQLiteStore) ErasePersonal(ctx context.Context, tenant, userUUID string) error {
	if userUUID == "" {
		return nil
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE cancellation_documents SET personal_content = X''
		WHERE tenant = ? AND length(personal_content) > 0
		AND document_id IN (SELECT document_id FROM cancellations WHERE tenant = ? AND user_uuid = ?)`,
		tenant, tenant, userUUID); err != nil {
		return fmt.Errorf("erase the documents of user %s's cancellations: %w", userUUID, err)
	}
	return nil
}

// Reset implements Store.
func (s *SQLiteStore) Reset(ctx context.Context) error {
	return readdb.DeleteAll(ctx, s.db, "cancellations", "cancellation_documents", "cancellations")
}

func (s *SQLiteStore) query(ctx context.Context, each func(Row), q string, args ...any) error {
	return readdb.SQLiteEach(ctx, s.db, "cancellations", scanSQLiteRow, each, q, args...)
}

func scanSQLiteRow(rows readdb.Rows) (Row, error) {
	var (
		r                                                    Row
		requested, sent, deadline, signed, ended, updated, v int64
	)
	if err := rows.Scan(&r.DocumentID, &r.Tenant, &r.CollectionID, &r.UserUUID, &r.Company, &r.InsuranceID,
		&r.InsuranceType, &r.DeliveryMethod, &r.TemplateVersion, &r.Status, &r.IsSignedAndSealed, &requested, &sent,
		&deadline, &signed, &ended, &r.CancelReason, &r.ErrorCode, &updated, &v); err != nil {
		return Row{}, fmt.Errorf("scan cancellation: %w", err)
	}
	r.RequestedAt, r.SentAt, r.Deadline = readdb.FromMillis(requested), readdb.FromMillis(sent), readdb.FromMillis(deadline)
	r.SignedAt, r.EndedAt, r.UpdatedAt = readdb.FromMillis(signed), readdb.FromMillis(ended), readdb.FromMillis(updated)
	r.Revision = uint64(v)
	return r, nil
}

func scanSQLiteDoc(rows readdb.Rows) (Document, error) {
	var (
		d       Document
		content []byte
		v       int64
	)
	if err := rows.Scan(&d.DocumentID, &d.Tenant, &content, &v); err != nil {
		return Document{}, fmt.Errorf("scan cancellation document: %w", err)
	}
	var err error
	if d.Content, err = sealed.FromStored(content); err != nil {
		return Document{}, fmt.Errorf("cancellation document %s: %w", d.DocumentID, err)
	}
	d.Revision = uint64(v)
	return d, nil
}
