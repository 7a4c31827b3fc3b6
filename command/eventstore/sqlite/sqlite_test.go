package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/command/eventstore/storetest"
	"github.com/samla/samla/eventschema"
)

func openStore(t testing.TB, path string, opts ...Option) *Store {
	t.Helper()
	s, err := Open(path, opts...)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close %s: %v", path, err)
		}
	})
	return s
}

func tempPath(t testing.TB) string {
	// A nested directory proves Open creates it.
	return filepath.Join(t.TempDir(), "data", "events.db")
}

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) eventstore.Store { return openStore(t, tempPath(t)) })
}

// Tiny batches push catch-up across many pages and group commits across many rounds.
func TestContractSmallBatches(t *testing.T) {
	storetest.Run(t, func(t *testing.T) eventstore.Store {
		return openStore(t, tempPath(t), WithCatchUpBatch(3), WithMaxBatch(2), WithReadConns(1))
	})
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustAppend(t *testing.T, s *Store, stream string, expected eventstore.ExpectedRevision, evs ...eventschema.Envelope) eventstore.AppendResult {
	t.Helper()
	res, err := s.Append(testContext(t), stream, expected, evs)
	if err != nil {
		t.Fatalf("append to %s expecting %s: %v", stream, expected, err)
	}
	return res
}

func mustReadAll(t *testing.T, s *Store) []eventschema.Envelope {
	t.Helper()
	evs, err := s.ReadAll(testContext(t), 0, 0)
	if err != nil {
		t.Fatalf("read all: %v", err)
	}
	return evs
}

func TestDurabilityPragmas(t *testing.T) {
	s := openStore(t, tempPath(t))
	var mode string
	var synchronous int
	if err := s.wdb.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if err := s.wdb.QueryRow("PRAGMA synchronous").Scan(&synchronous); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" || synchronous != 2 {
		t.Fatalf("writer has journal_mode=%s synchronous=%d, want wal and 2 (FULL)", mode, synchronous)
	}
	if _, err := s.rdb.Exec("CREATE TABLE nope (x)"); err == nil {
		t.Fatal("the read pool could write")
	}
}

func TestReopenKeepsEventsAndContinues(t *testing.T) {
	path := tempPath(t)
	a, b := storetest.NewStream("collection"), storetest.NewStream("consent")
	first := storetest.NewEvent("first", map[string]any{"n": 1})

	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	res := mustAppend(t, s, a, eventstore.NoStream(), first, storetest.NewEvent("second", nil))
	mustAppend(t, s, b, eventstore.NoStream(), storetest.NewEvent("other", nil))
	before := mustReadAll(t, s)
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}

	s = openStore(t, path)
	after := mustReadAll(t, s)
	if len(after) != len(before) {
		t.Fatalf("reopened store has %d events, had %d", len(after), len(before))
	}
	for i := range before {
		if fmt.Sprint(before[i]) != fmt.Sprint(after[i]) {
			t.Fatalf("event %d changed across reopen:\n%+v\n%+v", i, before[i], after[i])
		}
	}
	// A retry after a restart still finds the stored events.
	if retry := mustAppend(t, s, a, eventstore.NoStream(), first, before[1]); retry != res {
		t.Fatalf("retry after reopen = %+v, want %+v", retry, res)
	}
	next := mustAppend(t, s, a, eventstore.Exact(1), storetest.NewEvent("third", nil))
	if next.NextExpectedRevision != 2 || next.Position != 4 {
		t.Fatalf("append after reopen = %+v, want revision 2 at position 4", next)
	}
	if _, err := s.Append(testContext(t), b, eventstore.NoStream(), []eventschema.Envelope{storetest.NewEvent("x", nil)}); !errors.Is(err, eventstore.ErrWrongExpectedRevision) {
		t.Fatalf("NoStream append to a stream written before reopen: err = %v, want a conflict", err)
	}
}

func TestPositionsAreContiguousFromOne(t *testing.T) {
	s := openStore(t, tempPath(t))
	stream := storetest.NewStream("collection")
	mustAppend(t, s, stream, eventstore.NoStream(), storetest.NewEvent("a", nil), storetest.NewEvent("b", nil))
	// A conflict in between must not burn positions.
	if _, err := s.Append(testContext(t), stream, eventstore.NoStream(), []eventschema.Envelope{storetest.NewEvent("c", nil)}); err == nil {
		t.Fatal("conflicting append succeeded")
	}
	mustAppend(t, s, storetest.NewStream("user"), eventstore.Any(), storetest.NewEvent("d", nil))
	for i, e := range mustReadAll(t, s) {
		if e.Position != uint64(i+1) {
			t.Fatalf("event %d at position %d, want %d", i, e.Position, i+1)
		}
	}
}

