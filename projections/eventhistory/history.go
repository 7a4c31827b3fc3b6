// Package eventhistory is the audit read model: every event of every stream, in stream order,
// as GET /collections/{id}/events returns it and as analysts query it in ClickHouse. The Store
// port, its SQLite and ClickHouse adapters with their DDL, the Projector, and the Reader that
// serves the query side's port (query.HistoryReader) live here; historytest is the contract
// suite both adapters pass.
//
// The history shows what happened, never the collected values, personal data or fingerprints:
// the projector stores each event's envelope with its type's audit summary
// (eventschema.Registry.AuditSummary, the one home of that allowlist), never the payload itself.
// Analysts read ClickHouse freely, and an erased data subject must stay erased; the payloads stay
// only in the event store, where their personal part can be crypto-shredded.
//
// The tables are event_history_v2: the first event_history kept whole payloads minus their
// "personal" member, which still showed account numbers, balances, file names and request
// hashes. Opening a store drops that table, and the projection's new name gives it a new Kafka
// consumer group, which projects every event again from the start of the topics (they are kept
// forever), so no old payload is served or kept.
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
	SchemaVersion int // the version of the event the summary was built from (the current one for known types)
	OccurredAt    time.Time
	CorrelationID string
	CausationID   string
	Actor         string
	// Summary is the event type's audit summary; nil for a type or version this build does not
	// know, whose envelope alone is shown.
	Summary json.RawMessage
	// PersonalData is what the event held of personal data, told from its payload without
	// opening it: "" for none, PersonalSealed for a personal member sealed under DataSubject,
	// PersonalPlain for one written before sealing, PersonalErased for an event appended after
	// its subject was erased (eventschema's erased marker). The Reader turns it into the
	// summary's protectedData marker, deciding at every read whether a sealed subject has been
	// erased since.
	//
	// Rows projected before the column existed have "" whatever their event held; `samla
	// projections rebuild` projects them again and marks them (README).
	PersonalData string
	// DataSubject is the subject the personal data is sealed under (user-<uuid> or
	// collection-<id>, as domain.UserSubject and domain.CollectionSubject name them); "" unless
	// PersonalData is PersonalSealed. It names a user by the id the collection status read model
	// shows beside the same collections, never a person's data.
	DataSubject string
}

// The values of Row.PersonalData.
const (
	PersonalSealed = "sealed"
	PersonalPlain  = "plain"
	PersonalErased = "erased"
)

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

// legacyTable is the first history table, which kept whole payloads; opening a store drops it.
const legacyTable = "event_history"
