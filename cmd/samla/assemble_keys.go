// The key store of crypto-shredding: SQLite under the data dir beside the embedded event store,
// EventStoreDB beside an EventStoreDB event store.

package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/keystore"
	"github.com/samla/samla/platform/keystore/esdbkeys"
	"github.com/samla/samla/platform/keystore/sqlitekeys"
)

// KeyStoreFile is the embedded key store under the data dir: a file of its own, so that a copy
// of the event store or of the read models does not carry the keys that open them.
var KeyStoreFile = filepath.Join("keystore", "keys.db")

// keyStore is the key store a process opens, and how to close it.
type keyStore struct {
	// Cache is the bounded cache in front of the store: the process's eventschema.Keys, with
	// the rebuild's GetMany and the process's Sweep.
	*keystore.Cache
	close func() error
	// count counts the store's live keys and tombstones, for checkKeysNotLost; nil for
	// EventStoreDB's, whose key streams live in the event store's own database and cannot be
	// lost apart from it.
	count func(context.Context) (live, erased int, err error)
	where string // the key store's file, for errors
}

// ErrKeyStoreLost is a key store that holds no key beside an event store that holds personal
// data sealed under keys (checkKeysNotLost).
var ErrKeyStoreLost = errors.New("the key store holds no key, but the event store holds personal data sealed under keys")

// keysCheckBatch is how many events checkKeysNotLost reads at a time.
const keysCheckBatch = 1000

// checkKeysNotLost refuses to go on with a key store that has neither a key nor a tombstone when
// the event store holds an event whose personal data was sealed (or erased, which needs a
// tombstone): the key store was lost, not restored with the event store's backup, or belongs to
// another deployment. Started so, Samla would fail every read of that data, and worse, seal new
// personal data of the same people under new keys, which an erasure would then destroy while
// the old keys, wherever they are, still open the rest. An event store from before sealing (no
// sealed event) starts with a new key store; so does an empty one. The events are read from the
// start only while the key store is empty: the first sealed event creates a key.
func checkKeysNotLost(ctx context.Context, keys *keyStore, store eventstore.Store) error {
	if keys.count == nil {
		return nil
	}
	live, erased, err := keys.count(ctx)
	if err != nil {
		return fmt.Errorf("check the key store: %w", err)
	}
	if live+erased > 0 {
		return nil
	}
	var after uint64
	for {
		batch, err := store.ReadAll(ctx, after, keysCheckBatch)
		if err != nil {
			return fmt.Errorf("check the key store against the event store: %w", err)
		}
		for _, env := range batch {
			if eventschema.PersonalSealed(env.Payload) || eventschema.PersonalErased(env.Payload) {
				return fmt.Errorf("%w (the first at position %d, %s): restore the key store %s from the backup that goes with "+
					"the event store, or point Samla at the event store it belongs to", ErrKeyStoreLost, env.Position, env.Type, keys.where)
			}
			after = env.Position
		}
		if len(batch) < keysCheckBatch {
			return nil
		}
	}
}

// openKeys opens the key store that goes with the configured event store, behind a bounded
// cache (keystore.DefaultCacheTTL: another process's erasure reaches this one's cache within
// it; this process's own erasures at once).
func openKeys(cfg *Config) (*keyStore, error) {
	if !embeddedEventStore(cfg) {
		return openESDBKeys(cfg)
	}
	path := filepath.Join(cfg.DataDir, KeyStoreFile)
	s, err := sqlitekeys.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open the key store: %w", err)
	}
	cache := keystore.NewCache(s, keystore.DefaultCacheTTL, keystore.DefaultCacheSize)
	return &keyStore{Cache: cache, close: s.Close, count: s.Count, where: path}, nil
}

// openESDBKeys opens the key store on the event store's EventStoreDB: one stream per subject,
// tombstoned on erasure (esdbkeys says which scavenge that relies on).
func openESDBKeys(cfg *Config) (*keyStore, error) {
	s, err := esdbkeys.Open(cfg.EventStore)
	if err != nil {
		return nil, err
	}
	cache := keystore.NewCache(s, keystore.DefaultCacheTTL, keystore.DefaultCacheSize)
	return &keyStore{Cache: cache, close: s.Close}, nil
}
