// Package sqlitekeys is the embedded key store of crypto-shredding (eventschema.Keys): one SQLite
// file of its own under the data dir, apart from the event store and the read models, so that
// neither a copy of the event store nor of the read models carries the keys that open them.
//
// A destroyed key leaves a tombstone row (subject, no key). The file runs with
// PRAGMA secure_delete=ON, so SQLite overwrites the destroyed key's bytes with zeros instead of
// leaving them in free pages, and every destroy checkpoints the write-ahead log and truncates
// it, so the old page does not linger there either. What the file system or a backup keeps of
// blocks the file once used is out of SQLite's reach: keep the data dir on an encrypted volume
// and let backups of this file age out.
package sqlitekeys

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	// The pure-Go driver, registered as "sqlite", as the event store uses it.
	_ "modernc.org/sqlite"

	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/groupcommit"
	"github.com/samla/samla/platform/keystore"
	"github.com/samla/samla/platform/shrink"
)

const schema = `
CREATE TABLE IF NOT EXISTS subject_keys (
	subject      TEXT NOT NULL PRIMARY KEY,
	key_id       TEXT,    -- NULL once destroyed
	material     BLOB,    -- NULL once destroyed
	created_ms   INTEGER NOT NULL,
	destroyed_ms INTEGER  -- NULL while the key lives
) STRICT`

// Store is the SQLite key store. It is safe for concurrent use, also by several processes on
// one file (SQLite's locks serialise the writers).
//
// New keys are group-committed: GetOrCreate of a subject that has no key yet hands the insert to
// one writer goroutine, which takes every insert queued so far into one transaction and one
// fsync, so concurrent creators (a key per collection that names no user: one per POST
// /collections) share a commit instead of queueing for SQLite's write lock one fsync each.
type Store struct {
	db *sql.DB
	// Prepared once: parsing a statement costs more than running these point queries.
	get, insert *sql.Stmt

	mu     sync.RWMutex
	closed bool

	creates    chan *createRequest
	stop       chan struct{}
	writerDone chan struct{}
}

// maxConns bounds the key store's connections: the writer's and a few readers'.
const maxConns = 4

// maxCreateBatch caps how many new keys one commit takes, so one commit's latency stays bounded
// however deep the queue; the queue itself holds as many and then blocks its callers.
const maxCreateBatch = 256

type createRequest struct {
	ctx     context.Context
	subject string
	fresh   eventschema.Key
	// done has room for the one outcome, so the writer never blocks on a caller that gave up.
	done chan createOutcome
}

type createOutcome struct {
	key eventschema.Key
	err error
}

var _ eventschema.Keys = (*Store)(nil)

// Open opens (creating as needed) the key store file at path, readable by its owner only.
func Open(path string) (*Store, error) {
	if path == "" || strings.Contains(path, "?") {
		return nil, fmt.Errorf("open key store %q: want a path without '?'", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open key store %q: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("open key store %q: create directory: %w", path, err)
	}
	f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open key store %q: %w", path, err)
	}
	_ = f.Close()
	// synchronous=FULL: a key handed out is durable before anything is sealed under it.
	db, err := sql.Open("sqlite", abs+"?_txlock=immediate&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)"+
		"&_pragma=synchronous(FULL)&_pragma=secure_delete(ON)")
	if err != nil {
		return nil, fmt.Errorf("open key store %q: %w", path, err)
	}
	// A bounded pool, all of it kept open while in use (closed after shrink.IdleConnTimeout
	// idle): every SQLite connection has a page cache of its own
	// (up to 2 MiB) and costs a schema parse to open, and under load database/sql would
	// otherwise open one per concurrent caller (32 were seen under 32 POSTs at once) and close
	// all but two afterwards, again and again. Reads are point lookups of microseconds, so a
	// few connections serve any number of callers, who queue for them.
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	db.SetConnMaxIdleTime(shrink.IdleConnTimeout)
	if _, err := db.Exec(schema); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open key store %q: migrate: %w", path, err)
	}
	var secure int
	if err := db.QueryRow(`PRAGMA secure_delete`).Scan(&secure); err != nil || secure != 1 {
		_ = db.Close()
		return nil, fmt.Errorf("open key store %q: secure_delete is off (%d, %v)", path, secure, err)
	}
	get, err := db.Prepare(`SELECT key_id, material FROM subject_keys WHERE subject = ?`)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open key store %q: prepare: %w", path, err)
	}
	// RETURNING answers the new key in the insert itself; a subject that has a row already
	// (a key or a tombstone) returns nothing and is read after.
	insert, err := db.Prepare(`INSERT INTO subject_keys (subject, key_id, material, created_ms)
		VALUES (?, ?, ?, ?) ON CONFLICT (subject) DO NOTHING RETURNING key_id, material`)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open key store %q: prepare: %w", path, err)
	}
	st := &Store{db: db, get: get, insert: insert, creates: make(chan *createRequest, maxCreateBatch), stop: make(chan struct{}), writerDone: make(chan struct{})}
	go st.runWriter()
	return st, nil
}

