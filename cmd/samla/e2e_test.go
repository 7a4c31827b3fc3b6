package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

const testAPIKey = "samla_sandbox_e2e_0123456789abcdef0123456789abcdef"

// testConfig is the embedded default on random loopback ports in a fresh data dir.
func testConfig(t testing.TB, dataDir string) *Config {
	t.Helper()
	cfg := bindConfig(pflag.NewFlagSet("test", pflag.ContinueOnError))
	cfg.DataDir = dataDir
	cfg.HTTPAddr, cfg.OpsAddr, cfg.SandboxAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.EventStore, cfg.KafkaBrokers, cfg.ClickHouseDSN = "sqlite", "", ""
	cfg.BootstrapAPIKey = testAPIKey
	cfg.MockSignDelay = 150 * time.Millisecond
	cfg.SandboxLatencyMS = 2
	cfg.WorkerID = "e2e-worker"
	cfg.CompanyPoll = 50 * time.Millisecond
	cfg.RateLimit, cfg.RateBurst = 1000, 1000
	// Every test calls from 127.0.0.1, and some send dozens of bad credentials on purpose (the
	// isolation walk); keys_e2e_test.go tests the limit itself with its default.
	cfg.AuthFailureLimit = 10_000
	return cfg
}

func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func start(t testing.TB, cfg *Config) *Service {
	t.Helper()
	svc, err := Start(context.Background(), cfg, AllRoles(), testLogger(t))
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	return svc
}

func stop(t testing.TB, svc *Service) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := svc.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}

type apiClient struct {
	t    testing.TB
	base string
	key  string
}

