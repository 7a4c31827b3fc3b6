// Package cancellations is the read model behind GET /cancellations/{documentId}, its /pdf and
// GET /collections/{collectionId}/cancellations: one row per insurance cancellation with its
// status, times, outcome and the stream revision it reflects, and, in a table of its own, the
// signed and sealed PDF.
//
// The sealed PDF names the holder: it is personal data. The projector keeps it sealed under the
// cancellation's data subject (collection.DataSubject of its collection and user,
// projections/internal/sealed), and a user.deleted blanks it for that user's cancellations; the
// row itself, status included, stays. Nothing else of a cancellation is personal here: the
// holder's name and personal number, the insurance number and the delivery address stay in the
// event store.
//
// The Store port is declared here with its SQLite and ClickHouse adapters, the DDL of each, the
// Projector that folds cancellation events into rows, and the Reader that serves the ports of the
// read model's consumers (query.CancellationReader, the connectors' list of cancellations that
// still need the signing provider, the erasure's list of a user's cancellations);
// cancellationstest is the contract suite both adapters pass.
package cancellations

import (
	"context"
	"time"

	"github.com/samla/samla/domain/cancellation"
	"github.com/samla/samla/projections/internal/sealed"
	"github.com/samla/samla/projections/readdb"
)

// Row is one cancellation.
type Row struct {
	DocumentID   string
	Tenant       string // the client id that owns the cancellation
	CollectionID string
	UserUUID     string // the collection's user, "" for none
	Company      string
	InsuranceID  string
	// InsuranceType is the collected insurance's type, "" when unknown.
	InsuranceType  string
	DeliveryMethod string // EMAIL or SMS
	// TemplateVersion is the version of the client's power-of-attorney template the document is
	// rendered from.
	TemplateVersion int
	// Status is the last status the cancellation's events recorded (a cancellation.Status).
	Status string
	// IsSignedAndSealed tells that the holder signed and the provider's sealed PDF was recorded.
	// It stays true after the user's erasure blanked the PDF.
	IsSignedAndSealed bool
	// Times are stored at ms precision and returned in UTC; zero is none. RequestedAt is the
	// API's createdAt; SentAt and Deadline (the signature's) come with PENDING; SignedAt with
	// CLOSED; EndedAt is when the cancellation became final.
	RequestedAt time.Time
	SentAt      time.Time
	Deadline    time.Time
	SignedAt    time.Time
	EndedAt     time.Time
	// CancelReason is who withdrew a CANCELED cancellation (cancellation.CancelReason), ""
	// otherwise.
	CancelReason string
	// ErrorCode is why a DOCUMENT_ERROR cancellation failed (cancellation.Document*), ""
	// otherwise.
	ErrorCode string
	UpdatedAt time.Time
	// Revision is the revision of the last event of the cancellation's stream folded into the
	// row.
	Revision uint64
}

// Document is a cancellation's signed, sealed PDF as the read model keeps it, in a table of its
// own: sealed under the row's data subject. Content is zero when nothing is kept (the subject
// was erased before the read model saw the PDF, or its erasure blanked it since).
type Document struct {
	DocumentID string
	Tenant     string
	Content    sealed.Value
	// Revision is the revision of the event that recorded the PDF (cancellation.sealed).
	Revision uint64
}

// Position is where a page of cancellations ends, in the order of ListByUser and
// ListNeedingProvider (oldest first: by RequestedAt, then DocumentID): the last row's RequestedAt
// (at the stored ms precision) and DocumentID. Neither ever changes for a cancellation, so the
// page after a position holds exactly the matching cancellations after it, whatever was requested
// or ended meanwhile.
type Position struct {
	RequestedAt time.Time
	DocumentID  string
}

