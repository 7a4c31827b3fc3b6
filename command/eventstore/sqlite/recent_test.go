package sqlite

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/command/eventstore/storetest"
	"github.com/samla/samla/eventschema"
)

// A live subscription takes the events just committed from memory: what it delivers must be,
// field for field, what ReadAll reads from the file, whatever the appends were (one event or
// several, retries, refused expectations, a request undone inside a group commit, times with a
// zone and nanoseconds).
func TestSubscriptionFromMemoryDeliversWhatTheFileHolds(t *testing.T) {
	s := openStore(t, tempPath(t), WithMaxBatch(8))
	if _, err := s.wdb.Exec(`CREATE TEMP TRIGGER poison BEFORE INSERT ON events WHEN NEW.type = 'poison'
		BEGIN SELECT RAISE(ABORT, 'poisoned'); END`); err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	subCtx, stop := context.WithCancel(ctx)
	var (
		mu        sync.Mutex
		delivered []eventschema.Envelope
	)
	subDone := make(chan error, 1)
	go func() {
		subDone <- s.SubscribeAll(subCtx, 0, func(_ context.Context, e eventschema.Envelope) error {
			mu.Lock()
			delivered = append(delivered, e)
			mu.Unlock()
			return nil
		})
	}()
	waitFor(t, func() bool { return s.recent.wanted() })

	stockholm := time.FixedZone("CET", 3600)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 20 {
				stream := storetest.NewStream("collection")
				one := storetest.NewEvent("one", map[string]any{"w": w, "i": i})
				one.OccurredAt = time.Now().In(stockholm) // monotonic reading, zone, nanoseconds
				if _, err := s.Append(ctx, stream, eventstore.NoStream(), []eventschema.Envelope{one}); err != nil {
					t.Errorf("append: %v", err)
					return
				}
				// A retry of the same append stores nothing new.
				if _, err := s.Append(ctx, stream, eventstore.NoStream(), []eventschema.Envelope{one}); err != nil {
					t.Errorf("retry: %v", err)
				}
				// A refused expectation stores nothing.
				if _, err := s.Append(ctx, stream, eventstore.NoStream(), []eventschema.Envelope{storetest.NewEvent("late", nil)}); !errors.Is(err, eventstore.ErrWrongExpectedRevision) {
					t.Errorf("append to an existing stream expecting none: err = %v", err)
				}
				several := []eventschema.Envelope{storetest.NewEvent("two", nil), storetest.NewEvent("three", nil)}
				if i%3 == 0 {
					several = append(several, storetest.NewEvent("poison", nil)) // undone in its savepoint
				}
				_, err := s.Append(ctx, stream, eventstore.Exact(0), several)
				if (err != nil) != (i%3 == 0) {
					t.Errorf("append of %d events: err = %v", len(several), err)
				}
			}
		})
	}
	wg.Wait()

	want := mustReadAll(t, s)
	waitFor(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(delivered) >= len(want)
	})
	stop()
	if err := <-subDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("subscription ended with %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !reflect.DeepEqual(delivered, want) {
		for i := range min(len(delivered), len(want)) {
			if !reflect.DeepEqual(delivered[i], want[i]) {
				t.Fatalf("event %d delivered as\n%+v\nthe file holds\n%+v", i, delivered[i], want[i])
			}
		}
		t.Fatalf("delivered %d events, the file holds %d", len(delivered), len(want))
	}
	s.recent.mu.Lock()
	served, held := s.recent.served, len(s.recent.events)
	s.recent.mu.Unlock()
	if served == 0 {
		t.Fatal("no event was delivered from memory: the test proves nothing")
	}
	if held != 0 {
		t.Fatalf("%d events held after the only subscription ended", held)
	}
	t.Logf("%d of %d events delivered from memory", served, len(want))
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

func recentAt(from, n uint64, payload int) []eventschema.Envelope {
	out := make([]eventschema.Envelope, n)
	for i := range out {
		out[i] = eventschema.Envelope{Position: from + uint64(i), Payload: make([]byte, payload)}
	}
	return out
}

