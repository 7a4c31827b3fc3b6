package sandbox

import (
	"net/http"
	"slices"
	"sort"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/company"
)

// Data products of the companies' API: each is GET …/sessions/{sessionId}/{product}.
const (
	productInsurances          = "insurances"
	productGroupInsurances     = "group-insurances"
	productPensions            = "pensions"
	productInvestments         = "investments"
	productAccounts            = "accounts"
	productCards               = "cards"
	productLoans               = "loans"
	productSavings             = "savings"
	productPersonalInformation = "personal-information"
	productCareerStatement     = "career-statement"
)

// demoCompany is one company of SANDBOX.md as the company itself sees it. Samla's view of the
// same companies, the catalog the embedded default runs with, is derived from this list
// (Catalog), so the two cannot drift apart.
type demoCompany struct {
	id           string
	displayName  string
	market       string
	products     []string // INSURANCE, WEALTH
	loginMethods []string // what the company accepts
	maintenance  bool     // every session request is refused with 503 MAINTENANCE
	// dataProducts are what an authenticated session can read, in the order a client reads them.
	dataProducts []string
	// slowProduct is the product whose backend times out for the partial persona.
	slowProduct string
	// enrollmentCheck: the company first checks that the person is a customer
	// (CUSTOMER_ENROLLMENT_CHECK) before the sign-in starts.
	enrollmentCheck bool
	// consents: the company gives PSD2 account-information consents (SANDBOX.md, "Consents").
	consents bool
}

func demoCompanies() map[string]*demoCompany {
	eid := []string{company.LoginEIDOtherDevice, company.LoginEIDOtherDeviceMock}
	insurerData := []string{productInsurances, productGroupInsurances, productPersonalInformation}
	list := []*demoCompany{
		{id: "se-demo-insurer", displayName: "Demo Försäkring", market: "se", products: []string{"INSURANCE"},
			loginMethods: append(slices.Clone(eid), company.LoginEIDSameDeviceClientSide, company.LoginPDFUpload),
			dataProducts: insurerData, slowProduct: productGroupInsurances},
		{id: "se-demo-pension", displayName: "Demo Pension", market: "se", products: []string{"WEALTH"},
			loginMethods: slices.Clone(eid),
			dataProducts: []string{productPensions, productInvestments, productPersonalInformation}, slowProduct: productInvestments},
		{id: "se-demo-bank", displayName: "Demo Bank", market: "se", products: []string{"WEALTH"},
			loginMethods: slices.Clone(eid),
			// Accounts and cards are PSD2 products, read under a consent (consent.go), not
			// under the login session; savings is the product that times out, so that the
			// partial persona is partial with or without a consent.
			dataProducts: []string{productLoans, productSavings, productPersonalInformation},
			slowProduct:  productSavings, consents: true},
		{id: "fr-demo-pension-info", displayName: "Démo Info Retraite", market: "fr", products: []string{"WEALTH"},
			loginMethods: []string{company.LoginPDFUpload, company.LoginEIDOtherDeviceMock},
			dataProducts: []string{productPensions, productCareerStatement, productPersonalInformation},
			slowProduct:  productCareerStatement, enrollmentCheck: true},
		{id: "ee-demo-insurer", displayName: "Demo Kindlustus", market: "ee", products: []string{"INSURANCE"},
			loginMethods: []string{company.LoginPDFUpload}, dataProducts: insurerData, slowProduct: productGroupInsurances},
		{id: "se-demo-maintenance", displayName: "Demo Underhåll", market: "se", products: []string{"INSURANCE"},
			loginMethods: []string{company.LoginEIDOtherDeviceMock}, maintenance: true, dataProducts: insurerData},
	}
	out := make(map[string]*demoCompany, len(list))
	for _, c := range list {
		out[c.id] = c
	}
	return out
}

// maintenanceMessage is the user-facing note of a company in maintenance.
const maintenanceMessage = "Planned maintenance; try again later."

// Catalog is Samla's catalog of the demo companies: what a connector needs to know to reach
// them and what clients see in GET /companies.
func Catalog() *company.Catalog {
	var list []company.Company
	for _, c := range demoCompanyOrder(demoCompanies()) {
		co := company.Company{ID: c.id, DisplayName: c.displayName, Market: c.market,
			LoginMethods: slices.Clone(c.loginMethods), Availability: company.Available, Consents: c.consents}
		for _, p := range c.products {
			co.Products = append(co.Products, collection.Product(p))
		}
		if c.maintenance {
			co.Availability, co.Message = company.Maintenance, maintenanceMessage
		}
		list = append(list, co)
	}
	return company.NewCatalog(list...)
}

func (c *demoCompany) insurer() bool { return slices.Contains(c.products, "INSURANCE") }

func demoCompanyOrder(m map[string]*demoCompany) []*demoCompany {
	out := make([]*demoCompany, 0, len(m))
	for _, c := range m {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

type companyView struct {
	ID           string   `json:"id"`
	DisplayName  string   `json:"displayName"`
	Market       string   `json:"market"`
	Products     []string `json:"products"`
	LoginMethods []string `json:"loginMethods"`
	DataProducts []string `json:"dataProducts"`
	Consents     bool     `json:"consents"` // a PSD2 consent API (consent.go)
	Status       string   `json:"status"`   // OPERATIONAL or MAINTENANCE
}

func (c *demoCompany) view() companyView {
	status := "OPERATIONAL"
	if c.maintenance {
		status = "MAINTENANCE"
	}
	return companyView{ID: c.id, DisplayName: c.displayName, Market: c.market, Products: c.products,
		LoginMethods: c.loginMethods, DataProducts: c.dataProducts, Consents: c.consents, Status: status}
}

func (s *Sandbox) listCompanies(w http.ResponseWriter, r *http.Request) {
	out := []companyView{}
	for _, c := range demoCompanyOrder(s.companies) {
		out = append(out, c.view())
	}
	writeJSON(w, http.StatusOK, map[string]any{"companies": out})
}

func (s *Sandbox) getCompany(w http.ResponseWriter, r *http.Request) {
	c, ok := s.companies[r.PathValue("companyId")]
	if !ok {
		writeError(w, http.StatusNotFound, "UNKNOWN_COMPANY", "No such company.")
		return
	}
	writeJSON(w, http.StatusOK, c.view())
}
