package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/collection"
)

// ErrCollectionNotFound is a collection that does not exist or belongs to another client (HTTP
// 404): a client must not learn that another client's collection exists.
var ErrCollectionNotFound = errors.New("collection not found")

// ErrUserDeleted is input for a collection whose user was deleted (HTTP 409 USER_DELETED): the
// user's personal data is erased, and the input (an e-mail address, a phone number, a device's
// responses) would be recorded without it, under a key that no longer exists.
var ErrUserDeleted = fmt.Errorf("the collection's user was deleted: %w", domain.ErrConflict)

// SupplyInfo is the command behind POST /collections/{collectionId}/supplement-info, already
// checked for shape by the handler. Kind says which of Inputs and Responses it carries.
type SupplyInfo struct {
	Tenant         string // the authenticated client
	CollectionID   string
	IdempotencyKey string // "" when the client sent none
	// RequestHash identifies the request's content, so that a retry with the same key can be told
	// from a different request reusing the key; LegacyRequestHash is the same in the scheme
	// before ("" for none).
	RequestHash       string
	LegacyRequestHash string
	Kind              collection.InputKind
	Inputs            []collection.Input          // personal data: never logged
	Responses         []collection.ClientResponse // personal data: never logged
	CorrelationID     string
	RequestID         string // becomes the events' causation id
}

// Supplied is the outcome of accepted supplement-info.
type Supplied struct {
	// Replayed is true when an earlier request with the same Idempotency-Key supplied it.
	Replayed bool
}

// SupplyInfo hands the user's input or the client's responses to a collection. It returns
// ErrCollectionNotFound, a *domain.InvalidFieldsError (nothing recorded; its fields are paths
// into the body), collection.ErrNotAwaitingInput, ErrUserDeleted or ErrIdempotencyKeyReused for
// the refusals the contract names. A conflict with the connector's appends is decided again on the new state,
// which may then refuse (the status moved on) or recognise this request's own earlier append (a
// racing retry).
func (s *CollectionService) SupplyInfo(ctx context.Context, cmd SupplyInfo) (Supplied, error) {
	if cmd.Tenant == "" || cmd.CollectionID == "" {
		return Supplied{}, fmt.Errorf("supplement-info without a tenant or collection: %w", domain.ErrInvalid)
	}
	if cmd.Kind != collection.InputKindCollectionInput && cmd.Kind != collection.InputKindClientResponses {
		return Supplied{}, fmt.Errorf("supplement-info of unknown kind %q: %w", cmd.Kind, domain.ErrInvalid)
	}
	meta := repository.Meta{Tenant: cmd.Tenant, CorrelationID: cmd.CorrelationID, CausationID: cmd.RequestID, Actor: "client:" + cmd.Tenant}
	req := collection.InputRequest{IdempotencyKey: cmd.IdempotencyKey, RequestHash: cmd.RequestHash,
		LegacyRequestHash: cmd.LegacyRequestHash}
	var replayed bool
	userChecked := false
	_, _, err := s.repo.Update(ctx, cmd.CollectionID, meta, func(c *collection.Collection) error {
		if !c.Exists() || c.ClientID() != cmd.Tenant {
			return ErrCollectionNotFound
		}
		now := s.now().UTC().Truncate(time.Millisecond)
		var err error
		if cmd.Kind == collection.InputKindCollectionInput {
			err = c.SupplyInputFor(req, cmd.Inputs, now)
		} else {
			err = c.SupplyClientResponsesFor(req, cmd.Responses, now)
		}
		// Recording nothing is a retry of a request whose input the collection took, also in
		// an earlier status.
		replayed = err == nil && len(c.Recorded()) == 0
		if errors.Is(err, collection.ErrNotAwaitingInput) && c.UserUUID() != "" && !userChecked {
			// A deleted user's collections were ended by its erasure: that is why this one
			// takes no input, and the client is told so.
			if u, lerr := s.users.Load(ctx, c.UserUUID()); lerr == nil && u.Exists() && u.Deleted() {
				return ErrUserDeleted
			}
			return err
		}
		if err != nil || replayed || c.UserUUID() == "" || userChecked {
			return err
		}
		// New input for a user's collection: the user must not be deleted. A retry is
		// answered as it was, as a start's is. (A userUuid of a collection started before
		// users existed names no user, and takes input as it always did.)
		u, err := s.users.Load(ctx, c.UserUUID())
		if err != nil {
			return fmt.Errorf("look up the collection's user: %w", err)
		}
		if u.Exists() && u.Deleted() {
			return ErrUserDeleted
		}
		userChecked = true
		return nil
	})
	switch {
	case errors.Is(err, collection.ErrInputKeyReused):
		return Supplied{}, fmt.Errorf("supplement-info: %w: %w", ErrIdempotencyKeyReused, err)
	case err != nil:
		// The domain's typed refusal or a store failure; the handler maps it with errors.Is /
		// errors.As.
		return Supplied{}, fmt.Errorf("supplement-info for %s: %w", cmd.CollectionID, err)
	}
	return Supplied{Replayed: replayed}, nil
}
