// Package consent is the PSD2 account-information consent aggregate: a client's user's
// permission, signed with an electronic ID, for Samla to read the user's accounts and cards at
// one bank, for a limited time. Its lifecycle is INITIATED → AWAITING_AUTHORIZATION →
// AUTHORIZED | FAILED, and REVOKED or EXPIRED after.
package consent

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/personnummer"
)

// StreamPrefix is the event-store category of consent streams ("consent", topic
// samla.consent.events).
const StreamPrefix = "consent-"

// StreamName returns the stream that holds one consent's events.
func StreamName(consentID string) string { return StreamPrefix + consentID }

// Kind tells a repository where consents are stored and how to make an empty one.
var Kind = domain.Kind[*Consent]{StreamPrefix: StreamPrefix, New: func() *Consent { return &Consent{} }}

// Status is the lifecycle state of a consent.
type Status string

const (
	StatusInitiated             Status = "INITIATED"
	StatusAwaitingAuthorization Status = "AWAITING_AUTHORIZATION"
	StatusAuthorized            Status = "AUTHORIZED"
	StatusFailed                Status = "FAILED"
	StatusRevoked               Status = "REVOKED"
	StatusExpired               Status = "EXPIRED"
)

// AllStatuses lists every status in lifecycle order.
func AllStatuses() []Status {
	return []Status{StatusInitiated, StatusAwaitingAuthorization, StatusAuthorized, StatusFailed, StatusRevoked, StatusExpired}
}

// IsFinal reports whether nothing can follow the status. AUTHORIZED is not final: an authorized
// consent can still be revoked, and expires.
func (s Status) IsFinal() bool {
	return s == StatusFailed || s == StatusRevoked || s == StatusExpired
}

// Scope is what a consent lets Samla read at the bank.
type Scope string

const (
	ScopeCheckingAccounts Scope = "CHECKING_ACCOUNTS"
	ScopeSavingsAccounts  Scope = "SAVINGS_ACCOUNTS"
	ScopeCreditCards      Scope = "CREDIT_CARDS"
)

// AllScopes lists every scope value, sorted: the scope of a consent that names none.
func AllScopes() []Scope {
	return []Scope{ScopeCheckingAccounts, ScopeCreditCards, ScopeSavingsAccounts}
}

