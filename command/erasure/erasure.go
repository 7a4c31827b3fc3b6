// Package erasure is the process manager that finishes users' erasures. DELETE /users/{userUuid}
// records user.deleted, releases the user's externalId and destroys its keys, in that order; a
// delete that stops in between (a crash, a key store that went away) would leave a deleted user
// whose personal data stays readable until the client retries, which it may never do. So every
// user.deleted event, as Kafka delivers it to this consumer group, is handed to an Eraser
// (app.UserService.FinishErasure), which does whatever is left and nothing when nothing is.
package erasure

import (
	"context"
	"fmt"
	"strings"

	"github.com/samla/samla/command/app"
	"github.com/samla/samla/domain/user"
	"github.com/samla/samla/eventschema"
)

// GroupID is the Kafka consumer group of the process manager: its own offsets, so that neither
// the projections nor the connectors hold it back.
const GroupID = "samla.user-erasure"

// Topic is what it consumes: the users' events.
func Topic() string { return eventschema.Topic(eventschema.Category(user.StreamPrefix)) }

// Eraser finishes the erasure of a deleted user (*app.UserService). It must be idempotent: a
// batch is delivered at least once, and the DELETE that recorded the event may still be
// erasing beside it.
type Eraser interface {
	FinishErasure(ctx context.Context, cmd app.FinishErasure) error
}

// Manager hands every user.deleted to its Eraser.
type Manager struct {
	eraser Eraser
}

// New returns the process manager.
func New(eraser Eraser) *Manager {
	if eraser == nil {
		panic("erasure.New: the eraser is required")
	}
	return &Manager{eraser: eraser}
}

// HandleBatch finishes the erasure of the user of every user.deleted in the batch, in order. A
// failure fails the batch, which the consumer then delivers again: an erasure is never skipped.
func (m *Manager) HandleBatch(ctx context.Context, batch []eventschema.Envelope) error {
	for _, env := range batch {
		if env.Type != user.EventDeleted {
			continue
		}
		id, ok := strings.CutPrefix(env.Stream, user.StreamPrefix)
		if !ok || id == "" {
			continue // not a user's stream: nothing of ours
		}
		if err := m.eraser.FinishErasure(ctx, app.FinishErasure{UserUUID: id, CorrelationID: env.CorrelationID,
			CausationID: env.EventID}); err != nil {
			return fmt.Errorf("erasure of user %s (event %s): %w", id, env.EventID, err)
		}
	}
	return nil
}
