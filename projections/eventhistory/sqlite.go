package eventhistory

import (
	"context"
	"database/sql"
	"fmt"
	"math"

	"github.com/samla/samla/projections/readdb"
)

// sqliteSchema is the history's SQLite DDL. It is an ordinary rowid table whose primary key
// (stream, revision) makes inserts idempotent and serves List. summary is the audit summary's
// JSON, "" for none.
const sqliteSchema = `
CREATE TABLE IF NOT EXISTS event_history_v2 (
	stream         TEXT    NOT NULL,
	revision       INTEGER NOT NULL,
	tenant         TEXT    NOT NULL,
	position       INTEGER NOT NULL,
	event_id       TEXT    NOT NULL,
	type           TEXT    NOT NULL,
	schema_version INTEGER NOT NULL,
	occurred_at_ms INTEGER NOT NULL,
	correlation_id TEXT    NOT NULL,
	causation_id   TEXT    NOT NULL,
	actor          TEXT    NOT NULL,
	summary        TEXT    NOT NULL,
	personal_data  TEXT    NOT NULL DEFAULT '',
	data_subject   TEXT    NOT NULL DEFAULT '',
	PRIMARY KEY (stream, revision)
);`

const sqliteColumns = `stream, revision, tenant, position, event_id, type, schema_version,
	occurred_at_ms, correlation_id, causation_id, actor, summary, personal_data, data_subject`

// sqliteAddedColumns are the columns a table created before them gets on opening: its rows read
// the empty string (no personal data known) until a rebuild projects them again.
var sqliteAddedColumns = []string{"personal_data", "data_subject"}

// sqliteList is List's one statement, prepared once: no afterRevision is -1 (revisions start at
// 0) and no limit is LIMIT -1, which SQLite reads as none.
const sqliteList = `SELECT ` + sqliteColumns + ` FROM event_history_v2
	WHERE stream = ? AND tenant = ? AND revision > ? ORDER BY revision LIMIT ?`

// SQLiteStore is the Store on an embedded SQLite database.
type SQLiteStore struct {
	db       *sql.DB
	prepared readdb.Statements
	list     *sql.Stmt
	insert   *readdb.Bulk
}

var _ Store = (*SQLiteStore)(nil)

// NewSQLite creates the history table in db when missing, prepares its read and returns the
// store. (The first history, which kept payloads, lived in a file of its own, which
// projections.OpenSQLiteReadModels removes.) The caller keeps ownership of db and closes
// the store before it.
func NewSQLite(ctx context.Context, db *sql.DB) (*SQLiteStore, error) {
	if _, err := db.ExecContext(ctx, sqliteSchema); err != nil {
		return nil, fmt.Errorf("migrate sqlite event_history_v2: %w", err)
	}
	if err := readdb.EnsureSQLiteColumns(ctx, db, "event_history_v2", sqliteAddedColumns, "TEXT NOT NULL DEFAULT ''"); err != nil {
		return nil, fmt.Errorf("migrate sqlite event_history_v2: %w", err)
	}
	s := &SQLiteStore{db: db}
	s.list = s.prepared.Prepare(ctx, db, sqliteList)
	s.insert = s.prepared.Bulk(ctx, db, sqliteInsert)
	if err := s.prepared.Err(); err != nil {
		return nil, fmt.Errorf("open sqlite event_history_v2: %w", err)
	}
	return s, nil
}

// sqliteInsert writes a history row; a stored (stream, revision) is left as it is.
const sqliteInsert = `INSERT INTO event_history_v2 (` + sqliteColumns + `)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (stream, revision) DO NOTHING`

// Close releases the prepared statements; the database stays open.
func (s *SQLiteStore) Close() error { return s.prepared.Close() }

// Insert implements Store in one transaction; a stored (stream, revision) is left as it is.
func (s *SQLiteStore) Insert(ctx context.Context, rows []Row) error {
	if len(rows) == 0 {
		return nil
	}
	err := readdb.InTx(ctx, s.db, func(tx *sql.Tx) error {
		return readdb.ExecBulk(ctx, tx, s.insert, rows, func(args []any, r Row) ([]any, error) {
			return append(args, r.Stream, int64(r.Revision), r.Tenant, int64(r.Position),
				r.EventID, r.Type, r.SchemaVersion, readdb.Millis(r.OccurredAt), r.CorrelationID,
				r.CausationID, r.Actor, string(r.Summary), r.PersonalData, r.DataSubject), nil
		})
	})
	if err != nil {
		return fmt.Errorf("insert event history: %w", err)
	}
	return nil
}

// List implements Store.
func (s *SQLiteStore) List(ctx context.Context, tenant, stream string, afterRevision *uint64, limit int) ([]Row, error) {
	after := int64(-1)
	if afterRevision != nil {
		if *afterRevision >= math.MaxInt64 {
			return nil, nil // SQLite's integers end there: nothing can come after it
		}
		after = int64(*afterRevision)
	}
	if limit <= 0 {
		limit = -1
	}
	var out []Row
	err := readdb.SQLiteStmtEach(ctx, s.list, "event history", func(rows readdb.Rows) (Row, error) {
		var (
			r                  Row
			revision, position int64
			occurredMs         int64
			summary            string
		)
		if err := rows.Scan(&r.Stream, &revision, &r.Tenant, &position, &r.EventID, &r.Type,
			&r.SchemaVersion, &occurredMs, &r.CorrelationID, &r.CausationID, &r.Actor, &summary,
			&r.PersonalData, &r.DataSubject); err != nil {
			return Row{}, fmt.Errorf("scan: %w", err)
		}
		r.Revision, r.Position = uint64(revision), uint64(position)
		r.OccurredAt = readdb.FromMillis(occurredMs)
		if summary != "" {
			r.Summary = []byte(summary)
		}
		return r, nil
	}, func(r Row) { out = append(out, r) }, stream, tenant, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list event history of %s: %w", stream, err)
	}
	return out, nil
}

// Reset implements Store.
func (s *SQLiteStore) Reset(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM event_history_v2`); err != nil {
		return fmt.Errorf("reset event_history_v2: %w", err)
	}
	return nil
}
