package collectionstatus

import (
	"context"
	"fmt"
	"time"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/projections/readdb"
	"github.com/samla/samla/query"
)

// A user's collections, newest first (GET /users/{userUuid}/collections). The order is by
// created_at_ms, then collection_id, both descending: neither ever changes for a collection, so a
// page that ends at (createdAt, id) is followed by exactly the collections after it, whatever
// was created or changed meanwhile, and the filters and cursor can be applied to a ClickHouse
// table's raw row versions before FINAL collapses them.

// UserPosition is where a page of a user's collections ends: the last row's CreatedAt (at the
// stored ms precision) and CollectionID.
type UserPosition struct {
	CreatedAt    time.Time
	CollectionID string
}

// sqliteByUserIndex serves ListByUser: the rows of one tenant's user, in the list's order.
const sqliteByUserIndex = `CREATE INDEX IF NOT EXISTS collection_status_by_user
	ON collection_status (tenant, user_uuid, created_at_ms, collection_id)`

// byUserFilter is the WHERE clause of ListByUser, and its arguments. SQLite takes the position as
// a row value, which its index search turns into a range (a page deep in a long list starts
// there, rather than after every newer row); ClickHouse, which scans either way, takes the
// expanded form every server version knows.
func byUserFilter(tenant, userUUID string, after *UserPosition, rowValues bool) (string, []any) {
	where := `tenant = ? AND user_uuid = ?`
	args := []any{tenant, userUUID}
	switch ms := readdb.Millis(positionTime(after)); {
	case after == nil:
	case rowValues:
		where += ` AND (created_at_ms, collection_id) < (?, ?)`
		args = append(args, ms, after.CollectionID)
	default:
		where += ` AND (created_at_ms < ? OR (created_at_ms = ? AND collection_id < ?))`
		args = append(args, ms, ms, after.CollectionID)
	}
	return where, args
}

func positionTime(p *UserPosition) time.Time {
	if p == nil {
		return time.Time{}
	}
	return p.CreatedAt
}

// ListByUser returns up to limit of tenant's collections made for userUUID, newest first,
// starting after the position (nil: from the newest). A collection made for no user is never
// listed, whatever userUUID is.
func (s *SQLiteStore) ListByUser(ctx context.Context, tenant, userUUID string, after *UserPosition, limit int) ([]Row, error) {
	if userUUID == "" || limit <= 0 {
		return nil, nil
	}
	where, args := byUserFilter(tenant, userUUID, after, true)
	var out []Row
	err := s.query(ctx, func(r Row) { out = append(out, r) }, `SELECT `+sqliteColumns+` FROM collection_status
		WHERE `+where+` ORDER BY created_at_ms DESC, collection_id DESC LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("list collections of user %s: %w", userUUID, err)
	}
	return out, nil
}

// ListByUser is SQLiteStore.ListByUser on ClickHouse. Every column of the filter and the order
// is immutable, so they apply to the raw versions next to FINAL, which then keeps the newest
// version of each listed collection.
func (s *ClickHouseStore) ListByUser(ctx context.Context, tenant, userUUID string, after *UserPosition, limit int) ([]Row, error) {
	if userUUID == "" || limit <= 0 {
		return nil, nil
	}
	where, args := byUserFilter(tenant, userUUID, after, false)
	var out []Row
	err := s.query(ctx, func(r Row) { out = append(out, r) }, `SELECT `+clickhouseColumns+` FROM collection_status FINAL
		WHERE `+where+` ORDER BY created_at_ms DESC, collection_id DESC LIMIT `+fmt.Sprint(limit), args...)
	if err != nil {
		return nil, fmt.Errorf("list collections of user %s: %w", userUUID, err)
	}
	return out, nil
}

// ListByUser implements query.UserCollectionsReader.
func (r Reader) ListByUser(ctx context.Context, tenant, userUUID string, after *query.CollectionCursor, limit int) ([]query.CollectionSummary, error) {
	var pos *UserPosition
	if after != nil {
		pos = &UserPosition{CreatedAt: after.CreatedAt, CollectionID: after.CollectionID}
	}
	rows, err := r.store.ListByUser(ctx, tenant, userUUID, pos, limit)
	if err != nil {
		return nil, err
	}
	out := make([]query.CollectionSummary, 0, len(rows))
	for _, row := range rows {
		if row.Tenant != tenant || row.UserUUID != userUUID {
			continue // a store that forgot a filter must not leak another's collection
		}
		out = append(out, query.CollectionSummary{CollectionID: row.CollectionID, Company: row.Company, Product: row.Product,
			LoginMethod: row.LoginMethod, Status: row.Status, CreatedAt: row.CreatedAt, UpdatedAt: row.UpdatedAt})
	}
	return out, nil
}

var _ query.UserCollectionsReader = Reader{}

// userCollectionsPage is how many of a user's collections UserNonFinalCollectionIDs reads at
// once.
const userCollectionsPage = 500

// UserNonFinalCollectionIDs returns the ids of tenant's collections made for userUUID that this
// read model shows in a status that is not final, newest first: the collections a user's erasure
// ends (app.UserCollections). A final status here is final for good; a non-final one may be
// behind the event store, which the erasure reads before it decides.
func (r Reader) UserNonFinalCollectionIDs(ctx context.Context, tenant, userUUID string) ([]string, error) {
	var (
		ids   []string
		after *UserPosition
	)
	for {
		rows, err := r.store.ListByUser(ctx, tenant, userUUID, after, userCollectionsPage)
		if err != nil {
			return nil, err
		}
		for _, row := range rows {
			if row.Tenant == tenant && row.UserUUID == userUUID && !collection.Status(row.Status).IsFinal() {
				ids = append(ids, row.CollectionID)
			}
		}
		if len(rows) < userCollectionsPage {
			return ids, nil
		}
		last := rows[len(rows)-1]
		after = &UserPosition{CreatedAt: last.CreatedAt, CollectionID: last.CollectionID}
	}
}
