package apikeys_test

import (
	"testing"

	"github.com/samla/samla/projections/apikeys"
	"github.com/samla/samla/projections/apikeys/apikeystest"
	"github.com/samla/samla/projections/readdb/readdbtest"
)

func TestSQLiteStore(t *testing.T) {
	readdbtest.RunSQLite(t, apikeys.NewSQLite, apikeystest.Run)
}

func TestClickHouseStore(t *testing.T) {
	readdbtest.RunClickHouse(t, apikeys.NewClickHouse, apikeystest.Run)
}
