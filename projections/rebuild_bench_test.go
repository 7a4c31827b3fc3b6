package projections_test

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/command/eventstore/sqlite"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/keystore"
	"github.com/samla/samla/platform/keystore/sqlitekeys"
	"github.com/samla/samla/projections"
	"github.com/samla/samla/projections/internal/eventlog"
	"github.com/samla/samla/projections/readdb/readdbtest"
)

// benchRebuildCollections is how many collections the rebuild benchmarks replay, besides the
// world's clients, users, consents and cancellations: about 4.5 events each.
const benchRebuildCollections = 20000

// rebuildFixture is an event store of sealed events, as the repository appends them, with the
// key store that opens them, built once per benchmark binary: appending takes longer than a
// rebuild.
type rebuildFixture struct {
	dir    string
	keep   bool // SAMLA_BENCH_REBUILD_DIR: kept for the next run
	store  *sqlite.Store
	keys   eventschema.Keys
	events int
}

// fixtureComplete marks a kept fixture as complete; it holds the number of events.
const fixtureComplete = "COMPLETE"

// reuseFixture opens the fixture a previous run kept in dir, if it is complete, so that a
// profile of the rebuild is not mostly the fixture's sealing and appending.
func reuseFixture(dir string) bool {
	count, err := os.ReadFile(filepath.Join(dir, fixtureComplete))
	if err != nil {
		return false
	}
	events, err := strconv.Atoi(string(count))
	if err != nil {
		return false
	}
	ks, err := sqlitekeys.Open(filepath.Join(dir, "keys.db"))
	if err != nil {
		fixtureErr = err
		return true
	}
	store, err := sqlite.Open(filepath.Join(dir, "events.db"))
	if err != nil {
		fixtureErr = err
		return true
	}
	fixture = rebuildFixture{dir: dir, keep: true, store: store, events: events,
		keys: keystore.NewCache(ks, keystore.DefaultCacheTTL, keystore.DefaultCacheSize)}
	return true
}

var (
	fixtureOnce sync.Once
	fixture     rebuildFixture
	fixtureErr  error
)

func rebuildEventStore(b *testing.B) rebuildFixture {
	b.Helper()
	fixtureOnce.Do(func() {
		if dir := os.Getenv("SAMLA_BENCH_REBUILD_DIR"); dir != "" {
			if reuseFixture(dir) {
				return
			}
			fixtureErr = os.MkdirAll(dir, 0o750)
			if fixtureErr != nil {
				return
			}
			fixture.dir, fixture.keep = dir, true
		} else {
			dir, err := os.MkdirTemp("", "samla-rebuild-bench-")
			if err != nil {
				fixtureErr = err
				return
			}
			fixture.dir = dir
		}
		dir := fixture.dir
		ks, err := sqlitekeys.Open(filepath.Join(dir, "keys.db"))
		if err != nil {
			fixtureErr = err
			return
		}
		// The same cache the service and the rebuild command put in front of the key store.
		fixture.keys = keystore.NewCache(ks, keystore.DefaultCacheTTL, keystore.DefaultCacheSize)
		log := eventlog.New(b)
		buildWorld(log, benchRebuildCollections)
		all := log.All()
		fixture.events = len(all)
		store, err := sqlite.Open(filepath.Join(dir, "events.db"))
		if err != nil {
			fixtureErr = err
			return
		}
		fixture.store = store
		// One append per stream, many at once so that the store's group commit takes them in
		// few fsyncs; streams keep their order, positions interleave across streams.
		byStream := map[string][]eventschema.Envelope{}
		var streams []string
		for _, env := range all {
			payload, _, err := eventschema.SealPersonal(context.Background(), fixture.keys, env.Stream, env.Payload)
			if err != nil {
				fixtureErr = err
				return
			}
			env.Payload = payload
			if _, ok := byStream[env.Stream]; !ok {
				streams = append(streams, env.Stream)
			}
			byStream[env.Stream] = append(byStream[env.Stream], env)
		}
		sort.Strings(streams)
		work := make(chan string)
		errs := make(chan error, 64)
		var wg sync.WaitGroup
		for range 64 {
			wg.Go(func() {
				for s := range work {
					if _, err := store.Append(context.Background(), s, eventstore.Any(), byStream[s]); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		for _, s := range streams {
			work <- s
		}
		close(work)
		wg.Wait()
		close(errs)
		fixtureErr = <-errs
		if fixtureErr == nil && fixture.keep {
			fixtureErr = os.WriteFile(filepath.Join(dir, fixtureComplete), []byte(strconv.Itoa(fixture.events)), 0o640)
		}
	})
	if fixtureErr != nil {
		b.Fatalf("build the event store: %v", fixtureErr)
	}
	return fixture
}

// TestMain removes the benchmarks' event store, built once for the whole binary.
func TestMain(m *testing.M) {
	code := m.Run()
	if fixture.store != nil {
		_ = fixture.store.Close()
	}
	if fixture.dir != "" && !fixture.keep {
		_ = os.RemoveAll(fixture.dir)
	}
	os.Exit(code)
}

// BenchmarkRebuild replays an event store of about 90k sealed events (20k collections and the
// world's clients, users, consents and cancellations) into every read model, as `samla
// projections rebuild` does, and reports events/s. SQLite always; ClickHouse when
// SAMLA_CLICKHOUSE_DSN names a server.
func BenchmarkRebuild(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) {
		f := rebuildEventStore(b)
		m, err := projections.OpenSQLiteReadModels(b.TempDir(), f.keys)
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = m.Close() }()
		benchmarkRebuild(b, f, m)
	})
	b.Run("clickhouse", func(b *testing.B) {
		if os.Getenv("SAMLA_CLICKHOUSE_DSN") == "" {
			b.Skip("SAMLA_CLICKHOUSE_DSN not set")
		}
		f := rebuildEventStore(b)
		m, err := projections.OpenClickHouseReadModels(context.Background(), readdbtest.ClickHouseDatabase(b), f.keys)
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = m.Close() }()
		benchmarkRebuild(b, f, m)
	})
}

// benchBatch is the rebuild's batch size, SAMLA_BENCH_REBUILD_BATCH to try others.
var benchBatch, _ = strconv.Atoi(os.Getenv("SAMLA_BENCH_REBUILD_BATCH"))

func benchmarkRebuild(b *testing.B, f rebuildFixture, m *projections.ReadModels) {
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	for b.Loop() {
		n, err := projections.RebuildWith(context.Background(), f.store, m, projections.RebuildOptions{BatchSize: benchBatch})
		if err != nil {
			b.Fatal(err)
		}
		if n != f.events {
			b.Fatalf("rebuilt %d events, want %d", n, f.events)
		}
	}
	b.ReportMetric(float64(f.events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	// The machine is shared: CPU time per event (user and system, every goroutine) says more
	// than the wall clock.
	b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(f.events*b.N), "cpu-µs/event")
}

// processCPU is the CPU time (user and system) the process has used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
