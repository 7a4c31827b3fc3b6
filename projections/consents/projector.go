package consents

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/consent"
	"github.com/samla/samla/domain/user"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/projections/internal/sealed"
	"github.com/samla/samla/projections/readdb"
)

// ProjectorName names the projection; its Kafka consumer group is derived from it, so it must
// never change (a new name would replay every event into the read model from the start).
const ProjectorName = "consents"

// Metrics are what the projector records as it folds events; a nil field records nothing. Labels
// are a company id and a status, never anything of a person.
type Metrics struct {
	// Statuses counts each status change once, by company and the status reached.
	Statuses *prometheus.CounterVec
	// Authorization observes, by company, the seconds from the EID order the authorization
	// started with to the person's signature.
	Authorization *prometheus.HistogramVec
}

// Projector folds consent events into Store rows. It takes envelopes whose personal member is
// opened (eventschema.OpenPersonal), as projections hand every projector them, and seals the
// pending EID order it keeps under the user's data subject with keys.
type Projector struct {
	reg     readdb.Decoder
	store   Store
	keys    eventschema.Keys
	metrics Metrics
}

// NewProjector returns the projector writing to store, decoding events with reg, sealing the EID
// orders it keeps with keys and recording into m.
func NewProjector(reg readdb.Decoder, store Store, keys eventschema.Keys, m Metrics) *Projector {
	if keys == nil {
		panic("consents.NewProjector: keys are required: the read model keeps EID orders sealed only")
	}
	return &Projector{reg: reg, store: store, keys: keys, metrics: m}
}

// Name is the projection's stable name.
func (p *Projector) Name() string { return ProjectorName }

// Categories are the event categories the projector folds; its consumer reads only their
// topics. Consents' events, and users' for the erasure of a deleted user's pending orders.
func (p *Projector) Categories() []string {
	return []string{eventschema.Category(consent.StreamPrefix), eventschema.Category(user.StreamPrefix)}
}

// observation is a metric a folded event makes, recorded once the row is written.
type observation struct {
	company, status string
	authorization   time.Duration // > 0: the authorization's latency
}

// Handle applies a batch: it loads the rows of the batch's consents once, folds every event newer
// than its row's revision, and writes the changed rows in one Upsert. Then each user.deleted of
// the batch erases the personal parts of that user's consents (the erasure destroyed the key
// they are sealed under; this removes the ciphertext too). Events of other categories are
// ignored. Handling the same batch twice, or an older one after a newer one, changes nothing,
// and counts nothing twice: an event at or below its row's revision is not folded again.
func (p *Projector) Handle(ctx context.Context, batch []eventschema.Envelope) error {
	var seen []observation
	rows, err := readdb.FoldStreams(ctx, batch, foldKey, p.store.GetMany, rowRevision,
		func(id string, row Row, exists bool, env eventschema.Envelope) (Row, bool, error) {
			next, ok, err := p.apply(ctx, id, row, exists, env)
			if ok && err == nil && (!exists || next.Status != row.Status) {
				o := observation{company: next.Company, status: next.Status}
				if next.Status == string(consent.StatusAuthorized) && !next.AuthorizationStartedAt.IsZero() {
					o.authorization = next.AuthorizedAt.Sub(next.AuthorizationStartedAt)
				}
				seen = append(seen, o)
			}
			return next, ok, err
		})
	if err != nil {
		return fmt.Errorf("%s: %w", ProjectorName, err)
	}
	if err := p.store.Upsert(ctx, rows); err != nil {
		return fmt.Errorf("%s: write %d rows: %w", ProjectorName, len(rows), err)
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
		if p.metrics.Authorization != nil && o.authorization > 0 {
			p.metrics.Authorization.WithLabelValues(o.company).Observe(o.authorization.Seconds())
		}
	}
}

// foldKey is the row key of a consent event.
func foldKey(env eventschema.Envelope) (string, bool) {
	if eventschema.Category(env.Stream) != eventschema.Category(consent.StreamPrefix) {
		return "", false
	}
	return strings.TrimPrefix(env.Stream, consent.StreamPrefix), true
}

