package cancellations

import (
	"context"
	"fmt"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/samla/samla/projections/internal/sealed"
	"github.com/samla/samla/projections/readdb"
)

// clickhouseSchema is the read model's ClickHouse DDL, kept to what both 18.16 (CI) and current
// servers accept: String, UInt8, UInt32 and UInt64 columns, times as Unix milliseconds (0 for
// none), is_signed_and_sealed as 0 or 1, "" for no text. Analysts see a cancellation's client,
// collection, user id, company, insurance id and type, delivery method, template version, status
// and times; the sealed PDF is in cancellation_documents, sealed (personal), so that an erasure
// leaves its older row versions unreadable too.
//
// ReplacingMergeTree(revision) keeps the newest version of each row when parts merge, which is
// whenever the server likes, so every read collapses versions itself with FINAL. The server
// takes one statement per query, hence one entry per table.
var clickhouseSchema = []string{`
CREATE TABLE IF NOT EXISTS cancellations (
	document_id      String,
	tenant           String,
	collection_id    String,
	user_uuid        String,
	company          String,
	insurance_id     String,
	insurance_type   String,
	delivery_method  String,
	template_version UInt32,
	status           String,
	is_signed_and_sealed UInt8,
	requested_at_ms  UInt64,
	sent_at_ms       UInt64,
	deadline_ms      UInt64,
	signed_at_ms     UInt64,
	ended_at_ms      UInt64,
	cancel_reason    String,
	error_code       String,
	updated_at_ms    UInt64,
	revision         UInt64
) ENGINE = ReplacingMergeTree(revision)
ORDER BY document_id`, `
CREATE TABLE IF NOT EXISTS cancellation_documents (
	document_id      String,
	tenant           String,
	personal_content String,
	revision         UInt64
) ENGINE = ReplacingMergeTree(revision)
ORDER BY document_id`,
}

const (
	clickhouseColumns    = sqliteColumns
	clickhouseDocColumns = `document_id, tenant, personal_content, revision`
)

// ClickHouseStore is the Store on a ClickHouse database.
type ClickHouseStore struct {
	conn driver.Conn
}

var _ Store = (*ClickHouseStore)(nil)

// NewClickHouse creates the read model's tables when missing and returns the store. The caller
// keeps ownership of conn.
func NewClickHouse(ctx context.Context, conn driver.Conn) (*ClickHouseStore, error) {
	for _, ddl := range clickhouseSchema {
		if err := conn.Exec(ctx, ddl); err != nil {
			return nil, fmt.Errorf("migrate clickhouse cancellations: %w", err)
		}
	}
	return &ClickHouseStore{conn: conn}, nil
}

// GetMany implements Store. document_id is the sorting key, so filtering on it before FINAL
// keeps or drops every version of a row together.
func (s *ClickHouseStore) GetMany(ctx context.Context, ids []string) (map[string]Row, error) {
	return readdb.ClickHouseMapByKeys(ctx, s.conn, "cancellations", scanClickHouseRow, func(r Row) string { return r.DocumentID },
		`SELECT `+clickhouseColumns+` FROM cancellations FINAL WHERE document_id IN`, ids)
}

// Upsert implements Store. Among equal revisions ReplacingMergeTree keeps whichever version it
// merges last, and an older revision inserted late shows until a merge, so the revision rule is
// applied before inserting. One consumer per partition writes a cancellation's stream, so
// nothing interleaves with the read of the stored revisions but a rebalance, whose writers fold
// the same events into the same rows. There is no transaction across the two tables: documents
// go first (see Store).
func (s *ClickHouseStore) Upsert(ctx context.Context, rows []Row, docs []Document) error {
	if err := s.upsertDocs(ctx, readdb.LatestPerKey(docs, docKey, docRevision)); err != nil {
		return fmt.Errorf("upsert cancellation documents: %w", err)
	}
	if err := s.upsertRows(ctx, readdb.LatestPerKey(rows, rowKey, rowRevision)); err != nil {
		return fmt.Errorf("upsert cancellations: %w", err)
	}
	return nil
}

func (s *ClickHouseStore) upsertRows(ctx context.Context, rows []Row) error {
	return upsertNewer(ctx, s.conn, "cancellations", rows, rowKey, rowRevision, s.insertRows)
}

func (s *ClickHouseStore) upsertDocs(ctx context.Context, docs []Document) error {
	return upsertNewer(ctx, s.conn, "cancellation_documents", docs, docKey, docRevision, s.insertDocs)
}

// upsertNewer inserts the items of table (keyed by document_id) whose revision is above the
// stored one.
func upsertNewer[T any](ctx context.Context, conn driver.Conn, table string, items []T,
	key func(T) string, revision func(T) uint64, insert func(context.Context, []T) error) error {
	if len(items) == 0 {
		return nil
	}
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = key(it)
	}
	stored, err := readdb.StoredRevisions(ctx, conn, table, "document_id", ids)
	if err != nil {
		return err
	}
	return insert(ctx, readdb.KeepNewer(items, stored, key, revision))
}

