package httpquery

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/query"
	"github.com/samla/samla/query/presenter"
)

// CodeConsentNotFound is the 404 of an unknown consent or another client's.
const CodeConsentNotFound = "CONSENT_NOT_FOUND"

// consentIDParam names the consent in the consent routes' paths.
const consentIDParam = "consentId"

// registerConsents mounts the consent queries, which exist from 2026-04-01 on. A user's session
// may read its own user's consents: the handlers check whose a consent is once they found it, and
// the list's path names its user.
func (h *handlers) registerConsents(r gin.IRoutes) {
	since := httpapi.SinceVersion(httpapi.V20260401)
	r.GET("/consents/:"+consentIDParam+"/status", httpapi.AllowSessionsCheckedByHandler, since, h.consentStatus)
	r.GET("/consents/:"+consentIDParam, httpapi.AllowSessionsCheckedByHandler, since, h.getConsent)
	r.GET("/users/:"+httpapi.SessionUserParam+"/consents", httpapi.AllowSessionsOfPathUser, since, h.userConsents)
}

func consentNotFound(c *gin.Context) {
	httpapi.AbortProblem(c, http.StatusNotFound, CodeConsentNotFound, "No such consent.")
}

// loadConsent reads the path's consent of the client: a malformed id, an unknown consent and
// another client's are not found alike; a user's session is refused (403) another user's.
func (h *handlers) loadConsent(c *gin.Context) (query.ConsentView, bool) {
	owner := func(v query.ConsentView) (tenant, userUUID string) { return v.Tenant, v.UserUUID }
	return loadOwned(c, consentIDParam, consentNotFound, h.deps.Consents.Get, owner)
}

func (h *handlers) consentStatus(c *gin.Context) {
	view, ok := h.loadConsent(c)
	if !ok {
		return
	}
	// Polls must see the newest status, and the body may carry the EID order's autostart token
	// and QR data: no cache may keep it.
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, presenter.ConsentStatusPoll(view, h.deps.Now()))
}

func (h *handlers) getConsent(c *gin.Context) {
	view, ok := h.loadConsent(c)
	if !ok {
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, presenter.Consent(view, h.deps.Now()))
}

func (h *handlers) userConsents(c *gin.Context) {
	id, ok := userUUID(c)
	if !ok {
		return
	}
	tenant := httpapi.ClientID(c)
	limit, pos, ok := userListPage(c, userConsentsList, tenant, id)
	if !ok {
		return
	}
	// A user the client cannot see has no consents to list: not found, never an empty list.
	if _, ok := h.loadUser(c, id); !ok {
		return
	}
	var after *query.ConsentCursor
	if pos != nil {
		after = &query.ConsentCursor{CreatedAt: pos.CreatedAt, ConsentID: pos.ID}
	}
	// One more than the page tells whether another page follows, so the last page says so itself.
	rows, err := h.deps.UserConsents.ListByUser(c.Request.Context(), tenant, id, after, limit+1)
	if err != nil {
		httpapi.AbortInternal(c, err)
		return
	}
	now := h.deps.Now()
	out := presenter.UserConsentsResponse{Items: make([]presenter.ConsentResponse, 0, min(len(rows), limit))}
	for i, row := range rows {
		if i == limit {
			last := rows[i-1]
			out.NextCursor = encodeCursor(userConsentsList, tenant, id, listPosition{CreatedAt: last.CreatedAt, ID: last.ConsentID})
			break
		}
		if row.Tenant != tenant || row.UserUUID != id {
			continue // a reader that forgot a filter must not leak another's consent
		}
		out.Items = append(out.Items, presenter.Consent(row, now))
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, out)
}
