package eventhistory_test

import (
	"context"
	"testing"

	"github.com/samla/samla/projections/eventhistory"
	"github.com/samla/samla/projections/eventhistory/historytest"
	"github.com/samla/samla/projections/readdb/readdbtest"
)

func TestSQLiteStore(t *testing.T) {
	historytest.Run(t, func(t *testing.T) eventhistory.Store {
		s, err := eventhistory.NewSQLite(context.Background(), readdbtest.SQLite(t))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
	t.Run("MigrationIsIdempotent", func(t *testing.T) {
		db := readdbtest.SQLite(t)
		for range 2 {
			if _, err := eventhistory.NewSQLite(context.Background(), db); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestClickHouseStore(t *testing.T) {
	readdbtest.ClickHouseDSN(t) // skip (or fail in CI) once, not in every subtest
	historytest.Run(t, func(t *testing.T) eventhistory.Store {
		s, err := eventhistory.NewClickHouse(context.Background(), readdbtest.ClickHouse(t))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
	t.Run("MigrationIsIdempotent", func(t *testing.T) {
		conn := readdbtest.ClickHouse(t)
		for range 2 {
			if _, err := eventhistory.NewClickHouse(context.Background(), conn); err != nil {
				t.Fatal(err)
			}
		}
	})
}
