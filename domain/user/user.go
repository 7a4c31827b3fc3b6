// Package user is the user aggregate: one of a client's own end users, known to Samla by the
// client's identifier for it (externalId) and by a user UUID of Samla's. The externalId is unique
// per client; that rule is kept by a second, tiny aggregate, the externalId's Reservation
// (reservation.go), because an aggregate can only guard its own stream and the uniqueness spans
// every user of a client.
package user

import (
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/samla/samla/domain"
)

// Stable event type names. They are stored with every event and must never change; a new shape
// gets a new schema version under eventschema, not a new name.
const (
	EventCreated = "user.created"
	EventDeleted = "user.deleted"
)

// StreamPrefix is the event-store category of user streams.
const StreamPrefix = "user-"

// StreamName returns the stream that holds one user's events.
func StreamName(userUUID string) string { return StreamPrefix + userUUID }

// Kind tells a repository where users are stored and how to make an empty one.
var Kind = domain.Kind[*User]{StreamPrefix: StreamPrefix, New: func() *User { return &User{} }}

// Names of CreateRequest's inputs in the field errors of Create.
const (
	FieldUserUUID   = "userUuid"
	FieldClientID   = "clientId"
	FieldExternalID = "externalId"
)

// MaxExternalIDLength bounds an externalId, in characters (runes).
const MaxExternalIDLength = 256

// ErrNotCreated is a command on a user that does not exist.
var ErrNotCreated = fmt.Errorf("user does not exist: %w", domain.ErrConflict)

// Created records a new user. The externalId is personal data (it names a person in the client's
// own system), so it sits only in Personal, to be encrypted per data subject and erased
// (crypto-shredding) without touching the rest. Personal is nil once it was erased.
type Created struct {
	UserUUID  string         `json:"userUuid"`
	ClientID  string         `json:"clientId"`
	CreatedAt time.Time      `json:"createdAt"`
	Personal  *CreatedPerson `json:"personal,omitempty"`
}

// CreatedPerson is the personal part of Created.
type CreatedPerson struct {
	ExternalID string `json:"externalId"`
	// RequestHash identifies the request that created the user, so that a retry with the same
	// Idempotency-Key can be told from a different request reusing the key. It is personal data
	// (schema v2): the request's only content is the externalId, which the hash would confirm to
	// whoever guesses it. Once erased, no retry is recognised.
	RequestHash string `json:"requestHash,omitempty"`
	// HolderSubject is the data subject of the user's hold on its externalId's reservation
	// (domain.HolderSubject), which the user's erasure destroys with its own; "" for a user
	// created before holds had subjects of their own.
	HolderSubject string `json:"holderSubject,omitempty"`
}

// Deleted records that the client deleted (anonymised) the user. The user's history stays; its
// personal data is erased by destroying its data subject's key.
type Deleted struct {
	DeletedAt time.Time `json:"deletedAt"`
}

func (Created) EventType() string { return EventCreated }
func (Deleted) EventType() string { return EventDeleted }

// root lets User embed domain.Root under an unexported name: its methods are promoted and User
// is a domain.Aggregate, but no other package can reach (or overwrite) the field.
type root = domain.Root

// User is the aggregate. Its commands decide, then record their events, which Apply folds.
type User struct {
	root
	id            string
	clientID      string
	requestHash   string // "" once the personal part was erased
	externalID    string // "" once the personal part was erased
	holderSubject string // "" once the personal part was erased
	createdAt     time.Time
	deletedAt     time.Time // zero while the user is live
}

// CreateRequest is what Create needs: ids decided by the caller, and the client's identifier.
type CreateRequest struct {
	UserUUID    string
	ClientID    string
	ExternalID  string // personal data: never logged
	RequestHash string
	// HolderSubject is the data subject of the user's hold on its externalId's reservation.
	HolderSubject string
}

func (u *User) ID() string       { return u.id }
func (u *User) ClientID() string { return u.clientID }

// RequestHash identifies the request that created the user, "" when the event store no longer
// holds it readable (erased).
func (u *User) RequestHash() string  { return u.requestHash }
func (u *User) CreatedAt() time.Time { return u.createdAt }

