// Package sqlite is the embedded event store: one SQLite file in WAL mode, written by a single
// goroutine that group-commits concurrent appends, read through a separate connection pool.
//
// Beyond the eventstore.Store contract it guarantees:
//   - Positions are 1, 2, 3, … in commit order, without gaps.
//   - Event ids are UUIDs, stored and returned in canonical lowercase form, and unique across the
//     whole store: reusing one outside an idempotent retry fails with
//     eventstore.ErrDuplicateEventID (or a WrongExpectedRevisionError when the expectation
//     fails as well).
//   - An append of no events checks the expectation and returns the stream's current last
//     revision and position (zeros for a stream without events).
//
// Only one Store should write to a file at a time; a second one would be correct (SQLite's
// write lock serialises them) but its subscribers would learn of the other's commits only by
// polling.
package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	// The pure-Go driver keeps the embedded mode free of cgo, registered as "sqlite".
	_ "modernc.org/sqlite"

	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/shrink"
)

// ErrClosed is returned by calls on a closed store and by appends still queued when it closed.
var ErrClosed = errors.New("sqlite event store closed")

var _ eventstore.Store = (*Store)(nil)

// Option tunes a Store.
type Option func(*config)

type config struct {
	readConns    int
	maxBatch     int
	pollInterval time.Duration
	catchUpBatch int
}

func defaultConfig() config {
	return config{readConns: 4, maxBatch: 512, pollInterval: time.Second, catchUpBatch: 500}
}

// WithReadConns sets the size of the read connection pool (default 4).
func WithReadConns(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.readConns = n
		}
	}
}

// WithMaxBatch caps how many queued appends one group commit takes (default 512).
func WithMaxBatch(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.maxBatch = n
		}
	}
}

// WithPollInterval sets how often live subscriptions look for new events even without a
// commit notification (default 1s); it only matters when another process writes the file.
func WithPollInterval(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.pollInterval = d
		}
	}
}

// WithCatchUpBatch sets how many events a subscription reads per query (default 500).
func WithCatchUpBatch(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.catchUpBatch = n
		}
	}
}

// Store is the SQLite event store. It is safe for concurrent use.
type Store struct {
	cfg config
	wdb *sql.DB // one connection, used only by the writer goroutine (and Open's migration)
	rdb *sql.DB // read-only pool; WAL lets it read while the writer commits

	readStream, streamExists, readAll *sql.Stmt
	head, findID, insert              *sql.Stmt
	savepoint, rollbackTo, release    *sql.Stmt

	requests   chan *appendRequest
	closing    chan struct{}
	writerDone chan struct{}
	closeOnce  sync.Once
	closeErr   error

	committed signal
	// recent holds the last commits' events until the live subscriptions have read them.
	recent  recentEvents
	commits atomic.Uint64 // group commits so far; benchmarks report appends per commit
}

// Open opens the store in the SQLite file at path, creating the file, its directories and the
// schema as needed.
func Open(path string, opts ...Option) (*Store, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if path == "" {
		return nil, errors.New("open sqlite event store: empty path")
	}
	// The driver splits its DSN at the first '?', so such a path cannot be passed through it.
	if strings.Contains(path, "?") {
		return nil, fmt.Errorf("open sqlite event store %q: path must not contain '?'", path)
	}
	// An absolute path keeps SQLite from reading a relative "file:…" name as a URI.
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open sqlite event store %q: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o750); err != nil {
		return nil, fmt.Errorf("open sqlite event store %q: create directory: %w", path, err)
	}

	s := &Store{
		cfg:        cfg,
		requests:   make(chan *appendRequest, cfg.maxBatch),
		closing:    make(chan struct{}),
		writerDone: make(chan struct{}),
	}
	s.committed.ch = make(chan struct{})
	if err := s.openDBs(abs); err != nil {
		_ = s.closeDBs() // the open error is the one worth reporting
		return nil, fmt.Errorf("open sqlite event store %q: %w", path, err)
	}
	go s.runWriter()
	return s, nil
}

