package collectiondata

import (
	"context"
	"fmt"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/samla/samla/projections/readdb"
)

// clickhouseSchema is the read model's ClickHouse DDL, kept to what both 18.16 (CI) and current
// servers accept: plain String and UInt64 columns (no JSON, Map, Bool, DateTime64 or
// LowCardinality), times as Unix milliseconds, JSON in String columns. data_json is the
// collected Content without personal data; personal_json and personal_content hold the personal
// data and nothing else ("" when there is none), so that an erasure rewrites exactly those
// columns.
//
// ClickHouse has no upsert: every write appends a row version and ReplacingMergeTree(revision)
// keeps the highest revision per key when parts merge. Merges happen whenever the server
// likes, so every read collapses versions itself with FINAL. The server takes one statement
// per query, hence one entry per table.
var clickhouseSchema = []string{`
CREATE TABLE IF NOT EXISTS collection_data (
	collection_id String,
	tenant        String,
	company       String,
	product       String,
	status        String,
	data_json     String,
	personal_json String,
	updated_at_ms UInt64,
	revision      UInt64,
	user_uuid     String
) ENGINE = ReplacingMergeTree(revision)
ORDER BY collection_id`, `
CREATE TABLE IF NOT EXISTS collection_documents (
	collection_id    String,
	document_id      String,
	tenant           String,
	kind             String,
	content_type     String,
	file_name        String,
	size             UInt64,
	sha256           String,
	at_ms            UInt64,
	personal_content String,
	revision         UInt64
) ENGINE = ReplacingMergeTree(revision)
ORDER BY (collection_id, document_id)`,
}

const clickhouseColumns = `collection_id, tenant, company, product, status, data_json, personal_json,
	updated_at_ms, revision, user_uuid`

const clickhouseDocMeta = `collection_id, document_id, tenant, kind, content_type, file_name, size,
	sha256, at_ms, revision`

// ClickHouseStore is the Store on a ClickHouse database.
type ClickHouseStore struct {
	conn driver.Conn
	memo *readdb.Memo[string, Row] // set by Fresh
}

var _ Store = (*ClickHouseStore)(nil)

// NewClickHouse creates the read model's tables when missing and returns the store. The caller
// keeps ownership of conn.
func NewClickHouse(ctx context.Context, conn driver.Conn) (*ClickHouseStore, error) {
	for _, ddl := range clickhouseSchema {
		if err := conn.Exec(ctx, ddl); err != nil {
			return nil, fmt.Errorf("migrate clickhouse collection_data: %w", err)
		}
	}
	// A table from before sealing gets the user column; its row versions read '' (see Sealing).
	if err := readdb.EnsureClickHouseColumns(ctx, conn, "collection_data", []string{"user_uuid"}, "String DEFAULT ''"); err != nil {
		return nil, fmt.Errorf("migrate clickhouse collection_data: %w", err)
	}
	return &ClickHouseStore{conn: conn}, nil
}

// Fresh tells the store that its tables were created empty for it and that nothing else writes
// them (a rebuild's): it then answers its own reads of the rows it wrote from memory
// (readdb.Memo).
func (s *ClickHouseStore) Fresh() { s.memo = readdb.NewMemo[string, Row]() }

// GetMany implements Store. Filtering on collection_id before FINAL is safe: it is the sorting
// key, so every version of a row passes or fails the filter together.
func (s *ClickHouseStore) GetMany(ctx context.Context, ids []string) (map[string]Row, error) {
	if rows, ok := s.memo.Get(ids); ok {
		return rows, nil
	}
	return readdb.ClickHouseMapByKeys(ctx, s.conn, "collection data", scanClickHouseRow, func(r Row) string { return r.CollectionID },
		`SELECT `+clickhouseColumns+` FROM collection_data FINAL WHERE collection_id IN`, ids)
}

// Upsert implements Store.
//
// ReplacingMergeTree keeps the highest revision, but among equal revisions it keeps whichever
// version it happens to merge last, and an older revision inserted late would still be seen
// until a merge. So the "ignore older or equal" rule is applied before inserting: the batch is
// reduced to one version per key and compared with the stored revisions. A projection is a
// single consumer per partition and a collection's stream lives in one partition, so no other
// writer can slip a revision in between the read and the insert, except during a consumer-group
// rebalance, where both writers fold the same events into identical rows.
//
// There is no transaction across the two tables: documents are inserted first, so a failure
// before the rows leaves the rows' revisions behind and the redelivered events are folded (and
// their documents written) again.
func (s *ClickHouseStore) Upsert(ctx context.Context, rows []Row, docs []Document) error {
	if err := s.upsertDocs(ctx, latestPerDocument(docs)); err != nil {
		return err
	}
	return s.upsertRows(ctx, latestPerCollection(rows))
}

