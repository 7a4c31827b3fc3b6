package esdb_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/command/eventstore/esdb"
	"github.com/samla/samla/command/eventstore/storetest"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/internal/esdbfake"
)

func startServer(t *testing.T) *esdbfake.Server {
	t.Helper()
	srv, err := esdbfake.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv
}

func openStore(t *testing.T, srv *esdbfake.Server) *esdb.Store {
	t.Helper()
	s, err := esdb.Open(srv.ConnectionString())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestContract runs the port's contract suite against the adapter on a fresh in-process server
// per store, once as the server behaves by default and once for each server behaviour the
// adapter has to make up for.
func TestContract(t *testing.T) {
	variants := []struct {
		name  string
		setup func(*esdbfake.Server)
	}{
		{"Default", func(*esdbfake.Server) {}},
		// The adapter recognises retries itself when the server answers them as conflicts.
		{"ServerWithoutIdempotency", func(s *esdbfake.Server) { s.SetIdempotency(false) }},
		// The adapter looks up the position when the server answers a retry without one.
		{"IdempotentWithoutPosition", func(s *esdbfake.Server) { s.SetIdempotentNoPosition(true) }},
		// The adapter does not deliver the event at the start position twice.
		{"InclusiveSubscriptions", func(s *esdbfake.Server) { s.SetInclusiveSubscriptions(true) }},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) eventstore.Store {
				srv := startServer(t)
				v.setup(srv)
				return openStore(t, srv)
			})
		})
	}
}

// TestContractRealServer runs the contract suite against the EventStoreDB named by
// SAMLA_TEST_ESDB. A real server is shared and not empty, so each store is scoped to the
// events appended after it was opened (streams are unique per test already).
//
// No EventStoreDB server can be installed on the build machines, so CI's
// SAMLA_REQUIRE_INTEGRATION does not cover it; SAMLA_REQUIRE_ESDB=1 makes its absence fail.
func TestContractRealServer(t *testing.T) {
	conn := os.Getenv("SAMLA_TEST_ESDB")
	if conn == "" {
		msg := "SAMLA_TEST_ESDB is not set: not running the contract suite against a real EventStoreDB " +
			"(set it to a connection string such as esdb://127.0.0.1:2113?tls=false)"
		if os.Getenv("SAMLA_REQUIRE_ESDB") == "1" {
			t.Fatal(msg + ", but SAMLA_REQUIRE_ESDB=1 requires it")
		}
		t.Skip(msg)
	}
	runShared(t, conn)
}

// TestContractSharedServer runs the real-server path against one in-process server that all
// stores share and that already holds events, as a real server would.
func TestContractSharedServer(t *testing.T) {
	srv := startServer(t)
	s := openStore(t, srv)
	for range 3 {
		mustAppend(t, testContext(t), s, storetest.NewStream("collection"), eventstore.NoStream(), newEvents(2, "old")...)
	}
	runShared(t, srv.ConnectionString())
}

// runShared runs the contract suite with every store on the server at conn.
func runShared(t *testing.T, conn string) {
	storetest.Run(t, func(t *testing.T) eventstore.Store {
		s, err := esdb.Open(conn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		head, err := s.HeadPosition(testContext(t))
		if err != nil {
			t.Fatalf("EventStoreDB at %s: %v", conn, err)
		}
		return scoped{Store: s, start: head}
	})
}

// scoped hides the events $all held before start, so that a shared server looks empty.
type scoped struct {
	*esdb.Store
	start uint64
}

func (s scoped) ReadAll(ctx context.Context, after uint64, limit int) ([]eventschema.Envelope, error) {
	return s.Store.ReadAll(ctx, max(after, s.start), limit)
}

func (s scoped) SubscribeAll(ctx context.Context, after uint64, handle func(context.Context, eventschema.Envelope) error) error {
	return s.Store.SubscribeAll(ctx, max(after, s.start), handle)
}

func newEvents(n int, eventType string) []eventschema.Envelope {
	out := make([]eventschema.Envelope, n)
	for i := range out {
		out[i] = storetest.NewEvent(eventType, map[string]any{"i": i})
	}
	return out
}

func ids(evs []eventschema.Envelope) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.EventID
	}
	return out
}

func wantIDs(t *testing.T, what string, got, want []eventschema.Envelope) {
	t.Helper()
	if g, w := fmt.Sprint(ids(got)), fmt.Sprint(ids(want)); g != w {
		t.Fatalf("%s:\n got %s\nwant %s", what, g, w)
	}
}

func mustAppend(t *testing.T, ctx context.Context, s eventstore.Store, stream string, expected eventstore.ExpectedRevision, evs ...eventschema.Envelope) eventstore.AppendResult {
	t.Helper()
	res, err := s.Append(ctx, stream, expected, evs)
	if err != nil {
		t.Fatalf("append to %s: %v", stream, err)
	}
	return res
}

// collector runs SubscribeAll in the background.
type collector struct {
	events chan eventschema.Envelope
	done   chan error
	cancel context.CancelFunc
}

