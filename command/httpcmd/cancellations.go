package httpcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/samla/samla/command/app"
	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/cancellation"
	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/platform/uuids"
)

// Problem codes of the cancellation commands (API.md, "Cancellations").
const (
	// CodeSigningNotConfigured is a client without a signing provider key or template (422).
	CodeSigningNotConfigured = "SIGNING_NOT_CONFIGURED"
	// CodeCollectionNotCancellable is a collection that is not a completed insurance collection
	// of the client, or whose user was erased (422).
	CodeCollectionNotCancellable = "COLLECTION_NOT_CANCELLABLE"
	// CodeUnknownInsurance is an insurance id the collection did not collect (422).
	CodeUnknownInsurance = "UNKNOWN_INSURANCE"
	// CodeCancellationExists is an insurance with a live cancellation (409).
	CodeCancellationExists = "CANCELLATION_EXISTS"
	// CodeCancellationFinal is a DELETE of a cancellation that is final already (409).
	CodeCancellationFinal = "CANCELLATION_FINAL"
	// CodeCancellationNotFound is an unknown cancellation, or another client's (404).
	CodeCancellationNotFound = "CANCELLATION_NOT_FOUND"
	// CodeInvalidSignature is a provider callback whose signature does not verify (401).
	CodeInvalidSignature = "INVALID_SIGNATURE"
	// CodeTooManyCancellations is an insurance that has had app.MaxCancellationsPerInsurance
	// cancellations (422).
	CodeTooManyCancellations = "TOO_MANY_CANCELLATIONS"
)

// MaxRequestCancellationsBodyBytes bounds POST /cancellations: fifty short ids and an address.
const MaxRequestCancellationsBodyBytes int64 = 16 << 10

// MaxProviderCallbackBytes bounds a signing provider's callback: a few short members.
const MaxProviderCallbackBytes = 8 << 10

// requestCancellationsLimits bound the body's shape before it is decoded.
var requestCancellationsLimits = httpapi.Limits{MaxStringBytes: 320, Paths: map[string]httpapi.PathLimits{
	"insuranceIds": {MaxItems: app.MaxInsurancesPerCancellation},
}}

// CancellationCommands is the application service the cancellation routes drive
// (app.CancellationService).
type CancellationCommands interface {
	Request(ctx context.Context, cmd app.RequestCancellations) (app.CancellationsRequested, error)
	Cancel(ctx context.Context, cmd app.CancelCancellation) (*cancellation.Cancellation, error)
	NoteProviderCallback(ctx context.Context, tenant string, cb app.ProviderCallback, correlationID string) error
	SigningKey(ctx context.Context, tenant string) (string, bool, error)
}

// CallbackVerifier checks a signing provider's callback: its signature under the client's
// provider key and its freshness. The provider's adapter implements it; the command side knows
// no provider.
type CallbackVerifier interface {
	VerifyCallback(providerKey string, header http.Header, body []byte, now time.Time) (app.ProviderCallback, error)
}

// registerCancellations mounts the cancellation commands (every version: the cancellation API
// is part of the stable spec) and the provider's callback. A user's session may cancel from its
// own user's collections: the service checks whose they are.
func (h *handlers) registerCancellations(r gin.IRoutes) {
	r.POST("/cancellations", httpapi.AllowSessionsCheckedByHandler, httpapi.MaxBody(MaxRequestCancellationsBodyBytes), h.requestCancellations)
	r.DELETE("/cancellations/:documentId", httpapi.AllowSessionsCheckedByHandler, h.cancelCancellation)
	if h.deps.CallbackVerifier != nil {
		r.POST(httpapi.SigningCallbackPath, httpapi.MaxBody(MaxProviderCallbackBytes), h.providerCallback)
	}
}

// requestCancellationsBody is the body of POST /cancellations.
type requestCancellationsBody struct {
	CollectionID   *string  `json:"collectionId"`
	InsuranceIDs   []string `json:"insuranceIds"`
	DeliveryMethod *string  `json:"deliveryMethod"`
	Email          *string  `json:"email"`
	PhoneNumber    *string  `json:"phoneNumber"`
}

type requestedCancellationResponse struct {
	DocumentID  string `json:"documentId"`
	InsuranceID string `json:"insuranceId"`
	Status      string `json:"status"`
}

type cancellationsResponse struct {
	Cancellations []requestedCancellationResponse `json:"cancellations"`
}

