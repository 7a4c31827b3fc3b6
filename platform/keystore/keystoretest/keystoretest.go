// Package keystoretest is the contract suite of the key store port (eventschema.Keys): every
// adapter in platform/keystore passes it.
package keystoretest

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/samla/samla/eventschema"
)

// Store is a key store under test.
type Store interface {
	eventschema.Keys
	Close() error
}

// Run runs the suite; open returns a new, empty store each time.
func Run(t *testing.T, open func(t *testing.T) Store) {
	ctx := context.Background()
	t.Run("get or create then get", func(t *testing.T) {
		s := open(t)
		k, err := s.GetOrCreate(ctx, "user-1")
		if err != nil {
			t.Fatal(err)
		}
		if k.IsZero() || len(k.Material()) != eventschema.KeySize {
			t.Fatalf("created %v with %d bytes", k, len(k.Material()))
		}
		again, err := s.GetOrCreate(ctx, "user-1")
		if err != nil || !same(again, k) {
			t.Fatalf("second get-or-create = %v, %v; want %v", again, err, k)
		}
		got, err := s.Get(ctx, "user-1")
		if err != nil || !same(got, k) {
			t.Fatalf("get = %v, %v; want %v", got, err, k)
		}
		other, err := s.GetOrCreate(ctx, "collection-2")
		if err != nil {
			t.Fatal(err)
		}
		if other.ID() == k.ID() || bytes.Equal(other.Material(), k.Material()) {
			t.Fatalf("two subjects share a key: %v, %v", k, other)
		}
	})
	t.Run("an unknown subject is a lost key", func(t *testing.T) {
		s := open(t)
		if _, err := s.Get(ctx, "user-unknown"); !errors.Is(err, eventschema.ErrKeyNotFound) || errors.Is(err, eventschema.ErrSubjectErased) {
			t.Fatalf("get of an unknown subject: %v", err)
		}
	})
	t.Run("concurrent creators get one key", func(t *testing.T) {
		s := open(t)
		const creators = 8
		for round := range 3 {
			subject := "user-race-" + string(rune('a'+round))
			keys := make([]eventschema.Key, creators)
			errs := make([]error, creators)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range creators {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					keys[i], errs[i] = s.GetOrCreate(ctx, subject)
				}()
			}
			close(start)
			wg.Wait()
			for i := range creators {
				if errs[i] != nil {
					t.Fatalf("creator %d: %v", i, errs[i])
				}
				if !same(keys[i], keys[0]) {
					t.Fatalf("creators got different keys: %v and %v", keys[0], keys[i])
				}
			}
			stored, err := s.Get(ctx, subject)
			if err != nil || !same(stored, keys[0]) {
				t.Fatalf("stored %v, %v; creators got %v", stored, err, keys[0])
			}
		}
	})
	t.Run("destroy leaves a tombstone", func(t *testing.T) {
		s := open(t)
		if _, err := s.GetOrCreate(ctx, "user-gone"); err != nil {
			t.Fatal(err)
		}
		if err := s.Destroy(ctx, "user-gone"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, "user-gone"); !errors.Is(err, eventschema.ErrSubjectErased) {
			t.Fatalf("get after destroy: %v", err)
		}
		if k, err := s.GetOrCreate(ctx, "user-gone"); !errors.Is(err, eventschema.ErrSubjectErased) {
			t.Fatalf("get-or-create after destroy = %v, %v; an erased subject must never get a new key", k, err)
		}
		if err := s.Destroy(ctx, "user-gone"); err != nil {
			t.Fatalf("second destroy: %v", err)
		}
		// A subject erased before it ever had a key stays erased too.
		if err := s.Destroy(ctx, "user-never"); err != nil {
			t.Fatalf("destroy of an unknown subject: %v", err)
		}
		if _, err := s.GetOrCreate(ctx, "user-never"); !errors.Is(err, eventschema.ErrSubjectErased) {
			t.Fatalf("get-or-create of a subject erased without a key: %v", err)
		}
		// Others are untouched.
		if _, err := s.GetOrCreate(ctx, "user-kept"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a closed store fails", func(t *testing.T) {
		s := open(t)
		if _, err := s.GetOrCreate(ctx, "user-1"); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if k, err := s.Get(ctx, "user-1"); err == nil || errors.Is(err, eventschema.ErrSubjectErased) {
			t.Fatalf("get on a closed store = %v, %v", k, err)
		}
		if k, err := s.GetOrCreate(ctx, "user-2"); err == nil || errors.Is(err, eventschema.ErrSubjectErased) {
			t.Fatalf("get-or-create on a closed store = %v, %v", k, err)
		}
		if err := s.Destroy(ctx, "user-1"); err == nil {
			t.Fatal("destroy on a closed store succeeded")
		}
	})
}

func same(a, b eventschema.Key) bool {
	return a.ID() == b.ID() && bytes.Equal(a.Material(), b.Material())
}
