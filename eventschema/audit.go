package eventschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/cancellation"
	"github.com/samla/samla/domain/client"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/consent"
	"github.com/samla/samla/domain/user"
)

// The audit history (GET /collections/{id}/events, and the event_history_v2 table analysts query)
// shows what happened: event types, times, statuses, companies, products, login methods and
// counts. It never shows collected values, personal data, or fingerprints from which either could
// be guessed (API.md, "Collections"). Removing the payload's "personal" member is not enough for
// that: the public part of an event carries account and insurance numbers, balances, display
// names, file names, request hashes and key hashes, all of which an event needs for replay.
//
// So the rule is an allowlist, and this file is its one home: every event type the registry
// knows has an audit summary built from its decoded event, naming each member it shows. A member
// added to an event later stays out of the history until someone adds it here on purpose. A type
// or schema version this build does not know (written by a newer build) has no summary at all:
// the history shows its envelope only.

// auditSummary builds the audit summary of one decoded event.
type auditSummary func(domain.Event) (any, error)

// summarise adapts a summary of one event type to auditSummary.
func summarise[E domain.Event](f func(E) any) auditSummary {
	return func(e domain.Event) (any, error) {
		ev, ok := e.(E)
		if !ok {
			return nil, fmt.Errorf("audit summary of %s: got %T", e.EventType(), e)
		}
		return f(ev), nil
	}
}

// AuditSummary returns what the audit history shows of env's payload, and the schema version of
// the event it was built from: the type's current version, since old versions are upcast first.
// A type or version this build does not know gives a nil summary and env's own version: nothing
// of a payload whose meaning is unknown can be judged safe to show. A payload of a known type
// that does not decode is an error.
func (r *Registry) AuditSummary(env Envelope) (json.RawMessage, int, error) {
	t, ok := r.types[env.Type]
	if !ok || env.SchemaVersion > t.current {
		return nil, env.SchemaVersion, nil
	}
	ev, err := r.Decode(env)
	if err != nil {
		return nil, 0, fmt.Errorf("audit summary: %w", err)
	}
	return summariseEvent(t, env, ev)
}

// AuditSummaryDecoded is AuditSummary of env from ev, the event Decode made of env, for a
// reader that has decoded it already (a rebuild decodes every event once for every read
// model). A nil ev is decoded here.
func (r *Registry) AuditSummaryDecoded(env Envelope, ev domain.Event) (json.RawMessage, int, error) {
	t, ok := r.types[env.Type]
	if !ok || env.SchemaVersion > t.current || ev == nil {
		return r.AuditSummary(env)
	}
	return summariseEvent(t, env, ev)
}

// summariseEvent is the audit summary of ev, decoded from env, of type t.
func summariseEvent(t *eventType, env Envelope, ev domain.Event) (json.RawMessage, int, error) {
	summary, err := t.audit(ev)
	if err != nil {
		return nil, 0, err
	}
	out, err := json.Marshal(summary)
	if err != nil {
		return nil, 0, fmt.Errorf("audit summary of %s: %w", env.Type, err)
	}
	return out, t.current, nil
}

// AuditSummaryOpened is AuditSummary of env, whose personal member was sealed, from ev: the
// event Decode made of env's payload with that member opened (OpenPersonal), so that a reader
// that has decoded it already (a rebuild, for every read model at once) does not decode the
// payload without the member again. The summary is AuditSummary's of that payload: it is built
// from ev with its personal part dropped (withoutPersonal). ok is false when it cannot be told
// so, for a payload of an old schema version, whose upcasters read the whole payload; the caller
// then calls AuditSummary.
func (r *Registry) AuditSummaryOpened(env Envelope, ev domain.Event) (summary json.RawMessage, version int, ok bool, err error) {
	t, known := r.types[env.Type]
	if !known || env.SchemaVersion != t.current || ev == nil || ev.EventType() != env.Type {
		return nil, 0, false, nil
	}
	public, ok := withoutPersonal(ev)
	if !ok {
		return nil, 0, false, nil
	}
	summary, version, err = summariseEvent(t, env, public)
	if err != nil {
		return nil, 0, false, err
	}
	return summary, version, true, nil
}