// apply folds one event into row. Anything before consent.created (which begins every consent
// stream, and Kafka keeps a stream's order) changes nothing: a row without its tenant and user
// would be worse than none. Every status change drops the pending EID order: it belongs to
// AWAITING_AUTHORIZATION alone.
func (p *Projector) apply(ctx context.Context, id string, row Row, exists bool, env eventschema.Envelope) (Row, bool, error) {
	if env.Type == consent.EventCreated {
		if exists {
			return row, false, nil // a stream starts once
		}
		ev, err := readdb.Decode[consent.Created](p.reg, env)
		if err != nil {
			return row, false, err
		}
		tenant := env.Tenant
		if tenant == "" {
			tenant = ev.ClientID
		}
		scope := make([]string, len(ev.Scope))
		for i, s := range ev.Scope {
			scope[i] = string(s)
		}
		at := readdb.EventTime(ev.CreatedAt, env)
		return Row{ConsentID: id, Tenant: tenant, UserUUID: ev.UserUUID, Company: ev.Company, LoginMethod: ev.LoginMethod,
			Status: string(consent.StatusInitiated), Scope: scope, CreatedAt: at, UpdatedAt: at, Revision: env.Revision}, true, nil
	}
	if !exists {
		return row, false, nil
	}
	switch env.Type {
	case consent.EventAuthorizationStarted:
		ev, err := readdb.Decode[consent.AuthorizationStarted](p.reg, env)
		if err != nil {
			return row, false, err
		}
		row.Status, row.BankConsentID = string(consent.StatusAwaitingAuthorization), ev.BankConsentID
		row.AuthorizationStartedAt, row.AuthorizationDeadline = readdb.EventTime(ev.At, env), stored(ev.Deadline)
		row.UpdatedAt = row.AuthorizationStartedAt
		// A new order (the worker opened another) replaces the last one's tokens; an order whose
		// tokens were erased before the read model saw it shows none.
		row.Personal = sealed.Value{}
		if pers := ev.Personal; pers != nil {
			started := ev.At
			if started.IsZero() {
				started = env.OccurredAt
			}
			order := Order{StartedAt: started.UTC(), AutoStartToken: pers.AutoStartToken, QRStartToken: pers.QRStartToken,
				QRStartSecret: pers.QRStartSecret}
			if row.Personal, err = p.seal(ctx, row, order); err != nil {
				return row, false, err
			}
		}
	case consent.EventAuthorized:
		ev, err := readdb.Decode[consent.Authorized](p.reg, env)
		if err != nil {
			return row, false, err
		}
		row.Status, row.Personal = string(consent.StatusAuthorized), sealed.Value{}
		row.AuthorizedAt, row.ExpiresAt = readdb.EventTime(ev.AuthorizedAt, env), stored(ev.ExpiresAt)
		row.UpdatedAt = row.AuthorizedAt
	case consent.EventFailed:
		ev, err := readdb.Decode[consent.Failed](p.reg, env)
		if err != nil {
			return row, false, err
		}
		row.Status, row.Personal = string(consent.StatusFailed), sealed.Value{}
		row.ErrorCode, row.ErrorMessage = string(ev.Code), ev.Message
		row.UpdatedAt = readdb.EventTime(ev.At, env)
	case consent.EventRevoked:
		ev, err := readdb.Decode[consent.Revoked](p.reg, env)
		if err != nil {
			return row, false, err
		}
		row.Status, row.Personal, row.RevokeReason = string(consent.StatusRevoked), sealed.Value{}, string(ev.Reason)
		row.UpdatedAt = readdb.EventTime(ev.At, env)
	case consent.EventExpired:
		ev, err := readdb.Decode[consent.Expired](p.reg, env)
		if err != nil {
			return row, false, err
		}
		row.Status, row.Personal = string(consent.StatusExpired), sealed.Value{}
		row.UpdatedAt = readdb.EventTime(ev.At, env)
	default:
		// consent.claimed, and types added later, do not show; the row still records that it
		// reflects them. They are not decoded, so a type this build does not know yet cannot
		// stop the projection.
		row.UpdatedAt = readdb.EventTime(time.Time{}, env)
	}
	row.Revision = env.Revision
	return row, true, nil
}

// seal is the stored form of a pending EID order: sealed under the user's data subject, so that
// the user's erasure shreds it; the zero Value when the subject is erased already (a replay after
// the erasure).
func (p *Projector) seal(ctx context.Context, row Row, order Order) (sealed.Value, error) {
	plain, err := json.Marshal(order)
	if err != nil {
		return sealed.Value{}, fmt.Errorf("consent %s: encode the EID order: %w", row.ConsentID, err)
	}
	v, err := sealed.Seal(ctx, p.keys, domain.UserSubject(row.UserUUID), plain)
	if err != nil {
		return sealed.Value{}, fmt.Errorf("consent %s: %w", row.ConsentID, err)
	}
	return v, nil
}

// stored is a time at the precision the read model keeps.
func stored(t time.Time) time.Time { return readdb.FromMillis(readdb.Millis(t)) }
