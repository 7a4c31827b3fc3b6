// Package app holds the write side's application services: each gives the repository a decide
// function, which the repository runs on the loaded aggregate before it appends what the
// aggregate recorded with optimistic concurrency (repository.Repository.Update). Services speak
// in domain terms and typed errors; HTTP lives in the handlers.
package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/company"
	"github.com/samla/samla/domain/personnummer"
	"github.com/samla/samla/domain/user"
	"github.com/samla/samla/platform/uuids"
)

// Catalog is the port to the company catalog (*company.Catalog, in domain/company, satisfies
// it). Get returns an error wrapping company.ErrUnknownCompany for an id it does not know.
type Catalog interface {
	Get(id string) (company.Company, error)
}

// CollectionRepository is the port to the event-sourced collections
// (*repository.Repository[*collection.Collection] satisfies it): the one way to change one.
type CollectionRepository interface {
	Update(ctx context.Context, collectionID string, meta repository.Meta, decide func(*collection.Collection) error,
		opts ...repository.UpdateOption) (*collection.Collection, eventstore.AppendResult, error)
}

// UserLookup is the port to the event-sourced users that a start checks its userUuid against
// (*repository.Repository[*user.User], or UserRepository, satisfies it). The event store, not a
// read model, answers: a user is usable the moment its creation was acknowledged.
type UserLookup interface {
	Load(ctx context.Context, userUUID string) (*user.User, error)
}

// ErrUnknownUser is a start for a userUuid that is not a live user of the client: unknown,
// another client's, or deleted (HTTP 422 UNKNOWN_USER). The three are one error, so that a client
// cannot tell another client's user from none.
var ErrUnknownUser = fmt.Errorf("userUuid is not a live user of this client: %w", domain.ErrRefused)

// StartCollection is the command to start a collection, already translated from whichever API
// version the client spoke.
type StartCollection struct {
	Tenant         string // the authenticated client
	APIVersion     string
	IdempotencyKey string // "" when the client sent none
	Company        string
	LoginMethod    string
	UserUUID       string
	// PersonalNumber was parsed where it entered (the HTTP decoder); zero when the request named
	// nobody. Personal data: never logged.
	PersonalNumber   personnummer.Number
	AccountOwnerName string // personal data: never logged
	// RequestHash identifies the request's content, so that a retry with the same key can be told
	// from a different request reusing the key. LegacyRequestHash is the same in the scheme
	// before ("" for none): a collection an older build started is recognised by it.
	RequestHash       string
	LegacyRequestHash string
	CorrelationID     string
	// RequestID becomes the events' causation id: the HTTP request is the command that caused them.
	RequestID string
	// PDF is the document of a PDF_UPLOAD request, nil for other login methods. Its content is
	// personal data: never logged.
	PDF *PDFUpload
	// Consent is the PSD2 consent the request asks the collection to read under, nil for none
	// (collection_consent.go).
	Consent *ConsentChoice
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

// FieldUserUUID names StartCollection.UserUUID in Start's field errors. Start's other field
// errors name collection.FieldCompany, collection.FieldLoginMethod and collection.FieldPDF: a
// handler maps each to the place in its own request shape that carried it.
const FieldUserUUID = "userUuid"

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
	users   UserLookup
	now     func() time.Time
	// consents and storedConsents check the consent a start asks for (WithConsents).
	consents       ConsentLookup
	storedConsents UserConsents
}

// NewCollectionService builds the service; now nil means time.Now. users is required: without it
// any well-formed userUuid would be accepted.
func NewCollectionService(cat Catalog, repo CollectionRepository, users UserLookup, now func() time.Time) *CollectionService {
	if users == nil {
		panic("app.NewCollectionService: the user lookup is required")
	}
	if now == nil {
		now = time.Now
	}
	return &CollectionService{catalog: cat, repo: repo, users: users, now: now}
}