// Close closes the file; later calls fail with keystore.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	// No call is in flight (they hold the read lock), so nothing is queued: the writer just ends.
	close(s.stop)
	<-s.writerDone
	return errors.Join(s.get.Close(), s.insert.Close(), s.db.Close())
}

func (s *Store) use() (func(), error) {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, keystore.ErrClosed
	}
	return s.mu.RUnlock, nil
}

// GetOrCreate implements eventschema.Keys. A subject with a key (or a tombstone) is answered by
// a read. Otherwise the writer inserts a fresh key and reads back in one write transaction, so
// concurrent creators (also in other processes) all read the one key that was inserted; the
// answer comes after that transaction's commit is durable.
func (s *Store) GetOrCreate(ctx context.Context, subject string) (eventschema.Key, error) {
	done, err := s.use()
	if err != nil {
		return eventschema.Key{}, err
	}
	defer done()
	if subject == "" {
		return eventschema.Key{}, errors.New("key store: empty data subject")
	}
	k, err := read(s.get.QueryRowContext(ctx, subject), subject)
	if !errors.Is(err, eventschema.ErrKeyNotFound) {
		return k, err
	}
	fresh, err := keystore.Generate()
	if err != nil {
		return eventschema.Key{}, err
	}
	r := &createRequest{ctx: ctx, subject: subject, fresh: fresh, done: make(chan createOutcome, 1)}
	select {
	case s.creates <- r:
	case <-ctx.Done():
		return eventschema.Key{}, fmt.Errorf("key of %s: not queued: %w", subject, ctx.Err())
	}
	select {
	case out := <-r.done:
		return out.key, out.err
	case <-ctx.Done():
		// The writer may still commit the key; the next GetOrCreate reads it.
		return eventschema.Key{}, fmt.Errorf("key of %s: outcome unknown: %w", subject, ctx.Err())
	}
}

// runWriter is the only goroutine that creates keys; each round commits every insert queued so
// far in one transaction.
func (s *Store) runWriter() {
	defer close(s.writerDone)
	batch := make([]*createRequest, 0, maxCreateBatch)
	for {
		select {
		case <-s.stop:
			return
		case r := <-s.creates:
			batch = append(batch[:0], r)
		}
		batch = groupcommit.Drain(batch, s.creates, maxCreateBatch)
		s.createBatch(batch)
		clear(batch) // drop references to answered requests while waiting for the next ones
	}
}

