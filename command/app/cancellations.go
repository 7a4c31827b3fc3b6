package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/cancellation"
	"github.com/samla/samla/domain/client"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/platform/uuids"
)

// CancellationRepository is the port to the event-sourced cancellations
// (*repository.Repository[*cancellation.Cancellation] satisfies it).
type CancellationRepository interface {
	Load(ctx context.Context, documentID string) (*cancellation.Cancellation, error)
	Update(ctx context.Context, documentID string, meta repository.Meta, decide func(*cancellation.Cancellation) error,
		opts ...repository.UpdateOption) (*cancellation.Cancellation, eventstore.AppendResult, error)
}

// CollectionLoader loads collections from the event store (*repository.Repository[*collection.Collection]).
type CollectionLoader interface {
	Load(ctx context.Context, collectionID string) (*collection.Collection, error)
}

// ClientLoader loads clients from the event store (*repository.Repository[*client.Client]).
type ClientLoader interface {
	Load(ctx context.Context, clientID string) (*client.Client, error)
}

// SubjectErasures tells whether a data subject was erased (its key destroyed): a collection of an
// erased user names no holder any more, and no power of attorney can be made from it.
type SubjectErasures interface {
	Erased(ctx context.Context, subject string) (bool, error)
}

// Limits of a cancellation request, explicit so that no request can make the service probe or
// append without end.
const (
	// MaxInsurancesPerCancellation bounds insuranceIds in one POST /cancellations.
	MaxInsurancesPerCancellation = 50
	// maxInsuranceID bounds one insurance id (the companies' ids are short).
	maxInsuranceID = 128
	// MaxCancellationsPerInsurance bounds how many cancellations one insurance may have had:
	// each new one reads every earlier one of the insurance first.
	MaxCancellationsPerInsurance = 100
)

// Field names of RequestCancellations in field errors, as the request body names them.
const (
	FieldCollectionID = cancellation.FieldCollectionID
	FieldInsuranceIDs = cancellation.FieldInsuranceID
)

var (
	// ErrSigningNotConfigured is a client without a signing provider key or template (HTTP 422
	// SIGNING_NOT_CONFIGURED).
	ErrSigningNotConfigured = fmt.Errorf("the client has no signing configuration: %w", domain.ErrRefused)
	// ErrCancellationNotFound is a cancellation that does not exist or is another client's (HTTP
	// 404 CANCELLATION_NOT_FOUND).
	ErrCancellationNotFound = errors.New("cancellation not found")
	// ErrCancellationOfOtherUser is a session acting on a cancellation, or a collection, of
	// another user of its client (HTTP 403 FORBIDDEN_FOR_SESSION).
	ErrCancellationOfOtherUser = errors.New("the cancellation is another user's")
	// ErrTooManyCancellations is an insurance that has had MaxCancellationsPerInsurance
	// cancellations already (HTTP 422 TOO_MANY_CANCELLATIONS): each new one reads every earlier
	// one first, so their number is bounded.
	ErrTooManyCancellations = fmt.Errorf("the insurance has had %d cancellations: %w", MaxCancellationsPerInsurance, domain.ErrRefused)
)

// CancellationExistsError is an insurance that already has a live cancellation (HTTP 409
// CANCELLATION_EXISTS, naming the insurance and the live document).
type CancellationExistsError struct {
	InsuranceID string
	DocumentID  string
}

func (e *CancellationExistsError) Error() string {
	return fmt.Sprintf("insurance %s already has a live cancellation (%s)", e.InsuranceID, e.DocumentID)
}

func (e *CancellationExistsError) Unwrap() error { return domain.ErrConflict }

// UnknownInsuranceError is an insurance id the collection did not collect (HTTP 422
// UNKNOWN_INSURANCE, naming it).
type UnknownInsuranceError struct{ InsuranceID string }

func (e *UnknownInsuranceError) Error() string {
	return fmt.Sprintf("the collection has no insurance %q", e.InsuranceID)
}

func (e *UnknownInsuranceError) Unwrap() error { return cancellation.ErrUnknownInsurance }

// RequestCancellations is the command behind POST /cancellations.
type RequestCancellations struct {
	Tenant         string // the authenticated client
	IdempotencyKey string // "" when the client sent none
	CollectionID   string
	InsuranceIDs   []string
	DeliveryMethod cancellation.DeliveryMethod
	Email          string // personal data
	PhoneNumber    string // personal data
	// SessionUser is the user of the session that asks, "" for the client's API key: a session
	// may cancel only from its own user's collections.
	SessionUser   string
	RequestHash   string
	CorrelationID string
	RequestID     string
}

