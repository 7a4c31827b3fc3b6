package apikeys

import (
	"context"
	"errors"
	"fmt"

	"github.com/samla/samla/domain/client"
	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/projections/readdb"
)

// Reader authenticates API keys for the HTTP layer: it implements httpapi.KeyLookup over a
// Store, hashing the key the way the client aggregate stored it.
type Reader struct{ store Store }

var _ httpapi.KeyLookup = Reader{}

// NewReader returns the reader over store.
func NewReader(store Store) Reader { return Reader{store: store} }

// Lookup implements httpapi.KeyLookup: an unknown or revoked key is httpapi.ErrKeyNotFound.
func (r Reader) Lookup(ctx context.Context, apiKey string) (string, error) {
	id, err := r.store.Lookup(ctx, client.HashAPIKey(apiKey))
	if errors.Is(err, readdb.ErrNotFound) {
		return "", fmt.Errorf("api key: %w", httpapi.ErrKeyNotFound)
	}
	return id, err
}
