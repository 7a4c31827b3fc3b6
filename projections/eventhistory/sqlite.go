package eventhistory

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/samla/samla/projections/readdb"
)

// sqliteSchema is the history's SQLite DDL. It is an ordinary rowid table (payloads can be
// large, which WITHOUT ROWID handles badly) whose primary key (stream, revision) makes inserts
// idempotent and serves List.
const sqliteSchema = `
CREATE TABLE IF NOT EXISTS event_history (
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
	payload        TEXT    NOT NULL,
	PRIMARY KEY (stream, revision)
);`

const sqliteColumns = `stream, revision, tenant, position, event_id, type, schema_version,
	occurred_at_ms, correlation_id, causation_id, actor, payload`

// SQLiteStore is the Store on an embedded SQLite database.
type SQLiteStore struct {
	db *sql.DB
}

var _ Store = (*SQLiteStore)(nil)

// NewSQLite creates the history table in db when missing and returns the store. The caller
// keeps ownership of db.
func NewSQLite(ctx context.Context, db *sql.DB) (*SQLiteStore, error) {
	if _, err := db.ExecContext(ctx, sqliteSchema); err != nil {
		return nil, fmt.Errorf("migrate sqlite event_history: %w", err)
	}
	return &SQLiteStore{db: db}, nil
}

// Insert implements Store in one transaction; a stored (stream, revision) is left as it is.
func (s *SQLiteStore) Insert(ctx context.Context, rows []Row) error {
	if len(rows) == 0 {
		return nil
	}
	err := readdb.InTx(ctx, s.db, func(tx *sql.Tx) error {
		return readdb.ExecEach(ctx, tx, `INSERT INTO event_history (`+sqliteColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (stream, revision) DO NOTHING`, rows, func(r Row) ([]any, error) {
			return []any{r.Stream, int64(r.Revision), r.Tenant, int64(r.Position),
				r.EventID, r.Type, r.SchemaVersion, readdb.Millis(r.OccurredAt), r.CorrelationID,
				r.CausationID, r.Actor, string(r.Payload)}, nil
		})
	})
	if err != nil {
		return fmt.Errorf("insert event history: %w", err)
	}
	return nil
}

// List implements Store.
func (s *SQLiteStore) List(ctx context.Context, tenant, stream string, afterRevision *uint64, limit int) ([]Row, error) {
	q := `SELECT ` + sqliteColumns + ` FROM event_history WHERE stream = ? AND tenant = ?`
	args := []any{stream, tenant}
	if afterRevision != nil {
		q += ` AND revision > ?`
		args = append(args, int64(*afterRevision))
	}
	q += ` ORDER BY revision`
	if limit > 0 {
		q += ` LIMIT ?`
		args = append(args, limit)
	}
	var out []Row
	err := readdb.SQLiteEach(ctx, s.db, "event history", func(rows readdb.Rows) (Row, error) {
		var (
			r                  Row
			revision, position int64
			occurredMs         int64
			payload            string
		)
		if err := rows.Scan(&r.Stream, &revision, &r.Tenant, &position, &r.EventID, &r.Type,
			&r.SchemaVersion, &occurredMs, &r.CorrelationID, &r.CausationID, &r.Actor, &payload); err != nil {
			return Row{}, fmt.Errorf("scan: %w", err)
		}
		r.Revision, r.Position = uint64(revision), uint64(position)
		r.OccurredAt = readdb.FromMillis(occurredMs)
		r.Payload = []byte(payload)
		return r, nil
	}, func(r Row) { out = append(out, r) }, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list event history of %s: %w", stream, err)
	}
	return out, nil
}

// Reset implements Store.
func (s *SQLiteStore) Reset(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM event_history`); err != nil {
		return fmt.Errorf("reset event_history: %w", err)
	}
	return nil
}
