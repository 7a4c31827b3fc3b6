// The stores: the event store and the read models, on the embedded default or the servers.

package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/command/eventstore/esdb"
	"github.com/samla/samla/command/eventstore/sqlite"
	"github.com/samla/samla/projections"
)

func openStore(cfg *Config) (eventstore.Store, error) {
	switch {
	case cfg.EventStore == "" || cfg.EventStore == "sqlite":
		path := filepath.Join(cfg.DataDir, "eventstore", "events.db")
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("create event store dir: %w", err)
		}
		store, err := sqlite.Open(path)
		if err != nil {
			return nil, fmt.Errorf("open SQLite event store: %w", err)
		}
		return store, nil
	case strings.HasPrefix(cfg.EventStore, "esdb://") || strings.HasPrefix(cfg.EventStore, "esdb+discover://") ||
		strings.HasPrefix(cfg.EventStore, "kurrentdb://"):
		store, err := esdb.Open(cfg.EventStore)
		if err != nil {
			return nil, fmt.Errorf("open EventStoreDB: %w", err)
		}
		return store, nil
	}
	return nil, fmt.Errorf("SAMLA_EVENTSTORE %q: want sqlite or an esdb:// connection string", cfg.EventStore)
}

func openReadModels(ctx context.Context, cfg *Config) (*projections.ReadModels, error) {
	if cfg.ClickHouseDSN != "" {
		m, err := projections.OpenClickHouseReadModels(ctx, cfg.ClickHouseDSN)
		if err != nil {
			return nil, fmt.Errorf("open ClickHouse read models: %w", err)
		}
		return m, nil
	}
	m, err := projections.OpenSQLiteReadModels(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("open SQLite read models: %w", err)
	}
	return m, nil
}

// RebuildProjections empties the read models and replays the event store into them. The
// projections must not run meanwhile.
func RebuildProjections(ctx context.Context, cfg *Config, logger *slog.Logger) (int, error) {
	store, err := openStore(cfg)
	if err != nil {
		return 0, err
	}
	defer store.Close()
	models, err := openReadModels(ctx, cfg)
	if err != nil {
		return 0, err
	}
	defer models.Close()
	n, err := projections.Rebuild(ctx, store, models)
	if err != nil {
		return n, fmt.Errorf("rebuild: %w", err)
	}
	logger.Info("read models rebuilt", "events", n)
	return n, nil
}
