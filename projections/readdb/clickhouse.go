package readdb

import (
	"context"
	"fmt"
	"sync"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// ClickHouseMaxIn bounds the values of one ClickHouse IN list so that the bound query stays
// small.
const ClickHouseMaxIn = 1000

// InSet binds a list of strings as a parenthesised IN set; a plain slice would bind as an
// array literal, which IN does not take on every server version.
func InSet(values []string) clickhouse.GroupSet {
	set := clickhouse.GroupSet{Value: make([]any, len(values))}
	for i, v := range values {
		set.Value[i] = v
	}
	return set
}

// StoredRevisions returns the highest revision stored in a ReplacingMergeTree(revision) table
// per existing value of keyColumn among keys, read in chunks of ClickHouseMaxIn. max() over the
// raw row versions needs no FINAL: the highest revision is the one FINAL would keep. table and
// keyColumn are identifiers from the caller's code, never input.
func StoredRevisions(ctx context.Context, conn driver.Conn, table, keyColumn string, keys []string) (map[string]uint64, error) {
	return storedRevisions(ctx, conn, table, `SELECT `+keyColumn+`, max(revision) FROM `+table+`
		WHERE `+keyColumn+` IN ? GROUP BY `+keyColumn, keys,
		func(rows driver.Rows) (string, uint64, error) {
			var (
				key string
				rev uint64
			)
			err := rows.Scan(&key, &rev)
			return key, rev, err
		})
}

// StoredSubRevisions is StoredRevisions for a table keyed by (keyColumn, subColumn): it returns
// the highest stored revision per existing [key, sub] pair of the given keys.
func StoredSubRevisions(ctx context.Context, conn driver.Conn, table, keyColumn, subColumn string, keys []string) (map[[2]string]uint64, error) {
	return storedRevisions(ctx, conn, table, `SELECT `+keyColumn+`, `+subColumn+`, max(revision)
		FROM `+table+` WHERE `+keyColumn+` IN ? GROUP BY `+keyColumn+`, `+subColumn, keys,
		func(rows driver.Rows) ([2]string, uint64, error) {
			var (
				key [2]string
				rev uint64
			)
			err := rows.Scan(&key[0], &key[1], &rev)
			return key, rev, err
		})
}

func storedRevisions[K comparable](ctx context.Context, conn driver.Conn, table, query string, keys []string,
	scan func(driver.Rows) (K, uint64, error)) (map[K]uint64, error) {
	out := make(map[K]uint64, len(keys))
	for _, chunk := range Chunks(keys, ClickHouseMaxIn) {
		rows, err := conn.Query(ctx, query, InSet(chunk))
		if err != nil {
			return nil, fmt.Errorf("read %s revisions: %w", table, err)
		}
		for rows.Next() {
			key, rev, err := scan(rows)
			if err != nil {
				_ = rows.Close()
				return nil, fmt.Errorf("scan %s revision: %w", table, err)
			}
			out[key] = rev
		}
		err = rows.Err()
		_ = rows.Close()
		if err != nil {
			return nil, fmt.Errorf("read %s revisions: %w", table, err)
		}
	}
	return out, nil
}

// KeepNewer drops the items whose revision is at or below the one stored for their key, keeping
// the order of the rest: the "ignore older or equal" rule that SQLite's upserts apply in their
// WHERE clause, applied before an INSERT into a ReplacingMergeTree, which among equal revisions
// keeps whichever version it merges last and shows an older one inserted late until a merge.
func KeepNewer[T any, K comparable](items []T, stored map[K]uint64, key func(T) K, revision func(T) uint64) []T {
	out := make([]T, 0, len(items))
	for _, it := range items {
		if rev, ok := stored[key(it)]; ok && revision(it) <= rev {
			continue
		}
		out = append(out, it)
	}
	return out
}

// InsertBatch inserts items into table in one batched INSERT that lists columns (18.16 wants
// them listed). values returns an item's column values in the order of columns; its error is
// returned as it is. No items, no INSERT.
func InsertBatch[T any](ctx context.Context, conn driver.Conn, table, columns string, items []T,
	values func(T) ([]any, error)) error {
	if len(items) == 0 {
		return nil
	}
	batch, err := conn.PrepareBatch(ctx, `INSERT INTO `+table+` (`+columns+`)`)
	if err != nil {
		return fmt.Errorf("prepare batch: %w", err)
	}
	defer func() { _ = batch.Close() }()
	for i, it := range items {
		args, err := values(it)
		if err != nil {
			return err
		}
		if err := batch.Append(args...); err != nil {
			return fmt.Errorf("append row %d of %d to %s: %w", i+1, len(items), table, err)
		}
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("insert %d rows into %s: %w", len(items), table, err)
	}
	return nil
}

// InsertColumns inserts rows rows, whose columns are columns (one slice of rows values per
// column, in the order of names), into table in one batched INSERT, appended a column at a
// time. No rows, no INSERT.
func InsertColumns(ctx context.Context, conn driver.Conn, table, names string, rows int, columns []any) error {
	if rows == 0 {
		return nil
	}
	batch, err := conn.PrepareBatch(ctx, `INSERT INTO `+table+` (`+names+`)`)
	if err != nil {
		return fmt.Errorf("prepare batch: %w", err)
	}
	defer func() { _ = batch.Close() }()
	for i, values := range columns {
		if err := batch.Column(i).Append(values); err != nil {
			return fmt.Errorf("append column %d to %s: %w", i+1, table, err)
		}
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("insert %d rows into %s: %w", rows, table, err)
	}
	return nil
}

// EnsureClickHouseColumns adds the named columns, each with definition (a type and a default,
// such as a String defaulting to the empty string), to a table created before they existed. 18.16 has no ADD COLUMN
// IF NOT EXISTS, so the table's columns are read first; when another process added a column in
// between, the ALTER fails and a second look settles it.
func EnsureClickHouseColumns(ctx context.Context, conn driver.Conn, table string, names []string, definition string) error {
	columns := func() (map[string]bool, error) {
		rows, err := conn.Query(ctx, `SELECT name FROM system.columns
			WHERE database = currentDatabase() AND table = ?`, table)
		if err != nil {
			return nil, fmt.Errorf("read columns: %w", err)
		}
		defer func() { _ = rows.Close() }()
		have := map[string]bool{}
		for rows.Next() {
			var name string
			if err := rows.Scan(&name); err != nil {
				return nil, fmt.Errorf("read columns: %w", err)
			}
			have[name] = true
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("read columns: %w", err)
		}
		return have, nil
	}
	have, err := columns()
	if err != nil {
		return err
	}
	for _, col := range names {
		if have[col] {
			continue
		}
		if err := conn.Exec(ctx, `ALTER TABLE `+table+` ADD COLUMN `+col+` `+definition); err != nil {
			if now, cerr := columns(); cerr == nil && now[col] {
				continue // a concurrent migration added it
			}
			return fmt.Errorf("add column %s: %w", col, err)
		}
	}
	return nil
}

// MemoLimit is the most rows a Memo, or keys a Written, keeps: past it the memo gives up and its
// store reads the table again, so that a rebuild of a very large history is slower, never out of
// memory. A million UUID keys alone measured 104 MB a store (two stores keep them, and a
// rebuild then ran with GOGC 400; 150 now), so the bound is a quarter of that: 250,000
// collections fit.
const MemoLimit = 250_000

// Memo is what a ClickHouse store keeps of the rows it inserted into a table that was new and
// empty when the store was made and that nothing else writes: a rebuild's table. Each batch a
// projector folds reads the rows of its keys and their stored revisions, and ClickHouse answers
// each with a FINAL scan per thousand keys (25-35 ms on the CI server), which made those reads
// most of a ClickHouse rebuild's time; from memory they cost nothing. The memo holds the last
// inserted version per key, which is what FINAL shows: a store inserts a revision only above the
// stored one, or the same revision again to erase a personal part, which FINAL also shows as the
// last inserted. A nil Memo remembers nothing.
type Memo[K comparable, R any] struct {
	mu    sync.Mutex
	rows  map[K]R
	given bool // over MemoLimit: forgotten, the table is the only source
}

// NewMemo returns an empty memo for a new, empty table.
func NewMemo[K comparable, R any]() *Memo[K, R] { return &Memo[K, R]{rows: map[K]R{}} }

// Get returns the remembered rows among keys; ok is false when the memo cannot answer and the
// table must be read.
func (m *Memo[K, R]) Get(keys []K) (rows map[K]R, ok bool) {
	if m == nil {
		return nil, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.given {
		return nil, false
	}
	out := make(map[K]R, len(keys))
	for _, k := range keys {
		if r, found := m.rows[k]; found {
			out[k] = r
		}
	}
	return out, true
}

// Reset forgets the rows: the table was emptied. A memo that gave up stays given up (it
// knows nothing, and the table is read).
func (m *Memo[K, R]) Reset() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.given {
		clear(m.rows)
	}
}

// Revisions is Get reduced to the rows' revisions, as StoredRevisions returns them.
func (m *Memo[K, R]) Revisions(keys []K, revision func(R) uint64) (map[K]uint64, bool) {
	rows, ok := m.Get(keys)
	if !ok {
		return nil, false
	}
	out := make(map[K]uint64, len(rows))
	for k, r := range rows {
		out[k] = revision(r)
	}
	return out, true
}

// Put records rows the store has inserted, in insertion order.
func (m *Memo[K, R]) Put(rows []R, key func(R) K) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.given {
		return
	}
	for _, r := range rows {
		m.rows[key(r)] = r
	}
	if len(m.rows) > MemoLimit {
		m.given, m.rows = true, nil
	}
}
