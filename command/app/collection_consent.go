package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/consent"
	"github.com/samla/samla/platform/uuids"
)

// ConsentLookup is the port to the event-sourced consents that a start checks its consent
// against (*repository.Repository[*consent.Consent] satisfies it). The event store, not a read
// model, answers: a consent is usable the moment its authorization was recorded, and unusable
// the moment its revocation was.
type ConsentLookup interface {
	Load(ctx context.Context, consentID string) (*consent.Consent, error)
}

// ConsentChoice is the consent a start asks for (Psd2AisConsentParameter): the consent with
// ConsentID, or, without one and with ReuseStored, the user's newest usable consent for the
// company. Neither asks for no consent.
type ConsentChoice struct {
	ConsentID   string
	ReuseStored bool
}

// ConsentInvalidError is a start with a consent it may not use (HTTP 422 CONSENT_INVALID with
// Reason); nothing is recorded.
type ConsentInvalidError struct {
	Reason consent.Reason
}

func (e *ConsentInvalidError) Error() string {
	return fmt.Sprintf("the consent cannot be used for this collection (%s)", e.Reason)
}

// Unwrap makes the error a domain.ErrRefused.
func (e *ConsentInvalidError) Unwrap() error { return domain.ErrRefused }

// ErrNoStoredConsent is a start that asks for the user's stored consent when the user has no
// authorized, unexpired consent of the client for the company (HTTP 422 NO_STORED_CONSENT).
var ErrNoStoredConsent = fmt.Errorf("the user has no usable consent for the company: %w", domain.ErrRefused)

// FieldConsentID names ConsentChoice.ConsentID in Start's field errors.
const FieldConsentID = "consentId"

// WithConsents lets the service start collections that use consents: lookup checks a named
// consent, stored lists a user's consents for ReuseStored (newest first; the event store then
// decides which is usable). Without it a start that asks for a consent fails, which is a wiring
// mistake, never a collection that reads without the consent it was given.
func (s *CollectionService) WithConsents(lookup ConsentLookup, stored UserConsents) *CollectionService {
	if lookup == nil || stored == nil {
		panic("app.CollectionService.WithConsents: the consent lookup and the user's consents are required")
	}
	s.consents, s.storedConsents = lookup, stored
	return s
}

// wantsConsent reports whether the start asks for a consent at all.
func (cmd StartCollection) wantsConsent() bool {
	return cmd.Consent != nil && (cmd.Consent.ConsentID != "" || cmd.Consent.ReuseStored)
}

// checkConsentRequest refuses what no consent can make right, before anything is loaded: a
// consent at a company that gives none, and a consent without the user it must belong to.
func checkConsentRequest(cmd StartCollection, companyConsents bool) error {
	if !cmd.wantsConsent() {
		return nil
	}
	if !companyConsents {
		return fmt.Errorf("start collection at %s: %w", cmd.Company, collection.ErrConsentNotSupported)
	}
	if cmd.UserUUID == "" {
		return fmt.Errorf("start collection: %w", &domain.FieldError{Field: FieldUserUUID, Reason: "is required with a consent"})
	}
	if id := cmd.Consent.ConsentID; id != "" {
		if _, ok := uuids.Canonical(id); !ok {
			return fmt.Errorf("start collection: %w", &domain.FieldError{Field: FieldConsentID, Reason: "must be a UUID"})
		}
	}
	return nil
}

// resolveConsent finds the consent a start uses, as the event store shows it now, and checks it
// usable for the client, the user, the company and, when the start names one, the person it
// logs in as (consent.Consent.UsableFor): nil when the start asks for none. A consent signed for
// another person than the one the collection names is OTHER_USER, and never picked for reuse: a
// collection must not put one person's PSD2 data next to another's loans and personal details.
func (s *CollectionService) resolveConsent(ctx context.Context, cmd StartCollection, companyID string, now time.Time) (*collection.UsedConsent, error) {
	if !cmd.wantsConsent() {
		return nil, nil
	}
	if s.consents == nil {
		return nil, errors.New("start collection with a consent: the service has no consents (WithConsents)")
	}
	if cmd.Consent.ConsentID != "" {
		id, _ := uuids.Canonical(cmd.Consent.ConsentID) // checked by checkConsentRequest
		k, err := s.consents.Load(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("look up consent: %w", err)
		}
		if reason, ok := k.UsableFor(cmd.Tenant, cmd.UserUUID, companyID, cmd.PersonalNumber, now); !ok {
			return nil, &ConsentInvalidError{Reason: reason}
		}
		return usedConsent(k), nil
	}
	// The list only names candidates, newest first; each is loaded from the event store, which
	// decides. A consent the list does not show yet was created a moment ago: it cannot have
	// been signed yet.
	ids, err := s.storedConsents.UserConsentIDs(ctx, cmd.Tenant, cmd.UserUUID)
	if err != nil {
		return nil, fmt.Errorf("list the user's consents: %w", err)
	}
	for _, id := range ids {
		k, err := s.consents.Load(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("look up consent: %w", err)
		}
		if _, ok := k.UsableFor(cmd.Tenant, cmd.UserUUID, companyID, cmd.PersonalNumber, now); ok {
			return usedConsent(k), nil
		}
	}
	return nil, ErrNoStoredConsent
}

func usedConsent(k *consent.Consent) *collection.UsedConsent {
	return &collection.UsedConsent{ConsentID: k.ConsentID(), BankConsentID: k.BankConsentID(), Scope: k.Scope()}
}