func (h *handlers) requestCancellations(c *gin.Context) {
	key, ferr := httpapi.IdempotencyKey(c)
	if ferr != nil {
		httpapi.AbortValidation(c, "The Idempotency-Key header is invalid.", *ferr)
		return
	}
	var body requestCancellationsBody
	if !httpapi.DecodeJSON(c, &body, requestCancellationsLimits) {
		return
	}
	if body.CollectionID == nil || *body.CollectionID == "" {
		httpapi.AbortValidation(c, "The cancellation request is invalid.", httpapi.FieldError{Field: "collectionId", Message: "is required"})
		return
	}
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	cmd := app.RequestCancellations{Tenant: httpapi.ClientID(c), IdempotencyKey: key, CollectionID: *body.CollectionID,
		InsuranceIDs: body.InsuranceIDs, DeliveryMethod: cancellation.DeliveryMethod(str(body.DeliveryMethod)),
		Email: str(body.Email), PhoneNumber: str(body.PhoneNumber)}
	cmd.SessionUser, _ = httpapi.SessionUser(c)
	// The fingerprint covers what the request means; the address only for the method that uses
	// it, as only that one is recorded.
	canonical := struct {
		CollectionID   string   `json:"collectionId"`
		InsuranceIDs   []string `json:"insuranceIds"`
		DeliveryMethod string   `json:"deliveryMethod"`
		Address        string   `json:"address"`
	}{cmd.CollectionID, cmd.InsuranceIDs, string(cmd.DeliveryMethod), cmd.Email}
	if cmd.DeliveryMethod == cancellation.DeliverySMS {
		canonical.Address = cmd.PhoneNumber
	}
	if id, ok := uuids.Canonical(canonical.CollectionID); ok {
		canonical.CollectionID = id
	}
	hash, err := h.requestHash(c, httpapi.ServiceVersion(c), canonical)
	if err != nil {
		httpapi.AbortInternal(c, err)
		return
	}
	ctx := c.Request.Context()
	cmd.RequestHash, cmd.CorrelationID, cmd.RequestID = hash.current, httpapi.CorrelationID(ctx), httpapi.RequestID(ctx)
	out, err := h.deps.Cancellations.Request(ctx, cmd)
	if err != nil {
		writeCancellationError(c, err)
		return
	}
	if out.Replayed {
		c.Header("Idempotent-Replayed", "true")
	}
	resp := cancellationsResponse{Cancellations: make([]requestedCancellationResponse, len(out.Cancellations))}
	for i, d := range out.Cancellations {
		resp.Cancellations[i] = requestedCancellationResponse{DocumentID: d.DocumentID, InsuranceID: d.InsuranceID, Status: string(d.Status)}
	}
	c.JSON(http.StatusCreated, resp)
}

// writeCancellationError maps the cancellation service's errors to the contract's problems.
func writeCancellationError(c *gin.Context, err error) {
	var exists *app.CancellationExistsError
	var unknown *app.UnknownInsuranceError
	switch {
	case len(domain.FieldErrors(err)) > 0:
		writeFieldErrors(c, "The cancellation request is invalid.", err)
	case errors.Is(err, app.ErrSigningNotConfigured):
		httpapi.AbortProblem(c, http.StatusUnprocessableEntity, CodeSigningNotConfigured,
			"This client has no signing provider key or power-of-attorney template; the operator configures them.")
	case errors.As(err, &unknown):
		httpapi.AbortProblem(c, http.StatusUnprocessableEntity, CodeUnknownInsurance,
			fmt.Sprintf("The collection has no insurance %q.", unknown.InsuranceID))
	case errors.Is(err, cancellation.ErrHolderErased):
		httpapi.AbortProblem(c, http.StatusUnprocessableEntity, CodeCollectionNotCancellable,
			"The collection's user was deleted; there is no holder to send a power of attorney to.")
	case errors.Is(err, cancellation.ErrNotCancellable):
		httpapi.AbortProblem(c, http.StatusUnprocessableEntity, CodeCollectionNotCancellable,
			"The collection is not a completed insurance collection of this client.")
	case errors.As(err, &exists):
		httpapi.AbortProblem(c, http.StatusConflict, CodeCancellationExists,
			fmt.Sprintf("Insurance %q already has a live cancellation (%s).", exists.InsuranceID, exists.DocumentID))
	case errors.Is(err, app.ErrCancellationOfOtherUser):
		httpapi.AbortProblem(c, http.StatusForbidden, httpapi.CodeForbiddenForSession,
			"The session token reaches only its own user's resources.")
	case errors.Is(err, app.ErrTooManyCancellations):
		httpapi.AbortProblem(c, http.StatusUnprocessableEntity, CodeTooManyCancellations,
			fmt.Sprintf("The insurance has had %d cancellations already; no more can be requested for it.", app.MaxCancellationsPerInsurance))
	default:
		writeCommandError(c, err, "The cancellation request is invalid.")
	}
}

