package collectionstatus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/user"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/projections/readdb"
)

// ProjectorName names the projection; its Kafka consumer group is derived from it, so it must
// never change (a new name would replay every event into the read model from the start).
const ProjectorName = "collection-status"

// Projector folds collection events into Store rows. It takes envelopes opened
// (eventschema.OpenPersonal; projections.ReadModels hands it them so) and seals the row's
// personal part under the collection's data subject with keys.
type Projector struct {
	reg   readdb.Decoder
	store Store
	keys  eventschema.Keys
}

// NewProjector returns the projector writing to store, decoding events with reg and sealing
// personal data with keys.
func NewProjector(reg readdb.Decoder, store Store, keys eventschema.Keys) *Projector {
	return &Projector{reg: reg, store: store, keys: keys}
}

// Name is the projection's stable name.
func (p *Projector) Name() string { return ProjectorName }

// Categories are the event categories the projector folds; its consumer reads only their
// topics. Collections' events, and users' for the erasure of a deleted user's personal parts.
func (p *Projector) Categories() []string {
	return []string{eventschema.Category(collection.StreamPrefix), eventschema.Category(user.StreamPrefix)}
}

// Handle applies a batch: it loads the rows of the batch's collections once, folds every event
// newer than its row's revision, and writes the changed rows in one Upsert. Then each
// user.deleted of the batch erases the personal parts of that user's collections (the erasure
// destroyed the key they are sealed under; this removes the ciphertext too). Events of other
// categories are ignored, so the projector can consume every topic. Handling the same batch
// twice, or an older one after a newer one, changes nothing.
func (p *Projector) Handle(ctx context.Context, batch []eventschema.Envelope) error {
	rows, err := readdb.FoldStreams(ctx, batch, foldKey, p.store.GetMany,
		func(r Row) uint64 { return r.Revision },
		func(id string, row Row, exists bool, env eventschema.Envelope) (Row, bool, error) {
			return p.apply(ctx, id, row, exists, env)
		})
	if err != nil {
		return fmt.Errorf("%s: %w", ProjectorName, err)
	}
	if len(rows) > 0 {
		if err := p.store.Upsert(ctx, rows); err != nil {
			return fmt.Errorf("%s: write %d rows: %w", ProjectorName, len(rows), err)
		}
	}
	for _, env := range batch {
		if id, ok := readdb.DeletedUser(env); ok {
			if err := p.store.ErasePersonal(ctx, env.Tenant, id); err != nil {
				return fmt.Errorf("%s: %w", ProjectorName, err)
			}
		}
	}
	return nil
}

// foldKey is the row key of a collection event.
func foldKey(env eventschema.Envelope) (string, bool) {
	if eventschema.Category(env.Stream) != "collection" {
		return "", false
	}
	return strings.TrimPrefix(env.Stream, collection.StreamPrefix), true
}

// apply folds one event into row. It reports false for an event that cannot change the read
// model: anything but collection.started on a collection without a row. A stream always begins
// with collection.started and Kafka keeps a stream's order, so that only happens if the
// started event itself was lost, and inventing a row without its tenant and company would be
// worse than showing none.
func (p *Projector) apply(ctx context.Context, id string, row Row, exists bool, env eventschema.Envelope) (Row, bool, error) {
	switch env.Type {
	case collection.EventStarted:
		if exists {
			return row, false, nil // a stream starts once; a second started event is not ours to fix
		}
		ev, err := p.decode(env)
		if err != nil {
			return row, false, err
		}
		started, ok := ev.(collection.Started)
		if !ok {
			return row, false, fmt.Errorf("%s at %s/%d decoded as %T", env.Type, env.Stream, env.Revision, ev)
		}
		tenant := env.Tenant
		if tenant == "" {
			tenant = started.ClientID
		}
		at := readdb.EventTime(started.StartedAt, env)
		return Row{
			CollectionID: id, Tenant: tenant, Company: started.Company, Product: string(started.Product),
			LoginMethod: started.LoginMethod, APIVersion: started.APIVersion, UserUUID: started.UserUUID,
			Status: string(collection.StatusRunning), CreatedAt: at, UpdatedAt: at, Revision: env.Revision,
		}, true, nil
	case collection.EventStatusChanged:
		if !exists {
			return row, false, nil
		}
		ev, err := p.decode(env)
		if err != nil {
			return row, false, err
		}
		changed, ok := ev.(collection.StatusChanged)
		if !ok {
			return row, false, fmt.Errorf("%s at %s/%d decoded as %T", env.Type, env.Stream, env.Revision, ev)
		}
		row.Status = string(changed.To)
		// Extra information and details belong to the status they came with: a change without
		// them clears the previous status's input kinds, instructions, EID order and secret.
		row.ExtraInformation = changed.ExtraInformation
		row.RequiredInputTypes = nilIfEmpty(changed.RequiredInputTypes)
		// The instructions and the QR secret come from the event's personal part: the poll must
		// hand them to the client, whereas the audit history never sees them.
		row.Personal = nil
		if changed.Personal != nil {
			if row.Personal, err = p.seal(ctx, id, row, *changed.Personal); err != nil {
				return row, false, err
			}
		}
		row.Message, row.EIDOrder, row.Deadline = changed.Message, changed.EIDOrder, changed.Deadline
		row.UpdatedAt = readdb.EventTime(changed.ChangedAt, env)
		row.Revision = env.Revision
		return row, true, nil
	case collection.EventInputSupplied:
		if !exists {
			return row, false, nil
		}
		ev, err := p.decode(env)
		if err != nil {
			return row, false, err
		}
		supplied, ok := ev.(collection.InputSupplied)
		if !ok {
			return row, false, fmt.Errorf("%s at %s/%d decoded as %T", env.Type, env.Stream, env.Revision, ev)
		}
		// The status took its input (the aggregate then awaits neither input nor responses), so
		// the poll stops asking for it; a client that acts on what the poll asks would otherwise
		// post again and only get a conflict. The message, EID order and deadline still hold.
		row.RequiredInputTypes = nil
		if row.Personal, err = p.withoutInstructions(ctx, id, row); err != nil {
			return row, false, err
		}
		row.UpdatedAt = readdb.EventTime(supplied.SuppliedAt, env)
		row.Revision = env.Revision
		return row, true, nil
	default:
		// Other collection events (claimed, data collected, and types added later) do not show
		// in the status, but the row still records that it reflects them. They are not decoded,
		// so a type this build does not know yet cannot stop the projection.
		if !exists {
			return row, false, nil
		}
		row.UpdatedAt = readdb.EventTime(time.Time{}, env)
		row.Revision = env.Revision
		return row, true, nil
	}
}

