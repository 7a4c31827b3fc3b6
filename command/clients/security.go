package clients

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/samla/samla/domain/client"
	"github.com/samla/samla/eventschema"
)

// The operator's security commands on a client: the mutual-TLS certificates the operator's CA
// signs for it (recorded after signing, revoked by serial) and its settings (own rate limit and
// burst, mTLS-only).

// RecordCertificate records a certificate the CA signed for the client
// (client.certificate-issued). A client that does not exist, or a serial it has already, is
// domain.ErrConflict; malformed members are a *domain.FieldError.
func (s *Service) RecordCertificate(ctx context.Context, clientID string, cert client.CertificateIssued) error {
	if _, _, err := s.repo.Update(ctx, clientID, meta(clientID), func(c *client.Client) error {
		return c.RecordCertificate(cert, s.now())
	}); err != nil {
		return fmt.Errorf("record certificate %s of %s: %w", cert.Serial, clientID, err)
	}
	return nil
}

// RevokeCertificate revokes the client's certificate with this serial
// (client.certificate-revoked); revoking a revoked one records nothing. A serial the client
// never had is client.ErrUnknownCertificate.
func (s *Service) RevokeCertificate(ctx context.Context, clientID, serial string) error {
	if _, _, err := s.repo.Update(ctx, clientID, meta(clientID), func(c *client.Client) error {
		return c.RevokeCertificate(serial, s.now())
	}); err != nil {
		return fmt.Errorf("revoke certificate %s of %s: %w", serial, clientID, err)
	}
	return nil
}

// ErrUnknownClient is a client that does not exist.
var ErrUnknownClient = errors.New("unknown client")

// Certificates lists the client's certificates in the order they were issued, revoked ones
// included. A client that does not exist is ErrUnknownClient.
func (s *Service) Certificates(ctx context.Context, clientID string) ([]client.Certificate, error) {
	c, err := s.repo.Load(ctx, clientID)
	if err != nil {
		return nil, fmt.Errorf("certificates of %s: %w", clientID, err)
	}
	if !c.Exists() {
		return nil, fmt.Errorf("client %s: %w", clientID, ErrUnknownClient)
	}
	return c.Certificates(), nil
}

// ChangeSettings records the settings given (nil: unchanged) as client.settings-changed, only
// what differs, and returns the client's settings after it. Out-of-range values are a
// *domain.FieldError; a client that does not exist is domain.ErrConflict.
func (s *Service) ChangeSettings(ctx context.Context, clientID string, rateLimit *float64, burst *int, mtlsOnly *bool) (client.Settings, error) {
	c, _, err := s.repo.Update(ctx, clientID, meta(clientID), func(c *client.Client) error {
		return c.ChangeSettings(rateLimit, burst, mtlsOnly, s.now())
	})
	if err != nil {
		return client.Settings{}, fmt.Errorf("change settings of %s: %w", clientID, err)
	}
	return c.Settings(), nil
}

// EventReader is the part of the event store FindCertificateClient reads (eventstore.Store
// satisfies it).
type EventReader interface {
	ReadAll(ctx context.Context, after uint64, limit int) ([]eventschema.Envelope, error)
}

// ErrCertificateNotFound is a serial that no client's certificate has.
var ErrCertificateNotFound = errors.New("no client has a certificate with this serial")

// findBatch is how many events FindCertificateClient reads at once.
const findBatch = 1000