// Store holds the rows and documents. The projector writes through GetMany, Upsert and
// ErasePersonal; the reader reads with Get, ListByCollection, ListByUser, ListNeedingProvider
// and Document.
type Store interface {
	// GetMany returns the rows of the given cancellations that exist, keyed by document id,
	// whatever their tenant (it serves the projector, never a client).
	GetMany(ctx context.Context, ids []string) (map[string]Row, error)
	// Upsert writes documents, then rows. A row whose Revision is not greater than the stored
	// row's is ignored, and so is a document whose Revision is not greater than the stored
	// document's, so that a redelivered or reordered write can never move either back; within
	// one call, the first row (document) with the highest revision per document id wins.
	// Documents go first so that a write interrupted between the two leaves the row's revision
	// behind, and the redelivered events write the document again.
	Upsert(ctx context.Context, rows []Row, docs []Document) error
	// Get returns tenant's cancellation, or readdb.ErrNotFound when it does not exist or
	// belongs to another tenant: a client must not learn that another client's cancellation
	// exists.
	Get(ctx context.Context, tenant, documentID string) (Row, error)
	// ListByCollection returns up to limit of tenant's cancellations of collectionID, oldest
	// first (by RequestedAt, then DocumentID); none for limit <= 0.
	ListByCollection(ctx context.Context, tenant, collectionID string, limit int) ([]Row, error)
	// ListByUser returns up to limit of tenant's cancellations of userUUID, oldest first (by
	// RequestedAt, then DocumentID), starting after the position (nil: from the oldest); none
	// for an empty userUUID or limit <= 0.
	ListByUser(ctx context.Context, tenant, userUUID string, after *Position, limit int) ([]Row, error)
	// ListNeedingProvider returns up to limit cancellations (limit <= 0: all) that still need
	// the signing provider (NeedsProvider: PREPARATION, PENDING, and CLOSED ones whose sealed
	// PDF is not recorded yet), oldest first (by RequestedAt, then DocumentID), starting after
	// the position (nil: from the oldest). The connectors' sweep pages through them.
	ListNeedingProvider(ctx context.Context, after *Position, limit int) ([]Row, error)
	// Document returns tenant's cancellation's document, or readdb.ErrNotFound when none was
	// recorded (or the cancellation is another tenant's). A document blanked by an erasure is
	// returned with a zero Content.
	Document(ctx context.Context, tenant, documentID string) (Document, error)
	// ErasePersonal blanks the documents of every one of tenant's cancellations of userUUID,
	// which was deleted: the rows stay, at the revisions they have, and so do the documents'.
	// Erasing again changes nothing.
	ErasePersonal(ctx context.Context, tenant, userUUID string) error
	// Reset removes every row and document, before a rebuild from the event store.
	Reset(ctx context.Context) error
}

// NeedsProvider tells whether a cancellation in status, sealed or not, still has work at the
// signing provider (sending it, following its signature, or fetching the sealed PDF): the
// read model's form of cancellation.Cancellation.NeedsProvider.
func NeedsProvider(status string, isSignedAndSealed bool) bool {
	switch cancellation.Status(status) {
	case cancellation.StatusPreparation, cancellation.StatusPending:
		return true
	case cancellation.StatusClosed:
		return !isSignedAndSealed
	}
	return false
}

// closed is the status whose cancellations need the provider only until their PDF is sealed.
const closed = string(cancellation.StatusClosed)

// openStatuses lists the statuses in which NeedsProvider may hold, derived from the domain so
// that the read model never disagrees with the state machine: the stores select by them, then
// by the seal.
func openStatuses() []string {
	var out []string
	for _, s := range cancellation.AllStatuses() {
		if NeedsProvider(string(s), false) {
			out = append(out, string(s))
		}
	}
	return out
}

// rowKey and rowRevision are a row's identity and version, docKey and docRevision a document's,
// for readdb's revision helpers.
func rowKey(r Row) string           { return r.DocumentID }
func rowRevision(r Row) uint64      { return r.Revision }
func docKey(d Document) string      { return d.DocumentID }
func docRevision(d Document) uint64 { return d.Revision }

// byUserFilter is the WHERE clause of ListByUser, and its arguments. Every column in it never
// changes for a cancellation, so ClickHouse may apply it to the raw row versions next to FINAL.
func byUserFilter(tenant, userUUID string, after *Position, rowValues bool) (string, []any) {
	where := `tenant = ? AND user_uuid = ?`
	args := []any{tenant, userUUID}
	if cond, condArgs := positionAfter(after, rowValues); cond != "" {
		return where + ` AND ` + cond, append(args, condArgs...)
	}
	return where, args
}

// positionAfter is the condition of the rows after a position ("" for none), and its arguments.
// SQLite takes the position as a row value, which its index search turns into a range (per
// status in cancellations_by_status, whose entries end with the primary key); ClickHouse, which
// scans either way, takes the expanded form every server version knows. requested_at_ms and
// document_id never change for a cancellation, so ClickHouse may apply it to the raw row versions
// next to FINAL: it keeps or drops every version of a row together.
func positionAfter(after *Position, rowValues bool) (string, []any) {
	if after == nil {
		return "", nil
	}
	return readdb.After("requested_at_ms", "document_id", after.RequestedAt, after.DocumentID, rowValues)
}