// foldSealed is apply for an envelope as stored, sealed: the status view's follower and the
// read-your-writes fallback read events from Kafka and the event store without the projections'
// opening. Only the events apply decodes have their personal part opened; it only notes the
// revision of the others.
func (p *Projector) foldSealed(ctx context.Context, id string, row Row, exists bool, env eventschema.Envelope) (Row, bool, error) {
	switch env.Type {
	case collection.EventStarted, collection.EventStatusChanged, collection.EventInputSupplied:
		payload, _, err := eventschema.OpenPersonal(ctx, p.keys, env.Payload)
		if err != nil {
			return row, false, fmt.Errorf("open %s at %s/%d: %w", env.Type, env.Stream, env.Revision, err)
		}
		env.Payload = payload
	}
	return p.apply(ctx, id, row, exists, env)
}

func (p *Projector) decode(env eventschema.Envelope) (any, error) {
	ev, err := p.reg.Decode(env)
	if err != nil {
		return nil, fmt.Errorf("decode %s at %s/%d: %w", env.Type, env.Stream, env.Revision, err)
	}
	return ev, nil
}

// seal is the stored form of a status's personal part: sealed under the collection's data
// subject, nil when there is nothing to keep or the subject is erased.
func (p *Projector) seal(ctx context.Context, id string, row Row, personal collection.StatusPersonal) ([]byte, error) {
	if len(personal.Instructions) == 0 && personal.QRStartSecret == "" {
		return nil, nil
	}
	plain, err := json.Marshal(personal)
	if err != nil {
		return nil, fmt.Errorf("collection status %s: %w", id, err)
	}
	sealed, err := eventschema.Seal(ctx, p.keys, collection.DataSubject(id, row.UserUUID), plain)
	if errors.Is(err, eventschema.ErrSubjectErased) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("collection status %s: %w", id, err)
	}
	return sealed, nil
}

// withoutInstructions is the row's personal part without its instructions (accepted input):
// opened, the instructions dropped and the rest (the QR secret) sealed again.
func (p *Projector) withoutInstructions(ctx context.Context, id string, row Row) ([]byte, error) {
	if row.Personal == nil {
		return nil, nil
	}
	personal, erased, err := OpenPersonal(ctx, p.keys, row.Personal)
	if err != nil {
		return nil, fmt.Errorf("collection status %s: %w", id, err)
	}
	if erased {
		return nil, nil
	}
	personal.Instructions = nil
	return p.seal(ctx, id, row, personal)
}

// OpenPersonal opens a row's stored personal part (Row.Personal): sealed or, in rows written
// before sealing, plain. An erased subject reads as nothing and erased=true; a lost key is an
// error.
func OpenPersonal(ctx context.Context, keys eventschema.Keys, stored []byte) (collection.StatusPersonal, bool, error) {
	var personal collection.StatusPersonal
	if len(stored) == 0 {
		return personal, false, nil
	}
	plain, erased, err := eventschema.Open(ctx, keys, stored)
	if err != nil || erased {
		return personal, erased, err
	}
	if err := json.Unmarshal(plain, &personal); err != nil {
		return personal, false, fmt.Errorf("decode the status's personal part: %w", err)
	}
	return personal, false, nil
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}