func collect(t *testing.T, ctx context.Context, s eventstore.Store, after uint64) *collector {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	c := &collector{events: make(chan eventschema.Envelope, 1024), done: make(chan error, 1), cancel: cancel}
	go func() {
		c.done <- s.SubscribeAll(ctx, after, func(_ context.Context, e eventschema.Envelope) error {
			c.events <- e
			return nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			t.Error("subscription did not end after its context")
		}
	})
	return c
}

// expect receives exactly want, in order.
func (c *collector) expect(t *testing.T, what string, want ...eventschema.Envelope) {
	t.Helper()
	var got []eventschema.Envelope
	for range want {
		select {
		case e := <-c.events:
			got = append(got, e)
		case err := <-c.done:
			t.Fatalf("%s: subscription ended: %v", what, err)
		case <-time.After(15 * time.Second):
			t.Fatalf("%s: got %d of %d events in time", what, len(got), len(want))
		}
	}
	wantIDs(t, what, got, want)
}

// expectQuiet checks that nothing else arrives before a sentinel appended now.
func (c *collector) expectQuiet(t *testing.T, ctx context.Context, s eventstore.Store, what string) {
	t.Helper()
	sentinel := storetest.NewEvent("sentinel", nil)
	mustAppend(t, ctx, s, storetest.NewStream("sentinel"), eventstore.NoStream(), sentinel)
	c.expect(t, what+": nothing before the sentinel", sentinel)
}

