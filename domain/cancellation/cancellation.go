// Package cancellation is the insurance-cancellation aggregate: one power-of-attorney document
// that a client asks Samla to send to an insurance's holder for e-signing, by e-mail or SMS,
// through the client's signing provider. Its lifecycle is PREPARATION (requested, not yet with
// the provider) → PENDING (the holder has the signing link) → CLOSED (signed; then sealed) |
// REJECTED | TIMED_OUT; PREPARATION may end DOCUMENT_ERROR, and the client may withdraw any
// cancellation that is not final (CANCELED).
package cancellation

import (
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/collection"
)

// StreamPrefix is the event-store category of cancellation streams ("cancellation", topic
// samla.cancellation.events).
const StreamPrefix = "cancellation-"

// StreamName returns the stream that holds one cancellation's events.
func StreamName(documentID string) string { return StreamPrefix + documentID }

// Kind tells a repository where cancellations are stored and how to make an empty one.
var Kind = domain.Kind[*Cancellation]{StreamPrefix: StreamPrefix, New: func() *Cancellation { return &Cancellation{} }}

// Status is the signature status of a cancellation (the spec: CLOSED means signed).
type Status string

const (
	StatusPreparation   Status = "PREPARATION"
	StatusPending       Status = "PENDING"
	StatusClosed        Status = "CLOSED"
	StatusCanceled      Status = "CANCELED"
	StatusTimedOut      Status = "TIMED_OUT"
	StatusRejected      Status = "REJECTED"
	StatusDocumentError Status = "DOCUMENT_ERROR"
)

// AllStatuses lists every status in lifecycle order.
func AllStatuses() []Status {
	return []Status{StatusPreparation, StatusPending, StatusClosed, StatusCanceled, StatusTimedOut, StatusRejected,
		StatusDocumentError}
}

// IsFinal reports whether the status can no longer change. A CLOSED cancellation still gets its
// sealed PDF, which changes no status.
func (s Status) IsFinal() bool { return s != StatusPreparation && s != StatusPending }

// IsLive reports whether a cancellation in this status still stands in the way of another
// cancellation of the same insurance: it may yet be, or has been, signed. A withdrawn, rejected,
// timed-out or failed one does not.
func (s Status) IsLive() bool {
	return s == StatusPreparation || s == StatusPending || s == StatusClosed
}

// DeliveryMethod is how the holder gets the signing link.
type DeliveryMethod string

const (
	DeliveryEmail DeliveryMethod = "EMAIL"
	DeliverySMS   DeliveryMethod = "SMS"
)

// CancelReason says who withdrew a cancellation.
type CancelReason string

const (
	// CanceledByClient: the client's DELETE /cancellations/{documentId}.
	CanceledByClient CancelReason = "CLIENT"
	// CanceledUserDeleted: the user's deletion withdrew every live cancellation of the user.
	CanceledUserDeleted CancelReason = "USER_DELETED"
)

// Document error codes (DocumentFailed.Code).
const (
	// DocumentRenderFailed: Samla could not render the template with the collection's data.
	DocumentRenderFailed = "RENDER_FAILED"
	// DocumentRefused: the signing provider refused the document.
	DocumentRefused = "DOCUMENT_REFUSED"
	// DocumentTemplateMissing: the client's template of the recorded version is gone.
	DocumentTemplateMissing = "TEMPLATE_MISSING"
)

// Names of RequestInput's members in field errors.
const (
	FieldDocumentID       = "documentId"
	FieldCollectionID     = "collectionId"
	FieldInsuranceID      = "insuranceIds"
	FieldDeliveryMethod   = "deliveryMethod"
	FieldEmail            = "email"
	FieldPhoneNumber      = "phoneNumber"
	FieldTemplateVersion  = "templateVersion"
	FieldCancellationDate = "cancellationDate"
)

