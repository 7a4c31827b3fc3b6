// Package collection is the collection aggregate: a client's request to collect a user's data
// from one company, its state machine and the facts recorded along the way.
package collection

import (
	"fmt"
	"strings"
	"time"

	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/namematch"
	"github.com/samla/samla/domain/personnummer"
)

// Product is what a company's data covers.
type Product string

const (
	ProductInsurance Product = "INSURANCE"
	ProductWealth    Product = "WEALTH"
)

// StreamPrefix is the event-store category of collection streams.
const StreamPrefix = "collection-"

// StreamName returns the stream that holds one collection's events.
func StreamName(collectionID string) string { return StreamPrefix + collectionID }

// Collection is the aggregate, rebuilt by folding its events. Fields are unexported so that state
// changes only through events.
type Collection struct {
	id          string
	clientID    string
	company     string
	product     Product
	loginMethod string
	apiVersion  string
	userUUID    string
	requestHash string
	status      Status
	claimedBy   string
	startedAt   time.Time
	updatedAt   time.Time
	person      StartedPerson
	insurances  []Insurance
	wealth      []WealthCollected
	documents   []Document
	current     StatusChanged  // the event that set the current status; zero while RUNNING
	supplied    *InputSupplied // input accepted for the current status, until the status moves
	// suppliedBy is the request hash of the input each Idempotency-Key supplied, over the whole
	// history: a retry may come after the status moved on and supplied was forgotten.
	suppliedBy map[string]string
	version    int // events applied; 0 means the collection does not exist
}

func (c *Collection) ID() string              { return c.id }
func (c *Collection) ClientID() string        { return c.clientID }
func (c *Collection) Company() string         { return c.company }
func (c *Collection) Product() Product        { return c.product }
func (c *Collection) LoginMethod() string     { return c.loginMethod }
func (c *Collection) APIVersion() string      { return c.apiVersion }
func (c *Collection) UserUUID() string        { return c.userUUID }
func (c *Collection) RequestHash() string     { return c.requestHash }
func (c *Collection) Status() Status          { return c.status }
func (c *Collection) ClaimedBy() string       { return c.claimedBy }
func (c *Collection) StartedAt() time.Time    { return c.startedAt }
func (c *Collection) UpdatedAt() time.Time    { return c.updatedAt }
func (c *Collection) Person() StartedPerson   { return c.person }
func (c *Collection) Insurances() []Insurance { return append([]Insurance(nil), c.insurances...) }

// Wealth returns every wealth data event recorded, in order.
func (c *Collection) Wealth() []WealthCollected { return append([]WealthCollected(nil), c.wealth...) }

// Documents returns the documents uploaded or collected, with their content.
func (c *Collection) Documents() []Document { return append([]Document(nil), c.documents...) }

// Current returns the event that set the current status (zero while RUNNING): what it asks of
// the client, including the instructions kept in its personal part, and its deadline.
func (c *Collection) Current() CurrentStatus {
	return CurrentStatus{StatusChanged: c.current, Instructions: c.current.instructions()}
}

// Deadline is the current status's deadline, if it has one.
func (c *Collection) Deadline() *Deadline { return c.current.Deadline }

// SuppliedInput is the input accepted for the current status, nil when none was.
func (c *Collection) SuppliedInput() *InputSupplied { return c.supplied }

// Version is the number of events folded into the aggregate: the expected revision for the next
// append is Version()-1, and 0 means no stream.
func (c *Collection) Version() int { return c.version }

// Exists reports whether the collection has been started.
func (c *Collection) Exists() bool { return c.version > 0 }

