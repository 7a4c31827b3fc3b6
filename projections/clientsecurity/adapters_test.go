package clientsecurity_test

import (
	"testing"

	"github.com/samla/samla/projections/clientsecurity"
	"github.com/samla/samla/projections/clientsecurity/clientsecuritytest"
	"github.com/samla/samla/projections/readdb/readdbtest"
)

func TestSQLiteStore(t *testing.T) {
	readdbtest.RunSQLite(t, clientsecurity.NewSQLite, clientsecuritytest.Run)
}

func TestClickHouseStore(t *testing.T) {
	readdbtest.RunClickHouse(t, clientsecurity.NewClickHouse, clientsecuritytest.Run)
}
