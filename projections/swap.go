package projections

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/samla/samla/platform/filelock"
	"github.com/samla/samla/projections/readdb"
)

// A rebuild builds new read models beside the served ones and swaps them in when they are
// complete.
//
// SQLite: the served models are the databases in <data dir>/readmodels. A rebuild writes new
// ones into readmodels.rebuild, syncs them, and marks the directory complete with the file
// rebuildComplete (the commit point: synced, with its directory). The swap then renames
// readmodels to readmodels.old and readmodels.rebuild to readmodels and removes the old one. A
// process killed anywhere in between leaves a state finishSQLiteRebuild, run by every open of the
// read models and by the next rebuild, completes (marked) or undoes (not marked). The data dir's
// lock keeps readers away meanwhile (samla projections rebuild runs alone).
//
// ClickHouse: the served tables are in the DSN's database. A rebuild creates them in
// <database>_rebuild and swaps them in with one RENAME TABLE statement (live to <database>_old,
// rebuilt to live) — ClickHouse renames the tables of one statement under one lock, so a query
// sees either the old tables or the new ones — then drops the two other databases. The next
// rebuild first moves back any old table that a killed swap left without a replacement, then
// drops the leftovers.
const (
	rebuildDirSuffix = ".rebuild"
	oldDirSuffix     = ".old"
	rebuildComplete  = "REBUILD-COMPLETE"

	rebuildDatabaseSuffix = "_rebuild"
	oldDatabaseSuffix     = "_old"
)

// rebuildTarget is a rebuild's new read models, and how to swap them in or throw them away.
type rebuildTarget struct {
	target *ReadModels
	// commit swaps the complete target in for the served models; m then serves it.
	commit func(context.Context) error
	// abort throws the target away, leaving the served models as they were.
	abort func() error
}

// beginRebuild creates empty read models beside m's, to rebuild into.
func (m *ReadModels) beginRebuild(ctx context.Context) (*rebuildTarget, error) {
	switch {
	case m.dataDir != "":
		return m.beginSQLiteRebuild()
	case m.conn != nil:
		return m.beginClickHouseRebuild(ctx)
	}
	return nil, errors.New("read models opened neither on SQLite nor on ClickHouse")
}

func (m *ReadModels) beginSQLiteRebuild() (*rebuildTarget, error) {
	if err := finishSQLiteRebuild(m.dataDir); err != nil {
		return nil, err
	}
	live := filepath.Join(m.dataDir, SQLiteDir)
	build := live + rebuildDirSuffix
	target, err := openSQLiteReadModelsIn(build, m.keys, m.reg, readdb.OpenSQLiteBulk, true)
	if err != nil {
		_ = os.RemoveAll(build)
		return nil, err
	}
	abort := func() error {
		cerr := target.Close()
		if err := os.RemoveAll(build); err != nil {
			return errors.Join(cerr, fmt.Errorf("remove %s: %w", build, err))
		}
		return cerr
	}
	commit := func(context.Context) error {
		if err := target.Close(); err != nil {
			return errors.Join(err, abort())
		}
		// The databases were written without syncs: sync them, then the mark, before any
		// rename makes them the served ones.
		if err := syncDir(build, true); err != nil {
			return errors.Join(err, abort())
		}
		if err := writeSynced(filepath.Join(build, rebuildComplete)); err != nil {
			return errors.Join(err, abort())
		}
		if err := syncDir(build, false); err != nil {
			return errors.Join(err, abort())
		}
		// From here the rebuild is committed: a failure below is finished by the next open.
		metrics := m.Metrics
		if err := m.Close(); err != nil {
			return err
		}
		if err := finishSQLiteRebuild(m.dataDir); err != nil {
			return err
		}
		fresh, err := openSQLiteReadModels(m.dataDir, m.keys, m.reg)
		if err != nil {
			return fmt.Errorf("reopen the rebuilt read models: %w", err)
		}
		fresh.Metrics = metrics
		*m = *fresh
		return nil
	}
	return &rebuildTarget{target: target, commit: commit, abort: abort}, nil
}

// swapLockFile serialises the processes that open the read models of one data dir at the same
// moment: each may find a marked rebuild to finish, and two finishing it at once could rename
// one's result away under the other (found in review).
const swapLockFile = "readmodels.swap.lock"

// swapLockWait bounds how long an open waits for another process's finishing of a swap.
const swapLockWait = 30 * time.Second

