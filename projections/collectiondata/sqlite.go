package collectiondata

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/samla/samla/projections/readdb"
)

// sqliteSchema is the read model's SQLite DDL. Times are Unix milliseconds (readdb.Millis).
// data_json is the collected Content without personal data ("{}" when none); personal_json and
// personal_content hold the personal data and nothing else, NULL when there is none, so that an
// erasure is an UPDATE … SET personal_json = NULL, personal_content = NULL. Both are ordinary
// rowid tables: their rows can be large (a document is up to 10 MiB), which WITHOUT ROWID
// tables handle badly.
const sqliteSchema = `
CREATE TABLE IF NOT EXISTS collection_data (
	collection_id TEXT    NOT NULL PRIMARY KEY,
	tenant        TEXT    NOT NULL,
	company       TEXT    NOT NULL,
	product       TEXT    NOT NULL,
	status        TEXT    NOT NULL,
	data_json     TEXT    NOT NULL,
	personal_json TEXT,
	updated_at_ms INTEGER NOT NULL,
	revision      INTEGER NOT NULL,
	user_uuid     TEXT    NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS collection_documents (
	collection_id    TEXT    NOT NULL,
	document_id      TEXT    NOT NULL,
	tenant           TEXT    NOT NULL,
	kind             TEXT    NOT NULL,
	content_type     TEXT    NOT NULL,
	file_name        TEXT    NOT NULL,
	size             INTEGER NOT NULL,
	sha256           TEXT    NOT NULL,
	at_ms            INTEGER NOT NULL,
	personal_content BLOB,
	revision         INTEGER NOT NULL,
	PRIMARY KEY (collection_id, document_id)
);
`

const sqliteColumns = `collection_id, tenant, company, product, status, data_json, personal_json,
	updated_at_ms, revision, user_uuid`

// sqliteUpsert only overwrites a row with a newer revision, so that one statement makes the
// write idempotent and order-safe (at-least-once delivery, rebuilds racing late deliveries).
const sqliteUpsert = `INSERT INTO collection_data (` + sqliteColumns + `)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (collection_id) DO UPDATE SET
	tenant = excluded.tenant, company = excluded.company, product = excluded.product,
	status = excluded.status, data_json = excluded.data_json, personal_json = excluded.personal_json,
	updated_at_ms = excluded.updated_at_ms, revision = excluded.revision, user_uuid = excluded.user_uuid
WHERE excluded.revision > collection_data.revision`

const sqliteDocMeta = `collection_id, document_id, tenant, kind, content_type, file_name, size,
	sha256, at_ms, revision`

const sqliteDocUpsert = `INSERT INTO collection_documents (` + sqliteDocMeta + `, personal_content)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (collection_id, document_id) DO UPDATE SET
	tenant = excluded.tenant, kind = excluded.kind, content_type = excluded.content_type,
	file_name = excluded.file_name, size = excluded.size, sha256 = excluded.sha256,
	at_ms = excluded.at_ms, revision = excluded.revision, personal_content = excluded.personal_content
WHERE excluded.revision > collection_documents.revision`

// The data endpoints' reads, prepared once.
const (
	sqliteGet = `SELECT ` + sqliteColumns + ` FROM collection_data WHERE collection_id = ? AND tenant = ?`
	// sqliteDocuments lists without the content, only whether there is one: listing must stay
	// cheap however large the files are.
	sqliteDocuments = `SELECT ` + sqliteDocMeta + `, personal_content IS NOT NULL AND length(personal_content) > 0
		FROM collection_documents WHERE collection_id = ? AND tenant = ? ORDER BY at_ms, document_id`
	sqliteDocument = `SELECT ` + sqliteDocMeta + `, personal_content FROM collection_documents
		WHERE collection_id = ? AND document_id = ? AND tenant = ?`
)

// SQLiteStore is the Store on an embedded SQLite database.
type SQLiteStore struct {
	db                                   *sql.DB
	written                              *readdb.Written // set by Fresh
	prepared                             readdb.Statements
	get, getMany, documents, getDocument *sql.Stmt
	upsert, upsertDoc                    *readdb.Bulk
}

var _ Store = (*SQLiteStore)(nil)

