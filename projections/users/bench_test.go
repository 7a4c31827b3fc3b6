package users_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/samla/samla/platform/keystore"
	"github.com/samla/samla/projections/readdb/readdbtest"
	"github.com/samla/samla/projections/users"
)

// BenchmarkIsLiveUserSQLite is the liveness check every request with a session token makes
// (nothing caches it), over 10 000 users, 16 checks per CPU at a time.
func BenchmarkIsLiveUserSQLite(b *testing.B) {
	ctx := context.Background()
	s, err := users.NewSQLite(ctx, readdbtest.SQLite(b))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	const n = 10_000
	ids := make([]string, n)
	rows := make([]users.Row, n)
	for i := range rows {
		ids[i] = fmt.Sprintf("0190f4a2-7c1e-7b3a-9a51-%012d", i)
		rows[i] = users.Row{UserUUID: ids[i], Tenant: "acme", Personal: []byte(`{"sealed":{}}`), CreatedAt: time.Now()}
	}
	if err := s.Upsert(ctx, rows); err != nil {
		b.Fatal(err)
	}
	reader := users.NewReader(s, keystore.NewMemory(), []byte("bench-secret-0123456789abcdef0123"))
	b.ReportAllocs()
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if live, err := reader.IsLiveUser(ctx, "acme", ids[i%n]); err != nil || !live {
				b.Errorf("IsLiveUser = %v, %v", live, err)
				return
			}
			i++
		}
	})
}
