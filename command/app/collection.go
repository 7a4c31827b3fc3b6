// Package app holds the write side's application services: each loads an aggregate, lets the
// domain decide, and appends the decision with optimistic concurrency. Services speak in domain
// terms and typed errors; HTTP lives in the handlers.
package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/company"
	"github.com/samla/samla/domain/personnummer"
)

// Catalog is the port to the company catalog (connectors/catalog.Catalog satisfies it). Get
// returns an error wrapping company.ErrUnknownCompany for an id it does not know.
type Catalog interface {
	Get(id string) (company.Company, error)
}

// CollectionRepository is the port to the event-sourced collections
// (command/repository.Repository satisfies it).
type CollectionRepository interface {
	LoadCollection(ctx context.Context, collectionID string) (*collection.Collection, error)
	Save(ctx context.Context, stream string, version int, meta repository.Meta, events []domain.Event) (eventstore.AppendResult, error)
}

// StartCollection is the command to start a collection, already translated from whichever API
// version the client spoke.
type StartCollection struct {
	Tenant           string // the authenticated client
	APIVersion       string
	IdempotencyKey   string // "" when the client sent none
	Company          string
	LoginMethod      string
	UserUUID         string
	PersonalNumber   string // personal data: never logged
	AccountOwnerName string // personal data: never logged
	// RequestHash identifies the request's content, so that a retry with the same key can be told
	// from a different request reusing the key.
	RequestHash   string
	CorrelationID string
	// RequestID becomes the events' causation id: the HTTP request is the command that caused them.
	RequestID string
	// PDF is the document of a PDF_UPLOAD request, nil for other login methods. Its content is
	// personal data: never logged.
	PDF *PDFUpload
}

// PDFUpload is a document the client sent with the request, decoded.
type PDFUpload struct {
	FileName string // "" when the client gave none
	Content  []byte
}

// Created is the outcome of a start: the first response, also when a retry replays it.
type Created struct {
	CollectionID string
	Company      string
	LoginMethod  string
	Status       collection.Status
	CreatedAt    time.Time
	// Replayed is true when an earlier request with the same Idempotency-Key created it.
	Replayed bool
}

// Input names a member of StartCollection, so that a handler can point a field error at the
// place in its own request shape that carried it.
type Input string

const (
	InputCompany        Input = "company"
	InputLoginMethod    Input = "loginMethod"
	InputPersonalNumber Input = "personalNumber"
	InputUserUUID       Input = "userUuid"
)

// InvalidInputError is a start refused because one input is invalid (HTTP 400 with a field
// error). It wraps domain.ErrInvalid.
type InvalidInputError struct {
	Input  Input
	Reason string // client-facing; never contains the input's value
	Err    error
}

func (e *InvalidInputError) Error() string { return fmt.Sprintf("%s: %s", e.Input, e.Reason) }
func (e *InvalidInputError) Unwrap() error { return e.Err }

// CompanyUnavailableError is a start at a company that is down or in maintenance (HTTP 409
// COMPANY_UNAVAILABLE). It wraps collection.ErrCompanyUnavailable.
type CompanyUnavailableError struct {
	Company string
	Message string // the company's user-facing note, may be ""
	Err     error
}

func (e *CompanyUnavailableError) Error() string {
	return fmt.Sprintf("company %s is unavailable: %v", e.Company, e.Err)
}
func (e *CompanyUnavailableError) Unwrap() error { return e.Err }

// ErrIdempotencyKeyReused is a request that reuses an Idempotency-Key with another body (HTTP 422
// IDEMPOTENCY_KEY_REUSED).
var ErrIdempotencyKeyReused = fmt.Errorf("idempotency key was used for another request: %w", domain.ErrRefused)

// idempotencyNamespace is the UUIDv5 namespace of collection ids derived from idempotency keys.
// It is fixed forever: changing it would make retries of old requests create new collections.
var idempotencyNamespace = uuid.MustParse("4e69de70-7ee3-428c-8da6-d91751676732")

// CollectionIDForKey is the collection id of a request with an Idempotency-Key: a retry with the
// same key lands on the same stream, where the no-stream expectation of the append detects it.
// The tenant is part of the name, so two clients using the same key never meet.
func CollectionIDForKey(tenant, key string) string {
	// NUL cannot occur in a tenant id, so the split between the two parts is unambiguous.
	return uuid.NewSHA1(idempotencyNamespace, []byte(tenant+"\x00"+key)).String()
}

// CollectionService starts collections and takes the input they ask for.
type CollectionService struct {
	catalog Catalog
	repo    CollectionRepository
	now     func() time.Time
}

// NewCollectionService builds the service; now nil means time.Now.
func NewCollectionService(cat Catalog, repo CollectionRepository, now func() time.Time) *CollectionService {
	if now == nil {
		now = time.Now
	}
	return &CollectionService{catalog: cat, repo: repo, now: now}
}

