// Package apikeys is the read model that authenticates clients: it maps the SHA-256 hash of an
// API key to the client (tenant) that owns it, whether it is revoked and when a retiring key
// (the old key of a rotation) stops authenticating, built from client.* events. Plain keys never
// reach it; they exist only in the client's hands. The Store port, its SQLite and ClickHouse
// adapters with their DDL, the Projector, and the Reader that serves the HTTP layer's
// httpapi.KeyLookup live here; apikeystest is the contract suite both adapters pass.
package apikeys

import (
	"context"
	"time"

	"github.com/samla/samla/projections/readdb"
)

// Row is one issued key.
type Row struct {
	KeyHash  string // hex SHA-256 of the key, as client.HashAPIKey computes it
	ClientID string
	KeyID    string
	Revoked  bool
	// ValidUntil is when a retiring key stops authenticating (client.api-key-retiring); zero
	// for a key without an end. Stored to the millisecond.
	ValidUntil time.Time
	// Revision is the revision of the client stream's last event folded into the row.
	Revision uint64
}

// Store holds the keys.
type Store interface {
	// Upsert writes rows in one batch. A row whose Revision is not greater than the stored
	// row's (same KeyHash) is ignored, so a redelivered issue can never un-revoke a key;
	// within one call, the first row with the highest revision per key wins.
	Upsert(ctx context.Context, rows []Row) error
	// Lookup returns the key with this hash if it authenticates at the instant at, or
	// readdb.ErrNotFound when the hash is unknown, the key is revoked, or at is not before its
	// ValidUntil. Authentication treats all alike, so nothing tells a caller whether a key once
	// existed.
	Lookup(ctx context.Context, keyHash string, at time.Time) (Row, error)
	// ByKeyID returns a client's key by its id, revoked or not, or readdb.ErrNotFound. The
	// projector needs it because a revocation names the key, not its hash.
	ByKeyID(ctx context.Context, clientID, keyID string) (Row, error)
	// Reset removes every row, before a rebuild from the event store.
	Reset(ctx context.Context) error
}

// latestPerKey keeps, per key hash, the first row with the highest revision, in the order of
// first appearance, which is what sequential conditional upserts of the batch would leave.
func latestPerKey(rows []Row) []Row { return readdb.LatestPerKey(rows, rowKey, rowRevision) }

// rowKey and rowRevision are a row's identity and version, for readdb's revision helpers.
func rowKey(r Row) string      { return r.KeyHash }
func rowRevision(r Row) uint64 { return r.Revision }
