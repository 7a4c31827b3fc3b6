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
// httpapi.ExpiringKeyLookup, httpapi.KeyInfoLookup), and tells the session check whether the key
// that minted a session still authenticates (httpapi.SessionKeys), over a Store, hashing the key the way the client aggregate stored
// it. The key is found by its SHA-256 hash as the store's primary key: the plain key is never
// compared with anything, so no comparison of a secret can leak its content through timing,
// and the hash's preimage resistance is what keeps a near miss from finding a row.
type Reader struct {
	store Store
	now   func() time.Time
}

var (
	_ httpapi.KeyInfoLookup = Reader{}
	_ httpapi.SessionKeys   = Reader{}
)

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
	key, err := r.LookupKey(ctx, apiKey)
	return key.ClientID, key.ValidUntil, err
}

// LookupKey implements httpapi.KeyInfoLookup: LookupValidUntil, with the key's id, which the
// sessions the key mints name.
func (r Reader) LookupKey(ctx context.Context, apiKey string) (httpapi.KeyInfo, error) {
	row, err := r.store.Lookup(ctx, client.HashAPIKey(apiKey), r.clock()())
	if errors.Is(err, readdb.ErrNotFound) {
		return httpapi.KeyInfo{}, fmt.Errorf("api key: %w", httpapi.ErrKeyNotFound)
	}
	if err != nil {
		return httpapi.KeyInfo{}, fmt.Errorf("look up an api key: %w", err)
	}
	return httpapi.KeyInfo{ClientID: row.ClientID, KeyID: row.KeyID, ValidUntil: row.ValidUntil}, nil
}

// KeyActiveUntil implements httpapi.SessionKeys: whether the client's key keyID authenticates
// now, and when an active key is retiring, its end. A key the client does not have (or not yet, on a read model that lags), a
// revoked key and a retired one all answer false, as Lookup treats them alike.
func (r Reader) KeyActiveUntil(ctx context.Context, clientID, keyID string) (bool, time.Time, error) {
	row, err := r.store.ByKeyID(ctx, clientID, keyID)
	if errors.Is(err, readdb.ErrNotFound) {
		return false, time.Time{}, nil
	}
	if err != nil {
		return false, time.Time{}, fmt.Errorf("look up api key %s of a client: %w", keyID, err)
	}
	if row.Revoked || (!row.ValidUntil.IsZero() && !r.clock()().Before(row.ValidUntil)) {
		return false, time.Time{}, nil
	}
	return true, row.ValidUntil, nil
}

// clock is the reader's clock, the system's for a zero Reader.
func (r Reader) clock() func() time.Time {
	if r.now != nil {
		return r.now
	}
	return time.Now
}
