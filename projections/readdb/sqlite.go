package readdb

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
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

// Upsert runs ExecEach of stmt over items in one transaction (InTx), and nothing for no items;
// an error names what was upserted.
func Upsert[T any](ctx context.Context, db *sql.DB, what, stmt string, items []T, values func(T) ([]any, error)) error {
	if len(items) == 0 {
		return nil
	}
	if err := InTx(ctx, db, func(tx *sql.Tx) error { return ExecEach(ctx, tx, stmt, items, values) }); err != nil {
		return fmt.Errorf("upsert %s: %w", what, err)
	}
	return nil
}

// DeleteAll empties tables, in order, in one transaction: a SQLite store's Reset. An error
// names what was reset and the table.
func DeleteAll(ctx context.Context, db *sql.DB, what string, tables ...string) error {
	err := InTx(ctx, db, func(tx *sql.Tx) error {
		for _, table := range tables {
			if _, err := tx.ExecContext(ctx, `DELETE FROM `+table); err != nil {
				return fmt.Errorf("%s: %w", table, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("reset %s: %w", what, err)
	}
	return nil
}

// ExecEach executes stmt once per item with the arguments values returns, in tx; an error from
// values is returned as it is, and no items prepare nothing. With an upsert whose DO UPDATE is
// guarded by WHERE excluded.revision > table.revision, this is the read models' upsert-if-newer.
//
// An INSERT whose VALUES is one row of placeholders runs as multi-row INSERTs of up to
// bulkRows items each: SQLite applies the rows of one statement in order, each against the
// rows before it, exactly as one statement per item would, and a rebuild's profile was the
// per-statement overhead of database/sql and the driver (binding, stepping and resetting a
// statement per row). Any other statement runs once per item.
func ExecEach[T any](ctx context.Context, tx *sql.Tx, stmt string, items []T, values func(T) ([]any, error)) error {
	return ExecEachAppend(ctx, tx, stmt, items, func(args []any, it T) ([]any, error) {
		vals, err := values(it)
		if err != nil {
			return nil, err
		}
		return append(args, vals...), nil
	})
}

// ExecEachAppend is ExecEach with the arguments of each item appended to args by appendValues
// (its error returned as it is), rather than returned in a slice of their own: the statement's
// arguments are then built without a slice per row (a rebuild writes a row per event to the
// history alone).
func ExecEachAppend[T any](ctx context.Context, tx *sql.Tx, stmt string, items []T, appendValues func(args []any, item T) ([]any, error)) error {
	if len(items) == 0 {
		return nil
	}
	head, row, tail, cols, ok := splitValues(stmt)
	if !ok || len(items) == 1 {
		return execOneByOne(ctx, tx, stmt, items, appendValues)
	}
	per := max(1, min(bulkRows, sqliteMaxVariables/cols))
	var (
		prepared *sql.Stmt
		size     int
	)
	defer func() {
		if prepared != nil {
			_ = prepared.Close()
		}
	}()
	args := make([]any, 0, per*cols)
	for from := 0; from < len(items); from += per {
		chunk := items[from:min(from+per, len(items))]
		if prepared == nil || size != len(chunk) {
			if prepared != nil {
				_ = prepared.Close()
			}
			var err error
			if prepared, err = tx.PrepareContext(ctx, head+repeatRow(row, len(chunk))+tail); err != nil {
				return fmt.Errorf("prepare: %w", err)
			}
			size = len(chunk)
		}
		args = args[:0]
		for j, it := range chunk {
			before := len(args)
			var err error
			if args, err = appendValues(args, it); err != nil {
				return err
			}
			if n := len(args) - before; n != cols {
				return fmt.Errorf("row %d of %d: %d values for %d columns", from+j+1, len(items), n, cols)
			}
		}
		if _, err := prepared.ExecContext(ctx, args...); err != nil {
			return fmt.Errorf("rows %d..%d of %d: %w", from+1, from+len(chunk), len(items), err)
		}
	}
	return nil
}

// bulkRows is the most rows ExecEach puts in one INSERT; sqliteMaxVariables is SQLite's bound on
// a statement's parameters (SQLITE_MAX_VARIABLE_NUMBER since 3.32).
const (
	bulkRows           = 128
	sqliteMaxVariables = 32766
)

// splitValues splits "INSERT … VALUES (?, …, ?) …" into what precedes the row, the row and what
// follows it, with the row's placeholders; ok is false for any other statement.
func splitValues(stmt string) (head, row, tail string, cols int, ok bool) {
	upper := strings.ToUpper(stmt)
	if !strings.HasPrefix(strings.TrimSpace(upper), "INSERT") {
		return "", "", "", 0, false
	}
	at := strings.Index(upper, "VALUES")
	if at < 0 || strings.Contains(upper[at+6:], "VALUES") {
		return "", "", "", 0, false
	}
	open := strings.IndexByte(stmt[at:], '(')
	if open < 0 {
		return "", "", "", 0, false
	}
	open += at
	if strings.TrimSpace(stmt[at+6:open]) != "" {
		return "", "", "", 0, false
	}
	closing := strings.IndexByte(stmt[open:], ')')
	if closing < 0 {
		return "", "", "", 0, false
	}
	closing += open
	for _, r := range stmt[open+1 : closing] {
		switch r {
		case '?':
			cols++
		case ',', ' ', '\t', '\n', '\r':
		default:
			return "", "", "", 0, false // an expression or literal in the row: not ours to repeat
		}
	}
	if cols == 0 {
		return "", "", "", 0, false
	}
	return stmt[:open], stmt[open : closing+1], stmt[closing+1:], cols, true
}

func repeatRow(row string, n int) string {
	var b strings.Builder
	b.Grow(n * (len(row) + 2))
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
	}
	return b.String()
}

// execOneByOne prepares stmt in tx and executes it once per item.
func execOneByOne[T any](ctx context.Context, tx *sql.Tx, stmt string, items []T, appendValues func([]any, T) ([]any, error)) error {
	prepared, err := tx.PrepareContext(ctx, stmt)
	if err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	defer func() { _ = prepared.Close() }()
	var args []any
	for i, it := range items {
		// database/sql is done with an execution's arguments when it returns.
		if args, err = appendValues(args[:0], it); err != nil {
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
