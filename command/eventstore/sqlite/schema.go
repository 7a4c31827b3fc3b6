package sqlite

import (
	"context"
	"database/sql"
	"fmt"
)

// migrations are applied in order; PRAGMA user_version records how many a file has had, so a
// migration once released must never change, only be followed by new ones.
var migrations = []string{
	// Metadata lives in columns rather than one blob so that operators and analysts can query
	// the log with plain SQL. position is the rowid, so it costs no extra index and SQLite
	// assigns max+1 under the write lock, which makes position order equal commit order.
	// UNIQUE(stream, revision) is both the optimistic-concurrency backstop and the index that
	// finds a stream's last revision; UNIQUE(event_id) is the index idempotent retries look up.
	`CREATE TABLE events (
		position       INTEGER PRIMARY KEY,
		stream         TEXT    NOT NULL,
		revision       INTEGER NOT NULL CHECK (revision >= 0),
		event_id       TEXT    NOT NULL UNIQUE,
		type           TEXT    NOT NULL,
		schema_version INTEGER NOT NULL,
		tenant         TEXT    NOT NULL,
		occurred_at    INTEGER NOT NULL,
		correlation_id TEXT    NOT NULL,
		causation_id   TEXT    NOT NULL,
		actor          TEXT    NOT NULL,
		payload        TEXT    NOT NULL CHECK (json_valid(payload)),
		UNIQUE (stream, revision)
	) STRICT`,
}

// migrate brings the schema up to date in one transaction, so a crash never leaves a file
// half-migrated.
func migrate(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin migration: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit

	var version int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if version > len(migrations) {
		return fmt.Errorf("schema version %d is newer than this build knows (%d): refusing to write to it", version, len(migrations))
	}
	if version == len(migrations) {
		return nil
	}
	for i := version; i < len(migrations); i++ {
		if _, err := tx.ExecContext(ctx, migrations[i]); err != nil {
			return fmt.Errorf("apply migration %d: %w", i+1, err)
		}
	}
	// PRAGMA takes no bound parameters; the value is our own integer.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", len(migrations))); err != nil {
		return fmt.Errorf("record schema version %d: %w", len(migrations), err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit migration: %w", err)
	}
	return nil
}