func TestEventIDs(t *testing.T) {
	s := openStore(t, tempPath(t))
	ctx := testContext(t)
	a, b := storetest.NewStream("collection"), storetest.NewStream("collection")

	e := storetest.NewEvent("a", nil)
	lower := e.EventID
	e.EventID = strings.ToUpper(lower)
	res := mustAppend(t, s, a, eventstore.NoStream(), e)
	if got := mustReadAll(t, s)[0].EventID; got != lower {
		t.Fatalf("stored event id %q, want canonical %q", got, lower)
	}
	e.EventID = lower
	if retry := mustAppend(t, s, a, eventstore.NoStream(), e); retry != res {
		t.Fatalf("retry with the canonical spelling = %+v, want %+v", retry, res)
	}
	if retry := mustAppend(t, s, a, eventstore.Any(), e); retry != res {
		t.Fatalf("retry expecting any = %+v, want %+v", retry, res)
	}

	// Reusing an id anywhere else is refused, and names the conflict when the expectation fails.
	_, err := s.Append(ctx, b, eventstore.NoStream(), []eventschema.Envelope{e})
	if !errors.Is(err, eventstore.ErrDuplicateEventID) {
		t.Fatalf("id reused in another stream: err = %v, want ErrDuplicateEventID", err)
	}
	_, err = s.Append(ctx, a, eventstore.Exact(0), []eventschema.Envelope{storetest.NewEvent("b", nil), e})
	if !errors.Is(err, eventstore.ErrDuplicateEventID) {
		t.Fatalf("id reused later in the same stream: err = %v, want ErrDuplicateEventID", err)
	}
	_, err = s.Append(ctx, a, eventstore.Exact(3), []eventschema.Envelope{e})
	if !errors.Is(err, eventstore.ErrWrongExpectedRevision) {
		t.Fatalf("id reused at a wrong revision: err = %v, want ErrWrongExpectedRevision", err)
	}

	// Stored ids in another order are not a retry of the append that stored them.
	x, y := storetest.NewEvent("x", nil), storetest.NewEvent("y", nil)
	mustAppend(t, s, b, eventstore.NoStream(), x, y)
	_, err = s.Append(ctx, b, eventstore.Any(), []eventschema.Envelope{y, x})
	if !errors.Is(err, eventstore.ErrDuplicateEventID) {
		t.Fatalf("stored ids in another order: err = %v, want ErrDuplicateEventID", err)
	}
	if n := len(mustReadAll(t, s)); n != 3 {
		t.Fatalf("store has %d events, want 3", n)
	}
}

// An insert that fails half-way through a request (here a trigger standing in for a disk or
// constraint error) must roll back that request's earlier events and nothing of the other
// requests committed with it.
func TestFailedRequestIsUndoneAlone(t *testing.T) {
	s := openStore(t, tempPath(t))
	// A temp trigger lives on the writer's single connection, which the store never replaces.
	if _, err := s.wdb.Exec(`CREATE TEMP TRIGGER poison BEFORE INSERT ON events WHEN NEW.type = 'poison'
		BEGIN SELECT RAISE(ABORT, 'poisoned'); END`); err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	const n = 16
	errs := make([]error, n)
	own := make([]eventschema.Envelope, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		own[i] = storetest.NewEvent("ok", map[string]any{"i": i})
		batch := []eventschema.Envelope{own[i]}
		if i%2 == 0 {
			batch = append(batch, storetest.NewEvent("poison", nil))
		}
		wg.Go(func() {
			<-start
			_, errs[i] = s.Append(ctx, storetest.NewStream("collection"), eventstore.NoStream(), batch)
		})
	}
	close(start)
	wg.Wait()

	stored := map[string]bool{}
	for i, e := range mustReadAll(t, s) {
		stored[e.EventID] = true
		if e.Position != uint64(i+1) {
			t.Errorf("event %d at position %d: a rolled-back request left a gap", i, e.Position)
		}
	}
	for i, err := range errs {
		if i%2 == 0 {
			if err == nil || !strings.Contains(err.Error(), "poisoned") {
				t.Errorf("poisoned append %d: err = %v", i, err)
			}
			if stored[own[i].EventID] {
				t.Errorf("poisoned append %d left its first event behind", i)
			}
			continue
		}
		if err != nil {
			t.Errorf("append %d: %v", i, err)
		} else if !stored[own[i].EventID] {
			t.Errorf("append %d acknowledged but not stored", i)
		}
	}
	if len(stored) != n/2 {
		t.Fatalf("%d events stored, want %d", len(stored), n/2)
	}
}

