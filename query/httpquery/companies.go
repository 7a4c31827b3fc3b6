package httpquery

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/samla/samla/domain/company"
	"github.com/samla/samla/platform/httpapi"
)

// CodeCompanyNotFound is the 404 of a company id the catalog does not know.
const CodeCompanyNotFound = "COMPANY_NOT_FOUND"

// CompanyResponse is one entry of GET /companies (API.md). The lists are never null.
type CompanyResponse struct {
	ID           string   `json:"id"`
	DisplayName  string   `json:"displayName"`
	Market       string   `json:"market"`
	Products     []string `json:"products"`
	LoginMethods []string `json:"loginMethods"`
}

// AvailabilityResponse is a company's availability (API.md): AVAILABLE, UNAVAILABLE or
// MAINTENANCE, the login methods it takes, and a user-facing message when it has one.
type AvailabilityResponse struct {
	Company      string   `json:"company"`
	Status       string   `json:"status"`
	LoginMethods []string `json:"loginMethods"`
	Message      string   `json:"message,omitempty"`
}

func (h *handlers) registerCompanies(r gin.IRoutes) {
	r.GET("/companies", h.companies)
	r.GET("/companies/availability", h.availabilities)
	r.GET("/companies/:companyId/availability", h.availability)
}

func (h *handlers) companies(c *gin.Context) {
	all := h.deps.Companies.All()
	out := make([]CompanyResponse, 0, len(all))
	for _, co := range all {
		products := make([]string, len(co.Products))
		for i, p := range co.Products {
			products[i] = string(p)
		}
		out = append(out, CompanyResponse{ID: co.ID, DisplayName: co.DisplayName, Market: co.Market,
			Products: products, LoginMethods: loginMethods(co)})
	}
	c.JSON(http.StatusOK, out)
}

func (h *handlers) availabilities(c *gin.Context) {
	all := h.deps.Companies.All()
	out := make([]AvailabilityResponse, 0, len(all))
	for _, co := range all {
		out = append(out, availabilityOf(co))
	}
	// Availability changes while the service runs; a client checks it right before starting.
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, out)
}

func (h *handlers) availability(c *gin.Context) {
	co, err := h.deps.Companies.Get(c.Param("companyId"))
	switch {
	case errors.Is(err, company.ErrUnknownCompany):
		httpapi.AbortProblem(c, http.StatusNotFound, CodeCompanyNotFound, "No such company.")
		return
	case err != nil:
		httpapi.AbortInternal(c, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, availabilityOf(co))
}

// availabilityOf presents a catalog entry's availability. A company whose availability is not
// set is reported UNAVAILABLE: POST /collections refuses it too, and the two must agree.
func availabilityOf(co company.Company) AvailabilityResponse {
	status := co.Availability
	switch status {
	case company.Available, company.Unavailable, company.Maintenance:
	default:
		status = company.Unavailable
	}
	return AvailabilityResponse{Company: co.ID, Status: string(status), LoginMethods: loginMethods(co), Message: co.Message}
}

func loginMethods(co company.Company) []string {
	return append(make([]string, 0, len(co.LoginMethods)), co.LoginMethods...)
}
