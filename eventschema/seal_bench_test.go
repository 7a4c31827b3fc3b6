package eventschema_test

import (
	"context"
	"testing"

	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/keystore"
)

// BenchmarkSealOpenPersonal seals and opens a typical personal member (a collection.started's
// personal number and account owner's name) with the keys cached, as the service runs: the
// cost crypto-shredding adds to an append and to every reader of the event.
func BenchmarkSealOpenPersonal(b *testing.B) {
	ctx := context.Background()
	keys := keystore.NewCache(keystore.NewMemory(), 0, 0)
	if _, err := keys.GetOrCreate(ctx, "collection-c1"); err != nil {
		b.Fatal(err)
	}
	sealed, _, err := eventschema.SealPersonal(ctx, keys, "collection-c1", startedPayload)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("Seal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := eventschema.SealPersonal(ctx, keys, "collection-c1", startedPayload); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Open", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := eventschema.OpenPersonal(ctx, keys, sealed); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("OpenPlain", func(b *testing.B) { // an event without sealed data: the cheap test
		b.ReportAllocs()
		plain := []byte(`{"workerId":"w1","claimedAt":"2026-01-02T03:04:05Z"}`)
		for b.Loop() {
			if _, _, err := eventschema.OpenPersonal(ctx, keys, plain); err != nil {
				b.Fatal(err)
			}
		}
	})
}
