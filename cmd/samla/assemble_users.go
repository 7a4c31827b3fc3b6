// The users of the command role: the application service that creates, deletes and erases them,
// the process manager that finishes erasures a delete left undone, and the liveness check of
// users' sessions.

package main

import (
	"context"
	"fmt"

	"github.com/samla/samla/command/app"
	"github.com/samla/samla/command/erasure"
	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/user"
	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/projections/collectionstatus"
	"github.com/samla/samla/projections/consents"
	"github.com/samla/samla/projections/users"
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
			Consents: consents.NewReader(s.models.Consents, s.keys), Revokes: s.consentRevokes()},
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

// sessionLiveness is the liveness check of users' sessions (httpapi.SessionUsers). The users read
// model answers for every user it knows, live or deleted; a user it does not know yet, created a
// moment ago, is asked of the event store when this process has it (the command role), so that a
// session issued right after POST /users works at once. Without the event store, unknown is not
// live.
type sessionLiveness struct {
	model users.Reader
	store *app.UserService // nil without the command role
}

var _ httpapi.SessionUsers = sessionLiveness{}

func (l sessionLiveness) IsLiveUser(ctx context.Context, clientID, userUUID string) (bool, error) {
	known, err := l.model.Liveness(ctx, clientID, userUUID)
	if err != nil {
		return false, err
	}
	if known != users.Unknown || l.store == nil {
		return known == users.Live, nil
	}
	live, err := l.store.IsLiveUser(ctx, clientID, userUUID)
	if err != nil {
		return false, fmt.Errorf("session liveness: %w", err)
	}
	return live, nil
}

// readModelDeletions is what DELETE /users/{userUuid} waits on (httpcmd.DeletedUsers): the users
// read model alone. The session check also asks the event store about a user the read model has
// not seen yet, which says "not live" the moment the user is deleted; but a read model that then
// applies the user's creation before its deletion would let the user's tokens work again for a
// moment after the 204. Only the read model showing the deletion ends them for good.
type readModelDeletions struct{ model users.Reader }

func (d readModelDeletions) IsDeletedUser(ctx context.Context, clientID, userUUID string) (bool, error) {
	known, err := d.model.Liveness(ctx, clientID, userUUID)
	if err != nil {
		return false, err
	}
	return known == users.Deleted, nil
}
