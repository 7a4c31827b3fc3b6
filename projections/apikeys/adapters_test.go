package apikeys_test

import (
	"context"
	"testing"

	"github.com/samla/samla/projections/apikeys"
	"github.com/samla/samla/projections/apikeys/apikeystest"
	"github.com/samla/samla/projections/readdb/readdbtest"
)

func TestSQLiteStore(t *testing.T) {
	apikeystest.Run(t, func(t *testing.T) apikeys.Store {
		s, err := apikeys.NewSQLite(context.Background(), readdbtest.SQLite(t))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
	t.Run("MigrationIsIdempotent", func(t *testing.T) {
		db := readdbtest.SQLite(t)
		for range 2 {
			if _, err := apikeys.NewSQLite(context.Background(), db); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestClickHouseStore(t *testing.T) {
	readdbtest.ClickHouseDSN(t) // skip (or fail in CI) once, not in every subtest
	apikeystest.Run(t, func(t *testing.T) apikeys.Store {
		s, err := apikeys.NewClickHouse(context.Background(), readdbtest.ClickHouse(t))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
	t.Run("MigrationIsIdempotent", func(t *testing.T) {
		conn := readdbtest.ClickHouse(t)
		for range 2 {
			if _, err := apikeys.NewClickHouse(context.Background(), conn); err != nil {
				t.Fatal(err)
			}
		}
	})
}
