package collectionstatus_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/samla/samla/platform/keystore"
	"github.com/samla/samla/projections/collectionstatus"
	"github.com/samla/samla/projections/readdb/readdbtest"
	"github.com/samla/samla/query"
)

// BenchmarkListByUserSQLite reads a default page (50, asked as 51) of one user's collections, from
// the middle of its list, in a read model of 20 000 collections of 100 users.
func BenchmarkListByUserSQLite(b *testing.B) {
	ctx := context.Background()
	s, err := collectionstatus.NewSQLite(ctx, readdbtest.SQLite(b))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	const collections, users = 20_000, 100
	base := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	rows := make([]collectionstatus.Row, collections)
	for i := range rows {
		rows[i] = collectionstatus.Row{CollectionID: fmt.Sprintf("c-%05d", i), Tenant: "acme", Company: "se-demo-insurer",
			Product: "INSURANCE", LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE", APIVersion: "2026-04-01",
			UserUUID: fmt.Sprintf("u-%03d", i%users), Status: "COMPLETED", CreatedAt: base.Add(time.Duration(i) * time.Second),
			UpdatedAt: base.Add(time.Duration(i) * time.Second), Revision: 3}
	}
	if err := s.Upsert(ctx, rows); err != nil {
		b.Fatal(err)
	}
	var reader query.UserCollectionsReader = collectionstatus.NewReader(s, keystore.NewMemory())
	after := &query.CollectionCursor{CreatedAt: base.Add(collections / 2 * time.Second), CollectionID: "c-10000"}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		page, err := reader.ListByUser(ctx, "acme", "u-042", after, 51)
		if err != nil || len(page) != 51 {
			b.Fatalf("page of %d, %v", len(page), err)
		}
	}
}
