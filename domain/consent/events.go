package consent

import "time"

// Stable event type names. They are stored with every event and must never change; a new shape
// gets a new schema version under eventschema, not a new name.
const (
	EventCreated              = "consent.created"
	EventClaimed              = "consent.claimed"
	EventAuthorizationStarted = "consent.authorization-started"
	EventAuthorized           = "consent.authorized"
	EventFailed               = "consent.failed"
	EventRevoked              = "consent.revoked"
	EventExpired              = "consent.expired"
)

// Created records a client's request for a consent. The personal number of the person who must
// sign sits only in Personal, sealed under the user's data subject, so that the user's erasure
// shreds it without touching the rest; Personal is nil once erased.
type Created struct {
	ConsentID   string         `json:"consentId"`
	ClientID    string         `json:"clientId"`
	UserUUID    string         `json:"userUuid"`
	Company     string         `json:"company"`
	LoginMethod string         `json:"loginMethod"`
	Scope       []Scope        `json:"scope"`
	CreatedAt   time.Time      `json:"createdAt"`
	Personal    *CreatedPerson `json:"personal,omitempty"`
}

// CreatedPerson is the personal part of Created.
type CreatedPerson struct {
	PersonalNumber string `json:"personalNumber"`
	// RequestHash identifies the request that created the consent, so that a retry with the
	// same Idempotency-Key can be told from another request reusing the key. It is personal data
	// for the same reason as a collection's: the request's only unknown part may be the personal
	// number, which the hash would confirm to whoever guesses it. Once erased no retry matches.
	RequestHash string `json:"requestHash,omitempty"`
}

// Claimed records that a connector worker took the consent's bank session (as
// collection.claimed does for a collection).
type Claimed struct {
	WorkerID  string    `json:"workerId"`
	ClaimedAt time.Time `json:"claimedAt"`
}

// AuthorizationStarted records that the bank opened an electronic-ID order for the consent's
// authorization. Deadline is when the order times out, a durable deadline: the consent fails
// with AUTHENTICATION_TIMEOUT once it passes unsigned, also after a restart. The bank's consent
// id is the bank's own, public reference, needed later to read PSD2 data under the consent; the
// order's tokens and QR secret let anyone sign in the person's place, so they are personal.
type AuthorizationStarted struct {
	At            time.Time              `json:"at"`
	Deadline      time.Time              `json:"deadline"`
	BankConsentID string                 `json:"bankConsentId"`
	Personal      *AuthorizationPersonal `json:"personal,omitempty"`
}

// AuthorizationPersonal is the personal part of AuthorizationStarted: the EID order's tokens.
type AuthorizationPersonal struct {
	AutoStartToken string `json:"autoStartToken,omitempty"`
	QRStartToken   string `json:"qrStartToken,omitempty"`
	QRStartSecret  string `json:"qrStartSecret,omitempty"`
}

// Authorized records the person's signature. ExpiresAt is the consent's durable expiry deadline.
type Authorized struct {
	AuthorizedAt time.Time `json:"authorizedAt"`
	ExpiresAt    time.Time `json:"expiresAt"`
}

// Failed records that the authorization failed for good.
type Failed struct {
	At      time.Time   `json:"at"`
	Code    FailureCode `json:"code"`
	Message string      `json:"message"`
}

// Revoked records the end of a consent by its client or by its user's deletion.
type Revoked struct {
	At     time.Time    `json:"at"`
	Reason RevokeReason `json:"reason"`
}

// Expired records that an authorized consent reached its expiry.
type Expired struct {
	At time.Time `json:"at"`
}

func (Created) EventType() string              { return EventCreated }
func (Claimed) EventType() string              { return EventClaimed }
func (AuthorizationStarted) EventType() string { return EventAuthorizationStarted }
func (Authorized) EventType() string           { return EventAuthorized }
func (Failed) EventType() string               { return EventFailed }
func (Revoked) EventType() string              { return EventRevoked }
func (Expired) EventType() string              { return EventExpired }