// withoutPersonal is ev as Decode makes it of its payload without the personal member: every
// event type keeps its personal data in its field Personal, which that payload leaves nil. ok is
// false for a type not named here.
func withoutPersonal(ev domain.Event) (domain.Event, bool) {
	switch e := ev.(type) {
	case collection.Started:
		e.Personal = nil
		return e, true
	case collection.StatusChanged:
		e.Personal = nil
		return e, true
	case collection.InsurancesCollected:
		e.Personal = nil
		return e, true
	case collection.WealthCollected:
		e.Personal = nil
		return e, true
	case collection.InputSupplied:
		e.Personal = nil
		return e, true
	case collection.DocumentUploaded:
		e.Personal = nil
		return e, true
	case collection.DocumentCollected:
		e.Personal = nil
		return e, true
	case user.Created:
		e.Personal = nil
		return e, true
	case user.ExternalIDReserved:
		e.Personal = nil
		return e, true
	case user.ExternalIDReleased:
		e.Personal = nil
		return e, true
	case client.SigningConfigured:
		e.Personal = nil
		return e, true
	case consent.Created:
		e.Personal = nil
		return e, true
	case consent.AuthorizationStarted:
		e.Personal = nil
		return e, true
	case cancellation.Requested:
		e.Personal = nil
		return e, true
	case cancellation.Sealed:
		e.Personal = nil
		return e, true
	}
	return nil, false
}

// An event that held personal data says so in its summary, and whether that data can still be
// read, without showing any of it: the member ProtectedDataMember, whose value is one of the
// ProtectedData* states. The reader of the history decides the state when it serves the summary
// (an erasure happens long after the event was summarised). The member's name avoids the word
// "personal", which no history may contain.
const (
	ProtectedDataMember = "protectedData"
	// ProtectedDataSealed: the event's personal data is sealed under its data subject's key,
	// which still exists.
	ProtectedDataSealed = "sealed"
	// ProtectedDataErased: the subject's key was destroyed; the personal data is unreadable
	// everywhere.
	ProtectedDataErased = "erased"
	// ProtectedDataUnsealed: the event was written before sealing existed; its personal data is
	// in plain text in the event store (samla keys report counts such events).
	ProtectedDataUnsealed = "unsealed"
)

// WithProtectedData returns summary, a JSON object, with ProtectedDataMember set to state. The
// other members keep their order.
func WithProtectedData(summary json.RawMessage, state string) (json.RawMessage, error) {
	body := bytes.TrimSpace(summary)
	if len(body) < 2 || body[0] != '{' || body[len(body)-1] != '}' {
		return nil, fmt.Errorf("audit summary is not a JSON object: %.40q", body)
	}
	value, err := json.Marshal(state)
	if err != nil {
		return nil, fmt.Errorf("audit summary: %w", err)
	}
	out := make([]byte, 0, len(body)+len(ProtectedDataMember)+len(value)+4)
	if members := bytes.TrimSpace(body[1 : len(body)-1]); len(members) > 0 {
		out = append(append(append(out, '{'), members...), ',')
	} else {
		out = append(out, '{')
	}
	out = append(out, '"')
	out = append(out, ProtectedDataMember...)
	out = append(out, '"', ':')
	out = append(out, value...)
	return append(out, '}'), nil
}

// errNoAuditSummary refuses a registry entry without an audit summary.
var errNoAuditSummary = errors.New("no audit summary")

// The summaries. Times are the domain's own; statuses, kinds, types and methods are codes.

type startedAudit struct {
	Company     string `json:"company"`
	Product     string `json:"product"`
	LoginMethod string `json:"loginMethod"`
	APIVersion  string `json:"apiVersion"`
	HasUserUUID bool   `json:"hasUserUuid"` // whether a user was named, not who
	// Consent is the PSD2 consent the collection read under, so that an auditor sees under
	// which of the client's consents a person's accounts were read. The bank's id of it stays
	// out, as in the consent's own history.
	Consent   *startedConsentAudit `json:"consent,omitempty"`
	StartedAt auditTime            `json:"startedAt"`
}

type startedConsentAudit struct {
	ConsentID string   `json:"consentId"`
	Scope     []string `json:"scope"`
}

