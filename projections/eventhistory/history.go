// Package eventhistory is the audit read model: every event of every stream, in stream order,
// as GET /collections/{id}/events returns it and as analysts query it in ClickHouse. The Store
// port, its SQLite and ClickHouse adapters with their DDL, and the Projector live here;
// historytest is the contract suite both adapters pass.
//
// Personal data never enters this read model: the projector removes the payload's top-level
// "personal" field, where the domain keeps personal numbers, names, e-mail addresses and phone
// numbers. Analysts read ClickHouse freely, and an erased data subject must stay erased; the
// personal data stays only in the event store, where it can be crypto-shredded.
package eventhistory

import (
	"context"
	"encoding/json"
	"time"
)

// Row is one event as the history shows it.
type Row struct {
	Tenant        string
	Stream        string
	Revision      uint64
	Position      uint64
	EventID       string
	Type          string
	SchemaVersion int // the version of Payload as stored here (the current one for known types)
	OccurredAt    time.Time
	CorrelationID string
	CausationID   string
	Actor         string
	Payload       json.RawMessage // without personal data
}

// Store holds the history.
type Store interface {
	// Insert stores rows in one batch. It is idempotent by (Stream, Revision): a row that is
	// already stored is not stored again.
	Insert(ctx context.Context, rows []Row) error
	// List returns up to limit events (limit <= 0: all) of tenant's stream, oldest first,
	// starting after afterRevision (nil: from the first event). Another tenant's stream reads
	// as empty.
	List(ctx context.Context, tenant, stream string, afterRevision *uint64, limit int) ([]Row, error)
	// Reset removes every row, before a rebuild from the event store.
	Reset(ctx context.Context) error
}
