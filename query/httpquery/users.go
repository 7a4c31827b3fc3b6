package httpquery

import (
	"errors"
	"net/http"

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
