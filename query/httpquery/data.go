package httpquery

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/platform/uuids"
	"github.com/samla/samla/query"
	"github.com/samla/samla/query/presenter"
)

// Problem codes of the data endpoints.
const (
	// CodeCollectionNotFinished is the 409 of a data read before the collection reached a final
	// status (API.md), and while the data read model has not caught up with the final status.
	CodeCollectionNotFinished = "COLLECTION_NOT_FINISHED"
	// CodeProductMismatch is the 404 of a data endpoint of the other product (insurance data of a
	// wealth collection, or the reverse).
	CodeProductMismatch = "PRODUCT_MISMATCH"
	// CodeDocumentNotFound is the 404 of a career statement that the collection does not have.
	CodeDocumentNotFound = "DOCUMENT_NOT_FOUND"
)

// notFinishedRetryAfter is the Retry-After, in seconds, of a 409 caused by the data read model
// lagging behind the status: projections catch up within moments, so the client may retry soon.
const notFinishedRetryAfter = "1"

// registerData mounts the data routes. They need Deps.Data besides what every query route needs.
// A user's session may read its own user's collections' data (finishedData checks whose); the
// 2025-01-01 /data knows no sessions.
func (h *handlers) registerData(r gin.IRoutes) {
	r.GET("/collections/:collectionId/insurance/data", httpapi.AllowSessionsCheckedByHandler, h.insuranceData)
	r.GET("/collections/:collectionId/wealth/data", httpapi.AllowSessionsCheckedByHandler, h.wealthData)
	r.GET(presenter.CareerStatementPath(":collectionId"), httpapi.AllowSessionsCheckedByHandler, h.careerStatement)
	r.GET("/data", h.legacyData)
}

func (h *handlers) insuranceData(c *gin.Context) {
	data, ok := h.finishedData(c, c.Param("collectionId"), collection.ProductInsurance, nil)
	if !ok {
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, presenter.InsuranceData(data))
}

func (h *handlers) wealthData(c *gin.Context) {
	data, ok := h.finishedData(c, c.Param("collectionId"), collection.ProductWealth, nil)
	if !ok {
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, presenter.WealthData(httpapi.ServiceVersion(c), data))
}

// careerStatement serves the French pension-information company's career statement as the PDF
// it is, at the path the wealth data names (presenter.CareerStatementPath).
func (h *handlers) careerStatement(c *gin.Context) {
	id, ok := collectionID(c)
	if !ok {
		return
	}
	onlyFrench := func(view query.StatusView) bool {
		// A permanent answer, so it comes before the one that changes with time (409): only the
		// French pension-information company (the wealth company of market fr, as the status
		// presenter also identifies it) returns a career statement.
		co, err := h.deps.Companies.Get(view.Company)
		if err != nil || !strings.EqualFold(co.Market, "fr") {
			httpapi.AbortProblem(c, http.StatusNotFound, CodeDocumentNotFound,
				"Only the French pension-information company returns a career statement.")
			return false
		}
		return true
	}
	if _, ok := h.finishedData(c, id, collection.ProductWealth, onlyFrench); !ok {
		return
	}
	doc, err := h.deps.Data.GetDocument(c.Request.Context(), httpapi.ClientID(c), id, collection.DocumentFrenchCareerStatement)
	switch {
	case errors.Is(err, query.ErrNotFound):
		httpapi.AbortProblem(c, http.StatusNotFound, CodeDocumentNotFound, "The collection has no career statement.")
		return
	case err != nil:
		httpapi.AbortInternal(c, err)
		return
	}
	name := doc.FileName
	if name == "" {
		name = presenter.CareerStatementFileName
	}
	disposition := mime.FormatMediaType("attachment", map[string]string{"filename": name})
	if disposition == "" { // a name the header cannot carry
		disposition = mime.FormatMediaType("attachment", map[string]string{"filename": presenter.CareerStatementFileName})
	}
	c.Header("Content-Disposition", disposition)
	c.Header("Cache-Control", "no-store")
	c.Data(http.StatusOK, "application/pdf", doc.Content)
}

