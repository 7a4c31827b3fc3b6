package collectionstatus

import (
	"context"
	"fmt"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/samla/samla/projections/readdb"
)

// clickhouseSchema is the read model's ClickHouse DDL, kept to what both 18.16 (CI) and
// current servers accept: plain String and UInt64 columns (no DateTime64, Map, Bool, JSON or
// LowCardinality, which 18.16 lacks or gates behind a setting), times as Unix milliseconds,
// extra information as a JSON string ("" when absent), and the status details as storedDetails:
// JSON or plain text in String columns, "" for none, so no column needs Nullable.
//
// ClickHouse has no upsert: every write appends a row version and ReplacingMergeTree(revision)
// keeps the highest revision per collection_id when parts merge. Merges happen whenever the
// server likes, so every read collapses versions itself with FINAL.
const clickhouseSchema = `
CREATE TABLE IF NOT EXISTS collection_status (
	collection_id     String,
	tenant            String,
	company           String,
	product           String,
	login_method      String,
	api_version       String,
	user_uuid         String,
	status            String,
	extra_information String,
	required_input_types String,
	instructions      String,
	message           String,
	eid_order         String,
	qr_start_secret   String,
	deadline          String,
	personal          String,
	created_at_ms     UInt64,
	updated_at_ms     UInt64,
	revision          UInt64
) ENGINE = ReplacingMergeTree(revision)
ORDER BY collection_id`

const clickhouseColumns = `collection_id, tenant, company, product, login_method, api_version,
	user_uuid, status, extra_information, ` + detailColumns + `, created_at_ms, updated_at_ms, revision`

// ClickHouseStore is the Store on a ClickHouse database.
type ClickHouseStore struct {
	conn driver.Conn
	memo *readdb.Memo[string, Row] // set by Fresh
}

var _ Store = (*ClickHouseStore)(nil)

// NewClickHouse creates the read model's table when missing and returns the store. The caller
// keeps ownership of conn.
func NewClickHouse(ctx context.Context, conn driver.Conn) (*ClickHouseStore, error) {
	if err := conn.Exec(ctx, clickhouseSchema); err != nil {
		return nil, fmt.Errorf("migrate clickhouse collection_status: %w", err)
	}
	// A table created before the status-detail columns existed gets them; its row versions
	// read '' for them: no details, which is what they had.
	if err := readdb.EnsureClickHouseColumns(ctx, conn, "collection_status", detailColumnNames, "String DEFAULT ''"); err != nil {
		return nil, fmt.Errorf("migrate clickhouse collection_status: %w", err)
	}
	return &ClickHouseStore{conn: conn}, nil
}

// Fresh tells the store that its table was created empty for it and that nothing else writes
// it (a rebuild's): it then answers its own reads of what it wrote from memory (readdb.Memo).
func (s *ClickHouseStore) Fresh() { s.memo = readdb.NewMemo[string, Row]() }