// createBatch inserts the batch's keys in one transaction and answers every caller after the
// commit; when the transaction fails, every caller gets the error and no key was handed out.
func (s *Store) createBatch(batch []*createRequest) {
	// The transaction must not die with one caller's context: it carries the others' keys.
	ctx := context.Background()
	outcomes := make([]createOutcome, len(batch))
	failAll := func(err error) {
		for _, r := range batch {
			r.done <- createOutcome{err: fmt.Errorf("key of %s: %w", r.subject, err)}
		}
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		failAll(err)
		return
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	insert, get := tx.StmtContext(ctx, s.insert), tx.StmtContext(ctx, s.get)
	now := time.Now().UnixMilli()
	for i, r := range batch {
		if err := r.ctx.Err(); err != nil {
			// Its caller was told the outcome is unknown; not creating the key spares a row.
			outcomes[i] = createOutcome{err: fmt.Errorf("key of %s: %w", r.subject, err)}
			continue
		}
		k, err := read(insert.QueryRowContext(ctx, r.subject, r.fresh.ID(), r.fresh.Material(), now), r.subject)
		if errors.Is(err, eventschema.ErrKeyNotFound) {
			// Nothing inserted: a tombstone, or a key another creator inserted first, is
			// what everyone reads.
			k, err = read(get.QueryRowContext(ctx, r.subject), r.subject)
		}
		if err != nil && !errors.Is(err, eventschema.ErrSubjectErased) {
			failAll(err)
			return
		}
		outcomes[i] = createOutcome{key: k, err: err}
	}
	if err := tx.Commit(); err != nil {
		failAll(err)
		return
	}
	for i, r := range batch {
		r.done <- outcomes[i]
	}
}

// Get implements eventschema.Keys.
func (s *Store) Get(ctx context.Context, subject string) (eventschema.Key, error) {
	done, err := s.use()
	if err != nil {
		return eventschema.Key{}, err
	}
	defer done()
	return read(s.get.QueryRowContext(ctx, subject), subject)
}

// getManyChunk is how many subjects one GetMany statement looks up.
const getManyChunk = 500

// GetMany looks up many subjects at once (a rebuild opens a page of events at a time): the key
// of each subject the store has, the zero Key for an erased one. A subject the store never had
// is left out; Get tells it apart.
func (s *Store) GetMany(ctx context.Context, subjects []string) (map[string]eventschema.Key, error) {
	done, err := s.use()
	if err != nil {
		return nil, err
	}
	defer done()
	out := make(map[string]eventschema.Key, len(subjects))
	args := make([]any, 0, getManyChunk)
	for from := 0; from < len(subjects); from += getManyChunk {
		chunk := subjects[from:min(from+getManyChunk, len(subjects))]
		args = args[:0]
		for _, subject := range chunk {
			args = append(args, subject)
		}
		query := `SELECT subject, key_id, material FROM subject_keys WHERE subject IN (?` +
			strings.Repeat(`,?`, len(chunk)-1) + `)`
		if err := s.readMany(ctx, query, args, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (s *Store) readMany(ctx context.Context, query string, args []any, out map[string]eventschema.Key) error {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("keys of %d subjects: %w", len(args), err)
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var (
			subject  string
			id       sql.NullString
			material []byte
		)
		if err := rows.Scan(&subject, &id, &material); err != nil {
			return fmt.Errorf("keys of %d subjects: %w", len(args), err)
		}
		k, err := keyFrom(subject, id, material)
		if err != nil {
			return err
		}
		out[subject] = k
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("keys of %d subjects: %w", len(args), err)
	}
	return nil
}

func read(row *sql.Row, subject string) (eventschema.Key, error) {
	var (
		id       sql.NullString
		material []byte
	)
	switch err := row.Scan(&id, &material); {
	case errors.Is(err, sql.ErrNoRows):
		return eventschema.Key{}, fmt.Errorf("%s: %w", subject, eventschema.ErrKeyNotFound)
	case err != nil:
		return eventschema.Key{}, fmt.Errorf("key of %s: %w", subject, err)
	}
	if !id.Valid {
		return eventschema.Key{}, fmt.Errorf("%s: %w", subject, eventschema.ErrSubjectErased)
	}
	return keyFrom(subject, id, material)
}

// keyFrom is the key a row of subject_keys holds: the zero Key for an erased subject (no key id).
func keyFrom(subject string, id sql.NullString, material []byte) (eventschema.Key, error) {
	if !id.Valid {
		return eventschema.Key{}, nil
	}
	k, err := eventschema.NewKey(id.String, material)
	if err != nil {
		return eventschema.Key{}, fmt.Errorf("key of %s: %w", subject, err)
	}
	return k, nil
}

// Destroy implements eventschema.Keys: the key's bytes are overwritten (secure_delete) and the
// write-ahead log that held them is checkpointed and truncated.
func (s *Store) Destroy(ctx context.Context, subject string) error {
	done, err := s.use()
	if err != nil {
		return err
	}
	defer done()
	now := time.Now().UnixMilli()
	if _, err := s.db.ExecContext(ctx, `INSERT INTO subject_keys (subject, key_id, material, created_ms, destroyed_ms)
		VALUES (?, NULL, NULL, ?, ?)
		ON CONFLICT (subject) DO UPDATE SET key_id = NULL, material = NULL,
			destroyed_ms = coalesce(subject_keys.destroyed_ms, excluded.destroyed_ms)`, subject, now, now); err != nil {
		return fmt.Errorf("destroy key of %s: %w", subject, err)
	}
	// The destroyed page's old image sits in the WAL until a checkpoint copies the new one
	// over it; TRUNCATE then empties the log. A busy reader can keep the checkpoint from
	// finishing: the next destroy (or SQLite's own checkpoints) completes it.
	if _, err := s.db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return fmt.Errorf("destroy key of %s: checkpoint: %w", subject, err)
	}
	return nil
}

// Count counts the live keys and the tombstones, for reports.
func (s *Store) Count(ctx context.Context) (live, erased int, err error) {
	done, err := s.use()
	if err != nil {
		return 0, 0, err
	}
	defer done()
	err = s.db.QueryRowContext(ctx, `SELECT count(key_id), count(*) - count(key_id) FROM subject_keys`).Scan(&live, &erased)
	if err != nil {
		return 0, 0, fmt.Errorf("count keys: %w", err)
	}
	return live, erased, nil
}
