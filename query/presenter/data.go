package presenter

import (
	"slices"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/consent"
	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/query"
)

// The data endpoints' bodies. The records are the read model's own (query.InsuranceView,
// query.PensionView and the domain's collection.Investment, collection.Loan, …), whose JSON is
// the API's in both versions. A data point the company did not report is left out of its object
// (spec: "missing or null data points mean unknown", and otherInsuredPerson is "field absent"
// when no conclusion is possible), never rendered as 0 or "". Holdings are left out when none
// were reported: the company's data cannot tell "none" from "not reported". Top-level lists are
// present, [] when the company had none of that product, except a PSD2 list Samla did not read
// (no consent, or outside its scope: unknown), which is absent. personalInformation is always
// present: null when nothing of it is known on 2026-04-01, an object without the unknown keys on
// 2025-01-01; an empty string or an empty address is unknown too (events recorded before the
// companies' adapters dropped them carry such values). A wealth body names the career statement
// when the company returned one (careerStatement, both versions), absent otherwise.

// Keys of the 2025-01-01 personalInformation map. They follow that version's input map
// (UPPER_SNAKE keys such as SWEDISH_PERSONAL_NUMBER) and name exactly the typed object's fields,
// so both versions carry the same facts. A key is present only when its value is known.
const (
	PersonalKeyPersonalNumber    = "PERSONAL_NUMBER"
	PersonalKeyName              = "NAME"
	PersonalKeyFirstName         = "FIRST_NAME"
	PersonalKeyLastName          = "LAST_NAME"
	PersonalKeyEmail             = "EMAIL"
	PersonalKeyPhoneNumber       = "PHONE_NUMBER"
	PersonalKeyAddressStreet     = "ADDRESS_STREET"
	PersonalKeyAddressPostalCode = "ADDRESS_POSTAL_CODE"
	PersonalKeyAddressCity       = "ADDRESS_CITY"
	PersonalKeyAddressCountry    = "ADDRESS_COUNTRY"
)

// CareerStatementRef is the wealth data's pointer to the French career statement: what the file
// is and where GET /collections/{id}/wealth/career-statement serves it.
type CareerStatementRef struct {
	FileName    string `json:"fileName"`
	ContentType string `json:"contentType"`
	SizeBytes   int64  `json:"sizeBytes"`
	Href        string `json:"href"`
}

// CareerStatementFileName names the statement when the company gave the file no name; the
// download uses it too, so that the data and the file agree.
const CareerStatementFileName = "career-statement.pdf"

// CareerStatementPath is the path that serves a collection's career statement.
func CareerStatementPath(collectionID string) string {
	return "/collections/" + collectionID + "/wealth/career-statement"
}

// careerStatement is the reference to v's career statement, nil when it has none.
func careerStatement(v query.DataView) *CareerStatementRef {
	d := v.CareerStatement
	if d == nil {
		return nil
	}
	name := d.FileName
	if name == "" {
		name = CareerStatementFileName
	}
	return &CareerStatementRef{FileName: name, ContentType: d.ContentType, SizeBytes: d.Size,
		Href: CareerStatementPath(v.CollectionID)}
}

// InsuranceDataResponse is the body of GET /collections/{collectionId}/insurance/data, the same
// in both versions.
type InsuranceDataResponse struct {
	CollectionID string                `json:"collectionId"`
	Company      string                `json:"company"`
	Insurances   []query.InsuranceView `json:"insurances"`
}

// WealthDataV20250101 is the body of GET /collections/{collectionId}/wealth/data on
// 2025-01-01: pensions and investments only, personal information as a key-value map.
type WealthDataV20250101 struct {
	CollectionID        string                  `json:"collectionId"`
	Company             string                  `json:"company"`
	PersonalInformation map[string]string       `json:"personalInformation"`
	Pensions            []query.PensionView     `json:"pensions"`
	Investments         []collection.Investment `json:"investments"`
	CareerStatement     *CareerStatementRef     `json:"careerStatement,omitempty"`
}

// WealthDataV20260401 is the body of GET /collections/{collectionId}/wealth/data on
// 2026-04-01: every wealth product, personal information as a typed, nullable object. A PSD2
// list that was not read (no consent, or outside its scope) is absent: unknown, not empty.
type WealthDataV20260401 struct {
	CollectionID         string                          `json:"collectionId"`
	Company              string                          `json:"company"`
	PersonalInformation  *collection.PersonalInformation `json:"personalInformation"`
	Pensions             []query.PensionView             `json:"pensions"`
	Investments          []collection.Investment         `json:"investments"`
	Loans                []collection.Loan               `json:"loans"`
	Savings              []collection.Saving             `json:"savings"`
	Psd2CheckingAccounts []collection.PSD2Account        `json:"psd2CheckingAccounts,omitzero"`
	Psd2SavingsAccounts  []collection.PSD2Account        `json:"psd2SavingsAccounts,omitzero"`
	Psd2CreditCards      []collection.PSD2CreditCard     `json:"psd2CreditCards,omitzero"`
	CareerStatement      *CareerStatementRef             `json:"careerStatement,omitempty"`
}