var (
	// ErrNotRequested is a command on a cancellation that does not exist.
	ErrNotRequested = fmt.Errorf("cancellation does not exist: %w", domain.ErrConflict)
	// ErrFinal is a command that a final cancellation refuses (HTTP 409 CANCELLATION_FINAL).
	ErrFinal = fmt.Errorf("cancellation is final: %w", domain.ErrConflict)
	// ErrExists is a request for a document id that another request created: the insurance has a
	// newer cancellation than the requester saw (HTTP 409 CANCELLATION_EXISTS when it is live).
	ErrExists = fmt.Errorf("cancellation exists: %w", domain.ErrConflict)
	// ErrAlreadyClaimed means another live worker runs the cancellation's signing process.
	ErrAlreadyClaimed = fmt.Errorf("already claimed: %w", domain.ErrConflict)
	// ErrIllegalTransition is a command the cancellation's current status does not allow.
	ErrIllegalTransition = fmt.Errorf("illegal cancellation transition: %w", domain.ErrConflict)
)

var (
	datePattern   = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)
	sha256Pattern = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// RequestInput is the input of Request: one insurance of one collection.
type RequestInput struct {
	DocumentID      string
	ClientID        string
	Collection      *collection.Collection
	InsuranceID     string
	Generation      int
	DeliveryMethod  DeliveryMethod
	Email           string // for DeliveryEmail; personal data
	PhoneNumber     string // for DeliverySMS; personal data
	TemplateVersion int
	IdempotencyKey  string
	RequestHash     string
}

// root lets Cancellation embed domain.Root under an unexported name: its methods are promoted
// and Cancellation is a domain.Aggregate, but no other package can reach (or overwrite) it.
type root = domain.Root

// Cancellation is the aggregate. Its commands decide, then record their events, which Apply
// folds.
type Cancellation struct {
	root
	requested   Requested
	status      Status
	updatedAt   time.Time
	claimedBy   string
	sent        *Sent
	signed      *Signed
	sealed      *Sealed
	endedAt     time.Time
	cancelBy    CancelReason
	docFailure  *DocumentFailed
	seenNotices map[string]bool
}

func (c *Cancellation) DocumentID() string   { return c.requested.DocumentID }
func (c *Cancellation) ClientID() string     { return c.requested.ClientID }
func (c *Cancellation) CollectionID() string { return c.requested.CollectionID }
func (c *Cancellation) UserUUID() string     { return c.requested.UserUUID }
func (c *Cancellation) Company() string      { return c.requested.Company }
func (c *Cancellation) InsuranceID() string  { return c.requested.InsuranceID }
func (c *Cancellation) Status() Status       { return c.status }
func (c *Cancellation) ClaimedBy() string    { return c.claimedBy }

// Requested is the request as recorded; its Personal is nil once erased. Personal data: never
// logged.
func (c *Cancellation) Requested() Requested {
	r := c.requested
	if r.Personal != nil {
		p := *r.Personal
		r.Personal = &p
	}
	return r
}

// RequestedAt is when the cancellation was requested.
func (c *Cancellation) RequestedAt() time.Time { return c.requested.RequestedAt }

// UpdatedAt is the time of the last event.
func (c *Cancellation) UpdatedAt() time.Time { return c.updatedAt }

// Sent is the sending to the provider, nil before.
func (c *Cancellation) Sent() *Sent {
	if c.sent == nil {
		return nil
	}
	s := *c.sent
	return &s
}

// SignedAt is when the holder signed, zero before.
func (c *Cancellation) SignedAt() time.Time {
	if c.signed == nil {
		return time.Time{}
	}
	return c.signed.SignedAt
}

// IsSignedAndSealed tells that the holder signed and the provider's sealed PDF is recorded.
func (c *Cancellation) IsSignedAndSealed() bool { return c.status == StatusClosed && c.sealed != nil }

// SealedDocument is the signed, sealed PDF; nil before it is recorded and once erased. Personal
// data.
func (c *Cancellation) SealedDocument() []byte {
	if c.sealed == nil || c.sealed.Personal == nil {
		return nil
	}
	return slices.Clone(c.sealed.Personal.Document)
}

// EndedAt is when the cancellation became final, zero while it is not.
func (c *Cancellation) EndedAt() time.Time { return c.endedAt }

