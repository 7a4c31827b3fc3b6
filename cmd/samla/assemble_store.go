// The stores: the event store and the read models, on the embedded default or the servers.

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/command/eventstore/esdb"
	"github.com/samla/samla/command/eventstore/sqlite"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/filelock"
	"github.com/samla/samla/projections"
)

// dataDirLockFile is the lock that keeps a rebuild of the read models away from the processes
// that use them: every process that opens a store in the data dir holds it shared, `samla
// projections rebuild` exclusive. Without it a rebuild under a running server emptied the read models while polls
// read them (41 of 80 polls answered 404).
//
// With the event store on EventStoreDB and the read models on ClickHouse there is no shared data
// dir, and nothing protects a rebuild there yet: the operator must stop the roles that read or
// project the read models first.
const dataDirLockFile = "samla.lock"

// embeddedEventStore tells whether the event store is the SQLite file under the data dir.
func embeddedEventStore(cfg *Config) bool { return cfg.EventStore == "" || cfg.EventStore == "sqlite" }

// usesDataDir tells whether a process configured so opens a store under the data dir: the
// SQLite event store or the SQLite read models. Every role opens one of the two kinds.
func usesDataDir(cfg *Config) bool { return embeddedEventStore(cfg) || cfg.ClickHouseDSN == "" }

// dataDirUse is how a process uses the stores under the data dir.
type dataDirUse int

const (
	// useBeside: beside other processes (a service's roles, a client registration). A running
	// rebuild refuses it.
	useBeside dataDirUse = iota
	// useAlone: alone (a rebuild). Any running process that uses the stores refuses it.
	useAlone
)

// lockDataDir takes the data dir's lock, shared for useBeside and exclusive for useAlone, or
// nothing when the process uses no store under the data dir. release gives it back; the end of
// the process does too, so a crash leaves no stale lock.
func lockDataDir(cfg *Config, use dataDirUse) (release func() error, err error) {
	if !usesDataDir(cfg) {
		return func() error { return nil }, nil
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	take, refusal := filelock.Shared, "the data dir %s is being rebuilt by samla projections rebuild (pid %s); start again when it is done: %w"
	if use == useAlone {
		take, refusal = filelock.Exclusive, "the data dir %s is in use by a running samla (pid %s); stop it first: %w"
	}
	l, err := take(filepath.Join(cfg.DataDir, dataDirLockFile))
	var held *filelock.HeldError
	switch {
	case errors.As(err, &held):
		return nil, fmt.Errorf(refusal, cfg.DataDir, held.PIDList(), err)
	case err != nil:
		return nil, fmt.Errorf("lock the data dir %s: %w", cfg.DataDir, err)
	}
	return l.Release, nil
}

func openStore(cfg *Config) (eventstore.Store, error) {
	switch {
	case embeddedEventStore(cfg):
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

func openReadModels(ctx context.Context, cfg *Config, keys eventschema.Keys) (*projections.ReadModels, error) {
	if cfg.ClickHouseDSN != "" {
		m, err := projections.OpenClickHouseReadModels(ctx, cfg.ClickHouseDSN, keys)
		if err != nil {
			return nil, fmt.Errorf("open ClickHouse read models: %w", err)
		}
		return m, nil
	}
	m, err := projections.OpenSQLiteReadModels(cfg.DataDir, keys)
	if err != nil {
		return nil, fmt.Errorf("open SQLite read models: %w", err)
	}
	return m, nil
}

// RebuildProjections rebuilds the read models from the event store (projections.RebuildWith:
// into new tables, swapped in when complete) and returns how many events it replayed. The
// projections must not run meanwhile, nor any reader: under the data dir's lock (see
// dataDirLockFile) a rebuild is refused while a process uses the data dir.
func RebuildProjections(ctx context.Context, cfg *Config, logger *slog.Logger) (int, error) {
	summary, err := rebuildProjections(ctx, cfg, logger, nil)
	return summary.Events, err
}

// rebuildProjections is RebuildProjections reporting its progress to progress (when not nil),
// returning the final progress: events, read models and time.
func rebuildProjections(ctx context.Context, cfg *Config, logger *slog.Logger,
	progress func(projections.RebuildProgress)) (projections.RebuildProgress, error) {
	var final projections.RebuildProgress
	release, err := lockDataDir(cfg, useAlone)
	if err != nil {
		return final, err
	}
	defer func() { _ = release() }()
	store, err := openStore(cfg)
	if err != nil {
		return final, err
	}
	defer store.Close()
	keys, err := openKeys(cfg)
	if err != nil {
		return final, err
	}
	defer keys.close()
	if err := checkKeysNotLost(ctx, keys, store); err != nil {
		return final, err
	}
	models, err := openReadModels(ctx, cfg, keys)
	if err != nil {
		return final, err
	}
	defer models.Close()
	n, err := projections.RebuildWith(ctx, store, models, projections.RebuildOptions{
		Progress: func(p projections.RebuildProgress) {
			if p.Done {
				final = p
			}
			if progress != nil {
				progress(p)
			}
		},
	})
	if err != nil {
		// RebuildWith's errors start with "rebuild:" already.
		final.Events = n
		return final, err
	}
	logger.Info("read models rebuilt", "events", final.Events, "read_models", final.ReadModels,
		"seconds", final.Elapsed.Seconds(), "events_per_second", int(rate(final.Events, final.Elapsed)))
	return final, nil
}
