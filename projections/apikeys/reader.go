package apikeys

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/samla/samla/domain/client"
	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/projections/readdb"
)

// Reader authenticates API keys for the HTTP layer: it implements httpapi.KeyLookup (and
// httpapi.ExpiringKeyLookup) over a Store, hashing the key the way the client aggregate stored
// it. The key is found by its SHA-256 hash as the store's primary key: the plain key is never
// compared with anything, so no comparison of a secret can leak its content through timing,
// and the hash's preimage resistance is what keeps a near miss from finding a row.
type Reader struct {
	store Store
	now   func() time.Time
}

var _ httpapi.ExpiringKeyLookup = Reader{}

// NewReader returns the reader over store, on the system clock: a retiring key stops
// authenticating at its end.
func NewReader(store Store) Reader { return Reader{store: store, now: time.Now} }

// WithClock returns the reader deciding retirements by now.
func (r Reader) WithClock(now func() time.Time) Reader {
	r.now = now
	return r
}

// Lookup implements httpapi.KeyLookup: an unknown, revoked or retired key is
// httpapi.ErrKeyNotFound.
func (r Reader) Lookup(ctx context.Context, apiKey string) (string, error) {
	id, _, err := r.LookupValidUntil(ctx, apiKey)
	return id, err
}

// LookupValidUntil implements httpapi.ExpiringKeyLookup: Lookup, and when the key is retiring,
// the instant it stops authenticating (zero for none), which the HTTP layer's cache honours.
func (r Reader) LookupValidUntil(ctx context.Context, apiKey string) (string, time.Time, error) {
	now := time.Now
	if r.now != nil {
		now = r.now
	}
	row, err := r.store.Lookup(ctx, client.HashAPIKey(apiKey), now())
	if errors.Is(err, readdb.ErrNotFound) {
		return "", time.Time{}, fmt.Errorf("api key: %w", httpapi.ErrKeyNotFound)
	}
	if err != nil {
		return "", time.Time{}, err
	}
	return row.ClientID, row.ValidUntil, nil
}
