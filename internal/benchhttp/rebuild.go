package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	_ "modernc.org/sqlite" // the event store's count when the rebuild's output does not tell
)

// rebuild runs `samla projections rebuild` on a stopped instance's data dir, timed by the harness,
// and answers the row: events/s for SQLite, rows/s for ClickHouse (the rows in the read-model
// tables afterwards, counted by the harness; the events replayed are given beside them).
func rebuild(ctx context.Context, c config, tmp, data string, env map[string]string, kind string) (row, error) {
	what := "projection rebuild (" + kind + ")"
	goal := "goal: ≥ 200k events/s (SQLite)"
	if kind == "ClickHouse" {
		goal = "goal: ≥ 300k rows/s (ClickHouse)"
	}
	all := map[string]string{"SAMLA_DATA_DIR": data}
	for k, v := range env {
		all[k] = v
	}
	rctx, cancel := context.WithTimeout(ctx, c.rebuildTimeout)
	defer cancel()
	cmd := exec.CommandContext(rctx, c.samlaBin, "projections", "rebuild")
	cmd.Env = childEnv(all)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	t0 := time.Now()
	err := cmd.Run()
	took := time.Since(t0)
	_ = os.WriteFile(filepath.Join(tmp, "rebuild-"+strings.ToLower(kind)+".log"), append(stdout.Bytes(), stderr.Bytes()...), 0o644)
	if err != nil {
		if rctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
			return row{what, fmt.Sprintf("not done after %s (-rebuild-timeout)", c.rebuildTimeout), "—", goal}, nil
		}
		return row{}, fmt.Errorf("samla projections rebuild: %w\n%s%s", err, tail(stdout.String()), tail(stderr.String()))
	}

	// The count the rebuild printed, else the event store's own count.
	events, ok := parseRebuildEvents(stdout.String())
	source := "as printed"
	if !ok {
		events, ok = parseRebuildEvents(stderr.String())
	}
	if !ok {
		n, err := countEvents(ctx, filepath.Join(data, "eventstore", "events.db"))
		if err != nil {
			return row{}, fmt.Errorf("the rebuild printed no event count (%q): %w", strings.TrimSpace(stdout.String()), err)
		}
		events, source = n, "counted in the event store"
	}
	evRate := float64(events) / took.Seconds()
	// The harness's rate includes the command's start-up (opening the stores, checking the
	// keys); the rebuild's own, when it prints one, is given beside it.
	own := ""
	if r, ok := parseRebuildRate(stdout.String()); ok {
		own = fmt.Sprintf("; the rebuild reports %.0f events/s", r)
	}
	if kind != "ClickHouse" {
		return row{what, fmt.Sprintf("%.0f events/s (%d events %s in %.2f s, start-up included%s)", evRate, events, source, took.Seconds(), own), "—", goal}, nil
	}
	rows, err := countClickHouseRows(ctx, env["SAMLA_CLICKHOUSE_DSN"])
	if err != nil {
		return row{}, err
	}
	return row{what, fmt.Sprintf("%.0f rows/s, %.0f events/s (%d rows in the read models, %d events %s, in %.2f s, start-up included%s)",
		float64(rows)/took.Seconds(), evRate, rows, events, source, took.Seconds(), own), "—", goal}, nil
}

// rebuildEvents finds an event count after "rebuilt" in today's wording ("rebuilt the read
// models from N events") and in the newer one ("rebuilt N events into M read models in T (R
// events/s)"). Digits may be grouped with ',', '_' or a thin space, never a plain space, which
// would join the count to a neighbouring number.
var rebuildEvents = regexp.MustCompile(`(?i)rebuilt\b.*?\b(\d[\d,_\x{2009}\x{202f}]*)\s+events\b`)

// parseRebuildEvents answers the last event count the rebuild's output names.
func parseRebuildEvents(out string) (int64, bool) {
	ms := rebuildEvents.FindAllStringSubmatch(out, -1)
	if len(ms) == 0 {
		return 0, false
	}
	digits := strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, ms[len(ms)-1][1])
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

var rebuildRate = regexp.MustCompile(`(?i)\(\s*(\d[\d,_]*(?:\.\d+)?)\s*events/s\s*\)`)

// parseRebuildRate answers the last "(R events/s)" of the rebuild's output.
func parseRebuildRate(out string) (float64, bool) {
	ms := rebuildRate.FindAllStringSubmatch(out, -1)
	if len(ms) == 0 {
		return 0, false
	}
	r, err := strconv.ParseFloat(strings.NewReplacer(",", "", "_", "").Replace(ms[len(ms)-1][1]), 64)
	return r, err == nil
}

// countEvents counts the rows of the embedded event store's events table, read only.
func countEvents(ctx context.Context, path string) (int64, error) {
	if _, err := os.Stat(path); err != nil {
		return 0, fmt.Errorf("the event store: %w", err)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", path, err)
	}
	defer db.Close()
	var n int64
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM events").Scan(&n); err != nil {
		return 0, fmt.Errorf("count the events of %s: %w", path, err)
	}
	return n, nil
}

// countClickHouseRows sums the rows of the active parts of every MergeTree table in the DSN's
// database: what the rebuild wrote, less what a merge has already collapsed. (system.parts
// rather than system.tables' total_rows, which ClickHouse before 19 lacks.)
func countClickHouseRows(ctx context.Context, dsn string) (int64, error) {
	db, err := openClickHouse(dsn)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var n uint64
	if err := db.QueryRowContext(ctx, "SELECT toUInt64(sum(rows)) FROM system.parts WHERE database = currentDatabase() AND active").Scan(&n); err != nil {
		return 0, fmt.Errorf("count the ClickHouse read models' rows: %w", err)
	}
	return int64(n), nil
}

// openClickHouse opens the database of dsn (SAMLA_CLICKHOUSE_DSN) for the harness's own queries.
func openClickHouse(dsn string) (*sql.DB, error) {
	opts, err := clickhouse.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("SAMLA_CLICKHOUSE_DSN: %w", err)
	}
	return clickhouse.OpenDB(opts), nil
}

func tail(s string) string {
	if len(s) > 2000 {
		s = s[len(s)-2000:]
	}
	return s
}
