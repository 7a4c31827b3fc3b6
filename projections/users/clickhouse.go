package users

import (
	"context"
	"fmt"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/samla/samla/projections/internal/sealed"
	"github.com/samla/samla/projections/readdb"
)

// clickhouseSchema is the read model's ClickHouse DDL, kept to what both 18.16 (CI) and current
// servers accept: String and UInt columns (released is a UInt8, no Bool on 18.16), times as Unix
// milliseconds (0 for none), personal and holder as the sealed form ("" for none). Analysts see
// a user's client and times, and of each externalId reservation its keyed hash and its client,
// never an externalId nor who held it: both are sealed, so an erasure leaves the older row
// versions unreadable too.
//
// ReplacingMergeTree(revision) keeps the newest version of each row when parts merge, which is
// whenever the server likes, so every read collapses versions itself with FINAL.
const clickhouseSchema = `
CREATE TABLE IF NOT EXISTS users (
	user_uuid     String,
	tenant        String,
	personal      String,
	created_at_ms UInt64,
	deleted_at_ms UInt64,
	revision      UInt64
) ENGINE = ReplacingMergeTree(revision)
ORDER BY user_uuid`

const clickhouseExternalIDSchema = `
CREATE TABLE IF NOT EXISTS user_external_ids_v2 (
	external_id_key String,
	tenant          String,
	holder          String,
	released        UInt8,
	revision        UInt64
) ENGINE = ReplacingMergeTree(revision)
ORDER BY external_id_key`

// clickhouseLegacyExternalIDs is the reservations' table of before, whose row versions held
// their holders in plain text: dropped, with every version (the projection is "-v2" and fills
// the new table from the start).
const clickhouseLegacyExternalIDs = `DROP TABLE IF EXISTS user_external_ids`

const (
	clickhouseColumns           = `user_uuid, tenant, personal, created_at_ms, deleted_at_ms, revision`
	clickhouseExternalIDColumns = `external_id_key, tenant, holder, released, revision`
)

// ClickHouseStore is the Store on a ClickHouse database.
type ClickHouseStore struct {
	conn driver.Conn
	memo *readdb.Memo[string, Row] // set by Fresh
}

var _ Store = (*ClickHouseStore)(nil)

// Fresh tells the store that its tables were created empty for it and that nothing else writes
// them (a rebuild's): it then answers its own reads of the users it wrote from memory
// (readdb.Memo).
func (s *ClickHouseStore) Fresh() { s.memo = readdb.NewMemo[string, Row]() }

// NewClickHouse creates the read model's tables when missing and returns the store. The caller
// keeps ownership of conn.
func NewClickHouse(ctx context.Context, conn driver.Conn) (*ClickHouseStore, error) {
	for _, ddl := range []string{clickhouseSchema, clickhouseExternalIDSchema, clickhouseLegacyExternalIDs} {
		if err := conn.Exec(ctx, ddl); err != nil {
			return nil, fmt.Errorf("migrate clickhouse users: %w", err)
		}
	}
	return &ClickHouseStore{conn: conn}, nil
}

// GetMany implements Store. user_uuid is the sorting key, so filtering on it before FINAL keeps
// or drops every version of a row together.
func (s *ClickHouseStore) GetMany(ctx context.Context, ids []string) (map[string]Row, error) {
	if rows, ok := s.memo.Get(ids); ok {
		return rows, nil
	}
	return readdb.ClickHouseMapByKeys(ctx, s.conn, "users", scanClickHouseRow, func(r Row) string { return r.UserUUID },
		`SELECT `+clickhouseColumns+` FROM users FINAL WHERE user_uuid IN`, ids)
}

// Upsert implements Store. Among equal revisions ReplacingMergeTree keeps whichever version it
// merges last, and an older revision inserted late shows until a merge, so the revision rule is
// applied before inserting. One consumer per partition writes a user's stream, so nothing
// interleaves with the read of the stored revisions but a rebalance, whose writers fold the same
// events into the same rows.
func (s *ClickHouseStore) Upsert(ctx context.Context, rows []Row) error {
	rows = readdb.LatestPerKey(rows, rowKey, rowRevision)
	if len(rows) == 0 {
		return nil
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.UserUUID
	}
	stored, ok := s.memo.Revisions(ids, rowRevision)
	if !ok {
		var err error
		if stored, err = readdb.StoredRevisions(ctx, s.conn, "users", "user_uuid", ids); err != nil {
			return fmt.Errorf("upsert users: %w", err)
		}
	}
	rows = readdb.KeepNewer(rows, stored, rowKey, rowRevision)
	err := readdb.InsertBatch(ctx, s.conn, "users", clickhouseColumns, rows, func(r Row) ([]any, error) {
		return []any{r.UserUUID, r.Tenant, string(r.Personal), readdb.UMillis(r.CreatedAt), readdb.UMillis(r.DeletedAt),
			r.Revision}, nil
	})
	if err != nil {
		return fmt.Errorf("upsert users: %w", err)
	}
	s.memo.Put(rows, rowKey)
	return nil
}

