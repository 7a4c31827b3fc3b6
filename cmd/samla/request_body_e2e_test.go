package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/samla/samla/platform/httpapi"
)

// TestHostileBodiesAreOneSmallProblem sends the assembled listener the bodies of the memory
// probe and of a smuggled second value: each is refused at the first place that breaks the
// contract, with one small problem that names it.
func TestHostileBodiesAreOneSmallProblem(t *testing.T) {
	c := personaService(t)
	problem := func(what string, code int, body []byte) httpapi.Problem {
		t.Helper()
		var p httpapi.Problem
		if err := json.Unmarshal(body, &p); err != nil || code != http.StatusBadRequest || p.Code != httpapi.CodeValidationFailed {
			t.Fatalf("%s = %d %.300s, want a 400 %s problem", what, code, body, httpapi.CodeValidationFailed)
		}
		return p
	}

	t.Run("9 MB of empty parameters", func(t *testing.T) {
		var b strings.Builder
		b.WriteString(`{"company":"se-demo-insurer","loginMethod":"SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK","parameters":[`)
		b.WriteString(strings.TrimSuffix(strings.Repeat("{},", 3_000_000), ","))
		b.WriteString(`]}`)
		code, body, _ := c.do("POST", "/collections", json.RawMessage(b.String()), map[string]string{"Service-Version": "2026-04-01"})
		p := problem("9 MB of parameters", code, body)
		if len(p.Errors) != 1 || p.Errors[0].Field != "parameters" || len(body) > 1024 {
			t.Fatalf("answer of %d bytes: %+v, want one field error naming parameters", len(body), p)
		}
	})

	t.Run("repeated members", func(t *testing.T) {
		const (
			v2 = `"loginMethod":"SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK","parameters":[{"type":"SwedishPersonalNumberParameter","personalNumber":"191212121212"}]`
			v1 = `"company":"se-demo-insurer","loginMethod":"SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK"`
		)
		for _, tc := range []struct{ name, version, body, field string }{
			{"the same name", "2026-04-01", `{"company":"se-demo-insurer","company":"se-demo-pension",` + v2 + `}`, "company"},
			{"a name differing in case", "2026-04-01", `{"company":"se-demo-insurer","Company":"se-demo-pension",` + v2 + `}`, "Company"},
			{"inside a parameter", "2026-04-01", `{"company":"se-demo-insurer","loginMethod":"SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK","parameters":[` +
				`{"type":"SwedishPersonalNumberParameter","personalNumber":"191212121212","PERSONALNUMBER":"199001010017"}]}`, "parameters[0].PERSONALNUMBER"},
			{"an input key differing in case", "2025-01-01", `{` + v1 + `,"input":{"SWEDISH_PERSONAL_NUMBER":"191212121212","swedish_personal_number":"199001010017"}}`,
				"input.swedish_personal_number"},
		} {
			code, body, _ := c.do("POST", "/collections", json.RawMessage(tc.body), map[string]string{"Service-Version": tc.version})
			p := problem(tc.name, code, body)
			if len(p.Errors) != 1 || p.Errors[0].Field != tc.field {
				t.Errorf("%s: errors = %+v, want one naming %s", tc.name, p.Errors, tc.field)
			}
		}
	})
}

