package user

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/samla/samla/domain"
)

// Stable event type names of the externalId reservations.
const (
	EventExternalIDReserved = "externalid.reserved"
	EventExternalIDReleased = "externalid.released"
)

// ReservationStreamPrefix is the event-store category of the reservations. Its streams are named
// by ExternalIDKey, never by the externalId, which is personal data and would otherwise sit in
// plain text in every stream name, Kafka key and log line, beyond the reach of crypto-shredding.
const ReservationStreamPrefix = "externalid-"

// ReservationStreamName returns the stream of the reservation with this key (ExternalIDKey).
func ReservationStreamName(key string) string { return ReservationStreamPrefix + key }

// ReservationKind tells a repository where reservations are stored and how to make an empty one.
var ReservationKind = domain.Kind[*Reservation]{StreamPrefix: ReservationStreamPrefix,
	New: func() *Reservation { return &Reservation{} }}

// externalIDKeyDomain separates the keyed hashes of externalIds from every other use of the same
// server secret (the requests' idempotency fingerprints start with an API version).
const externalIDKeyDomain = "samla/user-external-id/v1"

// ExternalIDKey is the keyed hash (HMAC-SHA256 under the server's secret, in hex) of a client's
// externalId: the id of its Reservation, and what the users read model finds a user by. Keyed,
// because externalIds are often guessable (a customer number, an e-mail address): a plain hash
// could be reversed by trying every candidate.
func ExternalIDKey(secret []byte, clientID, externalID string) string {
	mac := hmac.New(sha256.New, secret)
	// No client id and no externalId holds a NUL (both rules refuse control characters), so
	// the parts cannot run into each other.
	mac.Write([]byte(externalIDKeyDomain))
	mac.Write([]byte{0})
	mac.Write([]byte(clientID))
	mac.Write([]byte{0})
	mac.Write([]byte(externalID))
	return hex.EncodeToString(mac.Sum(nil))
}

// ExternalIDReserved records that a user claimed the client's externalId. It carries what it
// takes to finish creating that user should its creator stop between the reservation and the
// user's own first event (see the application service), and no personal data.
type ExternalIDReserved struct {
	ClientID    string    `json:"clientId"`
	UserUUID    string    `json:"userUuid"`
	RequestHash string    `json:"requestHash"`
	ReservedAt  time.Time `json:"reservedAt"`
}

// ExternalIDReleased records that the user who held the externalId gave it up (it was deleted),
// so that another user may take it.
type ExternalIDReleased struct {
	UserUUID   string    `json:"userUuid"`
	ReleasedAt time.Time `json:"releasedAt"`
}

func (ExternalIDReserved) EventType() string { return EventExternalIDReserved }
func (ExternalIDReleased) EventType() string { return EventExternalIDReleased }

// ErrExternalIDTaken is a reservation of an externalId that another user holds (HTTP 409
// USER_EXISTS).
var ErrExternalIDTaken = fmt.Errorf("externalId is taken by another user: %w", domain.ErrConflict)

// Holder is the user that holds a reservation, as its reservation recorded it.
type Holder struct {
	UserUUID    string
	ClientID    string
	RequestHash string
	ReservedAt  time.Time
}

// TakenError is ErrExternalIDTaken with the user that holds the externalId, so that the caller can
// check that the holder is what the reservation says (a live user with this externalId).
type TakenError struct{ Holder Holder }

func (e *TakenError) Error() string {
	return fmt.Sprintf("externalId is held by user %s: %v", e.Holder.UserUUID, ErrExternalIDTaken)
}
func (e *TakenError) Unwrap() error { return ErrExternalIDTaken }

// Reservation is one client's claim on one externalId. A stream of reservations and releases:
// at most one user holds it at a time, and the event store's optimistic append makes the claim
// atomic, so two users racing for one externalId cannot both get it.
type Reservation struct {
	root
	held   bool
	holder Holder
}

// Holder returns the user that holds the reservation, and false when nobody does.
func (r *Reservation) Holder() (Holder, bool) { return r.holder, r.held }

// Apply folds one event; domain.Record and domain.Rehydrate call it.
func (r *Reservation) Apply(e domain.Event) error {
	switch ev := e.(type) {
	case ExternalIDReserved:
		r.held = true
		r.holder = Holder{UserUUID: ev.UserUUID, ClientID: ev.ClientID, RequestHash: ev.RequestHash, ReservedAt: ev.ReservedAt}
	case ExternalIDReleased:
		r.held = false
		r.holder = Holder{}
	default:
		return fmt.Errorf("externalId reservation cannot apply event %s", e.EventType())
	}
	return nil
}

// Reserve claims the externalId for a user. The user that holds it already gets it again
// without a new event (a retry); any other holder makes it a *TakenError.
func (r *Reservation) Reserve(clientID, userUUID, requestHash string, now time.Time) error {
	if userUUID == "" || clientID == "" {
		return fmt.Errorf("reserve an externalId without a user or client: %w", domain.ErrInvalid)
	}
	if r.held {
		if r.holder.UserUUID == userUUID && r.holder.ClientID == clientID {
			return nil
		}
		return &TakenError{Holder: r.holder}
	}
	return domain.Record(r, ExternalIDReserved{ClientID: clientID, UserUUID: userUUID, RequestHash: requestHash,
		ReservedAt: now.UTC()})
}

// Release gives the externalId up on behalf of a user. It records nothing unless that very user
// holds it: a late release must never free the externalId of the user who took it next.
func (r *Reservation) Release(userUUID string, now time.Time) error {
	if !r.held || r.holder.UserUUID != userUUID {
		return nil
	}
	return domain.Record(r, ExternalIDReleased{UserUUID: userUUID, ReleasedAt: now.UTC()})
}