// finishSQLiteRebuild completes the swap of a rebuild that marked its databases complete, or
// removes the directory of one that did not; either way no readmodels.old stays behind. It
// runs alone among the processes opening the data dir (swapLockFile).
func finishSQLiteRebuild(dataDir string) error {
	path := filepath.Join(dataDir, swapLockFile)
	deadline := time.Now().Add(swapLockWait)
	for {
		l, err := filelock.Exclusive(path)
		if err == nil {
			defer l.Release()
			break
		}
		if !errors.Is(err, filelock.ErrHeld) || time.Now().After(deadline) {
			return fmt.Errorf("finish a rebuild of the read models: %w", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return finishSQLiteRebuildLocked(dataDir)
}

func finishSQLiteRebuildLocked(dataDir string) error {
	live := filepath.Join(dataDir, SQLiteDir)
	build, old := live+rebuildDirSuffix, live+oldDirSuffix
	complete, err := exists(filepath.Join(build, rebuildComplete))
	if err != nil {
		return err
	}
	if complete {
		liveThere, err := exists(live)
		if err != nil {
			return err
		}
		if liveThere {
			if err := os.RemoveAll(old); err != nil {
				return fmt.Errorf("remove %s: %w", old, err)
			}
			if err := os.Rename(live, old); err != nil {
				return fmt.Errorf("set the read models aside: %w", err)
			}
		}
		if err := os.Rename(build, live); err != nil {
			return fmt.Errorf("swap in the rebuilt read models: %w", err)
		}
		if err := syncDir(dataDir, false); err != nil {
			return err
		}
		if err := os.Remove(filepath.Join(live, rebuildComplete)); err != nil {
			return fmt.Errorf("remove the rebuild's mark: %w", err)
		}
	} else if err := os.RemoveAll(build); err != nil {
		return fmt.Errorf("remove an unfinished rebuild: %w", err)
	}
	// Without read models but with the old ones set aside (a swap killed between its renames
	// whose new models are gone, which the order of the steps rules out), the old ones come back.
	liveThere, err := exists(live)
	if err != nil {
		return err
	}
	if oldThere, err := exists(old); err != nil {
		return err
	} else if oldThere && !liveThere {
		if err := os.Rename(old, live); err != nil {
			return fmt.Errorf("restore the read models: %w", err)
		}
		return nil
	}
	if err := os.RemoveAll(old); err != nil {
		return fmt.Errorf("remove the replaced read models: %w", err)
	}
	return nil
}

func exists(path string) (bool, error) {
	_, err := os.Stat(path)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	}
	return false, fmt.Errorf("stat %s: %w", path, err)
}

// syncDir fsyncs dir and, with files, every regular file in it.
func syncDir(dir string, files bool) error {
	if files {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("sync %s: %w", dir, err)
		}
		for _, e := range entries {
			if e.Type().IsRegular() {
				if err := syncPath(filepath.Join(dir, e.Name()), os.O_RDWR); err != nil {
					return err
				}
			}
		}
	}
	return syncPath(dir, os.O_RDONLY)
}

func syncPath(path string, flag int) error {
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return nil
}

func writeSynced(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, err = f.WriteString("the read models in this directory are complete; the next open swaps them in\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func (m *ReadModels) beginClickHouseRebuild(ctx context.Context) (*rebuildTarget, error) {
	live, err := clickhouseDatabase(m.clickhouseDSN)
	if err != nil {
		return nil, err
	}
	build, old := live+rebuildDatabaseSuffix, live+oldDatabaseSuffix
	if err := readdb.ValidClickHouseIdentifier(build); err != nil {
		return nil, err
	}
	if err := cleanClickHouseRebuild(ctx, m.conn, live); err != nil {
		return nil, err
	}
	buildDSN, err := withClickHouseDatabase(m.clickhouseDSN, build)
	if err != nil {
		return nil, err
	}
	target, err := openClickHouseReadModels(ctx, buildDSN, m.keys, m.reg, true)
	if err != nil {
		_ = m.conn.Exec(context.WithoutCancel(ctx), `DROP DATABASE IF EXISTS `+build)
		return nil, err
	}
	abort := func() error {
		cerr := target.Close()
		// The rebuild's context may be what ended it; the leftovers go regardless.
		if err := m.conn.Exec(context.WithoutCancel(ctx), `DROP DATABASE IF EXISTS `+build); err != nil {
			return errors.Join(cerr, fmt.Errorf("drop %s: %w", build, err))
		}
		return cerr
	}
	commit := func(ctx context.Context) error {
		if err := target.Close(); err != nil {
			return errors.Join(err, abort())
		}
		tables, err := clickhouseTables(ctx, m.conn, build)
		if err != nil {
			return errors.Join(err, abort())
		}
		served, err := clickhouseTables(ctx, m.conn, live)
		if err != nil {
			return errors.Join(err, abort())
		}
		if err := m.conn.Exec(ctx, `CREATE DATABASE IF NOT EXISTS `+old); err != nil {
			return errors.Join(fmt.Errorf("create %s: %w", old, err), abort())
		}
		var renames []string
		for t := range tables {
			if served[t] {
				renames = append(renames, live+"."+t+" TO "+old+"."+t)
			}
			renames = append(renames, build+"."+t+" TO "+live+"."+t)
		}
		if err := m.conn.Exec(ctx, `RENAME TABLE `+strings.Join(renames, ", ")); err != nil {
			// ClickHouse renames the tables of one statement one by one: some may have moved.
			// Every served table set aside comes back where no rebuilt one took its place, and
			// only then are the leftovers dropped (found in review).
			return errors.Join(fmt.Errorf("swap in the rebuilt tables: %w", err),
				cleanClickHouseRebuild(context.WithoutCancel(ctx), m.conn, live))
		}
		// Swapped: what is left is dropping what no one reads any more.
		return cleanClickHouseRebuild(ctx, m.conn, live)
	}
	return &rebuildTarget{target: target, commit: commit, abort: abort}, nil
}

// cleanClickHouseRebuild moves back the served tables that a killed or failed swap set aside
// without putting their rebuilt replacement in, and drops what a rebuild left behind.
func cleanClickHouseRebuild(ctx context.Context, conn driver.Conn, live string) error {
	if err := restoreClickHouseAside(ctx, conn, live); err != nil {
		return err
	}
	for _, db := range []string{live + oldDatabaseSuffix, live + rebuildDatabaseSuffix} {
		if err := conn.Exec(ctx, `DROP DATABASE IF EXISTS `+db); err != nil {
			return fmt.Errorf("drop %s: %w", db, err)
		}
	}
	return nil
}

// restoreClickHouseAside moves back the served tables a swap set aside (in <live>_old) where
// no table of their name is served: every open does this before it creates the tables it
// misses, which would otherwise be empty beside their rows set aside.
func restoreClickHouseAside(ctx context.Context, conn driver.Conn, live string) error {
	old := live + oldDatabaseSuffix
	aside, err := clickhouseTables(ctx, conn, old)
	if err != nil {
		return err
	}
	served, err := clickhouseTables(ctx, conn, live)
	if err != nil {
		return err
	}
	var back []string
	for t := range aside {
		if !served[t] {
			back = append(back, old+"."+t+" TO "+live+"."+t)
		}
	}
	if len(back) > 0 {
		if err := conn.Exec(ctx, `RENAME TABLE `+strings.Join(back, ", ")); err != nil {
			return fmt.Errorf("restore the tables a rebuild set aside: %w", err)
		}
	}
	return nil
}

// clickhouseTables returns the names of the tables in database (none when it does not exist).
func clickhouseTables(ctx context.Context, conn driver.Conn, database string) (map[string]bool, error) {
	rows, err := conn.Query(ctx, `SELECT name FROM system.tables WHERE database = ?`, database)
	if err != nil {
		return nil, fmt.Errorf("list the tables of %s: %w", database, err)
	}
	defer func() { _ = rows.Close() }()
	out := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, fmt.Errorf("list the tables of %s: %w", database, err)
		}
		if err := readdb.ValidClickHouseIdentifier(name); err != nil {
			return nil, fmt.Errorf("table of %s: %w", database, err)
		}
		out[name] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list the tables of %s: %w", database, err)
	}
	return out, nil
}

// clickhouseDatabase is the database a DSN names ("default" when none), as readdb.OpenClickHouse
// reads it.
func clickhouseDatabase(dsn string) (string, error) {
	opts, err := clickhouse.ParseDSN(dsn)
	if err != nil {
		return "", fmt.Errorf("parse clickhouse dsn: %w", err)
	}
	database := opts.Auth.Database
	if database == "" {
		database = "default"
	}
	return database, readdb.ValidClickHouseIdentifier(database)
}

// withClickHouseDatabase is dsn naming database instead.
func withClickHouseDatabase(dsn, database string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("parse clickhouse dsn: %w", err)
	}
	u.Path = "/" + database
	q := u.Query()
	if q.Has("database") {
		q.Set("database", database)
		u.RawQuery = q.Encode()
	}
	return u.String(), nil
}
