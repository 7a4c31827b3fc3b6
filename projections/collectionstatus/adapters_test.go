package collectionstatus_test

import (
	"context"
	"testing"

	"github.com/samla/samla/projections/collectionstatus"
	"github.com/samla/samla/projections/collectionstatus/statustest"
	"github.com/samla/samla/projections/readdb/readdbtest"
)

func TestSQLiteStore(t *testing.T) {
	statustest.Run(t, func(t *testing.T) collectionstatus.Store {
		s, err := collectionstatus.NewSQLite(context.Background(), readdbtest.SQLite(t))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
	t.Run("MigrationIsIdempotent", func(t *testing.T) {
		db := readdbtest.SQLite(t)
		for range 2 {
			if _, err := collectionstatus.NewSQLite(context.Background(), db); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestClickHouseStore(t *testing.T) {
	readdbtest.ClickHouseDSN(t) // skip (or fail in CI) once, not in every subtest
	statustest.Run(t, func(t *testing.T) collectionstatus.Store {
		s, err := collectionstatus.NewClickHouse(context.Background(), readdbtest.ClickHouse(t))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
	t.Run("MigrationIsIdempotent", func(t *testing.T) {
		conn := readdbtest.ClickHouse(t)
		for range 2 {
			if _, err := collectionstatus.NewClickHouse(context.Background(), conn); err != nil {
				t.Fatal(err)
			}
		}
	})
}