// cancellationResponse is the API's cancellation: the body of DELETE /cancellations/{documentId}
// (and of the query side's GET, which presents the read model the same way).
type cancellationResponse struct {
	DocumentID        string  `json:"documentId"`
	InsuranceID       string  `json:"insuranceId"`
	CollectionID      string  `json:"collectionId"`
	Company           string  `json:"company"`
	Status            string  `json:"status"`
	IsSignedAndSealed bool    `json:"isSignedAndSealed"`
	CreatedAt         string  `json:"createdAt"`
	SignedAt          *string `json:"signedAt,omitempty"`
}

func presentCancellation(ca *cancellation.Cancellation) cancellationResponse {
	out := cancellationResponse{DocumentID: ca.DocumentID(), InsuranceID: ca.InsuranceID(), CollectionID: ca.CollectionID(),
		Company: ca.Company(), Status: string(ca.Status()), IsSignedAndSealed: ca.IsSignedAndSealed(),
		CreatedAt: httpapi.FormatTime(ca.RequestedAt())}
	if t := ca.SignedAt(); !t.IsZero() {
		s := httpapi.FormatTime(t)
		out.SignedAt = &s
	}
	return out
}

// cancelCancellation withdraws the client's cancellation and answers it, now CANCELED.
func (h *handlers) cancelCancellation(c *gin.Context) {
	ctx := c.Request.Context()
	id, ok := uuids.Canonical(c.Param("documentId"))
	if !ok {
		cancellationNotFound(c)
		return
	}
	sessionUser, _ := httpapi.SessionUser(c)
	canceled, err := h.deps.Cancellations.Cancel(ctx, app.CancelCancellation{Tenant: httpapi.ClientID(c), DocumentID: id,
		SessionUser: sessionUser, CorrelationID: httpapi.CorrelationID(ctx), RequestID: httpapi.RequestID(ctx)})
	switch {
	case errors.Is(err, app.ErrCancellationNotFound):
		cancellationNotFound(c)
	case errors.Is(err, app.ErrCancellationOfOtherUser):
		httpapi.AbortProblem(c, http.StatusForbidden, httpapi.CodeForbiddenForSession,
			"The session token reaches only its own user's resources.")
	case errors.Is(err, cancellation.ErrFinal):
		httpapi.AbortProblem(c, http.StatusConflict, CodeCancellationFinal,
			"The cancellation is final (signed, rejected, timed out, withdrawn or failed); there is nothing to withdraw.")
	case err != nil:
		writeCommandError(c, err, "The request is invalid.")
	default:
		c.JSON(http.StatusOK, presentCancellation(canceled))
	}
}

func cancellationNotFound(c *gin.Context) {
	httpapi.AbortProblem(c, http.StatusNotFound, CodeCancellationNotFound, "No such cancellation.")
}

// providerCallback takes a signing provider's report that a process changed. Its signature is
// checked with the client's provider key before anything is read of it; a valid one is recorded
// on the cancellation (once per event id), which sends the connector to read the process at the
// provider. The answer says nothing of the cancellation: 204 when recorded or known, 401 for a
// bad signature (also for a client that does not exist or has no signing configuration, so that
// an unsigned request tells nothing of which clients exist), 404 for a cancellation that is not
// the client's.
func (h *handlers) providerCallback(c *gin.Context) {
	ctx := c.Request.Context()
	tenant := c.Param("clientId")
	body, err := io.ReadAll(c.Request.Body)
	if err != nil {
		httpapi.WriteProblem(c, httpapi.DecodeProblem("", err))
		return
	}
	key, ok, err := h.deps.Cancellations.SigningKey(ctx, tenant)
	if err != nil {
		httpapi.AbortInternal(c, err)
		return
	}
	cb, err := h.deps.CallbackVerifier.VerifyCallback(key, c.Request.Header, body, h.deps.Now())
	if !ok || err != nil {
		httpapi.AbortProblem(c, http.StatusUnauthorized, CodeInvalidSignature, "The callback's signature does not verify, or it is stale.")
		return
	}
	switch err := h.deps.Cancellations.NoteProviderCallback(ctx, tenant, cb, httpapi.CorrelationID(ctx)); {
	case errors.Is(err, app.ErrCancellationNotFound):
		cancellationNotFound(c)
	case err != nil:
		writeCommandError(c, err, "The callback is invalid.")
	default:
		c.Status(http.StatusNoContent)
	}
}
