package presenter

import (
	"encoding/json"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/query"
)

// timeFormat matches the rest of the API: RFC 3339, UTC, milliseconds.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

// StatusResponse is the body of GET /collections/{collectionId}/status.
type StatusResponse struct {
	CollectionID     string         `json:"collectionId"`
	Company          string         `json:"company"`
	LoginMethod      string         `json:"loginMethod"`
	Status           string         `json:"status"`
	ExtraInformation map[string]any `json:"extraInformation"`
	PollingInterval  int64          `json:"pollingInterval"` // milliseconds
	UpdatedAt        string         `json:"updatedAt"`
}

// CollectionStatus presents a status row for a client speaking version; market is the company's
// (it decides some statuses on 2025-01-01), "" when the company is no longer in the catalog.
func CollectionStatus(version httpapi.Version, market string, v query.StatusView) StatusResponse {
	aud := Audience{Version: version, Product: collection.Product(v.Product), Market: market}
	extra := v.ExtraInformation
	if extra == nil {
		extra = map[string]any{} // the contract always has the object
	}
	return StatusResponse{
		CollectionID: v.CollectionID, Company: v.Company, LoginMethod: v.LoginMethod,
		Status:           string(Status(aud, collection.Status(v.Status))),
		ExtraInformation: extra,
		PollingInterval:  PollingInterval(v.LoginMethod).Milliseconds(),
		UpdatedAt:        v.UpdatedAt.UTC().Format(timeFormat),
	}
}

// EventResponse is one event of the audit history. Payload is the event's audit summary, null
// for an event whose envelope alone is shown.
type EventResponse struct {
	EventID       string          `json:"eventId"`
	Type          string          `json:"type"`
	SchemaVersion int             `json:"schemaVersion"`
	Revision      uint64          `json:"revision"`
	Position      uint64          `json:"position"`
	OccurredAt    string          `json:"occurredAt"`
	CorrelationID *string         `json:"correlationId"`
	CausationID   *string         `json:"causationId"`
	Actor         *string         `json:"actor"`
	Payload       json.RawMessage `json:"payload"`
}

// EventsResponse is the body of GET /collections/{collectionId}/events.
type EventsResponse struct {
	CollectionID string          `json:"collectionId"`
	Events       []EventResponse `json:"events"`
}

// CollectionEvents presents a page of history, in the order given (oldest first).
func CollectionEvents(collectionID string, events []query.HistoryEvent) EventsResponse {
	out := EventsResponse{CollectionID: collectionID, Events: make([]EventResponse, 0, len(events))}
	for _, e := range events {
		out.Events = append(out.Events, EventResponse{
			EventID: e.EventID, Type: e.Type, SchemaVersion: e.SchemaVersion, Revision: e.Revision,
			Position: e.Position, OccurredAt: e.OccurredAt.UTC().Format(timeFormat),
			CorrelationID: nullable(e.CorrelationID), CausationID: nullable(e.CausationID), Actor: nullable(e.Actor),
			Payload: summary(e.Summary),
		})
	}
	return out
}

// summary renders an audit summary as the history read model holds it: what the history may
// show was decided when it was projected (eventschema's allowlist), so nothing is filtered here.
func summary(s json.RawMessage) json.RawMessage {
	if len(s) == 0 {
		return json.RawMessage("null")
	}
	return s
}

// nullable renders an empty string as null: the value is unknown, not empty.
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
