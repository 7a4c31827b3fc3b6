package users

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/user"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/projections/internal/sealed"
	"github.com/samla/samla/projections/readdb"
)

// ProjectorName names the projection; its Kafka consumer group is derived from it. It is
// "users-v2" since reservations keep their holders sealed (user_external_ids_v2): the new
// consumer group projects every event again from the start of the topics into the new table,
// and the old one, which held the holders in plain text, is dropped.
const ProjectorName = "users-v2"

// Projector folds user and externalid events into Store rows. It takes envelopes whose personal
// member is opened (eventschema.OpenPersonal), as projections hand every projector them, and seals
// the personal data it keeps under the user's data subject with keys.
type Projector struct {
	reg   readdb.Decoder
	store Store
	keys  eventschema.Keys
}

// NewProjector returns the projector writing to store, decoding events with reg and sealing the
// externalIds it keeps with keys.
func NewProjector(reg readdb.Decoder, store Store, keys eventschema.Keys) *Projector {
	if keys == nil {
		panic("users.NewProjector: keys are required: the read model keeps externalIds sealed only")
	}
	return &Projector{reg: reg, store: store, keys: keys}
}

// Name is the projection's stable name.
func (p *Projector) Name() string { return ProjectorName }

// Categories are the event categories the projector folds; its consumer reads only their
// topics. Users' events and their externalId reservations.
func (p *Projector) Categories() []string {
	return []string{eventschema.Category(user.StreamPrefix), eventschema.Category(user.ReservationStreamPrefix)}
}

// Handle applies a batch: user events fold into user rows (each newer than its row's revision),
// reservation events into reservation rows; each kind is written in one batch. Events of other
// categories are ignored. Handling the same batch twice, or an older one after a newer one,
// changes nothing.
func (p *Projector) Handle(ctx context.Context, batch []eventschema.Envelope) error {
	rows, err := readdb.FoldStreams(ctx, batch, userKey, p.store.GetMany, rowRevision,
		func(id string, row Row, exists bool, env eventschema.Envelope) (Row, bool, error) {
			return p.apply(ctx, id, row, exists, env)
		})
	if err != nil {
		return fmt.Errorf("%s: %w", ProjectorName, err)
	}
	var reservations []ExternalIDRow
	for _, env := range batch {
		r, ok, err := p.reservation(ctx, env)
		if err != nil {
			return fmt.Errorf("%s: %w", ProjectorName, err)
		}
		if ok {
			reservations = append(reservations, r)
		}
	}
	if err := p.store.Upsert(ctx, rows); err != nil {
		return fmt.Errorf("%s: write %d users: %w", ProjectorName, len(rows), err)
	}
	if err := p.store.UpsertExternalIDs(ctx, reservations); err != nil {
		return fmt.Errorf("%s: write %d external ids: %w", ProjectorName, len(reservations), err)
	}
	return nil
}

// userKey is the row key of a user event.
func userKey(env eventschema.Envelope) (string, bool) {
	if eventschema.Category(env.Stream) != eventschema.Category(user.StreamPrefix) {
		return "", false
	}
	return strings.TrimPrefix(env.Stream, user.StreamPrefix), true
}

// apply folds one user event into row. Anything before user.created (which begins every user
// stream, and Kafka keeps a stream's order) changes nothing: a row without its tenant would be
// worse than none.
func (p *Projector) apply(ctx context.Context, id string, row Row, exists bool, env eventschema.Envelope) (Row, bool, error) {
	switch env.Type {
	case user.EventCreated:
		if exists {
			return row, false, nil // a stream starts once
		}
		ev, err := readdb.Decode[user.Created](p.reg, env)
		if err != nil {
			return row, false, err
		}
		tenant := env.Tenant
		if tenant == "" {
			tenant = ev.ClientID
		}
		row = Row{UserUUID: id, Tenant: tenant, CreatedAt: readdb.EventTime(ev.CreatedAt, env), Revision: env.Revision}
		if ev.Personal != nil {
			if row.Personal, err = p.seal(ctx, id, *ev.Personal); err != nil {
				return row, false, err
			}
		}
		return row, true, nil
	case user.EventDeleted:
		if !exists {
			return row, false, nil
		}
		ev, err := readdb.Decode[user.Deleted](p.reg, env)
		if err != nil {
			return row, false, err
		}
		// The read model's copy of the externalId goes with the user: a deleted user is shown
		// without it, and nothing finds it by it.
		row.DeletedAt, row.Personal, row.Revision = readdb.EventTime(ev.DeletedAt, env), nil, env.Revision
		return row, true, nil
	default:
		// A type this build does not know yet: the row records that it reflects it, undecoded.
		if !exists {
			return row, false, nil
		}
		row.Revision = env.Revision
		return row, true, nil
	}
}

// seal is the stored form of a user's personal data: sealed under its data subject. A subject
// erased already (a replay after the erasure) keeps nothing.
func (p *Projector) seal(ctx context.Context, id string, personal user.CreatedPerson) ([]byte, error) {
	plain, err := json.Marshal(personal)
	if err != nil {
		return nil, fmt.Errorf("user %s: encode personal data: %w", id, err)
	}
	sealed, err := eventschema.Seal(ctx, p.keys, domain.UserSubject(id), plain)
	if errors.Is(err, eventschema.ErrSubjectErased) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("user %s: %w", id, err)
	}
	return sealed, nil
}

// reservation is the row an externalid event makes: each event says all there is to know of
// its reservation, so none is read first.
func (p *Projector) reservation(ctx context.Context, env eventschema.Envelope) (ExternalIDRow, bool, error) {
	if eventschema.Category(env.Stream) != eventschema.Category(user.ReservationStreamPrefix) {
		return ExternalIDRow{}, false, nil
	}
	key := strings.TrimPrefix(env.Stream, user.ReservationStreamPrefix)
	switch env.Type {
	case user.EventExternalIDReserved:
		ev, err := readdb.Decode[user.ExternalIDReserved](p.reg, env)
		if err != nil {
			return ExternalIDRow{}, false, err
		}
		row := ExternalIDRow{Key: key, Tenant: ev.ClientID, Revision: env.Revision}
		if h := ev.Personal; h != nil {
			subject := h.Subject
			if subject == "" {
				subject = domain.UserSubject(h.UserUUID) // a hold of version 1, which named its holder
			}
			if row.Holder, err = sealHolder(ctx, p.keys, subject, h.UserUUID); err != nil {
				return ExternalIDRow{}, false, fmt.Errorf("reservation %s: %w", env.Stream, err)
			}
		}
		return row, true, nil
	case user.EventExternalIDReleased:
		// A released reservation finds nobody: who held it last is not kept.
		return ExternalIDRow{Key: key, Tenant: env.Tenant, Released: true, Revision: env.Revision}, true, nil
	}
	return ExternalIDRow{}, false, nil
}

// holderOf is the stored form of a reservation's holder, before it is sealed.
type holderOf struct {
	UserUUID string `json:"userUuid"`
}

// sealHolder seals a reservation's holder under the subject of its hold (domain.HolderSubject),
// as the event was: the sealed form names that subject, never the user, and the user's erasure
// destroys its key. A subject erased already keeps nothing.
func sealHolder(ctx context.Context, keys eventschema.Keys, subject, userUUID string) (sealed.Value, error) {
	plain, err := json.Marshal(holderOf{UserUUID: userUUID})
	if err != nil {
		return sealed.Value{}, fmt.Errorf("encode the holder: %w", err)
	}
	return sealed.Seal(ctx, keys, subject, plain)
}
