package collectionstatus_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/platform/keystore"
	"github.com/samla/samla/projections/collectionstatus"
	"github.com/samla/samla/projections/collectionstatus/statustest"
	"github.com/samla/samla/projections/readdb/readdbtest"
)

func TestSQLiteStore(t *testing.T) {
	readdbtest.RunSQLite(t, collectionstatus.NewSQLite, statustest.Run)
}

func TestClickHouseStore(t *testing.T) {
	readdbtest.RunClickHouse(t, collectionstatus.NewClickHouse, statustest.Run)
}

// The tables as they were before the status-detail columns: a data directory or a ClickHouse
// database from then must be upgraded in place, its rows kept.
const (
	sqliteBeforeDetails = `CREATE TABLE collection_status (
	collection_id TEXT NOT NULL PRIMARY KEY, tenant TEXT NOT NULL, company TEXT NOT NULL,
	product TEXT NOT NULL, login_method TEXT NOT NULL, api_version TEXT NOT NULL,
	user_uuid TEXT NOT NULL, status TEXT NOT NULL, extra_information TEXT,
	created_at_ms INTEGER NOT NULL, updated_at_ms INTEGER NOT NULL, revision INTEGER NOT NULL
) WITHOUT ROWID`
	sqliteOldRow = `INSERT INTO collection_status (collection_id, tenant, company, product, login_method,
	api_version, user_uuid, status, extra_information, created_at_ms, updated_at_ms, revision)
	VALUES ('c-old', 'acme', 'se-demo-insurer', 'INSURANCE', 'PDF_UPLOAD', '2026-04-01', '', 'LOGIN', '{"MESSAGE":"hej"}', 1000, 2000, 2)`
	clickhouseBeforeDetails = `CREATE TABLE collection_status (
	collection_id String, tenant String, company String, product String, login_method String,
	api_version String, user_uuid String, status String, extra_information String,
	created_at_ms UInt64, updated_at_ms UInt64, revision UInt64
) ENGINE = ReplacingMergeTree(revision) ORDER BY collection_id`
	clickhouseOldInsert = `INSERT INTO collection_status (collection_id, tenant, company, product, login_method,
	api_version, user_uuid, status, extra_information, created_at_ms, updated_at_ms, revision)`
)

