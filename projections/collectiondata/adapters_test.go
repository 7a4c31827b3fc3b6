package collectiondata_test

import (
	"testing"

	"github.com/samla/samla/projections/collectiondata"
	"github.com/samla/samla/projections/collectiondata/datatest"
	"github.com/samla/samla/projections/readdb/readdbtest"
)

func TestSQLiteStore(t *testing.T) {
	readdbtest.RunSQLite(t, collectiondata.NewSQLite, datatest.Run)
}

func TestClickHouseStore(t *testing.T) {
	readdbtest.RunClickHouse(t, collectiondata.NewClickHouse, datatest.Run)
}