// CancelReason is who withdrew the cancellation, "" unless it was withdrawn.
func (c *Cancellation) CancelReason() CancelReason { return c.cancelBy }

// DocumentFailure is why the cancellation ended DOCUMENT_ERROR, nil otherwise.
func (c *Cancellation) DocumentFailure() *DocumentFailed {
	if c.docFailure == nil {
		return nil
	}
	f := *c.docFailure
	return &f
}

// Exists tells whether the cancellation was requested.
func (c *Cancellation) Exists() bool { return c.Version() > 0 }

// DataSubject is whose personal data the cancellation's events carry: its collection's subject
// (the user's when the collection has one), so that erasing the user erases the documents too.
func (c *Cancellation) DataSubject() string {
	return collection.DataSubject(c.requested.CollectionID, c.requested.UserUUID)
}

// Apply folds one event; domain.Record and domain.Rehydrate call it.
func (c *Cancellation) Apply(e domain.Event) error {
	switch ev := e.(type) {
	case Requested:
		c.requested, c.status, c.updatedAt = ev, StatusPreparation, ev.RequestedAt
	case Claimed:
		c.claimedBy, c.updatedAt = ev.WorkerID, ev.ClaimedAt
	case Sent:
		sent := ev
		c.sent, c.status, c.updatedAt = &sent, StatusPending, ev.At
	case Signed:
		signed := ev
		c.signed, c.status, c.endedAt, c.updatedAt = &signed, StatusClosed, ev.SignedAt, ev.SignedAt
	case Sealed:
		sealed := ev
		c.sealed, c.updatedAt = &sealed, ev.SealedAt
	case Rejected:
		c.status, c.endedAt, c.updatedAt = StatusRejected, ev.At, ev.At
	case TimedOut:
		c.status, c.endedAt, c.updatedAt = StatusTimedOut, ev.At, ev.At
	case Canceled:
		c.status, c.cancelBy, c.endedAt, c.updatedAt = StatusCanceled, ev.Reason, ev.At, ev.At
	case DocumentFailed:
		failed := ev
		c.docFailure, c.status, c.endedAt, c.updatedAt = &failed, StatusDocumentError, ev.At, ev.At
	case ProviderNotified:
		if c.seenNotices == nil {
			c.seenNotices = map[string]bool{}
		}
		c.seenNotices[ev.EventID] = true
		c.updatedAt = ev.At
	default:
		return fmt.Errorf("cancellation cannot apply event %s", e.EventType())
	}
	return nil
}

// Request decides a new cancellation of one insurance of a completed insurance collection of the
// client. Invalid input is a *domain.FieldError (Field* constants); a collection that is not the
// client's completed insurance collection, or an insurance it did not collect, is
// domain.ErrRefused; a document id taken already is ErrExists.
func (c *Cancellation) Request(in RequestInput, now time.Time) error {
	if c.Exists() {
		return fmt.Errorf("cancellation %s: %w", c.requested.DocumentID, ErrExists)
	}
	switch {
	case in.DocumentID == "":
		return &domain.FieldError{Field: FieldDocumentID, Reason: "is required"}
	case in.Collection == nil || in.ClientID == "":
		return &domain.FieldError{Field: FieldCollectionID, Reason: "is required"}
	case in.Generation < 0:
		return &domain.FieldError{Field: "generation", Reason: "must not be negative"}
	case in.TemplateVersion < 1:
		return &domain.FieldError{Field: FieldTemplateVersion, Reason: "must be positive"}
	}
	if err := CheckDelivery(in.DeliveryMethod, in.Email, in.PhoneNumber); err != nil {
		return err
	}
	col := in.Collection
	if err := Cancellable(col, in.ClientID); err != nil {
		return err
	}
	ins, ok := insurance(col, in.InsuranceID)
	if !ok {
		return fmt.Errorf("insurance %q: %w", in.InsuranceID, ErrUnknownInsurance)
	}
	p := &Requester{HolderName: col.HolderName(ins.ID), PersonalNumber: col.Person().PersonalNumber,
		IdempotencyKey: in.IdempotencyKey, RequestHash: in.RequestHash}
	if ins.InsuranceNumber != nil {
		p.InsuranceNumber = *ins.InsuranceNumber
	}
	switch in.DeliveryMethod {
	case DeliveryEmail:
		p.Email = in.Email
	case DeliverySMS:
		p.PhoneNumber = in.PhoneNumber
	}
	at := now.UTC()
	return domain.Record(c, Requested{DocumentID: in.DocumentID, ClientID: in.ClientID, CollectionID: col.ID(),
		UserUUID: col.UserUUID(), Company: col.Company(), InsuranceID: ins.ID, InsuranceType: ins.InsuranceType,
		Generation: in.Generation, DeliveryMethod: in.DeliveryMethod, TemplateVersion: in.TemplateVersion,
		CancellationDate: cancellationDate(ins, at), RequestedAt: at, Personal: p})
}

