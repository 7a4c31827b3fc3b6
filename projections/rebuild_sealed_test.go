package projections_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/keystore"
	"github.com/samla/samla/platform/keystore/sqlitekeys"
	"github.com/samla/samla/projections"
	"github.com/samla/samla/projections/internal/eventlog"
)

// sliceReader serves envelopes as an event store does.
type sliceReader []eventschema.Envelope

func (r sliceReader) ReadAll(_ context.Context, after uint64, limit int) ([]eventschema.Envelope, error) {
	i, _ := slices.BinarySearchFunc(r, after, func(e eventschema.Envelope, p uint64) int {
		switch {
		case e.Position <= p:
			return -1
		default:
			return 1
		}
	})
	return r[i:min(i+limit, len(r))], nil
}

// TestRebuildOfSealedEventsEqualsTheProjectors: a rebuild of sealed events, some of whose data
// subjects were erased, writes the rows the projectors write when Kafka delivers the same
// events, table by table and column by column (sealed values compared opened): the rebuild's
// events taken apart once, decoded once and opened with keys looked up a page at a time (the
// key cache over the SQLite key store) change nothing, and no erased subject's personal data
// comes back.
func TestRebuildOfSealedEventsEqualsTheProjectors(t *testing.T) {
	ctx := testCtx(t)
	store, err := sqlitekeys.Open(filepath.Join(t.TempDir(), "keys.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	keys := keystore.NewCache(store, 0, 0)
	log := eventlog.New(t)
	buildWorld(log, 60)
	var events []eventschema.Envelope
	var subjects []string
	for _, env := range log.All() {
		payload, _, err := eventschema.SealPersonal(ctx, keys, env.Stream, env.Payload)
		if err != nil {
			t.Fatal(err)
		}
		if s := eventschema.SealedSubject(mustMember(t, payload)); s != "" && !slices.Contains(subjects, s) {
			subjects = append(subjects, s)
		}
		env.Payload = payload
		events = append(events, env)
	}
	// Every fourth subject is erased after its events were appended.
	erased := 0
	for i := 0; i < len(subjects); i += 4 {
		if err := keys.Destroy(ctx, subjects[i]); err != nil {
			t.Fatal(err)
		}
		erased++
	}
	if erased < 5 {
		t.Fatalf("only %d subjects erased", erased)
	}

	liveDir, rebuiltDir := t.TempDir(), t.TempDir()
	live, err := projections.OpenSQLiteReadModels(liveDir, keys)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = live.Close() })
	for _, p := range live.Projectors() {
		for i := 0; i < len(events); i += 97 {
			if err := p.Handle(ctx, events[i:min(i+97, len(events))]); err != nil {
				t.Fatalf("%s: %v", p.Name(), err)
			}
		}
	}
	// A cache of its own, as the rebuild command has: the erasures come from the key store.
	rebuilt, err := projections.OpenSQLiteReadModels(rebuiltDir, keystore.NewCache(store, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rebuilt.Close() })
	if _, err := projections.RebuildWith(ctx, sliceReader(events), rebuilt, projections.RebuildOptions{BatchSize: 50}); err != nil {
		t.Fatal(err)
	}

	want, got := dumpSQLiteModels(t, liveDir, keys), dumpSQLiteModels(t, rebuiltDir, keys)
	sealedCells, erasedSubjects := 0, 0
	for _, rows := range want {
		for _, row := range rows {
			sealedCells += strings.Count(row, "sealed(erased=false)")
			for i := 0; i < len(subjects); i += 4 {
				if strings.Contains(row, "data_subject=string:"+subjects[i]+" ") || strings.HasSuffix(row, "data_subject=string:"+subjects[i]) {
					erasedSubjects++
				}
			}
		}
	}
	if sealedCells == 0 || erasedSubjects == 0 {
		t.Fatalf("the models hold %d sealed values and %d history rows of erased subjects; want some of each", sealedCells, erasedSubjects)
	}
	for table, rows := range want {
		if !slices.Equal(got[table], rows) {
			t.Errorf("%s: rebuilt rows\n%s\nwant\n%s", table, strings.Join(got[table], "\n"), strings.Join(rows, "\n"))
		}
	}
	for table := range got {
		if _, ok := want[table]; !ok {
			t.Errorf("rebuilt table %s the projectors did not write", table)
		}
	}
}

// mustMember is payload's personal member, nil when none.
func mustMember(t *testing.T, payload []byte) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(payload, &m); err != nil {
		t.Fatal(err)
	}
	return m[eventschema.PersonalMember]
}

// dumpSQLiteModels reads every table of the read models under dataDir, each row as one line in
// sorted order, sealed values opened (their bytes differ with every seal).
func dumpSQLiteModels(t *testing.T, dataDir string, keys eventschema.Keys) map[string][]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dataDir, projections.SQLiteDir, "*.db"))
	if err != nil || len(files) == 0 {
		t.Fatalf("read model files: %v %v", files, err)
	}
	out := map[string][]string{}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			t.Fatal(err)
		}
		db, err := sql.Open("sqlite", f+"?_query_only=1")
		if err != nil {
			t.Fatal(err)
		}
		var tables []string
		rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var name string
			if err := rows.Scan(&name); err != nil {
				t.Fatal(err)
			}
			tables = append(tables, name)
		}
		_ = rows.Close()
		for _, table := range tables {
			out[filepath.Base(f)+"/"+table] = dumpTable(t, db, table, keys)
		}
		_ = db.Close()
	}
	return out
}

func dumpTable(t *testing.T, db *sql.DB, table string, keys eventschema.Keys) []string {
	t.Helper()
	rows, err := db.Query(`SELECT * FROM "` + table + `"`)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rows.Close() }()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for rows.Next() {
		values := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range values {
			ptrs[i] = &values[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		cells := make([]string, len(cols))
		for i, v := range values {
			cell := fmt.Sprintf("%T:%v", v, v)
			var b []byte
			switch v := v.(type) {
			case string:
				b = []byte(v)
			case []byte:
				b = v
			}
			if eventschema.IsSealed(b) {
				plain, erased, err := eventschema.Open(context.Background(), keys, b)
				if err != nil {
					t.Fatalf("%s.%s: %v", table, cols[i], err)
				}
				cell = fmt.Sprintf("sealed(erased=%v):%s", erased, plain)
			}
			cells[i] = cols[i] + "=" + cell
		}
		lines = append(lines, strings.Join(cells, " "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(lines)
	return lines
}
