package company

import (
	"errors"
	"fmt"
	"sort"
)

// ErrUnknownCompany is a company id that is not in the catalog.
var ErrUnknownCompany = errors.New("unknown company")

// Catalog lists the companies Samla can collect from. It is fixed once built, so it is safe for
// concurrent use. Which companies it holds is the deployment's choice (the embedded default
// uses the sandbox's demo companies); the type and its rules are the domain's.
type Catalog struct {
	companies map[string]Company
	sorted    []Company
}

// NewCatalog builds a catalog of companies; a later company with the same id replaces an
// earlier one.
func NewCatalog(companies ...Company) *Catalog {
	c := &Catalog{companies: make(map[string]Company, len(companies))}
	for _, co := range companies {
		c.companies[co.ID] = co
	}
	c.sorted = make([]Company, 0, len(c.companies))
	for _, co := range c.companies {
		c.sorted = append(c.sorted, co)
	}
	sort.Slice(c.sorted, func(i, j int) bool { return c.sorted[i].ID < c.sorted[j].ID })
	return c
}

// Get returns one company, or an error wrapping ErrUnknownCompany.
func (c *Catalog) Get(id string) (Company, error) {
	co, ok := c.companies[id]
	if !ok {
		return Company{}, fmt.Errorf("%w: %q", ErrUnknownCompany, id)
	}
	return co, nil
}

// All lists the companies sorted by id.
func (c *Catalog) All() []Company { return append([]Company(nil), c.sorted...) }
