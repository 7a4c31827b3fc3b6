// The users of the command role: the application service that creates, deletes and erases them,
// and the process manager that finishes erasures a delete left undone.

package main

import (
	"context"

	"github.com/samla/samla/command/app"
	"github.com/samla/samla/command/erasure"
	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain/cancellation"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/user"
	"github.com/samla/samla/projections/cancellations"
	"github.com/samla/samla/projections/collectionstatus"
	"github.com/samla/samla/projections/consents"
)

// commandUsers is the command role's user service, built once: the routes, the session routes'
// liveness check and the erasure process manager share it. Its erasures destroy keys through the
// process's key cache (s.keys), which drops them at once.
func (s *Service) commandUsers() (*app.UserService, error) {
	if s.userService != nil {
		return s.userService, nil
	}
	// The fingerprint key also names the users' externalId reservations (user.ExternalIDKey):
	// the command role reserves under it and the query role finds users by it, so every
	// replica of either must have the same key.
	key, err := fingerprintKey(s.cfg)
	if err != nil {
		return nil, err
	}
	s.userService = app.NewUserService(
		repository.New(s.store, s.registry, user.Kind, repository.WithKeys(s.keys)),
		repository.New(s.store, s.registry, user.ReservationKind, repository.WithKeys(s.keys)),
		key,
		// The running collections an erasure ends are listed by the status read model, which
		// the command role opens for its session checks anyway; the event store decides.
		app.Erasure{Keys: s.keys, Collections: collectionstatus.NewReader(s.models.Status, s.keys),
			Ends: repository.New(s.store, s.registry, collection.Kind, repository.WithKeys(s.keys)),
			// The user's consents are listed by the consents read model, which the command role
			// opens anyway; the event store decides which are live.
			Consents: consents.NewReader(s.models.Consents, s.keys), Revokes: s.consentRevokes(),
			// And its cancellations by the cancellations read model, likewise.
			Cancellations: cancellations.NewReader(s.models.Cancellations, s.keys),
			Withdraws:     repository.New(s.store, s.registry, cancellation.Kind, repository.WithKeys(s.keys))},
		nil)
	return s.userService, nil
}

// startErasure consumes the users' events in a group of its own and finishes the erasure of
// every deleted user whose DELETE stopped before it was done (command/erasure).
func (s *Service) startErasure(ctx context.Context) error {
	svc, err := s.commandUsers()
	if err != nil {
		return err
	}
	m := erasure.New(svc)
	consume := s.consume(erasure.GroupID, []string{erasure.Topic()})
	s.runRole(ctx, "user erasure", func(ctx context.Context) error {
		return consume(ctx, erasure.GroupID, m.HandleBatch)
	})
	return nil
}
