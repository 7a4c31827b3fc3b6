package collectionstatus

import "github.com/samla/samla/projections/readdb"

// The collections still running, oldest first, paged by position: the connectors' sweep reads
// them a page at a time, so that every one of them is re-armed in turn however many are open,
// with bounded work per sweep. The order is by created_at_ms, then collection_id: neither ever
// changes for a collection, so a page that ends at (createdAt, id) is followed by exactly the
// non-final collections after it, whatever started or ended meanwhile, and ClickHouse may apply
// the position to the raw row versions next to FINAL (status, which changes, may not be).

// NonFinalPosition is where a page of the non-final collections ends, in the same terms as a
// page of a user's: the last row's CreatedAt and CollectionID.
type NonFinalPosition = UserPosition

// nonFinalAfter is the position condition of ListNonFinal ("" for none), and its arguments.
// SQLite takes the position as a row value, which its index search over (status, created_at_ms,
// collection_id) turns into a range per status; ClickHouse, which scans either way, takes the
// expanded form every server version knows.
func nonFinalAfter(after *NonFinalPosition, rowValues bool) (string, []any) {
	if after == nil {
		return "", nil
	}
	return readdb.After("created_at_ms", "collection_id", after.CreatedAt, after.CollectionID, rowValues)
}