// RequestedCancellation is one document of a request's answer.
type RequestedCancellation struct {
	DocumentID  string
	InsuranceID string
	Status      cancellation.Status
}

// CancellationsRequested is the outcome of a request: the first response, also when a retry
// replays it.
type CancellationsRequested struct {
	Cancellations []RequestedCancellation
	// Replayed is true when an earlier request with the same Idempotency-Key created them all.
	Replayed bool
}

// CancelCancellation is the command behind DELETE /cancellations/{documentId}.
type CancelCancellation struct {
	Tenant        string
	DocumentID    string
	SessionUser   string
	CorrelationID string
	RequestID     string
}

// CancellationService requests and withdraws cancellations.
type CancellationService struct {
	cancellations CancellationRepository
	collections   CollectionLoader
	clients       ClientLoader
	erasures      SubjectErasures
	now           func() time.Time
}

// NewCancellationService builds the service.
func NewCancellationService(cancellations CancellationRepository, collections CollectionLoader, clients ClientLoader,
	erasures SubjectErasures, now func() time.Time) *CancellationService {
	if now == nil {
		now = time.Now
	}
	return &CancellationService{cancellations: cancellations, collections: collections, clients: clients, erasures: erasures, now: now}
}

// cancellationNamespace is the UUIDv5 namespace of document ids.
var cancellationNamespace = uuid.MustParse("7b0e6c52-93a4-4d1f-b8e2-5a6c0d9f1e37")

// DocumentID is the id of the generation-th cancellation of an insurance of a client's
// collection. Deriving it makes the event store decide "one live cancellation per insurance":
// two requests that both find generation n ended race to append the first event of n+1, and
// only one can. The collection id is unguessable and every read checks the tenant, so a derived
// id reveals nothing.
func DocumentID(tenant, collectionID, insuranceID string, generation int) string {
	return uuid.NewSHA1(cancellationNamespace,
		[]byte(tenant+"\x00"+collectionID+"\x00"+insuranceID+"\x00"+strconv.Itoa(generation))).String()
}

// history is what the event store holds of one insurance's cancellations.
type history struct {
	next   int                        // the generation a new cancellation gets
	latest *cancellation.Cancellation // the newest, nil when none
	ours   *cancellation.Cancellation // the one this request's Idempotency-Key created, nil when none
}

