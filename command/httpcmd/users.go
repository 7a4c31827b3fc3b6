package httpcmd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/samla/samla/command/app"
	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/user"
	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/platform/uuids"
)

// Problem codes of the user commands.
const (
	// CodeUserExists is a POST /users whose externalId another user of the client holds (409).
	CodeUserExists = "USER_EXISTS"
	// CodeUserNotFound is an unknown user, or another client's (404).
	CodeUserNotFound = "USER_NOT_FOUND"
	// CodeUserDeleted is supplement-info for a collection whose user was deleted (409): the
	// user's personal data is erased, and so would the input be.
	CodeUserDeleted = "USER_DELETED"
)

// DeletedUsers tells whether the users read model shows a client's user as deleted.
type DeletedUsers interface {
	IsDeletedUser(ctx context.Context, clientID, userUUID string) (bool, error)
}

// DeletionWatch is how DELETE /users/{userUuid} waits for the deletion to reach the check that
// ends the user's sessions, so that a 204 means its tokens are refused from the next request on,
// and for good.
type DeletionWatch struct {
	// Users is the users read model, which httpapi's session authentication asks. The wait ends
	// only when the read model itself shows the user deleted: the session check also asks the
	// event store about a user the read model has not seen yet, and the event store says "not
	// live" at once, but a read model that then applies user.created before user.deleted would
	// make the user's tokens work again for a moment after the 204.
	Users DeletedUsers
	// Timeout bounds the wait (DefaultDeletionTimeout when <= 0).
	Timeout time.Duration
	// Local tells that the projections run in this process: a deletion they do not show within
	// Timeout is then a fault, answered 503 (a retry of the DELETE is safe), rather than a remote
	// projection's lag, which is answered 204 and logged.
	Local bool
}

// DefaultDeletionTimeout bounds DeletionWatch's wait: far above a projection's usual lag of
// milliseconds, and short enough for a client's request timeout.
const DefaultDeletionTimeout = 5 * time.Second

// deletionPollFirst and deletionPollMax space the looks at the read model: the first ones come
// quickly (a local projection takes a few milliseconds), later ones less often.
const (
	deletionPollFirst = time.Millisecond
	deletionPollMax   = 50 * time.Millisecond
)

// MaxCreateUserBodyBytes bounds POST /users: an externalId of 256 characters, escaped, and room.
const MaxCreateUserBodyBytes int64 = 8 << 10

// createUserLimits bound the body's shape before it is decoded. A character of an externalId takes
// at most four bytes; its count is the domain's rule, checked after decoding.
var createUserLimits = httpapi.Limits{Paths: map[string]httpapi.PathLimits{
	"externalId": {MaxStringBytes: 4 * user.MaxExternalIDLength},
}}

// UserCommands is the application service the user routes drive (app.UserService).
type UserCommands interface {
	Create(ctx context.Context, cmd app.CreateUser) (app.UserCreated, error)
	Delete(ctx context.Context, cmd app.DeleteUser) error
}

// registerUsers mounts the user commands, which exist from 2026-04-01 on; sessions reach none of
// them (a user's session cannot create users or delete itself).
func (h *handlers) registerUsers(r gin.IRoutes) {
	since := httpapi.SinceVersion(httpapi.V20260401)
	r.POST("/users", since, httpapi.MaxBody(MaxCreateUserBodyBytes), h.createUser)
	r.DELETE("/users/:userUuid", since, h.deleteUser)
}

// createUserRequest is the body of POST /users. A pointer tells an absent member from an empty one.
type createUserRequest struct {
	ExternalID *string `json:"externalId"`
}

// userResponse is the 201 body of POST /users: the API's UserResponse of a live user.
type userResponse struct {
	UserUUID   string `json:"userUuid"`
	ExternalID string `json:"externalId"`
	CreatedAt  string `json:"createdAt"`
}

