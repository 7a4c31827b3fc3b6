// Package company describes the external companies Samla collects from.
package company

import (
	"slices"

	"github.com/samla/samla/domain/collection"
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
}

// Supports reports whether the company accepts a login method.
func (c Company) Supports(loginMethod string) bool {
	return slices.Contains(c.LoginMethods, loginMethod)
}

// ForCollection is what the collection aggregate needs to decide a start.
func (c Company) ForCollection() collection.Company {
	return collection.Company{ID: c.ID, Products: c.Products, Available: c.Availability == Available}
}
