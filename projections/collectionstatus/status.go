// Package collectionstatus is the read model behind GET /collections/{id}/status: one row per
// collection with its latest status, extra information and the stream revision it reflects.
// The Store port is declared here with its SQLite and ClickHouse adapters, the DDL of each, and
// the Projector that folds collection events into rows; statustest is the contract suite both
// adapters pass.
package collectionstatus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/samla/samla/domain/collection"
)

// ErrNotFound is returned for a collection the read model does not hold, or one that belongs to
// another tenant: a client must not learn that another client's collection exists.
var ErrNotFound = errors.New("collection status not found")

// Row is one collection as the status endpoint shows it.
type Row struct {
	CollectionID string
	Tenant       string // the client id that owns the collection
	Company      string
	Product      string
	LoginMethod  string
	APIVersion   string
	UserUUID     string
	Status       string
	// ExtraInformation is what the last status change attached; nil when it attached nothing,
	// which is kept apart from an empty object.
	ExtraInformation map[string]any
	CreatedAt        time.Time // stored at ms precision, returned in UTC
	UpdatedAt        time.Time // stored at ms precision, returned in UTC
	// Revision is the revision of the last event of the collection's stream folded into the row.
	Revision uint64
}

// Store holds the rows. The projector writes through GetMany and Upsert; query handlers read
// with Get; connectors use ListNonFinal to re-arm sessions after a restart.
type Store interface {
	// GetMany returns the rows of the given collections that exist, keyed by collection id,
	// whatever their tenant (it serves the projector, never a client).
	GetMany(ctx context.Context, ids []string) (map[string]Row, error)
	// Upsert writes rows in one batch. A row whose Revision is not greater than the stored
	// row's is ignored, so that a redelivered or reordered write can never move a row back;
	// within one call, the first row with the highest revision per collection wins.
	Upsert(ctx context.Context, rows []Row) error
	// Get returns tenant's collection, or ErrNotFound when it does not exist or belongs to
	// another tenant.
	Get(ctx context.Context, tenant, collectionID string) (Row, error)
	// ListNonFinal returns up to limit collections (limit <= 0: all) whose status is not
	// final, oldest first (by CreatedAt, then id).
	ListNonFinal(ctx context.Context, limit int) ([]Row, error)
	// Reset removes every row, before a rebuild from the event store.
	Reset(ctx context.Context) error
}

// nonFinalStatuses lists the statuses ListNonFinal selects. It is derived from the domain so
// that the read model never disagrees with the state machine about what is final.
func nonFinalStatuses() []string {
	var out []string
	for _, s := range collection.AllStatuses() {
		if !s.IsFinal() {
			out = append(out, string(s))
		}
	}
	return out
}

// latestPerCollection keeps, per collection, the first row with the highest revision, in the
// order of first appearance. Adapters that cannot express "ignore older or equal" inside one
// statement use it to apply a batch the way sequential conditional upserts would.
func latestPerCollection(rows []Row) []Row {
	index := make(map[string]int, len(rows))
	out := make([]Row, 0, len(rows))
	for _, r := range rows {
		i, seen := index[r.CollectionID]
		switch {
		case !seen:
			index[r.CollectionID] = len(out)
			out = append(out, r)
		case r.Revision > out[i].Revision:
			out[i] = r
		}
	}
	return out
}

// encodeExtra is the stored form of ExtraInformation: a JSON object, or "" for nil.
func encodeExtra(m map[string]any) (string, error) {
	if m == nil {
		return "", nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("encode extra information: %w", err)
	}
	return string(b), nil
}

// decodeExtra reverses encodeExtra.
func decodeExtra(s string) (map[string]any, error) {
	if s == "" {
		return nil, nil
	}
	m := map[string]any{}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("decode extra information: %w", err)
	}
	return m, nil
}