// checkUpgraded reads the row written before the upgrade and writes details to it.
func checkUpgraded(t *testing.T, s collectionstatus.Store) {
	t.Helper()
	ctx := context.Background()
	old, err := s.Get(ctx, "acme", "c-old")
	if err != nil {
		t.Fatalf("row from before the upgrade: %v", err)
	}
	if old.Status != "LOGIN" || old.ExtraInformation["MESSAGE"] != "hej" || old.Revision != 2 ||
		old.RequiredInputTypes != nil || old.Personal != nil || old.EIDOrder != nil || old.Deadline != nil ||
		old.Message != "" {
		t.Fatalf("row from before the upgrade = %#v", old)
	}
	next := old
	next.Status, next.Revision, next.RequiredInputTypes = "COLLECTION_INPUT_PENDING", 3, []string{"EMAIL"}
	next.Deadline = &collection.Deadline{Kind: collection.DeadlineCollectionInput, DueAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	if err := s.Upsert(ctx, []collectionstatus.Row{next}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "acme", "c-old")
	if err != nil || !reflect.DeepEqual(got, next) {
		t.Fatalf("after the upgrade: %#v, %v\nwant %#v", got, err, next)
	}
}

func TestSQLiteUpgradeAddsDetailColumns(t *testing.T) {
	db := readdbtest.SQLite(t)
	for _, q := range []string{sqliteBeforeDetails, sqliteOldRow} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	s, err := collectionstatus.NewSQLite(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	checkUpgraded(t, s)
	if _, err := collectionstatus.NewSQLite(context.Background(), db); err != nil {
		t.Fatalf("second migration: %v", err)
	}
}

func TestClickHouseUpgradeAddsDetailColumns(t *testing.T) {
	conn := readdbtest.ClickHouse(t)
	ctx := context.Background()
	if err := conn.Exec(ctx, clickhouseBeforeDetails); err != nil {
		t.Fatal(err)
	}
	// The native protocol sends rows as a data block; an INSERT … VALUES through Exec waits for one.
	batch, err := conn.PrepareBatch(ctx, clickhouseOldInsert)
	if err != nil {
		t.Fatal(err)
	}
	if err := batch.Append("c-old", "acme", "se-demo-insurer", "INSURANCE", "PDF_UPLOAD", "2026-04-01", "", "LOGIN",
		`{"MESSAGE":"hej"}`, uint64(1000), uint64(2000), uint64(2)); err != nil {
		t.Fatal(err)
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
	s, err := collectionstatus.NewClickHouse(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	checkUpgraded(t, s)
	if _, err := collectionstatus.NewClickHouse(ctx, conn); err != nil {
		t.Fatalf("second migration: %v", err)
	}
}

// A row written before sealing keeps its instructions and QR secret in plain text in columns of
// their own; it is still served, as it is, until its next status change seals it.
const (
	legacyInstructions = `[{"requestId":"r1","method":"GET","url":"https://company.example/eid"}]`
	legacyColumns      = `collection_id, tenant, company, product, login_method, api_version, user_uuid, status,
	extra_information, instructions, qr_start_secret, created_at_ms, updated_at_ms, revision`
)

func checkLegacyPlainRow(t *testing.T, s collectionstatus.Store) {
	t.Helper()
	view, err := collectionstatus.NewReader(s, keystore.NewMemory()).Get(context.Background(), "acme", "c-plain")
	if err != nil || view.QRStartSecret != "legacy-secret" || len(view.Instructions) != 1 || view.Instructions[0].URL != "https://company.example/eid" {
		t.Fatalf("a row from before sealing reads as %#v, %v", view, err)
	}
}

func TestSQLiteServesRowsFromBeforeSealing(t *testing.T) {
	db := readdbtest.SQLite(t)
	s, err := collectionstatus.NewSQLite(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO collection_status (`+legacyColumns+`) VALUES
		('c-plain', 'acme', 'se-demo-insurer', 'INSURANCE', 'M', '2026-04-01', '', 'WAITING_FOR_USER_ACTION', NULL, ?, 'legacy-secret', 1000, 2000, 2)`,
		legacyInstructions); err != nil {
		t.Fatal(err)
	}
	checkLegacyPlainRow(t, s)
}

func TestClickHouseServesRowsFromBeforeSealing(t *testing.T) {
	conn := readdbtest.ClickHouse(t)
	ctx := context.Background()
	s, err := collectionstatus.NewClickHouse(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := conn.PrepareBatch(ctx, `INSERT INTO collection_status (`+legacyColumns+`)`)
	if err != nil {
		t.Fatal(err)
	}
	if err := batch.Append("c-plain", "acme", "se-demo-insurer", "INSURANCE", "M", "2026-04-01", "", "WAITING_FOR_USER_ACTION",
		"", legacyInstructions, "legacy-secret", uint64(1000), uint64(2000), uint64(2)); err != nil {
		t.Fatal(err)
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
	checkLegacyPlainRow(t, s)
}

// checkLegacyPlainRowErased: the erasure of a row's user blanks the personal part a row from
// before sealing keeps in plain text, too.
func checkLegacyPlainRowErased(t *testing.T, s collectionstatus.Store) {
	t.Helper()
	if err := s.ErasePersonal(context.Background(), "acme", "u-legacy"); err != nil {
		t.Fatal(err)
	}
	row, err := s.Get(context.Background(), "acme", "c-plain")
	if err != nil || row.Personal != nil || row.Status != "WAITING_FOR_USER_ACTION" || row.Revision != 2 {
		t.Fatalf("the erased row from before sealing = %#v, %v", row, err)
	}
	view, err := collectionstatus.NewReader(s, keystore.NewMemory()).Get(context.Background(), "acme", "c-plain")
	if err != nil || view.QRStartSecret != "" || view.Instructions != nil {
		t.Fatalf("the erased row from before sealing reads as %#v, %v", view, err)
	}
}

func TestSQLiteErasesRowsFromBeforeSealing(t *testing.T) {
	db := readdbtest.SQLite(t)
	s, err := collectionstatus.NewSQLite(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO collection_status (`+legacyColumns+`) VALUES
		('c-plain', 'acme', 'se-demo-insurer', 'INSURANCE', 'M', '2026-04-01', 'u-legacy', 'WAITING_FOR_USER_ACTION', NULL, ?, 'legacy-secret', 1000, 2000, 2)`,
		legacyInstructions); err != nil {
		t.Fatal(err)
	}
	checkLegacyPlainRowErased(t, s)
	var instructions, secret string
	if err := db.QueryRow(`SELECT instructions, qr_start_secret FROM collection_status WHERE collection_id = 'c-plain'`).
		Scan(&instructions, &secret); err != nil || instructions != "" || secret != "" {
		t.Fatalf("the plain columns hold %q, %q (%v)", instructions, secret, err)
	}
}

func TestClickHouseErasesRowsFromBeforeSealing(t *testing.T) {
	conn := readdbtest.ClickHouse(t)
	ctx := context.Background()
	s, err := collectionstatus.NewClickHouse(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := conn.PrepareBatch(ctx, `INSERT INTO collection_status (`+legacyColumns+`)`)
	if err != nil {
		t.Fatal(err)
	}
	if err := batch.Append("c-plain", "acme", "se-demo-insurer", "INSURANCE", "M", "2026-04-01", "u-legacy", "WAITING_FOR_USER_ACTION",
		"", legacyInstructions, "legacy-secret", uint64(1000), uint64(2000), uint64(2)); err != nil {
		t.Fatal(err)
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
	checkLegacyPlainRowErased(t, s)
}
