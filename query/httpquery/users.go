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

	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/user"
	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/platform/uuids"
	"github.com/samla/samla/query"
	"github.com/samla/samla/query/presenter"
)

// CodeUserNotFound is the 404 of an unknown user or another client's.
const CodeUserNotFound = "USER_NOT_FOUND"

// Paging of a user's collections (API.md: limit default 50, at most 500).
const (
	DefaultUserCollectionsLimit = 50
	MaxUserCollectionsLimit     = 500
)

// registerUsers mounts the user queries, which exist from 2026-04-01 on. A user's session may read
// its own user and that user's collections; finding users by externalId is the client's.
func (h *handlers) registerUsers(r gin.IRoutes) {
	since := httpapi.SinceVersion(httpapi.V20260401)
	r.GET("/users", since, h.findUser)
	r.GET("/users/:"+httpapi.SessionUserParam, httpapi.AllowSessionsOfPathUser, since, h.getUser)
	r.GET("/users/:"+httpapi.SessionUserParam+"/collections", httpapi.AllowSessionsOfPathUser, since, h.userCollections)
}

func userNotFound(c *gin.Context) {
	httpapi.AbortProblem(c, http.StatusNotFound, CodeUserNotFound, "No such user.")
}

// userUUID returns the path's user id in canonical form (uuids.Canonical, any case), or answers
// 404: a malformed id names no user.
func userUUID(c *gin.Context) (string, bool) {
	id, ok := uuids.Canonical(c.Param(httpapi.SessionUserParam))
	if !ok {
		userNotFound(c)
		return "", false
	}
	return id, true
}

// loadUser reads the client's user; another client's is not found, like an unknown one.
func (h *handlers) loadUser(c *gin.Context, id string) (query.UserView, bool) {
	view, err := h.deps.Users.Get(c.Request.Context(), httpapi.ClientID(c), id)
	switch {
	case errors.Is(err, query.ErrNotFound):
		userNotFound(c)
		return query.UserView{}, false
	case err != nil:
		httpapi.AbortInternal(c, err)
		return query.UserView{}, false
	case view.Tenant != "" && view.Tenant != httpapi.ClientID(c):
		// The reader is supposed to scope by tenant; this guard keeps a reader bug from leaking.
		userNotFound(c)
		return query.UserView{}, false
	}
	return view, true
}

func (h *handlers) getUser(c *gin.Context) {
	id, ok := userUUID(c)
	if !ok {
		return
	}
	view, ok := h.loadUser(c, id)
	if !ok {
		return
	}
	// The body carries personal data (the externalId): no shared cache may keep it.
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, presenter.User(view))
}

func (h *handlers) findUser(c *gin.Context) {
	values := c.QueryArray(user.FieldExternalID)
	var fe *httpapi.FieldError
	switch {
	case len(values) == 0:
		fe = &httpapi.FieldError{Field: user.FieldExternalID, Message: "is required"}
	case len(values) > 1:
		fe = &httpapi.FieldError{Field: user.FieldExternalID, Message: "must be given once"}
	default:
		if fields := domain.FieldErrors(user.CheckExternalID(values[0])); len(fields) > 0 {
			fe = &httpapi.FieldError{Field: user.FieldExternalID, Message: fields[0].Reason}
		}
	}
	if fe != nil {
		httpapi.AbortValidation(c, "The query parameters are invalid.", *fe)
		return
	}
	view, err := h.deps.Users.FindByExternalID(c.Request.Context(), httpapi.ClientID(c), values[0])
	switch {
	case errors.Is(err, query.ErrNotFound):
		userNotFound(c)
		return
	case err != nil:
		httpapi.AbortInternal(c, err)
		return
	case view.Tenant != "" && view.Tenant != httpapi.ClientID(c):
		userNotFound(c)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, presenter.User(view))
}

func (h *handlers) userCollections(c *gin.Context) {
	id, ok := userUUID(c)
	if !ok {
		return
	}
	var errs []httpapi.FieldError
	limit := DefaultUserCollectionsLimit
	if raw, present := c.GetQuery("limit"); present {
		v, err := strconv.Atoi(raw)
		if err != nil || v < 1 || v > MaxUserCollectionsLimit {
			errs = append(errs, httpapi.FieldError{Field: "limit", Message: "must be an integer from 1 to " + strconv.Itoa(MaxUserCollectionsLimit)})
		} else {
			limit = v
		}
	}
	tenant := httpapi.ClientID(c)
	var after *query.CollectionCursor
	if raw, present := c.GetQuery("cursor"); present {
		cur, err := decodeCursor(raw, tenant, id)
		if err != nil {
			errs = append(errs, httpapi.FieldError{Field: "cursor", Message: "is not a cursor this API gave out; use nextCursor as it is"})
		} else {
			after = &cur
		}
	}
	if len(errs) > 0 {
		httpapi.AbortValidation(c, "The query parameters are invalid.", errs...)
		return
	}
	// A user the client cannot see has no collections to list: not found, never an empty list.
	if _, ok := h.loadUser(c, id); !ok {
		return
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
			out.NextCursor = encodeCursor(tenant, id, query.CollectionCursor{CreatedAt: last.CreatedAt, CollectionID: last.CollectionID})
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
// in Unix milliseconds and the collection id, which is all the position is
// (query.CollectionCursor), and the list's binding (cursorBinding), base64url-encoded so that
// clients treat it as the token it is.
func encodeCursor(tenant, userUUID string, c query.CollectionCursor) string {
	var ms int64 // the zero time (unknown) is 0, as the read models store it
	if !c.CreatedAt.IsZero() {
		ms = c.CreatedAt.UnixMilli()
	}
	raw := strconv.FormatInt(ms, 10) + "." + c.CollectionID + "." + cursorBinding(tenant, userUUID)
	return cursorPrefix + base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// cursorBinding ties a cursor to the list it was given out for, so that another list's cursor
// (another user's, another client's) is refused rather than read as a position in this one. It
// is not a secret: a cursor holds nothing a client may not see, and every list is scoped to its
// client and user whatever the cursor says.
func cursorBinding(tenant, userUUID string) string {
	sum := sha256.Sum256([]byte("samla.user-collections\x00" + tenant + "\x00" + userUUID))
	return hex.EncodeToString(sum[:8])
}

var errBadCursor = errors.New("malformed cursor")

// decodeCursor reverses encodeCursor for tenant's user's list: a cursor of another list, or of
// no list, is errBadCursor.
func decodeCursor(s, tenant, userUUID string) (query.CollectionCursor, error) {
	rest, ok := strings.CutPrefix(s, cursorPrefix)
	if !ok || len(rest) > 160 {
		return query.CollectionCursor{}, errBadCursor
	}
	raw, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return query.CollectionCursor{}, errBadCursor
	}
	parts := strings.Split(string(raw), ".")
	if len(parts) != 3 || parts[2] != cursorBinding(tenant, userUUID) {
		return query.CollectionCursor{}, errBadCursor
	}
	ms, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil || ms < 0 {
		return query.CollectionCursor{}, errBadCursor
	}
	id := parts[1]
	if !uuids.IsCanonical(id) {
		return query.CollectionCursor{}, errBadCursor
	}
	var at time.Time
	if ms > 0 {
		at = time.UnixMilli(ms).UTC()
	}
	return query.CollectionCursor{CreatedAt: at, CollectionID: id}, nil
}
