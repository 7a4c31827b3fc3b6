package collectionstatus_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/samla/samla/projections/collectionstatus"
	"github.com/samla/samla/projections/readdb/readdbtest"
	"github.com/samla/samla/query"
)

// benchPollers is how many status polls run at once: RunParallel starts this many goroutines
// per GOMAXPROCS.
const benchPollers = 16

// benchmarkReaderGet polls a read model of 1000 collections through the status endpoint's port,
// benchPollers×GOMAXPROCS polls at a time, as clients polling under load do.
func benchmarkReaderGet(b *testing.B, s collectionstatus.Store) {
	ctx := context.Background()
	const collections = 1000
	rows := make([]collectionstatus.Row, collections)
	ids := make([]string, collections)
	for i := range rows {
		ids[i] = fmt.Sprintf("c-%04d", i)
		rows[i] = collectionstatus.Row{CollectionID: ids[i], Tenant: "acme", Company: "se-demo-insurer",
			Product: "INSURANCE", LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE", APIVersion: "2026-04-01",
			Status: "WAITING_FOR_USER_ACTION", ExtraInformation: map[string]any{"MESSAGE": "Scan"}, Revision: 3}
	}
	if err := s.Upsert(ctx, rows); err != nil {
		b.Fatal(err)
	}
	var reader query.StatusReader = collectionstatus.NewReader(s)
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
	b.Run("SQLite", func(b *testing.B) {
		s, err := collectionstatus.NewSQLite(context.Background(), readdbtest.SQLite(b))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		benchmarkReaderGet(b, s)
	})
	b.Run("ClickHouse", func(b *testing.B) {
		s, err := collectionstatus.NewClickHouse(context.Background(), readdbtest.ClickHouse(b))
		if err != nil {
			b.Fatal(err)
		}
		benchmarkReaderGet(b, s)
	})
}
