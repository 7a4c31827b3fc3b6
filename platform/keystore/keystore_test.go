package keystore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/keystore"
	"github.com/samla/samla/platform/keystore/keystoretest"
)

func TestMemory(t *testing.T) {
	keystoretest.Run(t, func(t *testing.T) keystoretest.Store { return keystore.NewMemory() })
}

// cachedStore is the cache in front of a memory store, closed with it.
type cachedStore struct {
	*keystore.Cache
	inner *keystore.Memory
}

func (c cachedStore) Close() error { return c.inner.Close() }

func TestCacheKeepsTheContract(t *testing.T) {
	keystoretest.Run(t, func(t *testing.T) keystoretest.Store {
		// A TTL of a nanosecond: a closed store is asked, not the cache.
		inner := keystore.NewMemory()
		return cachedStore{Cache: keystore.NewCache(inner, time.Nanosecond, 0), inner: inner}
	})
}

// countingKeys counts the calls that reach the store.
type countingKeys struct {
	eventschema.Keys
	gets int
}

func (c *countingKeys) Get(ctx context.Context, subject string) (eventschema.Key, error) {
	c.gets++
	return c.Keys.Get(ctx, subject)
}

func TestCacheAnswersRepeatedGetsAndDropsADestroyedKeyAtOnce(t *testing.T) {
	ctx := context.Background()
	inner := &countingKeys{Keys: keystore.NewMemory()}
	c := keystore.NewCache(inner, time.Hour, 0)
	k, err := c.GetOrCreate(ctx, "user-1")
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		got, err := c.Get(ctx, "user-1")
		if err != nil || got.ID() != k.ID() {
			t.Fatalf("get = %v, %v", got, err)
		}
	}
	if inner.gets != 0 {
		t.Fatalf("%d gets reached the store; the cache should have answered", inner.gets)
	}
	if err := c.Destroy(ctx, "user-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, "user-1"); !errors.Is(err, eventschema.ErrSubjectErased) {
		t.Fatalf("get after destroy: %v", err)
	}
	// A lost key is asked again every time: the store may come back.
	for range 2 {
		if _, err := c.Get(ctx, "user-unknown"); !errors.Is(err, eventschema.ErrKeyNotFound) {
			t.Fatalf("unknown: %v", err)
		}
	}
	if inner.gets != 2 {
		t.Fatalf("lost keys were cached: %d gets", inner.gets)
	}
}

// TestCacheBound: a key destroyed by another process is served from the cache for at most the
// TTL; the cache holds at most its size.
func TestCacheBound(t *testing.T) {
	ctx := context.Background()
	inner := keystore.NewMemory()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := keystore.NewCache(inner, 30*time.Second, 2, keystore.WithCacheClock(func() time.Time { return now }))
	if _, err := c.GetOrCreate(ctx, "user-1"); err != nil {
		t.Fatal(err)
	}
	if err := inner.Destroy(ctx, "user-1"); err != nil { // another process's erasure
		t.Fatal(err)
	}
	now = now.Add(29 * time.Second)
	if _, err := c.Get(ctx, "user-1"); err != nil {
		t.Fatalf("within the TTL the cached key answers: %v", err)
	}
	now = now.Add(time.Second)
	if _, err := c.Get(ctx, "user-1"); !errors.Is(err, eventschema.ErrSubjectErased) {
		t.Fatalf("past the TTL the cache still serves a destroyed key: %v", err)
	}
	// The size bound: three subjects in a cache of two still answer correctly.
	for _, s := range []string{"user-a", "user-b", "user-c"} {
		if _, err := c.GetOrCreate(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []string{"user-a", "user-b", "user-c"} {
		if _, err := c.Get(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// TestCacheSweep: a sweep forgets the keys past their TTL and keeps the fresh ones and the
// erasures, which still answer as before.
func TestCacheSweep(t *testing.T) {
	ctx := context.Background()
	inner := &countingKeys{Keys: keystore.NewMemory()}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := keystore.NewCache(inner, 30*time.Second, 0, keystore.WithCacheClock(func() time.Time { return now }))
	var seventh eventschema.Key
	for i := range 100 {
		k, err := c.GetOrCreate(ctx, fmt.Sprintf("collection-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if i == 7 {
			seventh = k
		}
	}
	if err := c.Destroy(ctx, "user-erased"); err != nil {
		t.Fatal(err)
	}
	now = now.Add(20 * time.Second)
	fresh, err := c.GetOrCreate(ctx, "user-fresh")
	if err != nil {
		t.Fatal(err)
	}
	c.Sweep()
	if n := c.Len(); n != 102 {
		t.Fatalf("a sweep within the TTL left %d subjects, want all 102", n)
	}
	now = now.Add(10 * time.Second) // the first 100 are 30 s old, user-fresh 10 s
	c.Sweep()
	if n := c.Len(); n != 2 {
		t.Fatalf("a sweep past the TTL left %d subjects, want user-fresh and the erasure", n)
	}
	if got, err := c.Get(ctx, "user-fresh"); err != nil || got.ID() != fresh.ID() {
		t.Fatalf("user-fresh after the sweep: %v, %v", got, err)
	}
	if _, err := c.Get(ctx, "user-erased"); !errors.Is(err, eventschema.ErrSubjectErased) {
		t.Fatalf("the erasure after the sweep: %v", err)
	}
	if inner.gets != 0 {
		t.Fatalf("%d gets reached the store; the cache should have answered what it kept", inner.gets)
	}
	// A forgotten subject is asked of the store again, and answers the same key.
	if got, err := c.Get(ctx, "collection-7"); err != nil || inner.gets != 1 || got.ID() != seventh.ID() {
		t.Fatalf("a swept subject: key %v, %v after %d gets, want its key %s from the store", got, err, inner.gets, seventh.ID())
	}
}

func TestErasures(t *testing.T) {
	ctx := context.Background()
	keys := keystore.NewMemory()
	if _, err := keys.GetOrCreate(ctx, "user-live"); err != nil {
		t.Fatal(err)
	}
	if err := keys.Destroy(ctx, "user-gone"); err != nil {
		t.Fatal(err)
	}
	e := keystore.Erasures{Keys: keys}
	for subject, want := range map[string]bool{"user-live": false, "user-gone": true, "user-never": false} {
		if got, err := e.Erased(ctx, subject); err != nil || got != want {
			t.Errorf("Erased(%s) = %v, %v; want %v", subject, got, err, want)
		}
	}
	if err := keys.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Erased(ctx, "user-live"); !errors.Is(err, keystore.ErrClosed) {
		t.Errorf("Erased on a closed key store: %v", err)
	}
}
