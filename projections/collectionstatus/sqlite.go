package collectionstatus

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/samla/samla/projections/readdb"
)

// sqliteSchema is the read model's SQLite DDL. Times are Unix milliseconds (readdb.Millis);
// extra_information is a JSON object or NULL when the last status change attached none. The
// status details (required_input_types … personal) are storedDetails: JSON or plain text, ”
// for none; personal is sealed.
const sqliteSchema = `
CREATE TABLE IF NOT EXISTS collection_status (
	collection_id     TEXT    NOT NULL PRIMARY KEY,
	tenant            TEXT    NOT NULL,
	company           TEXT    NOT NULL,
	product           TEXT    NOT NULL,
	login_method      TEXT    NOT NULL,
	api_version       TEXT    NOT NULL,
	user_uuid         TEXT    NOT NULL,
	status            TEXT    NOT NULL,
	extra_information TEXT,
	required_input_types TEXT NOT NULL DEFAULT '',
	instructions      TEXT    NOT NULL DEFAULT '',
	message           TEXT    NOT NULL DEFAULT '',
	eid_order         TEXT    NOT NULL DEFAULT '',
	qr_start_secret   TEXT    NOT NULL DEFAULT '',
	deadline          TEXT    NOT NULL DEFAULT '',
	personal          TEXT    NOT NULL DEFAULT '',
	created_at_ms     INTEGER NOT NULL,
	updated_at_ms     INTEGER NOT NULL,
	revision          INTEGER NOT NULL
) WITHOUT ROWID;
-- ListNonFinal reads the few running collections among the many finished ones; the index holds
-- the primary key after its columns, so a page's position is a range in it.
CREATE INDEX IF NOT EXISTS collection_status_by_status ON collection_status (status, created_at_ms);
-- ListByUser reads one user's collections in the list's order (byuser.go).
` + sqliteByUserIndex + `;
`

const sqliteColumns = `collection_id, tenant, company, product, login_method, api_version, user_uuid,
	status, extra_information, ` + detailColumns + `, created_at_ms, updated_at_ms, revision`

// sqliteUpsert only overwrites a row with a newer revision, so that one statement makes the
// write idempotent and order-safe (at-least-once delivery, rebuilds racing late deliveries).
const sqliteUpsert = `INSERT INTO collection_status (` + sqliteColumns + `)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (collection_id) DO UPDATE SET
	tenant = excluded.tenant, company = excluded.company, product = excluded.product,
	login_method = excluded.login_method, api_version = excluded.api_version,
	user_uuid = excluded.user_uuid, status = excluded.status,
	extra_information = excluded.extra_information,
	required_input_types = excluded.required_input_types, instructions = excluded.instructions,
	message = excluded.message, eid_order = excluded.eid_order,
	qr_start_secret = excluded.qr_start_secret, deadline = excluded.deadline,
	personal = excluded.personal,
	created_at_ms = excluded.created_at_ms,
	updated_at_ms = excluded.updated_at_ms, revision = excluded.revision
WHERE excluded.revision > collection_status.revision`

// sqliteGet is the status poll's read, prepared once.
const sqliteGet = `SELECT ` + sqliteColumns + ` FROM collection_status WHERE collection_id = ? AND tenant = ?`

// SQLiteStore is the Store on an embedded SQLite database.
type SQLiteStore struct {
	db       *sql.DB
	written  *readdb.Written // set by Fresh
	prepared readdb.Statements
	get      *sql.Stmt
	getMany  *sql.Stmt
	upsert   *readdb.Bulk
}

var _ Store = (*SQLiteStore)(nil)

// NewSQLite creates the read model's table in db when missing, prepares its hot read and returns
// the store. The caller keeps ownership of db and closes the store before it.
func NewSQLite(ctx context.Context, db *sql.DB) (*SQLiteStore, error) {
	if _, err := db.ExecContext(ctx, sqliteSchema); err != nil {
		return nil, fmt.Errorf("migrate sqlite collection_status: %w", err)
	}
	// A table created before the status-detail columns existed (an embedded data directory
	// survives upgrades) gets them; rows written before keep '' details, which is what they
	// had: none.
	if err := readdb.EnsureSQLiteColumns(ctx, db, "collection_status", detailColumnNames, "TEXT NOT NULL DEFAULT ''"); err != nil {
		return nil, fmt.Errorf("migrate sqlite collection_status: %w", err)
	}
	s := &SQLiteStore{db: db}
	s.get = s.prepared.Prepare(ctx, db, sqliteGet)
	s.getMany = s.prepared.Prepare(ctx, db, `SELECT `+sqliteColumns+` FROM collection_status WHERE collection_id `+readdb.SQLiteInKeys)
	s.upsert = s.prepared.Bulk(ctx, db, sqliteUpsert)
	if err := s.prepared.Err(); err != nil {
		return nil, fmt.Errorf("open sqlite collection_status: %w", err)
	}
	return s, nil
}

// Close releases the prepared statements; the database stays open.
func (s *SQLiteStore) Close() error { return s.prepared.Close() }

// Fresh tells the store that its table was created empty for it and that nothing else writes
// it (a rebuild's): it then asks the table only for rows it wrote (readdb.Written).
func (s *SQLiteStore) Fresh() { s.written = readdb.NewWritten() }

