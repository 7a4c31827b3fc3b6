// Package collectiondata is the read model behind the data endpoints
// (GET /collections/{id}/insurance/data, /wealth/data, /wealth/career-statement and the old
// GET /data): one row per collection with everything it collected, and one row per document a
// company returned. The Store port is declared here with its SQLite and ClickHouse adapters, the
// DDL of each, the Projector that folds collection events into rows, and the Reader, which
// serves the query side's port (query.DataReader); datatest is the contract suite both adapters
// pass.
//
// Unlike the audit history, this read model must hold personal data: the data endpoints return
// it to the client that owns the collection. Everything a company told of the person is: the
// names and personal information, and the records themselves (a person's insurances, pensions,
// loans, accounts and cards), as the events' own "personal" member holds them. Sealing stores it
// all, sealed, in columns of its own (personal_json, and a document's personal_content), so that
// an erasure blanks exactly those columns and leaves the collection's status, company and
// revisions.
package collectiondata

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/consent"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/projections/readdb"
)

// Row is one collection's collected data.
type Row struct {
	CollectionID string
	Tenant       string // the client id that owns the collection
	Company      string
	Product      string // INSURANCE or WEALTH
	// Status is the last status the projector folded. The final status change is the last
	// event a stream gets after its data, so a row in a final status holds all of the data;
	// one that is not final yet (while the status read model already says final) is a read
	// model that lags behind, which readers must not present as complete.
	Status string
	// UserUUID is the collection's user ("" for none): with the id, it names the data subject
	// the personal data is sealed under (collection.DataSubject).
	UserUUID string
	Content  Content  // the records the company returned (personal data: Sealing seals them with Personal)
	Personal Personal // the names and personal information that go with them
	// UpdatedAt is the time of the last event folded (the domain's own time when it has one),
	// at ms precision, in UTC.
	UpdatedAt time.Time
	// Revision is the revision of the last event of the collection's stream folded into the row.
	Revision uint64

	// sealed is Personal in its stored form, sealed (Sealing): the adapters store it instead of
	// Personal when it is set, and set it, leaving Personal empty, when the column holds the
	// sealed form.
	sealed []byte
}

// Content is the collected records, in the domain's own types, so that a data point the company
// did not report stays nil (unknown) all the way to the presenter. Lists accumulate over the
// collection's data events; an empty list is nil. IsZero tells none.
//
// PSD2Read names the PSD2 products read (collection.WealthCollected.PSD2Read, accumulated):
// nil when no event recorded it (data from before), which readers present as before. It names
// no one, so it is stored in plain beside sealed records (Sealing leaves it in data_json), and
// an erasure, which blanks the records, blanks it with them.
type Content struct {
	Insurances       []collection.Insurance      `json:"insurances,omitempty"`
	Pensions         []collection.Pension        `json:"pensions,omitempty"`
	Investments      []collection.Investment     `json:"investments,omitempty"`
	Loans            []collection.Loan           `json:"loans,omitempty"`
	Savings          []collection.Saving         `json:"savings,omitempty"`
	CheckingAccounts []collection.PSD2Account    `json:"psd2CheckingAccounts,omitempty"`
	SavingsAccounts  []collection.PSD2Account    `json:"psd2SavingsAccounts,omitempty"`
	CreditCards      []collection.PSD2CreditCard `json:"psd2CreditCards,omitempty"`
	PSD2Read         []consent.Scope             `json:"psd2Read,omitzero"`
}

// IsZero reports whether c holds no record (PSD2Read is not one).
func (c Content) IsZero() bool {
	return len(c.Insurances) == 0 && len(c.Pensions) == 0 && len(c.Investments) == 0 && len(c.Loans) == 0 &&
		len(c.Savings) == 0 && len(c.CheckingAccounts) == 0 && len(c.SavingsAccounts) == 0 && len(c.CreditCards) == 0
}

// Personal is the names and personal information of the collected data. Empty maps are nil.
type Personal struct {
	// HolderNames maps an insurance id to its holder's name.
	HolderNames map[string]string `json:"holderNames,omitempty"`
	// InsuredPersonNames maps a pension id to its insured person's name.
	InsuredPersonNames map[string]string `json:"insuredPersonNames,omitempty"`
	// PersonalInformation is what the company knows of the person; nil when it told nothing.
	PersonalInformation *collection.PersonalInformation `json:"personalInformation,omitempty"`
}

// IsZero reports whether p holds no personal data at all.
func (p Personal) IsZero() bool {
	return len(p.HolderNames) == 0 && len(p.InsuredPersonNames) == 0 && p.PersonalInformation == nil
}

// Document is a file a company returned with the collection (the French career statement).
// Documents the client uploaded (PDF_UPLOAD) are input, not collected data, and are not kept.
type Document struct {
	CollectionID string
	DocumentID   string
	Tenant       string
	Kind         string // collection.DocumentFrenchCareerStatement, …
	ContentType  string
	FileName     string // "" when the company gave none
	Size         int64
	SHA256       string // hex
	At           time.Time
	// Content is the file. It is personal data, stored in a column of its own; nil when it
	// was never received or has been erased, and always nil from Store.Documents.
	Content []byte
	// HasContent tells whether the store holds the file (Content, which Store.Documents does not
	// read): false once its user's erasure blanked it, or when it was never received. Only the
	// stores set it; Upsert ignores it.
	HasContent bool
	// Revision is the revision of the event that recorded the document.
	Revision uint64
}

