package eventhistory_test

import (
	"testing"

	"github.com/samla/samla/projections/eventhistory"
	"github.com/samla/samla/projections/eventhistory/historytest"
	"github.com/samla/samla/projections/readdb/readdbtest"
)

func TestSQLiteStore(t *testing.T) {
	readdbtest.RunSQLite(t, eventhistory.NewSQLite, historytest.Run)
}

func TestClickHouseStore(t *testing.T) {
	readdbtest.RunClickHouse(t, eventhistory.NewClickHouse, historytest.Run)
}
