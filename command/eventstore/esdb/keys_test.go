package esdb_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/keystore/esdbkeys"
)

// TestKeyStreamsStayOutOfAll: the key store shares the server; its key events never reach the
// readers of $all (the relay, a rebuild), so no key is ever published to Kafka.
func TestKeyStreamsStayOutOfAll(t *testing.T) {
	ctx := testContext(t)
	srv := startServer(t)
	keys, err := esdbkeys.Open(srv.ConnectionString())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = keys.Close() })
	if _, err := keys.GetOrCreate(ctx, "user-1"); err != nil {
		t.Fatal(err)
	}
	if err := keys.Destroy(ctx, "user-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := keys.GetOrCreate(ctx, "collection-2"); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, srv)
	// An event of Samla's after the keys: the readers reach it, and nothing before it.
	if _, err := s.Append(ctx, "collection-c1", eventstore.NoStream(), []eventschema.Envelope{{
		EventID: uuid.NewString(), Type: "collection.claimed", SchemaVersion: 1, Payload: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	all, err := s.ReadAll(ctx, 0, 0)
	if err != nil || len(all) != 1 || all[0].Stream != "collection-c1" {
		t.Fatalf("ReadAll = %v, %v; want only collection-c1", all, err)
	}
	reached := errors.New("reached collection-c1")
	err = s.SubscribeAll(ctx, 0, func(_ context.Context, e eventschema.Envelope) error {
		if e.Stream != "collection-c1" {
			t.Errorf("the subscription delivered %s/%s", e.Stream, e.Type)
		}
		return reached
	})
	if !errors.Is(err, reached) {
		t.Fatalf("subscription: %v", err)
	}
}
