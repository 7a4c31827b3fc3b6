package clientsecurity

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
const ProjectorName = "client-security"

// Projector folds client.certificate-issued, client.certificate-revoked and
// client.settings-changed into Store rows. The events carry no personal data, so it needs no
// key store (it reads neither the sealed member of other client events).
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
// topics. Only clients' events carry certificates and settings.
func (p *Projector) Categories() []string {
	return []string{eventschema.Category(client.StreamPrefix)}
}

func relevant(env eventschema.Envelope) bool {
	switch env.Type {
	case client.EventCertificateIssued, client.EventCertificateRevoked, client.EventSettingsChanged:
		return eventschema.Category(env.Stream) == eventschema.Category(client.StreamPrefix)
	}
	return false
}

// Handle applies a batch with at most one upsert of each table. A stream's events arrive in
// order (one Kafka partition per stream), and an event at or below a row's revision is a
// redelivery, which changes nothing.
func (p *Projector) Handle(ctx context.Context, batch []eventschema.Envelope) error {
	var (
		certs    []Certificate
		settings []Settings
	)
	// The rows as this batch left them, before the store holds them.
	certsInBatch := map[string]Certificate{}
	settingsInBatch := map[string]Settings{}
	for _, env := range batch {
		if !relevant(env) {
			continue
		}
		clientID := strings.TrimPrefix(env.Stream, client.StreamPrefix)
		ev, err := p.reg.Decode(env)
		if err != nil {
			return fmt.Errorf("%s: decode %s at %s/%d: %w", ProjectorName, env.Type, env.Stream, env.Revision, err)
		}
		switch ev := ev.(type) {
		case client.CertificateIssued:
			r := Certificate{Serial: ev.Serial, ClientID: clientID, Environment: string(ev.Environment),
				Fingerprint: ev.Fingerprint, NotBefore: ev.NotBefore, NotAfter: ev.NotAfter, Revision: env.Revision}
			certsInBatch[ev.Serial] = r
			certs = append(certs, r)
		case client.CertificateRevoked:
			r, ok := certsInBatch[ev.Serial]
			if !ok {
				r, err = p.store.Certificate(ctx, ev.Serial)
				if errors.Is(err, readdb.ErrNotFound) {
					// The issue precedes the revocation in the stream, so the certificate never
					// reached the read model; revoking nothing grants nothing.
					continue
				}
				if err != nil {
					return fmt.Errorf("%s: find certificate %s: %w", ProjectorName, ev.Serial, err)
				}
			}
			if r.ClientID != clientID || env.Revision <= r.Revision {
				continue // another client's serial, or already reflected
			}
			r.Revoked, r.RevokedAt, r.Revision = true, ev.RevokedAt, env.Revision
			certsInBatch[ev.Serial] = r
			certs = append(certs, r)
		case client.SettingsChanged:
			s, ok := settingsInBatch[clientID]
			fresh := false // no row yet: nothing to compare the revision with
			if !ok {
				s, err = p.store.Settings(ctx, clientID)
				if errors.Is(err, readdb.ErrNotFound) {
					s, fresh, err = Settings{ClientID: clientID}, true, nil
				}
				if err != nil {
					return fmt.Errorf("%s: settings of %s: %w", ProjectorName, clientID, err)
				}
			}
			if !fresh && env.Revision <= s.Revision {
				continue
			}
			if ev.RateLimit != nil {
				s.RateLimit = *ev.RateLimit
			}
			if ev.Burst != nil {
				s.Burst = *ev.Burst
			}
			if ev.MTLSOnly != nil {
				s.MTLSOnly = *ev.MTLSOnly
			}
			s.Revision = env.Revision
			settingsInBatch[clientID] = s
			settings = append(settings, s)
		default:
			return fmt.Errorf("%s: %s at %s/%d decoded as %T", ProjectorName, env.Type, env.Stream, env.Revision, ev)
		}
	}
	if err := p.store.UpsertCertificates(ctx, certs); err != nil {
		return fmt.Errorf("%s: write %d certificates: %w", ProjectorName, len(certs), err)
	}
	if err := p.store.UpsertSettings(ctx, settings); err != nil {
		return fmt.Errorf("%s: write %d settings: %w", ProjectorName, len(settings), err)
	}
	return nil
}
