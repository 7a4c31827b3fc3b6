package readdb

import (
	"context"
	"database/sql"
	"fmt"
	"math/bits"
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
	return ExecEachAppend(ctx, tx, stmt, items, AppendValues(values))
}

// AppendValues adapts values, which returns an item's arguments in a slice of their own, to the
// appending form ExecEachAppend and ExecBulk take.
func AppendValues[T any](values func(T) ([]any, error)) func(args []any, item T) ([]any, error) {
	return func(args []any, it T) ([]any, error) {
		vals, err := values(it)
		if err != nil {
			return nil, err
		}
		return append(args, vals...), nil
	}
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
		var err error
		if args, err = rowArgs(args[:0], items, from, len(chunk), cols, appendValues); err != nil {
			return err
		}
		if _, err := prepared.ExecContext(ctx, args...); err != nil {
			return fmt.Errorf("rows %d..%d of %d: %w", from+1, from+len(chunk), len(items), err)
		}
	}
	return nil
}

// rowArgs appends to args the values of the n items from items[from], one statement's rows,
// checking that each item gave one value per column (an error names the item's place among all).
func rowArgs[T any](args []any, items []T, from, n, cols int, appendValues func(args []any, item T) ([]any, error)) ([]any, error) {
	for j, it := range items[from : from+n] {
		before := len(args)
		var err error
		if args, err = appendValues(args, it); err != nil {
			return nil, err
		}
		if got := len(args) - before; got != cols {
			return nil, fmt.Errorf("row %d of %d: %d values for %d columns", from+j+1, len(items), got, cols)
		}
	}
	return args, nil
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

// Bulk is an INSERT … VALUES (?, …) statement that ExecBulk runs over many rows, prepared on
// its database once for each number of rows it puts in one statement (the powers of two up to
// bulkCachedRows), rather than built and parsed again in every batch's transaction as ExecEach
// does: the three busiest projections parsed a statement per batch, ~3 % of the process's CPU
// under a POST load and 4 % while collections completed.
//
// Every size is prepared when the store opens, never inside a transaction: preparing on the
// *sql.DB takes a second connection, which on a rebuild's journal-less database waits out the
// busy timeout behind the transaction's own exclusive lock (found in review). A transaction
// then binds them to its connection (tx.StmtContext, which prepares a statement again once on
// each connection that runs it), so a batch of n rows runs as at most log2(n)+n/32 statements.
type Bulk struct {
	stmt  string
	cols  int
	sized []*sql.Stmt // index k: the statement of 1<<k rows
}

// bulkCachedRows is the most rows of one prepared statement ExecBulk runs, a power of two. Each
// size is a prepared program on each connection that ran it, and a program grows with its rows
// (a row of the status upsert is some hundred VDBE operations), so the sizes kept stop at what a
// live batch needs. A batch of bulkOwnFrom rows or more (the history's rows of a rebuild's page)
// runs as ExecEachAppend does instead, in statements of bulkRows prepared for it: one parse per
// thousands of rows costs nothing, and the rebuild benchmark ran ~5 % slower in 32-row
// statements than in 128-row ones when its pages were 10,000 events. With pages of 2,500 the
// models of one row a collection get ~550 rows a page and stay below it: a bound of 512 or 256
// measured the same (36-42k events/s each, `samla projections rebuild` of 167k events).
const (
	bulkCachedRows = 32
	bulkSizes      = 6 // 1, 2, 4, …, bulkCachedRows
	bulkOwnFrom    = 1024
)

// Bulk prepares stmt, an INSERT whose VALUES is one row of placeholders, in the sizes ExecBulk
// runs on db; Close closes them. Any other statement, or a failure to prepare, is a failure Err
// reports, and nil is returned.
func (s *Statements) Bulk(ctx context.Context, db *sql.DB, stmt string) *Bulk {
	if s.err != nil {
		return nil
	}
	head, row, tail, cols, ok := splitValues(stmt)
	if !ok {
		s.err = fmt.Errorf("bulk statement %q: not an INSERT with one row of placeholders", strings.Join(strings.Fields(stmt), " "))
		return nil
	}
	b := &Bulk{stmt: stmt, cols: cols}
	for n := 1; n <= min(bulkCachedRows, max(1, sqliteMaxVariables/cols)); n *= 2 {
		st := s.Prepare(ctx, db, head+repeatRow(row, n)+tail)
		if st == nil {
			return nil
		}
		b.sized = append(b.sized, st)
	}
	return b
}

// size is the index in b.sized of the statement the next rows of n take: the largest not above n.
func (b *Bulk) size(n int) int { return min(bits.Len(uint(n)), len(b.sized)) - 1 }

// ExecBulk is ExecEachAppend of b in tx: the items' rows in order, in statements of the sizes b
// has prepared.
func ExecBulk[T any](ctx context.Context, tx *sql.Tx, b *Bulk, items []T, appendValues func(args []any, item T) ([]any, error)) error {
	switch {
	case len(items) == 0:
		return nil
	case len(items) >= bulkOwnFrom:
		return ExecEachAppend(ctx, tx, b.stmt, items, appendValues)
	}
	var inTx [bulkSizes]*sql.Stmt // b's statements bound to tx, as they are needed
	args := make([]any, 0, (1<<b.size(len(items)))*b.cols)
	for from := 0; from < len(items); {
		k := b.size(len(items) - from)
		n := 1 << k
		if inTx[k] == nil {
			inTx[k] = tx.StmtContext(ctx, b.sized[k])
		}
		var err error
		if args, err = rowArgs(args[:0], items, from, n, b.cols, appendValues); err != nil {
			return err
		}
		if _, err := inTx[k].ExecContext(ctx, args...); err != nil {
			return fmt.Errorf("rows %d..%d of %d: %w", from+1, from+n, len(items), err)
		}
		from += n
	}
	return nil
}