func auditStarted(e collection.Started) any {
	a := startedAudit{Company: e.Company, Product: string(e.Product), LoginMethod: e.LoginMethod,
		APIVersion: e.APIVersion, HasUserUUID: e.UserUUID != "", StartedAt: auditTime(e.StartedAt)}
	if u := e.Consent; u != nil {
		a.Consent = &startedConsentAudit{ConsentID: u.ConsentID, Scope: make([]string, len(u.Scope))}
		for i, s := range u.Scope {
			a.Consent.Scope[i] = string(s)
		}
	}
	return a
}

// claimedAudit leaves the worker out: its id names a host of the operator's, which is no
// business of the client's.
type claimedAudit struct {
	ClaimedAt auditTime `json:"claimedAt"`
}

func auditClaimed(e collection.Claimed) any { return claimedAudit{ClaimedAt: auditTime(e.ClaimedAt)} }

// statusChangedAudit is the move and what the new status asked for, in kinds and counts. The
// message and the extra information are left out: they are the company's free text and the
// EID tokens, which may carry anything.
type statusChangedAudit struct {
	From               string         `json:"from"`
	To                 string         `json:"to"`
	RequiredInputTypes []string       `json:"requiredInputTypes,omitempty"`
	InstructionCount   int            `json:"instructionCount,omitempty"`
	EIDOrderOpened     bool           `json:"eidOrderOpened,omitempty"`
	Deadline           *deadlineAudit `json:"deadline,omitempty"`
	ChangedAt          auditTime      `json:"changedAt"`
}

type deadlineAudit struct {
	Kind  string    `json:"kind"`
	DueAt auditTime `json:"dueAt"`
}

func auditStatusChanged(e collection.StatusChanged) any {
	out := statusChangedAudit{From: string(e.From), To: string(e.To), RequiredInputTypes: e.RequiredInputTypes,
		InstructionCount: len(e.InstructionRequestIDs), EIDOrderOpened: e.EIDOrder != nil, ChangedAt: auditTime(e.ChangedAt)}
	if out.InstructionCount == 0 && e.Personal != nil {
		out.InstructionCount = len(e.Personal.Instructions)
	}
	if d := e.Deadline; d != nil {
		out.Deadline = &deadlineAudit{Kind: string(d.Kind), DueAt: auditTime(d.DueAt)}
	}
	return out
}

// dataAudit is a data event's record counts by product, under the data endpoints' list names.
// It names no kind of record either: which insurances a person holds (life, health) is itself
// collected data, and of the most sensitive kind.
type dataAudit struct {
	Counts      map[string]int `json:"counts"`
	CollectedAt auditTime      `json:"collectedAt"`
}

// The counts are the events' public ones, so that they are shown the same after an erasure.

func auditInsurancesCollected(e collection.InsurancesCollected) any {
	return dataAudit{Counts: map[string]int{"insurances": e.InsuranceCount}, CollectedAt: auditTime(e.CollectedAt)}
}

// wealthAudit is dataAudit with the PSD2 products read (v3 on; absent when the event did not
// record them): which products a consent let Samla read is what an auditor checks against the
// consent's scope, and it names no one.
type wealthAudit struct {
	dataAudit
	PSD2Read []consent.Scope `json:"psd2Read,omitzero"`
}

func auditWealthCollected(e collection.WealthCollected) any {
	c := e.Counts
	return wealthAudit{dataAudit: dataAudit{Counts: map[string]int{
		"pensions": c.Pensions, "investments": c.Investments, "loans": c.Loans,
		"savings": c.Savings, "psd2CheckingAccounts": c.CheckingAccounts,
		"psd2SavingsAccounts": c.SavingsAccounts, "psd2CreditCards": c.CreditCards,
	}, CollectedAt: auditTime(e.CollectedAt)}, PSD2Read: e.PSD2Read}
}

// inputSuppliedAudit is what kind of input was accepted; the idempotency key and the request's
// fingerprint stay out.
type inputSuppliedAudit struct {
	Kind          string    `json:"kind"`
	InputTypes    []string  `json:"inputTypes,omitempty"`
	ResponseCount int       `json:"responseCount,omitempty"`
	SuppliedAt    auditTime `json:"suppliedAt"`
}

