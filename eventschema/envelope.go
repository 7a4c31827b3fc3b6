// Package eventschema is the contract between event writers and readers: the envelope, every
// event type with its stable name and schema versions, JSON Schemas, upcasters and the rules that
// map streams to Kafka topics and keys.
package eventschema

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// Envelope is one stored event with everything a reader needs besides the payload. Stream,
// Revision and Position are assigned by the event store on append.
type Envelope struct {
	EventID       string          `json:"eventId"`
	Type          string          `json:"type"`
	SchemaVersion int             `json:"schemaVersion"`
	Tenant        string          `json:"tenant"`
	Stream        string          `json:"stream"`
	Revision      uint64          `json:"revision"`
	Position      uint64          `json:"position"`
	OccurredAt    time.Time       `json:"occurredAt"`
	CorrelationID string          `json:"correlationId,omitempty"`
	CausationID   string          `json:"causationId,omitempty"`
	Actor         string          `json:"actor,omitempty"`
	Payload       json.RawMessage `json:"payload"`
}

// Metadata is the part of the envelope that stores keep beside the payload (EventStoreDB's
// user metadata, a column set in SQLite, Kafka headers).
type Metadata struct {
	SchemaVersion int       `json:"schemaVersion"`
	Tenant        string    `json:"tenant"`
	OccurredAt    time.Time `json:"occurredAt"`
	CorrelationID string    `json:"correlationId,omitempty"`
	CausationID   string    `json:"causationId,omitempty"`
	Actor         string    `json:"actor,omitempty"`
}

// Metadata returns the envelope's metadata part.
func (e Envelope) Metadata() Metadata {
	return Metadata{SchemaVersion: e.SchemaVersion, Tenant: e.Tenant, OccurredAt: e.OccurredAt,
		CorrelationID: e.CorrelationID, CausationID: e.CausationID, Actor: e.Actor}
}

// WithMetadata copies m into the envelope.
func (e Envelope) WithMetadata(m Metadata) Envelope {
	e.SchemaVersion, e.Tenant, e.OccurredAt = m.SchemaVersion, m.Tenant, m.OccurredAt
	e.CorrelationID, e.CausationID, e.Actor = m.CorrelationID, m.CausationID, m.Actor
	return e
}

// Category is the part of a stream name before the first hyphen ("collection" for
// "collection-<uuid>"), as EventStoreDB's $ce- projections read it.
func Category(stream string) string {
	if i := strings.IndexByte(stream, '-'); i > 0 {
		return stream[:i]
	}
	return stream
}

// Topic is the Kafka topic that carries a category's events.
func Topic(category string) string { return "samla." + category + ".events" }

// Categories lists every stream category Samla writes, and so every topic the relay feeds.
// "externalid" holds the users' externalId reservations (domain/user), whose streams are named
// by a keyed hash: they travel on a topic of their own, so that a consumer of users' events
// never has to tell them apart.
func Categories() []string {
	return []string{"collection", "cancellation", "consent", "user", "externalid", "client"}
}

// Topics lists the topics of every category.
func Topics() []string {
	cs := Categories()
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = Topic(c)
	}
	return out
}

// appendJSON appends e as json.Marshal writes it, but for the payload, which it copies as it is
// (json.Marshal compacts it and escapes <, > and & in it, which changes no value): the relay
// encodes every event it publishes, and json.Marshal's reflection and its pass over the payload
// were 3 % of the CPU a collection took. The payload is checked to be one JSON value, as
// json.Marshal checks it. FuzzToMessage compares both encodings' values.
func (e Envelope) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"eventId":`...)
	b = appendString(b, e.EventID)
	b = append(b, `,"type":`...)
	b = appendString(b, e.Type)
	b = append(b, `,"schemaVersion":`...)
	b = strconv.AppendInt(b, int64(e.SchemaVersion), 10)
	b = append(b, `,"tenant":`...)
	b = appendString(b, e.Tenant)
	b = append(b, `,"stream":`...)
	b = appendString(b, e.Stream)
	b = append(b, `,"revision":`...)
	b = strconv.AppendUint(b, e.Revision, 10)
	b = append(b, `,"position":`...)
	b = strconv.AppendUint(b, e.Position, 10)
	b = append(b, `,"occurredAt":`...)
	at, err := e.OccurredAt.MarshalJSON() // its errors (a year beyond 9999) are json.Marshal's
	if err != nil {
		return nil, fmt.Errorf("occurredAt: %w", err)
	}
	b = append(b, at...)
	for _, m := range [...]struct{ name, value string }{
		{`,"correlationId":`, e.CorrelationID}, {`,"causationId":`, e.CausationID}, {`,"actor":`, e.Actor},
	} {
		if m.value != "" {
			b = appendString(append(b, m.name...), m.value)
		}
	}
	b = append(b, `,"payload":`...)
	switch {
	case e.Payload == nil: // an empty one is no JSON value, as below
		b = append(b, "null"...)
	case !jsontext.Value(e.Payload).IsValid(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)):
		return nil, errors.New("payload: not one JSON value")
	default:
		b = append(b, e.Payload...)
	}
	return append(b, '}'), nil
}

// appendString appends s as a JSON string; invalid UTF-8 becomes U+FFFD, as json.Marshal makes it.
func appendString(b []byte, s string) []byte {
	b, _ = jsontext.AppendQuote(b, s)
	return b
}

// Kafka header names. Values are strings.
const (
	HeaderType          = "samla-type"
	HeaderSchemaVersion = "samla-schema-version"
	HeaderTenant        = "samla-tenant"
	HeaderPosition      = "samla-position"
	HeaderEventID       = "samla-event-id"
)

// TopicMessage is an envelope as it travels on Kafka: the key is the stream id so that one
// aggregate's events keep their order in one partition, and the value is the whole envelope.
type TopicMessage struct {
	Topic   string
	Key     []byte
	Value   []byte
	Headers map[string]string
}

// ToMessage maps an envelope to its Kafka message.
func ToMessage(e Envelope) (TopicMessage, error) {
	value, err := e.appendJSON(make([]byte, 0, 320+len(e.Payload)))
	if err != nil {
		return TopicMessage{}, fmt.Errorf("encode envelope %s/%d: %w", e.Stream, e.Revision, err)
	}
	return TopicMessage{
		Topic: Topic(Category(e.Stream)),
		Key:   []byte(e.Stream),
		Value: value,
		Headers: map[string]string{
			HeaderType:          e.Type,
			HeaderSchemaVersion: strconv.Itoa(e.SchemaVersion),
			HeaderTenant:        e.Tenant,
			HeaderPosition:      strconv.FormatUint(e.Position, 10),
			HeaderEventID:       e.EventID,
		},
	}, nil
}

// FromMessage decodes a Kafka message value back into its envelope. Every consumer group
// decodes every message, and encoding/json's Unmarshal was 7 % of the process's CPU under a
// POST load; go-json-experiment's engine in encoding/json's semantics takes a third of that.
// Whatever it refuses goes to encoding/json, so that errors are encoding/json's own, and
// FuzzFromMessage checks that what it accepts decodes as encoding/json decodes it.
func FromMessage(value []byte) (Envelope, error) {
	var e Envelope
	if err := jsonv1.Unmarshal(value, &e); err != nil {
		e = Envelope{}
		if err := json.Unmarshal(value, &e); err != nil {
			return Envelope{}, fmt.Errorf("decode envelope: %w", err)
		}
	}
	if e.EventID == "" || e.Type == "" || e.Stream == "" {
		return Envelope{}, fmt.Errorf("decode envelope: missing id, type or stream")
	}
	return e, nil
}
