package cancellations_test

import (
	"testing"

	"github.com/samla/samla/projections/cancellations"
	"github.com/samla/samla/projections/cancellations/cancellationstest"
	"github.com/samla/samla/projections/readdb/readdbtest"
)

func TestSQLiteStore(t *testing.T) {
	readdbtest.RunSQLite(t, cancellations.NewSQLite, cancellationstest.Run)
}

func TestClickHouseStore(t *testing.T) {
	readdbtest.RunClickHouse(t, cancellations.NewClickHouse, cancellationstest.Run)
}