func auditInputSupplied(e collection.InputSupplied) any {
	return inputSuppliedAudit{Kind: string(e.Kind), InputTypes: e.InputTypes, ResponseCount: len(e.RequestIDs),
		SuppliedAt: auditTime(e.SuppliedAt)}
}

// documentAudit describes a file without naming it: a file name can carry a person's name, and
// the digest would confirm a guessed file.
type documentAudit struct {
	Kind        string    `json:"kind"`
	ContentType string    `json:"contentType"`
	SizeBytes   int       `json:"sizeBytes"`
	At          auditTime `json:"at"`
}

func auditDocument(d collection.Document) documentAudit {
	return documentAudit{Kind: d.Kind, ContentType: d.ContentType, SizeBytes: d.Size, At: auditTime(d.At)}
}

func auditDocumentUploaded(e collection.DocumentUploaded) any   { return auditDocument(e.Document) }
func auditDocumentCollected(e collection.DocumentCollected) any { return auditDocument(e.Document) }

type registeredAudit struct {
	Sandbox      bool      `json:"sandbox"`
	RegisteredAt auditTime `json:"registeredAt"`
}

func auditRegistered(e client.Registered) any {
	return registeredAudit{Sandbox: e.Sandbox, RegisteredAt: auditTime(e.RegisteredAt)}
}

// apiKeyAudit names a key by its id, never by its hash.
type apiKeyAudit struct {
	KeyID     string     `json:"keyId"`
	IssuedAt  *auditTime `json:"issuedAt,omitempty"`
	RevokedAt *auditTime `json:"revokedAt,omitempty"`
}

func auditAPIKeyIssued(e client.APIKeyIssued) any {
	return apiKeyAudit{KeyID: e.KeyID, IssuedAt: ptr(auditTime(e.IssuedAt))}
}

func auditAPIKeyRevoked(e client.APIKeyRevoked) any {
	return apiKeyAudit{KeyID: e.KeyID, RevokedAt: ptr(auditTime(e.RevokedAt))}
}

// The user events show when, and nothing of whom: the user's id is in the stream's name already,
// the externalId is personal data, and the request fingerprint could confirm a guessed one.

type userCreatedAudit struct {
	CreatedAt auditTime `json:"createdAt"`
}

func auditUserCreated(e user.Created) any { return userCreatedAudit{CreatedAt: auditTime(e.CreatedAt)} }

type userDeletedAudit struct {
	DeletedAt auditTime `json:"deletedAt"`
}

func auditUserDeleted(e user.Deleted) any { return userDeletedAudit{DeletedAt: auditTime(e.DeletedAt)} }

// The externalId reservations' stream is named by a keyed hash of the externalId; naming the
// user beside it would make that hash a key to the user, so a summary says only when.

type externalIDReservedAudit struct {
	ReservedAt auditTime `json:"reservedAt"`
}

func auditExternalIDReserved(e user.ExternalIDReserved) any {
	return externalIDReservedAudit{ReservedAt: auditTime(e.ReservedAt)}
}

type externalIDReleasedAudit struct {
	ReleasedAt auditTime `json:"releasedAt"`
}

func auditExternalIDReleased(e user.ExternalIDReleased) any {
	return externalIDReleasedAudit{ReleasedAt: auditTime(e.ReleasedAt)}
}

// The consent events show the consent's lifecycle: where, with which login method and scope,
// when it moved and why it ended, in codes. Never the person who must sign, the request's
// fingerprint, the EID order's tokens, the bank's id of the consent (the bank's reference, no
// business of the history's) or a failure's message (free text that may carry anything); the
// user is named by the stream's events elsewhere, not here.

type consentCreatedAudit struct {
	Company     string    `json:"company"`
	LoginMethod string    `json:"loginMethod"`
	Scope       []string  `json:"scope"`
	CreatedAt   auditTime `json:"createdAt"`
}

func auditConsentCreated(e consent.Created) any {
	scope := make([]string, len(e.Scope))
	for i, s := range e.Scope {
		scope[i] = string(s)
	}
	return consentCreatedAudit{Company: e.Company, LoginMethod: e.LoginMethod, Scope: scope, CreatedAt: auditTime(e.CreatedAt)}
}

