package cancellations

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/samla/samla/domain/cancellation"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/user"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/projections/internal/sealed"
	"github.com/samla/samla/projections/readdb"
)

// ProjectorName names the projection; its Kafka consumer group is derived from it, so it must
// never change (a new name would replay every event into the read model from the start).
const ProjectorName = "cancellations"

// Metrics are what the projector records as it folds events; a nil field records nothing. Labels
// are a company id and a status, never anything of a person.
type Metrics struct {
	// Statuses counts each status change once, by company and the status reached (a new
	// cancellation counts as reaching PREPARATION).
	Statuses *prometheus.CounterVec
	// Signature observes, by company, the seconds from the sending of the signing link to the
	// holder's signature, once per cancellation.
	Signature *prometheus.HistogramVec
}

// Projector folds cancellation events into Store rows and documents. It takes envelopes whose
// personal member is opened (eventschema.OpenPersonal), as projections hand every projector them,
// and seals the signed PDF it keeps under the cancellation's data subject with keys.
type Projector struct {
	reg     readdb.Decoder
	store   Store
	keys    eventschema.Keys
	metrics Metrics
}

// NewProjector returns the projector writing to store, decoding events with reg, sealing the
// signed PDFs it keeps with keys and recording into m.
func NewProjector(reg readdb.Decoder, store Store, keys eventschema.Keys, m Metrics) *Projector {
	if keys == nil {
		panic("cancellations.NewProjector: keys are required: the read model keeps signed PDFs sealed only")
	}
	return &Projector{reg: reg, store: store, keys: keys, metrics: m}
}

// Name is the projection's stable name.
func (p *Projector) Name() string { return ProjectorName }

// Categories are the event categories the projector folds; its consumer reads only their
// topics. Cancellations' events, and users' for the erasure of a deleted user's documents.
func (p *Projector) Categories() []string {
	return []string{eventschema.Category(cancellation.StreamPrefix), eventschema.Category(user.StreamPrefix)}
}

// observation is a metric a folded event makes, recorded once the row is written.
type observation struct {
	company, status string
	signature       time.Duration // > 0: the time to the signature
}

// Handle applies a batch: it loads the rows of the batch's cancellations once, folds every event
// newer than its row's revision, and writes the changed rows and the signed PDFs of the batch in
// one Upsert. Then each user.deleted of the batch blanks the PDFs of that user's cancellations
// (the erasure destroyed the key they are sealed under; this removes the ciphertext too). Events
// of other categories are ignored. Handling the same batch twice, or an older one after a newer
// one, changes nothing, and counts nothing twice: an event at or below its row's revision is not
// folded again.
func (p *Projector) Handle(ctx context.Context, batch []eventschema.Envelope) error {
	var (
		seen []observation
		docs []Document
	)
	rows, err := readdb.FoldStreams(ctx, batch, foldKey, p.store.GetMany, rowRevision,
		func(id string, row Row, exists bool, env eventschema.Envelope) (Row, bool, error) {
			next, doc, ok, err := p.apply(ctx, id, row, exists, env)
			if !ok || err != nil {
				return next, ok, err
			}
			if doc != nil {
				docs = append(docs, *doc)
			}
			if !exists || next.Status != row.Status {
				o := observation{company: next.Company, status: next.Status}
				if next.Status == closed && !next.SentAt.IsZero() && !next.SignedAt.IsZero() {
					o.signature = next.SignedAt.Sub(next.SentAt)
				}
				seen = append(seen, o)
			}
			return next, true, nil
		})
	if err != nil {
		return fmt.Errorf("%s: %w", ProjectorName, err)
	}
	if err := p.store.Upsert(ctx, rows, docs); err != nil {
		return fmt.Errorf("%s: write %d rows and %d documents: %w", ProjectorName, len(rows), len(docs), err)
	}
	for _, env := range batch {
		if id, ok := readdb.DeletedUser(env); ok {
			if err := p.store.ErasePersonal(ctx, env.Tenant, id); err != nil {
				return fmt.Errorf("%s: %w", ProjectorName, err)
			}
		}
	}
	p.record(seen)
	return nil
}

func (p *Projector) record(seen []observation) {
	for _, o := range seen {
		if p.metrics.Statuses != nil {
			p.metrics.Statuses.WithLabelValues(o.company, o.status).Inc()
		}
		if p.metrics.Signature != nil && o.signature > 0 {
			p.metrics.Signature.WithLabelValues(o.company).Observe(o.signature.Seconds())
		}
	}
}

// foldKey is the row key of a cancellation event.
func foldKey(env eventschema.Envelope) (string, bool) {
	if eventschema.Category(env.Stream) != eventschema.Category(cancellation.StreamPrefix) {
		return "", false
	}
	return strings.TrimPrefix(env.Stream, cancellation.StreamPrefix), true
}

