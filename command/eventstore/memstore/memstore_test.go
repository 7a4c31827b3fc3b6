package memstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/command/eventstore/memstore"
	"github.com/samla/samla/command/eventstore/storetest"
	"github.com/samla/samla/eventschema"
)

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) eventstore.Store {
		s := memstore.New()
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

func TestInspection(t *testing.T) {
	s := memstore.New()
	ctx := t.Context()
	a, b := storetest.NewStream("collection"), storetest.NewStream("user")
	if got := s.Events(a); got != nil || s.Appends() != 0 || len(s.Streams()) != 0 {
		t.Fatalf("empty store: events %v, appends %d, streams %v", got, s.Appends(), s.Streams())
	}
	first := []eventschema.Envelope{storetest.NewEvent("a", nil), storetest.NewEvent("b", nil)}
	if _, err := s.Append(ctx, a, eventstore.NoStream(), first); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, b, eventstore.NoStream(), []eventschema.Envelope{storetest.NewEvent("c", nil)}); err != nil {
		t.Fatal(err)
	}
	// Neither a retry, a conflict nor an empty append counts as an append.
	if _, err := s.Append(ctx, a, eventstore.NoStream(), first); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, a, eventstore.NoStream(), []eventschema.Envelope{storetest.NewEvent("d", nil)}); !errors.Is(err, eventstore.ErrWrongExpectedRevision) {
		t.Fatalf("conflicting append: %v", err)
	}
	if _, err := s.Append(ctx, a, eventstore.Exact(1), nil); err != nil {
		t.Fatal(err)
	}
	if n := s.Appends(); n != 2 {
		t.Fatalf("appends = %d, want 2", n)
	}
	if got := s.Streams(); len(got) != 2 || got[0] != a || got[1] != b {
		t.Fatalf("streams = %v, want [%s %s]", got, a, b)
	}
	got := s.Events(a)
	if len(got) != 2 || got[0].EventID != first[0].EventID || got[1].Revision != 1 || got[1].Position != 2 {
		t.Fatalf("events of %s = %+v", a, got)
	}
	got[0].Payload[0] = 'x' // a copy: the store keeps its own
	if again := s.Events(a); string(again[0].Payload) != "{}" {
		t.Fatalf("stored payload changed through a copy: %s", again[0].Payload)
	}
}

func TestEventIDsAreUniqueAcrossStreams(t *testing.T) {
	s := memstore.New()
	e := storetest.NewEvent("a", nil)
	if _, err := s.Append(t.Context(), storetest.NewStream("collection"), eventstore.NoStream(), []eventschema.Envelope{e}); err != nil {
		t.Fatal(err)
	}
	_, err := s.Append(t.Context(), storetest.NewStream("collection"), eventstore.NoStream(), []eventschema.Envelope{e})
	if !errors.Is(err, eventstore.ErrDuplicateEventID) {
		t.Fatalf("id reused in another stream: err = %v, want ErrDuplicateEventID", err)
	}
}

func TestClose(t *testing.T) {
	s := memstore.New()
	done := make(chan error, 1)
	go func() {
		done <- s.SubscribeAll(t.Context(), 0, func(context.Context, eventschema.Envelope) error { return nil })
	}()
	for range 2 { // closing twice is fine
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	errs := map[string]error{"subscription": nil}
	select {
	case errs["subscription"] = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("subscription still running after close")
	}
	_, errs["append"] = s.Append(t.Context(), "x-1", eventstore.Any(), []eventschema.Envelope{storetest.NewEvent("late", nil)})
	_, errs["read stream"] = s.ReadStream(t.Context(), "x-1", 0, 0)
	_, errs["read all"] = s.ReadAll(t.Context(), 0, 0)
	for what, err := range errs {
		if !errors.Is(err, memstore.ErrClosed) {
			t.Errorf("%s after close: err = %v, want ErrClosed", what, err)
		}
	}
}
