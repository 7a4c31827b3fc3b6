package presenter

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/query"
)

func TestCollectionStatus(t *testing.T) {
	v := query.StatusView{
		CollectionID: "c1", Tenant: "acme", Company: "se-demo-pension", Product: "WEALTH",
		LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE", Status: "AUTHENTICATION_TIMEOUT",
		UpdatedAt: time.Date(2026, 5, 1, 14, 0, 0, 5e6, time.FixedZone("CEST", 2*3600)),
	}
	got := CollectionStatus(httpapi.V20250101, "se", v)
	raw, _ := json.Marshal(got)
	want := `{"collectionId":"c1","company":"se-demo-pension","loginMethod":"SWEDISH_MOBILE_EID_OTHER_DEVICE",` +
		`"status":"WAITING_FOR_AUTHENTICATION","extraInformation":{},"pollingInterval":1000,"updatedAt":"2026-05-01T12:00:00.005Z"}`
	if string(raw) != want {
		t.Fatalf("got  %s\nwant %s", raw, want)
	}
	v.ExtraInformation = map[string]any{"SWEDISH_MOBILE_EID_ANIMATED_QR_DATA": "bankid.x.1.ab"}
	if got := CollectionStatus(httpapi.V20260401, "se", v); got.Status != "AUTHENTICATION_TIMEOUT" || got.ExtraInformation["SWEDISH_MOBILE_EID_ANIMATED_QR_DATA"] != "bankid.x.1.ab" {
		t.Fatalf("preview = %+v", got)
	}
}

// TestCollectionEvents: the history renders each event's envelope and its audit summary as the
// read model holds it (what it may show was decided when it was projected), and an event without
// a summary (a type a newer build wrote) as its envelope with a null payload.
func TestCollectionEvents(t *testing.T) {
	events := []query.HistoryEvent{
		{EventID: "e1", Type: "collection.started", SchemaVersion: 2, Revision: 0, Position: 7,
			OccurredAt: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC), CorrelationID: "corr", CausationID: "req", Actor: "client:acme",
			Summary: json.RawMessage(`{"company":"se-demo-insurer","product":"INSURANCE"}`)},
		{EventID: "e2", Type: "collection.status-changed", SchemaVersion: 1, Revision: 1, Position: 9,
			OccurredAt: time.Date(2026, 5, 1, 12, 0, 1, 0, time.UTC), Summary: json.RawMessage(`{"from":"RUNNING","to":"LOGIN"}`)},
		{EventID: "e3", Type: "collection.something-new", SchemaVersion: 1, Revision: 2, Position: 11,
			OccurredAt: time.Date(2026, 5, 1, 12, 0, 2, 0, time.UTC)},
	}
	raw, _ := json.Marshal(CollectionEvents("c1", events))
	s := string(raw)
	for _, want := range []string{`"collectionId":"c1"`, `"eventId":"e1"`, `"revision":1`, `"position":9`,
		`"occurredAt":"2026-05-01T12:00:01.000Z"`, `"correlationId":null`, `"actor":"client:acme"`,
		`"payload":{"company":"se-demo-insurer","product":"INSURANCE"}`, `"payload":{"from":"RUNNING","to":"LOGIN"}`,
		`"type":"collection.something-new","schemaVersion":1,"revision":2,"position":11,"occurredAt":"2026-05-01T12:00:02.000Z",` +
			`"correlationId":null,"causationId":null,"actor":null,"payload":null`} {
		if !strings.Contains(s, want) {
			t.Errorf("lacks %s: %s", want, s)
		}
	}
	if raw, _ := json.Marshal(CollectionEvents("c1", nil)); string(raw) != `{"collectionId":"c1","events":[]}` {
		t.Fatalf("empty = %s", raw)
	}
}