// FindCertificateClient finds the client whose certificate has this serial by reading the
// event store from its start: the operator's revocation needs no read model that may lag or
// not run, and signs and revocations are rare enough for a scan. Only
// client.certificate-issued events are decoded.
func FindCertificateClient(ctx context.Context, events EventReader, reg *eventschema.Registry, serial string) (string, error) {
	var after uint64
	for {
		batch, err := events.ReadAll(ctx, after, findBatch)
		if err != nil {
			return "", fmt.Errorf("find certificate %s: %w", serial, err)
		}
		if len(batch) == 0 {
			return "", fmt.Errorf("certificate %s: %w", serial, ErrCertificateNotFound)
		}
		for _, env := range batch {
			if env.Type != client.EventCertificateIssued || eventschema.Category(env.Stream) != "client" {
				continue
			}
			ev, err := reg.Decode(env)
			if err != nil {
				return "", fmt.Errorf("find certificate %s: decode %s at %s/%d: %w", serial, env.Type, env.Stream, env.Revision, err)
			}
			if issued, ok := ev.(client.CertificateIssued); ok && issued.Serial == serial {
				return strings.TrimPrefix(env.Stream, client.StreamPrefix), nil
			}
		}
		next := batch[len(batch)-1].Position
		if next <= after {
			return "", fmt.Errorf("find certificate %s: the event store returned position %d after %d", serial, next, after)
		}
		after = next
	}
}

// RotatedKey is the outcome of RotateKey: the new key, shown once and never stored, and what
// became of the client's other keys.
type RotatedKey struct {
	Key   string
	KeyID string
	// Retiring are the other keys that still authenticate until their ValidUntil (a grace
	// above zero; a key already retiring earlier keeps its earlier end); Revoked are the ids of
	// those revoked at once (a zero grace).
	Retiring []client.APIKey
	Revoked  []string
}

// RotateKey issues a new key to the client and retires its other active keys after grace
// (client.api-key-issued, then client.api-key-retiring per key, or client.api-key-revoked for a
// zero grace), in one append. A grace out of range (0 to client.MaxKeyGrace) is a
// *domain.FieldError; a client that does not exist is domain.ErrConflict.
func (s *Service) RotateKey(ctx context.Context, clientID string, grace time.Duration) (RotatedKey, error) {
	key, err := GenerateAPIKey(clientID)
	if err != nil {
		return RotatedKey{}, err
	}
	id := keyID(key)
	now := s.now()
	revokedBefore := map[string]bool{}
	c, _, err := s.repo.Update(ctx, clientID, meta(clientID), func(c *client.Client) error {
		clear(revokedBefore) // the decision may run again on a concurrent change
		for _, k := range c.APIKeys() {
			revokedBefore[k.ID] = k.Revoked
		}
		return c.RotateAPIKey(id, key, grace, now)
	})
	if err != nil {
		return RotatedKey{}, fmt.Errorf("rotate the API key of %s: %w", clientID, err)
	}
	out := RotatedKey{Key: key, KeyID: id}
	for _, k := range c.APIKeys() {
		switch {
		case k.ID == id:
		case k.Revoked && !revokedBefore[k.ID]:
			out.Revoked = append(out.Revoked, k.ID)
		case k.ActiveAt(now) && !k.ValidUntil.IsZero():
			out.Retiring = append(out.Retiring, k)
		}
	}
	return out, nil
}

// RevokeKey revokes one of the client's keys by its id (client.api-key-revoked); revoking a
// revoked key records nothing. A key id the client does not have is domain.ErrConflict.
func (s *Service) RevokeKey(ctx context.Context, clientID, keyID string) error {
	if _, _, err := s.repo.Update(ctx, clientID, meta(clientID), func(c *client.Client) error {
		return c.RevokeAPIKey(keyID, s.now())
	}); err != nil {
		return fmt.Errorf("revoke API key %s of %s: %w", keyID, clientID, err)
	}
	return nil
}

// Keys lists the client's keys in the order they were issued: ids, times and status, never a
// hash. A client that does not exist is ErrUnknownClient.
func (s *Service) Keys(ctx context.Context, clientID string) ([]client.APIKey, error) {
	c, err := s.repo.Load(ctx, clientID)
	if err != nil {
		return nil, fmt.Errorf("keys of %s: %w", clientID, err)
	}
	if !c.Exists() {
		return nil, fmt.Errorf("client %s: %w", clientID, ErrUnknownClient)
	}
	return c.APIKeys(), nil
}
