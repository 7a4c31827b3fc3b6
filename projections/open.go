package projections

import (
	"context"
	"fmt"

	"github.com/samla/samla/eventschema"
)

// opening hands a projector every envelope opened (eventschema.OpenPersonal): its personal
// member plain, or gone when the subject is erased. It is where projections open events, so no
// projector can decode a sealed payload (which Decode refuses anyway); only the audit history,
// which records whose data each sealed event held, opens for itself. A lost key
// fails the batch: the projection stops loudly rather than project an event without its
// personal data as if it never had any.
type opening struct {
	Projector
	keys eventschema.Keys
}

// Opening wraps p so that it sees opened envelopes.
func Opening(p Projector, keys eventschema.Keys) Projector { return opening{Projector: p, keys: keys} }

// Handle opens the batch, then hands it to the projector. The envelopes are copies: the
// caller's batch (which other projectors may share, as in a rebuild) stays as it was.
func (o opening) Handle(ctx context.Context, batch []eventschema.Envelope) error {
	opened := make([]eventschema.Envelope, len(batch))
	for i, env := range batch {
		payload, _, err := eventschema.OpenPersonal(ctx, o.keys, env.Payload)
		if err != nil {
			return fmt.Errorf("open %s at %s/%d: %w", env.Type, env.Stream, env.Revision, err)
		}
		env.Payload = payload
		opened[i] = env
	}
	return o.Projector.Handle(ctx, opened)
}

// Categories are those of the projector opened, if it names them.
func (o opening) Categories() []string {
	if c, ok := o.Projector.(categorized); ok {
		return c.Categories()
	}
	return nil
}
