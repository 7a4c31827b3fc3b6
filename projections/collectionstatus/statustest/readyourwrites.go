package statustest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/projections/collectionstatus"
	"github.com/samla/samla/projections/internal/eventlog"
	"github.com/samla/samla/query"
)

// testReaderReadYourWrites: a collection the read model does not show yet is folded from the
// event store's stream as the projector would fold it, for its own tenant only; one the read
// model shows never reaches the event store; a stream the store does not know is a 404; an
// event store that fails is an error, never a 404.
func testReaderReadYourWrites(t *testing.T, s collectionstatus.Store) {
	log := eventlog.New(t)
	envs, want := life(log, "acme", "c-new", base)
	calls := 0
	streams := map[string][]eventschema.Envelope{"c-new": envs}
	var failing error
	source := func(_ context.Context, id string) ([]eventschema.Envelope, error) {
		calls++
		return streams[id], failing
	}
	reader := collectionstatus.NewReader(s, suiteKeys).WithEventStore(log.Registry(), source)

	got, err := reader.Get(ctx(t), "acme", "c-new")
	if err != nil {
		t.Fatalf("Get of a collection only the event store has: %v", err)
	}
	if got.Status != want.Status || got.Tenant != "acme" || got.Company != want.Company ||
		!got.CreatedAt.Equal(want.CreatedAt) || !got.UpdatedAt.Equal(want.UpdatedAt) ||
		got.ExtraInformation["MESSAGE"] != "Done" || got.UpdatedAt.Location() != time.UTC {
		t.Fatalf("Get from the event store = %#v, want the folded %#v", got, want)
	}
	for _, ref := range [][2]string{{"other", "c-new"}, {"acme", "c-unknown"}} {
		if _, err := reader.Get(ctx(t), ref[0], ref[1]); !errors.Is(err, query.ErrNotFound) {
			t.Fatalf("Get(%s, %s) = %v, want query.ErrNotFound", ref[0], ref[1], err)
		}
	}
	if user, found, err := reader.CollectionUser(ctx(t), "acme", "c-new"); err != nil || !found || user != want.UserUUID {
		t.Fatalf("CollectionUser of a collection only the event store has = %q, %v, %v", user, found, err)
	}
	if _, found, err := reader.CollectionUser(ctx(t), "other", "c-new"); err != nil || found {
		t.Fatalf("another tenant's CollectionUser = %v, %v; want not found", found, err)
	}
	// Nothing was written: the read model still lacks it, and the projection then folds it.
	if _, err := s.Get(ctx(t), "acme", "c-new"); err == nil {
		t.Fatal("the fallback wrote the row into the read model")
	}
	handle(t, collectionstatus.NewProjector(log.Registry(), s, suiteKeys), envs)
	calls = 0
	if got, err := reader.Get(ctx(t), "acme", "c-new"); err != nil || got.Status != "COMPLETED" || calls != 0 {
		t.Fatalf("Get of a projected collection = %v, %v with %d event-store reads, want COMPLETED and none", got.Status, err, calls)
	}
	failing = errors.New("event store unreachable")
	if _, err := reader.Get(ctx(t), "acme", "c-unknown"); err == nil || errors.Is(err, query.ErrNotFound) {
		t.Fatalf("Get with the event store failing = %v, want its error, not a 404", err)
	}
}