func (h *handlers) createUser(c *gin.Context) {
	key, ferr := httpapi.IdempotencyKey(c)
	if ferr != nil {
		httpapi.AbortValidation(c, "The Idempotency-Key header is invalid.", *ferr)
		return
	}
	var req createUserRequest
	if !httpapi.DecodeJSON(c, &req, createUserLimits) {
		return
	}
	if req.ExternalID == nil {
		httpapi.AbortValidation(c, "The user request is invalid.", httpapi.FieldError{Field: user.FieldExternalID, Message: "is required"})
		return
	}
	hash, err := h.requestHash(c, httpapi.ServiceVersion(c), createUserRequest{ExternalID: req.ExternalID})
	if err != nil {
		httpapi.AbortInternal(c, err)
		return
	}
	ctx := c.Request.Context()
	created, err := h.deps.Users.Create(ctx, app.CreateUser{
		Tenant: httpapi.ClientID(c), IdempotencyKey: key, ExternalID: *req.ExternalID,
		RequestHash: hash.current, LegacyRequestHash: hash.legacy,
		CorrelationID: httpapi.CorrelationID(ctx), RequestID: httpapi.RequestID(ctx),
	})
	switch {
	case errors.Is(err, user.ErrExternalIDTaken):
		httpapi.AbortProblem(c, http.StatusConflict, CodeUserExists,
			"A user with this externalId exists for this client; find it with GET /users?externalId=.")
		return
	case len(domain.FieldErrors(err)) > 0:
		writeFieldErrors(c, "The user request is invalid.", err)
		return
	case err != nil:
		writeCommandError(c, err, "The user request is invalid.")
		return
	}
	c.Header("Location", "/users/"+created.UserUUID)
	if created.Replayed {
		c.Header("Idempotent-Replayed", "true")
	}
	c.JSON(http.StatusCreated, userResponse{UserUUID: created.UserUUID, ExternalID: created.ExternalID,
		CreatedAt: httpapi.FormatTime(created.CreatedAt)})
}

// deleteUser deletes and erases the user (app.UserService.Delete), then answers 204 once the
// users read model, which the liveness check of sessions asks, shows the deletion
// (DeletionWatch): a client that deleted a user may rely on the user's tokens being refused from
// its next request on.
func (h *handlers) deleteUser(c *gin.Context) {
	ctx := c.Request.Context()
	client := httpapi.ClientID(c)
	userUUID, ok := uuids.Canonical(c.Param("userUuid"))
	if !ok {
		httpapi.AbortProblem(c, http.StatusNotFound, CodeUserNotFound, "No such user.")
		return
	}
	err := h.deps.Users.Delete(ctx, app.DeleteUser{Tenant: client, UserUUID: userUUID,
		CorrelationID: httpapi.CorrelationID(ctx), RequestID: httpapi.RequestID(ctx)})
	switch {
	case errors.Is(err, app.ErrUserNotFound):
		httpapi.AbortProblem(c, http.StatusNotFound, CodeUserNotFound, "No such user.")
		return
	case err != nil:
		writeCommandError(c, err, "The request is invalid.")
		return
	}
	if w := h.deps.UserDeletions; w != nil {
		visible, err := w.wait(ctx, client, userUUID)
		switch {
		case err != nil:
			httpapi.AbortInternal(c, fmt.Errorf("wait for the deletion of user %s to show: %w", userUUID, err))
			return
		case !visible && w.Local:
			httpapi.Logger(ctx).Error("user deleted, but the users read model does not show it: its sessions still work",
				"user_uuid", userUUID, "waited", w.timeout())
			c.Header("Retry-After", "1")
			httpapi.AbortProblem(c, http.StatusServiceUnavailable, httpapi.CodeServiceUnavailable,
				"The user is deleted, but its sessions may still work for a moment; repeat the DELETE to learn when they stop.")
			return
		case !visible:
			httpapi.Logger(ctx).Warn("user deleted; the users read model does not show it yet, so its sessions work until it does",
				"user_uuid", userUUID, "waited", w.timeout())
		}
	}
	c.Status(http.StatusNoContent)
}

func (w *DeletionWatch) timeout() time.Duration {
	if w.Timeout <= 0 {
		return DefaultDeletionTimeout
	}
	return w.Timeout
}

// wait looks at the users read model until it shows the user deleted, at most Timeout: visible is
// false when it still does not. The request's own end stops it early, as not visible.
func (w *DeletionWatch) wait(ctx context.Context, client, userUUID string) (visible bool, err error) {
	deadline := time.Now().Add(w.timeout())
	pause := deletionPollFirst
	for {
		deleted, err := w.Users.IsDeletedUser(ctx, client, userUUID)
		if err != nil {
			return false, err
		}
		if deleted {
			return true, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, nil
		case <-time.After(min(pause, left)):
		}
		pause = min(2*pause, deletionPollMax)
	}
}

// writeFieldErrors answers the field errors err carries, each at the member it names.
func writeFieldErrors(c *gin.Context, detail string, err error) {
	fields := domain.FieldErrors(err)
	errs := make([]httpapi.FieldError, len(fields))
	for i, f := range fields {
		errs[i] = httpapi.FieldError{Field: f.Field, Message: f.Reason}
	}
	httpapi.AbortValidation(c, detail, errs...)
}