// TestClientThatHangsUpIsNeverA500 sends POST /collections with an Idempotency-Key over a raw
// connection and closes it right after the body, so that the client is gone while the request
// is decoded, validated or appended; then it waits for the access log of that request (no
// guessed sleep) and retries as a client would. Whatever the first request got to, the retry
// is its outcome: a replay if it was stored (certainly when the first was answered 201), a new
// collection if not; and neither the access log nor the ops listener's metrics ever show a 500.
func TestClientThatHangsUpIsNeverA500(t *testing.T) {
	logs := newLogRecorder()
	svc, err := Start(context.Background(), testConfig(t, t.TempDir()), AllRoles(), slog.New(logs))
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	defer stop(t, svc)
	c := apiClient{t: t, base: "http://" + svc.HTTPAddr(), key: testAPIKey}
	const body = `{"company":"se-demo-insurer","loginMethod":"SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK",` +
		`"parameters":[{"type":"SwedishPersonalNumberParameter","personalNumber":"191212121212"}]}`

	const hangUpRequestID = "hang-up-request-"
	// Each round races the hang-up against the handler anew; rounds make both outcomes likely
	// without the test depending on either.
	const rounds = 8
	outcomes := map[string]int{}
	for i := range rounds {
		key := fmt.Sprintf("hang-up-%d", i)
		requestID := hangUpRequestID + fmt.Sprint(i)
		conn, err := net.Dial("tcp", svc.HTTPAddr())
		if err != nil {
			t.Fatal(err)
		}
		w := bufio.NewWriter(conn)
		fmt.Fprintf(w, "POST /collections HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", svc.HTTPAddr(), len(body))
		fmt.Fprintf(w, "Authorization-token: %s\r\nService-Version: 2026-04-01\r\nIdempotency-Key: %s\r\n%s: %s\r\n\r\n%s",
			testAPIKey, key, httpapi.HeaderRequestID, requestID, body)
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		conn.Close()

		first, ok := logs.waitFor(10*time.Second, func(r loggedRecord) bool {
			return r.message == "http request" && r.attrs["request_id"] == requestID
		})
		if !ok {
			t.Fatalf("round %d: no access log of the request the client hung up on", i)
		}
		firstStatus := first.attrs["status"]
		if firstStatus != "201" && firstStatus != fmt.Sprint(httpapi.StatusClientClosedRequest) {
			t.Fatalf("round %d: the request the client hung up on was logged as %s, want 201 or 499", i, firstStatus)
		}

		code, raw, h := c.do("POST", "/collections", json.RawMessage(body),
			map[string]string{"Service-Version": "2026-04-01", "Idempotency-Key": key})
		if code != http.StatusCreated {
			t.Fatalf("round %d: the retry = %d %s, want 201", i, code, raw)
		}
		replayed := h.Get("Idempotent-Replayed") == "true"
		if firstStatus == "201" && !replayed {
			t.Fatalf("round %d: the first request was stored and answered, but its retry is not a replay", i)
		}
		// A retry that replays returns the first request's collection, and one that does not
		// created it: either way there is one collection for the key, the one the retry names.
		var created struct{ CollectionID string }
		if err := json.Unmarshal(raw, &created); err != nil || created.CollectionID == "" {
			t.Fatalf("round %d: the retry's body %s (%v)", i, raw, err)
		}
		if code, raw, _ := c.do("POST", "/collections", json.RawMessage(body),
			map[string]string{"Service-Version": "2026-04-01", "Idempotency-Key": key}); code != http.StatusCreated ||
			!strings.Contains(string(raw), created.CollectionID) {
			t.Fatalf("round %d: a second retry = %d %s, want the same collection %s", i, code, raw, created.CollectionID)
		}
		outcomes[fmt.Sprintf("first %s, retry replayed %v", firstStatus, replayed)]++
	}
	t.Logf("outcomes of %d rounds: %v", rounds, outcomes)

	for _, r := range logs.all() {
		if r.message == "http request" && r.attrs["status"] == "500" {
			t.Errorf("the access log shows a 500: %v", r.attrs)
		}
		if r.level >= slog.LevelError && strings.HasPrefix(r.attrs["request_id"], hangUpRequestID) {
			t.Errorf("logged at %v: %s %v", r.level, r.message, r.attrs)
		}
	}
	res, err := http.Get("http://" + svc.OpsAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	metrics, _ := io.ReadAll(res.Body)
	var counted bool
	for line := range strings.Lines(string(metrics)) {
		if !strings.HasPrefix(line, "samla_http_requests_total{") || !strings.Contains(line, `route="/collections"`) {
			continue
		}
		counted = true
		if strings.Contains(line, `code="500"`) {
			t.Errorf("the metrics count a 500: %s", line)
		}
	}
	if !counted {
		t.Errorf("the metrics count no POST /collections:\n%s", metrics)
	}
}

// loggedRecord is one log record with its attributes (those of its logger included) as text.
type loggedRecord struct {
	level   slog.Level
	message string
	attrs   map[string]string
}

// logRecorder is a slog.Handler that keeps the records at info level and above, for a test to
// wait for one of them.
type logRecorder struct {
	shared *recordedLogs
	attrs  []slog.Attr
}

type recordedLogs struct {
	mu      sync.Mutex
	records []loggedRecord
	added   chan struct{} // closed and replaced at every record
}

func newLogRecorder() *logRecorder {
	return &logRecorder{shared: &recordedLogs{added: make(chan struct{})}}
}

func (h *logRecorder) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	rec := loggedRecord{level: r.Level, message: r.Message, attrs: map[string]string{}}
	for _, a := range h.attrs {
		rec.attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	s := h.shared
	s.mu.Lock()
	s.records = append(s.records, rec)
	close(s.added)
	s.added = make(chan struct{})
	s.mu.Unlock()
	return nil
}

func (h *logRecorder) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &logRecorder{shared: h.shared, attrs: append(append([]slog.Attr(nil), h.attrs...), attrs...)}
}

// WithGroup is not needed by the records the tests look at; their attributes stay flat.
func (h *logRecorder) WithGroup(string) slog.Handler { return h }

func (h *logRecorder) all() []loggedRecord {
	h.shared.mu.Lock()
	defer h.shared.mu.Unlock()
	return append([]loggedRecord(nil), h.shared.records...)
}

// waitFor returns the first record that match accepts, waiting up to timeout for it to be
// logged.
func (h *logRecorder) waitFor(timeout time.Duration, match func(loggedRecord) bool) (loggedRecord, bool) {
	deadline := time.After(timeout)
	s := h.shared
	for seen := 0; ; {
		s.mu.Lock()
		records, added := s.records, s.added
		s.mu.Unlock()
		for ; seen < len(records); seen++ {
			if match(records[seen]) {
				return records[seen], true
			}
		}
		select {
		case <-added:
		case <-deadline:
			return loggedRecord{}, false
		}
	}
}