// NewSQLite creates the read model's tables in db when missing, prepares its reads and returns
// the store. The caller keeps ownership of db and closes the store before it.
func NewSQLite(ctx context.Context, db *sql.DB) (*SQLiteStore, error) {
	if _, err := db.ExecContext(ctx, sqliteSchema); err != nil {
		return nil, fmt.Errorf("migrate sqlite collection_data: %w", err)
	}
	// A table from before sealing gets the user column; its rows read '' (see Sealing).
	if err := readdb.EnsureSQLiteColumns(ctx, db, "collection_data", []string{"user_uuid"}, "TEXT NOT NULL DEFAULT ''"); err != nil {
		return nil, fmt.Errorf("migrate sqlite collection_data: %w", err)
	}
	// ErasePersonal finds a user's collections by it (after the column exists).
	if _, err := db.ExecContext(ctx, `CREATE INDEX IF NOT EXISTS collection_data_by_user ON collection_data (tenant, user_uuid)`); err != nil {
		return nil, fmt.Errorf("migrate sqlite collection_data: %w", err)
	}
	s := &SQLiteStore{db: db}
	s.get = s.prepared.Prepare(ctx, db, sqliteGet)
	s.getMany = s.prepared.Prepare(ctx, db, `SELECT `+sqliteColumns+` FROM collection_data WHERE collection_id `+readdb.SQLiteInKeys)
	s.documents = s.prepared.Prepare(ctx, db, sqliteDocuments)
	s.getDocument = s.prepared.Prepare(ctx, db, sqliteDocument)
	s.upsert = s.prepared.Bulk(ctx, db, sqliteUpsert)
	s.upsertDoc = s.prepared.Bulk(ctx, db, sqliteDocUpsert)
	if err := s.prepared.Err(); err != nil {
		return nil, fmt.Errorf("open sqlite collection_data: %w", err)
	}
	return s, nil
}

// Close releases the prepared statements; the database stays open.
func (s *SQLiteStore) Close() error { return s.prepared.Close() }

// Fresh tells the store that its tables were created empty for it and that nothing else writes
// them (a rebuild's): it then asks the table only for rows it wrote (readdb.Written).
func (s *SQLiteStore) Fresh() { s.written = readdb.NewWritten() }

// GetMany implements Store.
func (s *SQLiteStore) GetMany(ctx context.Context, ids []string) (map[string]Row, error) {
	return readdb.SQLiteMapByKeys(ctx, s.getMany, "collection data", scanSQLiteRow, func(r Row) string { return r.CollectionID }, s.written.Filter(ids))
}

// Upsert implements Store in one transaction: documents and rows commit together, however
// many there are.
func (s *SQLiteStore) Upsert(ctx context.Context, rows []Row, docs []Document) error {
	if len(rows) == 0 && len(docs) == 0 {
		return nil
	}
	err := readdb.InTx(ctx, s.db, func(tx *sql.Tx) error {
		if err := readdb.ExecBulk(ctx, tx, s.upsertDoc, docs, readdb.AppendValues(sqliteDocArgs)); err != nil {
			return fmt.Errorf("documents: %w", err)
		}
		return readdb.ExecBulk(ctx, tx, s.upsert, rows, readdb.AppendValues(sqliteRowArgs))
	})
	if err != nil {
		return fmt.Errorf("upsert collection data: %w", err)
	}
	for _, r := range rows {
		s.written.Add(r.CollectionID)
	}
	return nil
}

func sqliteRowArgs(r Row) ([]any, error) {
	content, err := encodeContent(r.Content)
	if err != nil {
		return nil, fmt.Errorf("collection data %s: %w", r.CollectionID, err)
	}
	personal, err := storedPersonal(r)
	if err != nil {
		return nil, fmt.Errorf("collection data %s: %w", r.CollectionID, err)
	}
	var personalArg any // NULL when there is no personal data
	if personal != "" {
		personalArg = personal
	}
	return []any{r.CollectionID, r.Tenant, r.Company, r.Product, r.Status,
		content, personalArg, readdb.Millis(r.UpdatedAt), int64(r.Revision), r.UserUUID}, nil
}

func sqliteDocArgs(d Document) ([]any, error) {
	var content any // NULL when there is no content
	if len(d.Content) > 0 {
		content = d.Content
	}
	return []any{d.CollectionID, d.DocumentID, d.Tenant, d.Kind, d.ContentType,
		d.FileName, d.Size, d.SHA256, readdb.Millis(d.At), int64(d.Revision), content}, nil
}

// Get implements Store.
func (s *SQLiteStore) Get(ctx context.Context, tenant, collectionID string) (Row, error) {
	var (
		found Row
		ok    bool
	)
	err := readdb.SQLiteStmtEach(ctx, s.get, "collection data", scanSQLiteRow, func(r Row) { found, ok = r, true },
		collectionID, tenant)
	if err != nil {
		return Row{}, err
	}
	if !ok {
		return Row{}, fmt.Errorf("collection data %s: %w", collectionID, readdb.ErrNotFound)
	}
	return found, nil
}

