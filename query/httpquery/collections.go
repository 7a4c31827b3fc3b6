// Package httpquery holds the read side's HTTP handlers: they read a read model through a port,
// scoped to the authenticated client, and render it with the presenter of the client's version.
package httpquery

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/company"
	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/platform/uuids"
	"github.com/samla/samla/query"
	"github.com/samla/samla/query/presenter"
)

// CodeCollectionNotFound is the 404 of an unknown collection or another client's.
const CodeCollectionNotFound = "COLLECTION_NOT_FOUND"

// Paging of the event history.
const (
	DefaultEventsLimit = 100
	// MaxEventsLimit bounds one page: a collection has tens of events, and an audit replay pages.
	MaxEventsLimit = 1000
)

// Companies is the port to the company catalog (*company.Catalog, in domain/company, satisfies
// it): the presenter needs a company's market, and the company endpoints list the catalog.
type Companies interface {
	Get(id string) (company.Company, error)
	// All lists every company, in a stable order.
	All() []company.Company
}

// Deps are what the query routes need.
type Deps struct {
	Status    query.StatusReader
	History   query.HistoryReader
	Companies Companies
	// Data serves the data endpoints (data.go); they are mounted only when it is set.
	Data query.DataReader
	// Users and UserCollections serve the user endpoints (users.go); they are mounted only when
	// Users is set, and then UserCollections is required.
	Users           query.UserReader
	UserCollections query.UserCollectionsReader
	// Consents and UserConsents serve the consent endpoints (consents.go); they are mounted
	// only when Consents is set, and then UserConsents and Users are required.
	Consents     query.ConsentReader
	UserConsents query.UserConsentsReader
	// Cancellations serves the cancellation endpoints (cancellations.go); they are mounted only
	// when it is set.
	Cancellations query.CancellationReader
	// Now is the clock of the status polls' animated QR data and of consents' expiry; nil means
	// time.Now.
	Now func() time.Time
}

// RegisterRoutes mounts the query routes. r must carry httpapi's middleware (NewEngine's engine,
// or a group of it): the handlers rely on its authentication and version negotiation.
func RegisterRoutes(r gin.IRoutes, d Deps) {
	if d.Status == nil || d.History == nil || d.Companies == nil {
		panic("httpquery.RegisterRoutes: Deps.Status, Deps.History and Deps.Companies are required")
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	h := &handlers{deps: d}
	// A user's session may poll its own user's collections (loadStatus checks whose); their
	// audit history is the client's.
	r.GET("/collections/:collectionId/status", httpapi.AllowSessionsCheckedByHandler, h.status)
	r.GET("/collections/:collectionId/events", h.events)
	h.registerCompanies(r)
	if d.Data != nil {
		h.registerData(r)
	}
	if d.Users != nil {
		if d.UserCollections == nil {
			panic("httpquery.RegisterRoutes: Deps.UserCollections is required with Deps.Users")
		}
		h.registerUsers(r)
	}
	if d.Consents != nil {
		if d.UserConsents == nil || d.Users == nil {
			panic("httpquery.RegisterRoutes: Deps.UserConsents and Deps.Users are required with Deps.Consents")
		}
		h.registerConsents(r)
	}
	if d.Cancellations != nil {
		h.registerCancellations(r)
	}
}

type handlers struct{ deps Deps }

// collectionID returns the path's id in canonical form (uuids.Canonical, any case), or answers
// 404: a malformed id names no collection, and reading it would only cost a lookup.
func collectionID(c *gin.Context) (string, bool) {
	id, ok := uuids.Canonical(c.Param("collectionId"))
	if !ok {
		notFound(c)
		return "", false
	}
	return id, true
}

func notFound(c *gin.Context) {
	httpapi.AbortProblem(c, http.StatusNotFound, CodeCollectionNotFound, "No such collection.")
}

// loadStatus reads the client's collection; another client's is not found, like an unknown one,
// and a user's session is refused (403) another user's collection or one of no user.
func (h *handlers) loadStatus(c *gin.Context, id string) (query.StatusView, bool) {
	view, err := h.deps.Status.Get(c.Request.Context(), httpapi.ClientID(c), id)
	switch {
	case errors.Is(err, query.ErrNotFound):
		notFound(c)
		return query.StatusView{}, false
	case err != nil:
		httpapi.AbortInternal(c, err)
		return query.StatusView{}, false
	case view.Tenant != "" && view.Tenant != httpapi.ClientID(c):
		// The reader is supposed to scope by tenant; this guard keeps a reader bug from leaking.
		notFound(c)
		return query.StatusView{}, false
	case !httpapi.RequireSessionUser(c, view.UserUUID):
		return query.StatusView{}, false
	}
	return view, true
}

func (h *handlers) status(c *gin.Context) {
	id, ok := collectionID(c)
	if !ok {
		return
	}
	view, ok := h.loadStatus(c, id)
	if !ok {
		return
	}
	market := ""
	if co, err := h.deps.Companies.Get(view.Company); err == nil {
		market = co.Market
	}
	// What the status asks of the client, with the QR data of this very second; the QR secret
	// stays on the server.
	view.ExtraInformation = presenter.ExtraInformation(view, h.deps.Now())
	// Polls must see the newest status; no cache may answer them. A client polls every
	// collection every second: a successful poll's access line is debug.
	c.Header("Cache-Control", "no-store")
	httpapi.QuietAccessLog(c)
	c.JSON(http.StatusOK, presenter.CollectionStatus(httpapi.ServiceVersion(c), market, view))
}

func (h *handlers) events(c *gin.Context) {
	id, ok := collectionID(c)
	if !ok {
		return
	}
	var errs []httpapi.FieldError
	var after *uint64
	if raw, present := c.GetQuery("afterRevision"); present {
		v, err := strconv.ParseUint(raw, 10, 64)
		if err != nil {
			errs = append(errs, httpapi.FieldError{Field: "afterRevision", Message: "must be a non-negative integer"})
		} else {
			after = &v
		}
	}
	limit := DefaultEventsLimit
	if raw, present := c.GetQuery("limit"); present {
		v, err := strconv.Atoi(raw)
		if err != nil || v < 1 || v > MaxEventsLimit {
			errs = append(errs, httpapi.FieldError{Field: "limit", Message: "must be an integer from 1 to " + strconv.Itoa(MaxEventsLimit)})
		} else {
			limit = v
		}
	}
	if len(errs) > 0 {
		httpapi.AbortValidation(c, "The query parameters are invalid.", errs...)
		return
	}
	// The history of a collection the client cannot see is not found, never an empty list, so
	// existence is checked on the status read model first.
	if _, ok := h.loadStatus(c, id); !ok {
		return
	}
	events, err := h.deps.History.List(c.Request.Context(), httpapi.ClientID(c), collection.StreamName(id), after, limit)
	if err != nil {
		httpapi.AbortInternal(c, err)
		return
	}
	tenant := httpapi.ClientID(c)
	visible := make([]query.HistoryEvent, 0, len(events))
	for _, e := range events {
		if e.Tenant == "" || e.Tenant == tenant { // guard against a reader that forgot the tenant
			visible = append(visible, e)
		}
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, presenter.CollectionEvents(id, visible))
}
