package httpquery

import (
	"context"
	"errors"

	"github.com/gin-gonic/gin"

	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/platform/uuids"
	"github.com/samla/samla/query"
)

// loadOwned reads the client's view named by the path's param with get: a malformed id, an
// unknown view and another client's are notFound alike; a user's session is refused (403)
// another user's. owner tells a view's tenant and user.
func loadOwned[V any](c *gin.Context, param string, notFound func(*gin.Context),
	get func(ctx context.Context, tenant, id string) (V, error), owner func(V) (tenant, userUUID string),
) (V, bool) {
	var zero V
	id, ok := uuids.Canonical(c.Param(param))
	if !ok {
		notFound(c)
		return zero, false
	}
	view, err := get(c.Request.Context(), httpapi.ClientID(c), id)
	if err != nil {
		if errors.Is(err, query.ErrNotFound) {
			notFound(c)
		} else {
			httpapi.AbortInternal(c, err)
		}
		return zero, false
	}
	tenant, user := owner(view)
	switch {
	case tenant != httpapi.ClientID(c):
		// The reader is supposed to scope by tenant; this guard keeps a reader bug from leaking.
		notFound(c)
		return zero, false
	case !httpapi.RequireSessionUser(c, user):
		return zero, false
	}
	return view, true
}
