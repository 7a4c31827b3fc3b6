package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/samla/samla/internal/esdbfake"
	"github.com/samla/samla/platform/kafka"
	"github.com/samla/samla/platform/keystore/esdbkeys"
)

// TestRolesOnEventStoreDB runs the roles as separate processes with the event store on
// EventStoreDB (the in-process test server): the key store is there too, one stream per
// subject, and the server's log holds no personal data in plain text, while the query role
// serves it.
func TestRolesOnEventStoreDB(t *testing.T) {
	dir := t.TempDir()
	srv, err := esdbfake.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	broker, err := kafka.StartEmbedded(filepath.Join(dir, "broker"), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	var started []*Service
	defer func() {
		for i := len(started) - 1; i >= 0; i-- {
			stop(t, started[i])
		}
	}()
	run := func(roles Roles) *Service {
		cfg := testConfig(t, dir)
		cfg.EventStore = srv.ConnectionString()
		useBroker(cfg, broker)
		if !roles.Connect {
			cfg.Sandbox = false
		}
		svc, err := Start(t.Context(), cfg, roles, testLogger(t))
		if err != nil {
			t.Fatalf("start %+v: %v", roles, err)
		}
		started = append(started, svc)
		return svc
	}
	run(Roles{Relay: true})
	run(Roles{Project: true})
	run(Roles{Connect: true})
	command := run(Roles{Command: true})
	query := run(Roles{Query: true})

	cmd := apiClient{t: t, base: "http://" + command.HTTPAddr(), key: testAPIKey}
	qry := apiClient{t: t, base: "http://" + query.HTTPAddr(), key: testAPIKey}
	waitAuthenticated(t, cmd)
	const pn = "199001010017"
	id := cmd.startCollection(pn)
	final := qry.waitStatus(id, 30*time.Second, func(s string) bool { return s == "COMPLETED" || strings.HasPrefix(s, "FAIL") })
	if final.Status != "COMPLETED" {
		t.Fatalf("final %+v", final)
	}
	if code, out, _ := qry.data("/collections/"+id+"/insurance/data", "2026-04-01"); code != 200 || !strings.Contains(mustJSON(t, out), "insurances") {
		t.Fatalf("data = %d %v", code, out)
	}
	if bytes.Contains(srv.Data(), []byte(pn)) {
		t.Fatal("the EventStoreDB log holds the personal number in plain text")
	}
	keys, err := esdbkeys.Open(srv.ConnectionString())
	if err != nil {
		t.Fatal(err)
	}
	defer keys.Close()
	if _, err := keys.Get(context.Background(), "collection-"+id); err != nil {
		t.Fatalf("the collection's key is not in EventStoreDB: %v", err)
	}
}
