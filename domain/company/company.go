// Package company describes the external companies Samla collects from.
package company

import (
	"slices"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/consent"
)

// Login method identifiers of the spec.
const (
	LoginPDFUpload               = "PDF_UPLOAD"
	LoginEIDOtherDevice          = "SWEDISH_MOBILE_EID_OTHER_DEVICE"
	LoginEIDOtherDeviceMock      = "SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK"
	LoginEIDSameDeviceClientSide = "SWEDISH_MOBILE_EID_SAME_DEVICE_CLIENT_SIDE_AUTHENTICATION"
)

// KnownLoginMethods lists every login method identifier Samla accepts in a request.
func KnownLoginMethods() []string {
	return []string{LoginPDFUpload, LoginEIDOtherDevice, LoginEIDOtherDeviceMock, LoginEIDSameDeviceClientSide}
}

// Availability is a company's current state.
type Availability string

const (
	Available   Availability = "AVAILABLE"
	Unavailable Availability = "UNAVAILABLE"
	Maintenance Availability = "MAINTENANCE"
)

// Company is a catalog entry.
type Company struct {
	ID           string
	DisplayName  string
	Market       string // ISO 3166 alpha-2, lower case: se, fr, ee …
	Products     []collection.Product
	LoginMethods []string
	Availability Availability
	Message      string // user-facing note when not available
	// Consents tells whether the company gives PSD2 account-information consents (POST
	// /consents); a company without is 422 CONSENT_NOT_SUPPORTED there.
	Consents bool
}

// Supports reports whether the company accepts a login method.
func (c Company) Supports(loginMethod string) bool {
	return slices.Contains(c.LoginMethods, loginMethod)
}

// ForCollection is what the collection aggregate needs to decide a start.
func (c Company) ForCollection() collection.Company {
	return collection.Company{ID: c.ID, Products: c.Products, Available: c.Availability == Available, Consents: c.Consents}
}

// ForConsent is what the consent aggregate needs to decide a new consent.
func (c Company) ForConsent() consent.Company {
	return consent.Company{ID: c.ID, Consents: c.Consents, LoginMethods: slices.Clone(c.LoginMethods)}
}
