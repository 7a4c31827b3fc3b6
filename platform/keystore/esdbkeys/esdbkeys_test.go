package esdbkeys_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/internal/esdbfake"
	"github.com/samla/samla/platform/keystore/esdbkeys"
	"github.com/samla/samla/platform/keystore/keystoretest"
)

func open(t *testing.T, conn string) *esdbkeys.Store {
	t.Helper()
	s, err := esdbkeys.Open(conn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func startServer(t *testing.T) *esdbfake.Server {
	t.Helper()
	srv, err := esdbfake.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv
}

func TestContract(t *testing.T) {
	keystoretest.Run(t, func(t *testing.T) keystoretest.Store { return open(t, startServer(t).ConnectionString()) })
}

// TestScavengeRemovesADestroyedKey: a destroyed key's bytes are in the log until a scavenge, and
// gone after it.
func TestScavengeRemovesADestroyedKey(t *testing.T) {
	ctx := context.Background()
	srv := startServer(t)
	keys := open(t, srv.ConnectionString())
	k, err := keys.GetOrCreate(ctx, "user-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := keys.Destroy(ctx, "user-1"); err != nil {
		t.Fatal(err)
	}
	stored := []byte(base64.StdEncoding.EncodeToString(k.Material()))
	if !bytes.Contains(srv.Data(), stored) {
		t.Fatal("test setup: before a scavenge the log still holds the key")
	}
	srv.Scavenge()
	if bytes.Contains(srv.Data(), stored) {
		t.Fatal("the scavenged log still holds the destroyed key")
	}
	if _, err := keys.GetOrCreate(ctx, "user-1"); err == nil {
		t.Fatal("an erased subject got a key after the scavenge")
	}
}

// TestContractRealServer runs the suite against the EventStoreDB named by SAMLA_TEST_ESDB, each
// run's subjects apart from every other's (tombstones are for good).
func TestContractRealServer(t *testing.T) {
	conn := os.Getenv("SAMLA_TEST_ESDB")
	if conn == "" {
		msg := "SAMLA_TEST_ESDB is not set: not running the key store suite against a real EventStoreDB"
		if os.Getenv("SAMLA_REQUIRE_ESDB") == "1" {
			t.Fatal(msg + ", but SAMLA_REQUIRE_ESDB=1 requires it")
		}
		t.Skip(msg)
	}
	run := fmt.Sprintf("test%d-", time.Now().UnixNano())
	n := 0
	keystoretest.Run(t, func(t *testing.T) keystoretest.Store {
		n++
		return prefixed{Store: open(t, conn), prefix: fmt.Sprintf("%s%d-", run, n)}
	})
}

// prefixed keeps one test's subjects apart on a shared server.
type prefixed struct {
	*esdbkeys.Store
	prefix string
}

func (p prefixed) GetOrCreate(ctx context.Context, s string) (eventschema.Key, error) {
	return p.Store.GetOrCreate(ctx, p.prefix+s)
}
func (p prefixed) Get(ctx context.Context, s string) (eventschema.Key, error) {
	return p.Store.Get(ctx, p.prefix+s)
}
func (p prefixed) Destroy(ctx context.Context, s string) error {
	return p.Store.Destroy(ctx, p.prefix+s)
}

// TestUnavailableServer: a server that cannot be reached is an error, never a lost key or an
// erased subject.
func TestUnavailableServer(t *testing.T) {
	srv := startServer(t)
	keys := open(t, srv.ConnectionString())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := keys.GetOrCreate(ctx, "user-1"); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	_, err := keys.Get(ctx, "user-1")
	if err == nil || errors.Is(err, eventschema.ErrKeyNotFound) || errors.Is(err, eventschema.ErrSubjectErased) {
		t.Fatalf("get from a stopped server: %v", err)
	}
	if _, err := keys.GetOrCreate(ctx, "user-2"); err == nil || errors.Is(err, eventschema.ErrSubjectErased) {
		t.Fatalf("get-or-create on a stopped server: %v", err)
	}
}
