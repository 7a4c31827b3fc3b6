package company

import "github.com/samla/samla/domain/collection"

// failureOutcomes is the one table from the demo companies' login failure reasons to the final
// collection status Samla reports (what an API version does not know, e.g.
// AUTHENTICATION_ERROR on 2025-01-01, is the status presenter's business). A reason missing
// here ends the collection FAILED, the spec's catch-all for a failure without a more precise
// status.
var failureOutcomes = map[string]collection.Status{
	"INVALID_CREDENTIALS":       collection.StatusIncorrectCredentials,
	"USER_CANCELLED":            collection.StatusAuthenticationCancelled,
	"ORDER_EXPIRED":             collection.StatusAuthenticationTimeout,
	"ALREADY_IN_PROGRESS":       collection.StatusAuthenticationConflict,
	"EID_START_FAILED":          collection.StatusAuthenticationError,
	"ACCOUNT_LOCKED":            collection.StatusAccountTemporarilyLocked,
	"KYC_REQUIRED":              collection.StatusKYCForm,
	"NOT_A_CUSTOMER":            collection.StatusCustomerEnrollmentRequired,
	"CONTACT_DETAILS_REQUIRED":  collection.StatusContactForm,
	"SIGN_IN_REJECTED":          collection.StatusAuthenticationError,
	"CLIENT_RESPONSE_INVALID":   collection.StatusAuthenticationError,
	"INCORRECT_TWO_FACTOR_CODE": collection.StatusIncorrectTwoFactorCode,
	"PDF_PARSE_FAILED":          collection.StatusFailedPDFParse,
	"PDF_UNSUPPORTED":           collection.StatusFailedPDFUserInput,
	"TEMPORARY_ERROR":           collection.StatusFailed,
}

// FailureOutcomes returns a copy of the failure table, for documentation and tests.
func FailureOutcomes() map[string]collection.Status {
	out := make(map[string]collection.Status, len(failureOutcomes))
	for k, v := range failureOutcomes {
		out[k] = v
	}
	return out
}

func outcomeOf(reason string) collection.Status {
	if st, ok := failureOutcomes[reason]; ok {
		return st
	}
	return collection.StatusFailed
}

// insuranceTypes maps the companies' product codes to Samla's insurance types.
var insuranceTypes = map[string]string{
	"home":     "HOME",
	"house":    "HOUSE",
	"motor":    "CAR",
	"accident": "ACCIDENT",
	"pet":      "PET",
	"life":     "LIFE",
	"health":   "HEALTH",
	"travel":   "TRAVEL",
}

var premiumFrequencies = map[string]string{
	"monthly":   "MONTHLY",
	"quarterly": "QUARTERLY",
	"yearly":    "YEARLY",
}

// mapInsurances turns the company's insurances into Samla's, with the holders' names by
// insurance id. A value the company does not know stays nil (unknown), never a zero.
func mapInsurances(in []wireInsurance) (insurances []collection.Insurance, holderNames map[string]string) {
	insurances = make([]collection.Insurance, 0, len(in))
	for _, w := range in {
		typ, ok := insuranceTypes[w.Product]
		if !ok {
			typ = "OTHER"
		}
		ins := collection.Insurance{
			ID: w.ID, InsuranceType: typ, InsuranceNumber: collection.Known(w.PolicyNumber), DisplayName: collection.Known(w.Name),
			RenewalDate: collection.Known(w.RenewalDate), StartDate: collection.Known(w.StartDate),
		}
		if p := w.Premium; p != nil && p.Amount != nil {
			amount := *p.Amount
			ins.Premium = &amount
			if p.Currency != "" {
				cur := p.Currency
				ins.Currency = &cur
			}
			if p.Frequency != nil {
				if f, ok := premiumFrequencies[*p.Frequency]; ok {
					ins.PremiumFrequency = &f
				}
			}
		}
		if w.PolicyHolder != nil && w.PolicyHolder.Name != "" {
			if holderNames == nil {
				holderNames = map[string]string{}
			}
			holderNames[w.ID] = w.PolicyHolder.Name
		}
		insurances = append(insurances, ins)
	}
	return insurances, holderNames
}