// Start starts a collection, or, for a retry of an earlier request with the same Idempotency-Key
// and content, returns that request's outcome. Invalid input is a *domain.FieldError naming the
// StartCollection member (collection.Field*, FieldUserUUID, FieldConsentID); a userUuid that is
// not a live user of the client is ErrUnknownUser; a consent at a company without consents is
// collection.ErrConsentNotSupported, one the collection may not use a *ConsentInvalidError, and
// no stored one to reuse ErrNoStoredConsent. Nothing is recorded then.
func (s *CollectionService) Start(ctx context.Context, cmd StartCollection) (Created, error) {
	if cmd.Tenant == "" {
		return Created{}, fmt.Errorf("start collection without a tenant: %w", domain.ErrInvalid)
	}
	if cmd.UserUUID != "" {
		id, ok := uuids.Canonical(cmd.UserUUID)
		if !ok {
			return Created{}, fmt.Errorf("start collection: %w", &domain.FieldError{Field: FieldUserUUID, Reason: "must be a UUID"})
		}
		cmd.UserUUID = id // one spelling per user, whatever case the client sent
	}
	co, err := s.catalog.Get(cmd.Company)
	switch {
	case errors.Is(err, company.ErrUnknownCompany):
		return Created{}, fmt.Errorf("start collection: %w", &domain.FieldError{Field: collection.FieldCompany, Reason: "is not a known company"})
	case err != nil:
		return Created{}, fmt.Errorf("start collection: look up company: %w", err)
	}
	if err := checkConsentRequest(cmd, co.Consents); err != nil {
		return Created{}, err
	}

	var id string
	var opts []repository.UpdateOption
	if cmd.IdempotencyKey != "" {
		id = CollectionIDForKey(cmd.Tenant, cmd.IdempotencyKey)
	} else {
		u, err := uuid.NewV7() // time-ordered: streams and read-model rows stay roughly in creation order
		if err != nil {
			return Created{}, fmt.Errorf("start collection: new id: %w", err)
		}
		id = u.String()
		opts = append(opts, repository.NewID()) // a fresh id has no stream: nothing to load
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
	req := collection.StartRequest{
		CollectionID: id, ClientID: cmd.Tenant, Company: co.ForCollection(), LoginMethod: cmd.LoginMethod,
		APIVersion: cmd.APIVersion, UserUUID: cmd.UserUUID, PersonalNumber: cmd.PersonalNumber,
		AccountOwnerName: cmd.AccountOwnerName, RequestHash: cmd.RequestHash, PDF: pdf,
	}
	meta := repository.Meta{Tenant: cmd.Tenant, CorrelationID: cmd.CorrelationID, CausationID: cmd.RequestID, Actor: "client:" + cmd.Tenant}
	var replayed *Created
	userChecked, consentChecked := false, false
	var used *collection.UsedConsent
	_, _, err = s.repo.Update(ctx, id, meta, func(c *collection.Collection) error {
		replayed = nil
		if cmd.IdempotencyKey != "" && c.Exists() {
			// An earlier request with this key, or a concurrent one that won the race to
			// append (this round then follows the conflict), created it: answer as it was
			// answered.
			first, err := replay(c, cmd)
			if err != nil {
				return err
			}
			replayed = &first
			return nil
		}
		// The user is checked only for a collection about to start, so that a retry is
		// answered as it was even after its user was deleted; once is enough for all rounds.
		if cmd.UserUUID != "" && !userChecked {
			u, err := s.users.Load(ctx, cmd.UserUUID)
			if err != nil {
				return fmt.Errorf("look up user: %w", err)
			}
			if !u.Live(cmd.Tenant) {
				return ErrUnknownUser
			}
			userChecked = true
		}
		// The consent is checked after the user, as the event store shows it now; a retry is
		// answered as it was, even after its consent was revoked.
		if !consentChecked {
			u, err := s.resolveConsent(ctx, cmd, co.ID, now)
			if err != nil {
				return err
			}
			used, consentChecked = u, true
		}
		r := req
		r.Consent = used
		return c.Start(r, now)
	}, opts...)
	switch {
	case errors.Is(err, collection.ErrCompanyUnavailable):
		return Created{}, &CompanyUnavailableError{Company: co.ID, Message: co.Message, Err: err}
	case err != nil:
		return Created{}, fmt.Errorf("start collection: %w", err)
	case replayed != nil:
		return *replayed, nil
	}
	return Created{CollectionID: id, Company: co.ID, LoginMethod: cmd.LoginMethod,
		Status: collection.StatusRunning, CreatedAt: now}, nil
}

// replay answers a request whose Idempotency-Key already created a collection. The request it
// is compared with is known by its fingerprint, kept with the person's data: once that is
// erased, no request is the one that started the collection, and every retry is a key reused,
// whatever it holds, so that none tells whether a guessed personal number was the one given.
func replay(existing *collection.Collection, cmd StartCollection) (Created, error) {
	if existing.ClientID() != cmd.Tenant || !domain.SameRequest(existing.RequestHash(), cmd.RequestHash, cmd.LegacyRequestHash) {
		return Created{}, ErrIdempotencyKeyReused
	}
	return Created{CollectionID: existing.ID(), Company: existing.Company(), LoginMethod: existing.LoginMethod(),
		Status: collection.StatusRunning, CreatedAt: existing.StartedAt().UTC(), Replayed: true}, nil
}