// Start starts a collection, or, for a retry of an earlier request with the same Idempotency-Key
// and content, returns that request's outcome.
func (s *CollectionService) Start(ctx context.Context, cmd StartCollection) (Created, error) {
	if cmd.Tenant == "" {
		return Created{}, fmt.Errorf("start collection without a tenant: %w", domain.ErrInvalid)
	}
	if cmd.UserUUID != "" {
		u, err := uuid.Parse(cmd.UserUUID)
		if err != nil {
			return Created{}, &InvalidInputError{Input: InputUserUUID, Reason: "must be a UUID", Err: fmt.Errorf("user uuid: %w", domain.ErrInvalid)}
		}
		cmd.UserUUID = u.String() // one spelling per user, whatever form the client sent
	}
	co, err := s.catalog.Get(cmd.Company)
	switch {
	case errors.Is(err, company.ErrUnknownCompany):
		return Created{}, &InvalidInputError{Input: InputCompany, Reason: "is not a known company",
			Err: fmt.Errorf("company: %w: %w", err, domain.ErrInvalid)}
	case err != nil:
		return Created{}, fmt.Errorf("start collection: look up company: %w", err)
	}

	var id string
	agg := &collection.Collection{} // a fresh id has no stream: nothing to load
	if cmd.IdempotencyKey != "" {
		id = CollectionIDForKey(cmd.Tenant, cmd.IdempotencyKey)
		agg, err = s.repo.LoadCollection(ctx, id)
		if err != nil {
			return Created{}, fmt.Errorf("start collection: %w", err)
		}
		if agg.Exists() {
			return replay(agg, cmd)
		}
	} else {
		u, err := uuid.NewV7() // time-ordered: streams and read-model rows stay roughly in creation order
		if err != nil {
			return Created{}, fmt.Errorf("start collection: new id: %w", err)
		}
		id = u.String()
	}

	var pdf *collection.UploadedPDF
	if cmd.PDF != nil {
		// The document gets an id of its own: a collection may later hold documents the
		// company returned as well, and each is addressed on its own.
		pdf = &collection.UploadedPDF{DocumentID: uuid.NewString(), FileName: cmd.PDF.FileName, Content: cmd.PDF.Content}
	}
	// Millisecond precision is what responses and envelopes carry, so a replay returns exactly the
	// createdAt of the first response.
	now := s.now().UTC().Truncate(time.Millisecond)
	events, err := agg.Start(collection.StartRequest{
		CollectionID: id, ClientID: cmd.Tenant, Company: co.ForCollection(), LoginMethod: cmd.LoginMethod,
		APIVersion: cmd.APIVersion, UserUUID: cmd.UserUUID, PersonalNumber: cmd.PersonalNumber,
		AccountOwnerName: cmd.AccountOwnerName, RequestHash: cmd.RequestHash, PDF: pdf,
	}, now)
	if err != nil {
		return Created{}, s.classify(err, cmd, co, now)
	}
	meta := repository.Meta{Tenant: cmd.Tenant, CorrelationID: cmd.CorrelationID, CausationID: cmd.RequestID, Actor: "client:" + cmd.Tenant}
	if _, err := s.repo.Save(ctx, collection.StreamName(id), agg.Version(), meta, events); err != nil {
		if cmd.IdempotencyKey != "" && errors.Is(err, eventstore.ErrWrongExpectedRevision) {
			// A concurrent request with the same key won the race; answer as its retry would.
			existing, lerr := s.repo.LoadCollection(ctx, id)
			if lerr != nil {
				return Created{}, fmt.Errorf("start collection: reload after conflict: %w", lerr)
			}
			if existing.Exists() {
				return replay(existing, cmd)
			}
		}
		return Created{}, fmt.Errorf("start collection: %w", err)
	}
	return Created{CollectionID: id, Company: co.ID, LoginMethod: cmd.LoginMethod,
		Status: collection.StatusRunning, CreatedAt: now}, nil
}

// replay answers a request whose Idempotency-Key already created a collection.
func replay(existing *collection.Collection, cmd StartCollection) (Created, error) {
	if existing.ClientID() != cmd.Tenant || existing.RequestHash() != cmd.RequestHash {
		return Created{}, ErrIdempotencyKeyReused
	}
	return Created{CollectionID: existing.ID(), Company: existing.Company(), LoginMethod: existing.LoginMethod(),
		Status: collection.StatusRunning, CreatedAt: existing.StartedAt().UTC(), Replayed: true}, nil
}

// classify turns the domain's refusal into the service's typed errors. The domain decided; this
// only finds out which input its decision was about, re-running the domain's own rule for the
// personal number rather than parsing error text.
func (s *CollectionService) classify(err error, cmd StartCollection, co company.Company, now time.Time) error {
	switch {
	case errors.Is(err, collection.ErrCompanyUnavailable):
		return &CompanyUnavailableError{Company: co.ID, Message: co.Message, Err: err}
	case !errors.Is(err, domain.ErrInvalid):
		return fmt.Errorf("start collection: %w", err)
	case strings.TrimSpace(cmd.LoginMethod) == "":
		return &InvalidInputError{Input: InputLoginMethod, Reason: "is required", Err: err}
	case cmd.PersonalNumber != "":
		if _, perr := personnummer.Parse(cmd.PersonalNumber, now); perr != nil {
			return &InvalidInputError{Input: InputPersonalNumber, Reason: personalNumberReason(perr), Err: err}
		}
	}
	return fmt.Errorf("start collection: %w", err)
}

// personalNumberReason is the domain's explanation without the sentinel's suffix; it names the
// rule broken, never the number.
func personalNumberReason(err error) string {
	return strings.TrimSuffix(err.Error(), ": "+domain.ErrInvalid.Error())
}