func TestSystemEventsAreSkipped(t *testing.T) {
	ctx := testContext(t)
	srv := startServer(t)
	s := openStore(t, srv)

	// The log starts with system events; put more of them between and around ours.
	e := newEvents(4, "step")
	mustAppend(t, ctx, s, storetest.NewStream("collection"), eventstore.NoStream(), e[0])
	for i := range 5 {
		srv.AppendSystemEvent("$stats-127.0.0.1:2113", "$statsCollected", fmt.Sprintf(`{"n":%d}`, i))
	}
	srv.AppendSystemEvent("$$collection-x", "$metadata", `{}`)
	mustAppend(t, ctx, s, storetest.NewStream("consent"), eventstore.NoStream(), e[1], e[2])
	srv.AppendSystemEvent("$ce-collection", "$>", `0@collection-x`)
	mustAppend(t, ctx, s, storetest.NewStream("user"), eventstore.NoStream(), e[3])
	srv.AppendSystemEvent("$settings", "$settings", `{}`)

	all, err := s.ReadAll(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "read all", all, e)

	// Pages of limit+1 events are mostly system events here: paging must go on past them.
	var paged []eventschema.Envelope
	var after uint64
	for {
		page, err := s.ReadAll(ctx, after, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		if len(page) != 1 {
			t.Fatalf("read all limit 1: %d events", len(page))
		}
		paged = append(paged, page...)
		after = page[0].Position
	}
	wantIDs(t, "read all one by one", paged, e)

	c := collect(t, ctx, s, 0)
	c.expect(t, "catch-up", e...)
	srv.AppendSystemEvent("$stats-127.0.0.1:2113", "$statsCollected", `{}`)
	live := storetest.NewEvent("live", nil)
	mustAppend(t, ctx, s, storetest.NewStream("user"), eventstore.NoStream(), live)
	c.expect(t, "live", live)
	c.expectQuiet(t, ctx, s, "after live")

	head, err := s.HeadPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}
	last, err := s.ReadAll(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := last[len(last)-1].Position; head != want {
		t.Fatalf("head position = %d, want the last event's %d", head, want)
	}
}

func TestResubscribesAfterDrop(t *testing.T) {
	for _, inclusive := range []bool{false, true} {
		t.Run(fmt.Sprintf("inclusive=%v", inclusive), func(t *testing.T) {
			ctx := testContext(t)
			srv := startServer(t)
			srv.SetInclusiveSubscriptions(inclusive)
			s := openStore(t, srv)
			stream := storetest.NewStream("collection")
			e := newEvents(6, "step")
			mustAppend(t, ctx, s, stream, eventstore.NoStream(), e[:2]...)

			c := collect(t, ctx, s, 0)
			c.expect(t, "catch-up", e[:2]...)
			srv.DropSubscriptions()
			mustAppend(t, ctx, s, stream, eventstore.Exact(1), e[2:4]...)
			c.expect(t, "after the first drop", e[2:4]...)
			srv.DropSubscriptions()
			srv.DropSubscriptions()
			mustAppend(t, ctx, s, stream, eventstore.Exact(3), e[4:]...)
			c.expect(t, "after more drops", e[4:]...)
			c.expectQuiet(t, ctx, s, "no duplicates")
		})
	}
}

// TestSurvivesServerRestart takes the server away long enough for the client's discovery to
// fail, which closes the library's client for good, and brings it back.
func TestSurvivesServerRestart(t *testing.T) {
	ctx := testContext(t)
	srv := startServer(t)
	s := openStore(t, srv)
	stream := storetest.NewStream("collection")
	e := newEvents(4, "step")
	mustAppend(t, ctx, s, stream, eventstore.NoStream(), e[0])
	c := collect(t, ctx, s, 0)
	c.expect(t, "before the restart", e[0])

	srv.Stop()
	// A failed append makes the client rediscover the node on its next call.
	if _, err := s.Append(ctx, stream, eventstore.Exact(0), newEvents(1, "lost")); err == nil {
		t.Fatal("append succeeded with the server down")
	}
	// Concurrent calls while that discovery fails: the library leaves all but one of them
	// waiting on a client that is gone for good; none may hang.
	var wg sync.WaitGroup
	var mu sync.Mutex
	discoveryFailed := false
	for range 6 {
		wg.Go(func() {
			callCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			_, err := s.ReadStream(callCtx, stream, 0, 0)
			if err == nil {
				t.Error("read succeeded with the server down")
				return
			}
			mu.Lock()
			defer mu.Unlock()
			discoveryFailed = discoveryFailed || strings.Contains(err.Error(), "maximum discovery attempt count reached")
		})
	}
	wg.Wait()
	if !discoveryFailed {
		t.Fatal("no call saw the discovery fail; the test no longer covers a client closed for good")
	}

	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	var res eventstore.AppendResult
	deadline := time.Now().Add(15 * time.Second)
	for {
		var err error
		res, err = s.Append(ctx, stream, eventstore.Exact(0), e[1:3])
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("append after the restart: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if res.NextExpectedRevision != 2 {
		t.Fatalf("next expected revision = %d, want 2", res.NextExpectedRevision)
	}
	c.expect(t, "after the restart", e[1:3]...)
	mustAppend(t, ctx, s, stream, eventstore.Exact(2), e[3])
	c.expect(t, "live after the restart", e[3])
	c.expectQuiet(t, ctx, s, "no duplicates across the restart")
}

func TestClose(t *testing.T) {
	ctx := testContext(t)
	srv := startServer(t)
	s, err := esdb.Open(srv.ConnectionString())
	if err != nil {
		t.Fatal(err)
	}
	stream := storetest.NewStream("collection")
	mustAppend(t, ctx, s, stream, eventstore.NoStream(), newEvents(1, "a")...)

	done := make(chan error, 1)
	delivered := make(chan struct{}, 1)
	go func() {
		done <- s.SubscribeAll(ctx, 0, func(context.Context, eventschema.Envelope) error {
			delivered <- struct{}{}
			return nil
		})
	}()
	select {
	case <-delivered:
	case <-time.After(10 * time.Second):
		t.Fatal("no event delivered")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, esdb.ErrClosed) {
			t.Fatalf("subscription returned %v after close, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("subscription did not end after close")
	}
	if _, err := s.Append(ctx, stream, eventstore.Exact(0), newEvents(1, "b")); !errors.Is(err, esdb.ErrClosed) {
		t.Fatalf("append after close: %v, want ErrClosed", err)
	}
	if _, err := s.ReadStream(ctx, stream, 0, 0); !errors.Is(err, esdb.ErrClosed) {
		t.Fatalf("read after close: %v, want ErrClosed", err)
	}
	if _, err := s.ReadAll(ctx, 0, 0); !errors.Is(err, esdb.ErrClosed) {
		t.Fatalf("read all after close: %v, want ErrClosed", err)
	}
}

func TestRejectsBadInput(t *testing.T) {
	ctx := testContext(t)
	s := openStore(t, startServer(t))
	stream := storetest.NewStream("collection")
	if _, err := s.Append(ctx, stream, eventstore.NoStream(), nil); err == nil {
		t.Error("empty append succeeded")
	}
	bad := storetest.NewEvent("a", nil)
	bad.EventID = "not-a-uuid"
	if _, err := s.Append(ctx, stream, eventstore.NoStream(), []eventschema.Envelope{bad}); err == nil {
		t.Error("append of an event whose id is not a UUID succeeded")
	}
	if _, err := s.ReadStream(ctx, stream, 0, 0); !errors.Is(err, eventstore.ErrStreamNotFound) {
		t.Errorf("rejected appends left events behind: %v", err)
	}
	if _, err := esdb.Open("://nonsense"); err == nil {
		t.Error("open of a malformed connection string succeeded")
	}
}

// benchStore is a store on a fake server of its own, both closed when b ends.
func benchStore(b *testing.B) *esdb.Store {
	srv, err := esdbfake.Start()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Stop)
	s, err := esdb.Open(srv.ConnectionString())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkAppendParallel is many appenders to distinct streams over one client, as the command
// role under load: gRPC multiplexes the appends on one HTTP/2 connection and the server
// group-commits them, so ns/op should fall well below a serial append's round trip.
func BenchmarkAppendParallel(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			e := storetest.NewEvent("bench", nil)
			if _, err := s.Append(ctx, storetest.NewStream("collection"), eventstore.NoStream(), []eventschema.Envelope{e}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkAppendSerial is one appender: every append is a full round trip.
func BenchmarkAppendSerial(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	for b.Loop() {
		e := storetest.NewEvent("bench", nil)
		if _, err := s.Append(ctx, storetest.NewStream("collection"), eventstore.NoStream(), []eventschema.Envelope{e}); err != nil {
			b.Fatal(err)
		}
	}
}