// GetMany implements Store. Filtering on collection_id before FINAL is safe: it is the sorting
// key, so every version of a row passes or fails the filter together.
func (s *ClickHouseStore) GetMany(ctx context.Context, ids []string) (map[string]Row, error) {
	if rows, ok := s.memo.Get(ids); ok {
		return rows, nil
	}
	out := make(map[string]Row, len(ids))
	err := readdb.ClickHouseByKeys(ctx, s.conn, "collection statuses", scanClickHouseRow, func(r Row) { out[r.CollectionID] = r },
		`SELECT `+clickhouseColumns+` FROM collection_status FINAL WHERE collection_id IN`, ids)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Upsert implements Store.
//
// ReplacingMergeTree keeps the highest revision, but among equal revisions it keeps whichever
// version it happens to merge last, and an older revision inserted late would still be seen
// until a merge. So the "ignore older or equal" rule is applied before inserting: the batch is
// reduced to one row per collection and compared with the stored revisions. A projection is a
// single consumer per partition and a collection's stream lives in one partition, so no other
// writer can slip a revision in between the read and the insert, except during a consumer-group
// rebalance, where both writers fold the same events into identical rows.
func (s *ClickHouseStore) Upsert(ctx context.Context, rows []Row) error {
	rows = readdb.LatestPerKey(rows, rowKey, rowRevision)
	if len(rows) == 0 {
		return nil
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.CollectionID
	}
	stored, ok := s.memo.Revisions(ids, rowRevision)
	if !ok {
		var err error
		if stored, err = readdb.StoredRevisions(ctx, s.conn, "collection_status", "collection_id", ids); err != nil {
			return fmt.Errorf("upsert collection statuses: %w", err)
		}
	}
	if err := s.insert(ctx, readdb.KeepNewer(rows, stored, rowKey, rowRevision)); err != nil {
		return fmt.Errorf("upsert collection statuses: %w", err)
	}
	return nil
}

// ErasePersonal implements Store. ClickHouse has no in-place update but mutations, which rewrite
// whole parts in the background and finish whenever the server likes; instead each affected row
// is written again at its own revision, without its personal part. Among versions of equal
// revision ReplacingMergeTree keeps the last inserted, in FINAL reads and in merges alike, so the
// copy wins at once; a newer revision written meanwhile wins over it, as it should. The older
// copy stays on disk until the part merges: it holds the personal part sealed only, under a key
// that the erasure destroyed. user_uuid and tenant never change for a collection, so they are
// filtered on next to FINAL; whether a row holds a personal part changes, so that is tested on
// the collapsed rows.
func (s *ClickHouseStore) ErasePersonal(ctx context.Context, tenant, userUUID string) error {
	if userUUID == "" {
		return nil
	}
	var erased []Row
	err := s.query(ctx, func(r Row) {
		if r.Personal != nil {
			r.Personal = nil
			erased = append(erased, r)
		}
	}, `SELECT `+clickhouseColumns+` FROM collection_status FINAL WHERE tenant = ? AND user_uuid = ?`, tenant, userUUID)
	if err != nil {
		return fmt.Errorf("erase the personal parts of user %s: %w", userUUID, err)
	}
	if err := s.insert(ctx, erased); err != nil {
		return fmt.Errorf("erase the personal parts of user %s: %w", userUUID, err)
	}
	return nil
}

// insert appends row versions as they are.
func (s *ClickHouseStore) insert(ctx context.Context, rows []Row) error {
	err := readdb.InsertBatch(ctx, s.conn, "collection_status", clickhouseColumns, rows, func(r Row) ([]any, error) {
		extra, err := encodeExtra(r.ExtraInformation)
		if err != nil {
			return nil, fmt.Errorf("collection status %s: %w", r.CollectionID, err)
		}
		details, err := encodeDetails(r)
		if err != nil {
			return nil, fmt.Errorf("collection status %s: %w", r.CollectionID, err)
		}
		args := append([]any{r.CollectionID, r.Tenant, r.Company, r.Product, r.LoginMethod,
			r.APIVersion, r.UserUUID, r.Status, extra}, details.args()...)
		return append(args, readdb.UMillis(r.CreatedAt), readdb.UMillis(r.UpdatedAt), r.Revision), nil
	})
	if err != nil {
		return err
	}
	s.memo.Put(rows, rowKey)
	return nil
}

// Get implements Store. tenant never changes for a collection, so, like the key, it can be
// filtered on before FINAL collapses the versions.
func (s *ClickHouseStore) Get(ctx context.Context, tenant, collectionID string) (Row, error) {
	var (
		found Row
		ok    bool
	)
	err := s.query(ctx, func(r Row) { found, ok = r, true },
		`SELECT `+clickhouseColumns+` FROM collection_status FINAL
		WHERE collection_id = ? AND tenant = ?`, collectionID, tenant)
	if err != nil {
		return Row{}, err
	}
	if !ok {
		return Row{}, fmt.Errorf("collection status %s: %w", collectionID, readdb.ErrNotFound)
	}
	return found, nil
}

// ListNonFinal implements Store. status changes from version to version, so the filter must
// see only the collapsed rows: applied to raw versions (as a PREWHERE would be, and servers
// move WHERE to PREWHERE under FINAL when optimize_move_to_prewhere_if_final is on), an old
// RUNNING version of a finished collection would survive as if it were current. An outer
// query over the FINAL subquery is correct under every server version and setting. The
// position's columns never change for a collection, so it is applied next to FINAL, where it
// spares the collapse of every row before it.
func (s *ClickHouseStore) ListNonFinal(ctx context.Context, after *NonFinalPosition, limit int) ([]Row, error) {
	var args []any
	inner := `SELECT ` + clickhouseColumns + ` FROM collection_status FINAL`
	if cond, condArgs := nonFinalAfter(after, false); cond != "" {
		inner += ` WHERE ` + cond
		args = condArgs
	}
	q := `SELECT ` + clickhouseColumns + ` FROM (` + inner + `) WHERE status IN ? ORDER BY created_at_ms, collection_id`
	if limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", limit)
	}
	var out []Row
	if err := s.query(ctx, func(r Row) { out = append(out, r) }, q, append(args, readdb.InSet(nonFinalStatuses()))...); err != nil {
		return nil, fmt.Errorf("list non-final collections: %w", err)
	}
	return out, nil
}

// Reset implements Store.
func (s *ClickHouseStore) Reset(ctx context.Context) error {
	if err := s.conn.Exec(ctx, `TRUNCATE TABLE collection_status`); err != nil {
		return fmt.Errorf("reset collection_status: %w", err)
	}
	s.memo.Reset()
	return nil
}

func (s *ClickHouseStore) query(ctx context.Context, each func(Row), q string, args ...any) error {
	return readdb.ClickHouseEach(ctx, s.conn, "collection statuses", scanClickHouseRow, each, q, args...)
}

func scanClickHouseRow(rows readdb.Rows) (Row, error) {
	var (
		r                  Row
		extra              string
		details            storedDetails
		createdMs, updated uint64
	)
	dests := append([]any{&r.CollectionID, &r.Tenant, &r.Company, &r.Product, &r.LoginMethod,
		&r.APIVersion, &r.UserUUID, &r.Status, &extra}, details.dests()...)
	dests = append(dests, &createdMs, &updated, &r.Revision)
	if err := rows.Scan(dests...); err != nil {
		return Row{}, fmt.Errorf("scan collection status: %w", err)
	}
	if err := details.decodeInto(&r); err != nil {
		return Row{}, fmt.Errorf("collection status %s: %w", r.CollectionID, err)
	}
	var err error
	if r.ExtraInformation, err = decodeExtra(extra); err != nil {
		return Row{}, fmt.Errorf("collection status %s: %w", r.CollectionID, err)
	}
	r.CreatedAt, r.UpdatedAt = readdb.FromUMillis(createdMs), readdb.FromUMillis(updated)
	return r, nil
}