func TestInvalidAppends(t *testing.T) {
	s := openStore(t, tempPath(t))
	ctx := testContext(t)
	stream := storetest.NewStream("collection")
	valid := storetest.NewEvent("ok", nil)
	mutate := func(f func(*eventschema.Envelope)) eventschema.Envelope {
		e := storetest.NewEvent("ok", nil)
		f(&e)
		return e
	}
	cases := map[string]struct {
		stream string
		events []eventschema.Envelope
	}{
		"empty stream":    {"", []eventschema.Envelope{valid}},
		"id not a UUID":   {stream, []eventschema.Envelope{mutate(func(e *eventschema.Envelope) { e.EventID = "nope" })}},
		"empty type":      {stream, []eventschema.Envelope{mutate(func(e *eventschema.Envelope) { e.Type = "" })}},
		"invalid payload": {stream, []eventschema.Envelope{mutate(func(e *eventschema.Envelope) { e.Payload = []byte(`{"a":`) })}},
		"no payload":      {stream, []eventschema.Envelope{mutate(func(e *eventschema.Envelope) { e.Payload = nil })}},
		"same id twice":   {stream, []eventschema.Envelope{valid, valid}},
	}
	for name, c := range cases {
		if _, err := s.Append(ctx, c.stream, eventstore.Any(), c.events); err == nil {
			t.Errorf("%s: append succeeded", name)
		}
	}
	if n := len(mustReadAll(t, s)); n != 0 {
		t.Fatalf("invalid appends stored %d events", n)
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Append(cancelled, stream, eventstore.Any(), []eventschema.Envelope{valid}); !errors.Is(err, context.Canceled) {
		t.Fatalf("append with a cancelled context: err = %v, want context.Canceled", err)
	}
}

func TestEmptyAppendChecksExpectation(t *testing.T) {
	s := openStore(t, tempPath(t))
	stream := storetest.NewStream("collection")
	if res := mustAppend(t, s, stream, eventstore.NoStream()); res != (eventstore.AppendResult{}) {
		t.Fatalf("empty append to a new stream = %+v, want zeros", res)
	}
	if _, err := s.Append(testContext(t), stream, eventstore.StreamExists(), nil); !errors.Is(err, eventstore.ErrWrongExpectedRevision) {
		t.Fatalf("empty append expecting an existing stream: err = %v, want a conflict", err)
	}
	res := mustAppend(t, s, stream, eventstore.NoStream(), storetest.NewEvent("a", nil), storetest.NewEvent("b", nil))
	if got := mustAppend(t, s, stream, eventstore.Exact(1)); got != res {
		t.Fatalf("empty append at the head = %+v, want %+v", got, res)
	}
}

// Many appenders at once, half of them bound to lose a race: group commit must take them in
// few transactions without one request's conflict undoing another's events.
func TestGroupCommitIsolatesConflicts(t *testing.T) {
	path := tempPath(t)
	s := openStore(t, path)
	ctx := testContext(t)
	contested := storetest.NewStream("collection")
	mustAppend(t, s, contested, eventstore.NoStream(), storetest.NewEvent("created", nil))
	commitsBefore := s.commits.Load()

	// Hold the database's write lock from another connection until every appender has called
	// Append, so that the requests are queued together and grouping can be asserted, not hoped.
	blocker, err := sql.Open("sqlite", path+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Close()
	lock, err := blocker.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS test_lock (x INTEGER)"); err != nil {
		t.Fatal(err)
	}

	const n = 64
	errs := make([]error, n)
	own := make([]eventschema.Envelope, n)
	start := make(chan struct{})
	var wg, calling sync.WaitGroup
	calling.Add(n)
	for i := range n {
		own[i] = storetest.NewEvent("own", map[string]any{"i": i})
		wg.Go(func() {
			<-start
			calling.Done()
			if i%2 == 0 {
				_, errs[i] = s.Append(ctx, contested, eventstore.Exact(0), []eventschema.Envelope{own[i]})
			} else {
				_, errs[i] = s.Append(ctx, storetest.NewStream("user"), eventstore.NoStream(), []eventschema.Envelope{own[i]})
			}
		})
	}
	close(start)
	calling.Wait()
	time.Sleep(50 * time.Millisecond) // from calling Append to waiting in the writer's queue
	if err := lock.Rollback(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()

	stored := map[string]bool{}
	for _, e := range mustReadAll(t, s) {
		stored[e.EventID] = true
	}
	wins := 0
	for i, err := range errs {
		switch {
		case err == nil:
			if !stored[own[i].EventID] {
				t.Errorf("append %d acknowledged but not stored", i)
			}
			if i%2 == 0 {
				wins++
			}
		case i%2 == 0 && errors.Is(err, eventstore.ErrWrongExpectedRevision):
			if stored[own[i].EventID] {
				t.Errorf("append %d conflicted but was stored", i)
			}
		default:
			t.Errorf("append %d: %v", i, err)
		}
	}
	if wins != 1 {
		t.Fatalf("%d appends won the contested stream, want 1", wins)
	}
	acknowledged := 0
	for _, err := range errs {
		if err == nil {
			acknowledged++
		}
	}
	commits := s.commits.Load() - commitsBefore
	t.Logf("%d acknowledged appends in %d group commits", acknowledged, commits)
	if commits >= uint64(acknowledged) {
		t.Fatalf("%d acknowledged appends took %d commits: no group commit happened", acknowledged, commits)
	}
}

func TestCloseWhileAppending(t *testing.T) {
	path := tempPath(t)
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	subDone := make(chan error, 1)
	go func() {
		subDone <- s.SubscribeAll(ctx, 0, func(context.Context, eventschema.Envelope) error { return nil })
	}()

	var mu sync.Mutex
	var acked []string
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			stream := storetest.NewStream("collection")
			expected := eventstore.NoStream()
			for {
				e := storetest.NewEvent("step", map[string]any{"w": w})
				res, err := s.Append(ctx, stream, expected, []eventschema.Envelope{e})
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
				mu.Lock()
				acked = append(acked, e.EventID)
				mu.Unlock()
				expected = eventstore.Exact(res.NextExpectedRevision)
			}
		})
	}
	for {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= 50 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	wg.Wait() // every appender got an answer
	select {
	case err := <-subDone:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("subscription ended with %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("subscription still running after close")
	}
	if _, err := s.Append(ctx, "x-1", eventstore.Any(), []eventschema.Envelope{storetest.NewEvent("late", nil)}); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: err = %v, want ErrClosed", err)
	}
	if _, err := s.ReadAll(ctx, 0, 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("read after close: err = %v, want ErrClosed", err)
	}

	// Every acknowledged append survived.
	stored := map[string]bool{}
	for _, e := range mustReadAll(t, openStore(t, path)) {
		stored[e.EventID] = true
	}
	for _, id := range acked {
		if !stored[id] {
			t.Fatalf("acknowledged event %s missing after reopen", id)
		}
	}
	t.Logf("%d appends acknowledged before close", len(acked))
}

