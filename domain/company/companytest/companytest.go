// Package companytest is a company catalog for the tests of the write and read sides, which
// import no connector: the six demo companies of SANDBOX.md as Samla's catalog sees them (the
// sandbox's own catalog, connectors/sandbox.Catalog, has the same shape), so that the tests need
// not import the sandbox for its list.
package companytest

import (
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/company"
)

// Company ids of the catalog.
const (
	SEInsurer     = "se-demo-insurer"      // INSURANCE; both electronic IDs, the client-side one and PDF_UPLOAD
	SEPension     = "se-demo-pension"      // WEALTH; electronic ID
	SEBank        = "se-demo-bank"         // WEALTH; electronic ID; gives PSD2 consents
	FRPensionInfo = "fr-demo-pension-info" // WEALTH; PDF_UPLOAD and the mock electronic ID
	EEInsurer     = "ee-demo-insurer"      // INSURANCE; PDF_UPLOAD only
	SEMaintenance = "se-demo-maintenance"  // INSURANCE; in maintenance
)

// MaintenanceMessage is the note of the company in maintenance.
const MaintenanceMessage = "Planned maintenance; try again later."

// Catalog returns a new catalog of the demo companies.
func Catalog() *company.Catalog {
	insurance := []collection.Product{"INSURANCE"}
	wealth := []collection.Product{"WEALTH"}
	eid := func(more ...string) []string {
		return append([]string{company.LoginEIDOtherDevice, company.LoginEIDOtherDeviceMock}, more...)
	}
	return company.NewCatalog(
		company.Company{ID: SEInsurer, DisplayName: "Demo Försäkring", Market: "se", Products: insurance,
			LoginMethods: eid(company.LoginEIDSameDeviceClientSide, company.LoginPDFUpload), Availability: company.Available},
		company.Company{ID: SEPension, DisplayName: "Demo Pension", Market: "se", Products: wealth,
			LoginMethods: eid(), Availability: company.Available},
		company.Company{ID: SEBank, DisplayName: "Demo Bank", Market: "se", Products: wealth,
			LoginMethods: eid(), Availability: company.Available, Consents: true},
		company.Company{ID: FRPensionInfo, DisplayName: "Démo Info Retraite", Market: "fr", Products: wealth,
			LoginMethods: []string{company.LoginPDFUpload, company.LoginEIDOtherDeviceMock}, Availability: company.Available},
		company.Company{ID: EEInsurer, DisplayName: "Demo Kindlustus", Market: "ee", Products: insurance,
			LoginMethods: []string{company.LoginPDFUpload}, Availability: company.Available},
		company.Company{ID: SEMaintenance, DisplayName: "Demo Underhåll", Market: "se", Products: insurance,
			LoginMethods: []string{company.LoginEIDOtherDeviceMock}, Availability: company.Maintenance, Message: MaintenanceMessage},
	)
}
