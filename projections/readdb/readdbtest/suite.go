package readdbtest

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Suite is a read model's contract suite: named tests of a store S, each run on a fresh one.
type Suite[S any] []struct {
	Name string
	Run  func(*testing.T, S)
}

// Run runs every test of the suite as a subtest of t, each against a fresh store from open.
func (s Suite[S]) Run(t *testing.T, open func(*testing.T) S) {
	t.Helper()
	for _, tc := range s {
		t.Run(tc.Name, func(t *testing.T) {
			tc.Run(t, open(t))
		})
	}
}

// Context is the context of one contract test: it ends after 30 seconds or with the test.
func Context(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// RunSQLite runs a read model's contract suite against its SQLite adapter: newStore builds the
// store S (as an A that implements it) on a fresh database for every subtest. A last subtest,
// MigrationIsIdempotent, builds the store twice on one database.
func RunSQLite[A, S any](t *testing.T, newStore func(context.Context, *sql.DB) (A, error), suite func(*testing.T, func(*testing.T) S)) {
	t.Helper()
	runAdapter(t, SQLite, newStore, suite)
}

// RunClickHouse is RunSQLite for the ClickHouse adapter, every subtest on a database of its own.
// Without a server it skips t (or fails it when SAMLA_REQUIRE_INTEGRATION=1) once, not in every
// subtest.
func RunClickHouse[A, S any](t *testing.T, newStore func(context.Context, driver.Conn) (A, error), suite func(*testing.T, func(*testing.T) S)) {
	t.Helper()
	ClickHouseDSN(t)
	runAdapter(t, ClickHouse, newStore, suite)
}

func runAdapter[D, A, S any](t *testing.T, fresh func(testing.TB) D, newStore func(context.Context, D) (A, error), suite func(*testing.T, func(*testing.T) S)) {
	t.Helper()
	suite(t, func(t *testing.T) S {
		t.Helper()
		a, err := newStore(context.Background(), fresh(t))
		if err != nil {
			t.Fatal(err)
		}
		closeWithTest(t, a)
		s, ok := any(a).(S)
		if !ok {
			t.Fatalf("%T does not implement the store the suite tests", a)
		}
		return s
	})
	t.Run("MigrationIsIdempotent", func(t *testing.T) {
		db := fresh(t)
		for range 2 {
			a, err := newStore(context.Background(), db)
			if err != nil {
				t.Fatal(err)
			}
			closeWithTest(t, a)
		}
	})
}

// closeWithTest closes a store that holds resources of its own (a SQLite store's prepared
// statements) when the test ends, before its database: cleanups run last in, first out.
func closeWithTest(t *testing.T, store any) {
	if c, ok := store.(interface{ Close() error }); ok {
		t.Cleanup(func() {
			if err := c.Close(); err != nil {
				t.Errorf("close %T: %v", store, err)
			}
		})
	}
}