// A second store on the same file stands in for another process: its commits reach this
// store's subscribers through the poll alone.
func TestSubscribePollsForOtherWriters(t *testing.T) {
	path := tempPath(t)
	s := openStore(t, path, WithPollInterval(20*time.Millisecond))
	other := openStore(t, path)
	ctx := testContext(t)
	got := make(chan eventschema.Envelope, 1)
	go func() {
		_ = s.SubscribeAll(ctx, 0, func(ctx context.Context, e eventschema.Envelope) error {
			select {
			case got <- e:
			case <-ctx.Done():
			}
			return nil
		})
	}()
	e := storetest.NewEvent("elsewhere", nil)
	if _, err := other.Append(ctx, storetest.NewStream("collection"), eventstore.NoStream(), []eventschema.Envelope{e}); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-got:
		if d.EventID != e.EventID {
			t.Fatalf("delivered %s, want %s", d.EventID, e.EventID)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("another writer's event was not delivered")
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	path := tempPath(t)
	s := openStore(t, path)
	if _, err := s.wdb.Exec(fmt.Sprintf("PRAGMA user_version = %d", len(migrations)+1)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s2, err := Open(path); err == nil {
		s2.Close()
		t.Fatal("opened a file with a newer schema")
	}
}

func benchmarkStore(b *testing.B) *Store {
	return openStore(b, filepath.Join(b.TempDir(), "events.db"))
}

func reportGroupCommit(b *testing.B, s *Store, appends int, cpuBefore time.Duration) {
	if commits := s.commits.Load(); commits > 0 {
		b.ReportMetric(float64(appends)/float64(commits), "appends/commit")
	}
	if cpu := processCPU() - cpuBefore; cpu > 0 && appends > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(appends), "cpu-ns/op")
	}
}