func (c apiClient) do(method, path string, body any, headers map[string]string) (int, []byte, http.Header) {
	c.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, r)
	if err != nil {
		c.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.key != "" {
		req.Header.Set("Authorization-token", c.key)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

func (c apiClient) startCollection(personalNumber string) string {
	c.t.Helper()
	code, body, _ := c.do("POST", "/collections", map[string]any{
		"company": "se-demo-insurer", "loginMethod": "SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK",
		"parameters": []map[string]any{{"type": "SwedishPersonalNumberParameter", "personalNumber": personalNumber}},
	}, map[string]string{"Service-Version": "2026-04-01"})
	if code != http.StatusCreated {
		c.t.Fatalf("POST /collections = %d %s", code, body)
	}
	var created struct{ CollectionID, Status string }
	if err := json.Unmarshal(body, &created); err != nil || created.CollectionID == "" || created.Status != "RUNNING" {
		c.t.Fatalf("created = %s (%v)", body, err)
	}
	return created.CollectionID
}

type statusBody struct {
	CollectionID     string         `json:"collectionId"`
	Company          string         `json:"company"`
	LoginMethod      string         `json:"loginMethod"`
	Status           string         `json:"status"`
	ExtraInformation map[string]any `json:"extraInformation"`
	PollingInterval  int            `json:"pollingInterval"`
	UpdatedAt        string         `json:"updatedAt"`
}

// waitStatus polls like a client until the status satisfies done, failing after timeout.
func (c apiClient) waitStatus(id string, timeout time.Duration, done func(string) bool) statusBody {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	var last statusBody
	for time.Now().Before(deadline) {
		code, body, _ := c.do("GET", "/collections/"+id+"/status", nil, map[string]string{"Service-Version": "2026-04-01"})
		if code == http.StatusOK {
			last = statusBody{} // a map decoded into keeps the keys of an earlier poll
			if err := json.Unmarshal(body, &last); err != nil {
				c.t.Fatal(err)
			}
			if done(last.Status) {
				return last
			}
		} else {
			// Never a 404, not even right after the 201: read-your-writes.
			c.t.Fatalf("status poll = %d %s", code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatalf("collection %s still %q after %s", id, last.Status, timeout)
	return last
}

func is(s string) func(string) bool { return func(got string) bool { return got == s } }

type historyBody struct {
	CollectionID string `json:"collectionId"`
	Events       []struct {
		EventID  string          `json:"eventId"`
		Type     string          `json:"type"`
		Revision uint64          `json:"revision"`
		Payload  json.RawMessage `json:"payload"`
	} `json:"events"`
}

func (c apiClient) history(id string) historyBody {
	c.t.Helper()
	code, body, _ := c.do("GET", "/collections/"+id+"/events", nil, nil)
	if code != http.StatusOK {
		c.t.Fatalf("events = %d %s", code, body)
	}
	var h historyBody
	if err := json.Unmarshal(body, &h); err != nil {
		c.t.Fatal(err)
	}
	return h
}

// statusPath lists the "to" of every status change in the history.
func statusPath(t testing.TB, h historyBody) []string {
	var path []string
	for _, e := range h.Events {
		if e.Type == "collection.status-changed" {
			var p struct{ To string }
			if err := json.Unmarshal(e.Payload, &p); err != nil {
				t.Fatal(err)
			}
			path = append(path, p.To)
		}
	}
	return path
}

func TestCollectionEndToEnd(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	svc := start(t, cfg)
	defer stop(t, svc)
	c := apiClient{t: t, base: "http://" + svc.HTTPAddr(), key: testAPIKey}

	if code, body, _ := c.do("GET", "/health", nil, nil); code != 200 || !strings.Contains(string(body), `"healthy"`) {
		t.Fatalf("health = %d %s", code, body)
	}
	id := c.startCollection("191212121212")
	final := c.waitStatus(id, 20*time.Second, func(s string) bool { return s == "COMPLETED" || strings.HasPrefix(s, "FAIL") })
	if final.Status != "COMPLETED" || final.Company != "se-demo-insurer" || final.PollingInterval <= 0 {
		t.Fatalf("final status %+v", final)
	}
	// The history is projected by another consumer group; historyPath waits for it to catch up.
	want := []string{"LOGIN", "WAITING_FOR_USER_ACTION", "COLLECTING", "COMPLETED"}
	if got := c.historyPath(id, "COMPLETED"); !reflect.DeepEqual(got, want) {
		t.Fatalf("status path %v, want %v", got, want)
	}
	h := c.history(id)
	types := map[string]bool{}
	for i, e := range h.Events {
		types[e.Type] = true
		if e.Revision != uint64(i) {
			t.Fatalf("history revision %d at index %d", e.Revision, i)
		}
		if strings.Contains(string(e.Payload), "191212121212") || strings.Contains(string(e.Payload), "Tolvan") {
			t.Fatalf("personal data in the audit read model: %s", e.Payload)
		}
	}
	for _, typ := range []string{"collection.started", "collection.claimed", "collection.insurances-collected"} {
		if !types[typ] {
			t.Fatalf("history has no %s: %v", typ, types)
		}
	}

	// Tenants are isolated and keys are checked.
	other := apiClient{t: t, base: c.base, key: "samla_other_0123456789abcdef0123456789abcdef"}
	if code, body, _ := other.do("GET", "/collections/"+id+"/status", nil, nil); code != http.StatusUnauthorized {
		t.Fatalf("unknown key = %d %s", code, body)
	}
	otherKey, err := CreateClient(context.Background(), cfg, testLogger(t), "other-tenant", "Other")
	if err != nil {
		t.Fatalf("create another client while running: %v", err)
	}
	other.key = otherKey
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, _, _ := other.do("GET", "/collections/"+id+"/status", nil, nil)
		if code == http.StatusNotFound {
			break // authenticated (the key projection caught up) and the collection stays hidden
		}
		if code != http.StatusUnauthorized || time.Now().After(deadline) {
			t.Fatalf("another tenant's poll = %d, want 404", code)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// The ops listener serves Prometheus metrics with the spine's series.
	resp, err := http.Get("http://" + svc.OpsAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	metrics, _ := io.ReadAll(resp.Body)
	for _, series := range []string{"samla_http_requests_total", "samla_eventstore_appends_total",
		"samla_relay_published_events_total", "samla_projection_lag_seconds", "samla_connector_outcomes_total"} {
		if !strings.Contains(string(metrics), series) {
			t.Errorf("metrics lack %s", series)
		}
	}
	if strings.Contains(string(metrics), "191212121212") {
		t.Error("a personal number is in the metrics")
	}
}

// TestRestartResumesAndMatchesRebuild stops the service while the user has not signed yet,
// starts it again on the same data dir, and expects the collection to complete and the status
// read model to equal a rebuild from the event store.
func TestRestartResumesAndMatchesRebuild(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.MockSignDelay = time.Hour // nobody signs before the restart
	svc := start(t, cfg)
	c := apiClient{t: t, base: "http://" + svc.HTTPAddr(), key: testAPIKey}
	id := c.startCollection("199001010017")
	c.waitStatus(id, 20*time.Second, is("WAITING_FOR_USER_ACTION"))
	stop(t, svc)

	cfg = testConfig(t, dir)
	svc = start(t, cfg)
	c.base = "http://" + svc.HTTPAddr()
	final := c.waitStatus(id, 30*time.Second, func(s string) bool { return s == "COMPLETED" || strings.HasPrefix(s, "FAIL") })
	if final.Status != "COMPLETED" {
		t.Fatalf("after restart: %+v", final)
	}
	_, before, _ := c.do("GET", "/collections/"+id+"/status", nil, nil)
	// The final status change is the stream's last event: once the history shows it, it is whole.
	c.historyPath(id, "COMPLETED")
	historyBefore := c.history(id)
	stop(t, svc)

	n, err := RebuildProjections(context.Background(), cfg, testLogger(t))
	if err != nil || n == 0 {
		t.Fatalf("rebuild: %d events, %v", n, err)
	}
	svc = start(t, cfg)
	defer stop(t, svc)
	c.base = "http://" + svc.HTTPAddr()
	_, after, _ := c.do("GET", "/collections/"+id+"/status", nil, nil)
	if !bytes.Equal(before, after) {
		t.Fatalf("status read model differs from its rebuild\nbefore %s\nafter  %s", before, after)
	}
	if historyAfter := c.history(id); !reflect.DeepEqual(historyBefore, historyAfter) {
		t.Fatalf("history differs from its rebuild: %d vs %d events", len(historyBefore.Events), len(historyAfter.Events))
	}
	path := statusPath(t, historyBefore)
	if fmt.Sprint(path[len(path)-2:]) != "[COLLECTING COMPLETED]" {
		t.Fatalf("status path after restart %v", path)
	}
}

// TestPollRightAfterTheCreateSeesIt: a client polls each collection the moment its 201 has
// come, before the projection can have folded it; not one poll may answer 404, and polls of an
// unknown id, or of another client's, still do.
func TestPollRightAfterTheCreateSeesIt(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	svc := start(t, cfg)
	defer stop(t, svc)
	c := apiClient{t: t, base: "http://" + svc.HTTPAddr(), key: testAPIKey}
	for i := 0; i < 40; i++ {
		id := c.startCollection("191212121212")
		code, body, _ := c.do("GET", "/collections/"+id+"/status", nil, map[string]string{"Service-Version": "2026-04-01"})
		if code != http.StatusOK {
			t.Fatalf("poll %d right after the 201 = %d %s", i, code, body)
		}
		var st statusBody
		if err := json.Unmarshal(body, &st); err != nil || st.CollectionID != id || st.Status == "" {
			t.Fatalf("poll %d right after the 201 = %s (%v)", i, body, err)
		}
	}
	if code, _, _ := c.do("GET", "/collections/3f1e8a52-9d2c-4b7a-8e6f-0a1b2c3d4e5f/status", nil,
		map[string]string{"Service-Version": "2026-04-01"}); code != http.StatusNotFound {
		t.Fatalf("poll of an unknown collection = %d, want 404", code)
	}
}