// insertRows appends row versions as they are.
func (s *ClickHouseStore) insertRows(ctx context.Context, rows []Row) error {
	return readdb.InsertBatch(ctx, s.conn, "cancellations", clickhouseColumns, rows, func(r Row) ([]any, error) {
		if r.TemplateVersion < 0 || int64(r.TemplateVersion) > 1<<32-1 {
			return nil, fmt.Errorf("cancellation %s: template version %d out of range", r.DocumentID, r.TemplateVersion)
		}
		return []any{r.DocumentID, r.Tenant, r.CollectionID, r.UserUUID, r.Company, r.InsuranceID, r.InsuranceType,
			r.DeliveryMethod, uint32(r.TemplateVersion), r.Status, r.IsSignedAndSealed, readdb.UMillis(r.RequestedAt),
			readdb.UMillis(r.SentAt), readdb.UMillis(r.Deadline), readdb.UMillis(r.SignedAt), readdb.UMillis(r.EndedAt),
			r.CancelReason, r.ErrorCode, readdb.UMillis(r.UpdatedAt), r.Revision}, nil
	})
}

// insertDocs appends document versions as they are.
func (s *ClickHouseStore) insertDocs(ctx context.Context, docs []Document) error {
	return readdb.InsertBatch(ctx, s.conn, "cancellation_documents", clickhouseDocColumns, docs, func(d Document) ([]any, error) {
		return []any{d.DocumentID, d.Tenant, d.Content.String(), d.Revision}, nil
	})
}

// Get implements Store. tenant never changes for a cancellation, so, like the key, it is
// filtered on before FINAL.
func (s *ClickHouseStore) Get(ctx context.Context, tenant, documentID string) (Row, error) {
	var (
		found Row
		ok    bool
	)
	err := s.query(ctx, func(r Row) { found, ok = r, true }, `SELECT `+clickhouseColumns+` FROM cancellations FINAL
		WHERE document_id = ? AND tenant = ?`, documentID, tenant)
	if err != nil {
		return Row{}, err
	}
	if !ok {
		return Row{}, fmt.Errorf("cancellation %s: %w", documentID, readdb.ErrNotFound)
	}
	return found, nil
}

// ListByCollection implements Store. Every column of the filter and the order never changes for
// a cancellation, so they apply to the raw versions next to FINAL.
func (s *ClickHouseStore) ListByCollection(ctx context.Context, tenant, collectionID string, limit int) ([]Row, error) {
	if collectionID == "" || limit <= 0 {
		return nil, nil
	}
	var out []Row
	err := s.query(ctx, func(r Row) { out = append(out, r) }, `SELECT `+clickhouseColumns+` FROM cancellations FINAL
		WHERE tenant = ? AND collection_id = ? ORDER BY requested_at_ms, document_id LIMIT `+fmt.Sprint(limit),
		tenant, collectionID)
	if err != nil {
		return nil, fmt.Errorf("list cancellations of collection %s: %w", collectionID, err)
	}
	return out, nil
}

// ListByUser implements Store, as ListByCollection.
func (s *ClickHouseStore) ListByUser(ctx context.Context, tenant, userUUID string, after *Position, limit int) ([]Row, error) {
	if userUUID == "" || limit <= 0 {
		return nil, nil
	}
	where, args := byUserFilter(tenant, userUUID, after, false)
	var out []Row
	err := s.query(ctx, func(r Row) { out = append(out, r) }, `SELECT `+clickhouseColumns+` FROM cancellations FINAL
		WHERE `+where+` ORDER BY requested_at_ms, document_id LIMIT `+fmt.Sprint(limit), args...)
	if err != nil {
		return nil, fmt.Errorf("list cancellations of user %s: %w", userUUID, err)
	}
	return out, nil
}

// ListNeedingProvider implements Store. status and is_signed_and_sealed change from version to
// version, so the filter must see only the collapsed rows: applied to raw versions (as a
// PREWHERE would be, which servers move a WHERE to under FINAL when
// optimize_move_to_prewhere_if_final is on), an old PENDING version of a signed cancellation
// would survive as if it were current. An outer query over the FINAL subquery is correct under
// every server version and setting. The position's columns never change for a cancellation, so
// it is applied next to FINAL, where it spares the collapse of every row before it.
func (s *ClickHouseStore) ListNeedingProvider(ctx context.Context, after *Position, limit int) ([]Row, error) {
	var args []any
	inner := `SELECT ` + clickhouseColumns + ` FROM cancellations FINAL`
	if cond, condArgs := positionAfter(after, false); cond != "" {
		inner += ` WHERE ` + cond
		args = condArgs
	}
	q := `SELECT ` + clickhouseColumns + ` FROM (` + inner + `)
		WHERE status IN ? AND NOT (status = ? AND is_signed_and_sealed = 1) ORDER BY requested_at_ms, document_id`
	if limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", limit)
	}
	var out []Row
	if err := s.query(ctx, func(r Row) { out = append(out, r) }, q, append(args, readdb.InSet(openStatuses()), closed)...); err != nil {
		return nil, fmt.Errorf("list cancellations needing the provider: %w", err)
	}
	return out, nil
}