// Request creates one cancellation per insurance, each PREPARATION, or, for a retry of an
// earlier request with the same Idempotency-Key and content, answers as that request was
// answered (completing it first, should it have stopped halfway). Invalid input is a
// *domain.FieldError; a client without signing configuration ErrSigningNotConfigured; a
// collection that is not the client's completed insurance collection
// cancellation.ErrNotCancellable (or ErrHolderErased); an insurance it lacks an
// *UnknownInsuranceError; one with a live cancellation a *CancellationExistsError. Nothing is
// recorded then, unless a concurrent request won a race for one of the insurances after this
// one created others: those are withdrawn (CANCELED) before it answers 409.
func (s *CancellationService) Request(ctx context.Context, cmd RequestCancellations) (CancellationsRequested, error) {
	if err := checkCancellationRequest(&cmd); err != nil {
		return CancellationsRequested{}, err
	}
	cl, err := s.clients.Load(ctx, cmd.Tenant)
	if err != nil {
		return CancellationsRequested{}, fmt.Errorf("request cancellations: load client: %w", err)
	}
	signing, ok := cl.Signing()
	if !ok {
		return CancellationsRequested{}, ErrSigningNotConfigured
	}
	col, err := s.collections.Load(ctx, cmd.CollectionID)
	if err != nil {
		return CancellationsRequested{}, fmt.Errorf("request cancellations: load collection: %w", err)
	}
	if err := cancellation.Cancellable(col, cmd.Tenant); err != nil {
		return CancellationsRequested{}, err
	}
	if cmd.SessionUser != "" && col.UserUUID() != cmd.SessionUser {
		return CancellationsRequested{}, ErrCancellationOfOtherUser
	}
	if erased, err := s.erasures.Erased(ctx, col.DataSubject()); err != nil {
		return CancellationsRequested{}, fmt.Errorf("request cancellations: %w", err)
	} else if erased {
		return CancellationsRequested{}, cancellation.ErrHolderErased
	}
	collected := col.Insurances()
	for _, id := range cmd.InsuranceIDs {
		if !slices.ContainsFunc(collected, func(i collection.Insurance) bool { return i.ID == id }) {
			return CancellationsRequested{}, &UnknownInsuranceError{InsuranceID: id}
		}
	}

	histories := make([]history, len(cmd.InsuranceIDs))
	replayed := 0
	for i, id := range cmd.InsuranceIDs {
		h, err := s.history(ctx, cmd, id)
		if err != nil {
			return CancellationsRequested{}, err
		}
		histories[i] = h
		if h.ours != nil {
			replayed++
			continue
		}
		if h.latest != nil && h.latest.Status().IsLive() {
			return CancellationsRequested{}, &CancellationExistsError{InsuranceID: id, DocumentID: h.latest.DocumentID()}
		}
	}

	// Millisecond precision is what responses and envelopes carry.
	now := s.now().UTC().Truncate(time.Millisecond)
	meta := repository.Meta{Tenant: cmd.Tenant, CorrelationID: cmd.CorrelationID, CausationID: cmd.RequestID, Actor: actor(cmd.Tenant, cmd.SessionUser)}
	out := CancellationsRequested{Replayed: replayed == len(cmd.InsuranceIDs),
		Cancellations: make([]RequestedCancellation, len(cmd.InsuranceIDs))}
	// The documents are appended in the insurances' sorted order, so that two requests for
	// overlapping insurances contend for the same one first, and one of them wins outright.
	order := make([]int, len(cmd.InsuranceIDs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(cmd.InsuranceIDs[a], cmd.InsuranceIDs[b]) })
	var created []string
	for _, i := range order {
		id := cmd.InsuranceIDs[i]
		if h := histories[i]; h.ours != nil {
			out.Cancellations[i] = RequestedCancellation{DocumentID: h.ours.DocumentID(), InsuranceID: id, Status: cancellation.StatusPreparation}
			continue
		}
		docID := DocumentID(cmd.Tenant, cmd.CollectionID, id, histories[i].next)
		in := cancellation.RequestInput{DocumentID: docID, ClientID: cmd.Tenant, Collection: col, InsuranceID: id,
			Generation: histories[i].next, DeliveryMethod: cmd.DeliveryMethod, Email: cmd.Email, PhoneNumber: cmd.PhoneNumber,
			TemplateVersion: signing.TemplateVersion, IdempotencyKey: cmd.IdempotencyKey, RequestHash: cmd.RequestHash}
		_, _, err := s.cancellations.Update(ctx, docID, meta, func(c *cancellation.Cancellation) error { return c.Request(in, now) })
		if errors.Is(err, cancellation.ErrExists) {
			// A concurrent request took this generation first.
			err = &CancellationExistsError{InsuranceID: id, DocumentID: docID}
		}
		if err != nil {
			return CancellationsRequested{}, s.withdraw(ctx, meta, created, fmt.Errorf("request cancellation of %s: %w", id, err))
		}
		created = append(created, docID)
		out.Cancellations[i] = RequestedCancellation{DocumentID: docID, InsuranceID: id, Status: cancellation.StatusPreparation}
	}
	return out, nil
}

// checkCancellationRequest checks what needs nothing loaded, and canonicalises the ids.
func checkCancellationRequest(cmd *RequestCancellations) error {
	if cmd.Tenant == "" {
		return fmt.Errorf("request cancellations without a tenant: %w", domain.ErrInvalid)
	}
	id, ok := uuids.Canonical(cmd.CollectionID)
	if !ok {
		return &domain.FieldError{Field: FieldCollectionID, Reason: "must be a collection id (a UUID)"}
	}
	cmd.CollectionID = id
	switch n := len(cmd.InsuranceIDs); {
	case n == 0:
		return &domain.FieldError{Field: FieldInsuranceIDs, Reason: "must name at least one insurance"}
	case n > MaxInsurancesPerCancellation:
		return &domain.FieldError{Field: FieldInsuranceIDs, Reason: fmt.Sprintf("must name at most %d insurances", MaxInsurancesPerCancellation)}
	}
	for i, ins := range cmd.InsuranceIDs {
		field := fmt.Sprintf("%s[%d]", FieldInsuranceIDs, i)
		if ins == "" || len(ins) > maxInsuranceID {
			return &domain.FieldError{Field: field, Reason: fmt.Sprintf("must be 1 to %d characters", maxInsuranceID)}
		}
		if slices.Contains(cmd.InsuranceIDs[:i], ins) {
			return &domain.FieldError{Field: field, Reason: "is a duplicate"}
		}
	}
	return cancellation.CheckDelivery(cmd.DeliveryMethod, cmd.Email, cmd.PhoneNumber)
}