// auditConsentClaimed leaves the worker out, as collection.claimed does.
func auditConsentClaimed(e consent.Claimed) any {
	return claimedAudit{ClaimedAt: auditTime(e.ClaimedAt)}
}

type consentAuthorizationStartedAudit struct {
	At       auditTime `json:"at"`
	Deadline auditTime `json:"deadline"`
}

func auditConsentAuthorizationStarted(e consent.AuthorizationStarted) any {
	return consentAuthorizationStartedAudit{At: auditTime(e.At), Deadline: auditTime(e.Deadline)}
}

type consentAuthorizedAudit struct {
	AuthorizedAt auditTime `json:"authorizedAt"`
	ExpiresAt    auditTime `json:"expiresAt"`
}

func auditConsentAuthorized(e consent.Authorized) any {
	return consentAuthorizedAudit{AuthorizedAt: auditTime(e.AuthorizedAt), ExpiresAt: auditTime(e.ExpiresAt)}
}

type consentFailedAudit struct {
	Code string    `json:"code"`
	At   auditTime `json:"at"`
}

func auditConsentFailed(e consent.Failed) any {
	return consentFailedAudit{Code: string(e.Code), At: auditTime(e.At)}
}

type consentRevokedAudit struct {
	Reason string    `json:"reason"`
	At     auditTime `json:"at"`
}

func auditConsentRevoked(e consent.Revoked) any {
	return consentRevokedAudit{Reason: string(e.Reason), At: auditTime(e.At)}
}

type consentExpiredAudit struct {
	At auditTime `json:"at"`
}

func auditConsentExpired(e consent.Expired) any { return consentExpiredAudit{At: auditTime(e.At)} }

// auditTime is a time as the audit view shows it: RFC 3339 in UTC with milliseconds, as every
// time of the API, whatever precision the event recorded.
type auditTime time.Time

// auditTimeLayout is the API's time format (httpapi.TimeFormat).
const auditTimeLayout = "2006-01-02T15:04:05.000Z07:00"

func (t auditTime) MarshalJSON() ([]byte, error) {
	out := make([]byte, 0, len(auditTimeLayout)+2)
	out = time.Time(t).UTC().AppendFormat(append(out, '"'), auditTimeLayout)
	return append(out, '"'), nil
}

func ptr[T any](v T) *T { return &v }

// The signing configuration shows its template version and content hash, and when: never the
// provider key (a secret) nor the template's text (the operator has it; the hash identifies it).

type signingConfiguredAudit struct {
	TemplateVersion int       `json:"templateVersion"`
	TemplateHash    string    `json:"templateHash"`
	ConfiguredAt    auditTime `json:"configuredAt"`
}

func auditSigningConfigured(e client.SigningConfigured) any {
	return signingConfiguredAudit{TemplateVersion: e.TemplateVersion, TemplateHash: e.TemplateHash, ConfiguredAt: auditTime(e.ConfiguredAt)}
}

// The cancellation events show the document's way to its signature: which insurance, how it was
// delivered, from which template version, when it moved and why it ended, in codes. Never the
// holder's name or personal number, the insurance number, the cancellation date (the insurance's
// renewal date, a collected value), the delivery address, the request's fingerprint, the
// provider's process id, the document or its digest (a digest of a document that names a person
// confirms a guessed document); the collection is named by the stream's requested event, not
// here.

type cancellationRequestedAudit struct {
	Company         string    `json:"company"`
	InsuranceID     string    `json:"insuranceId"`
	InsuranceType   string    `json:"insuranceType,omitempty"`
	DeliveryMethod  string    `json:"deliveryMethod"`
	TemplateVersion int       `json:"templateVersion"`
	RequestedAt     auditTime `json:"requestedAt"`
}

func auditCancellationRequested(e cancellation.Requested) any {
	return cancellationRequestedAudit{Company: e.Company, InsuranceID: e.InsuranceID, InsuranceType: e.InsuranceType,
		DeliveryMethod: string(e.DeliveryMethod), TemplateVersion: e.TemplateVersion, RequestedAt: auditTime(e.RequestedAt)}
}

