package httpcmd

import (
	"context"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/samla/samla/command/app"
	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/user"
	"github.com/samla/samla/platform/httpapi"
)

// Problem codes of the user commands.
const (
	// CodeUserExists is a POST /users whose externalId another user of the client holds (409).
	CodeUserExists = "USER_EXISTS"
	// CodeUserNotFound is an unknown user, or another client's (404).
	CodeUserNotFound = "USER_NOT_FOUND"
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
	hash, err := h.requestHash(httpapi.ServiceVersion(c), createUserRequest{ExternalID: req.ExternalID})
	if err != nil {
		httpapi.AbortInternal(c, err)
		return
	}
	ctx := c.Request.Context()
	created, err := h.deps.Users.Create(ctx, app.CreateUser{
		Tenant: httpapi.ClientID(c), IdempotencyKey: key, ExternalID: *req.ExternalID, RequestHash: hash,
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

func (h *handlers) deleteUser(c *gin.Context) {
	ctx := c.Request.Context()
	err := h.deps.Users.Delete(ctx, app.DeleteUser{Tenant: httpapi.ClientID(c), UserUUID: c.Param("userUuid"),
		CorrelationID: httpapi.CorrelationID(ctx), RequestID: httpapi.RequestID(ctx)})
	switch {
	case errors.Is(err, app.ErrUserNotFound):
		httpapi.AbortProblem(c, http.StatusNotFound, CodeUserNotFound, "No such user.")
		return
	case err != nil:
		writeCommandError(c, err, "The request is invalid.")
		return
	}
	c.Status(http.StatusNoContent)
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