func (s *ClickHouseStore) upsertRows(ctx context.Context, rows []Row) error {
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
		if stored, err = readdb.StoredRevisions(ctx, s.conn, "collection_data", "collection_id", ids); err != nil {
			return fmt.Errorf("upsert collection data: %w", err)
		}
	}
	if err := s.insertRows(ctx, readdb.KeepNewer(rows, stored, rowKey, rowRevision)); err != nil {
		return fmt.Errorf("upsert collection data: %w", err)
	}
	return nil
}

// insertRows appends row versions as they are.
func (s *ClickHouseStore) insertRows(ctx context.Context, rows []Row) error {
	err := readdb.InsertBatch(ctx, s.conn, "collection_data", clickhouseColumns, rows, func(r Row) ([]any, error) {
		content, err := encodeContent(r.Content)
		if err != nil {
			return nil, fmt.Errorf("collection data %s: %w", r.CollectionID, err)
		}
		personal, err := storedPersonal(r)
		if err != nil {
			return nil, fmt.Errorf("collection data %s: %w", r.CollectionID, err)
		}
		return []any{r.CollectionID, r.Tenant, r.Company, r.Product, r.Status, content,
			personal, readdb.UMillis(r.UpdatedAt), r.Revision, r.UserUUID}, nil
	})
	if err != nil {
		return err
	}
	s.memo.Put(rows, rowKey)
	return nil
}

func (s *ClickHouseStore) upsertDocs(ctx context.Context, docs []Document) error {
	if len(docs) == 0 {
		return nil
	}
	ids := make([]string, 0, len(docs))
	seen := map[string]bool{}
	for _, d := range docs {
		if !seen[d.CollectionID] {
			seen[d.CollectionID] = true
			ids = append(ids, d.CollectionID)
		}
	}
	stored, err := readdb.StoredSubRevisions(ctx, s.conn, "collection_documents", "collection_id", "document_id", ids)
	if err != nil {
		return fmt.Errorf("upsert collection documents: %w", err)
	}
	if err := s.insertDocs(ctx, readdb.KeepNewer(docs, stored, docKey, docRevision)); err != nil {
		return fmt.Errorf("upsert collection documents: %w", err)
	}
	return nil
}

// insertDocs appends document versions as they are.
func (s *ClickHouseStore) insertDocs(ctx context.Context, docs []Document) error {
	return readdb.InsertBatch(ctx, s.conn, "collection_documents", clickhouseDocMeta+`, personal_content`, docs,
		func(d Document) ([]any, error) {
			if d.Size < 0 {
				return nil, fmt.Errorf("collection document %s/%s: negative size %d", d.CollectionID, d.DocumentID, d.Size)
			}
			return []any{d.CollectionID, d.DocumentID, d.Tenant, d.Kind, d.ContentType, d.FileName,
				uint64(d.Size), d.SHA256, readdb.UMillis(d.At), d.Revision, d.Content}, nil
		})
}

// ErasePersonal implements Store. ClickHouse has no in-place update but mutations, which rewrite
// whole parts in the background and finish whenever the server likes; instead each affected row
// and document is written again at its own revision, without its personal data. Among versions
// of equal revision ReplacingMergeTree keeps the last inserted, in FINAL reads and in merges
// alike, so the copy wins at once; a newer revision written meanwhile wins over it, as it
// should. The older copies stay on disk until their parts merge: they hold personal data sealed
// only, under a key that the erasure destroyed. user_uuid and tenant never change for a
// collection, so they are filtered on next to FINAL; what a row holds is tested on the
// collapsed rows. Documents go first, as in Upsert.
func (s *ClickHouseStore) ErasePersonal(ctx context.Context, tenant, userUUID string) error {
	if userUUID == "" {
		return nil
	}
	var (
		ids    []string
		erased []Row
	)
	err := s.query(ctx, func(r Row) {
		ids = append(ids, r.CollectionID)
		if r.sealed != nil || !r.Personal.IsZero() || !r.Content.IsZero() {
			r.sealed, r.Personal, r.Content = nil, Personal{}, Content{}
			erased = append(erased, r)
		}
	}, `SELECT `+clickhouseColumns+` FROM collection_data FINAL WHERE tenant = ? AND user_uuid = ?`, tenant, userUUID)
	if err != nil {
		return fmt.Errorf("erase the personal data of user %s: %w", userUUID, err)
	}
	var docs []Document
	if len(ids) > 0 {
		err = s.queryDocs(ctx, scanClickHouseDoc, func(d Document) {
			if len(d.Content) > 0 || d.FileName != "" || d.SHA256 != "" {
				d.Content, d.FileName, d.SHA256 = nil, "", ""
				docs = append(docs, d)
			}
		}, `SELECT `+clickhouseDocMeta+`, personal_content FROM collection_documents FINAL
			WHERE tenant = ? AND collection_id IN ?`, tenant, readdb.InSet(ids))
		if err != nil {
			return fmt.Errorf("erase the personal data of user %s: %w", userUUID, err)
		}
	}
	if err := s.insertDocs(ctx, docs); err != nil {
		return fmt.Errorf("erase the personal data of user %s: %w", userUUID, err)
	}
	if err := s.insertRows(ctx, erased); err != nil {
		return fmt.Errorf("erase the personal data of user %s: %w", userUUID, err)
	}
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
		`SELECT `+clickhouseColumns+` FROM collection_data FINAL
		WHERE collection_id = ? AND tenant = ?`, collectionID, tenant)
	if err != nil {
		return Row{}, err
	}
	if !ok {
		return Row{}, fmt.Errorf("collection data %s: %w", collectionID, readdb.ErrNotFound)
	}
	return found, nil
}

