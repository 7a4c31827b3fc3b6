// Package collection is the collection aggregate: a client's request to collect a user's data
// from one company, its state machine and the facts recorded along the way.
package collection

import (
	"fmt"
	"maps"
	"slices"
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

// Kind tells a repository where collections are stored and how to make an empty one.
var Kind = domain.Kind[*Collection]{StreamPrefix: StreamPrefix, New: func() *Collection { return &Collection{} }}

// Names of StartRequest's inputs in the field errors of Start.
const (
	FieldCollectionID = "collectionId"
	FieldClientID     = "clientId"
	FieldCompany      = "company"
	FieldLoginMethod  = "loginMethod"
	FieldPDF          = "pdf"
	FieldUserUUID     = "userUuid"
	FieldConsent      = "consent"
)

// root lets Collection embed domain.Root under an unexported name: its methods are promoted and
// Collection is a domain.Aggregate, but no other package can reach (or overwrite) the field.
type root = domain.Root

// Collection is the aggregate, rebuilt by folding its events. Fields are unexported so that state
// changes only through events: its commands decide, then record their events, which Apply folds.
type Collection struct {
	root
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
	consent     *UsedConsent
	insurances  []Insurance
	holderNames map[string]string // by insurance id; personal data, nil once erased
	wealth      []WealthCollected
	documents   []Document
	current     StatusChanged  // the event that set the current status; zero while RUNNING
	supplied    *InputSupplied // input accepted for the current status, until the status moves
	// suppliedBy is the request hash of the input each Idempotency-Key supplied, over the whole
	// history: a retry may come after the status moved on and supplied was forgotten.
	suppliedBy map[string]string
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

// HolderName is the name the company gave for an insurance's holder, "" when unknown (or
// erased). Personal data: never logged.
func (c *Collection) HolderName(insuranceID string) string { return c.holderNames[insuranceID] }

// Consent is the PSD2 consent the collection was started with, nil when none.
func (c *Collection) Consent() *UsedConsent {
	if c.consent == nil {
		return nil
	}
	u := *c.consent
	u.Scope = slices.Clone(u.Scope)
	return &u
}

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

// DataSubject is whose personal data the collection's events carry: its user's when it has one,
// else the collection's own (domain.UserSubject, domain.CollectionSubject).
func (c *Collection) DataSubject() string { return DataSubject(c.id, c.userUUID) }

// DataSubject is the data subject of the collection with this id and user ("" for none), for
// the read models, which know both but not the aggregate.
func DataSubject(collectionID, userUUID string) string {
	if userUUID != "" {
		return domain.UserSubject(userUUID)
	}
	return domain.CollectionSubject(collectionID)
}

// Exists reports whether the collection has been started (Version, from domain.Root, counts
// its events).
func (c *Collection) Exists() bool { return c.Version() > 0 }

// Apply folds one event; domain.Record and domain.Rehydrate call it. It never validates business
// rules (those ran when the event was decided); it only refuses events that cannot belong to a
// collection.
func (c *Collection) Apply(e domain.Event) error {
	switch ev := e.(type) {
	case Started:
		c.id, c.clientID, c.company, c.product = ev.CollectionID, ev.ClientID, ev.Company, ev.Product
		c.loginMethod, c.apiVersion, c.userUUID = ev.LoginMethod, ev.APIVersion, ev.UserUUID
		c.status, c.startedAt, c.updatedAt = StatusRunning, ev.StartedAt, ev.StartedAt
		c.consent = nil
		if ev.Consent != nil {
			u := *ev.Consent
			u.Scope = slices.Clone(u.Scope)
			c.consent = &u
		}
		if ev.Personal != nil {
			c.person, c.requestHash = *ev.Personal, ev.Personal.RequestHash
			c.person.RequestHash = ""
		}
	case Claimed:
		c.claimedBy, c.updatedAt = ev.WorkerID, ev.ClaimedAt
	case StatusChanged:
		c.status, c.updatedAt, c.current, c.supplied = ev.To, ev.ChangedAt, ev, nil
	case InsurancesCollected:
		c.insurances = append(c.insurances, ev.Insurances()...)
		if ev.Personal != nil && len(ev.Personal.HolderNames) > 0 {
			if c.holderNames == nil {
				c.holderNames = make(map[string]string, len(ev.Personal.HolderNames))
			}
			maps.Copy(c.holderNames, ev.Personal.HolderNames)
		}
		c.updatedAt = ev.CollectedAt
	case WealthCollected:
		c.wealth = append(c.wealth, ev)
		c.updatedAt = ev.CollectedAt
	case InputSupplied:
		supplied := ev
		c.supplied, c.updatedAt = &supplied, ev.SuppliedAt
		if p := ev.Personal; p != nil && p.IdempotencyKey != "" {
			if c.suppliedBy == nil {
				c.suppliedBy = map[string]string{}
			}
			c.suppliedBy[p.IdempotencyKey] = p.RequestHash
		}
	case DocumentUploaded:
		c.documents = append(c.documents, ev.Document)
	case DocumentCollected:
		c.documents = append(c.documents, ev.Document)
		c.updatedAt = ev.At
	default:
		return fmt.Errorf("collection cannot apply event %s", e.EventType())
	}
	return nil
}

// StartRequest is the validated-on-Start input of a new collection.
type StartRequest struct {
	CollectionID string
	ClientID     string
	Company      Company
	LoginMethod  string
	APIVersion   string
	UserUUID     string
	// PersonalNumber was parsed where it entered; zero when the request named nobody.
	PersonalNumber   personnummer.Number
	AccountOwnerName string
	RequestHash      string
	// PDF is the letter uploaded with PDF_UPLOAD; its content is personal data.
	PDF *UploadedPDF
	// Consent is the PSD2 consent the collection reads its PSD2 products under, nil for none.
	// The caller checked it usable (consent.Consent.Usable) for the client, the user and the
	// company; the collection records it as it was then.
	Consent *UsedConsent
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
	// Consents is set for a company that serves PSD2 products under consents.
	Consents bool
}

// Start decides a new collection. A login method the company does not support is accepted: the
// connector ends the collection in LOGIN_METHOD_NOT_APPLICABLE, as the spec says. Invalid input
// is a *domain.FieldError naming the StartRequest member (Field* constants).
func (c *Collection) Start(req StartRequest, now time.Time) error {
	if c.Exists() {
		return fmt.Errorf("collection %s already started: %w", c.id, domain.ErrConflict)
	}
	switch {
	case req.CollectionID == "":
		return &domain.FieldError{Field: FieldCollectionID, Reason: "is required"}
	case req.ClientID == "":
		return &domain.FieldError{Field: FieldClientID, Reason: "is required"}
	case strings.TrimSpace(req.LoginMethod) == "":
		return &domain.FieldError{Field: FieldLoginMethod, Reason: "is required"}
	case req.Company.ID == "":
		return &domain.FieldError{Field: FieldCompany, Reason: "is required"}
	}
	if err := checkConsent(req); err != nil {
		return err
	}
	if !req.Company.Available {
		return fmt.Errorf("company %s is not available: %w", req.Company.ID, ErrCompanyUnavailable)
	}
	person := &StartedPerson{AccountOwnerName: strings.TrimSpace(req.AccountOwnerName), PersonalNumber: req.PersonalNumber.String(),
		RequestHash: req.RequestHash}
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
		UserUUID: req.UserUUID, StartedAt: now.UTC(), Consent: usedConsent(req.Consent), Personal: person,
	}}
	if req.PDF != nil {
		// Whether the bytes are a readable letter is the company's verdict (FAILED_PDF_*), not
		// a reason to refuse the request.
		doc := NewDocument(req.PDF.DocumentID, DocumentUploadedPDF, "application/pdf", req.PDF.FileName, req.PDF.Content)
		if err := doc.validate(FieldPDF); err != nil {
			return err
		}
		doc.At = now.UTC()
		events = append(events, DocumentUploaded{Document: doc})
	}
	return domain.Record(c, events...)
}

