package apikeys

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/samla/samla/domain/client"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/projections/readdb"
)

// ProjectorName names the projection; its Kafka consumer group is derived from it.
const ProjectorName = "api-keys"

// Projector folds client.api-key-issued, client.api-key-revoked and client.api-key-retiring
// events into Store rows.
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
// topics. Only clients' events issue, retire and revoke keys.
func (p *Projector) Categories() []string {
	return []string{eventschema.Category(client.StreamPrefix)}
}

type keyRef struct{ clientID, keyID string }

// Handle applies a batch with one Upsert. Events of other categories, and client events that do
// not concern keys, are ignored. The store's revision rule makes redelivery harmless.
func (p *Projector) Handle(ctx context.Context, batch []eventschema.Envelope) error {
	var rows []Row
	// inBatch finds keys issued earlier in this batch, which the store does not hold yet.
	inBatch := map[keyRef]Row{}
	for _, env := range batch {
		if env.Type != client.EventAPIKeyIssued && env.Type != client.EventAPIKeyRevoked && env.Type != client.EventAPIKeyRetiring {
			continue
		}
		if eventschema.Category(env.Stream) != "client" {
			continue
		}
		clientID := strings.TrimPrefix(env.Stream, client.StreamPrefix)
		ev, err := p.reg.Decode(env)
		if err != nil {
			return fmt.Errorf("%s: decode %s at %s/%d: %w", ProjectorName, env.Type, env.Stream, env.Revision, err)
		}
		switch ev := ev.(type) {
		case client.APIKeyIssued:
			r := Row{KeyHash: ev.KeyHash, ClientID: clientID, KeyID: ev.KeyID, Revision: env.Revision}
			inBatch[keyRef{clientID, ev.KeyID}] = r
			rows = append(rows, r)
		case client.APIKeyRevoked:
			r, ok, err := p.row(ctx, inBatch, clientID, ev.KeyID, env.Revision)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			r.Revoked, r.Revision = true, env.Revision
			inBatch[keyRef{clientID, ev.KeyID}] = r
			rows = append(rows, r)
		case client.APIKeyRetiring:
			r, ok, err := p.row(ctx, inBatch, clientID, ev.KeyID, env.Revision)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			r.ValidUntil, r.Revision = ev.ValidUntil, env.Revision
			inBatch[keyRef{clientID, ev.KeyID}] = r
			rows = append(rows, r)
		default:
			return fmt.Errorf("%s: %s at %s/%d decoded as %T", ProjectorName, env.Type, env.Stream, env.Revision, ev)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	if err := p.store.Upsert(ctx, rows); err != nil {
		return fmt.Errorf("%s: write %d rows: %w", ProjectorName, len(rows), err)
	}
	return nil
}

// row finds the key a revocation or retirement at revision names: issued earlier in this batch,
// else in the store. ok is false when there is nothing to change: the key never reached the
// read model (the issue always precedes it in the stream, so revoking or retiring nothing
// grants nothing), or the row already reflects this event.
func (p *Projector) row(ctx context.Context, inBatch map[keyRef]Row, clientID, keyID string, revision uint64) (Row, bool, error) {
	r, ok := inBatch[keyRef{clientID, keyID}]
	if !ok {
		var err error
		r, err = p.store.ByKeyID(ctx, clientID, keyID)
		if errors.Is(err, readdb.ErrNotFound) {
			return Row{}, false, nil
		}
		if err != nil {
			return Row{}, false, fmt.Errorf("%s: find key %s of %s: %w", ProjectorName, keyID, clientID, err)
		}
	}
	if revision <= r.Revision {
		return Row{}, false, nil // the stored row already reflects this event
	}
	return r, true, nil
}
