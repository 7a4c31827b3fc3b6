// The key store of crypto-shredding: SQLite under the data dir beside the embedded event store,
// EventStoreDB beside an EventStoreDB event store.

package main

import (
	"fmt"
	"path/filepath"

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
	eventschema.Keys
	close func() error
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
	return &keyStore{Keys: keystore.NewCache(s, keystore.DefaultCacheTTL, keystore.DefaultCacheSize), close: s.Close}, nil
}

// openESDBKeys opens the key store on the event store's EventStoreDB: one stream per subject,
// tombstoned on erasure (esdbkeys says which scavenge that relies on).
func openESDBKeys(cfg *Config) (*keyStore, error) {
	s, err := esdbkeys.Open(cfg.EventStore)
	if err != nil {
		return nil, err
	}
	return &keyStore{Keys: keystore.NewCache(s, keystore.DefaultCacheTTL, keystore.DefaultCacheSize), close: s.Close}, nil
}
