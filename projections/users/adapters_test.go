package users_test

import (
	"testing"

	"github.com/samla/samla/projections/readdb/readdbtest"
	"github.com/samla/samla/projections/users"
	"github.com/samla/samla/projections/users/userstest"
)

func TestSQLiteStore(t *testing.T) {
	readdbtest.RunSQLite(t, users.NewSQLite, userstest.Run)
}

func TestClickHouseStore(t *testing.T) {
	readdbtest.RunClickHouse(t, users.NewClickHouse, userstest.Run)
}
