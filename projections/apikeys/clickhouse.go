package apikeys

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/samla/samla/projections/readdb"
)

// clickhouseSchema is the key table's ClickHouse DDL for 18.16 and current servers: revoked is
// a UInt8 (no Bool type on 18.16), the end of a retiring key Unix milliseconds in UInt64 (0:
// none). ReplacingMergeTree(revision) keeps the newest version of a key; reads collapse
// versions with FINAL, because merges happen whenever the server likes.
const clickhouseSchema = `
CREATE TABLE IF NOT EXISTS api_keys (
	key_hash       String,
	client_id      String,
	key_id         String,
	revoked        UInt8,
	revision       UInt64,
	valid_until_ms UInt64 DEFAULT 0
) ENGINE = ReplacingMergeTree(revision)
ORDER BY key_hash`

const clickhouseColumns = `key_hash, client_id, key_id, revoked, valid_until_ms, revision`

// ClickHouseStore is the Store on a ClickHouse database.
type ClickHouseStore struct {
	conn driver.Conn
}

var _ Store = (*ClickHouseStore)(nil)

// NewClickHouse creates the key table when missing and returns the store. The caller keeps
// ownership of conn.
func NewClickHouse(ctx context.Context, conn driver.Conn) (*ClickHouseStore, error) {
	if err := conn.Exec(ctx, clickhouseSchema); err != nil {
		return nil, fmt.Errorf("migrate clickhouse api_keys: %w", err)
	}
	// A table made before retirements existed has no end column; every key in it has none.
	if err := readdb.EnsureClickHouseColumns(ctx, conn, "api_keys", []string{"valid_until_ms"}, "UInt64 DEFAULT 0"); err != nil {
		return nil, fmt.Errorf("migrate clickhouse api_keys: %w", err)
	}
	return &ClickHouseStore{conn: conn}, nil
}

// Upsert implements Store. Among equal revisions ReplacingMergeTree keeps whichever version it
// merges last, so the revision rule is applied before inserting, against the stored maximum;
// one consumer per partition writes a client's keys, so nothing interleaves with it.
func (s *ClickHouseStore) Upsert(ctx context.Context, rows []Row) error {
	rows = latestPerKey(rows)
	if len(rows) == 0 {
		return nil
	}
	hashes := make([]string, len(rows))
	for i, r := range rows {
		hashes[i] = r.KeyHash
	}
	stored, err := readdb.StoredRevisions(ctx, s.conn, "api_keys", "key_hash", hashes)
	if err != nil {
		return fmt.Errorf("upsert api keys: %w", err)
	}
	rows = readdb.KeepNewer(rows, stored, rowKey, rowRevision)
	err = readdb.InsertBatch(ctx, s.conn, "api_keys", clickhouseColumns, rows, func(r Row) ([]any, error) {
		var revoked uint8
		if r.Revoked {
			revoked = 1
		}
		return []any{r.KeyHash, r.ClientID, r.KeyID, revoked, readdb.UMillis(r.ValidUntil), r.Revision}, nil
	})
	if err != nil {
		return fmt.Errorf("upsert api keys: %w", err)
	}
	return nil
}

// Lookup implements Store. revoked and valid_until_ms change between versions, so they are
// tested on the collapsed row, not in the WHERE clause that may run before FINAL.
func (s *ClickHouseStore) Lookup(ctx context.Context, keyHash string, at time.Time) (Row, error) {
	r, ok, err := s.one(ctx, `SELECT `+clickhouseColumns+` FROM api_keys FINAL
		WHERE key_hash = ?`, keyHash)
	if err != nil {
		return Row{}, fmt.Errorf("look up api key: %w", err)
	}
	if !ok || r.Revoked || (!r.ValidUntil.IsZero() && !at.Before(r.ValidUntil)) {
		return Row{}, fmt.Errorf("api key: %w", readdb.ErrNotFound)
	}
	return r, nil
}

// ByKeyID implements Store. client_id and key_id never change for a key, so filtering on them
// before FINAL is safe.
func (s *ClickHouseStore) ByKeyID(ctx context.Context, clientID, keyID string) (Row, error) {
	r, ok, err := s.one(ctx, `SELECT `+clickhouseColumns+` FROM api_keys FINAL
		WHERE client_id = ? AND key_id = ? ORDER BY revision DESC LIMIT 1`, clientID, keyID)
	if err != nil {
		return Row{}, fmt.Errorf("read key %s of client %s: %w", keyID, clientID, err)
	}
	if !ok {
		return Row{}, fmt.Errorf("key %s of client %s: %w", keyID, clientID, readdb.ErrNotFound)
	}
	return r, nil
}

func (s *ClickHouseStore) one(ctx context.Context, q string, args ...any) (found Row, ok bool, err error) {
	err = readdb.ClickHouseEach(ctx, s.conn, "api keys", func(rows readdb.Rows) (Row, error) {
		var (
			r          Row
			revoked    uint8
			validUntil uint64
		)
		if err := rows.Scan(&r.KeyHash, &r.ClientID, &r.KeyID, &revoked, &validUntil, &r.Revision); err != nil {
			return Row{}, fmt.Errorf("scan api key: %w", err)
		}
		r.Revoked, r.ValidUntil = revoked != 0, readdb.FromUMillis(validUntil)
		return r, nil
	}, func(r Row) { found, ok = r, true }, q, args...)
	return found, ok, err
}

// Reset implements Store.
func (s *ClickHouseStore) Reset(ctx context.Context) error {
	if err := s.conn.Exec(ctx, `TRUNCATE TABLE api_keys`); err != nil {
		return fmt.Errorf("reset api_keys: %w", err)
	}
	return nil
}
