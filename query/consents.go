package query

import (
	"context"
	"time"
)

// ConsentView is a PSD2 consent as the consents read model holds it, its personal part (the
// pending EID order's tokens and QR secret) opened. Status is the status the consent's events
// recorded (a consent.Status); an AUTHORIZED consent past ExpiresAt is presented EXPIRED
// whether or not its expiry was recorded yet, which is the presenter's job, at the poll's time.
type ConsentView struct {
	ConsentID   string
	Tenant      string // the client id that owns the consent
	UserUUID    string
	Company     string
	LoginMethod string
	Status      string
	// Scope is the consent's scope, sorted and without duplicates, as the consent recorded it.
	Scope     []string
	CreatedAt time.Time
	// AuthorizedAt and ExpiresAt are zero until the consent is authorized.
	AuthorizedAt time.Time
	ExpiresAt    time.Time
	// Error is why the consent failed, nil unless it did.
	Error *ConsentError
	// EIDOrder is the electronic-ID order the consent's authorization waits on, nil when none
	// is pending (the consent is not AWAITING_AUTHORIZATION, or the order's tokens were erased
	// with the user).
	EIDOrder *ConsentEIDOrder
	// UpdatedAt is when the consent last changed.
	UpdatedAt time.Time
}

// ConsentError is a failed consent's structured error.
type ConsentError struct {
	Code    string // a consent.FailureCode
	Message string
}

// ConsentEIDOrder is the pending EID order of a consent's authorization. Every field is
// personal (whoever holds the tokens can sign in the person's place): never logged.
// QRStartSecret must never be put in a response; each poll computes the animated QR data from it.
type ConsentEIDOrder struct {
	StartedAt      time.Time
	AutoStartToken string
	QRStartToken   string
	QRStartSecret  string
}

// ConsentReader reads the consents read model.
type ConsentReader interface {
	// Get returns the tenant's consent, or an error wrapping ErrNotFound when the tenant has no
	// such consent (another tenant's included).
	Get(ctx context.Context, tenant, consentID string) (ConsentView, error)
}

// ConsentCursor is where a page of a user's consents ends: the list is ordered newest first, by
// CreatedAt and then ConsentID, neither of which ever changes, so the next page starts strictly
// after it whatever was added or changed meanwhile.
type ConsentCursor struct {
	CreatedAt time.Time
	ConsentID string
}

// UserConsentsReader lists a user's consents.
type UserConsentsReader interface {
	// ListByUser returns up to limit of the tenant's consents of userUUID, newest first,
	// starting after the cursor (nil: from the newest), without their personal parts (EIDOrder
	// is nil). It returns nothing for another tenant's user.
	ListByUser(ctx context.Context, tenant, userUUID string, after *ConsentCursor, limit int) ([]ConsentView, error)
}