// apply folds one event into row, returning the new row, the signed PDF the event recorded (if
// any: cancellation.sealed) and false for an event that changes nothing. Anything before
// cancellation.requested (which begins every cancellation stream, and Kafka keeps a stream's
// order) changes nothing: a row without its tenant would be worse than none.
func (p *Projector) apply(ctx context.Context, id string, row Row, exists bool, env eventschema.Envelope) (Row, *Document, bool, error) {
	if env.Type == cancellation.EventRequested {
		if exists {
			return row, nil, false, nil // a stream starts once
		}
		ev, err := readdb.Decode[cancellation.Requested](p.reg, env)
		if err != nil {
			return row, nil, false, err
		}
		tenant := env.Tenant
		if tenant == "" {
			tenant = ev.ClientID
		}
		at := readdb.EventTime(ev.RequestedAt, env)
		return Row{DocumentID: id, Tenant: tenant, CollectionID: ev.CollectionID, UserUUID: ev.UserUUID, Company: ev.Company,
			InsuranceID: ev.InsuranceID, InsuranceType: ev.InsuranceType, DeliveryMethod: string(ev.DeliveryMethod),
			TemplateVersion: ev.TemplateVersion, Status: string(cancellation.StatusPreparation), RequestedAt: at,
			UpdatedAt: at, Revision: env.Revision}, nil, true, nil
	}
	if !exists {
		return row, nil, false, nil
	}
	var doc *Document
	switch env.Type {
	case cancellation.EventClaimed:
		ev, err := readdb.Decode[cancellation.Claimed](p.reg, env)
		if err != nil {
			return row, nil, false, err
		}
		row.UpdatedAt = readdb.EventTime(ev.ClaimedAt, env)
	case cancellation.EventSent:
		ev, err := readdb.Decode[cancellation.Sent](p.reg, env)
		if err != nil {
			return row, nil, false, err
		}
		row.Status = string(cancellation.StatusPending)
		row.SentAt, row.Deadline = readdb.EventTime(ev.At, env), stored(ev.Deadline)
		row.UpdatedAt = row.SentAt
	case cancellation.EventSigned:
		ev, err := readdb.Decode[cancellation.Signed](p.reg, env)
		if err != nil {
			return row, nil, false, err
		}
		row.Status = closed
		row.SignedAt = readdb.EventTime(ev.SignedAt, env)
		row.EndedAt, row.UpdatedAt = row.SignedAt, row.SignedAt
	case cancellation.EventSealed:
		ev, err := readdb.Decode[cancellation.Sealed](p.reg, env)
		if err != nil {
			return row, nil, false, err
		}
		row.IsSignedAndSealed = true
		row.UpdatedAt = readdb.EventTime(ev.SealedAt, env)
		// A PDF erased before the read model saw it (a replay after the user's erasure) is not
		// kept; the cancellation still shows as signed and sealed.
		if pers := ev.Personal; pers != nil && len(pers.Document) > 0 {
			content, err := sealed.Seal(ctx, p.keys, collection.DataSubject(row.CollectionID, row.UserUUID), pers.Document)
			if err != nil {
				return row, nil, false, fmt.Errorf("cancellation %s: seal the signed document: %w", id, err)
			}
			if !content.IsZero() {
				doc = &Document{DocumentID: id, Tenant: row.Tenant, Content: content, Revision: env.Revision}
			}
		}
	case cancellation.EventRejected:
		ev, err := readdb.Decode[cancellation.Rejected](p.reg, env)
		if err != nil {
			return row, nil, false, err
		}
		row = ended(row, cancellation.StatusRejected, readdb.EventTime(ev.At, env))
	case cancellation.EventTimedOut:
		ev, err := readdb.Decode[cancellation.TimedOut](p.reg, env)
		if err != nil {
			return row, nil, false, err
		}
		row = ended(row, cancellation.StatusTimedOut, readdb.EventTime(ev.At, env))
	case cancellation.EventCanceled:
		ev, err := readdb.Decode[cancellation.Canceled](p.reg, env)
		if err != nil {
			return row, nil, false, err
		}
		row = ended(row, cancellation.StatusCanceled, readdb.EventTime(ev.At, env))
		row.CancelReason = string(ev.Reason)
	case cancellation.EventDocumentFailed:
		ev, err := readdb.Decode[cancellation.DocumentFailed](p.reg, env)
		if err != nil {
			return row, nil, false, err
		}
		row = ended(row, cancellation.StatusDocumentError, readdb.EventTime(ev.At, env))
		row.ErrorCode = ev.Code
	case cancellation.EventProviderNotified:
		ev, err := readdb.Decode[cancellation.ProviderNotified](p.reg, env)
		if err != nil {
			return row, nil, false, err
		}
		row.UpdatedAt = readdb.EventTime(ev.At, env)
	default:
		// Types added later do not show; the row still records that it reflects them. They are
		// not decoded, so a type this build does not know yet cannot stop the projection.
		row.UpdatedAt = readdb.EventTime(time.Time{}, env)
	}
	row.Revision = env.Revision
	return row, doc, true, nil
}

// ended is row become final in status at at.
func ended(row Row, status cancellation.Status, at time.Time) Row {
	row.Status, row.EndedAt, row.UpdatedAt = string(status), at, at
	return row
}

// stored is a time at the precision the read model keeps.
func stored(t time.Time) time.Time { return readdb.FromMillis(readdb.Millis(t)) }
