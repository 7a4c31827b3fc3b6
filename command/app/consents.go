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
	"github.com/samla/samla/domain/company"
	"github.com/samla/samla/domain/consent"
	"github.com/samla/samla/domain/personnummer"
	"github.com/samla/samla/platform/uuids"
)

// ConsentRepository is the port to the event-sourced consents
// (*repository.Repository[*consent.Consent] satisfies it): the one way to change one.
type ConsentRepository interface {
	Update(ctx context.Context, consentID string, meta repository.Meta, decide func(*consent.Consent) error,
		opts ...repository.UpdateOption) (*consent.Consent, eventstore.AppendResult, error)
}

// UserConsents lists the ids of a client's user's consents, final ones included: the erasure
// revokes each that the event store shows live. The consents read model implements it; a list
// that misses a consent created a moment ago leaves it to the connector worker, which drives no
// consent of an erased subject.
type UserConsents interface {
	UserConsentIDs(ctx context.Context, tenant, userUUID string) ([]string, error)
}

var (
	// ErrConsentNotFound is a consent that does not exist or is another client's (HTTP 404
	// CONSENT_NOT_FOUND): a client must not learn that another client's consent exists.
	ErrConsentNotFound = errors.New("consent not found")
	// ErrConsentOfOtherUser is a session acting on a consent of another user of its client (HTTP
	// 403 FORBIDDEN_FOR_SESSION).
	ErrConsentOfOtherUser = errors.New("the consent is another user's")
)

// FieldCompany names CreateConsent.Company in Create's field errors (an unknown company), as
// POST /collections names it.
const FieldCompany = consent.FieldCompany

// CreateConsent is the command behind POST /consents.
type CreateConsent struct {
	Tenant         string // the authenticated client
	IdempotencyKey string // "" when the client sent none
	UserUUID       string
	Company        string
	LoginMethod    string
	Scope          []consent.Scope // nil: every scope
	// PersonalNumber is the person who must sign, parsed where it entered. Personal data: never
	// logged.
	PersonalNumber personnummer.Number
	// RequestHash identifies the request's content, so that a retry with the same key can be told
	// from another request reusing the key; LegacyRequestHash is the same in the scheme before
	// ("" for none).
	RequestHash       string
	LegacyRequestHash string
	CorrelationID     string
	RequestID         string // becomes the events' causation id
}

// ConsentCreated is the outcome of a create: the first response, also when a retry replays it.
type ConsentCreated struct {
	ConsentID string
	Status    consent.Status
	// Replayed is true when an earlier request with the same Idempotency-Key created it.
	Replayed bool
}

// RevokeConsent is the command behind DELETE /consents/{consentId}.
type RevokeConsent struct {
	Tenant    string
	ConsentID string
	// SessionUser is the user of the session that asks, "" for the client's API key: a session
	// may revoke its own user's consents only (ErrConsentOfOtherUser).
	SessionUser   string
	CorrelationID string
	RequestID     string
}

// consentIdempotencyNamespace is the UUIDv5 namespace of consent ids derived from idempotency
// keys. It is fixed forever, and differs from the collections' and the users' so that one key
// used on several routes names different streams.
var consentIdempotencyNamespace = uuid.MustParse("b3f6e0d2-1c4a-4f8e-9a27-6d5c3e1b0f84")

// ConsentIDForKey is the consent id of a request with an Idempotency-Key: a retry with the same
// key lands on the same stream. The tenant is part of the name, so two clients' keys never meet.
func ConsentIDForKey(tenant, key string) string {
	return uuid.NewSHA1(consentIdempotencyNamespace, []byte(tenant+"\x00"+key)).String()
}

// ConsentService creates and revokes consents.
type ConsentService struct {
	catalog  Catalog
	consents ConsentRepository
	users    UserLookup
	now      func() time.Time
}

// NewConsentService builds the service; now nil means time.Now. users is required: without it
// any well-formed userUuid would be accepted.
func NewConsentService(cat Catalog, consents ConsentRepository, users UserLookup, now func() time.Time) *ConsentService {
	if cat == nil || consents == nil || users == nil {
		panic("app.NewConsentService: the catalog, the consents and the user lookup are required")
	}
	if now == nil {
		now = time.Now
	}
	return &ConsentService{catalog: cat, consents: consents, users: users, now: now}
}

