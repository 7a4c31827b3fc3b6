package httpcmd

import (
	"context"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/platform/sessiontoken"
	"github.com/samla/samla/platform/uuids"
)

// SessionIssuer signs users' session tokens (*sessiontoken.Tokens).
type SessionIssuer interface {
	// Issue signs a token of userUUID of clientID, naming apiKeyID, the API key it is minted
	// with, so that revoking the key ends the session.
	Issue(clientID, userUUID, apiKeyID string) (sessiontoken.Issued, error)
}

// LiveUsers tells whether a user of a client exists and is not deleted (the users read model).
// An error is a fault of the lookup, not an answer.
type LiveUsers interface {
	IsLiveUser(ctx context.Context, clientID, userUUID string) (bool, error)
}

// SessionDeps are what the session route needs.
type SessionDeps struct {
	Issuer SessionIssuer
	Users  LiveUsers
}

// RegisterSessionRoutes mounts POST /users/{userUuid}/sessions (2026-04-01 on). r must carry
// httpapi's middleware, as for RegisterRoutes. The route takes the client's API key only: it
// does not opt in for sessions, so a session cannot extend itself.
func RegisterSessionRoutes(r gin.IRoutes, d SessionDeps) {
	if d.Issuer == nil || d.Users == nil {
		panic("httpcmd.RegisterSessionRoutes: SessionDeps.Issuer and SessionDeps.Users are required")
	}
	h := &sessionHandlers{deps: d}
	r.POST("/users/:"+httpapi.SessionUserParam+"/sessions", httpapi.SinceVersion(httpapi.V20260401), h.create)
}

type sessionHandlers struct{ deps SessionDeps }

// sessionResponse is the 201 body: the API's SessionResponse.
type sessionResponse struct {
	Token     string `json:"token"`
	ExpiresAt string `json:"expiresAt"`
}

// create issues a session token for a live user of the client.
//
// Issuing records nothing: a token is valid by its signature alone, until it expires, its user is
// deleted or the API key it was minted with is revoked. So an Idempotency-Key is checked like on every POST but changes nothing: a
// retry gets a new token, as valid as the first, and nothing is done twice.
func (h *sessionHandlers) create(c *gin.Context) {
	if _, ferr := httpapi.IdempotencyKey(c); ferr != nil {
		httpapi.AbortValidation(c, "The Idempotency-Key header is invalid.", *ferr)
		return
	}
	if c.Request.ContentLength != 0 {
		// The request has nothing to say; an empty object is all a body may be.
		var none struct{}
		if !httpapi.DecodeJSON(c, &none, httpapi.Limits{}) {
			return
		}
	}
	userUUID, ok := uuids.Canonical(c.Param(httpapi.SessionUserParam))
	ctx := c.Request.Context()
	client := httpapi.ClientID(c)
	if !ok {
		sessionUserNotFound(c) // a malformed id names no user; looking it up would only cost a read
		return
	}
	live, err := h.deps.Users.IsLiveUser(ctx, client, userUUID)
	if err != nil {
		httpapi.AbortInternal(c, err)
		return
	}
	if !live {
		// Unknown, deleted, or another client's: none of them has sessions.
		sessionUserNotFound(c)
		return
	}
	// The token names the API key it is minted with, so that revoking the key (a leaked one,
	// most likely) ends the session too. A key the engine cannot name would mint a session no
	// revocation ends: refuse rather than issue one.
	apiKeyID := httpapi.APIKeyID(c)
	if apiKeyID == "" {
		httpapi.AbortInternal(c, errors.New("issue a session: the request's API key has no id"))
		return
	}
	issued, err := h.deps.Issuer.Issue(client, userUUID, apiKeyID)
	if err != nil {
		httpapi.AbortInternal(c, err)
		return
	}
	httpapi.Logger(ctx).Info("session issued", "session_id", issued.Claims.TokenID, "key_id", issued.Claims.KeyID,
		"api_key_id", apiKeyID)
	// A token is a credential: no cache may keep it (RFC 6749 §5.1 says the same of tokens).
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusCreated, sessionResponse{Token: issued.Token, ExpiresAt: httpapi.FormatTime(issued.ExpiresAt)})
}

func sessionUserNotFound(c *gin.Context) {
	httpapi.AbortProblem(c, http.StatusNotFound, CodeUserNotFound, "No such user.")
}

// CollectionUsers tells whose a collection is (the collection status read model): the user
// it was started for, "" for none. found is false for an unknown collection or another
// client's.
type CollectionUsers interface {
	CollectionUser(ctx context.Context, tenant, collectionID string) (userUUID string, found bool, err error)
}

// sessionMaySupply reports whether the request may supply input to collection id: always by API
// key; for a session, only to a collection of its own user. Otherwise it answered: 404 for a
// collection the client does not have, 403 for another user's.
func (h *handlers) sessionMaySupply(c *gin.Context, id string) bool {
	if _, ok := httpapi.SessionUser(c); !ok {
		return true
	}
	if h.deps.CollectionUsers == nil { // the route does not serve sessions then; never reached
		return httpapi.RequireSessionUser(c, "")
	}
	owner, found, err := h.deps.CollectionUsers.CollectionUser(c.Request.Context(), httpapi.ClientID(c), id)
	switch {
	case err != nil:
		httpapi.AbortInternal(c, err)
		return false
	case !found:
		collectionNotFound(c)
		return false
	}
	return httpapi.RequireSessionUser(c, owner)
}