var (
	// ErrNotCancellable is a collection that is not a completed insurance collection of the
	// client (HTTP 422 COLLECTION_NOT_CANCELLABLE).
	ErrNotCancellable = fmt.Errorf("not a completed insurance collection of the client: %w", domain.ErrRefused)
	// ErrUnknownInsurance is an insurance id the collection did not collect (HTTP 422
	// UNKNOWN_INSURANCE, naming it).
	ErrUnknownInsurance = fmt.Errorf("the collection has no such insurance: %w", domain.ErrRefused)
	// ErrHolderErased is a collection whose user was erased: there is no holder left to name
	// (HTTP 422 COLLECTION_NOT_CANCELLABLE). The command side tells it from the key store, since
	// an erased collection folds like one whose company named nobody.
	ErrHolderErased = fmt.Errorf("the collection's personal data was erased: %w", domain.ErrRefused)
)

// Cancellable tells whether cancellations may be requested from the collection for clientID:
// only from a completed (or partially completed) insurance collection of that client. Another
// client's collection is ErrNotCancellable too: a client must not learn it exists.
func Cancellable(col *collection.Collection, clientID string) error {
	if col == nil || !col.Exists() || col.ClientID() != clientID || col.Product() != collection.ProductInsurance {
		return ErrNotCancellable
	}
	switch col.Status() {
	case collection.StatusCompleted, collection.StatusCompletedPartial:
		return nil
	default:
		return fmt.Errorf("collection is %s: %w", col.Status(), ErrNotCancellable)
	}
}

// cancellationDate is the date a power of attorney requested at now cancels ins as of: its
// renewal date when that is known and later, else now's date (as soon as possible).
func cancellationDate(ins collection.Insurance, now time.Time) string {
	today := now.UTC().Format(time.DateOnly)
	if r := ins.RenewalDate; r != nil && datePattern.MatchString(*r) && *r > today {
		return *r
	}
	return today
}

func insurance(col *collection.Collection, id string) (collection.Insurance, bool) {
	for _, ins := range col.Insurances() {
		if ins.ID == id && id != "" {
			return ins, true
		}
	}
	return collection.Insurance{}, false
}

// CheckDelivery checks the delivery method and the address it needs: an e-mail address as the
// spec writes them for EMAIL, a mobile number (digits with the country prefix) for SMS. Request
// checks it; the command side calls it first, to refuse a bad address before loading anything.
func CheckDelivery(method DeliveryMethod, email, phone string) error {
	switch method {
	case DeliveryEmail:
		if email == "" {
			return &domain.FieldError{Field: FieldEmail, Reason: "is required for EMAIL delivery"}
		}
		if !collection.ValidEmail(email) {
			return &domain.FieldError{Field: FieldEmail, Reason: "must be <address>@<domain>"}
		}
	case DeliverySMS:
		if phone == "" {
			return &domain.FieldError{Field: FieldPhoneNumber, Reason: "is required for SMS delivery"}
		}
		if !collection.ValidPhoneNumber(phone) {
			return &domain.FieldError{Field: FieldPhoneNumber, Reason: "must be digits only, with the country prefix (e.g. 46701234567)"}
		}
	default:
		return &domain.FieldError{Field: FieldDeliveryMethod, Reason: "must be EMAIL or SMS"}
	}
	return nil
}

