// Package query is the read side: Gin handlers (httpquery) and versioned presenters (presenter)
// over read-model ports. The ports are declared here, with row types of their own, so that the
// read side depends on what it needs and not on a projection's storage; the wiring adapts the
// projections to them.
package query

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// ErrNotFound is a row that does not exist for the asking tenant. Readers return it (wrapped) for
// another tenant's row too, so that handlers cannot reveal it exists.
var ErrNotFound = errors.New("not found")

// StatusView is a collection's current status as the status projection holds it, in domain
// terms; presenting it for an API version is the presenter's job.
type StatusView struct {
	CollectionID     string
	Tenant           string
	Company          string
	Product          string // INSURANCE or WEALTH
	LoginMethod      string
	APIVersion       string // the version the collection was started with
	UserUUID         string
	Status           string // a domain status (collection.Status)
	ExtraInformation map[string]any
	CreatedAt        time.Time
	UpdatedAt        time.Time
}

// StatusReader reads the status projection.
type StatusReader interface {
	// Get returns the tenant's collection, or an error wrapping ErrNotFound.
	Get(ctx context.Context, tenant, collectionID string) (StatusView, error)
}

// HistoryEvent is one stored event as the audit history shows it: the envelope without the
// tenant-internal parts, and a payload that holds no personal data.
type HistoryEvent struct {
	EventID       string
	Type          string
	SchemaVersion int
	Tenant        string
	Stream        string
	Revision      uint64
	Position      uint64
	OccurredAt    time.Time
	CorrelationID string
	CausationID   string
	Actor         string
	Payload       json.RawMessage
}

// HistoryReader reads the event-history projection.
type HistoryReader interface {
	// List returns up to limit events of the tenant's stream with a revision greater than
	// afterRevision (nil: from the start), oldest first. Another tenant's stream has no events.
	List(ctx context.Context, tenant, stream string, afterRevision *uint64, limit int) ([]HistoryEvent, error)
}
