package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/samla/samla/platform/kafka"
	"github.com/samla/samla/projections/readdb/readdbtest"
)

// TestRolesAsSeparateProcesses runs each role as its own service, as the distributed deployment
// does: they share only the event store, a Kafka broker reached over TCP and the read models
// (ClickHouse when SAMLA_CLICKHOUSE_DSN is set, else SQLite files). A collection posted to the
// command role completes and is polled on the query role.
func TestRolesAsSeparateProcesses(t *testing.T) {
	dir := t.TempDir()
	broker, err := kafka.StartEmbedded(filepath.Join(dir, "broker"), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()

	// One fresh ClickHouse database shared by every role, dropped at the end.
	var clickHouseDSN string
	if os.Getenv(readdbtest.EnvClickHouseDSN) != "" {
		clickHouseDSN = readdbtest.ClickHouseDatabase(t)
	}
	base := func() *Config {
		cfg := testConfig(t, dir)
		useBroker(cfg, broker)
		if clickHouseDSN != "" {
			cfg.ClickHouseDSN = clickHouseDSN
		}
		return cfg
	}
	var started []*Service
	defer func() {
		for i := len(started) - 1; i >= 0; i-- {
			stop(t, started[i])
		}
	}()
	run := func(roles Roles, mutate func(*Config)) *Service {
		cfg := base()
		if mutate != nil {
			mutate(cfg)
		}
		svc, err := Start(t.Context(), cfg, roles, testLogger(t))
		if err != nil {
			t.Fatalf("start %+v: %v", roles, err)
		}
		started = append(started, svc)
		return svc
	}
	// Consumers first, so the bootstrap client's key is projected for the API roles.
	run(Roles{Relay: true}, nil)
	run(Roles{Project: true}, nil)
	run(Roles{Connect: true}, nil)
	command := run(Roles{Command: true}, nil)
	query := run(Roles{Query: true}, func(c *Config) { c.Sandbox = false })

	cmd := apiClient{t: t, base: "http://" + command.HTTPAddr(), key: testAPIKey}
	qry := apiClient{t: t, base: "http://" + query.HTTPAddr(), key: testAPIKey}
	waitAuthenticated(t, cmd)
	id := cmd.startCollection("199001010017")
	final := qry.waitStatus(id, 30*time.Second, func(s string) bool { return s == "COMPLETED" || strings.HasPrefix(s, "FAIL") })
	if final.Status != "COMPLETED" {
		t.Fatalf("final %+v", final)
	}
	// The command role reserves externalIds under the fingerprint key and the query role finds
	// users by it: both must have the same key.
	created := cmd.postUser("roles-customer-1", nil)
	var found userE2E
	if err := json.Unmarshal(qry.eventually("/users?externalId=roles-customer-1", http.StatusOK), &found); err != nil ||
		found.UserUUID != created.UserUUID {
		t.Fatalf("the query role found %+v, the command role created %+v", found, created)
	}
	// A session made on the command role is honoured by the query role: both read the same
	// signing keys (here the shared data dir's; in a deployment SAMLA_JWT_KEY_FILE).
	token, _ := cmd.createSession(created.UserUUID)
	qry.session(token).expect("GET", "/users/"+created.UserUUID, nil, http.StatusOK, "")
	// The query role serves no commands, and the command role no queries: neither route exists.
	if code, body, _ := qry.do("POST", "/collections", map[string]any{"company": "se-demo-insurer"}, nil); code != http.StatusNotFound || !strings.Contains(string(body), `"code":"NOT_FOUND"`) {
		t.Fatalf("POST on the query role = %d %s", code, body)
	}
	if code, body, _ := cmd.do("GET", "/collections/"+id+"/status", nil, nil); code != http.StatusNotFound || !strings.Contains(string(body), `"code":"NOT_FOUND"`) {
		t.Fatalf("status poll on the command role = %d %s", code, body)
	}
}

// waitAuthenticated waits until the API key has been projected for the role's auth.
func waitAuthenticated(t *testing.T, c apiClient) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		code, _, _ := c.do("GET", "/collections/00000000-0000-0000-0000-000000000000/status", nil, nil)
		if code != 401 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the API key never authenticated")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
