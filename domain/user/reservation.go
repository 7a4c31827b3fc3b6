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
// user's own first event (see the application service). Who the holder is, is personal data
// (schema v2): the reservation's stream is named by the keyed hash of the externalId, so the
// holders beside it would link every user who ever had that externalId, an erased one to the
// next. The holder sits in Personal, sealed under the hold's own pseudonymous data subject
// (domain.HolderSubject), which the holder's erasure destroys; what is left then says only that
// some user of the client once held the externalId, and when, which a uniqueness claim kept in
// events cannot help saying.
type ExternalIDReserved struct {
	ClientID   string      `json:"clientId"`
	ReservedAt time.Time   `json:"reservedAt"`
	Personal   *ReservedBy `json:"personal,omitempty"`
}

// ReservedBy is the personal part of ExternalIDReserved: the holder, the fingerprint of the
// request that created it (which would confirm a guessed externalId), and the data subject the
// hold is sealed under (domain.HolderSubject; "" in events upcast from version 1, which named
// the holder in plain text and are sealed under the holder's own subject from then on).
type ReservedBy struct {
	UserUUID    string `json:"userUuid"`
	RequestHash string `json:"requestHash,omitempty"`
	Subject     string `json:"subject,omitempty"`
}

// ExternalIDReleased records that the user who held the externalId gave it up (it was deleted),
// so that another user may take it. The user is personal data, as in ExternalIDReserved; a
// release of a holder erased already has none.
type ExternalIDReleased struct {
	ReleasedAt time.Time   `json:"releasedAt"`
	Personal   *ReleasedBy `json:"personal,omitempty"`
}

// ReleasedBy is the personal part of ExternalIDReleased.
type ReleasedBy struct {
	UserUUID string `json:"userUuid"`
}

func (ExternalIDReserved) EventType() string { return EventExternalIDReserved }
func (ExternalIDReleased) EventType() string { return EventExternalIDReleased }

// ErrExternalIDTaken is a reservation of an externalId that another user holds (HTTP 409
// USER_EXISTS).
var ErrExternalIDTaken = fmt.Errorf("externalId is taken by another user: %w", domain.ErrConflict)

// Holder is the user that holds a reservation, as its reservation recorded it. UserUUID,
// RequestHash and Subject are "" when the holder's personal data was erased (Erased).
type Holder struct {
	UserUUID    string
	ClientID    string
	RequestHash string
	// Subject is the data subject the hold is sealed under (see ExternalIDReserved).
	Subject    string
	ReservedAt time.Time
}

// Erased tells whether who the holder is was erased with its personal data: the holder was
// deleted, and its release did not happen before (ReleaseErased).
func (h Holder) Erased() bool { return h.UserUUID == "" }

// TakenError is ErrExternalIDTaken with the user that holds the externalId, so that the caller can
// check that the holder is what the reservation says (a live user with this externalId).
type TakenError struct{ Holder Holder }

func (e *TakenError) Error() string {
	if e.Holder.Erased() {
		return fmt.Sprintf("externalId is held by an erased user: %v", ErrExternalIDTaken)
	}
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
	// subject is the data subject of the hold the last event was about: what the events a
	// command records carry personal data of (DataSubject).
	subject string
}

// Holder returns the user that holds the reservation, and false when nobody does.
func (r *Reservation) Holder() (Holder, bool) { return r.holder, r.held }

// DataSubject is whose personal data the events just recorded carry: the hold of the user that
// reserved or released the externalId. Each hold is sealed under a subject of its own, so that
// erasing one user leaves the others' readable and names none of them.
func (r *Reservation) DataSubject() string { return r.subject }

// Apply folds one event; domain.Record and domain.Rehydrate call it.
func (r *Reservation) Apply(e domain.Event) error {
	switch ev := e.(type) {
	case ExternalIDReserved:
		r.held = true
		r.holder = Holder{ClientID: ev.ClientID, ReservedAt: ev.ReservedAt}
		if p := ev.Personal; p != nil {
			r.holder.UserUUID, r.holder.RequestHash, r.holder.Subject = p.UserUUID, p.RequestHash, p.Subject
			if r.holder.Subject == "" {
				r.holder.Subject = domain.UserSubject(p.UserUUID) // a hold of version 1
			}
		}
		r.subject = r.holder.Subject
	case ExternalIDReleased:
		// The release is the holder's: sealed under the hold it ends.
		r.subject = r.holder.Subject
		r.held = false
		r.holder = Holder{}
	default:
		return fmt.Errorf("externalId reservation cannot apply event %s", e.EventType())
	}
	return nil
}

// Claim is what Reserve records of the user that claims an externalId.
type Claim struct {
	ClientID    string
	UserUUID    string
	RequestHash string
	// Subject is the new hold's data subject (domain.HolderSubject of a fresh random token).
	Subject string
}

// Reserve claims the externalId for a user. The user that holds it already gets it again
// without a new event (a retry; its hold keeps the subject it has, which Holder tells); any
// other holder, an erased one too, makes it a *TakenError.
func (r *Reservation) Reserve(c Claim, now time.Time) error {
	if c.UserUUID == "" || c.ClientID == "" || c.Subject == "" {
		return fmt.Errorf("reserve an externalId without a user, client or subject: %w", domain.ErrInvalid)
	}
	if r.held {
		if r.holder.UserUUID == c.UserUUID && r.holder.ClientID == c.ClientID {
			return nil
		}
		return &TakenError{Holder: r.holder}
	}
	return domain.Record(r, ExternalIDReserved{ClientID: c.ClientID, ReservedAt: now.UTC(),
		Personal: &ReservedBy{UserUUID: c.UserUUID, RequestHash: c.RequestHash, Subject: c.Subject}})
}

// Release gives the externalId up on behalf of a user. It records nothing unless that very user
// holds it: a late release must never free the externalId of the user who took it next.
func (r *Reservation) Release(userUUID string, now time.Time) error {
	if !r.held || userUUID == "" || r.holder.UserUUID != userUUID {
		return nil
	}
	return domain.Record(r, ExternalIDReleased{ReleasedAt: now.UTC(), Personal: &ReleasedBy{UserUUID: userUUID}})
}

// ReleaseErased gives the externalId up on behalf of a holder whose personal data was erased
// (Holder.Erased): only a deleted user is erased, and a deleted user holds nothing. It records
// nothing unless such a holder holds it; the release names nobody.
func (r *Reservation) ReleaseErased(now time.Time) error {
	if !r.held || !r.holder.Erased() {
		return nil
	}
	return domain.Record(r, ExternalIDReleased{ReleasedAt: now.UTC()})
}
