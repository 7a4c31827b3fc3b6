package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/collection"
)

// ErrCollectionNotFound is a collection that does not exist or belongs to another client (HTTP
// 404): a client must not learn that another client's collection exists.
var ErrCollectionNotFound = errors.New("collection not found")

// MaxSupplyAttempts bounds the load/decide/save rounds of one supplement-info request. A
// conflict means the connector appended to the stream in between (a claim, a status change);
// the collection moves a few times per minute at most, so a handful of rounds always suffices
// unless something is badly wrong, and then the client gets an error rather than a hang.
const MaxSupplyAttempts = 5

// SupplyInfo is the command behind POST /collections/{collectionId}/supplement-info, already
// checked for shape by the handler. Kind says which of Inputs and Responses it carries.
type SupplyInfo struct {
	Tenant         string // the authenticated client
	CollectionID   string
	IdempotencyKey string // "" when the client sent none
	// RequestHash identifies the request's content, so that a retry with the same key can be told
	// from a different request reusing the key.
	RequestHash   string
	Kind          collection.InputKind
	Inputs        []collection.Input          // personal data: never logged
	Responses     []collection.ClientResponse // personal data: never logged
	CorrelationID string
	RequestID     string // becomes the events' causation id
}

// Supplied is the outcome of accepted supplement-info.
type Supplied struct {
	// Replayed is true when an earlier request with the same Idempotency-Key supplied it.
	Replayed bool
}

// SupplyInfo hands the user's input or the client's responses to a collection. It returns
// ErrCollectionNotFound, a *collection.InputRejectedError (nothing recorded),
// collection.ErrNotAwaitingInput or ErrIdempotencyKeyReused for the refusals the contract names.
func (s *CollectionService) SupplyInfo(ctx context.Context, cmd SupplyInfo) (Supplied, error) {
	if cmd.Tenant == "" || cmd.CollectionID == "" {
		return Supplied{}, fmt.Errorf("supplement-info without a tenant or collection: %w", domain.ErrInvalid)
	}
	if cmd.Kind != collection.InputKindCollectionInput && cmd.Kind != collection.InputKindClientResponses {
		return Supplied{}, fmt.Errorf("supplement-info of unknown kind %q: %w", cmd.Kind, domain.ErrInvalid)
	}
	stream := collection.StreamName(cmd.CollectionID)
	meta := repository.Meta{Tenant: cmd.Tenant, CorrelationID: cmd.CorrelationID, CausationID: cmd.RequestID, Actor: "client:" + cmd.Tenant}
	req := collection.InputRequest{IdempotencyKey: cmd.IdempotencyKey, RequestHash: cmd.RequestHash}
	var lastErr error
	for range MaxSupplyAttempts {
		agg, err := s.repo.LoadCollection(ctx, cmd.CollectionID)
		if err != nil {
			return Supplied{}, fmt.Errorf("supplement-info: %w", err)
		}
		if !agg.Exists() || agg.ClientID() != cmd.Tenant {
			return Supplied{}, fmt.Errorf("supplement-info for %s: %w", cmd.CollectionID, ErrCollectionNotFound)
		}
		now := s.now().UTC().Truncate(time.Millisecond)
		var events []domain.Event
		if cmd.Kind == collection.InputKindCollectionInput {
			events, err = agg.SupplyInputFor(req, cmd.Inputs, now)
		} else {
			events, err = agg.SupplyClientResponsesFor(req, cmd.Responses, now)
		}
		switch {
		case errors.Is(err, collection.ErrInputKeyReused):
			return Supplied{}, fmt.Errorf("supplement-info: %w: %w", ErrIdempotencyKeyReused, err)
		case err != nil:
			// The domain's typed refusal; the handler maps it with errors.Is / errors.As.
			return Supplied{}, fmt.Errorf("supplement-info for %s: %w", cmd.CollectionID, err)
		case len(events) == 0:
			// A retry of a request whose input the collection took, also in an earlier status.
			return Supplied{Replayed: true}, nil
		}
		_, err = s.repo.Save(ctx, stream, agg.Version(), meta, events)
		if err == nil {
			return Supplied{}, nil
		}
		if !errors.Is(err, eventstore.ErrWrongExpectedRevision) {
			return Supplied{}, fmt.Errorf("supplement-info: %w", err)
		}
		// Someone appended since the load: decide again on the new state, which may now refuse
		// (the status moved on) or recognise this request's own earlier append (a racing retry).
		lastErr = err
	}
	return Supplied{}, fmt.Errorf("supplement-info: gave up after %d conflicting attempts: %w", MaxSupplyAttempts, lastErr)
}
