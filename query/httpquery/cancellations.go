package httpquery

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/query"
)

// Problem codes of the cancellation queries (API.md, "Cancellations").
const (
	// CodeCancellationNotFound is the 404 of an unknown cancellation or another client's.
	CodeCancellationNotFound = "CANCELLATION_NOT_FOUND"
	// CodeNotSigned is the 409 of a signed PDF asked for before the cancellation is CLOSED and
	// sealed (or after its user's erasure removed it).
	CodeNotSigned = "NOT_SIGNED"
)

const documentIDParam = "documentId"

// registerCancellations mounts the cancellation queries (every version). A user's session may
// read its own user's cancellations: the handlers check whose a cancellation, or a collection,
// is once they found it.
func (h *handlers) registerCancellations(r gin.IRoutes) {
	r.GET("/cancellations/:"+documentIDParam, httpapi.AllowSessionsCheckedByHandler, h.getCancellation)
	r.GET("/cancellations/:"+documentIDParam+"/pdf", httpapi.AllowSessionsCheckedByHandler, h.cancellationPDF)
	r.GET("/collections/:collectionId/cancellations", httpapi.AllowSessionsCheckedByHandler, h.collectionCancellations)
}

// CancellationResponse is the API's cancellation (GET /cancellations/{documentId}, and each item
// of a collection's list).
type CancellationResponse struct {
	DocumentID        string  `json:"documentId"`
	InsuranceID       string  `json:"insuranceId"`
	CollectionID      string  `json:"collectionId"`
	Company           string  `json:"company"`
	Status            string  `json:"status"`
	IsSignedAndSealed bool    `json:"isSignedAndSealed"`
	CreatedAt         string  `json:"createdAt"`
	SignedAt          *string `json:"signedAt,omitempty"`
}

// CollectionCancellationsResponse is the body of GET /collections/{collectionId}/cancellations.
type CollectionCancellationsResponse struct {
	Cancellations []CancellationResponse `json:"cancellations"`
}

func presentCancellation(v query.CancellationView) CancellationResponse {
	out := CancellationResponse{DocumentID: v.DocumentID, InsuranceID: v.InsuranceID, CollectionID: v.CollectionID,
		Company: v.Company, Status: v.Status, IsSignedAndSealed: v.IsSignedAndSealed, CreatedAt: httpapi.FormatTime(v.CreatedAt)}
	if v.SignedAt != nil {
		s := httpapi.FormatTime(*v.SignedAt)
		out.SignedAt = &s
	}
	return out
}

func cancellationNotFound(c *gin.Context) {
	httpapi.AbortProblem(c, http.StatusNotFound, CodeCancellationNotFound, "No such cancellation.")
}

// loadCancellation reads the path's cancellation of the client: a malformed id, an unknown one
// and another client's are not found alike; a user's session is refused (403) another user's.
func (h *handlers) loadCancellation(c *gin.Context) (query.CancellationView, bool) {
	owner := func(v query.CancellationView) (tenant, userUUID string) { return v.Tenant, v.UserUUID }
	return loadOwned(c, documentIDParam, cancellationNotFound, h.deps.Cancellations.Cancellation, owner)
}

func (h *handlers) getCancellation(c *gin.Context) {
	view, ok := h.loadCancellation(c)
	if !ok {
		return
	}
	// Clients poll the signature status; no cache may answer them.
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, presentCancellation(view))
}

// cancellationPDF serves the signed, sealed power of attorney for archiving.
func (h *handlers) cancellationPDF(c *gin.Context) {
	view, ok := h.loadCancellation(c)
	if !ok {
		return
	}
	doc, err := h.deps.Cancellations.SignedDocument(c.Request.Context(), httpapi.ClientID(c), view.DocumentID)
	switch {
	case errors.Is(err, query.ErrNotFound):
		cancellationNotFound(c)
	case errors.Is(err, query.ErrNoSignedDocument):
		httpapi.AbortProblem(c, http.StatusConflict, CodeNotSigned,
			"The cancellation has no signed document: it is not signed and sealed yet (status "+view.Status+"), or its user was deleted.")
	case err != nil:
		httpapi.AbortInternal(c, err)
	default:
		c.Header("Content-Disposition", `attachment; filename="power-of-attorney-`+view.DocumentID+`.pdf"`)
		c.Header("Cache-Control", "private, no-store")
		c.Data(http.StatusOK, "application/pdf", doc)
	}
}

// collectionCancellations lists the cancellations of the client's collection, oldest first.
func (h *handlers) collectionCancellations(c *gin.Context) {
	id, ok := collectionID(c)
	if !ok {
		return
	}
	if _, ok := h.loadStatus(c, id); !ok {
		return
	}
	views, err := h.deps.Cancellations.CollectionCancellations(c.Request.Context(), httpapi.ClientID(c), id)
	if err != nil {
		httpapi.AbortInternal(c, err)
		return
	}
	out := CollectionCancellationsResponse{Cancellations: make([]CancellationResponse, 0, len(views))}
	for _, v := range views {
		if v.Tenant != httpapi.ClientID(c) {
			continue // the reader scopes by tenant; this guard keeps a reader bug from leaking
		}
		out.Cancellations = append(out.Cancellations, presentCancellation(v))
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, out)
}