// legacyData is GET /data?collectionId=… of 2025-01-01: the collection's data in that version's
// shape, whatever its product. Later versions read data under /collections/{id}/… only.
func (h *handlers) legacyData(c *gin.Context) {
	if httpapi.ServiceVersion(c) >= httpapi.V20260401 { // ISO dates order lexically
		httpapi.AbortProblem(c, http.StatusNotFound, httpapi.CodeNotFound, "No such resource in this Service-Version.")
		return
	}
	id := c.Query("collectionId")
	if id == "" {
		httpapi.AbortValidation(c, "The query parameters are invalid.",
			httpapi.FieldError{Field: "collectionId", Message: "is required"})
		return
	}
	data, ok := h.finishedData(c, id, "", nil)
	if !ok {
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, presenter.LegacyData(data))
}

// finishedData answers the checks every data endpoint shares, in an order that gives permanent
// answers first: 404 for a malformed id, an unknown collection or another client's, 403 for a
// session's request of a collection that is not its user's, and 404 for a collection of another
// product than want ("" accepts any); then extra's own check; then 409 until the collection is
// final. It returns the data once it is complete.
//
// Finality is read from the status read model, as the status endpoint shows it, so that a
// client that saw a final status never gets a 409 for it afterwards, except for a moment while
// the data read model (a projection of its own) catches up with the final status; the data is
// withheld until then rather than served incomplete.
func (h *handlers) finishedData(c *gin.Context, rawID string, want collection.Product, extra func(query.StatusView) bool) (query.DataView, bool) {
	id, ok := uuids.Canonical(rawID)
	if !ok {
		// A malformed id names no collection; reading it would only cost a lookup.
		httpapi.AbortProblem(c, http.StatusNotFound, CodeCollectionNotFound, "No such collection.")
		return query.DataView{}, false
	}
	tenant := httpapi.ClientID(c)
	view, err := h.deps.Status.Get(c.Request.Context(), tenant, id)
	switch {
	case errors.Is(err, query.ErrNotFound) || (err == nil && view.Tenant != "" && view.Tenant != tenant):
		// The second case guards against a reader that forgot the tenant.
		httpapi.AbortProblem(c, http.StatusNotFound, CodeCollectionNotFound, "No such collection.")
		return query.DataView{}, false
	case err != nil:
		httpapi.AbortInternal(c, err)
		return query.DataView{}, false
	case !httpapi.RequireSessionUser(c, view.UserUUID):
		return query.DataView{}, false
	}
	if want != "" && view.Product != string(want) {
		path := "/collections/" + id + "/" + strings.ToLower(view.Product) + "/data"
		httpapi.AbortProblem(c, http.StatusNotFound, CodeProductMismatch,
			fmt.Sprintf("The collection collected %s data, not %s; read it at %s.", view.Product, want, path))
		return query.DataView{}, false
	}
	if extra != nil && !extra(view) {
		return query.DataView{}, false
	}
	if !collection.Status(view.Status).IsFinal() {
		httpapi.AbortProblem(c, http.StatusConflict, CodeCollectionNotFinished,
			"The collection has not finished; poll its status until it is final.")
		return query.DataView{}, false
	}
	data, err := h.deps.Data.GetData(c.Request.Context(), tenant, id)
	lagging := errors.Is(err, query.ErrNotFound) || (err == nil && !collection.Status(data.Status).IsFinal())
	switch {
	case lagging:
		c.Header("Retry-After", notFinishedRetryAfter)
		httpapi.AbortProblem(c, http.StatusConflict, CodeCollectionNotFinished,
			"The collection's data is still being prepared; retry in a moment.")
		return query.DataView{}, false
	case err != nil:
		httpapi.AbortInternal(c, err)
		return query.DataView{}, false
	case data.Tenant != "" && data.Tenant != tenant:
		httpapi.AbortProblem(c, http.StatusNotFound, CodeCollectionNotFound, "No such collection.")
		return query.DataView{}, false
	}
	return data, true
}