// BenchmarkAppendSerial is one appender: every append pays a full fsync.
func BenchmarkAppendSerial(b *testing.B) {
	s := benchmarkStore(b)
	ctx := context.Background()
	n := 0
	cpu := processCPU()
	for b.Loop() {
		e := storetest.NewEvent("bench", map[string]any{"n": n})
		if _, err := s.Append(ctx, storetest.NewStream("collection"), eventstore.NoStream(), []eventschema.Envelope{e}); err != nil {
			b.Fatal(err)
		}
		n++
	}
	reportGroupCommit(b, s, n, cpu)
}

// BenchmarkAppendParallel is many appenders to distinct streams: group commit shares each fsync
// among the appends queued meanwhile, so ns/op should fall well below the serial case.
func BenchmarkAppendParallel(b *testing.B) {
	s := benchmarkStore(b)
	ctx := context.Background()
	b.SetParallelism(16)
	var mu sync.Mutex
	var lat []time.Duration
	b.ResetTimer()
	cpu := processCPU()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			e := storetest.NewEvent("bench", nil)
			t0 := time.Now()
			if _, err := s.Append(ctx, storetest.NewStream("collection"), eventstore.NoStream(), []eventschema.Envelope{e}); err != nil {
				b.Error(err)
				return
			}
			mine = append(mine, time.Since(t0))
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	b.StopTimer()
	reportGroupCommit(b, s, b.N, cpu)
	if len(lat) > 0 {
		// The tail is what a client waits for when a commit also checkpoints the log.
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
	}
}

// BenchmarkReadAllCaughtUp is the relay's subscription once it has caught up: after every commit
// and every poll it asks for a batch and finds one event or none. Such a read must not pay for
// the room of a whole batch (it did: 100 KB and 60–90 µs a read instead of 1–2 KB and 6–11 µs).
func BenchmarkReadAllCaughtUp(b *testing.B) {
	ctx := context.Background()
	s := openStore(b, tempPath(b))
	for range 10 {
		e := storetest.NewEvent("x", nil)
		if _, err := s.Append(ctx, storetest.NewStream("collection"), eventstore.NoStream(), []eventschema.Envelope{e}); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range []struct {
		name  string
		after uint64
	}{{"one-new", 9}, {"none-new", 10}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.ReadAll(ctx, c.after, defaultConfig().catchUpBatch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReadStreamBesideAppends is a command's load of an aggregate while others append, as
// under a POST load: a reader's page cache is discarded whenever another connection has
// committed since its last read (WAL), so its size matters only within one read.
func BenchmarkReadStreamBesideAppends(b *testing.B) {
	s := benchmarkStore(b)
	ctx := context.Background()
	streams := make([]string, 2000)
	for i := range streams {
		streams[i] = storetest.NewStream("collection")
		for r := range 5 {
			e := storetest.NewEvent("bench", map[string]any{"n": r, "pad": strings.Repeat("x", 300)})
			if _, err := s.Append(ctx, streams[i], eventstore.Any(), []eventschema.Envelope{e}); err != nil {
				b.Fatal(err)
			}
		}
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			e := storetest.NewEvent("bench", map[string]any{"n": n})
			if _, err := s.Append(ctx, storetest.NewStream("collection"), eventstore.NoStream(), []eventschema.Envelope{e}); err != nil {
				b.Error(err)
				return
			}
		}
	}()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, err := s.ReadStream(ctx, streams[i%len(streams)], 0, 100); err != nil {
				b.Error(err)
				return
			}
			i += 7
		}
	})
	b.StopTimer()
	close(stop)
	<-done
}