// What the commits leave in memory is bounded: nothing without a subscription, what the slowest
// one has still to read, never more than maxRecentEvents or maxRecentBytes, and never a gap.
func TestRecentEventsStayBounded(t *testing.T) {
	var r recentEvents
	r.committed(recentAt(1, 10, 10))
	if len(r.events) != 0 {
		t.Fatalf("%d events kept without a subscription", len(r.events))
	}

	fast, slow := r.subscribe(10), r.subscribe(10)
	r.committed(recentAt(11, 10, 10))
	got, ok := r.read(fast, 100)
	if !ok || len(got) != 10 || got[0].Position != 11 {
		t.Fatalf("read after 10 = %d events from %v (ok %v), want 11..20", len(got), got, ok)
	}
	r.advance(fast, 20)
	if len(r.events) != 10 {
		t.Fatalf("%d events kept, want the 10 the slow subscription has not read", len(r.events))
	}
	r.advance(slow, 15)
	if len(r.events) != 5 || r.events[0].Position != 16 {
		t.Fatalf("kept %d events from %d, want 16..20", len(r.events), r.events[0].Position)
	}
	if _, ok := r.read(fast, 100); ok {
		t.Fatal("a caught-up read answered from memory; it must look at the file")
	}

	// A gap (another writer's commit) starts over: a read that needs the missing position goes
	// to the file.
	r.committed(recentAt(22, 1, 10))
	if len(r.events) != 1 || r.events[0].Position != 22 {
		t.Fatalf("after a gap kept %v, want only 22", r.events)
	}
	if _, ok := r.read(slow, 100); ok {
		t.Fatal("read after 15 answered from memory across a gap")
	}

	// A subscription that never reads holds at most the caps.
	r.committed(recentAt(23, maxRecentEvents+100, 1))
	if len(r.events) != maxRecentEvents || r.events[len(r.events)-1].Position != 22+maxRecentEvents+100 {
		t.Fatalf("kept %d events, want the newest %d", len(r.events), maxRecentEvents)
	}
	next := r.events[len(r.events)-1].Position + 1
	r.committed(recentAt(next, 8, maxRecentBytes/4))
	if r.bytes > maxRecentBytes {
		t.Fatalf("kept %d payload bytes, over the cap of %d", r.bytes, maxRecentBytes)
	}

	r.unsubscribe(fast)
	r.unsubscribe(slow)
	if len(r.events) != 0 || r.bytes != 0 {
		t.Fatalf("%d events (%d bytes) kept after every subscription ended", len(r.events), r.bytes)
	}
}

// A group commit past the window's caps is not kept (rather than copied whole and mostly
// dropped): the subscription reads it from the file and takes the commits after it from memory
// again, missing nothing.
func TestSubscriptionReadsAnOversizedCommitFromTheFile(t *testing.T) {
	s := openStore(t, tempPath(t))
	ctx := testContext(t)
	subCtx, stop := context.WithCancel(ctx)
	defer stop()
	delivered := make(chan eventschema.Envelope, 64)
	go func() {
		_ = s.SubscribeAll(subCtx, 0, func(_ context.Context, e eventschema.Envelope) error {
			delivered <- e
			return nil
		})
	}()
	waitFor(t, func() bool { return s.recent.wanted() })

	big := strings.Repeat("x", maxRecentBytes/4)
	var large []eventschema.Envelope
	for range 5 { // 5 × a quarter of the cap: over it
		large = append(large, storetest.NewEvent("large", map[string]any{"blob": big}))
	}
	mustAppend(t, s, storetest.NewStream("collection"), eventstore.NoStream(), large...)
	mustAppend(t, s, storetest.NewStream("collection"), eventstore.NoStream(), storetest.NewEvent("small", nil))
	mustAppend(t, s, storetest.NewStream("collection"), eventstore.NoStream(), storetest.NewEvent("small", nil))

	want := mustReadAll(t, s)
	for i, w := range want {
		select {
		case got := <-delivered:
			if !reflect.DeepEqual(got, w) {
				t.Fatalf("event %d delivered as %s at %d, the file holds %s at %d", i, got.Type, got.Position, w.Type, w.Position)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("event %d of %d not delivered", i, len(want))
		}
	}
	s.recent.mu.Lock()
	defer s.recent.mu.Unlock()
	if s.recent.bytes > maxRecentBytes {
		t.Fatalf("window holds %d payload bytes, over its cap", s.recent.bytes)
	}
	if s.recent.served > len(want)-len(large) {
		t.Fatalf("%d events served from memory, but the %d of the oversized commit must come from the file", s.recent.served, len(large))
	}
}
