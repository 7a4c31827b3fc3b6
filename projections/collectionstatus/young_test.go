package collectionstatus_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/keystore"
	"github.com/samla/samla/projections/collectionstatus"
	"github.com/samla/samla/projections/internal/eventlog"
	"github.com/samla/samla/query"
)

// v7At is a version 7 UUID minted at t.
func v7At(t *testing.T, at time.Time) string {
	t.Helper()
	u, err := uuid.NewV7()
	if err != nil {
		t.Fatal(err)
	}
	ms := at.UnixMilli()
	for i := range 6 {
		u[i] = byte(ms >> (40 - 8*i))
	}
	return u.String()
}

// A collection minted within a minute that the status view does not hold is read from the
// event store without asking the read model (on ClickHouse that miss alone took tens of
// milliseconds of a poll right after the 201); older ids, and ids made from an Idempotency-Key
// (no time in them), ask the read model first as before. What the view holds is served from it.
func TestYoungCollectionsAreReadFromTheEventStore(t *testing.T) {
	ctx := context.Background()
	now := time.Now().UTC()
	log := eventlog.New(t)
	var (
		young  = v7At(t, now.Add(-2*time.Second))
		future = v7At(t, now.Add(30*time.Second)) // the command's clock ahead of this one
		old    = v7At(t, now.Add(-2*time.Minute))
		keyed  = uuid.NewSHA1(uuid.NameSpaceURL, []byte("idempotency key")).String()
		unseen = v7At(t, now.Add(-time.Second))
	)
	streams := map[string][]eventschema.Envelope{}
	for _, id := range []string{young, future, old, keyed} {
		streams[id] = []eventschema.Envelope{log.Append("acme", collection.StreamName(id), now, collection.Started{
			CollectionID: id, ClientID: "acme", Company: "se-demo-insurer", Product: collection.ProductInsurance,
			LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE", APIVersion: "2026-04-01", StartedAt: now})}
	}
	sourced := map[string]int{}
	source := func(_ context.Context, id string) ([]eventschema.Envelope, error) {
		sourced[id]++
		return streams[id], nil
	}
	durable := &countingStore{Store: sqliteStore(t)}
	keys := keystore.NewMemory()
	cached := collectionstatus.Cached(durable, collectionstatus.NewView(100))
	reader := collectionstatus.SetReaderClock(
		collectionstatus.NewReader(cached, keys).WithEventStore(log.Registry(), source),
		func() time.Time { return now })

	for _, c := range []struct {
		name, id   string
		storeReads int64
	}{
		{"young", young, 0}, {"minted ahead of this clock", future, 0},
		{"a minute old", old, 1}, {"from an Idempotency-Key", keyed, 1},
	} {
		before := durable.gets.Load()
		got, err := reader.Get(ctx, "acme", c.id)
		if err != nil || got.Status != "RUNNING" {
			t.Fatalf("%s: Get = %v, %v; want RUNNING from the event store", c.name, got.Status, err)
		}
		if reads := durable.gets.Load() - before; reads != c.storeReads || sourced[c.id] != 1 {
			t.Fatalf("%s: %d read-model reads and %d event-store reads, want %d and 1", c.name, reads, sourced[c.id], c.storeReads)
		}
		// Another tenant's Get reads the event store too, and finds nothing of its own.
		if _, err := reader.Get(ctx, "other", c.id); !errors.Is(err, query.ErrNotFound) {
			t.Fatalf("%s: another tenant's Get = %v, want query.ErrNotFound", c.name, err)
		}
	}
	// A young id the event store does not know is unknown: a 404 without the read model.
	before := durable.gets.Load()
	if _, err := reader.Get(ctx, "acme", unseen); !errors.Is(err, query.ErrNotFound) || durable.gets.Load() != before {
		t.Fatalf("an unknown young id = %v after %d read-model reads, want query.ErrNotFound and none", err, durable.gets.Load()-before)
	}
	// Once projected, a young collection is served from the view: neither store is read.
	if err := collectionstatus.NewProjector(log.Registry(), cached, keys).Handle(ctx, streams[young]); err != nil {
		t.Fatal(err)
	}
	before, sourcedBefore := durable.gets.Load(), sourced[young]
	if got, err := reader.Get(ctx, "acme", young); err != nil || got.Status != "RUNNING" ||
		durable.gets.Load() != before || sourced[young] != sourcedBefore {
		t.Fatalf("a projected young id = %v, %v after %d read-model and %d event-store reads, want none",
			got.Status, err, durable.gets.Load()-before, sourced[young]-sourcedBefore)
	}
}