// Documents implements Store.
func (s *SQLiteStore) Documents(ctx context.Context, tenant, collectionID string) ([]Document, error) {
	var out []Document
	err := readdb.SQLiteStmtEach(ctx, s.documents, "collection documents", scanSQLiteDocMeta,
		func(d Document) { out = append(out, d) }, collectionID, tenant)
	if err != nil {
		return nil, fmt.Errorf("list documents of %s: %w", collectionID, err)
	}
	return out, nil
}

// Document implements Store.
func (s *SQLiteStore) Document(ctx context.Context, tenant, collectionID, documentID string) (Document, error) {
	var (
		found Document
		ok    bool
	)
	err := readdb.SQLiteStmtEach(ctx, s.getDocument, "collection documents", scanSQLiteDoc,
		func(d Document) { found, ok = d, true }, collectionID, documentID, tenant)
	if err != nil {
		return Document{}, fmt.Errorf("read document %s/%s: %w", collectionID, documentID, err)
	}
	if !ok {
		return Document{}, fmt.Errorf("document %s/%s: %w", collectionID, documentID, readdb.ErrNotFound)
	}
	return found, nil
}

// scanSQLiteDocMeta scans the sqliteDocMeta columns and whether there is content; scanSQLiteDoc
// scans them and personal_content after them.
func scanSQLiteDocMeta(rows readdb.Rows) (Document, error) { return scanSQLiteDocument(rows, false) }
func scanSQLiteDoc(rows readdb.Rows) (Document, error)     { return scanSQLiteDocument(rows, true) }

func scanSQLiteDocument(rows readdb.Rows, withContent bool) (Document, error) {
	var (
		d         Document
		atMs, rev int64
		content   []byte
	)
	dest := []any{&d.CollectionID, &d.DocumentID, &d.Tenant, &d.Kind, &d.ContentType, &d.FileName,
		&d.Size, &d.SHA256, &atMs, &rev}
	if withContent {
		dest = append(dest, &content)
	} else {
		dest = append(dest, &d.HasContent)
	}
	if err := rows.Scan(dest...); err != nil {
		return Document{}, fmt.Errorf("scan collection document: %w", err)
	}
	d.At, d.Revision = readdb.FromMillis(atMs), uint64(rev)
	if len(content) > 0 {
		d.Content, d.HasContent = content, true
	}
	return d, nil
}

// ErasePersonal implements Store in one transaction. The rows keep their revisions: the erasure
// is no event of the collections' streams.
func (s *SQLiteStore) ErasePersonal(ctx context.Context, tenant, userUUID string) error {
	if userUUID == "" {
		return nil
	}
	err := readdb.InTx(ctx, s.db, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE collection_documents SET personal_content = NULL, file_name = '', sha256 = ''
			WHERE tenant = ? AND collection_id IN (SELECT collection_id FROM collection_data WHERE tenant = ? AND user_uuid = ?)
			AND (personal_content IS NOT NULL OR file_name != '' OR sha256 != '')`, tenant, tenant, userUUID); err != nil {
			return fmt.Errorf("documents: %w", err)
		}
		_, err := tx.ExecContext(ctx, `UPDATE collection_data SET personal_json = NULL, data_json = '{}'
			WHERE tenant = ? AND user_uuid = ? AND (personal_json IS NOT NULL OR data_json != '{}')`, tenant, userUUID)
		return err
	})
	if err != nil {
		return fmt.Errorf("erase the personal data of user %s: %w", userUUID, err)
	}
	return nil
}

// Reset implements Store.
func (s *SQLiteStore) Reset(ctx context.Context) error {
	s.written.Reset()
	return readdb.DeleteAll(ctx, s.db, "collection_data", "collection_documents", "collection_data")
}

func scanSQLiteRow(rows readdb.Rows) (Row, error) {
	var (
		r                Row
		content          string
		personal         sql.NullString
		updatedMs, revis int64
	)
	if err := rows.Scan(&r.CollectionID, &r.Tenant, &r.Company, &r.Product, &r.Status, &content,
		&personal, &updatedMs, &revis, &r.UserUUID); err != nil {
		return Row{}, fmt.Errorf("scan collection data: %w", err)
	}
	var err error
	if r.Content, err = decodeContent(content); err != nil {
		return Row{}, fmt.Errorf("collection data %s: %w", r.CollectionID, err)
	}
	if err = readPersonal(&r, personal.String); err != nil {
		return Row{}, fmt.Errorf("collection data %s: %w", r.CollectionID, err)
	}
	r.UpdatedAt, r.Revision = readdb.FromMillis(updatedMs), uint64(revis)
	return r, nil
}