// Store holds the rows and documents. The projector writes through GetMany and Upsert; the
// query side reads with Get, Documents and Document.
type Store interface {
	// GetMany returns the rows of the given collections that exist, keyed by collection id,
	// whatever their tenant (it serves the projector, never a client).
	GetMany(ctx context.Context, ids []string) (map[string]Row, error)
	// Upsert writes documents, then rows. A row whose Revision is not greater than the stored
	// row's is ignored, and so is a document whose Revision is not greater than the stored
	// copy of the same (CollectionID, DocumentID), so that a redelivered or reordered write can
	// never move data back; within one call, the first row (document) with the highest
	// revision per key wins. Documents go first so that a write interrupted between the two
	// leaves the row's revision behind, and the redelivered events write the documents again.
	Upsert(ctx context.Context, rows []Row, docs []Document) error
	// Get returns tenant's collection, or readdb.ErrNotFound when it does not exist or belongs
	// to another tenant: a client must not learn that another client's data exists.
	Get(ctx context.Context, tenant, collectionID string) (Row, error)
	// Documents lists the documents of tenant's collection without their content, oldest
	// first (by At, then DocumentID); empty for an unknown collection or another tenant's.
	Documents(ctx context.Context, tenant, collectionID string) ([]Document, error)
	// Document returns one document of tenant's collection with its content, or
	// readdb.ErrNotFound.
	Document(ctx context.Context, tenant, collectionID, documentID string) (Document, error)
	// ErasePersonal blanks the personal data of every one of tenant's collections made for
	// userUUID, which was deleted: a row's records and personal data, and its documents'
	// content, file name and digest (which could name or confirm the person's file). The rest
	// stays, at the revisions it has. Erasing again changes nothing; a collection of no user is
	// never touched.
	ErasePersonal(ctx context.Context, tenant, userUUID string) error
	// Reset removes every row and document, before a rebuild from the event store.
	Reset(ctx context.Context) error
}

// latestPerCollection keeps, per collection, the first row with the highest revision, in the
// order of first appearance: what sequential conditional upserts of the batch would leave.
func latestPerCollection(rows []Row) []Row { return readdb.LatestPerKey(rows, rowKey, rowRevision) }

// latestPerDocument is latestPerCollection for documents, keyed by (collection, document).
func latestPerDocument(docs []Document) []Document {
	return readdb.LatestPerKey(docs, docKey, docRevision)
}

// rowKey, rowRevision, docKey and docRevision are the identities and versions that readdb's
// revision helpers compare.
func rowKey(r Row) string           { return r.CollectionID }
func rowRevision(r Row) uint64      { return r.Revision }
func docKey(d Document) [2]string   { return [2]string{d.CollectionID, d.DocumentID} }
func docRevision(d Document) uint64 { return d.Revision }

// encodeContent is the stored form of Content: a JSON object, "{}" when empty.
func encodeContent(c Content) (string, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("encode collected data: %w", err)
	}
	return string(b), nil
}

// decodeContent reverses encodeContent; "" (a row written before any data) is empty content.
func decodeContent(s string) (Content, error) {
	var c Content
	if s == "" {
		return c, nil
	}
	if err := json.Unmarshal([]byte(s), &c); err != nil {
		return Content{}, fmt.Errorf("decode collected data: %w", err)
	}
	return c, nil
}

// encodePersonal is the stored form of Personal: a JSON object, or "" when there is no personal
// data, which is also what an erasure leaves.
func encodePersonal(p Personal) (string, error) {
	if p.IsZero() {
		return "", nil
	}
	b, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("encode personal data: %w", err)
	}
	return string(b), nil
}

// storedPersonal is what the adapters store of a row's personal data: its sealed form when the
// row has one, else Personal in plain text (a store used without Sealing, as only tests do).
func storedPersonal(r Row) (string, error) {
	if r.sealed != nil {
		return string(r.sealed), nil
	}
	return encodePersonal(r.Personal)
}

// readPersonal reverses storedPersonal: a sealed column is kept sealed for Sealing to open; a
// plain one (a row written before sealing) is decoded.
func readPersonal(r *Row, stored string) error {
	if eventschema.IsSealed([]byte(stored)) {
		r.sealed, r.Personal = []byte(stored), Personal{}
		return nil
	}
	var err error
	r.Personal, err = decodePersonal(stored)
	return err
}

// decodePersonal reverses encodePersonal.
func decodePersonal(s string) (Personal, error) {
	var p Personal
	if s == "" {
		return p, nil
	}
	if err := json.Unmarshal([]byte(s), &p); err != nil {
		return Personal{}, fmt.Errorf("decode personal data: %w", err)
	}
	return p, nil
}
