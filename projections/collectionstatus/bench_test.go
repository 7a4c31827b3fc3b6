package collectionstatus_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/keystore"
	"github.com/samla/samla/projections/collectionstatus"
	"github.com/samla/samla/projections/readdb/readdbtest"
	"github.com/samla/samla/query"
)

// benchPollers is how many status polls run at once: RunParallel starts this many goroutines
// per GOMAXPROCS.
const benchPollers = 16

// benchmarkReaderGet polls a read model of 1000 collections through the status endpoint's port,
// benchPollers×GOMAXPROCS polls at a time, as clients polling under load do. With qr, every
// row has an EID order's QR secret, sealed as the projector stores it, which every poll opens
// (the keys cached as the service caches them).
func benchmarkReaderGet(b *testing.B, s collectionstatus.Store, qr bool) {
	ctx := context.Background()
	const collections = 1000
	keys := keystore.NewCache(keystore.NewMemory(), 0, 0)
	rows := make([]collectionstatus.Row, collections)
	ids := make([]string, collections)
	for i := range rows {
		ids[i] = fmt.Sprintf("c-%04d", i)
		rows[i] = collectionstatus.Row{CollectionID: ids[i], Tenant: "acme", Company: "se-demo-insurer",
			Product: "INSURANCE", LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE", APIVersion: "2026-04-01",
			Status: "WAITING_FOR_USER_ACTION", ExtraInformation: map[string]any{"MESSAGE": "Scan"}, Revision: 3}
		if qr {
			sealed, err := eventschema.Seal(ctx, keys, collection.DataSubject(ids[i], ""),
				[]byte(`{"qrStartSecret":"d28db9a7-4cde-429e-a983-359be676944c"}`))
			if err != nil {
				b.Fatal(err)
			}
			rows[i].Personal = sealed
		}
	}
	if err := s.Upsert(ctx, rows); err != nil {
		b.Fatal(err)
	}
	var reader query.StatusReader = collectionstatus.NewReader(s, keys)
	b.ReportAllocs()
	b.SetParallelism(benchPollers)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, err := reader.Get(ctx, "acme", ids[i%collections]); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
}

func BenchmarkReaderGet(b *testing.B) {
	for _, qr := range []bool{false, true} {
		name := ""
		if qr {
			name = "/QRSecret"
		}
		b.Run("SQLite"+name, func(b *testing.B) {
			s, err := collectionstatus.NewSQLite(context.Background(), readdbtest.SQLite(b))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			benchmarkReaderGet(b, s, qr)
		})
		// The status view in front of SQLite: every poll from memory (the rows were written
		// through it).
		b.Run("View"+name, func(b *testing.B) {
			s, err := collectionstatus.NewSQLite(context.Background(), readdbtest.SQLite(b))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			benchmarkReaderGet(b, collectionstatus.Cached(s, collectionstatus.NewView(collectionstatus.DefaultViewCapacity)), qr)
		})
		b.Run("ClickHouse"+name, func(b *testing.B) {
			s, err := collectionstatus.NewClickHouse(context.Background(), readdbtest.ClickHouse(b))
			if err != nil {
				b.Fatal(err)
			}
			benchmarkReaderGet(b, s, qr)
		})
	}
}
