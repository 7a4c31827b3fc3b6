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
// milliseconds of a poll right after the 201), and the view keeps what was read; older ids, and
// ids made from an Idempotency-Key (no time in them), ask the read model first as before. What
// the view holds is served from it, and an event store that fails leaves the poll to the read
// model.
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
	var failing error
	source := func(_ context.Context, id string) ([]eventschema.Envelope, error) {
		sourced[id]++
		return streams[id], failing
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
		remembered bool
	}{
		{"young", young, 0, true}, {"minted ahead of this clock", future, 0, true},
		{"a minute old", old, 1, false}, {"from an Idempotency-Key", keyed, 1, false},
	} {
		before := durable.gets.Load()
		got, err := reader.Get(ctx, "acme", c.id)
		if err != nil || got.Status != "RUNNING" {
			t.Fatalf("%s: Get = %v, %v; want RUNNING from the event store", c.name, got.Status, err)
		}
		if reads := durable.gets.Load() - before; reads != c.storeReads || sourced[c.id] != 1 {
			t.Fatalf("%s: %d read-model reads and %d event-store reads, want %d and 1", c.name, reads, sourced[c.id], c.storeReads)
		}
		// The view kept the young row: the next poll reads neither store.
		before = durable.gets.Load()
		if _, err := reader.Get(ctx, "acme", c.id); err != nil {
			t.Fatalf("%s: second Get: %v", c.name, err)
		}
		if c.remembered && (sourced[c.id] != 1 || durable.gets.Load() != before) {
			t.Fatalf("%s: the view did not keep the row read from the event store (%d event-store, %d read-model reads)",
				c.name, sourced[c.id], durable.gets.Load()-before)
		}
		if _, err := reader.Get(ctx, "other", c.id); !errors.Is(err, query.ErrNotFound) {
			t.Fatalf("%s: another tenant's Get = %v, want query.ErrNotFound", c.name, err)
		}
	}
	// An event store that fails leaves a young id the view lacks to the read model.
	inModel := v7At(t, now.Add(-time.Second))
	if err := durable.Store.Upsert(ctx, []collectionstatus.Row{viewRow(inModel, "acme", "COLLECTING", 2)}); err != nil {
		t.Fatal(err)
	}
	failing = errors.New("event store unreachable")
	if got, err := reader.Get(ctx, "acme", inModel); err != nil || got.Status != "COLLECTING" {
		t.Fatalf("a young id with the event store failing = %v, %v; want COLLECTING from the read model", got.Status, err)
	}
	failing = nil
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

// In a query process (a followed view), a young collection's first poll reads the event store
// and leaves the row in the view, where the follower then takes it from event to event: the
// polls after it read neither store (before, the view got the row only from the read model, and
// the follower ignored a collection the view did not hold).
func TestYoungCollectionsAreFollowedAfterTheirFirstPoll(t *testing.T) {
	ctx := context.Background()
	now := time.Now().UTC()
	log := eventlog.New(t)
	keys := keystore.NewMemory()
	id := v7At(t, now.Add(-time.Second))
	stream := collection.StreamName(id)
	var envs []eventschema.Envelope
	envs = append(envs, log.Append("acme", stream, now, collection.Started{
		CollectionID: id, ClientID: "acme", Company: "se-demo-insurer", Product: collection.ProductInsurance,
		LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE", APIVersion: "2026-04-01", StartedAt: now}))
	sourced := 0
	source := func(context.Context, string) ([]eventschema.Envelope, error) { sourced++; return envs, nil }
	durable := &countingStore{Store: sqliteStore(t)}
	view := collectionstatus.NewView(100)
	reader := collectionstatus.SetReaderClock(
		collectionstatus.NewReader(collectionstatus.Followed(durable, view, time.Hour, time.Hour), keys).
			WithEventStore(log.Registry(), source),
		func() time.Time { return now })
	follower := collectionstatus.NewFollower(log.Registry(), view, keys)

	if got, err := reader.Get(ctx, "acme", id); err != nil || got.Status != "RUNNING" || sourced != 1 || durable.gets.Load() != 0 {
		t.Fatalf("first poll = %v, %v after %d event-store and %d read-model reads, want RUNNING from the event store",
			got.Status, err, sourced, durable.gets.Load())
	}
	login := log.Append("acme", stream, now.Add(time.Second), collection.StatusChanged{
		From: collection.StatusRunning, To: collection.StatusLogin, ChangedAt: now.Add(time.Second)})
	envs = append(envs, login)
	if err := follower.Handle(ctx, []eventschema.Envelope{login}); err != nil {
		t.Fatal(err)
	}
	if got, err := reader.Get(ctx, "acme", id); err != nil || got.Status != "LOGIN" || sourced != 1 || durable.gets.Load() != 0 {
		t.Fatalf("poll after the follower = %v, %v after %d event-store and %d read-model reads, want LOGIN from memory",
			got.Status, err, sourced, durable.gets.Load())
	}
}
