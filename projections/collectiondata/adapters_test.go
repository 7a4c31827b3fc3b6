package collectiondata_test

import (
	"context"
	"testing"

	"github.com/samla/samla/projections/collectiondata"
	"github.com/samla/samla/projections/collectiondata/datatest"
	"github.com/samla/samla/projections/readdb/readdbtest"
)

func TestSQLiteStore(t *testing.T) {
	datatest.Run(t, func(t *testing.T) collectiondata.Store {
		s, err := collectiondata.NewSQLite(context.Background(), readdbtest.SQLite(t))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
	t.Run("MigrationIsIdempotent", func(t *testing.T) {
		db := readdbtest.SQLite(t)
		for range 2 {
			if _, err := collectiondata.NewSQLite(context.Background(), db); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestClickHouseStore(t *testing.T) {
	readdbtest.ClickHouseDSN(t) // skip (or fail in CI) once, not in every subtest
	datatest.Run(t, func(t *testing.T) collectiondata.Store {
		s, err := collectiondata.NewClickHouse(context.Background(), readdbtest.ClickHouse(t))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
	t.Run("MigrationIsIdempotent", func(t *testing.T) {
		conn := readdbtest.ClickHouse(t)
		for range 2 {
			if _, err := collectiondata.NewClickHouse(context.Background(), conn); err != nil {
				t.Fatal(err)
			}
		}
	})
}
