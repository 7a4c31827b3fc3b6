package readdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/go-json-experiment/json/jsontext"
)

// Rows is what a read needs of a result set; *sql.Rows and ClickHouse's driver.Rows both have it.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close() error
}

// Each calls each with every row scan reads from rows, then closes rows. Errors from scan are
// returned as they are.
func Each[R any](rows Rows, scan func(Rows) (R, error), each func(R)) (err error) {
	defer func() {
		if cerr := rows.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	for rows.Next() {
		r, err := scan(rows)
		if err != nil {
			return err
		}
		each(r)
	}
	return rows.Err()
}

// SQLiteEach runs q on db and calls each with every row scan reads; its errors, scan's
// included, are wrapped as "read <what>: …".
func SQLiteEach[R any](ctx context.Context, db *sql.DB, what string, scan func(Rows) (R, error), each func(R), q string, args ...any) error {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("read %s: %w", what, err)
	}
	return wrapRead(what, Each(rows, scan, each))
}

// SQLiteStmtEach is SQLiteEach with a statement prepared once (see Statements): the hot reads
// skip SQLite's parser and planner on every call.
func SQLiteStmtEach[R any](ctx context.Context, stmt *sql.Stmt, what string, scan func(Rows) (R, error), each func(R), args ...any) error {
	rows, err := stmt.QueryContext(ctx, args...)
	if err != nil {
		return fmt.Errorf("read %s: %w", what, err)
	}
	return wrapRead(what, Each(rows, scan, each))
}

// Statements are the statements a SQLite store prepares once, when it is built, and closes with
// itself. database/sql prepares a statement again on each pooled connection it runs on, once,
// and the pool keeps its connections (OpenSQLite), so every statement is parsed a few times in
// the life of the process rather than at every call.
type Statements struct {
	stmts []*sql.Stmt
	err   error
}

// Prepare prepares query on db. After a failure it prepares nothing more and returns nil; Err
// tells the first failure, so that a store prepares all its statements and checks once.
func (s *Statements) Prepare(ctx context.Context, db *sql.DB, query string) *sql.Stmt {
	if s.err != nil {
		return nil
	}
	stmt, err := db.PrepareContext(ctx, query)
	if err != nil {
		s.err = fmt.Errorf("prepare %q: %w", strings.Join(strings.Fields(query), " "), err)
		return nil
	}
	s.stmts = append(s.stmts, stmt)
	return stmt
}

// Err is the first failure of Prepare; the statements prepared before it are closed.
func (s *Statements) Err() error {
	if s.err != nil {
		_ = s.Close()
	}
	return s.err
}

// Close closes every statement. It is safe to call more than once.
func (s *Statements) Close() error {
	var errs []error
	for _, stmt := range s.stmts {
		if err := stmt.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	s.stmts = nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close prepared statements: %w", err)
	}
	return nil
}

// ClickHouseEach is SQLiteEach on a ClickHouse connection.
func ClickHouseEach[R any](ctx context.Context, conn driver.Conn, what string, scan func(Rows) (R, error), each func(R), q string, args ...any) error {
	rows, err := conn.Query(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("read %s: %w", what, err)
	}
	return wrapRead(what, Each(rows, scan, each))
}

func wrapRead(what string, err error) error {
	if err != nil {
		return fmt.Errorf("read %s: %w", what, err)
	}
	return nil
}

// SQLiteInKeys ends a query that SQLiteByKeys runs: "WHERE key " + SQLiteInKeys. The keys are
// bound as one JSON array, so that the query's text does not depend on how many there are and
// the store prepares it once: with one placeholder a key, each batch size was a statement of its
// own, parsed and planned at every call (3 % of the CPU of a collection under load). SQLite
// still looks each key up in the key's index (EXPLAIN QUERY PLAN: SEARCH … USING PRIMARY KEY,
// LIST SUBQUERY over json_each).
const SQLiteInKeys = `IN (SELECT value FROM json_each(?))`

// SQLiteMaxIn bounds the keys bound in one array (about 40 bytes each).
const SQLiteMaxIn = 10_000

// SQLiteByKeys reads the rows of keys with stmt, a query prepared from "… WHERE key " +
// SQLiteInKeys, in chunks of SQLiteMaxIn keys.
func SQLiteByKeys[R any](ctx context.Context, stmt *sql.Stmt, what string, scan func(Rows) (R, error), each func(R), keys []string) error {
	for _, chunk := range Chunks(keys, SQLiteMaxIn) {
		if err := SQLiteStmtEach(ctx, stmt, what, scan, each, jsonArray(chunk)); err != nil {
			return err
		}
	}
	return nil
}

// jsonArray is keys as a JSON array of strings, the argument of SQLiteInKeys.
func jsonArray(keys []string) string {
	n := 2
	for _, k := range keys {
		n += len(k) + 3
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		// AppendQuote fails only on invalid UTF-8, which it replaces with U+FFFD (json_each
		// would refuse the array); the keys are ids, which are never invalid UTF-8.
		b, _ = jsontext.AppendQuote(b, k)
	}
	return string(append(b, ']'))
}

// SQLiteMapByKeys is SQLiteByKeys into a map of the rows found, by their key: a store's GetMany.
func SQLiteMapByKeys[R any](ctx context.Context, stmt *sql.Stmt, what string, scan func(Rows) (R, error), key func(R) string, keys []string) (map[string]R, error) {
	out := make(map[string]R, len(keys))
	if err := SQLiteByKeys(ctx, stmt, what, scan, func(r R) { out[key(r)] = r }, keys); err != nil {
		return nil, err
	}
	return out, nil
}

// ClickHouseMapByKeys is SQLiteMapByKeys on ClickHouse.
func ClickHouseMapByKeys[R any](ctx context.Context, conn driver.Conn, what string, scan func(Rows) (R, error), key func(R) string, q string, keys []string) (map[string]R, error) {
	out := make(map[string]R, len(keys))
	if err := ClickHouseByKeys(ctx, conn, what, scan, func(r R) { out[key(r)] = r }, q, keys); err != nil {
		return nil, err
	}
	return out, nil
}

// ClickHouseByKeys is SQLiteByKeys on ClickHouse, in chunks of ClickHouseMaxIn bound as one
// InSet: q ends with "… IN".
func ClickHouseByKeys[R any](ctx context.Context, conn driver.Conn, what string, scan func(Rows) (R, error), each func(R), q string, keys []string) error {
	for _, chunk := range Chunks(keys, ClickHouseMaxIn) {
		if err := ClickHouseEach(ctx, conn, what, scan, each, q+` ?`, InSet(chunk)); err != nil {
			return err
		}
	}
	return nil
}

// LatestPerKey keeps, per key, the first item with the highest revision, in the order of first
// appearance: what sequential conditional upserts of the batch would leave. Adapters that
// cannot express "ignore older or equal" inside one statement apply a batch through it.
func LatestPerKey[T any, K comparable](items []T, key func(T) K, revision func(T) uint64) []T {
	index := make(map[K]int, len(items))
	out := make([]T, 0, len(items))
	for _, it := range items {
		k := key(it)
		i, seen := index[k]
		switch {
		case !seen:
			index[k] = len(out)
			out = append(out, it)
		case revision(it) > revision(out[i]):
			out[i] = it
		}
	}
	return out
}