// Create creates a consent, or, for a retry of an earlier request with the same Idempotency-Key
// and content, returns that request's outcome. An unknown company is a *domain.FieldError at
// FieldCompany, other invalid input a *domain.FieldError of consent.Field*; a company without
// consents is consent.ErrNotSupported, a login method it lacks consent.ErrLoginMethodNotSupported;
// a userUuid that is not a live user of the client is ErrUnknownUser; a key reused with another
// body is ErrIdempotencyKeyReused. A refused consent records nothing.
func (s *ConsentService) Create(ctx context.Context, cmd CreateConsent) (ConsentCreated, error) {
	if cmd.Tenant == "" {
		return ConsentCreated{}, fmt.Errorf("create consent without a tenant: %w", domain.ErrInvalid)
	}
	userUUID, ok := uuids.Canonical(cmd.UserUUID)
	if !ok {
		return ConsentCreated{}, fmt.Errorf("create consent: %w", &domain.FieldError{Field: consent.FieldUserUUID, Reason: "must be a UUID"})
	}
	co, err := s.catalog.Get(cmd.Company)
	switch {
	case errors.Is(err, company.ErrUnknownCompany):
		return ConsentCreated{}, fmt.Errorf("create consent: %w", &domain.FieldError{Field: FieldCompany, Reason: "is not a known company"})
	case err != nil:
		return ConsentCreated{}, fmt.Errorf("create consent: look up company: %w", err)
	}

	var id string
	var opts []repository.UpdateOption
	if cmd.IdempotencyKey != "" {
		id = ConsentIDForKey(cmd.Tenant, cmd.IdempotencyKey)
	} else {
		u, err := uuid.NewV7() // time-ordered: streams and read-model rows stay roughly in creation order
		if err != nil {
			return ConsentCreated{}, fmt.Errorf("create consent: new id: %w", err)
		}
		id = u.String()
		opts = append(opts, repository.NewID())
	}
	now := s.now().UTC().Truncate(time.Millisecond)
	req := consent.CreateRequest{ConsentID: id, ClientID: cmd.Tenant, UserUUID: userUUID, Company: co.ForConsent(),
		LoginMethod: cmd.LoginMethod, Scope: cmd.Scope, PersonalNumber: cmd.PersonalNumber, RequestHash: cmd.RequestHash}
	meta := repository.Meta{Tenant: cmd.Tenant, CorrelationID: cmd.CorrelationID, CausationID: cmd.RequestID, Actor: "client:" + cmd.Tenant}
	var replayed *ConsentCreated
	userChecked := false
	_, _, err = s.consents.Update(ctx, id, meta, func(c *consent.Consent) error {
		replayed = nil
		if cmd.IdempotencyKey != "" && c.Exists() {
			// An earlier request with this key, or a concurrent one that won the race to
			// append, created it: answer as it was answered.
			if c.ClientID() != cmd.Tenant || !domain.SameRequest(c.RequestHash(), cmd.RequestHash, cmd.LegacyRequestHash) {
				return ErrIdempotencyKeyReused
			}
			replayed = &ConsentCreated{ConsentID: c.ConsentID(), Status: consent.StatusInitiated, Replayed: true}
			return nil
		}
		// The domain's rules first, then the user, which costs a read: a refused decision
		// records nothing, whichever refuses.
		if err := c.Create(req, now); err != nil {
			return err
		}
		if !userChecked {
			u, err := s.users.Load(ctx, userUUID)
			if err != nil {
				return fmt.Errorf("look up user: %w", err)
			}
			if !u.Live(cmd.Tenant) {
				return ErrUnknownUser
			}
			userChecked = true
		}
		return nil
	}, opts...)
	switch {
	case err != nil:
		return ConsentCreated{}, fmt.Errorf("create consent: %w", err)
	case replayed != nil:
		return *replayed, nil
	}
	return ConsentCreated{ConsentID: id, Status: consent.StatusInitiated}, nil
}

// Revoke revokes the client's consent (reason CLIENT) and returns it, now REVOKED. An unknown
// consent or another client's is ErrConsentNotFound; a session's request for another user's
// consent is ErrConsentOfOtherUser; a final consent (an authorized one past its expiry too) is
// consent.ErrFinal.
func (s *ConsentService) Revoke(ctx context.Context, cmd RevokeConsent) (*consent.Consent, error) {
	if cmd.Tenant == "" {
		return nil, fmt.Errorf("revoke consent without a tenant: %w", domain.ErrInvalid)
	}
	if !uuids.IsCanonical(cmd.ConsentID) {
		return nil, fmt.Errorf("revoke consent: %w", ErrConsentNotFound)
	}
	meta := repository.Meta{Tenant: cmd.Tenant, CorrelationID: cmd.CorrelationID, CausationID: cmd.RequestID, Actor: "client:" + cmd.Tenant}
	if cmd.SessionUser != "" {
		meta.Actor = "user:" + cmd.SessionUser
	}
	now := s.now().UTC().Truncate(time.Millisecond)
	c, _, err := s.consents.Update(ctx, cmd.ConsentID, meta, func(c *consent.Consent) error {
		if !c.Exists() || c.ClientID() != cmd.Tenant {
			return ErrConsentNotFound
		}
		if cmd.SessionUser != "" && c.UserUUID() != cmd.SessionUser {
			return ErrConsentOfOtherUser
		}
		return c.Revoke(consent.RevokedByClient, now)
	})
	if err != nil {
		return nil, fmt.Errorf("revoke consent %s: %w", cmd.ConsentID, err)
	}
	return c, nil
}

// revokeUserConsents revokes every consent of a deleted user that the event store shows live
// (reason USER_DELETED), for the user's erasure: none may be used, or go on being authorized,
// without the person it names. A final one, and one the list names by mistake, records nothing.
func revokeUserConsents(ctx context.Context, list UserConsents, repo ConsentRepository, tenant, userUUID string,
	meta repository.Meta, now time.Time) error {
	ids, err := list.UserConsentIDs(ctx, tenant, userUUID)
	if err != nil {
		return fmt.Errorf("list its consents: %w", err)
	}
	for _, id := range ids {
		_, _, err := repo.Update(ctx, id, meta, func(c *consent.Consent) error {
			if !c.Exists() || c.ClientID() != tenant || c.UserUUID() != userUUID {
				return nil // a read model's mistake: not this user's to revoke
			}
			if c.EffectiveStatus(now).IsFinal() {
				return nil
			}
			return c.Revoke(consent.RevokedUserDeleted, now)
		})
		if err != nil {
			return fmt.Errorf("revoke consent %s: %w", id, err)
		}
	}
	return nil
}