// LegacyInsuranceData is the body of GET /data?collectionId=… (2025-01-01 only) for an
// insurance collection: the insurance data with the product it is.
type LegacyInsuranceData struct {
	CollectionID string                `json:"collectionId"`
	Company      string                `json:"company"`
	Product      string                `json:"product"`
	Insurances   []query.InsuranceView `json:"insurances"`
}

// LegacyWealthData is the body of GET /data?collectionId=… for a wealth collection: the
// 2025-01-01 wealth data with the product it is.
type LegacyWealthData struct {
	CollectionID        string                  `json:"collectionId"`
	Company             string                  `json:"company"`
	Product             string                  `json:"product"`
	PersonalInformation map[string]string       `json:"personalInformation"`
	Pensions            []query.PensionView     `json:"pensions"`
	Investments         []collection.Investment `json:"investments"`
	CareerStatement     *CareerStatementRef     `json:"careerStatement,omitempty"`
}

// InsuranceData presents an insurance collection's data.
func InsuranceData(v query.DataView) InsuranceDataResponse {
	return InsuranceDataResponse{CollectionID: v.CollectionID, Company: v.Company, Insurances: list(v.Insurances)}
}

// WealthData presents a wealth collection's data for a client speaking version: a
// WealthDataV20260401 from the preview on, a WealthDataV20250101 before it.
func WealthData(version httpapi.Version, v query.DataView) any {
	if version >= httpapi.V20260401 {
		return WealthDataPreview(v)
	}
	return WealthDataStable(v)
}

// WealthDataStable presents wealth data in the 2025-01-01 shape. Loans, savings and PSD2
// products do not exist in that version and are left out.
func WealthDataStable(v query.DataView) WealthDataV20250101 {
	return WealthDataV20250101{
		CollectionID: v.CollectionID, Company: v.Company,
		PersonalInformation: PersonalInformationMap(v.PersonalInformation),
		Pensions:            list(v.Pensions), Investments: list(v.Investments), CareerStatement: careerStatement(v),
	}
}

// WealthDataPreview presents wealth data in the 2026-04-01 shape; personal information shows
// only what is known, and is null when nothing is; a PSD2 list not read is absent.
func WealthDataPreview(v query.DataView) WealthDataV20260401 {
	out := WealthDataV20260401{
		CollectionID: v.CollectionID, Company: v.Company, PersonalInformation: v.PersonalInformation.Known(),
		Pensions: list(v.Pensions), Investments: list(v.Investments), Loans: list(v.Loans), Savings: list(v.Savings),
		CareerStatement: careerStatement(v),
	}
	read := func(s consent.Scope) bool { return v.PSD2Read == nil || slices.Contains(v.PSD2Read, s) }
	if read(consent.ScopeCheckingAccounts) {
		out.Psd2CheckingAccounts = list(v.CheckingAccounts)
	}
	if read(consent.ScopeSavingsAccounts) {
		out.Psd2SavingsAccounts = list(v.SavingsAccounts)
	}
	if read(consent.ScopeCreditCards) {
		out.Psd2CreditCards = list(v.CreditCards)
	}
	return out
}

// LegacyData presents a collection's data for GET /data (2025-01-01): a LegacyWealthData for a
// wealth collection, a LegacyInsuranceData otherwise.
func LegacyData(v query.DataView) any {
	if v.Product == string(collection.ProductWealth) {
		w := WealthDataStable(v)
		return LegacyWealthData{CollectionID: w.CollectionID, Company: w.Company, Product: v.Product,
			PersonalInformation: w.PersonalInformation, Pensions: w.Pensions, Investments: w.Investments,
			CareerStatement: w.CareerStatement}
	}
	return LegacyInsuranceData{CollectionID: v.CollectionID, Company: v.Company, Product: v.Product,
		Insurances: list(v.Insurances)}
}

// PersonalInformationMap is the 2025-01-01 key-value form of personal information: only the
// known values, under the PersonalKey… keys; an empty map when nothing is known.
func PersonalInformationMap(p *collection.PersonalInformation) map[string]string {
	out := map[string]string{}
	p = p.Known()
	if p == nil {
		return out
	}
	put := func(key string, v *string) {
		if v != nil {
			out[key] = *v
		}
	}
	put(PersonalKeyPersonalNumber, p.PersonalNumber)
	put(PersonalKeyName, p.Name)
	put(PersonalKeyFirstName, p.FirstName)
	put(PersonalKeyLastName, p.LastName)
	put(PersonalKeyEmail, p.Email)
	put(PersonalKeyPhoneNumber, p.PhoneNumber)
	if a := p.Address; a != nil {
		put(PersonalKeyAddressStreet, a.Street)
		put(PersonalKeyAddressPostalCode, a.PostalCode)
		put(PersonalKeyAddressCity, a.City)
		put(PersonalKeyAddressCountry, a.Country)
	}
	return out
}

// list is a top-level list of a body: always present, [] rather than null when empty.
func list[T any](in []T) []T {
	if in == nil {
		return []T{}
	}
	return in
}