// Document implements Store; tenant is filtered on next to the key, before FINAL.
func (s *ClickHouseStore) Document(ctx context.Context, tenant, documentID string) (Document, error) {
	var (
		found Document
		ok    bool
	)
	err := s.queryDocs(ctx, func(d Document) { found, ok = d, true }, `SELECT `+clickhouseDocColumns+`
		FROM cancellation_documents FINAL WHERE document_id = ? AND tenant = ?`, documentID, tenant)
	if err != nil {
		return Document{}, err
	}
	if !ok {
		return Document{}, fmt.Errorf("cancellation document %s: %w", documentID, readdb.ErrNotFound)
	}
	return found, nil
}

// ErasePersonal implements Store as collectiondata's ClickHouse adapter does: ClickHouse has no
// in-place update but mutations, which finish whenever the server likes, so each affected
// document is written again at its own revision without its content. Among versions of equal
// revision ReplacingMergeTree keeps the last inserted, in FINAL reads and in merges alike, so the
// copy wins at once. The older copy stays on disk until the part merges, sealed under a key that
// the erasure destroyed. tenant and user_uuid never change for a cancellation, so the user's
// cancellations are found without FINAL; what a document holds is tested on the collapsed rows.
func (s *ClickHouseStore) ErasePersonal(ctx context.Context, tenant, userUUID string) error {
	if userUUID == "" {
		return nil
	}
	var ids []string
	err := readdb.ClickHouseEach(ctx, s.conn, "cancellations", scanString, func(id string) { ids = append(ids, id) },
		`SELECT DISTINCT document_id FROM cancellations WHERE tenant = ? AND user_uuid = ?`, tenant, userUUID)
	if err != nil {
		return fmt.Errorf("erase the documents of user %s's cancellations: %w", userUUID, err)
	}
	var erased []Document
	for _, chunk := range readdb.Chunks(ids, readdb.ClickHouseMaxIn) {
		err := s.queryDocs(ctx, func(d Document) {
			if !d.Content.IsZero() {
				d.Content = sealed.Value{}
				erased = append(erased, d)
			}
		}, `SELECT `+clickhouseDocColumns+` FROM cancellation_documents FINAL WHERE tenant = ? AND document_id IN ?`,
			tenant, readdb.InSet(chunk))
		if err != nil {
			return fmt.Errorf("erase the documents of user %s's cancellations: %w", userUUID, err)
		}
	}
	if err := s.insertDocs(ctx, erased); err != nil {
		return fmt.Errorf("erase the documents of user %s's cancellations: %w", userUUID, err)
	}
	return nil
}

// Reset implements Store.
func (s *ClickHouseStore) Reset(ctx context.Context) error {
	for _, table := range []string{"cancellation_documents", "cancellations"} {
		if err := s.conn.Exec(ctx, `TRUNCATE TABLE `+table); err != nil {
			return fmt.Errorf("reset %s: %w", table, err)
		}
	}
	return nil
}

func (s *ClickHouseStore) query(ctx context.Context, each func(Row), q string, args ...any) error {
	return readdb.ClickHouseEach(ctx, s.conn, "cancellations", scanClickHouseRow, each, q, args...)
}

func (s *ClickHouseStore) queryDocs(ctx context.Context, each func(Document), q string, args ...any) error {
	return readdb.ClickHouseEach(ctx, s.conn, "cancellation documents", scanClickHouseDoc, each, q, args...)
}

func scanClickHouseRow(rows readdb.Rows) (Row, error) {
	var (
		r                                                 Row
		template                                          uint32
		requested, sent, deadline, signed, ended, updated uint64
	)
	if err := rows.Scan(&r.DocumentID, &r.Tenant, &r.CollectionID, &r.UserUUID, &r.Company, &r.InsuranceID,
		&r.InsuranceType, &r.DeliveryMethod, &template, &r.Status, &r.IsSignedAndSealed, &requested, &sent,
		&deadline, &signed, &ended, &r.CancelReason, &r.ErrorCode, &updated, &r.Revision); err != nil {
		return Row{}, fmt.Errorf("scan cancellation: %w", err)
	}
	r.TemplateVersion = int(template)
	r.RequestedAt, r.SentAt, r.Deadline = readdb.FromUMillis(requested), readdb.FromUMillis(sent), readdb.FromUMillis(deadline)
	r.SignedAt, r.EndedAt, r.UpdatedAt = readdb.FromUMillis(signed), readdb.FromUMillis(ended), readdb.FromUMillis(updated)
	return r, nil
}

func scanClickHouseDoc(rows readdb.Rows) (Document, error) {
	var (
		d       Document
		content string
	)
	if err := rows.Scan(&d.DocumentID, &d.Tenant, &content, &d.Revision); err != nil {
		return Document{}, fmt.Errorf("scan cancellation document: %w", err)
	}
	var err error
	if d.Content, err = sealed.FromStored([]byte(content)); err != nil {
		return Document{}, fmt.Errorf("cancellation document %s: %w", d.DocumentID, err)
	}
	return d, nil
}

func scanString(rows readdb.Rows) (string, error) {
	var s string
	if err := rows.Scan(&s); err != nil {
		return "", fmt.Errorf("scan: %w", err)
	}
	return s, nil
}