// auditCancellationClaimed leaves the worker out, as collection.claimed does.
func auditCancellationClaimed(e cancellation.Claimed) any {
	return claimedAudit{ClaimedAt: auditTime(e.ClaimedAt)}
}

type cancellationSentAudit struct {
	At           auditTime `json:"at"`
	Deadline     auditTime `json:"deadline"`
	DocumentSize int       `json:"documentSize"`
}

func auditCancellationSent(e cancellation.Sent) any {
	return cancellationSentAudit{At: auditTime(e.At), Deadline: auditTime(e.Deadline), DocumentSize: e.DocumentSize}
}

type cancellationSignedAudit struct {
	SignedAt auditTime `json:"signedAt"`
	Method   string    `json:"method,omitempty"`
}

func auditCancellationSigned(e cancellation.Signed) any {
	return cancellationSignedAudit{SignedAt: auditTime(e.SignedAt), Method: e.Method}
}

type cancellationSealedAudit struct {
	SealedAt auditTime `json:"sealedAt"`
	Size     int       `json:"size"`
}

func auditCancellationSealed(e cancellation.Sealed) any {
	return cancellationSealedAudit{SealedAt: auditTime(e.SealedAt), Size: e.Size}
}

type cancellationEndedAudit struct {
	At     auditTime `json:"at"`
	Reason string    `json:"reason,omitempty"`
	Code   string    `json:"code,omitempty"`
}

func auditCancellationRejected(e cancellation.Rejected) any {
	return cancellationEndedAudit{At: auditTime(e.At)}
}
func auditCancellationTimedOut(e cancellation.TimedOut) any {
	return cancellationEndedAudit{At: auditTime(e.At)}
}

func auditCancellationCanceled(e cancellation.Canceled) any {
	return cancellationEndedAudit{At: auditTime(e.At), Reason: string(e.Reason)}
}

func auditCancellationDocumentFailed(e cancellation.DocumentFailed) any {
	return cancellationEndedAudit{At: auditTime(e.At), Code: e.Code}
}

// auditCancellationProviderNotified shows that the provider called, and when; its event id is
// the provider's business.
func auditCancellationProviderNotified(e cancellation.ProviderNotified) any {
	return cancellationEndedAudit{At: auditTime(e.At)}
}

// The client's security events show what the operator did, and when: a certificate by its serial,
// environment and validity (no person is named in it), settings by their values, a retiring key
// by its id and end.

type certificateAudit struct {
	Serial      string     `json:"serial"`
	Environment string     `json:"environment,omitempty"`
	NotAfter    *auditTime `json:"notAfter,omitempty"`
	IssuedAt    *auditTime `json:"issuedAt,omitempty"`
	RevokedAt   *auditTime `json:"revokedAt,omitempty"`
}

func auditCertificateIssued(e client.CertificateIssued) any {
	return certificateAudit{Serial: e.Serial, Environment: string(e.Environment), NotAfter: ptr(auditTime(e.NotAfter)),
		IssuedAt: ptr(auditTime(e.IssuedAt))}
}

func auditCertificateRevoked(e client.CertificateRevoked) any {
	return certificateAudit{Serial: e.Serial, RevokedAt: ptr(auditTime(e.RevokedAt))}
}

type settingsAudit struct {
	RateLimit *float64  `json:"rateLimit,omitempty"`
	Burst     *int      `json:"burst,omitempty"`
	MTLSOnly  *bool     `json:"mtlsOnly,omitempty"`
	ChangedAt auditTime `json:"changedAt"`
}

func auditSettingsChanged(e client.SettingsChanged) any {
	return settingsAudit{RateLimit: e.RateLimit, Burst: e.Burst, MTLSOnly: e.MTLSOnly, ChangedAt: auditTime(e.ChangedAt)}
}

type keyRetiringAudit struct {
	KeyID      string    `json:"keyId"`
	ValidUntil auditTime `json:"validUntil"`
	At         auditTime `json:"at"`
}

func auditAPIKeyRetiring(e client.APIKeyRetiring) any {
	return keyRetiringAudit{KeyID: e.KeyID, ValidUntil: auditTime(e.ValidUntil), At: auditTime(e.At)}
}