// ExternalID is the client's identifier of the user, "" when the event store no longer holds it
// readable (erased). Personal data: never logged.
func (u *User) ExternalID() string { return u.externalID }

// HolderSubject is the data subject of the user's hold on its externalId's reservation, which
// its erasure destroys; "" when the event store no longer holds it readable, or for a user
// created before holds had subjects of their own.
func (u *User) HolderSubject() string { return u.holderSubject }

// DeletedAt is when the user was deleted, zero while it is live.
func (u *User) DeletedAt() time.Time { return u.deletedAt }

// Exists tells whether the user was created.
func (u *User) Exists() bool { return u.Version() > 0 }

// Deleted tells whether the user was deleted.
func (u *User) Deleted() bool { return !u.deletedAt.IsZero() }

// Live tells whether the user exists, belongs to clientID and is not deleted: the only users a
// client may start a collection for.
func (u *User) Live(clientID string) bool {
	return u.Exists() && u.clientID == clientID && !u.Deleted()
}

// DataSubject is whose personal data the user's events carry: the user's own. The same subject
// covers the personal data of the user's collections, so that erasing the user erases them too.
func (u *User) DataSubject() string { return domain.UserSubject(u.id) }

// Apply folds one event; domain.Record and domain.Rehydrate call it.
func (u *User) Apply(e domain.Event) error {
	switch ev := e.(type) {
	case Created:
		u.id, u.clientID, u.createdAt = ev.UserUUID, ev.ClientID, ev.CreatedAt
		u.externalID, u.requestHash, u.holderSubject = "", "", ""
		if p := ev.Personal; p != nil {
			u.externalID, u.requestHash, u.holderSubject = p.ExternalID, p.RequestHash, p.HolderSubject
		}
	case Deleted:
		u.deletedAt = ev.DeletedAt
	default:
		return fmt.Errorf("user cannot apply event %s", e.EventType())
	}
	return nil
}

// Create decides a new user. Invalid input is a *domain.FieldError (FieldUserUUID, FieldClientID,
// FieldExternalID); a user that exists already is domain.ErrConflict.
func (u *User) Create(req CreateRequest, now time.Time) error {
	if u.Exists() {
		return fmt.Errorf("user %s already exists: %w", u.id, domain.ErrConflict)
	}
	if req.UserUUID == "" {
		return &domain.FieldError{Field: FieldUserUUID, Reason: "is required"}
	}
	if req.ClientID == "" {
		return &domain.FieldError{Field: FieldClientID, Reason: "is required"}
	}
	if err := CheckExternalID(req.ExternalID); err != nil {
		return err
	}
	return domain.Record(u, Created{UserUUID: req.UserUUID, ClientID: req.ClientID, CreatedAt: now.UTC(),
		Personal: &CreatedPerson{ExternalID: req.ExternalID, RequestHash: req.RequestHash, HolderSubject: req.HolderSubject}})
}

// Delete records the user's deletion. Deleting a deleted user records nothing: the client's
// retry of a DELETE is answered like the first.
func (u *User) Delete(now time.Time) error {
	if !u.Exists() {
		return ErrNotCreated
	}
	if u.Deleted() {
		return nil
	}
	return domain.Record(u, Deleted{DeletedAt: now.UTC()})
}

// reasonNotPrintable is the reason of an externalId with a character that is not printable.
const reasonNotPrintable = "must be printable characters (UTF-8, no control or format characters)"

// CheckExternalID is the rule of an externalId: 1 to MaxExternalIDLength printable characters,
// kept exactly as the client sent them (no trimming: it is the client's key, compared as it is).
// A violation is a *domain.FieldError at FieldExternalID, which never quotes the value.
func CheckExternalID(externalID string) error {
	n := utf8.RuneCountInString(externalID)
	if n == 0 || n > MaxExternalIDLength {
		return &domain.FieldError{Field: FieldExternalID, Reason: fmt.Sprintf("must have 1 to %d characters", MaxExternalIDLength)}
	}
	for _, r := range externalID {
		// The JSON decoder turns bytes that are not UTF-8, and lone surrogate escapes, into
		// U+FFFD: an externalId holding one was not text.
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return &domain.FieldError{Field: FieldExternalID, Reason: reasonNotPrintable}
		}
	}
	return nil
}
