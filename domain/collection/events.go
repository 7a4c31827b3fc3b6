package collection

import (
	"time"

	"github.com/samla/samla/domain/consent"
)

// Stable event type names. They are stored with every event and must never change; a new shape
// gets a new schema version under eventschema, not a new name.
const (
	EventStarted             = "collection.started"
	EventClaimed             = "collection.claimed"
	EventStatusChanged       = "collection.status-changed"
	EventInsurancesCollected = "collection.insurances-collected"
	EventWealthCollected     = "collection.wealth-collected"
	EventInputSupplied       = "collection.input-supplied"
	EventDocumentUploaded    = "collection.document-uploaded"
	EventDocumentCollected   = "collection.document-collected"
)

// Started records a client's request to collect. Personal data sits only in Personal, so that it
// can be encrypted per data subject and erased (crypto-shredding) without touching the rest.
type Started struct {
	CollectionID string    `json:"collectionId"`
	ClientID     string    `json:"clientId"`
	Company      string    `json:"company"`
	Product      Product   `json:"product"`
	LoginMethod  string    `json:"loginMethod"`
	APIVersion   string    `json:"apiVersion"`
	UserUUID     string    `json:"userUuid,omitempty"`
	StartedAt    time.Time `json:"startedAt"`
	// Consent is the PSD2 consent the collection reads its PSD2 products under (schema v4), nil
	// when it has none: its PSD2 products are then left unread.
	Consent  *UsedConsent   `json:"consent,omitempty"`
	Personal *StartedPerson `json:"personal,omitempty"`
}

// UsedConsent is the PSD2 consent a collection was started with, as it stood when the start
// checked it. It is public, not personal: ids and a scope name no one, and the audit must show
// under which consent a person's accounts were read, also after the person's erasure.
type UsedConsent struct {
	ConsentID string `json:"consentId"`
	// BankConsentID is the bank's id of the consent, under which the PSD2 products are read.
	BankConsentID string `json:"bankConsentId"`
	// Scope is the consent's scope: the PSD2 products outside it are not read.
	Scope []consent.Scope `json:"scope"`
}

// StartedPerson is the personal data given when the collection started, and the fingerprint of
// the request that gave it.
type StartedPerson struct {
	PersonalNumber   string `json:"personalNumber,omitempty"`
	AccountOwnerName string `json:"accountOwnerName,omitempty"`
	// RequestHash identifies the request that started the collection, so that a retry with the
	// same Idempotency-Key can be told from a different request reusing the key. It is personal
	// data although it is a keyed hash: the request's only unknown part may be the personal
	// number, which the hash confirms to whoever can ask whether a guess replays (schema v3).
	// Once erased, no retry is recognised (RequestHash is "").
	RequestHash string `json:"requestHash,omitempty"`
}

// Claimed records that a connector worker took the collection's company session.
type Claimed struct {
	WorkerID  string    `json:"workerId"`
	ClaimedAt time.Time `json:"claimedAt"`
}

// StatusChanged records a move of the state machine, with what the new status asks of the
// client (input kinds, instructions), an EID order to show as a QR code, and its deadline.
// The instructions themselves sit in Personal (schema version 2): their headers carry the
// user's device credentials and their bodies may carry personal data, and the public part of
// an event reaches the audit history and analysts.
type StatusChanged struct {
	From               Status         `json:"from"`
	To                 Status         `json:"to"`
	ExtraInformation   map[string]any `json:"extraInformation,omitempty"`
	RequiredInputTypes []string       `json:"requiredInputTypes,omitempty"`
	// InstructionRequestIDs is the public trace of Personal.Instructions, in their order: an
	// auditor sees that requests were handed to the client, and which responses answered them,
	// without their URLs, headers or bodies. It stays when the personal part is erased.
	InstructionRequestIDs []string        `json:"instructionRequestIds,omitempty"`
	Message               string          `json:"message,omitempty"`
	EIDOrder              *EIDOrder       `json:"eidOrder,omitempty"`
	Deadline              *Deadline       `json:"deadline,omitempty"`
	ChangedAt             time.Time       `json:"changedAt"`
	Personal              *StatusPersonal `json:"personal,omitempty"`
}

// Details is what the event recorded besides the move itself, with its public and personal
// parts joined again: what ChangeStatusWith needs to state the same status once more.
func (e StatusChanged) Details() StatusDetails {
	d := StatusDetails{RequiredInputTypes: e.RequiredInputTypes, Message: e.Message, EIDOrder: e.EIDOrder,
		Deadline: e.Deadline, Extra: e.ExtraInformation}
	if e.Personal != nil {
		d.Instructions, d.QRStartSecret = e.Personal.Instructions, e.Personal.QRStartSecret
	}
	return d
}

// instructions are the requests the status asks the client to run, nil when none (or when the
// personal part was erased, after which no response can be matched to them anyway).
func (e StatusChanged) instructions() []Instruction {
	if e.Personal == nil {
		return nil
	}
	return e.Personal.Instructions
}

// CurrentStatus is the event that set a collection's current status, with its instructions at
// hand. Instructions repeats Personal.Instructions so that callers deciding on supplement-info
// or on the next status need not know which part of the event keeps them.
type CurrentStatus struct {
	StatusChanged
	Instructions []Instruction
}

// InsurancesCollected records the insurances a company returned. The insurances themselves are
// personal data (schema v2): their numbers, display names ("Bilförsäkring ABC123" holds a
// number plate) and premiums describe one person, so they sit in Personal with the holders'
// names, and only how many there were is public.
type InsurancesCollected struct {
	InsuranceCount int               `json:"insuranceCount"`
	CollectedAt    time.Time         `json:"collectedAt"`
	Personal       *InsuranceRecords `json:"personal,omitempty"`
}

// Insurances is what the event recorded, nil once its personal part was erased.
func (e InsurancesCollected) Insurances() []Insurance {
	if e.Personal == nil {
		return nil
	}
	return e.Personal.Insurances
}

// Insurance is one insurance as the company reported it. Pointers are unknown when nil, and so is
// an empty InsuranceType: a missing data point is never 0 or "" (see Known).
type Insurance struct {
	ID               string   `json:"id"`
	InsuranceType    string   `json:"insuranceType,omitempty"` // "" is unknown, left out
	InsuranceNumber  *string  `json:"insuranceNumber,omitempty"`
	DisplayName      *string  `json:"displayName,omitempty"`
	Premium          *float64 `json:"premium,omitempty"`
	PremiumFrequency *string  `json:"premiumFrequency,omitempty"`
	Currency         *string  `json:"currency,omitempty"`
	RenewalDate      *string  `json:"renewalDate,omitempty"`
	StartDate        *string  `json:"startDate,omitempty"`
}

// InsuranceRecords is the personal part of InsurancesCollected: the insurances, and their
// holders' names by insurance id.
type InsuranceRecords struct {
	Insurances  []Insurance       `json:"insurances"`
	HolderNames map[string]string `json:"holderNames,omitempty"`
}

func (Started) EventType() string             { return EventStarted }
func (WealthCollected) EventType() string     { return EventWealthCollected }
func (InputSupplied) EventType() string       { return EventInputSupplied }
func (DocumentUploaded) EventType() string    { return EventDocumentUploaded }
func (DocumentCollected) EventType() string   { return EventDocumentCollected }
func (Claimed) EventType() string             { return EventClaimed }
func (StatusChanged) EventType() string       { return EventStatusChanged }
func (InsurancesCollected) EventType() string { return EventInsurancesCollected }
