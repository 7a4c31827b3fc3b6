// Package catalog lists the companies Samla can collect from, with where their connectors reach
// them. In the embedded default these are the sandbox's demo companies.
package catalog

import (
	"fmt"
	"sort"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/company"
)

// ErrUnknownCompany is a company id that is not in the catalog.
var ErrUnknownCompany = fmt.Errorf("unknown company")

// Catalog is fixed once built, so it is safe for concurrent use.
type Catalog struct {
	companies map[string]company.Company
}

// New builds a catalog of companies.
func New(companies ...company.Company) *Catalog {
	c := &Catalog{companies: make(map[string]company.Company, len(companies))}
	for _, co := range companies {
		c.companies[co.ID] = co
	}
	return c
}

// Get returns one company.
func (c *Catalog) Get(id string) (company.Company, error) {
	co, ok := c.companies[id]
	if !ok {
		return company.Company{}, fmt.Errorf("%w: %q", ErrUnknownCompany, id)
	}
	return co, nil
}

// All lists the companies sorted by id.
func (c *Catalog) All() []company.Company {
	out := make([]company.Company, 0, len(c.companies))
	for _, co := range c.companies {
		out = append(out, co)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Sandbox is the catalog of the demo companies of SANDBOX.md.
func Sandbox() *Catalog {
	eid := []string{company.LoginEIDOtherDevice, company.LoginEIDOtherDeviceMock}
	return New(
		company.Company{ID: "se-demo-insurer", DisplayName: "Demo Försäkring", Market: "se",
			Products:     []collection.Product{collection.ProductInsurance},
			LoginMethods: append(append([]string{}, eid...), company.LoginEIDSameDeviceClientSide, company.LoginPDFUpload),
			Availability: company.Available},
		company.Company{ID: "se-demo-pension", DisplayName: "Demo Pension", Market: "se",
			Products: []collection.Product{collection.ProductWealth}, LoginMethods: eid, Availability: company.Available},
		company.Company{ID: "se-demo-bank", DisplayName: "Demo Bank", Market: "se",
			Products: []collection.Product{collection.ProductWealth}, LoginMethods: eid, Availability: company.Available},
		company.Company{ID: "fr-demo-pension-info", DisplayName: "Démo Info Retraite", Market: "fr",
			Products:     []collection.Product{collection.ProductWealth},
			LoginMethods: []string{company.LoginPDFUpload, company.LoginEIDOtherDeviceMock}, Availability: company.Available},
		company.Company{ID: "ee-demo-insurer", DisplayName: "Demo Kindlustus", Market: "ee",
			Products:     []collection.Product{collection.ProductInsurance},
			LoginMethods: []string{company.LoginPDFUpload}, Availability: company.Available},
		company.Company{ID: "se-demo-maintenance", DisplayName: "Demo Underhåll", Market: "se",
			Products:     []collection.Product{collection.ProductInsurance},
			LoginMethods: []string{company.LoginEIDOtherDeviceMock}, Availability: company.Maintenance,
			Message: "Planned maintenance; try again later."},
	)
}