// UpsertExternalIDs implements Store, with Upsert's revision rule.
func (s *ClickHouseStore) UpsertExternalIDs(ctx context.Context, rows []ExternalIDRow) error {
	rows = readdb.LatestPerKey(rows, externalIDKey, externalIDRevision)
	if len(rows) == 0 {
		return nil
	}
	keys := make([]string, len(rows))
	for i, r := range rows {
		keys[i] = r.Key
	}
	stored, err := readdb.StoredRevisions(ctx, s.conn, "user_external_ids_v2", "external_id_key", keys)
	if err != nil {
		return fmt.Errorf("upsert user external ids: %w", err)
	}
	rows = readdb.KeepNewer(rows, stored, externalIDKey, externalIDRevision)
	err = readdb.InsertBatch(ctx, s.conn, "user_external_ids_v2", clickhouseExternalIDColumns, rows, func(r ExternalIDRow) ([]any, error) {
		var released uint8
		if r.Released {
			released = 1
		}
		return []any{r.Key, r.Tenant, r.Holder.String(), released, r.Revision}, nil
	})
	if err != nil {
		return fmt.Errorf("upsert user external ids: %w", err)
	}
	return nil
}

// Get implements Store. A user's tenant never changes, so, like the key, it is filtered on
// before FINAL.
func (s *ClickHouseStore) Get(ctx context.Context, tenant, userUUID string) (Row, error) {
	return s.one(ctx, "user "+userUUID, `SELECT `+clickhouseColumns+` FROM users FINAL
		WHERE user_uuid = ? AND tenant = ?`, userUUID, tenant)
}

// GetExternalID implements Store. The key and the tenant never change for a reservation, so
// they are filtered on before FINAL.
func (s *ClickHouseStore) GetExternalID(ctx context.Context, tenant, key string) (ExternalIDRow, error) {
	var (
		found ExternalIDRow
		ok    bool
	)
	err := readdb.ClickHouseEach(ctx, s.conn, "user external ids", scanClickHouseExternalID,
		func(r ExternalIDRow) { found, ok = r, true }, `SELECT `+clickhouseExternalIDColumns+` FROM user_external_ids_v2 FINAL
		WHERE external_id_key = ? AND tenant = ?`, key, tenant)
	if err != nil {
		return ExternalIDRow{}, err
	}
	if !ok {
		return ExternalIDRow{}, fmt.Errorf("user external id: %w", readdb.ErrNotFound)
	}
	return found, nil
}

func scanClickHouseExternalID(rows readdb.Rows) (ExternalIDRow, error) {
	var (
		r        ExternalIDRow
		holder   string
		released uint8
	)
	if err := rows.Scan(&r.Key, &r.Tenant, &holder, &released, &r.Revision); err != nil {
		return ExternalIDRow{}, fmt.Errorf("scan user external id: %w", err)
	}
	var err error
	if r.Holder, err = sealed.FromStored([]byte(holder)); err != nil {
		return ExternalIDRow{}, fmt.Errorf("user external id: %w", err)
	}
	r.Released = released != 0
	return r, nil
}

func (s *ClickHouseStore) one(ctx context.Context, what, q string, args ...any) (Row, error) {
	var (
		found Row
		ok    bool
	)
	if err := readdb.ClickHouseEach(ctx, s.conn, "users", scanClickHouseRow, func(r Row) { found, ok = r, true }, q, args...); err != nil {
		return Row{}, err
	}
	if !ok {
		return Row{}, fmt.Errorf("%s: %w", what, readdb.ErrNotFound)
	}
	return found, nil
}

// Reset implements Store.
func (s *ClickHouseStore) Reset(ctx context.Context) error {
	for _, table := range []string{"users", "user_external_ids_v2"} {
		if err := s.conn.Exec(ctx, `TRUNCATE TABLE `+table); err != nil {
			return fmt.Errorf("reset %s: %w", table, err)
		}
	}
	s.memo.Reset()
	return nil
}

func scanClickHouseRow(rows readdb.Rows) (Row, error) {
	var (
		r                Row
		personal         string
		created, deleted uint64
	)
	if err := rows.Scan(&r.UserUUID, &r.Tenant, &personal, &created, &deleted, &r.Revision); err != nil {
		return Row{}, fmt.Errorf("scan user: %w", err)
	}
	if personal != "" {
		r.Personal = []byte(personal)
	}
	r.CreatedAt, r.DeletedAt = readdb.FromUMillis(created), readdb.FromUMillis(deleted)
	return r, nil
}
