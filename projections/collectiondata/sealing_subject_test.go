package collectiondata_test

import (
	"context"
	"errors"
	"testing"

	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/keystore"
	"github.com/samla/samla/projections/collectiondata"
	"github.com/samla/samla/projections/readdb/readdbtest"
)

// TestADocumentIsSealedUnderItsRowsSubject: a document is sealed under its row's subject, the
// stored row's when it is written alone; one of no row names no user, so it is refused rather
// than sealed under the collection's own subject, where a user's erasure would never reach it.
func TestADocumentIsSealedUnderItsRowsSubject(t *testing.T) {
	ctx := context.Background()
	raw, err := collectiondata.NewSQLite(ctx, readdbtest.SQLite(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = raw.Close() })
	keys := keystore.NewMemory()
	s := collectiondata.Sealing(raw, keys)
	row, doc := personalRow("c-user", "u-owner")
	if err := s.Upsert(ctx, nil, []collectiondata.Document{doc}); err == nil {
		t.Fatal("a document without its row was written")
	}
	if _, err := keys.Get(ctx, "collection-c-user"); !errors.Is(err, eventschema.ErrKeyNotFound) {
		t.Fatalf("a key was made for the collection's own subject: %v", err)
	}
	if err := s.Upsert(ctx, []collectiondata.Row{row}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Upsert(ctx, nil, []collectiondata.Document{doc}); err != nil {
		t.Fatal(err)
	}
	if err := keys.Destroy(ctx, "user-u-owner"); err != nil {
		t.Fatal(err)
	}
	got, err := s.Document(ctx, "acme", "c-user", doc.DocumentID)
	if err != nil || got.Content != nil {
		t.Fatalf("the document of an erased user reads %q, %v", got.Content, err)
	}
}