// ErrConsentNotSupported refuses a consent for a collection at a company that gives none.
var ErrConsentNotSupported = fmt.Errorf("the company gives no consents: %w", domain.ErrRefused)

// checkConsent holds a start's consent to what a consent is for: one user's PSD2 products at a
// bank with consents. A consent names its user, so a collection of no user cannot use one.
func checkConsent(req StartRequest) error {
	u := req.Consent
	switch {
	case u == nil:
		return nil
	case !req.Company.Consents:
		return fmt.Errorf("company %s: %w", req.Company.ID, ErrConsentNotSupported)
	case req.UserUUID == "":
		return &domain.FieldError{Field: FieldUserUUID, Reason: "is required with a consent"}
	case u.ConsentID == "" || u.BankConsentID == "":
		return &domain.FieldError{Field: FieldConsent, Reason: "must name the consent and the bank's consent"}
	case len(u.Scope) == 0:
		return &domain.FieldError{Field: FieldConsent, Reason: "must have a scope"}
	}
	return nil
}

// usedConsent is what a start records of its consent: a copy, scope sorted as consents keep it.
func usedConsent(u *UsedConsent) *UsedConsent {
	if u == nil {
		return nil
	}
	out := *u
	out.Scope = slices.Clone(u.Scope)
	slices.Sort(out.Scope)
	return &out
}