// GetMany implements Store.
func (s *SQLiteStore) GetMany(ctx context.Context, ids []string) (map[string]Row, error) {
	out := make(map[string]Row, len(ids))
	err := readdb.SQLiteByKeys(ctx, s.getMany, "collection statuses", scanSQLiteRow, func(r Row) { out[r.CollectionID] = r },
		s.written.Filter(ids))
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Upsert implements Store. The batch is one transaction: one fsync-free WAL commit however
// many rows it holds.
func (s *SQLiteStore) Upsert(ctx context.Context, rows []Row) error {
	if len(rows) == 0 {
		return nil
	}
	err := readdb.InTx(ctx, s.db, func(tx *sql.Tx) error {
		return readdb.ExecBulk(ctx, tx, s.upsert, rows, func(args []any, r Row) ([]any, error) {
			extra, err := encodeExtra(r.ExtraInformation)
			if err != nil {
				return nil, fmt.Errorf("collection status %s: %w", r.CollectionID, err)
			}
			var extraArg any // NULL for nil extra information
			if r.ExtraInformation != nil {
				extraArg = extra
			}
			details, err := encodeDetails(r)
			if err != nil {
				return nil, fmt.Errorf("collection status %s: %w", r.CollectionID, err)
			}
			args = append(args, r.CollectionID, r.Tenant, r.Company, r.Product,
				r.LoginMethod, r.APIVersion, r.UserUUID, r.Status, extraArg)
			args = details.appendArgs(args)
			return append(args, readdb.Millis(r.CreatedAt), readdb.Millis(r.UpdatedAt), int64(r.Revision)), nil
		})
	})
	if err != nil {
		return fmt.Errorf("upsert collection statuses: %w", err)
	}
	for _, r := range rows {
		s.written.Add(r.CollectionID)
	}
	return nil
}

// Get implements Store.
func (s *SQLiteStore) Get(ctx context.Context, tenant, collectionID string) (Row, error) {
	var (
		found Row
		ok    bool
	)
	err := readdb.SQLiteStmtEach(ctx, s.get, "collection statuses", scanSQLiteRow, func(r Row) { found, ok = r, true },
		collectionID, tenant)
	if err != nil {
		return Row{}, err
	}
	if !ok {
		return Row{}, fmt.Errorf("collection status %s: %w", collectionID, readdb.ErrNotFound)
	}
	return found, nil
}

// ErasePersonal implements Store in one statement, which the index of ListByUser serves. The
// columns where rows written before sealing kept the personal part in plain text are blanked
// too. The row keeps its revision: the erasure is no event of the collection's stream.
func (s *SQLiteStore) ErasePersonal(ctx context.Context, tenant, userUUID string) error {
	if userUUID == "" {
		return nil
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE collection_status SET personal = '', instructions = '', qr_start_secret = ''
		WHERE tenant = ? AND user_uuid = ? AND (personal != '' OR instructions != '' OR qr_start_secret != '')`,
		tenant, userUUID); err != nil {
		return fmt.Errorf("erase the personal parts of user %s: %w", userUUID, err)
	}
	return nil
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
	args = append(args, limit)
	var out []Row
	err := s.query(ctx, func(r Row) { out = append(out, r) }, `SELECT `+sqliteColumns+` FROM collection_status
		WHERE `+where+` ORDER BY created_at_ms, collection_id LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("list non-final collections: %w", err)
	}
	return out, nil
}

// Reset implements Store.
func (s *SQLiteStore) Reset(ctx context.Context) error {
	s.written.Reset()
	if _, err := s.db.ExecContext(ctx, `DELETE FROM collection_status`); err != nil {
		return fmt.Errorf("reset collection_status: %w", err)
	}
	return nil
}

func (s *SQLiteStore) query(ctx context.Context, each func(Row), q string, args ...any) error {
	return readdb.SQLiteEach(ctx, s.db, "collection statuses", scanSQLiteRow, each, q, args...)
}

func scanSQLiteRow(rows readdb.Rows) (Row, error) {
	var (
		r                  Row
		extra              sql.NullString
		details            storedDetails
		createdMs, updated int64
		revision           int64
	)
	dests := append([]any{&r.CollectionID, &r.Tenant, &r.Company, &r.Product, &r.LoginMethod,
		&r.APIVersion, &r.UserUUID, &r.Status, &extra}, details.dests()...)
	dests = append(dests, &createdMs, &updated, &revision)
	if err := rows.Scan(dests...); err != nil {
		return Row{}, fmt.Errorf("scan collection status: %w", err)
	}
	if err := details.decodeInto(&r); err != nil {
		return Row{}, fmt.Errorf("collection status %s: %w", r.CollectionID, err)
	}
	if extra.Valid {
		var err error
		if r.ExtraInformation, err = decodeExtra(extra.String); err != nil {
			return Row{}, fmt.Errorf("collection status %s: %w", r.CollectionID, err)
		}
	}
	r.CreatedAt, r.UpdatedAt = readdb.FromMillis(createdMs), readdb.FromMillis(updated)
	r.Revision = uint64(revision)
	return r, nil
}
