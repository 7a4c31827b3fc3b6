package httpquery

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/platform/uuids"
	"github.com/samla/samla/query"
	"github.com/samla/samla/query/presenter"
)

// A user's lists (GET /users/{userUuid}/collections, GET /users/{userUuid}/consents) page alike:
// newest first, by creation time and then id, neither of which ever changes, with a limit and
// an opaque cursor bound to the list it was given out for.

// Paging of a user's lists (API.md: limit default 50, at most 500).
const (
	DefaultUserListLimit = 50
	MaxUserListLimit     = 500
)

// userList names a user's list; a cursor is bound to its list, its client and its user.
type userList string

const (
	userCollectionsList userList = "samla.user-collections"
	userConsentsList    userList = "samla.user-consents"
)

// listPosition is where a page of a user's list ends: the last item's creation time (at the
// read models' ms precision) and id.
type listPosition struct {
	CreatedAt time.Time
	ID        string
}

// userListPage reads a user's list's query parameters: limit and cursor. It answers 400 and
// returns false for a bad one; after is nil for the first page.
func userListPage(c *gin.Context, list userList, tenant, userUUID string) (limit int, after *listPosition, ok bool) {
	var errs []httpapi.FieldError
	limit = DefaultUserListLimit
	if raw, present := c.GetQuery("limit"); present {
		v, err := strconv.Atoi(raw)
		if err != nil || v < 1 || v > MaxUserListLimit {
			errs = append(errs, httpapi.FieldError{Field: "limit", Message: "must be an integer from 1 to " + strconv.Itoa(MaxUserListLimit)})
		} else {
			limit = v
		}
	}
	if raw, present := c.GetQuery("cursor"); present {
		pos, err := decodeCursor(list, raw, tenant, userUUID)
		if err != nil {
			errs = append(errs, httpapi.FieldError{Field: "cursor", Message: "is not a cursor this API gave out; use nextCursor as it is"})
		} else {
			after = &pos
		}
	}
	if len(errs) > 0 {
		httpapi.AbortValidation(c, "The query parameters are invalid.", errs...)
		return 0, nil, false
	}
	return limit, after, true
}

func (h *handlers) userCollections(c *gin.Context) {
	id, ok := userUUID(c)
	if !ok {
		return
	}
	tenant := httpapi.ClientID(c)
	limit, pos, ok := userListPage(c, userCollectionsList, tenant, id)
	if !ok {
		return
	}
	// A user the client cannot see has no collections to list: not found, never an empty list.
	if _, ok := h.loadUser(c, id); !ok {
		return
	}
	var after *query.CollectionCursor
	if pos != nil {
		after = &query.CollectionCursor{CreatedAt: pos.CreatedAt, CollectionID: pos.ID}
	}
	// One more than the page tells whether another page follows, so the last page says so itself.
	rows, err := h.deps.UserCollections.ListByUser(c.Request.Context(), tenant, id, after, limit+1)
	if err != nil {
		httpapi.AbortInternal(c, err)
		return
	}
	out := presenter.UserCollectionsResponse{Items: make([]presenter.UserCollectionItem, 0, min(len(rows), limit))}
	version := httpapi.ServiceVersion(c)
	for i, row := range rows {
		if i == limit {
			last := rows[i-1]
			out.NextCursor = encodeCursor(userCollectionsList, tenant, id, listPosition{CreatedAt: last.CreatedAt, ID: last.CollectionID})
			break
		}
		market := ""
		if co, err := h.deps.Companies.Get(row.Company); err == nil {
			market = co.Market
		}
		out.Items = append(out.Items, presenter.UserCollection(version, market, row))
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, out)
}

// cursorPrefix starts every cursor, so that a later format can be told from this one. ("c1."
// cursors named no list; none was given out by a release.)
const cursorPrefix = "c2."

// encodeCursor makes the opaque cursor of a position in tenant's user's list: the creation time
// in Unix milliseconds and the item's id, which is all the position is, and the list's binding
// (cursorBinding), base64url-encoded so that clients treat it as the token it is.
func encodeCursor(list userList, tenant, userUUID string, p listPosition) string {
	var ms int64 // the zero time (unknown) is 0, as the read models store it
	if !p.CreatedAt.IsZero() {
		ms = p.CreatedAt.UnixMilli()
	}
	raw := strconv.FormatInt(ms, 10) + "." + p.ID + "." + cursorBinding(list, tenant, userUUID)
	return cursorPrefix + base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// cursorBinding ties a cursor to the list it was given out for, so that another list's cursor
// (another user's, another client's, the user's other list) is refused rather than read as a
// position in this one. It is not a secret: a cursor holds nothing a client may not see, and
// every list is scoped to its client and user whatever the cursor says.
func cursorBinding(list userList, tenant, userUUID string) string {
	sum := sha256.Sum256([]byte(string(list) + "\x00" + tenant + "\x00" + userUUID))
	return hex.EncodeToString(sum[:8])
}

var errBadCursor = errors.New("malformed cursor")

// decodeCursor reverses encodeCursor for tenant's user's list: a cursor of another list, or of
// no list, is errBadCursor.
func decodeCursor(list userList, s, tenant, userUUID string) (listPosition, error) {
	rest, ok := strings.CutPrefix(s, cursorPrefix)
	if !ok || len(rest) > 160 {
		return listPosition{}, errBadCursor
	}
	raw, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return listPosition{}, errBadCursor
	}
	parts := strings.Split(string(raw), ".")
	if len(parts) != 3 || parts[2] != cursorBinding(list, tenant, userUUID) {
		return listPosition{}, errBadCursor
	}
	ms, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil || ms < 0 {
		return listPosition{}, errBadCursor
	}
	id := parts[1]
	if !uuids.IsCanonical(id) {
		return listPosition{}, errBadCursor
	}
	var at time.Time
	if ms > 0 {
		at = time.UnixMilli(ms).UTC()
	}
	return listPosition{CreatedAt: at, ID: id}, nil
}
