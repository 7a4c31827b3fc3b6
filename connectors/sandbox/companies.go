package sandbox

import (
	"net/http"
	"slices"
	"sort"

	"github.com/samla/samla/domain/company"
)

// demoCompany is one company of SANDBOX.md as the company itself sees it. The sandbox keeps
// its own list rather than reading Samla's catalog: a real company does not know Samla's
// catalog, and a test compares the two so they cannot drift apart unnoticed.
type demoCompany struct {
	id           string
	displayName  string
	market       string
	products     []string // INSURANCE, WEALTH
	loginMethods []string // what the company accepts
	maintenance  bool     // every session request is refused with 503 MAINTENANCE
	insurances   bool     // serves insurance data
}

func demoCompanies() map[string]*demoCompany {
	eid := []string{company.LoginEIDOtherDevice, company.LoginEIDOtherDeviceMock}
	list := []*demoCompany{
		{id: "se-demo-insurer", displayName: "Demo Försäkring", market: "se", products: []string{"INSURANCE"},
			loginMethods: append(slices.Clone(eid), company.LoginEIDSameDeviceClientSide, company.LoginPDFUpload),
			insurances:   true},
		{id: "se-demo-pension", displayName: "Demo Pension", market: "se", products: []string{"WEALTH"},
			loginMethods: slices.Clone(eid)},
		{id: "se-demo-bank", displayName: "Demo Bank", market: "se", products: []string{"WEALTH"},
			loginMethods: slices.Clone(eid)},
		{id: "fr-demo-pension-info", displayName: "Démo Info Retraite", market: "fr", products: []string{"WEALTH"},
			loginMethods: []string{company.LoginPDFUpload, company.LoginEIDOtherDeviceMock}},
		{id: "ee-demo-insurer", displayName: "Demo Kindlustus", market: "ee", products: []string{"INSURANCE"},
			loginMethods: []string{company.LoginPDFUpload}, insurances: true},
		{id: "se-demo-maintenance", displayName: "Demo Underhåll", market: "se", products: []string{"INSURANCE"},
			loginMethods: []string{company.LoginEIDOtherDeviceMock}, maintenance: true, insurances: true},
	}
	out := make(map[string]*demoCompany, len(list))
	for _, c := range list {
		out[c.id] = c
	}
	return out
}

func demoCompanyOrder(m map[string]*demoCompany) []*demoCompany {
	out := make([]*demoCompany, 0, len(m))
	for _, c := range m {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// simulatedLoginMethods are the login methods whose flow the sandbox plays through. A method a
// company lists but the sandbox does not simulate yet is answered 501, which is different from
// a method the company does not support at all (422).
var simulatedLoginMethods = map[string]bool{
	company.LoginEIDOtherDeviceMock: true,
}

type companyView struct {
	ID           string   `json:"id"`
	DisplayName  string   `json:"displayName"`
	Market       string   `json:"market"`
	Products     []string `json:"products"`
	LoginMethods []string `json:"loginMethods"`
	Status       string   `json:"status"` // OPERATIONAL or MAINTENANCE
}

func (c *demoCompany) view() companyView {
	status := "OPERATIONAL"
	if c.maintenance {
		status = "MAINTENANCE"
	}
	return companyView{ID: c.id, DisplayName: c.displayName, Market: c.market, Products: c.products,
		LoginMethods: c.loginMethods, Status: status}
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