// ErrCompanyUnavailable refuses a collection at a company in maintenance or down.
var ErrCompanyUnavailable = fmt.Errorf("company unavailable: %w", domain.ErrConflict)

// Claim gives the company session to one worker. Another worker's claim blocks it until that
// worker has recorded nothing for staleAfter (it died); the same worker id may claim again, which
// is how a restarted worker resumes its own sessions.
func (c *Collection) Claim(workerID string, now time.Time, staleAfter time.Duration) error {
	if !c.Exists() {
		return fmt.Errorf("claim of a collection that does not exist: %w", domain.ErrConflict)
	}
	if c.status.IsFinal() {
		return fmt.Errorf("collection %s is final (%s): %w", c.id, c.status, domain.ErrConflict)
	}
	if workerID == "" {
		return &domain.FieldError{Field: "workerId", Reason: "is required"}
	}
	if c.claimedBy != "" && c.claimedBy != workerID && now.Sub(c.updatedAt) < staleAfter {
		return fmt.Errorf("collection %s is claimed by %s: %w", c.id, c.claimedBy, ErrAlreadyClaimed)
	}
	return domain.Record(c, Claimed{WorkerID: workerID, ClaimedAt: now.UTC()})
}

// ErrAlreadyClaimed means another live worker runs the collection's session.
var ErrAlreadyClaimed = fmt.Errorf("already claimed: %w", domain.ErrConflict)

// ChangeStatus moves the state machine; an illegal move is an error and records nothing.
func (c *Collection) ChangeStatus(to Status, extra map[string]any, now time.Time) error {
	return c.ChangeStatusWith(to, StatusDetails{Extra: extra}, now)
}

// ChangeStatusWith moves the state machine and records what the new status asks of the client.
// Staying in a non-final status records something only when the details changed (new
// instructions, another message, a new EID order).
func (c *Collection) ChangeStatusWith(to Status, details StatusDetails, now time.Time) error {
	if !c.Exists() {
		return fmt.Errorf("status change of a collection that does not exist: %w", domain.ErrConflict)
	}
	if to == c.status && !to.IsFinal() {
		if c.status == StatusRunning || sameDetails(c.current, details) {
			return nil // nothing new to record
		}
		return domain.Record(c, details.event(c.status, to, now))
	}
	if !CanTransition(c.status, to) {
		return fmt.Errorf("collection %s cannot go from %s to %s: %w", c.id, c.status, to, ErrIllegalTransition)
	}
	if details.Deadline != nil && to.IsFinal() {
		return &domain.FieldError{Field: "deadline", Reason: fmt.Sprintf("must be absent: %s is a final status", to)}
	}
	return domain.Record(c, details.event(c.status, to, now))
}

// ExpireDeadline ends the collection in the deadline's timeout status once it has passed, and
// records nothing before.
func (c *Collection) ExpireDeadline(now time.Time) error {
	d := c.current.Deadline
	if !c.Exists() || c.status.IsFinal() || d == nil || now.Before(d.DueAt) {
		return nil
	}
	to, err := d.Kind.ExpiryStatus()
	if err != nil {
		return err
	}
	return c.ChangeStatusWith(to, StatusDetails{Message: "The user did not act before the deadline."}, now)
}

