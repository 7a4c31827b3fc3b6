// Package readdb opens the databases that hold Samla's read models: an embedded SQLite file per
// read model (modernc.org/sqlite, no cgo) or a ClickHouse database over the native protocol. It
// also holds the few encodings every read model shares, so that both adapters of a read model
// store a value the same way.
package readdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/samla/samla/platform/shrink"

	// The pure-Go SQLite driver registers itself as "sqlite"; importing it here keeps the
	// driver choice in the one package that opens read-model databases.
	_ "modernc.org/sqlite"
)

// ErrNotFound is what every read-model store returns (wrapped) for a row it does not hold, or
// one that belongs to another tenant. It stays inside projections: each read model's Reader turns
// it into the not-found error of the port its consumer declares (query.ErrNotFound,
// httpapi.ErrKeyNotFound), so that a consumer sees exactly one.
var ErrNotFound = errors.New("read model row not found")

// sqliteBusyTimeout is how long a writer waits for another writer's lock before SQLITE_BUSY.
// Read models are written by one projector each, but a rebuild, a second process started by
// mistake or a long read checkpoint can still hold the lock for a moment.
const sqliteBusyTimeout = 5 * time.Second

// OpenSQLite opens (creating if needed) a SQLite read-model database at path.
//
// Pragmas, applied to every pooled connection through the DSN:
//   - journal_mode=WAL: query handlers read while the projector writes, and WAL lets readers
//     see the last committed state without blocking the writer or being blocked by it.
//   - busy_timeout: a writer waits for the lock instead of failing at once.
//   - synchronous=NORMAL: in WAL mode a commit is then not fsynced until the next checkpoint.
//     A crash of the process loses nothing (the commit is in the OS's page cache); a power
//     loss or kernel crash can drop the last commits even though the projector has already
//     committed their Kafka offsets, so those events would be missing until the read model
//     is rebuilt. That trade (a write without fsync on every projected batch) is acceptable
//     here and only here: a read model is derived data that projections.Rebuild recreates
//     from the event store, which is the source of truth and does fsync every commit.
//   - _txlock=immediate: transactions take the write lock at BEGIN, so two writers queue on
//     busy_timeout instead of one failing with SQLITE_BUSY when it upgrades a read lock.
//
// Each connection's page cache is 512 KiB, not SQLite's 2 MiB: a model has up to
// SQLitePoolSize connections and there are eight models, the status poll reads memory, and the
// operating system caches the files anyway; after a load the caches were a good part of the
// process's resident memory, outside the Go heap (three minutes after a 30 s POST load: 222 →
// 193 MB).
//
// The pool keeps its connections while they are in use (SQLitePoolSize open and idle, none
// retired by age, only those idle for shrink.IdleConnTimeout closed): opening a SQLite
// connection parses the schema and applies the pragmas, and a statement prepared once (the
// stores prepare their hot reads) is prepared again on every new connection. database/sql's
// default of two idle connections made every status poll under load open one.
func OpenSQLite(path string) (*sql.DB, error) {
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "NORMAL")
	q.Add("_pragma", "cache_size(-512)")
	size := SQLitePoolSize()
	return openSQLite(path, q, size)
}

// openSQLite opens the SQLite database at path with the pragmas of q, busy_timeout and an
// immediate transaction lock added, keeping a pool of size connections open for good.
func openSQLite(path string, q url.Values, size int) (*sql.DB, error) {
	if path == "" || strings.ContainsRune(path, '?') {
		// The driver splits the DSN at '?', so such a path would silently open another file.
		return nil, fmt.Errorf("open sqlite read model %q: path must be non-empty and free of '?'", path)
	}
	q.Set("_busy_timeout", fmt.Sprint(sqliteBusyTimeout.Milliseconds()))
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open sqlite read model %s: %w", path, err)
	}
	db.SetMaxOpenConns(size)
	db.SetMaxIdleConns(size)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(shrink.IdleConnTimeout)
	if err := db.Ping(); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open sqlite read model %s: %w", path, err)
	}
	return db, nil
}

// OpenSQLiteBulk opens (creating) a SQLite read-model database at path for a rebuild, which
// writes a new database that nobody reads until it is complete and that is deleted when the
// rebuild fails: so no journal (journal_mode=OFF: no rollback either, and a failed rebuild
// throws the file away), no syncs (synchronous=OFF: the rebuild syncs the finished files itself
// before it swaps them in), a 2 MiB page cache per connection and temporary b-trees in memory. A
// database opened with OpenSQLite afterwards is WAL again. The cache was 16 MiB: the read
// models' caches, filled for the first time, were 31k of a rebuild's 77k page faults and made
// it slower (25-26k against 31-34k events/s, 167k events); collection ids are UUIDv7, so most
// new rows go to the right edge of their b-trees and a small cache holds the pages they need.
func OpenSQLiteBulk(path string) (*sql.DB, error) {
	q := url.Values{}
	q.Set("_journal_mode", "OFF")
	q.Set("_synchronous", "OFF")
	q.Add("_pragma", "cache_size(-2048)")
	q.Add("_pragma", "temp_store(MEMORY)")
	// The rebuild's projector is the only user: one connection for its writes and one for a
	// read a store might make beside its transaction.
	return openSQLite(path, q, 2)
}

// SQLitePoolSize is how many connections a SQLite read model keeps open: two per CPU, at least
// four. Reads run in this process (the driver is pure Go), so more connections than CPUs add
// little; the spare ones let readers go on while the projector holds one for its write
// transaction. Callers beyond it wait for a free connection rather than open another.
func SQLitePoolSize() int { return max(4, 2*runtime.GOMAXPROCS(0)) }