func (s *Store) openDBs(path string) error {
	ctx := context.Background()
	var err error
	// synchronous=FULL makes every commit fsync the WAL, so an acknowledged append survives a
	// power cut; group commit is what keeps that affordable. BEGIN IMMEDIATE takes the write lock
	// up front, so a transaction never fails half-way to upgrade it.
	s.wdb, err = sql.Open("sqlite", path+
		"?_txlock=immediate&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)")
	if err != nil {
		return fmt.Errorf("open writer: %w", err)
	}
	s.wdb.SetMaxOpenConns(1)
	s.wdb.SetMaxIdleConns(1)
	s.wdb.SetConnMaxLifetime(0)
	s.wdb.SetConnMaxIdleTime(0)
	if err := migrate(ctx, s.wdb); err != nil {
		return err
	}
	var mode string
	if err := s.wdb.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("read journal mode: %w", err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("journal mode is %q, want wal (is the file on a filesystem without shared memory?)", mode)
	}

	// Readers are opened after the writer has switched the file to WAL, and are query-only so a
	// bug can never write outside the writer's transactions. Their page cache is 256 KiB, not
	// SQLite's 2 MiB: a reader discards its whole cache whenever the writer has committed since
	// its last read, which under load is every read, so only one read's pages are of use
	// (BenchmarkReadStreamBesideAppends: the same time with either); full 2 MiB caches cost
	// about 4 MiB each outside the Go heap (modernc's allocator puts each 4 KiB page with its
	// header in an 8 KiB slot), and stayed after a burst.
	s.rdb, err = sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)&_query_only=1&_pragma=cache_size(-256)")
	if err != nil {
		return fmt.Errorf("open readers: %w", err)
	}
	s.rdb.SetMaxOpenConns(s.cfg.readConns)
	s.rdb.SetMaxIdleConns(s.cfg.readConns)
	s.rdb.SetConnMaxIdleTime(shrink.IdleConnTimeout)

	prepare := func(db *sql.DB, dst **sql.Stmt, query string) {
		if err != nil {
			return
		}
		if *dst, err = db.PrepareContext(ctx, query); err != nil {
			err = fmt.Errorf("prepare %q: %w", query, err)
		}
	}
	prepare(s.rdb, &s.readStream, "SELECT "+columns+" FROM events WHERE stream = ? AND revision >= ? ORDER BY revision LIMIT ?")
	prepare(s.rdb, &s.streamExists, "SELECT EXISTS (SELECT 1 FROM events WHERE stream = ?)")
	prepare(s.rdb, &s.readAll, "SELECT "+columns+" FROM events WHERE position > ? ORDER BY position LIMIT ?")
	prepare(s.wdb, &s.head, "SELECT revision, position FROM events WHERE stream = ? ORDER BY revision DESC LIMIT 1")
	prepare(s.wdb, &s.findID, "SELECT stream, revision, position FROM events WHERE event_id = ?")
	// Prepared savepoint statements spare the writer three parses per append.
	prepare(s.wdb, &s.savepoint, "SAVEPOINT append")
	prepare(s.wdb, &s.rollbackTo, "ROLLBACK TO append")
	prepare(s.wdb, &s.release, "RELEASE append")
	prepare(s.wdb, &s.insert, `INSERT INTO events (stream, revision, event_id, type, schema_version, tenant,
		occurred_at, correlation_id, causation_id, actor, payload) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	return err
}

func (s *Store) closeDBs() error {
	var errs []error
	for _, st := range []*sql.Stmt{s.readStream, s.streamExists, s.readAll, s.head, s.findID, s.insert, s.savepoint, s.rollbackTo, s.release} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	// The writer closes last: closing the last connection checkpoints the WAL into the file.
	for _, db := range []*sql.DB{s.rdb, s.wdb} {
		if db != nil {
			errs = append(errs, db.Close())
		}
	}
	return errors.Join(errs...)
}

// Close stops the writer after the group commit in progress, fails appends still queued with
// ErrClosed, ends subscriptions with ErrClosed and closes the database. It is safe to call more
// than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.closing)
		<-s.writerDone
		if err := s.closeDBs(); err != nil {
			s.closeErr = fmt.Errorf("close sqlite event store: %w", err)
		}
	})
	return s.closeErr
}

func (s *Store) isClosing() bool {
	select {
	case <-s.closing:
		return true
	default:
		return false
	}
}

// readErr names ErrClosed when a read failed because Close pulled the database from under it,
// rather than surfacing database/sql's "statement is closed".
func (s *Store) readErr(err error) error {
	if s.isClosing() {
		return fmt.Errorf("%w (%v)", ErrClosed, err)
	}
	return err
}

const columns = `position, stream, revision, event_id, type, schema_version, tenant, occurred_at,
	correlation_id, causation_id, actor, payload`

// sqlLimit maps the port's "limit <= 0 is all" onto SQLite, where a negative LIMIT is no limit.
func sqlLimit(limit int) int {
	if limit <= 0 {
		return -1
	}
	return limit
}

// ReadStream implements eventstore.Store.
func (s *Store) ReadStream(ctx context.Context, stream string, from uint64, limit int) ([]eventschema.Envelope, error) {
	if s.isClosing() {
		return nil, fmt.Errorf("read stream %s: %w", stream, ErrClosed)
	}
	var evs []eventschema.Envelope
	// Revisions never reach 2^63, so a larger from is simply past the end.
	if from <= math.MaxInt64 {
		rows, err := s.readStream.QueryContext(ctx, stream, int64(from), sqlLimit(limit))
		if err != nil {
			return nil, fmt.Errorf("read stream %s from %d: %w", stream, from, s.readErr(err))
		}
		if evs, err = scanEnvelopes(rows, 0); err != nil {
			return nil, fmt.Errorf("read stream %s from %d: %w", stream, from, s.readErr(err))
		}
	}
	if len(evs) > 0 {
		return evs, nil
	}
	// Nothing read: tell a missing stream apart from a read past the end of an existing one.
	var exists bool
	if err := s.streamExists.QueryRowContext(ctx, stream).Scan(&exists); err != nil {
		return nil, fmt.Errorf("read stream %s: check existence: %w", stream, s.readErr(err))
	}
	if !exists {
		return nil, fmt.Errorf("read stream %s: %w", stream, eventstore.ErrStreamNotFound)
	}
	return nil, nil
}

// ReadAll implements eventstore.Store.
func (s *Store) ReadAll(ctx context.Context, after uint64, limit int) ([]eventschema.Envelope, error) {
	if s.isClosing() {
		return nil, fmt.Errorf("read all: %w", ErrClosed)
	}
	if after >= math.MaxInt64 {
		return nil, nil
	}
	rows, err := s.readAll.QueryContext(ctx, int64(after), sqlLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("read all after %d: %w", after, s.readErr(err))
	}
	evs, err := scanEnvelopes(rows, readAllRoom(limit))
	if err != nil {
		return nil, fmt.Errorf("read all after %d: %w", after, s.readErr(err))
	}
	return evs, nil
}

// HeadPosition returns the position of the last event, 0 for an empty store. Positions are
// dense, so it is also how many events the store holds: a rebuild shows its progress against it.
func (s *Store) HeadPosition(ctx context.Context) (uint64, error) {
	if s.isClosing() {
		return 0, fmt.Errorf("head position: %w", ErrClosed)
	}
	var head sql.NullInt64
	if err := s.rdb.QueryRowContext(ctx, "SELECT max(position) FROM events").Scan(&head); err != nil {
		return 0, fmt.Errorf("head position: %w", s.readErr(err))
	}
	if !head.Valid || head.Int64 < 0 {
		return 0, nil
	}
	return uint64(head.Int64), nil
}

// readAllRoom is how many envelopes ReadAll makes room for before it reads a page of limit: all
// of them for a rebuild's pages (2,500 or 20,000: its slice no longer grows a dozen times), none
// for smaller reads. A caught-up subscription asks for 500 after every commit and mostly finds
// none or one: room for 500 envelopes (92 KB, zeroed) made each of its reads ten times dearer.
func readAllRoom(limit int) int {
	const pageFrom, pageMax = 2048, 20000
	if limit < pageFrom {
		return 0
	}
	return min(limit, pageMax)
}

// scanEnvelopes reads rows into envelopes, with room for prealloc of them to start with.
func scanEnvelopes(rows *sql.Rows, prealloc int) ([]eventschema.Envelope, error) {
	defer rows.Close()
	evs := make([]eventschema.Envelope, 0, max(prealloc, 0))
	for rows.Next() {
		var (
			e                  eventschema.Envelope
			position, revision int64
			occurredAt         int64
			payload            []byte
		)
		if err := rows.Scan(&position, &e.Stream, &revision, &e.EventID, &e.Type, &e.SchemaVersion, &e.Tenant,
			&occurredAt, &e.CorrelationID, &e.CausationID, &e.Actor, &payload); err != nil {
			return nil, fmt.Errorf("scan event: %w", err)
		}
		e.Position, e.Revision = uint64(position), uint64(revision)
		e.OccurredAt = time.UnixMilli(occurredAt).UTC()
		e.Payload = json.RawMessage(payload)
		evs = append(evs, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("scan events: %w", err)
	}
	if len(evs) == 0 {
		return nil, nil // none reads as nil, as before the room was made
	}
	return evs, nil
}

// SubscribeAll implements eventstore.Store: it pages through ReadAll until it is caught up, then
// waits for the writer's commit signal (or the poll interval) and pages again. Because position
// order is commit order and a commit becomes visible all at once, reading "after the last
// delivered position" can neither skip nor repeat an event.
func (s *Store) SubscribeAll(ctx context.Context, after uint64, handle func(context.Context, eventschema.Envelope) error) error {
	poll := time.NewTicker(s.cfg.pollInterval)
	defer poll.Stop()
	cursor := s.recent.subscribe(after)
	defer s.recent.unsubscribe(cursor)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		// Take the signal before reading: a commit that lands after the read has started then
		// still wakes the wait below.
		wake := s.committed.wait()
		batch, fromMemory := s.recent.read(cursor, s.cfg.catchUpBatch)
		if !fromMemory {
			var err error
			batch, err = s.ReadAll(ctx, after, s.cfg.catchUpBatch)
			switch {
			case ctx.Err() != nil:
				return ctx.Err()
			case s.isClosing():
				return fmt.Errorf("subscribe to all: %w", ErrClosed)
			case err != nil:
				return fmt.Errorf("subscribe to all: %w", err)
			}
		}
		var err error
		after, err = eventstore.Deliver(ctx, after, batch, handle)
		s.recent.advance(cursor, after)
		if err != nil {
			return err
		}
		if len(batch) == s.cfg.catchUpBatch {
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.closing:
			return fmt.Errorf("subscribe to all: %w", ErrClosed)
		case <-wake:
		case <-poll.C:
		}
	}
}

// signal wakes every waiter once per broadcast, without a goroutine per subscriber: waiters
// hold the current channel, and broadcast closes it and installs a fresh one.
type signal struct {
	mu sync.Mutex
	ch chan struct{}
}

func (s *signal) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ch
}

func (s *signal) broadcast() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.ch)
	s.ch = make(chan struct{})
}
