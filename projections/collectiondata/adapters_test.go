package collectiondata_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/keystore"
	"github.com/samla/samla/projections/collectiondata"
	"github.com/samla/samla/projections/collectiondata/datatest"
	"github.com/samla/samla/projections/readdb/readdbtest"
	"github.com/samla/samla/query"
)

// suiteKeys seals the personal data of every contract test: the suite runs against the
// adapters as the read models use them, behind Sealing.
var suiteKeys = keystore.NewMemory()

func sealedSQLite(ctx context.Context, db *sql.DB) (collectiondata.Store, error) {
	s, err := collectiondata.NewSQLite(ctx, db)
	if err != nil {
		return nil, err
	}
	return collectiondata.Sealing(s, suiteKeys), nil
}

func sealedClickHouse(ctx context.Context, conn driver.Conn) (collectiondata.Store, error) {
	s, err := collectiondata.NewClickHouse(ctx, conn)
	if err != nil {
		return nil, err
	}
	return collectiondata.Sealing(s, suiteKeys), nil
}

func TestSQLiteStore(t *testing.T) {
	readdbtest.RunSQLite(t, sealedSQLite, datatest.Run)
}

func TestClickHouseStore(t *testing.T) {
	readdbtest.RunClickHouse(t, sealedClickHouse, datatest.Run)
}

// The personal values the tests below store; no column may hold them in plain text.
const (
	personalNumber = "191212121212"
	ownerName      = "Tolvan Tolvansson"
	email          = "tolvan@example.se"
	pdf            = "%PDF-1.7 Tolvan Tolvansson career statement"
)

func personalRow(id, userUUID string) (collectiondata.Row, collectiondata.Document) {
	r := collectiondata.Row{CollectionID: id, Tenant: "acme", Company: "se-demo-pension", Product: "WEALTH",
		Status: "COMPLETED", UserUUID: userUUID, UpdatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Revision: 5,
		Content: collectiondata.Content{Pensions: []collection.Pension{{ID: "P1"}}},
		Personal: collectiondata.Personal{InsuredPersonNames: map[string]string{"P1": ownerName},
			PersonalInformation: &collection.PersonalInformation{PersonalNumber: ptr(personalNumber), Email: ptr(email)}}}
	d := collectiondata.Document{CollectionID: id, DocumentID: "d1", Tenant: "acme", Kind: collection.DocumentFrenchCareerStatement,
		ContentType: "application/pdf", Size: int64(len(pdf)), SHA256: "x", At: r.UpdatedAt, Content: []byte(pdf), Revision: 4}
	return r, d
}

func ptr(s string) *string { return &s }

// checkSealed stores personal data through Sealing, finds none of it in plain text in dump (every
// column of both tables; the records are personal data too), and reads it back: plain for the
// reader, erased as absent (no records, no names), and a lost key as an error.
func checkSealed(t *testing.T, raw collectiondata.Store, dump func() string) {
	t.Helper()
	ctx := context.Background()
	keys := keystore.NewMemory()
	s := collectiondata.Sealing(raw, keys)
	kept, keptDoc := personalRow("c-kept", "u-kept")
	gone, goneDoc := personalRow("c-gone", "")
	if err := s.Upsert(ctx, []collectiondata.Row{kept, gone}, []collectiondata.Document{keptDoc, goneDoc}); err != nil {
		t.Fatal(err)
	}
	all := dump()
	for _, secret := range []string{personalNumber, ownerName, "Tolvan", email, "PDF-1.7", `"P1"`} {
		if strings.Contains(all, secret) {
			t.Fatalf("a stored column holds %q in plain text:\n%s", secret, all)
		}
	}
	if !strings.Contains(all, `"subject":"user-u-kept"`) || !strings.Contains(all, `"subject":"collection-c-gone"`) {
		t.Fatalf("not sealed under the collections' subjects:\n%s", all)
	}
	reader := collectiondata.NewReader(s)
	v, err := reader.GetData(ctx, "acme", "c-kept")
	if err != nil || v.PersonalInformation == nil || *v.PersonalInformation.PersonalNumber != personalNumber ||
		*v.Pensions[0].InsuredPersonName != ownerName {
		t.Fatalf("read back: %#v, %v", v, err)
	}
	doc, err := reader.GetDocument(ctx, "acme", "c-kept", collection.DocumentFrenchCareerStatement)
	if err != nil || string(doc.Content) != pdf {
		t.Fatalf("document read back: %q, %v", doc.Content, err)
	}

	if err := keys.Destroy(ctx, "collection-c-gone"); err != nil {
		t.Fatal(err)
	}
	v, err = reader.GetData(ctx, "acme", "c-gone")
	if err != nil || v.PersonalInformation != nil || len(v.Pensions) != 0 || v.Status != "COMPLETED" {
		t.Fatalf("erased subject reads as %#v, %v", v, err)
	}
	if _, err := reader.GetDocument(ctx, "acme", "c-gone", collection.DocumentFrenchCareerStatement); !errors.Is(err, query.ErrNotFound) {
		t.Fatalf("an erased subject's document: %v", err)
	}
	// Written again after the erasure, the row keeps no personal data.
	gone.Revision = 6
	if err := s.Upsert(ctx, []collectiondata.Row{gone}, nil); err != nil {
		t.Fatal(err)
	}

	lost := collectiondata.NewReader(collectiondata.Sealing(raw, keystore.NewMemory()))
	if _, err := lost.GetData(ctx, "acme", "c-kept"); !errors.Is(err, eventschema.ErrKeyNotFound) || errors.Is(err, query.ErrNotFound) {
		t.Fatalf("a lost key: %v", err)
	}
	if _, err := lost.GetDocument(ctx, "acme", "c-kept", collection.DocumentFrenchCareerStatement); !errors.Is(err, eventschema.ErrKeyNotFound) {
		t.Fatalf("a lost key's document: %v", err)
	}
}

