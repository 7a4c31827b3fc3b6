package collectiondata

import (
	"context"
	"fmt"
	"strings"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/user"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/projections/readdb"
)

// ProjectorName names the projection; its Kafka consumer group is derived from it, so it must
// never change (a new name would replay every event into the read model from the start).
const ProjectorName = "collection-data"

// Projector folds collection events into Store rows and documents.
type Projector struct {
	reg   readdb.Decoder
	store Store
}

// NewProjector returns the projector writing to store, decoding events with reg.
func NewProjector(reg readdb.Decoder, store Store) *Projector {
	return &Projector{reg: reg, store: store}
}

// Name is the projection's stable name.
func (p *Projector) Name() string { return ProjectorName }

// Categories are the event categories the projector folds; its consumer reads only their
// topics. Collections' events, and users' for the erasure of a deleted user's data.
func (p *Projector) Categories() []string {
	return []string{eventschema.Category(collection.StreamPrefix), eventschema.Category(user.StreamPrefix)}
}

// Handle applies a batch: it loads the rows of the batch's collections once, folds every event
// newer than its row's revision, and writes the changed rows and new documents in one Upsert;
// then each user.deleted of the batch erases the personal data of that user's collections.
// Events of other categories are ignored, so the projector can consume every topic. Handling
// the same batch twice, or an older one after a newer one, changes nothing: a stream's events
// arrive in order (one Kafka partition per stream), so an event at or below the row's revision
// has been folded already.
func (p *Projector) Handle(ctx context.Context, batch []eventschema.Envelope) error {
	var docs []Document
	rows, err := readdb.FoldStreams(ctx, batch, foldKey, p.store.GetMany,
		func(r Row) uint64 { return r.Revision },
		func(id string, row Row, exists bool, env eventschema.Envelope) (Row, bool, error) {
			next, doc, ok, err := p.apply(id, row, exists, env)
			if ok && doc != nil {
				docs = append(docs, *doc)
			}
			return next, ok, err
		})
	if err != nil {
		return fmt.Errorf("%s: %w", ProjectorName, err)
	}
	if len(rows) > 0 {
		if err := p.store.Upsert(ctx, rows, docs); err != nil {
			return fmt.Errorf("%s: write %d rows and %d documents: %w", ProjectorName, len(rows), len(docs), err)
		}
	}
	// A deleted user's collections keep their data without its personal part: the erasure
	// destroyed the key it is sealed under, and this removes the ciphertext too.
	for _, env := range batch {
		if id, ok := readdb.DeletedUser(env); ok {
			if err := p.store.ErasePersonal(ctx, env.Tenant, id); err != nil {
				return fmt.Errorf("%s: %w", ProjectorName, err)
			}
		}
	}
	return nil
}

// foldKey is the row key of a collection event this read model shows.
func foldKey(env eventschema.Envelope) (string, bool) {
	if eventschema.Category(env.Stream) != "collection" || !relevant(env.Type) {
		return "", false
	}
	return strings.TrimPrefix(env.Stream, collection.StreamPrefix), true
}

// relevant lists the event types that change the read model. The rest (claimed, input
// supplied, the client's own uploaded PDF, and types added later) are skipped without being
// decoded, so that they cost no write, and a type this build does not know yet cannot stop
// the projection.
func relevant(typ string) bool {
	switch typ {
	case collection.EventStarted, collection.EventStatusChanged, collection.EventInsurancesCollected,
		collection.EventWealthCollected, collection.EventDocumentCollected:
		return true
	}
	return false
}

// apply folds one event into row, returning the new row, the document the event recorded (if
// any), and false for an event that changes nothing. An event of a collection without a row
// changes nothing unless it is collection.started: a stream always begins with it and Kafka
// keeps a stream's order, so that only happens if the started event itself was lost, and data
// without its tenant would be worse than none.
func (p *Projector) apply(id string, row Row, exists bool, env eventschema.Envelope) (Row, *Document, bool, error) {
	if !exists && env.Type != collection.EventStarted {
		return row, nil, false, nil
	}
	ev, err := p.reg.Decode(env)
	if err != nil {
		return row, nil, false, fmt.Errorf("decode %s at %s/%d: %w", env.Type, env.Stream, env.Revision, err)
	}
	var doc *Document
	switch e := ev.(type) {
	case collection.Started:
		if exists {
			return row, nil, false, nil // a stream starts once; a second started event is not ours to fix
		}
		tenant := env.Tenant
		if tenant == "" {
			tenant = e.ClientID
		}
		row = Row{CollectionID: id, Tenant: tenant, Company: e.Company, Product: string(e.Product),
			Status: string(collection.StatusRunning), UserUUID: e.UserUUID, UpdatedAt: readdb.EventTime(e.StartedAt, env)}
	case collection.StatusChanged:
		if string(e.To) == row.Status {
			// Staying in a status (a new EID order, new instructions) is nothing this read
			// model shows; skipping it saves a row version per poll-driven refresh.
			return row, nil, false, nil
		}
		row.Status, row.UpdatedAt = string(e.To), readdb.EventTime(e.ChangedAt, env)
	case collection.InsurancesCollected:
		row.addInsurances(e)
		row.UpdatedAt = readdb.EventTime(e.CollectedAt, env)
	case collection.WealthCollected:
		row.addWealth(e)
		row.UpdatedAt = readdb.EventTime(e.CollectedAt, env)
	case collection.DocumentCollected:
		doc = &Document{
			CollectionID: id, DocumentID: e.DocumentID, Tenant: row.Tenant, Kind: e.Kind,
			ContentType: e.ContentType, Size: int64(e.Size), At: readdb.EventTime(e.At, env), Revision: env.Revision,
		}
		if e.Personal != nil {
			doc.FileName, doc.SHA256 = e.Personal.FileName, e.Personal.SHA256
			if len(e.Personal.Content) > 0 {
				doc.Content = e.Personal.Content
			}
		}
		row.UpdatedAt = doc.At
	default:
		return row, nil, false, fmt.Errorf("%s at %s/%d decoded as %T", env.Type, env.Stream, env.Revision, ev)
	}
	row.Revision = env.Revision
	return row, doc, true, nil
}
