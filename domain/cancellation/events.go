package cancellation

import "time"

// Stable event type names. They are stored with every event and must never change; a new shape
// gets a new schema version under eventschema, not a new name.
const (
	EventRequested        = "cancellation.requested"
	EventClaimed          = "cancellation.claimed"
	EventSent             = "cancellation.sent"
	EventSigned           = "cancellation.signed"
	EventSealed           = "cancellation.sealed"
	EventRejected         = "cancellation.rejected"
	EventTimedOut         = "cancellation.timed-out"
	EventCanceled         = "cancellation.canceled"
	EventDocumentFailed   = "cancellation.document-failed"
	EventProviderNotified = "cancellation.provider-notified"
)

// Requested records a client's request to cancel one insurance of a completed insurance
// collection. Everything the power of attorney says of the holder (name, personal number, the
// insurance number) and where the signing link goes (e-mail, phone) sits in Personal, sealed
// under the collection's data subject (its user's, when it has one), so that the user's erasure
// shreds it; Personal is nil once erased. The rest is public: the audit keeps it.
type Requested struct {
	DocumentID   string `json:"documentId"`
	ClientID     string `json:"clientId"`
	CollectionID string `json:"collectionId"`
	UserUUID     string `json:"userUuid,omitempty"`
	Company      string `json:"company"`
	InsuranceID  string `json:"insuranceId"`
	// InsuranceType is the collected insurance's type, "" when unknown.
	InsuranceType string `json:"insuranceType,omitempty"`
	// Generation counts the cancellations of this insurance before this one (0 for the first):
	// the document id is derived from it (DocumentID), which makes "one live cancellation per
	// insurance" an append condition of the event store rather than a read-model check.
	Generation     int            `json:"generation"`
	DeliveryMethod DeliveryMethod `json:"deliveryMethod"`
	// TemplateVersion is the version of the client's power-of-attorney template the document is
	// rendered from.
	TemplateVersion int `json:"templateVersion"`
	// CancellationDate is the date the power of attorney cancels the insurance as of
	// (YYYY-MM-DD): its renewal date when known and later than the request, else the request's.
	CancellationDate string     `json:"cancellationDate"`
	RequestedAt      time.Time  `json:"requestedAt"`
	Personal         *Requester `json:"personal,omitempty"`
}

// Requester is the personal part of Requested.
type Requester struct {
	HolderName      string `json:"holderName,omitempty"`
	PersonalNumber  string `json:"personalNumber,omitempty"`
	InsuranceNumber string `json:"insuranceNumber,omitempty"`
	Email           string `json:"email,omitempty"`
	PhoneNumber     string `json:"phoneNumber,omitempty"`
	// IdempotencyKey and RequestHash identify the request that created the cancellation, so that
	// a retry with the same Idempotency-Key is answered as the first request was and a key reused
	// for another request is refused. Personal for the reason a collection's request hash is.
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	RequestHash    string `json:"requestHash,omitempty"`
}

// Claimed records that a connector worker took the cancellation's signing process (as
// collection.claimed does for a collection).
type Claimed struct {
	WorkerID  string    `json:"workerId"`
	ClaimedAt time.Time `json:"claimedAt"`
}

// Sent records that the provider took the rendered document and sent the holder the signing
// link: PENDING. Deadline is the durable deadline for the signature (SAMLA_SIGNING_TIMEOUT after
// the sending): past it unsigned the cancellation is TIMED_OUT, also after a restart. ProcessID
// is the provider's reference of the signing process.
type Sent struct {
	At             time.Time `json:"at"`
	Deadline       time.Time `json:"deadline"`
	ProcessID      string    `json:"processId"`
	DocumentSHA256 string    `json:"documentSha256"`
	DocumentSize   int       `json:"documentSize"`
}

// Signed records the holder's signature: CLOSED. The sealed PDF follows in Sealed.
type Signed struct {
	SignedAt time.Time `json:"signedAt"`
	// Method is how the holder identified at the provider ("SANDBOX_EID", …).
	Method string `json:"method,omitempty"`
}

// Sealed records the signed PDF with the provider's seal. The PDF names the holder, so it sits in
// Personal; its digest and size are public.
type Sealed struct {
	SealedAt time.Time       `json:"sealedAt"`
	SHA256   string          `json:"sha256"`
	Size     int             `json:"size"`
	Personal *SealedPersonal `json:"personal,omitempty"`
}

// SealedPersonal is the personal part of Sealed: the signed PDF.
type SealedPersonal struct {
	Document []byte `json:"document"`
}

// Rejected records that the holder declined to sign.
type Rejected struct {
	At time.Time `json:"at"`
}

// TimedOut records that the signature deadline passed unsigned.
type TimedOut struct {
	At time.Time `json:"at"`
}

// Canceled records the withdrawal of a cancellation that was not final.
type Canceled struct {
	At     time.Time    `json:"at"`
	Reason CancelReason `json:"reason"`
}

// DocumentFailed records that the document could not be made or was refused by the provider:
// DOCUMENT_ERROR. Message is Samla's own text, never the provider's (which could quote the
// document).
type DocumentFailed struct {
	At      time.Time `json:"at"`
	Code    string    `json:"code"`
	Message string    `json:"message"`
}

// ProviderNotified records a verified callback of the signing provider about the cancellation's
// process. It changes no status: the connector reads the process at the provider when it sees
// it (a callback's content is a hint, the provider's API the truth), and EventID lets a replayed
// callback be recorded once.
type ProviderNotified struct {
	At      time.Time `json:"at"`
	EventID string    `json:"eventId"`
}

func (Requested) EventType() string        { return EventRequested }
func (Claimed) EventType() string          { return EventClaimed }
func (Sent) EventType() string             { return EventSent }
func (Signed) EventType() string           { return EventSigned }
func (Sealed) EventType() string           { return EventSealed }
func (Rejected) EventType() string         { return EventRejected }
func (TimedOut) EventType() string         { return EventTimedOut }
func (Canceled) EventType() string         { return EventCanceled }
func (DocumentFailed) EventType() string   { return EventDocumentFailed }
func (ProviderNotified) EventType() string { return EventProviderNotified }
