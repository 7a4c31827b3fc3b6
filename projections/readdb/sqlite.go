package readdb

import (
	"context"
	"database/sql"
	"fmt"
)

// InTx runs fn in one SQLite transaction and commits it when fn succeeds: a batch of writes is
// then one fsync-free WAL commit however many rows it holds.
func InTx(ctx context.Context, db *sql.DB, fn func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// ExecEach prepares stmt in tx and executes it once per item with the arguments values returns;
// an error from values is returned as it is, and no items prepare nothing. With an upsert whose DO UPDATE is guarded by
// WHERE excluded.revision > table.revision, this is the read models' upsert-if-newer.
func ExecEach[T any](ctx context.Context, tx *sql.Tx, stmt string, items []T, values func(T) ([]any, error)) error {
	if len(items) == 0 {
		return nil
	}
	prepared, err := tx.PrepareContext(ctx, stmt)
	if err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	defer func() { _ = prepared.Close() }()
	for i, it := range items {
		args, err := values(it)
		if err != nil {
			return err
		}
		if _, err := prepared.ExecContext(ctx, args...); err != nil {
			return fmt.Errorf("row %d of %d: %w", i+1, len(items), err)
		}
	}
	return nil
}

// EnsureSQLiteColumns adds the named columns, each with definition (a type, constraints and a
// default), to a table created before they existed (an embedded data
// directory survives upgrades). SQLite has no ADD COLUMN IF NOT EXISTS, so the table's columns
// are read first.
func EnsureSQLiteColumns(ctx context.Context, db *sql.DB, table string, names []string, definition string) error {
	rows, err := db.QueryContext(ctx, `SELECT name FROM pragma_table_info(?)`, table)
	if err != nil {
		return fmt.Errorf("read columns: %w", err)
	}
	have := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			_ = rows.Close()
			return fmt.Errorf("read columns: %w", err)
		}
		have[name] = true
	}
	err = rows.Err()
	_ = rows.Close()
	if err != nil {
		return fmt.Errorf("read columns: %w", err)
	}
	for _, col := range names {
		if have[col] {
			continue
		}
		if _, err := db.ExecContext(ctx, `ALTER TABLE `+table+` ADD COLUMN `+col+` `+definition); err != nil {
			return fmt.Errorf("add column %s: %w", col, err)
		}
	}
	return nil
}