// OpenClickHouse connects to the ClickHouse server named by dsn
// (clickhouse://user:password@host:9000/database?...) over the native protocol, creating the
// database when it does not exist yet. The native protocol is the only one clickhouse-go v2
// speaks with the 18.16 servers CI runs.
func OpenClickHouse(ctx context.Context, dsn string) (driver.Conn, error) {
	opts, err := clickhouse.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse clickhouse dsn: %w", err)
	}
	database := opts.Auth.Database
	if database == "" {
		database = "default"
	}
	if err := ValidClickHouseIdentifier(database); err != nil {
		return nil, err
	}
	keepClickHouseConnections(opts)
	// The server refuses a connection whose default database does not exist, so create it
	// through a connection to "default" first.
	if database != "default" {
		bootstrap := *opts
		bootstrap.Auth.Database = "default"
		conn, err := clickhouse.Open(&bootstrap)
		if err != nil {
			return nil, fmt.Errorf("connect to clickhouse %v: %w", opts.Addr, err)
		}
		err = conn.Exec(ctx, "CREATE DATABASE IF NOT EXISTS "+database)
		_ = conn.Close()
		if err != nil {
			return nil, fmt.Errorf("create clickhouse database %s: %w", database, err)
		}
	}
	conn, err := clickhouse.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("connect to clickhouse %v: %w", opts.Addr, err)
	}
	if err := conn.Ping(ctx); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("ping clickhouse %v/%s: %w", opts.Addr, database, err)
	}
	return conn, nil
}

// ClickHousePoolSize is how many connections a ClickHouse read-model pool keeps open and idle
// when the DSN does not say (max_open_conns, max_idle_conns): clickhouse-go's own default of at
// most 10 open but 5 idle closes every connection beyond the fifth when it is released, so that
// bursts of polls dial new ones.
const ClickHousePoolSize = 10

// keepClickHouseConnections makes the pool keep every connection it opens: as many idle as open.
func keepClickHouseConnections(opts *clickhouse.Options) {
	switch {
	case opts.MaxOpenConns <= 0 && opts.MaxIdleConns <= 0:
		opts.MaxOpenConns, opts.MaxIdleConns = ClickHousePoolSize, ClickHousePoolSize
	case opts.MaxIdleConns <= 0:
		opts.MaxIdleConns = opts.MaxOpenConns
	case opts.MaxOpenConns <= 0:
		opts.MaxOpenConns = opts.MaxIdleConns
	}
}

// ValidClickHouseIdentifier accepts the plain identifiers that need no quoting, which is all
// Samla uses; DDL cannot take bound parameters, so anything else is refused rather than quoted.
func ValidClickHouseIdentifier(name string) error {
	if name == "" || len(name) > 128 {
		return fmt.Errorf("invalid clickhouse identifier %q", name)
	}
	for i, r := range name {
		ok := r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (i > 0 && r >= '0' && r <= '9')
		if !ok {
			return fmt.Errorf("invalid clickhouse identifier %q", name)
		}
	}
	return nil
}

// After is the condition of the rows after the position (at, id) in the order of timeCol (a
// Millis column), then idCol, and its arguments: the keyset of a paged list. rowValues gives
// SQLite's row value, which its index search over (…, timeCol, idCol) turns into a range;
// otherwise the expanded form, which every ClickHouse version knows. Paged lists order by
// columns that never change for a row, so that a page's position holds whatever changed since.
func After(timeCol, idCol string, at time.Time, id string, rowValues bool) (string, []any) {
	ms := Millis(at)
	if rowValues {
		return `(` + timeCol + `, ` + idCol + `) > (?, ?)`, []any{ms, id}
	}
	return `(` + timeCol + ` > ? OR (` + timeCol + ` = ? AND ` + idCol + ` > ?))`, []any{ms, ms, id}
}

// PageIDs is a page of rows as a paged list's readers answer it: the rows' ids, and the time
// of the last row (zero for none), which with its id is where the next page starts.
func PageIDs[R any](rows []R, id func(R) string, at func(R) time.Time) (ids []string, last time.Time) {
	ids = make([]string, len(rows))
	for i, row := range rows {
		ids[i] = id(row)
	}
	if len(rows) > 0 {
		last = at(rows[len(rows)-1])
	}
	return ids, last
}

// Millis is the stored form of a time in every read model: milliseconds since the Unix epoch.
// Events carry ms precision, SQLite has no time type and ClickHouse 18.16 has no DateTime64, so
// one integer encoding keeps both adapters exact and comparable. The zero time is stored as 0.
func Millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// UMillis is Millis for ClickHouse's UInt64 columns. Samla has no time before 1970 to store;
// should one appear it is clamped to 0 (unknown) rather than wrapped to a far-future value.
func UMillis(t time.Time) uint64 {
	if ms := Millis(t); ms > 0 {
		return uint64(ms)
	}
	return 0
}

// FromUMillis is FromMillis for ClickHouse's UInt64 columns.
func FromUMillis(ms uint64) time.Time { return FromMillis(int64(ms)) }

// FromMillis turns a stored Millis back into a UTC time; 0 is the zero time.
func FromMillis(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// Placeholders returns "?, ?, …" with n markers, for SQL IN lists.
func Placeholders(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat("?, ", n-1) + "?"
}

// Chunks splits ids into slices of at most size, so that IN lists stay below the databases'
// limits on bound variables and query length.
func Chunks(ids []string, size int) [][]string {
	var out [][]string
	for len(ids) > size {
		out = append(out, ids[:size])
		ids = ids[size:]
	}
	if len(ids) > 0 {
		out = append(out, ids)
	}
	return out
}
