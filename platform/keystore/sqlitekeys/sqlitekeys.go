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
	"github.com/samla/samla/platform/keystore"
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
type Store struct {
	db *sql.DB

	mu     sync.RWMutex
	closed bool
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
	if _, err := db.Exec(schema); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open key store %q: migrate: %w", path, err)
	}
	var secure int
	if err := db.QueryRow(`PRAGMA secure_delete`).Scan(&secure); err != nil || secure != 1 {
		_ = db.Close()
		return nil, fmt.Errorf("open key store %q: secure_delete is off (%d, %v)", path, secure, err)
	}
	return &Store{db: db}, nil
}

// Close closes the file; later calls fail with keystore.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.db.Close()
}

func (s *Store) use() (func(), error) {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, keystore.ErrClosed
	}
	return s.mu.RUnlock, nil
}

// GetOrCreate implements eventschema.Keys. The insert and the read are one write transaction,
// so concurrent creators (also in other processes) all read the one key that was inserted.
func (s *Store) GetOrCreate(ctx context.Context, subject string) (eventschema.Key, error) {
	done, err := s.use()
	if err != nil {
		return eventschema.Key{}, err
	}
	defer done()
	if subject == "" {
		return eventschema.Key{}, errors.New("key store: empty data subject")
	}
	fresh, err := keystore.Generate()
	if err != nil {
		return eventschema.Key{}, err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return eventschema.Key{}, fmt.Errorf("key of %s: %w", subject, err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if _, err := tx.ExecContext(ctx, `INSERT INTO subject_keys (subject, key_id, material, created_ms)
		VALUES (?, ?, ?, ?) ON CONFLICT (subject) DO NOTHING`,
		subject, fresh.ID(), fresh.Material(), time.Now().UnixMilli()); err != nil {
		return eventschema.Key{}, fmt.Errorf("key of %s: %w", subject, err)
	}
	k, err := read(tx.QueryRowContext(ctx, `SELECT key_id, material FROM subject_keys WHERE subject = ?`, subject), subject)
	if err != nil {
		return eventschema.Key{}, err
	}
	if err := tx.Commit(); err != nil {
		return eventschema.Key{}, fmt.Errorf("key of %s: %w", subject, err)
	}
	return k, nil
}

// Get implements eventschema.Keys.
func (s *Store) Get(ctx context.Context, subject string) (eventschema.Key, error) {
	done, err := s.use()
	if err != nil {
		return eventschema.Key{}, err
	}
	defer done()
	return read(s.db.QueryRowContext(ctx, `SELECT key_id, material FROM subject_keys WHERE subject = ?`, subject), subject)
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
