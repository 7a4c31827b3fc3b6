package readdb

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/user"
	"github.com/samla/samla/eventschema"
)

// FoldStreams is the projector loop of a read model with one row per stream. It keeps the
// batch's events for which key reports a row key, loads those rows once with load, folds every
// event newer than its row's revision with apply (an event at or below it is a redelivery or a
// replay: a stream's events arrive in order, one Kafka partition per stream), and returns the
// rows apply changed, in the order they first changed. apply reports false for an event that
// changes nothing; its errors are returned as they are.
func FoldStreams[R any](ctx context.Context, batch []eventschema.Envelope,
	key func(eventschema.Envelope) (string, bool),
	load func(context.Context, []string) (map[string]R, error),
	revision func(R) uint64,
	apply func(key string, row R, exists bool, env eventschema.Envelope) (R, bool, error),
) ([]R, error) {
	// The batch's events by index, not copied: an envelope is a dozen words, and a rebuild's
	// batches are pages of thousands.
	type keyed struct {
		key string
		i   int
	}
	events := make([]keyed, 0, len(batch))
	var keys []string
	seen := map[string]bool{}
	for i, env := range batch {
		k, ok := key(env)
		if !ok {
			continue
		}
		events = append(events, keyed{k, i})
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	if len(events) == 0 {
		return nil, nil
	}
	rows, err := load(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("load rows: %w", err)
	}
	if rows == nil {
		rows = map[string]R{}
	}
	changed := map[string]bool{}
	var order []string
	for _, ev := range events {
		env := batch[ev.i]
		row, exists := rows[ev.key]
		if exists && env.Revision <= revision(row) {
			continue // already reflected: a redelivery or a replay
		}
		next, ok, err := apply(ev.key, row, exists, env)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		rows[ev.key] = next
		if !changed[ev.key] {
			changed[ev.key] = true
			order = append(order, ev.key)
		}
	}
	out := make([]R, len(order))
	for i, k := range order {
		out[i] = rows[k]
	}
	return out, nil
}

// EventTime is the domain's own time of an event when it has one, else when it was stored, at
// the ms precision the read models keep.
func EventTime(domainTime time.Time, env eventschema.Envelope) time.Time {
	t := domainTime
	if t.IsZero() {
		t = env.OccurredAt
	}
	return FromMillis(Millis(t))
}

// DeletedUser is the user a user.deleted event deletes; ok is false for any other event. The read
// models that keep a user's personal data erase their copies of it on that event.
func DeletedUser(env eventschema.Envelope) (userUUID string, ok bool) {
	if env.Type != user.EventDeleted || eventschema.Category(env.Stream) != eventschema.Category(user.StreamPrefix) {
		return "", false
	}
	id := strings.TrimPrefix(env.Stream, user.StreamPrefix)
	return id, id != ""
}

// Decoder decodes a stored event, opened: *eventschema.Registry, or a rebuild's memo of the
// events it decoded once for every read model.
type Decoder interface {
	Decode(env eventschema.Envelope) (domain.Event, error)
}

// Decode decodes env into the event type E.
func Decode[E domain.Event](reg Decoder, env eventschema.Envelope) (E, error) {
	var zero E
	ev, err := reg.Decode(env)
	if err != nil {
		return zero, fmt.Errorf("decode %s at %s/%d: %w", env.Type, env.Stream, env.Revision, err)
	}
	e, ok := ev.(E)
	if !ok {
		return zero, fmt.Errorf("%s at %s/%d decoded as %T", env.Type, env.Stream, env.Revision, ev)
	}
	return e, nil
}