// NormalizeScope is the scope a consent records for the requested one: sorted and without
// repeats, so that two requests for the same thing record the same scope; all of AllScopes when
// none is requested. An unknown value is a *domain.FieldError at FieldScope.
func NormalizeScope(requested []Scope) ([]Scope, error) {
	if len(requested) == 0 {
		return AllScopes(), nil
	}
	out := make([]Scope, 0, len(requested))
	for _, s := range requested {
		if !slices.Contains(AllScopes(), s) {
			return nil, &domain.FieldError{Field: FieldScope, Reason: "must name only CHECKING_ACCOUNTS, SAVINGS_ACCOUNTS or CREDIT_CARDS"}
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out, nil
}

// FailureCode says why an authorization failed.
type FailureCode string

const (
	FailureAuthenticationCancelled FailureCode = "AUTHENTICATION_CANCELLED"
	FailureAuthenticationTimeout   FailureCode = "AUTHENTICATION_TIMEOUT"
	FailureAuthenticationMismatch  FailureCode = "AUTHENTICATION_MISMATCH"
	FailureAuthenticationConflict  FailureCode = "AUTHENTICATION_CONFLICT"
	FailureThirdPartyError         FailureCode = "THIRD_PARTY_ERROR"
)

// AllFailureCodes lists every failure code.
func AllFailureCodes() []FailureCode {
	return []FailureCode{FailureAuthenticationCancelled, FailureAuthenticationTimeout, FailureAuthenticationMismatch,
		FailureAuthenticationConflict, FailureThirdPartyError}
}

// MessageAuthorizationTimeout is the message of a consent whose EID order passed its deadline.
const MessageAuthorizationTimeout = "The electronic-ID order was not signed in time."

// RevokeReason says who ended a consent.
type RevokeReason string

const (
	// RevokedByClient: the client's DELETE /consents/{consentId}.
	RevokedByClient RevokeReason = "CLIENT"
	// RevokedUserDeleted: the user's deletion revoked every live consent of the user.
	RevokedUserDeleted RevokeReason = "USER_DELETED"
)

// Reason says why a consent cannot be used for a collection (Usable).
type Reason string

const (
	ReasonNotAuthorized Reason = "NOT_AUTHORIZED"
	ReasonExpired       Reason = "EXPIRED"
	ReasonRevoked       Reason = "REVOKED"
	ReasonOtherUser     Reason = "OTHER_USER"
	ReasonOtherCompany  Reason = "OTHER_COMPANY"
)

// Names of CreateRequest's inputs in the field errors of Create and NormalizeScope.
const (
	FieldConsentID      = "consentId"
	FieldClientID       = "clientId"
	FieldUserUUID       = "userUuid"
	FieldCompany        = "company"
	FieldLoginMethod    = "loginMethod"
	FieldPersonalNumber = "personalNumber"
	FieldScope          = "scope"
)

var (
	// ErrNotCreated is a command on a consent that does not exist.
	ErrNotCreated = fmt.Errorf("consent does not exist: %w", domain.ErrConflict)
	// ErrFinal is a command that a final consent refuses (HTTP 409 CONSENT_FINAL).
	ErrFinal = fmt.Errorf("consent is final: %w", domain.ErrConflict)
	// ErrNotSupported is a consent at a company that gives none (HTTP 422 CONSENT_NOT_SUPPORTED).
	ErrNotSupported = fmt.Errorf("the company gives no consents: %w", domain.ErrRefused)
	// ErrLoginMethodNotSupported is a consent with a login method the company does not offer
	// (HTTP 422).
	ErrLoginMethodNotSupported = fmt.Errorf("the company does not offer the login method: %w", domain.ErrRefused)
	// ErrAlreadyClaimed means another live worker runs the consent's bank session.
	ErrAlreadyClaimed = fmt.Errorf("already claimed: %w", domain.ErrConflict)
	// ErrIllegalTransition is a command the consent's current status does not allow.
	ErrIllegalTransition = fmt.Errorf("illegal consent transition: %w", domain.ErrConflict)
)

// Company is what the domain needs to know about a company when a consent is created
// (company.Company.ForConsent).
type Company struct {
	ID           string
	Consents     bool
	LoginMethods []string
}

// CreateRequest is the input of Create.
type CreateRequest struct {
	ConsentID   string
	ClientID    string
	UserUUID    string
	Company     Company
	LoginMethod string
	// Scope is the requested scope (NormalizeScope decides what is recorded).
	Scope []Scope
	// PersonalNumber is the person who must sign, parsed where it entered. Personal data.
	PersonalNumber personnummer.Number
	RequestHash    string
}

// AuthorizationOrder is the electronic-ID order the bank opened for a consent's authorization.
type AuthorizationOrder struct {
	BankConsentID string
	// StartedAt is when the order was opened (the QR data's time base); Deadline when it times
	// out unsigned.
	StartedAt      time.Time
	Deadline       time.Time
	AutoStartToken string // personal
	QRStartToken   string // personal
	QRStartSecret  string // personal
}

// ConsentError is the error of a FAILED consent.
type ConsentError struct {
	Code    FailureCode
	Message string
}

// root lets Consent embed domain.Root under an unexported name: its methods are promoted and
// Consent is a domain.Aggregate, but no other package can reach (or overwrite) the field.
type root = domain.Root

// Consent is the aggregate. Its commands decide, then record their events, which Apply folds.
type Consent struct {
	root
	id             string
	clientID       string
	userUUID       string
	company        string
	loginMethod    string
	scope          []Scope
	status         Status
	createdAt      time.Time
	updatedAt      time.Time
	claimedBy      string
	personalNumber *string // nil once erased
	requestHash    string  // "" once erased
	order          *AuthorizationOrder
	authorizedAt   time.Time
	expiresAt      time.Time
	failure        *ConsentError
	endedAt        time.Time
	revokeReason   RevokeReason
}

func (c *Consent) ConsentID() string    { return c.id }
func (c *Consent) ClientID() string     { return c.clientID }
func (c *Consent) UserUUID() string     { return c.userUUID }
func (c *Consent) Company() string      { return c.company }
func (c *Consent) LoginMethod() string  { return c.loginMethod }
func (c *Consent) Scope() []Scope       { return slices.Clone(c.scope) }
func (c *Consent) Status() Status       { return c.status }
func (c *Consent) CreatedAt() time.Time { return c.createdAt }

// UpdatedAt is the time of the last event.
func (c *Consent) UpdatedAt() time.Time { return c.updatedAt }
func (c *Consent) ClaimedBy() string    { return c.claimedBy }

// AuthorizedAt is when the person signed, zero before.
func (c *Consent) AuthorizedAt() time.Time { return c.authorizedAt }

// ExpiresAt is when an authorized consent expires, zero before it is authorized.
func (c *Consent) ExpiresAt() time.Time { return c.expiresAt }

// EndedAt is when the consent failed, was revoked or expired, zero while it is not final.
func (c *Consent) EndedAt() time.Time { return c.endedAt }

// RevokeReason is who revoked the consent, "" unless it was revoked.
func (c *Consent) RevokeReason() RevokeReason { return c.revokeReason }

// Error is the failure of a FAILED consent, nil otherwise.
func (c *Consent) Error() *ConsentError {
	if c.failure == nil {
		return nil
	}
	e := *c.failure
	return &e
}

// BankConsentID is the bank's id of the consent, "" before the authorization started.
func (c *Consent) BankConsentID() string {
	if c.order == nil {
		return ""
	}
	return c.order.BankConsentID
}

// AuthorizationDeadline is when the open EID order times out, zero when none was opened.
func (c *Consent) AuthorizationDeadline() time.Time {
	if c.order == nil {
		return time.Time{}
	}
	return c.order.Deadline
}

// AuthorizationOrder is the EID order the bank opened, nil before; its tokens are "" once erased.
func (c *Consent) AuthorizationOrder() *AuthorizationOrder {
	if c.order == nil {
		return nil
	}
	o := *c.order
	return &o
}

// PersonalNumber is the person who must sign, nil once erased. Personal data: never logged.
func (c *Consent) PersonalNumber() *string {
	if c.personalNumber == nil {
		return nil
	}
	n := *c.personalNumber
	return &n
}

// RequestHash identifies the request that created the consent, "" once erased.
func (c *Consent) RequestHash() string { return c.requestHash }

// Exists tells whether the consent was created.
func (c *Consent) Exists() bool { return c.Version() > 0 }

// DataSubject is whose personal data the consent's events carry: its user's, so that erasing the
// user erases them too.
func (c *Consent) DataSubject() string { return domain.UserSubject(c.userUUID) }

// EffectiveStatus is the status as of now: an AUTHORIZED consent past its expiry reads EXPIRED
// even before consent.expired is recorded, so that no reader ever treats it as usable.
func (c *Consent) EffectiveStatus(now time.Time) Status {
	if c.status == StatusAuthorized && !now.Before(c.expiresAt) {
		return StatusExpired
	}
	return c.status
}

// Usable tells whether a collection of clientID for userUUID at company may read PSD2 data under
// the consent now, and if not, why. Another client's consent, or none, is NOT_AUTHORIZED: a
// client must never learn that another client's consent exists. It does not look at the person:
// a collection that names one asks UsableFor.
func (c *Consent) Usable(clientID, userUUID, company string, now time.Time) (Reason, bool) {
	return c.UsableFor(clientID, userUUID, company, personnummer.Number{}, now)
}

// UsableFor is Usable for a collection that logs in as person (zero when the collection names
// nobody, e.g. the user identifies in the EID app; the connector's person check then guards the
// login). A consent signed for another person is OTHER_USER: the collection would otherwise put
// one person's PSD2 data next to another's. An erased consent (no personal number) is usable
// for no collection that names a person.
func (c *Consent) UsableFor(clientID, userUUID, company string, person personnummer.Number, now time.Time) (Reason, bool) {
	if !c.Exists() || c.clientID != clientID {
		return ReasonNotAuthorized, false
	}
	switch c.EffectiveStatus(now) {
	case StatusRevoked:
		return ReasonRevoked, false
	case StatusExpired:
		return ReasonExpired, false
	case StatusAuthorized:
	default:
		return ReasonNotAuthorized, false
	}
	if c.userUUID != userUUID {
		return ReasonOtherUser, false
	}
	// Both sides are the canonical 12 digits (personnummer.Number.String, as Create recorded it).
	if !person.IsZero() && (c.personalNumber == nil || *c.personalNumber != person.String()) {
		return ReasonOtherUser, false
	}
	if c.company != company {
		return ReasonOtherCompany, false
	}
	return "", true
}

// Apply folds one event; domain.Record and domain.Rehydrate call it.
func (c *Consent) Apply(e domain.Event) error {
	switch ev := e.(type) {
	case Created:
		c.id, c.clientID, c.userUUID, c.company = ev.ConsentID, ev.ClientID, ev.UserUUID, ev.Company
		c.loginMethod, c.scope, c.status = ev.LoginMethod, slices.Clone(ev.Scope), StatusInitiated
		c.createdAt, c.updatedAt = ev.CreatedAt, ev.CreatedAt
		c.personalNumber, c.requestHash = nil, ""
		if p := ev.Personal; p != nil {
			n := p.PersonalNumber
			c.personalNumber, c.requestHash = &n, p.RequestHash
		}
	case Claimed:
		c.claimedBy, c.updatedAt = ev.WorkerID, ev.ClaimedAt
	case AuthorizationStarted:
		o := &AuthorizationOrder{BankConsentID: ev.BankConsentID, StartedAt: ev.At, Deadline: ev.Deadline}
		if p := ev.Personal; p != nil {
			o.AutoStartToken, o.QRStartToken, o.QRStartSecret = p.AutoStartToken, p.QRStartToken, p.QRStartSecret
		}
		c.order, c.status, c.updatedAt = o, StatusAwaitingAuthorization, ev.At
	case Authorized:
		c.status, c.authorizedAt, c.expiresAt, c.updatedAt = StatusAuthorized, ev.AuthorizedAt, ev.ExpiresAt, ev.AuthorizedAt
	case Failed:
		c.status, c.failure, c.endedAt, c.updatedAt = StatusFailed, &ConsentError{Code: ev.Code, Message: ev.Message}, ev.At, ev.At
	case Revoked:
		c.status, c.revokeReason, c.endedAt, c.updatedAt = StatusRevoked, ev.Reason, ev.At, ev.At
	case Expired:
		c.status, c.endedAt, c.updatedAt = StatusExpired, ev.At, ev.At
	default:
		return fmt.Errorf("consent cannot apply event %s", e.EventType())
	}
	return nil
}

// Create decides a new consent. Invalid input is a *domain.FieldError (Field* constants); a
// company that gives no consents is ErrNotSupported, a login method it does not offer
// ErrLoginMethodNotSupported; a consent that exists already is domain.ErrConflict.
func (c *Consent) Create(req CreateRequest, now time.Time) error {
	if c.Exists() {
		return fmt.Errorf("consent %s already exists: %w", c.id, domain.ErrConflict)
	}
	switch {
	case req.ConsentID == "":
		return &domain.FieldError{Field: FieldConsentID, Reason: "is required"}
	case req.ClientID == "":
		return &domain.FieldError{Field: FieldClientID, Reason: "is required"}
	case req.UserUUID == "":
		return &domain.FieldError{Field: FieldUserUUID, Reason: "is required"}
	case req.Company.ID == "":
		return &domain.FieldError{Field: FieldCompany, Reason: "is required"}
	case strings.TrimSpace(req.LoginMethod) == "":
		return &domain.FieldError{Field: FieldLoginMethod, Reason: "is required"}
	case req.PersonalNumber.IsZero():
		return &domain.FieldError{Field: FieldPersonalNumber, Reason: "is required"}
	}
	scope, err := NormalizeScope(req.Scope)
	if err != nil {
		return err
	}
	if !req.Company.Consents {
		return fmt.Errorf("consent at %s: %w", req.Company.ID, ErrNotSupported)
	}
	if !slices.Contains(req.Company.LoginMethods, req.LoginMethod) {
		return fmt.Errorf("consent at %s with %s: %w", req.Company.ID, req.LoginMethod, ErrLoginMethodNotSupported)
	}
	return domain.Record(c, Created{ConsentID: req.ConsentID, ClientID: req.ClientID, UserUUID: req.UserUUID,
		Company: req.Company.ID, LoginMethod: req.LoginMethod, Scope: scope, CreatedAt: now.UTC(),
		Personal: &CreatedPerson{PersonalNumber: req.PersonalNumber.String(), RequestHash: req.RequestHash}})
}

// Claim gives the consent's bank session to one worker, as collection.Claim does: another
// worker's claim blocks it until that worker has recorded nothing for staleAfter (it died); the
// same worker id may claim again, which is how a restarted worker resumes its own sessions. An
// AUTHORIZED consent may be claimed: its expiry is the worker's to record.
func (c *Consent) Claim(workerID string, now time.Time, staleAfter time.Duration) error {
	if !c.Exists() {
		return fmt.Errorf("claim: %w", ErrNotCreated)
	}
	if c.status.IsFinal() {
		return fmt.Errorf("claim of consent %s (%s): %w", c.id, c.status, ErrFinal)
	}
	if workerID == "" {
		return &domain.FieldError{Field: "workerId", Reason: "is required"}
	}
	if c.claimedBy != "" && c.claimedBy != workerID && now.Sub(c.updatedAt) < staleAfter {
		return fmt.Errorf("consent %s is claimed by %s: %w", c.id, c.claimedBy, ErrAlreadyClaimed)
	}
	return domain.Record(c, Claimed{WorkerID: workerID, ClaimedAt: now.UTC()})
}

// StartAuthorization records the EID order the bank opened: INITIATED → AWAITING_AUTHORIZATION.
// An awaiting consent may get a new order (the worker opened another after losing the first);
// the same order again records nothing, so that a worker's retry is harmless.
func (c *Consent) StartAuthorization(order AuthorizationOrder, now time.Time) error {
	if !c.Exists() {
		return fmt.Errorf("start authorization: %w", ErrNotCreated)
	}
	if c.status != StatusInitiated && c.status != StatusAwaitingAuthorization {
		return fmt.Errorf("start authorization of consent %s in %s: %w", c.id, c.status, ErrIllegalTransition)
	}
	if order.BankConsentID == "" {
		return &domain.FieldError{Field: "bankConsentId", Reason: "is required"}
	}
	if order.StartedAt.IsZero() {
		order.StartedAt = now
	}
	if !order.Deadline.After(order.StartedAt) {
		return &domain.FieldError{Field: "deadline", Reason: "must be after the order's start"}
	}
	order.StartedAt, order.Deadline = order.StartedAt.UTC(), order.Deadline.UTC()
	if c.order != nil && *c.order == order {
		return nil
	}
	ev := AuthorizationStarted{At: order.StartedAt, Deadline: order.Deadline, BankConsentID: order.BankConsentID}
	if p := (AuthorizationPersonal{AutoStartToken: order.AutoStartToken, QRStartToken: order.QRStartToken,
		QRStartSecret: order.QRStartSecret}); p != (AuthorizationPersonal{}) {
		ev.Personal = &p
	}
	return domain.Record(c, ev)
}

// Authorize records the person's signature: AWAITING_AUTHORIZATION → AUTHORIZED, expiring
// validity after now. An authorized consent records nothing again.
func (c *Consent) Authorize(now time.Time, validity time.Duration) error {
	if !c.Exists() {
		return fmt.Errorf("authorize: %w", ErrNotCreated)
	}
	if c.status == StatusAuthorized {
		return nil
	}
	if c.status != StatusAwaitingAuthorization {
		return fmt.Errorf("authorize consent %s in %s: %w", c.id, c.status, ErrIllegalTransition)
	}
	if validity <= 0 {
		return &domain.FieldError{Field: "validity", Reason: "must be positive"}
	}
	at := now.UTC()
	return domain.Record(c, Authorized{AuthorizedAt: at, ExpiresAt: at.Add(validity)})
}

// Fail records that the authorization failed for good. Only a consent not yet authorized can
// fail; a failed one records nothing again (its first failure stands).
func (c *Consent) Fail(code FailureCode, message string, now time.Time) error {
	if !c.Exists() {
		return fmt.Errorf("fail: %w", ErrNotCreated)
	}
	if !slices.Contains(AllFailureCodes(), code) {
		return &domain.FieldError{Field: "code", Reason: "is not a consent failure code"}
	}
	if c.status == StatusFailed {
		return nil
	}
	if c.status != StatusInitiated && c.status != StatusAwaitingAuthorization {
		return fmt.Errorf("fail consent %s in %s: %w", c.id, c.status, ErrIllegalTransition)
	}
	return domain.Record(c, Failed{At: now.UTC(), Code: code, Message: message})
}

// TimeOutAuthorization fails an awaiting consent with AUTHENTICATION_TIMEOUT once its EID order's
// deadline passed, and records nothing otherwise: the deadline is in the consent's events, so
// whoever looks after it passed (a restarted worker too) ends it.
func (c *Consent) TimeOutAuthorization(now time.Time) error {
	if !c.Exists() || c.status != StatusAwaitingAuthorization || c.order == nil || now.Before(c.order.Deadline) {
		return nil
	}
	return c.Fail(FailureAuthenticationTimeout, MessageAuthorizationTimeout, now)
}

// Revoke ends a consent that is not final: REVOKED. A final consent, and an authorized one past
// its expiry (which reads EXPIRED), is ErrFinal.
func (c *Consent) Revoke(reason RevokeReason, now time.Time) error {
	if !c.Exists() {
		return fmt.Errorf("revoke: %w", ErrNotCreated)
	}
	if reason != RevokedByClient && reason != RevokedUserDeleted {
		return &domain.FieldError{Field: "reason", Reason: "must be CLIENT or USER_DELETED"}
	}
	if st := c.EffectiveStatus(now); st.IsFinal() {
		return fmt.Errorf("revoke consent %s in %s: %w", c.id, st, ErrFinal)
	}
	return domain.Record(c, Revoked{At: now.UTC(), Reason: reason})
}

// Expire records the expiry of an AUTHORIZED consent at or after its expiresAt. Any other
// consent, and one not due yet, records nothing: a timer that fires early or late, or after the
// consent was revoked, is harmless.
func (c *Consent) Expire(now time.Time) error {
	if !c.Exists() {
		return fmt.Errorf("expire: %w", ErrNotCreated)
	}
	if c.status != StatusAuthorized || now.Before(c.expiresAt) {
		return nil
	}
	return domain.Record(c, Expired{At: now.UTC()})
}
