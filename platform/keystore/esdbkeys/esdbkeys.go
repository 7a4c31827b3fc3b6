// Package esdbkeys is the key store of crypto-shredding (eventschema.Keys) for the distributed
// deployment: one EventStoreDB (or KurrentDB) stream per data subject, beside the event store.
//
// A subject's key is the one event of the stream "samlakey-<subject>", appended with a
// no-stream expectation, so two concurrent creators append once and both read that event.
// Destroying the key tombstones the stream (the hard delete): it can never be read or written
// again, which is the tombstone the port asks for (a later get-or-create is
// ErrSubjectErased, never a new key).
//
// The key events' type starts with "$", as the server's own do: the event store adapter's
// readers of $all (the relay, a rebuild) skip such events and its subscription asks the server
// to filter them out, so a key never reaches Kafka or a read model.
//
// Scavenge: a tombstone makes the key unreadable at once, but its bytes stay in the database's
// chunk files until a scavenge removes the tombstoned stream's events. Erasure is complete on
// disk only after the next scavenge (and once backups taken before it have aged out), so the
// operator runs scavenges on a schedule (KurrentDB's auto-scavenge, or a nightly
// POST /admin/scavenge); deploy/README.md says so.
package esdbkeys

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	esdbclient "github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"

	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/internal/esdbconn"
	"github.com/samla/samla/platform/keystore"
)

const (
	// StreamPrefix starts every key stream: StreamPrefix + subject.
	StreamPrefix = "samlakey-"
	// EventType is the type of a key event; its "$" keeps it out of Samla's readers of $all.
	EventType = "$samla.subject-key"
)

// keyEvent is the stored key.
type keyEvent struct {
	KeyID    string `json:"keyId"`
	Material []byte `json:"material"`
}

// Store is the EventStoreDB key store. It is safe for concurrent use.
type Store struct {
	client *esdbconn.Client
}

var _ eventschema.Keys = (*Store)(nil)

// Open returns a key store on the EventStoreDB of connectionString (as the event store's). It
// does not connect until first used.
func Open(connectionString string) (*Store, error) {
	c, err := esdbconn.Open(connectionString)
	if err != nil {
		return nil, fmt.Errorf("open key store: %w", err)
	}
	return &Store{client: c}, nil
}

// Close closes the connection; later calls fail.
func (s *Store) Close() error { return s.client.Close() }

// GetOrCreate implements eventschema.Keys.
func (s *Store) GetOrCreate(ctx context.Context, subject string) (eventschema.Key, error) {
	if subject == "" {
		return eventschema.Key{}, errors.New("key store: empty data subject")
	}
	fresh, err := keystore.Generate()
	if err != nil {
		return eventschema.Key{}, err
	}
	data, err := json.Marshal(keyEvent{KeyID: fresh.ID(), Material: fresh.Material()})
	if err != nil {
		return eventschema.Key{}, fmt.Errorf("key of %s: %w", subject, err)
	}
	id, err := uuid.Parse(fresh.ID())
	if err != nil {
		return eventschema.Key{}, fmt.Errorf("key of %s: %w", subject, err)
	}
	err = s.client.Do(ctx, func(c *esdbclient.Client) error {
		_, err := c.AppendToStream(ctx, StreamPrefix+subject, esdbclient.AppendToStreamOptions{ExpectedRevision: esdbclient.NoStream{}},
			esdbclient.EventData{EventID: id, EventType: EventType, ContentType: esdbclient.ContentTypeJson, Data: data})
		return err
	})
	switch {
	case err == nil:
		return fresh, nil
	case esdbconn.HasCode(err, esdbclient.ErrorCodeWrongExpectedVersion):
		return s.Get(ctx, subject) // another creator was first: its key is the key
	case esdbconn.HasCode(err, esdbclient.ErrorCodeStreamDeleted):
		return eventschema.Key{}, fmt.Errorf("%s: %w", subject, eventschema.ErrSubjectErased)
	default:
		return eventschema.Key{}, fmt.Errorf("key of %s: %w", subject, err)
	}
}

// Get implements eventschema.Keys.
func (s *Store) Get(ctx context.Context, subject string) (eventschema.Key, error) {
	var found *keyEvent
	err := s.client.Do(ctx, func(c *esdbclient.Client) error {
		found = nil
		rs, err := c.ReadStream(ctx, StreamPrefix+subject, esdbclient.ReadStreamOptions{Direction: esdbclient.Forwards, From: esdbclient.Start{}}, 1)
		if err != nil {
			return err
		}
		defer rs.Close()
		ev, err := rs.Recv()
		if err != nil {
			return err
		}
		var k keyEvent
		if err := json.Unmarshal(ev.OriginalEvent().Data, &k); err != nil {
			return fmt.Errorf("decode the key event: %w", err)
		}
		found = &k
		return nil
	})
	switch {
	case esdbconn.HasCode(err, esdbclient.ErrorCodeStreamDeleted):
		return eventschema.Key{}, fmt.Errorf("%s: %w", subject, eventschema.ErrSubjectErased)
	case esdbconn.HasCode(err, esdbclient.ErrorCodeResourceNotFound), errors.Is(err, io.EOF):
		return eventschema.Key{}, fmt.Errorf("%s: %w", subject, eventschema.ErrKeyNotFound)
	case err != nil:
		return eventschema.Key{}, fmt.Errorf("key of %s: %w", subject, err)
	}
	k, err := eventschema.NewKey(found.KeyID, found.Material)
	if err != nil {
		return eventschema.Key{}, fmt.Errorf("key of %s: %w", subject, err)
	}
	return k, nil
}

// Destroy implements eventschema.Keys: the subject's stream is tombstoned.
func (s *Store) Destroy(ctx context.Context, subject string) error {
	err := s.client.Do(ctx, func(c *esdbclient.Client) error {
		_, err := c.TombstoneStream(ctx, StreamPrefix+subject, esdbclient.TombstoneStreamOptions{ExpectedRevision: esdbclient.Any{}})
		return err
	})
	if err != nil && !esdbconn.HasCode(err, esdbclient.ErrorCodeStreamDeleted) {
		return fmt.Errorf("destroy key of %s: %w", subject, err)
	}
	return nil
}
