// Package query is the read side: Gin handlers (httpquery) and versioned presenters (presenter)
// over read-model ports. The ports are declared here, with row types of their own (the collected
// data reuses the domain's record types, whose JSON is the API's), so that the read side depends
// on what it needs and not on a projection's storage. Each read model's Reader implements its
// port (collectionstatus, eventhistory, collectiondata under projections/) and returns the port's
// ErrNotFound; the composition root only constructs the readers.
package query

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/consent"
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
	// What the current status asks of the client; all empty when it asks nothing.
	RequiredInputTypes []string
	Instructions       []InstructionView
	Message            string
	EIDOrder           *EIDOrderView
	// QRStartSecret is the EID order's secret, from which each poll computes the animated QR
	// data. It must never be put in a response.
	QRStartSecret string
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// InstructionView is one request a client-side login method asks the client to run from the
// user's device.
type InstructionView struct {
	RequestID string
	Method    string
	URL       string
	Headers   map[string]string
	Body      *string // nil: no body
}

// EIDOrderView is the public part of a pending electronic-ID order.
type EIDOrderView struct {
	QRStartToken   string
	AutoStartToken string
	StartedAt      time.Time
}

// StatusReader reads the status projection.
type StatusReader interface {
	// Get returns the tenant's collection, or an error wrapping ErrNotFound.
	Get(ctx context.Context, tenant, collectionID string) (StatusView, error)
}

// HistoryEvent is one stored event as the audit history shows it: the envelope, and its type's
// audit summary (eventschema.Registry.AuditSummary) in place of the payload, which shows what
// happened and never collected values, personal data or fingerprints.
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
	// Summary is the audit summary, a JSON object; nil for an event whose type this build does
	// not know, of which the history shows the envelope only.
	Summary json.RawMessage
}

// HistoryReader reads the event-history projection.
type HistoryReader interface {
	// List returns up to limit events of the tenant's stream with a revision greater than
	// afterRevision (nil: from the start), oldest first. Another tenant's stream has no events.
	List(ctx context.Context, tenant, stream string, afterRevision *uint64, limit int) ([]HistoryEvent, error)
}

// DataView is everything a collection collected, as the data read model holds it, in the
// domain's own record types (collection.Pension, collection.Loan, …): a nil pointer is a data
// point the company did not report (unknown), never a zero. Personal data (holder and insured
// person names, PersonalInformation) is merged in: the data endpoints return it to the client
// that owns the collection.
type DataView struct {
	CollectionID string
	Tenant       string
	Company      string
	Product      string // INSURANCE or WEALTH
	// Status is the last status the data read model has folded. Once the collection is final
	// (by the status read model) the data is complete only when this is final too; until then
	// the data read model has not caught up.
	Status           string
	Insurances       []InsuranceView
	Pensions         []PensionView
	Investments      []collection.Investment
	Loans            []collection.Loan
	Savings          []collection.Saving
	CheckingAccounts []collection.PSD2Account
	SavingsAccounts  []collection.PSD2Account
	CreditCards      []collection.PSD2CreditCard
	// PSD2Read names the PSD2 products read; the others are unknown (no consent, outside its
	// scope, or it ended first). nil means not recorded (data from before it was): every PSD2
	// list counts as read.
	PSD2Read            []consent.Scope
	PersonalInformation *collection.PersonalInformation // nil when the company told nothing of the person
	// CareerStatement describes the newest French career statement the company returned, nil
	// when it returned none; GetDocument serves its content.
	CareerStatement *DocumentInfo
}

// InsuranceView is one insurance with its holder's name, which the event keeps apart as
// personal data. Its JSON is the API's Insurance object (both versions).
type InsuranceView struct {
	collection.Insurance
	HolderName *string `json:"holderName,omitempty"` // personal data
}

// PensionView is one pension with its insured person's name, which the event keeps apart as
// personal data. OtherInsuredPerson is the conclusion recorded with the data; nil (absent)
// means none was possible. Its JSON is the API's Pension object (both versions).
type PensionView struct {
	collection.Pension
	InsuredPersonName *string `json:"insuredPersonName,omitempty"` // personal data
}

// DocumentInfo describes a document a company returned with a collection, without its content.
type DocumentInfo struct {
	Kind        string // e.g. FRENCH_CAREER_STATEMENT
	ContentType string
	FileName    string // "" when the company gave none
	Size        int64
	At          time.Time
}

// DocumentView is a document a company returned with a collection, with its content.
type DocumentView struct {
	DocumentID  string
	Kind        string // e.g. FRENCH_CAREER_STATEMENT
	ContentType string
	FileName    string // "" when the company gave none
	Size        int64
	SHA256      string // hex
	At          time.Time
	Content     []byte
}

// DataReader reads the collection-data projection.
type DataReader interface {
	// GetData returns the tenant's collection's data, or an error wrapping ErrNotFound when the
	// read model holds no such collection for the tenant.
	GetData(ctx context.Context, tenant, collectionID string) (DataView, error)
	// GetDocument returns the newest document of a kind that a company returned for the
	// tenant's collection, or an error wrapping ErrNotFound when there is none (or its content
	// is no longer held).
	GetDocument(ctx context.Context, tenant, collectionID, kind string) (DocumentView, error)
}

// ErrNoSignedDocument is a cancellation the asking tenant has, but without a signed document to
// serve: not signed and sealed yet, or its user's erasure removed the PDF. A cancellation the
// tenant does not have is ErrNotFound.
var ErrNoSignedDocument = errors.New("no signed document")

// CancellationView is an insurance cancellation as the cancellations read model holds it, in
// domain terms (Status is a cancellation.Status). CreatedAt is when it was requested; SignedAt is
// nil until the holder signed.
type CancellationView struct {
	DocumentID        string
	Tenant            string
	CollectionID      string
	UserUUID          string
	Company           string
	InsuranceID       string
	Status            string
	IsSignedAndSealed bool
	CreatedAt         time.Time
	SignedAt          *time.Time
	UpdatedAt         time.Time
}

// MaxCollectionCancellations bounds CancellationReader.CollectionCancellations.
const MaxCollectionCancellations = 1000

// CancellationReader reads the cancellations read model.
type CancellationReader interface {
	// Cancellation returns the tenant's cancellation, or an error wrapping ErrNotFound (also for
	// another tenant's).
	Cancellation(ctx context.Context, tenant, documentID string) (CancellationView, error)
	// CollectionCancellations returns the tenant's cancellations of the collection, oldest first
	// (by CreatedAt, then DocumentID), at most MaxCollectionCancellations; none for an unknown
	// collection or another tenant's.
	CollectionCancellations(ctx context.Context, tenant, collectionID string) ([]CancellationView, error)
	// SignedDocument returns the signed, sealed PDF of the tenant's cancellation: an error
	// wrapping ErrNotFound when the tenant has no such cancellation, one wrapping
	// ErrNoSignedDocument when it has no document (not signed and sealed yet, or erased).
	SignedDocument(ctx context.Context, tenant, documentID string) ([]byte, error)
}