// Claim gives the cancellation's signing process to one worker, as collection.Claim does:
// another worker's claim blocks it until that worker has recorded nothing for staleAfter (it
// died); the same worker id may claim again, which is how a restarted worker resumes.
func (c *Cancellation) Claim(workerID string, now time.Time, staleAfter time.Duration) error {
	if !c.Exists() {
		return fmt.Errorf("claim: %w", ErrNotRequested)
	}
	if c.status.IsFinal() {
		return fmt.Errorf("claim of cancellation %s (%s): %w", c.DocumentID(), c.status, ErrFinal)
	}
	if workerID == "" {
		return &domain.FieldError{Field: "workerId", Reason: "is required"}
	}
	if c.claimedBy != "" && c.claimedBy != workerID && now.Sub(c.updatedAt) < staleAfter {
		return fmt.Errorf("cancellation %s is claimed by %s: %w", c.DocumentID(), c.claimedBy, ErrAlreadyClaimed)
	}
	return domain.Record(c, Claimed{WorkerID: workerID, ClaimedAt: now.UTC()})
}

// MarkSent records that the provider sent the signing link: PREPARATION → PENDING, with the
// signature deadline timeout after now. The same process again records nothing (a worker's
// retry).
func (c *Cancellation) MarkSent(processID, documentSHA256 string, documentSize int, timeout time.Duration, now time.Time) error {
	if !c.Exists() {
		return fmt.Errorf("mark sent: %w", ErrNotRequested)
	}
	if c.sent != nil && c.sent.ProcessID == processID {
		return nil
	}
	if c.status != StatusPreparation {
		return fmt.Errorf("mark cancellation %s sent in %s: %w", c.DocumentID(), c.status, ErrIllegalTransition)
	}
	switch {
	case processID == "":
		return &domain.FieldError{Field: "processId", Reason: "is required"}
	case !sha256Pattern.MatchString(documentSHA256) || documentSize <= 0:
		return &domain.FieldError{Field: "document", Reason: "is required, with its SHA-256 in hex"}
	case timeout <= 0:
		return &domain.FieldError{Field: "timeout", Reason: "must be positive"}
	}
	at := now.UTC()
	return domain.Record(c, Sent{At: at, Deadline: at.Add(timeout), ProcessID: processID,
		DocumentSHA256: documentSHA256, DocumentSize: documentSize})
}

// Sign records the holder's signature: PENDING → CLOSED. A closed cancellation records nothing
// again; a signature reported after the cancellation ended otherwise (withdrawn, timed out) is
// ErrFinal: the worker then withdraws it at the provider.
func (c *Cancellation) Sign(signedAt time.Time, method string) error {
	if !c.Exists() {
		return fmt.Errorf("sign: %w", ErrNotRequested)
	}
	if c.status == StatusClosed {
		return nil
	}
	if c.status != StatusPending {
		return fmt.Errorf("sign cancellation %s in %s: %w", c.DocumentID(), c.status, ErrFinal)
	}
	if signedAt.IsZero() {
		return &domain.FieldError{Field: "signedAt", Reason: "is required"}
	}
	return domain.Record(c, Signed{SignedAt: signedAt.UTC(), Method: method})
}

// Seal records the signed PDF with the provider's seal. Only a CLOSED cancellation takes one,
// once; a second records nothing.
func (c *Cancellation) Seal(document []byte, sha256Hex string, now time.Time) error {
	if !c.Exists() {
		return fmt.Errorf("seal: %w", ErrNotRequested)
	}
	if c.sealed != nil {
		return nil
	}
	if c.status != StatusClosed {
		return fmt.Errorf("seal cancellation %s in %s: %w", c.DocumentID(), c.status, ErrIllegalTransition)
	}
	if len(document) == 0 || !sha256Pattern.MatchString(sha256Hex) {
		return &domain.FieldError{Field: "document", Reason: "is required, with its SHA-256 in hex"}
	}
	return domain.Record(c, Sealed{SealedAt: now.UTC(), SHA256: sha256Hex, Size: len(document),
		Personal: &SealedPersonal{Document: slices.Clone(document)}})
}