// ErrIllegalTransition is a move the state machine does not allow.
var ErrIllegalTransition = fmt.Errorf("illegal status transition: %w", domain.ErrConflict)

// RecordInsurances stores what the company returned; only while collecting.
func (c *Collection) RecordInsurances(insurances []Insurance, holderNames map[string]string, now time.Time) error {
	if c.status != StatusCollecting {
		return fmt.Errorf("collection %s is %s, not COLLECTING: %w", c.id, c.status, domain.ErrConflict)
	}
	if c.product != ProductInsurance {
		return fmt.Errorf("collection %s collects %s, not insurances: %w", c.id, c.product, domain.ErrConflict)
	}
	seen := make(map[string]bool, len(insurances))
	for i, ins := range insurances {
		if ins.ID == "" || seen[ins.ID] {
			return &domain.FieldError{Field: fmt.Sprintf("insurances[%d].id", i), Reason: "must be present and unique"}
		}
		seen[ins.ID] = true
	}
	for id := range holderNames {
		if !seen[id] {
			return &domain.FieldError{Field: "holderNames", Reason: "must name collected insurances only"}
		}
	}
	ev := InsurancesCollected{InsuranceCount: len(insurances), CollectedAt: now.UTC()}
	if len(insurances) > 0 {
		ev.Personal = &InsuranceRecords{Insurances: insurances}
		if len(holderNames) > 0 {
			ev.Personal.HolderNames = holderNames
		}
	}
	return domain.Record(c, ev)
}

// RecordWealth stores a wealth company's data, deciding otherInsuredPerson for each pension by
// the spec's rule against the account owner's name given at start, and which PSD2 products were
// read (data.PSD2Read, and those of which records came), so that readers can tell a PSD2 list
// found empty from one never read.
func (c *Collection) RecordWealth(data WealthData, now time.Time) error {
	if c.status != StatusCollecting {
		return fmt.Errorf("collection %s is %s, not COLLECTING: %w", c.id, c.status, domain.ErrConflict)
	}
	if c.product != ProductWealth {
		return fmt.Errorf("collection %s collects %s, not wealth: %w", c.id, c.product, domain.ErrConflict)
	}
	records := &WealthRecords{Investments: data.Investments, Loans: data.Loans, Savings: data.Savings,
		CheckingAccounts: data.CheckingAccounts, SavingsAccounts: data.SavingsAccounts,
		CreditCards: data.CreditCards, PersonalInformation: data.PersonalInformation}
	ids := map[string]bool{}
	for i, p := range data.Pensions {
		if p.ID == "" || ids[p.ID] {
			return &domain.FieldError{Field: fmt.Sprintf("pensions[%d].id", i), Reason: "must be present and unique"}
		}
		ids[p.ID] = true
		pension := p.Pension
		pension.OtherInsuredPerson = namematch.OtherInsuredPerson(p.CompanyOtherInsuredPerson, p.InsuredPersonName, c.person.AccountOwnerName)
		records.Pensions = append(records.Pensions, pension)
		if p.InsuredPersonName != "" {
			if records.InsuredPersonNames == nil {
				records.InsuredPersonNames = map[string]string{}
			}
			records.InsuredPersonNames[p.ID] = p.InsuredPersonName
		}
	}
	read, err := data.psd2Read()
	if err != nil {
		return err
	}
	ev := WealthCollected{Counts: records.counts(), CollectedAt: now.UTC(), PSD2Read: read}
	if !records.isZero() {
		ev.Personal = records
	}
	return domain.Record(c, ev)
}

// RecordDocument stores a document a company returned while collecting.
func (c *Collection) RecordDocument(doc Document, now time.Time) error {
	if c.status != StatusCollecting {
		return fmt.Errorf("collection %s is %s, not COLLECTING: %w", c.id, c.status, domain.ErrConflict)
	}
	if err := doc.validate("document"); err != nil {
		return err
	}
	doc.At = now.UTC()
	return domain.Record(c, DocumentCollected{Document: doc})
}
