// Package collection is the collection aggregate: a client's request to collect a user's data
// from one company, its state machine and the facts recorded along the way.
package collection

import (
	"fmt"
	"strings"
	"time"

	"github.com/samla/samla/domain"
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
	version     int // events applied; 0 means the collection does not exist
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
		c.status, c.updatedAt = ev.To, ev.ChangedAt
	case InsurancesCollected:
		c.insurances = append(c.insurances, ev.Insurances...)
		c.updatedAt = ev.CollectedAt
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
	return []domain.Event{Started{
		CollectionID: req.CollectionID, ClientID: req.ClientID, Company: req.Company.ID,
		Product: product, LoginMethod: req.LoginMethod, APIVersion: req.APIVersion,
		UserUUID: req.UserUUID, RequestHash: req.RequestHash, StartedAt: now.UTC(), Personal: person,
	}}, nil
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
	if !c.Exists() {
		return nil, fmt.Errorf("status change of a collection that does not exist: %w", domain.ErrConflict)
	}
	if to == c.status && !to.IsFinal() {
		return nil, nil // nothing new to record
	}
	if !CanTransition(c.status, to) {
		return nil, fmt.Errorf("collection %s cannot go from %s to %s: %w", c.id, c.status, to, ErrIllegalTransition)
	}
	return []domain.Event{StatusChanged{From: c.status, To: to, ExtraInformation: extra, ChangedAt: now.UTC()}}, nil
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
		persons = &InsurancesPersons{HolderNames: holderNames}
	}
	return []domain.Event{InsurancesCollected{Insurances: insurances, CollectedAt: now.UTC(), Personal: persons}}, nil
}