// Rehydrate folds stored events into an aggregate.
func Rehydrate(events []domain.Event) (*Collection, error) {
	c := &Collection{}
	for _, e := range events {
		if err := c.Apply(e); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Apply folds one event. It never validates business rules (those ran when the event was
// decided); it only refuses events that cannot belong to a collection.
func (c *Collection) Apply(e domain.Event) error {
	switch ev := e.(type) {
	case Started:
		c.id, c.clientID, c.company, c.product = ev.CollectionID, ev.ClientID, ev.Company, ev.Product
		c.loginMethod, c.apiVersion, c.userUUID, c.requestHash = ev.LoginMethod, ev.APIVersion, ev.UserUUID, ev.RequestHash
		c.status, c.startedAt, c.updatedAt = StatusRunning, ev.StartedAt, ev.StartedAt
		if ev.Personal != nil {
			c.person = *ev.Personal
		}
	case Claimed:
		c.claimedBy, c.updatedAt = ev.WorkerID, ev.ClaimedAt
	case StatusChanged:
		c.status, c.updatedAt, c.current, c.supplied = ev.To, ev.ChangedAt, ev, nil
	case InsurancesCollected:
		c.insurances = append(c.insurances, ev.Insurances...)
		c.updatedAt = ev.CollectedAt
	case WealthCollected:
		c.wealth = append(c.wealth, ev)
		c.updatedAt = ev.CollectedAt
	case InputSupplied:
		supplied := ev
		c.supplied, c.updatedAt = &supplied, ev.SuppliedAt
		if ev.IdempotencyKey != "" {
			if c.suppliedBy == nil {
				c.suppliedBy = map[string]string{}
			}
			c.suppliedBy[ev.IdempotencyKey] = ev.RequestHash
		}
	case DocumentUploaded:
		c.documents = append(c.documents, ev.Document)
	case DocumentCollected:
		c.documents = append(c.documents, ev.Document)
		c.updatedAt = ev.At
	default:
		return fmt.Errorf("collection cannot apply event %s", e.EventType())
	}
	c.version++
	return nil
}

// StartRequest is the validated-on-Start input of a new collection.
type StartRequest struct {
	CollectionID     string
	ClientID         string
	Company          Company
	LoginMethod      string
	APIVersion       string
	UserUUID         string
	PersonalNumber   string
	AccountOwnerName string
	RequestHash      string
	// PDF is the letter uploaded with PDF_UPLOAD; its content is personal data.
	PDF *UploadedPDF
}

// UploadedPDF is a file the client sent with the request.
type UploadedPDF struct {
	DocumentID string
	FileName   string
	Content    []byte
}

// Company is what the domain needs to know about a company when a collection starts.
type Company struct {
	ID        string
	Products  []Product
	Available bool
}

// Start decides a new collection. A login method the company does not support is accepted: the
// connector ends the collection in LOGIN_METHOD_NOT_APPLICABLE, as the spec says.
func (c *Collection) Start(req StartRequest, now time.Time) ([]domain.Event, error) {
	if c.Exists() {
		return nil, fmt.Errorf("collection %s already started: %w", c.id, domain.ErrConflict)
	}
	if req.CollectionID == "" || req.ClientID == "" {
		return nil, fmt.Errorf("collection and client ids are required: %w", domain.ErrInvalid)
	}
	if strings.TrimSpace(req.LoginMethod) == "" {
		return nil, fmt.Errorf("loginMethod is required: %w", domain.ErrInvalid)
	}
	if req.Company.ID == "" {
		return nil, fmt.Errorf("company is required: %w", domain.ErrInvalid)
	}
	if !req.Company.Available {
		return nil, fmt.Errorf("company %s is not available: %w", req.Company.ID, ErrCompanyUnavailable)
	}
	person := &StartedPerson{AccountOwnerName: strings.TrimSpace(req.AccountOwnerName)}
	if req.PersonalNumber != "" {
		pn, err := personnummer.Parse(req.PersonalNumber, now)
		if err != nil {
			return nil, fmt.Errorf("personalNumber: %w", err)
		}
		person.PersonalNumber = pn.String()
	}
	if *person == (StartedPerson{}) {
		person = nil
	}
	product := ProductInsurance
	if len(req.Company.Products) > 0 {
		product = req.Company.Products[0]
	}
	events := []domain.Event{Started{
		CollectionID: req.CollectionID, ClientID: req.ClientID, Company: req.Company.ID,
		Product: product, LoginMethod: req.LoginMethod, APIVersion: req.APIVersion,
		UserUUID: req.UserUUID, RequestHash: req.RequestHash, StartedAt: now.UTC(), Personal: person,
	}}
	if req.PDF != nil {
		// Whether the bytes are a readable letter is the company's verdict (FAILED_PDF_*), not
		// a reason to refuse the request.
		doc := NewDocument(req.PDF.DocumentID, DocumentUploadedPDF, "application/pdf", req.PDF.FileName, req.PDF.Content)
		if err := doc.validate(); err != nil {
			return nil, fmt.Errorf("pdf: %w", err)
		}
		doc.At = now.UTC()
		events = append(events, DocumentUploaded{Document: doc})
	}
	return events, nil
}

// ErrCompanyUnavailable refuses a collection at a company in maintenance or down.
var ErrCompanyUnavailable = fmt.Errorf("company unavailable: %w", domain.ErrConflict)

// Claim gives the company session to one worker. Another worker's claim blocks it until that
// worker has recorded nothing for staleAfter (it died); the same worker id may claim again, which
// is how a restarted worker resumes its own sessions.
func (c *Collection) Claim(workerID string, now time.Time, staleAfter time.Duration) ([]domain.Event, error) {
	if !c.Exists() {
		return nil, fmt.Errorf("claim of a collection that does not exist: %w", domain.ErrConflict)
	}
	if c.status.IsFinal() {
		return nil, fmt.Errorf("collection %s is final (%s): %w", c.id, c.status, domain.ErrConflict)
	}
	if workerID == "" {
		return nil, fmt.Errorf("worker id is required: %w", domain.ErrInvalid)
	}
	if c.claimedBy != "" && c.claimedBy != workerID && now.Sub(c.updatedAt) < staleAfter {
		return nil, fmt.Errorf("collection %s is claimed by %s: %w", c.id, c.claimedBy, ErrAlreadyClaimed)
	}
	return []domain.Event{Claimed{WorkerID: workerID, ClaimedAt: now.UTC()}}, nil
}

// ErrAlreadyClaimed means another live worker runs the collection's session.
var ErrAlreadyClaimed = fmt.Errorf("already claimed: %w", domain.ErrConflict)

// ChangeStatus moves the state machine; an illegal move is an error and records nothing.
func (c *Collection) ChangeStatus(to Status, extra map[string]any, now time.Time) ([]domain.Event, error) {
	return c.ChangeStatusWith(to, StatusDetails{Extra: extra}, now)
}

// ChangeStatusWith moves the state machine and records what the new status asks of the client.
// Staying in a non-final status records something only when the details changed (new
// instructions, another message, a new EID order).
func (c *Collection) ChangeStatusWith(to Status, details StatusDetails, now time.Time) ([]domain.Event, error) {
	if !c.Exists() {
		return nil, fmt.Errorf("status change of a collection that does not exist: %w", domain.ErrConflict)
	}
	if to == c.status && !to.IsFinal() {
		if c.status == StatusRunning || sameDetails(c.current, details) {
			return nil, nil // nothing new to record
		}
		return []domain.Event{details.event(c.status, to, now)}, nil
	}
	if !CanTransition(c.status, to) {
		return nil, fmt.Errorf("collection %s cannot go from %s to %s: %w", c.id, c.status, to, ErrIllegalTransition)
	}
	if details.Deadline != nil && to.IsFinal() {
		return nil, fmt.Errorf("final status %s cannot carry a deadline: %w", to, domain.ErrInvalid)
	}
	return []domain.Event{details.event(c.status, to, now)}, nil
}

// ExpireDeadline ends the collection in the deadline's timeout status once it has passed, and
// decides nothing before.
func (c *Collection) ExpireDeadline(now time.Time) ([]domain.Event, error) {
	d := c.current.Deadline
	if !c.Exists() || c.status.IsFinal() || d == nil || now.Before(d.DueAt) {
		return nil, nil
	}
	to, err := d.Kind.ExpiryStatus()
	if err != nil {
		return nil, err
	}
	return c.ChangeStatusWith(to, StatusDetails{Message: "The user did not act before the deadline."}, now)
}

// ErrIllegalTransition is a move the state machine does not allow.
var ErrIllegalTransition = fmt.Errorf("illegal status transition: %w", domain.ErrConflict)

// RecordInsurances stores what the company returned; only while collecting.
func (c *Collection) RecordInsurances(insurances []Insurance, holderNames map[string]string, now time.Time) ([]domain.Event, error) {
	if c.status != StatusCollecting {
		return nil, fmt.Errorf("collection %s is %s, not COLLECTING: %w", c.id, c.status, domain.ErrConflict)
	}
	if c.product != ProductInsurance {
		return nil, fmt.Errorf("collection %s collects %s, not insurances: %w", c.id, c.product, domain.ErrConflict)
	}
	seen := make(map[string]bool, len(insurances))
	for _, ins := range insurances {
		if ins.ID == "" || seen[ins.ID] {
			return nil, fmt.Errorf("insurance ids must be present and unique: %w", domain.ErrInvalid)
		}
		seen[ins.ID] = true
	}
	var persons *InsurancesPersons
	if len(holderNames) > 0 {
		for id := range holderNames {
			if !seen[id] {
				return nil, fmt.Errorf("holder name for unknown insurance %q: %w", id, domain.ErrInvalid)
			}
		}
		persons = &InsurancesPersons{HolderNames: holderNames}
	}
	return []domain.Event{InsurancesCollected{Insurances: insurances, CollectedAt: now.UTC(), Personal: persons}}, nil
}

// RecordWealth stores a wealth company's data, deciding otherInsuredPerson for each pension by
// the spec's rule against the account owner's name given at start.
func (c *Collection) RecordWealth(data WealthData, now time.Time) ([]domain.Event, error) {
	if c.status != StatusCollecting {
		return nil, fmt.Errorf("collection %s is %s, not COLLECTING: %w", c.id, c.status, domain.ErrConflict)
	}
	if c.product != ProductWealth {
		return nil, fmt.Errorf("collection %s collects %s, not wealth: %w", c.id, c.product, domain.ErrConflict)
	}
	ev := WealthCollected{Investments: data.Investments, Loans: data.Loans, Savings: data.Savings,
		CheckingAccounts: data.CheckingAccounts, SavingsAccounts: data.SavingsAccounts,
		CreditCards: data.CreditCards, CollectedAt: now.UTC()}
	persons := &WealthPersons{PersonalInformation: data.PersonalInformation}
	ids := map[string]bool{}
	for _, p := range data.Pensions {
		if p.ID == "" || ids[p.ID] {
			return nil, fmt.Errorf("pension ids must be present and unique: %w", domain.ErrInvalid)
		}
		ids[p.ID] = true
		pension := p.Pension
		pension.OtherInsuredPerson = namematch.OtherInsuredPerson(p.CompanyOtherInsuredPerson, p.InsuredPersonName, c.person.AccountOwnerName)
		ev.Pensions = append(ev.Pensions, pension)
		if p.InsuredPersonName != "" {
			if persons.InsuredPersonNames == nil {
				persons.InsuredPersonNames = map[string]string{}
			}
			persons.InsuredPersonNames[p.ID] = p.InsuredPersonName
		}
	}
	if persons.PersonalInformation != nil || persons.InsuredPersonNames != nil {
		ev.Personal = persons
	}
	return []domain.Event{ev}, nil
}

// RecordDocument stores a document a company returned while collecting.
func (c *Collection) RecordDocument(doc Document, now time.Time) ([]domain.Event, error) {
	if c.status != StatusCollecting {
		return nil, fmt.Errorf("collection %s is %s, not COLLECTING: %w", c.id, c.status, domain.ErrConflict)
	}
	if err := doc.validate(); err != nil {
		return nil, err
	}
	doc.At = now.UTC()
	return []domain.Event{DocumentCollected{Document: doc}}, nil
}
