//go:build unix

package httpcmd_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/samla/samla/command/app"
	"github.com/samla/samla/command/eventstore/sqlite"
	"github.com/samla/samla/command/httpcmd"
	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/company/companytest"
	"github.com/samla/samla/domain/user"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/platform/httpapi/httpapitest"
	"github.com/samla/samla/platform/keystore"
	"github.com/samla/samla/platform/keystore/sqlitekeys"
)

// BenchmarkCreateCollection is POST /collections through the Gin engine, the middleware and the
// application service onto the embedded stores as `samla run` assembles them: the SQLite event
// store and the SQLite key store behind its cache, both durable (fsync) before the 201. Many
// concurrent requests share the stores' group commits. Beside wall time per request it reports
// the CPU per request, which moves much less with a shared machine's load.
func BenchmarkCreateCollection(b *testing.B) {
	dir := b.TempDir()
	store, err := sqlite.Open(filepath.Join(dir, "events.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	keyStore, err := sqlitekeys.Open(filepath.Join(dir, "keys.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer keyStore.Close()
	keys := keystore.NewCache(keyStore, 0, 0)
	reg, err := eventschema.NewRegistry()
	if err != nil {
		b.Fatal(err)
	}
	repo := repository.New(store, reg, collection.Kind, repository.WithKeys(keys))
	users := repository.New(store, reg, user.Kind, repository.WithKeys(keys))
	svc := app.NewCollectionService(companytest.Catalog(), repo, users, nil)
	e := httpapi.NewEngine(httpapi.Options{Keys: httpapitest.Keys{acmeKey: "acme"}, RateLimit: httpapi.RateLimit{Disabled: true}})
	httpcmd.RegisterRoutes(e, httpcmd.Deps{Collections: svc, FingerprintKey: fingerprintKey, Now: time.Now})
	body := v2Body("se-demo-insurer", mock, pnParam("199001010017"))

	b.SetParallelism(16) // 32 requests in flight on 2 cores, as bench-http drives the service
	var mu sync.Mutex
	var lat []time.Duration
	cpu := processCPU()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		defer func() {
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
		for pb.Next() {
			t0 := time.Now()
			hr := httptest.NewRequest(http.MethodPost, "/collections", strings.NewReader(body))
			hr.Header.Set(httpapi.HeaderAPIKey, acmeKey)
			hr.Header.Set(httpapi.HeaderServiceVersion, "2026-04-01")
			hr.Header.Set("Content-Type", "application/json")
			w := httptest.NewRecorder()
			e.ServeHTTP(w, hr.WithContext(context.Background()))
			if w.Code != http.StatusCreated {
				b.Errorf("POST /collections: %d %s", w.Code, w.Body)
				return
			}
			mine = append(mine, time.Since(t0))
		}
	})
	b.StopTimer()
	b.ReportMetric(float64((processCPU()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
	if len(lat) > 0 {
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e6, "p99-ms")
	}
}

// processCPU is the CPU time this process has used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
