package consents_test

import (
	"testing"

	"github.com/samla/samla/projections/consents"
	"github.com/samla/samla/projections/consents/consentstest"
	"github.com/samla/samla/projections/readdb/readdbtest"
)

func TestSQLiteStore(t *testing.T) {
	readdbtest.RunSQLite(t, consents.NewSQLite, consentstest.Run)
}

func TestClickHouseStore(t *testing.T) {
	readdbtest.RunClickHouse(t, consents.NewClickHouse, consentstest.Run)
}