func TestSQLiteStoresPersonalDataSealed(t *testing.T) {
	db := readdbtest.SQLite(t)
	raw, err := collectiondata.NewSQLite(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = raw.Close() })
	checkSealed(t, raw, func() string {
		var b strings.Builder
		for _, table := range []string{"collection_data", "collection_documents"} {
			rows, err := db.Query(`SELECT * FROM ` + table)
			if err != nil {
				t.Fatal(err)
			}
			cols, _ := rows.Columns()
			for rows.Next() {
				vals := make([]any, len(cols))
				ptrs := make([]any, len(cols))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				if err := rows.Scan(ptrs...); err != nil {
					t.Fatal(err)
				}
				for _, v := range vals {
					if b2, ok := v.([]byte); ok {
						v = string(b2)
					}
					fmt.Fprintf(&b, "%v\t", v)
				}
				b.WriteString("\n")
			}
			_ = rows.Close()
		}
		return b.String()
	})
}

func TestClickHouseStoresPersonalDataSealed(t *testing.T) {
	conn := readdbtest.ClickHouse(t)
	ctx := context.Background()
	raw, err := collectiondata.NewClickHouse(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	checkSealed(t, raw, func() string {
		var b strings.Builder
		for _, q := range []string{
			`SELECT concat(collection_id, tenant, company, product, status, data_json, personal_json, user_uuid) FROM collection_data`,
			`SELECT concat(collection_id, document_id, tenant, kind, content_type, file_name, sha256, personal_content) FROM collection_documents`,
		} {
			rows, err := conn.Query(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var s string
				if err := rows.Scan(&s); err != nil {
					t.Fatal(err)
				}
				b.WriteString(s + "\n")
			}
			_ = rows.Close()
		}
		return b.String()
	})
}

// TestSQLiteServesRowsFromBeforeSealing: a data dir from before sealing holds personal data in
// plain text; it is served as it is.
func TestSQLiteServesRowsFromBeforeSealing(t *testing.T) {
	ctx := context.Background()
	db := readdbtest.SQLite(t)
	for _, q := range []string{
		`CREATE TABLE collection_data (collection_id TEXT NOT NULL PRIMARY KEY, tenant TEXT NOT NULL, company TEXT NOT NULL,
			product TEXT NOT NULL, status TEXT NOT NULL, data_json TEXT NOT NULL, personal_json TEXT,
			updated_at_ms INTEGER NOT NULL, revision INTEGER NOT NULL)`,
		`INSERT INTO collection_data VALUES ('c-old', 'acme', 'se-demo-insurer', 'INSURANCE', 'COMPLETED',
			'{"insurances":[{"id":"ins-1","insuranceType":"HOME"}]}', '{"holderNames":{"ins-1":"Tolvan Tolvansson"}}', 1000, 3)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := collectiondata.NewSQLite(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = raw.Close() })
	v, err := collectiondata.NewReader(collectiondata.Sealing(raw, keystore.NewMemory())).GetData(ctx, "acme", "c-old")
	if err != nil || len(v.Insurances) != 1 || v.Insurances[0].HolderName == nil || *v.Insurances[0].HolderName != ownerName {
		t.Fatalf("a row from before sealing: %#v, %v", v, err)
	}
}