// Reject records that the holder declined: PENDING → REJECTED (again: nothing).
func (c *Cancellation) Reject(now time.Time) error {
	return c.endPending(StatusRejected, Rejected{At: now.UTC()})
}

// TimeOut ends a PENDING cancellation whose signature deadline passed: TIMED_OUT. Anything else,
// and a deadline not passed yet, records nothing: a timer that fires early or late, or after the
// cancellation ended, is harmless, and whoever looks after the deadline (a restarted worker too)
// ends it.
func (c *Cancellation) TimeOut(now time.Time) error {
	if !c.Exists() || c.status != StatusPending || c.sent == nil || now.Before(c.sent.Deadline) {
		return nil
	}
	return domain.Record(c, TimedOut{At: now.UTC()})
}

// endPending moves a PENDING cancellation to a final status; the same final status again records
// nothing.
func (c *Cancellation) endPending(to Status, ev domain.Event) error {
	if !c.Exists() {
		return fmt.Errorf("%s: %w", to, ErrNotRequested)
	}
	if c.status == to {
		return nil
	}
	if c.status != StatusPending {
		return fmt.Errorf("%s cancellation %s in %s: %w", to, c.DocumentID(), c.status, ErrIllegalTransition)
	}
	return domain.Record(c, ev)
}

// Cancel withdraws a cancellation that is not final: CANCELED. A final one is ErrFinal.
func (c *Cancellation) Cancel(reason CancelReason, now time.Time) error {
	if !c.Exists() {
		return fmt.Errorf("cancel: %w", ErrNotRequested)
	}
	if reason != CanceledByClient && reason != CanceledUserDeleted {
		return &domain.FieldError{Field: "reason", Reason: "must be CLIENT or USER_DELETED"}
	}
	if c.status.IsFinal() {
		return fmt.Errorf("cancel cancellation %s in %s: %w", c.DocumentID(), c.status, ErrFinal)
	}
	return domain.Record(c, Canceled{At: now.UTC(), Reason: reason})
}

// FailDocument ends a cancellation in PREPARATION whose document could not be made or was
// refused: DOCUMENT_ERROR. Once failed, nothing more is recorded.
func (c *Cancellation) FailDocument(code, message string, now time.Time) error {
	if !c.Exists() {
		return fmt.Errorf("fail document: %w", ErrNotRequested)
	}
	if c.status == StatusDocumentError {
		return nil
	}
	if c.status != StatusPreparation {
		return fmt.Errorf("fail the document of cancellation %s in %s: %w", c.DocumentID(), c.status, ErrIllegalTransition)
	}
	switch code {
	case DocumentRenderFailed, DocumentRefused, DocumentTemplateMissing:
	default:
		return &domain.FieldError{Field: "code", Reason: "is not a document error code"}
	}
	return domain.Record(c, DocumentFailed{At: now.UTC(), Code: code, Message: message})
}

// NoteProviderCallback records a verified provider callback about the cancellation, once per
// event id; a callback about a final cancellation that has what it needs records nothing.
// noted reports whether it recorded one.
func (c *Cancellation) NoteProviderCallback(eventID string, now time.Time) (noted bool, err error) {
	if !c.Exists() {
		return false, fmt.Errorf("provider callback: %w", ErrNotRequested)
	}
	if eventID == "" {
		return false, &domain.FieldError{Field: "eventId", Reason: "is required"}
	}
	if c.seenNotices[eventID] || (c.status.IsFinal() && (c.status != StatusClosed || c.sealed != nil)) {
		return false, nil
	}
	return true, domain.Record(c, ProviderNotified{At: now.UTC(), EventID: eventID})
}

// NeedsProvider tells whether the connector still has work at the provider for the
// cancellation: sending it, following its signature, or fetching the sealed PDF.
func (c *Cancellation) NeedsProvider() bool {
	return c.status == StatusPreparation || c.status == StatusPending || (c.status == StatusClosed && c.sealed == nil)
}