// history reads the cancellations of one insurance, generation by generation, to the first that
// does not exist.
func (s *CancellationService) history(ctx context.Context, cmd RequestCancellations, insuranceID string) (history, error) {
	var h history
	for n := 0; n < MaxCancellationsPerInsurance; n++ {
		c, err := s.cancellations.Load(ctx, DocumentID(cmd.Tenant, cmd.CollectionID, insuranceID, n))
		if err != nil {
			return history{}, fmt.Errorf("request cancellations: read cancellations of %s: %w", insuranceID, err)
		}
		if !c.Exists() {
			h.next = n
			return h, nil
		}
		h.latest = c
		if cmd.IdempotencyKey != "" {
			if p := c.Requested().Personal; p != nil && p.IdempotencyKey == cmd.IdempotencyKey {
				if !domain.SameRequest(p.RequestHash, cmd.RequestHash, "") {
					return history{}, ErrIdempotencyKeyReused
				}
				h.ours = c
			}
		}
	}
	return history{}, fmt.Errorf("insurance %s: %w", insuranceID, ErrTooManyCancellations)
}

// withdraw cancels the documents a refused request created before it was refused, so that a
// refusal leaves nothing to sign, and returns cause (with any failure to withdraw).
func (s *CancellationService) withdraw(ctx context.Context, meta repository.Meta, documentIDs []string, cause error) error {
	now := s.now()
	for _, id := range documentIDs {
		if _, _, err := s.cancellations.Update(context.WithoutCancel(ctx), id, meta, func(c *cancellation.Cancellation) error {
			return c.Cancel(cancellation.CanceledByClient, now)
		}); err != nil && !errors.Is(err, cancellation.ErrFinal) {
			return fmt.Errorf("%w (and withdrawing %s: %w)", cause, id, err)
		}
	}
	return cause
}

// Cancel withdraws a cancellation that is not final; it returns the cancellation, now CANCELED.
// Another client's, or none, is ErrCancellationNotFound; another user's, for a session,
// ErrCancellationOfOtherUser; a final one cancellation.ErrFinal.
func (s *CancellationService) Cancel(ctx context.Context, cmd CancelCancellation) (*cancellation.Cancellation, error) {
	id, ok := uuids.Canonical(cmd.DocumentID)
	if !ok {
		return nil, ErrCancellationNotFound
	}
	meta := repository.Meta{Tenant: cmd.Tenant, CorrelationID: cmd.CorrelationID, CausationID: cmd.RequestID, Actor: actor(cmd.Tenant, cmd.SessionUser)}
	c, _, err := s.cancellations.Update(ctx, id, meta, func(c *cancellation.Cancellation) error {
		if !c.Exists() || c.ClientID() != cmd.Tenant {
			return ErrCancellationNotFound
		}
		if cmd.SessionUser != "" && c.UserUUID() != cmd.SessionUser {
			return ErrCancellationOfOtherUser
		}
		return c.Cancel(cancellation.CanceledByClient, s.now())
	})
	if err != nil {
		return nil, fmt.Errorf("cancel %s: %w", id, err)
	}
	return c, nil
}

// ProviderCallback is a callback of the signing provider whose signature was verified.
type ProviderCallback struct {
	EventID string
	// Reference is Samla's document id, as the provider echoes it.
	Reference string
}

// NoteProviderCallback records a verified callback about one of the client's cancellations, so
// that the connector reads the process at the provider at once (it follows the cancellation's
// events); a replayed callback, or one about a cancellation that needs nothing more, records
// nothing. A cancellation that is not the client's is ErrCancellationNotFound.
func (s *CancellationService) NoteProviderCallback(ctx context.Context, tenant string, cb ProviderCallback, correlationID string) error {
	id, ok := uuids.Canonical(cb.Reference)
	if !ok {
		return ErrCancellationNotFound
	}
	meta := repository.Meta{Tenant: tenant, CorrelationID: correlationID, Actor: "signing-provider:" + tenant}
	_, _, err := s.cancellations.Update(ctx, id, meta, func(c *cancellation.Cancellation) error {
		if !c.Exists() || c.ClientID() != tenant {
			return ErrCancellationNotFound
		}
		_, err := c.NoteProviderCallback(cb.EventID, s.now())
		return err
	})
	if err != nil {
		return fmt.Errorf("provider callback for %s: %w", id, err)
	}
	return nil
}

// SigningKey is the client's signing-provider key, for verifying the provider's callbacks; false
// when the client has none (or does not exist).
func (s *CancellationService) SigningKey(ctx context.Context, tenant string) (string, bool, error) {
	cl, err := s.clients.Load(ctx, tenant)
	if err != nil {
		return "", false, fmt.Errorf("load client %s: %w", tenant, err)
	}
	cfg, ok := cl.Signing()
	return cfg.ProviderKey, ok, nil
}

// actor names who acts in the events' metadata: the client, or one of its users' sessions.
func actor(tenant, sessionUser string) string {
	if sessionUser != "" {
		return "session:" + tenant
	}
	return "client:" + tenant
}