// Documents implements Store. The content column is read only for whether there is one: listing
// must stay cheap however large the files are.
func (s *ClickHouseStore) Documents(ctx context.Context, tenant, collectionID string) ([]Document, error) {
	var out []Document
	err := s.queryDocs(ctx, scanClickHouseDocMeta, func(d Document) { out = append(out, d) },
		`SELECT `+clickhouseDocMeta+`, personal_content != '' FROM collection_documents FINAL
		WHERE collection_id = ? AND tenant = ? ORDER BY at_ms, document_id`, collectionID, tenant)
	if err != nil {
		return nil, fmt.Errorf("list documents of %s: %w", collectionID, err)
	}
	return out, nil
}

// Document implements Store.
func (s *ClickHouseStore) Document(ctx context.Context, tenant, collectionID, documentID string) (Document, error) {
	var (
		found Document
		ok    bool
	)
	err := s.queryDocs(ctx, scanClickHouseDoc, func(d Document) { found, ok = d, true },
		`SELECT `+clickhouseDocMeta+`, personal_content FROM collection_documents FINAL
		WHERE collection_id = ? AND document_id = ? AND tenant = ?`, collectionID, documentID, tenant)
	if err != nil {
		return Document{}, fmt.Errorf("read document %s/%s: %w", collectionID, documentID, err)
	}
	if !ok {
		return Document{}, fmt.Errorf("document %s/%s: %w", collectionID, documentID, readdb.ErrNotFound)
	}
	return found, nil
}

// Reset implements Store.
func (s *ClickHouseStore) Reset(ctx context.Context) error {
	for _, table := range []string{"collection_documents", "collection_data"} {
		if err := s.conn.Exec(ctx, `TRUNCATE TABLE `+table); err != nil {
			return fmt.Errorf("reset %s: %w", table, err)
		}
	}
	s.memo.Reset()
	return nil
}

func (s *ClickHouseStore) query(ctx context.Context, each func(Row), q string, args ...any) error {
	return readdb.ClickHouseEach(ctx, s.conn, "collection data", scanClickHouseRow, each, q, args...)
}

func scanClickHouseRow(rows readdb.Rows) (Row, error) {
	var (
		r                 Row
		content, personal string
		updatedMs         uint64
	)
	if err := rows.Scan(&r.CollectionID, &r.Tenant, &r.Company, &r.Product, &r.Status, &content,
		&personal, &updatedMs, &r.Revision, &r.UserUUID); err != nil {
		return Row{}, fmt.Errorf("scan collection data: %w", err)
	}
	var err error
	if r.Content, err = decodeContent(content); err != nil {
		return Row{}, fmt.Errorf("collection data %s: %w", r.CollectionID, err)
	}
	if err = readPersonal(&r, personal); err != nil {
		return Row{}, fmt.Errorf("collection data %s: %w", r.CollectionID, err)
	}
	r.UpdatedAt = readdb.FromUMillis(updatedMs)
	return r, nil
}

func (s *ClickHouseStore) queryDocs(ctx context.Context, scan func(readdb.Rows) (Document, error), each func(Document), q string, args ...any) error {
	return readdb.ClickHouseEach(ctx, s.conn, "collection documents", scan, each, q, args...)
}

// scanClickHouseDocMeta scans the clickhouseDocMeta columns and whether there is content;
// scanClickHouseDoc scans them and personal_content after them.
func scanClickHouseDocMeta(rows readdb.Rows) (Document, error) {
	return scanClickHouseDocument(rows, false)
}
func scanClickHouseDoc(rows readdb.Rows) (Document, error) { return scanClickHouseDocument(rows, true) }

func scanClickHouseDocument(rows readdb.Rows, withContent bool) (Document, error) {
	var (
		d          Document
		size, atMs uint64
		content    string
		hasContent uint8
		dest       = []any{&d.CollectionID, &d.DocumentID, &d.Tenant, &d.Kind, &d.ContentType,
			&d.FileName, &size, &d.SHA256, &atMs, &d.Revision}
	)
	if withContent {
		dest = append(dest, &content)
	} else {
		dest = append(dest, &hasContent)
	}
	if err := rows.Scan(dest...); err != nil {
		return Document{}, fmt.Errorf("scan collection document: %w", err)
	}
	d.Size, d.At, d.HasContent = int64(size), readdb.FromUMillis(atMs), hasContent != 0
	if content != "" {
		d.Content, d.HasContent = []byte(content), true
	}
	return d, nil
}
