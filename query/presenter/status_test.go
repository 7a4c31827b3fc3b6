package presenter

import (
	"testing"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/platform/httpapi"
)

type (
	st  = collection.Status
	aud = Audience
)

var (
	ins25  = aud{Version: httpapi.V20250101, Product: collection.ProductInsurance, Market: "se"}
	ins26  = aud{Version: httpapi.V20260401, Product: collection.ProductInsurance, Market: "se"}
	weal25 = aud{Version: httpapi.V20250101, Product: collection.ProductWealth, Market: "se"}
	weal26 = aud{Version: httpapi.V20260401, Product: collection.ProductWealth, Market: "se"}
)

// golden is the whole mapping for a Swedish company: status → as presented to
// [insurance 2025-01-01, insurance 2026-04-01, wealth 2025-01-01, wealth 2026-04-01].
var golden = map[st][4]st{
	"RUNNING":                             {"RUNNING", "RUNNING", "RUNNING", "RUNNING"},
	"LOGIN":                               {"LOGIN", "LOGIN", "LOGIN", "LOGIN"},
	"CUSTOMER_ENROLLMENT_CHECK":           {"CUSTOMER_ENROLLMENT_CHECK", "CUSTOMER_ENROLLMENT_CHECK", "LOGIN", "LOGIN"},
	"TWO_FACTOR_PENDING":                  {"TWO_FACTOR_PENDING", "TWO_FACTOR_PENDING", "TWO_FACTOR_PENDING", "TWO_FACTOR_PENDING"},
	"TWO_FACTOR_METHOD_SELECTION_TIMEOUT": {"TWO_FACTOR_METHOD_SELECTION_TIMEOUT", "TWO_FACTOR_METHOD_SELECTION_TIMEOUT", "WAITING_FOR_AUTHENTICATION", "AUTHENTICATION_TIMEOUT"},
	"CONTACT_FORM_PENDING":                {"CONTACT_FORM_PENDING", "CONTACT_FORM_PENDING", "LOGIN", "CONTACT_FORM_PENDING"},
	"COLLECTION_INPUT_PENDING":            {"COLLECTION_INPUT_PENDING", "COLLECTION_INPUT_PENDING", "LOGIN", "CONTACT_FORM_PENDING"},
	"COLLECTION_INPUT_TIMEOUT":            {"COLLECTION_INPUT_TIMEOUT", "COLLECTION_INPUT_TIMEOUT", "WAITING_FOR_AUTHENTICATION", "AUTHENTICATION_TIMEOUT"},
	"WAITING_FOR_USER_ACTION":             {"WAITING_FOR_USER_ACTION", "WAITING_FOR_USER_ACTION", "LOGIN", "WAITING_FOR_USER_ACTION"},
	"COLLECTING":                          {"COLLECTING", "COLLECTING", "COLLECTING", "COLLECTING"},
	"COMPLETED":                           {"COMPLETED", "COMPLETED", "COMPLETED", "COMPLETED"},
	"COMPLETED_PARTIAL":                   {"COMPLETED_PARTIAL", "COMPLETED_PARTIAL", "COMPLETED_PARTIAL", "COMPLETED_PARTIAL"},
	"COMPLETED_EMPTY":                     {"COMPLETED_EMPTY", "COMPLETED_EMPTY", "COMPLETED_EMPTY", "COMPLETED_EMPTY"},
	"FAILED":                              {"FAILED", "FAILED", "FAILED", "FAILED"},
	"FAILED_PDF_PARSE":                    {"FAILED_PDF_PARSE", "FAILED_PDF_PARSE", "FAILED_PDF_PARSE", "FAILED_PDF_PARSE"},
	"FAILED_PDF_USER_INPUT":               {"FAILED_PDF_USER_INPUT", "FAILED_PDF_USER_INPUT", "FAILED_PDF_USER_INPUT", "FAILED_PDF_USER_INPUT"},
	"INCORRECT_CREDENTIALS":               {"INCORRECT_CREDENTIALS", "INCORRECT_CREDENTIALS", "INCORRECT_CREDENTIALS", "INCORRECT_CREDENTIALS"},
	"INCORRECT_TWO_FACTOR_CODE":           {"INCORRECT_TWO_FACTOR_CODE", "INCORRECT_TWO_FACTOR_CODE", "INCORRECT_CREDENTIALS", "INCORRECT_CREDENTIALS"},
	"AUTHENTICATION_TIMEOUT":              {"AUTHENTICATION_TIMEOUT", "AUTHENTICATION_TIMEOUT", "WAITING_FOR_AUTHENTICATION", "AUTHENTICATION_TIMEOUT"},
	"WAITING_FOR_AUTHENTICATION":          {"AUTHENTICATION_TIMEOUT", "AUTHENTICATION_TIMEOUT", "WAITING_FOR_AUTHENTICATION", "AUTHENTICATION_TIMEOUT"},
	"AUTHENTICATION_CANCELLED":            {"AUTHENTICATION_CANCELLED", "AUTHENTICATION_CANCELLED", "AUTHENTICATION_CANCELLED", "AUTHENTICATION_CANCELLED"},
	"AUTHENTICATION_CONFLICT":             {"AUTHENTICATION_CONFLICT", "AUTHENTICATION_CONFLICT", "AUTHENTICATION_CANCELLED", "AUTHENTICATION_CONFLICT"},
	"AUTHENTICATION_MISMATCH":             {"AUTHENTICATION_MISMATCH", "AUTHENTICATION_MISMATCH", "FAILED", "AUTHENTICATION_MISMATCH"},
	"AUTHENTICATION_ERROR":                {"FAILED", "AUTHENTICATION_ERROR", "FAILED", "AUTHENTICATION_ERROR"},
	"LOGIN_METHOD_NOT_APPLICABLE":         {"FAILED", "LOGIN_METHOD_NOT_APPLICABLE", "FAILED", "LOGIN_METHOD_NOT_APPLICABLE"},
	"REJECTED_INCORRECT_LOGIN_METHOD":     {"FAILED", "LOGIN_METHOD_NOT_APPLICABLE", "FAILED", "LOGIN_METHOD_NOT_APPLICABLE"},
	"ACCOUNT_TEMPORARILY_LOCKED":          {"ACCOUNT_TEMPORARILY_LOCKED", "ACCOUNT_TEMPORARILY_LOCKED", "ACCOUNT_TEMPORARILY_LOCKED", "ACCOUNT_TEMPORARILY_LOCKED"},
	"KYC_FORM":                            {"KYC_FORM", "KYC_FORM", "KYC_FORM", "KYC_FORM"},
	"CONTACT_FORM":                        {"CONTACT_FORM", "CONTACT_FORM", "CONTACT_FORM", "CONTACT_FORM"},
	"CUSTOMER_ENROLLMENT_REQUIRED":        {"CUSTOMER_ENROLLMENT_REQUIRED", "CUSTOMER_ENROLLMENT_REQUIRED", "CUSTOMER_ENROLLMENT_REQUIRED", "CUSTOMER_ENROLLMENT_REQUIRED"},
	"THIRD_PARTY_ERROR":                   {"THIRD_PARTY_ERROR", "THIRD_PARTY_ERROR", "THIRD_PARTY_ERROR", "THIRD_PARTY_ERROR"},
}

func TestGoldenTableCoversEveryStatus(t *testing.T) {
	all := collection.AllStatuses()
	if len(golden) != len(all) {
		t.Fatalf("golden has %d statuses, the domain %d", len(golden), len(all))
	}
	for _, s := range all {
		if _, ok := golden[s]; !ok {
			t.Errorf("golden lacks %s", s)
		}
	}
}

func TestStatusMappingSwedishCompany(t *testing.T) {
	for s, want := range golden {
		for i, a := range []aud{ins25, ins26, weal25, weal26} {
			if got := Status(a, s); got != want[i] {
				t.Errorf("%s for %+v = %s, want %s", s, a, got, want[i])
			}
		}
	}
}

func TestStatusMappingMarketRules(t *testing.T) {
	cases := []struct {
		a    aud
		in   st
		want st
	}{
		// 2025-01-01 reports an unsupported login method as REJECTED_INCORRECT_LOGIN_METHOD in the Baltics only.
		{aud{httpapi.V20250101, collection.ProductInsurance, "ee"}, "LOGIN_METHOD_NOT_APPLICABLE", "REJECTED_INCORRECT_LOGIN_METHOD"},
		{aud{httpapi.V20250101, collection.ProductInsurance, "lt"}, "LOGIN_METHOD_NOT_APPLICABLE", "REJECTED_INCORRECT_LOGIN_METHOD"},
		{aud{httpapi.V20250101, collection.ProductInsurance, "LV"}, "LOGIN_METHOD_NOT_APPLICABLE", "REJECTED_INCORRECT_LOGIN_METHOD"},
		{aud{httpapi.V20250101, collection.ProductWealth, "ee"}, "LOGIN_METHOD_NOT_APPLICABLE", "REJECTED_INCORRECT_LOGIN_METHOD"},
		{aud{httpapi.V20250101, collection.ProductInsurance, "ee"}, "REJECTED_INCORRECT_LOGIN_METHOD", "REJECTED_INCORRECT_LOGIN_METHOD"},
		{aud{httpapi.V20250101, collection.ProductInsurance, "fr"}, "LOGIN_METHOD_NOT_APPLICABLE", "FAILED"},
		{aud{httpapi.V20250101, collection.ProductInsurance, ""}, "LOGIN_METHOD_NOT_APPLICABLE", "FAILED"},
		{aud{httpapi.V20260401, collection.ProductInsurance, "ee"}, "LOGIN_METHOD_NOT_APPLICABLE", "LOGIN_METHOD_NOT_APPLICABLE"},
		{aud{httpapi.V20260401, collection.ProductInsurance, "ee"}, "REJECTED_INCORRECT_LOGIN_METHOD", "LOGIN_METHOD_NOT_APPLICABLE"},
		// Stable wealth shows the enrollment check for the French pension-information company only.
		{aud{httpapi.V20250101, collection.ProductWealth, "fr"}, "CUSTOMER_ENROLLMENT_CHECK", "CUSTOMER_ENROLLMENT_CHECK"},
		{aud{httpapi.V20250101, collection.ProductWealth, "se"}, "CUSTOMER_ENROLLMENT_CHECK", "LOGIN"},
		{aud{httpapi.V20260401, collection.ProductWealth, "fr"}, "CUSTOMER_ENROLLMENT_CHECK", "LOGIN"},
		{aud{httpapi.V20250101, collection.ProductInsurance, "fr"}, "CUSTOMER_ENROLLMENT_CHECK", "CUSTOMER_ENROLLMENT_CHECK"},
		// A version before the first known one is presented as the stable one; an unknown status passes.
		{aud{"2024-06-01", collection.ProductInsurance, "se"}, "AUTHENTICATION_ERROR", "FAILED"},
		{aud{httpapi.V20260401, collection.ProductInsurance, "se"}, "SOMETHING_NEW", "SOMETHING_NEW"},
	}
	for _, tc := range cases {
		if got := Status(tc.a, tc.in); got != tc.want {
			t.Errorf("%s for %+v = %s, want %s", tc.in, tc.a, got, tc.want)
		}
	}
}

// returnedBy is the spec's "Returned by" column, written out independently of the mapping: what
// each audience may ever see.
func returnedBy(a aud) map[st]bool {
	all := collection.AllStatuses()
	set := map[st]bool{}
	baltic := a.Market == "ee" || a.Market == "lt" || a.Market == "lv"
	switch a.column() {
	case colInsuranceStable, colInsurancePreview:
		for _, s := range all {
			set[s] = s != collection.StatusWaitingForAuthentication
		}
		if a.column() == colInsuranceStable {
			set[collection.StatusAuthenticationError], set[collection.StatusLoginMethodNotApplicable] = false, false
			set[collection.StatusRejectedIncorrectLoginMethod] = baltic
		} else {
			set[collection.StatusRejectedIncorrectLoginMethod] = false
		}
	case colWealthStable:
		for _, s := range []st{"RUNNING", "LOGIN", "TWO_FACTOR_PENDING", "COLLECTING", "COMPLETED", "COMPLETED_PARTIAL",
			"COMPLETED_EMPTY", "FAILED", "FAILED_PDF_PARSE", "FAILED_PDF_USER_INPUT", "INCORRECT_CREDENTIALS",
			"WAITING_FOR_AUTHENTICATION", "AUTHENTICATION_CANCELLED", "ACCOUNT_TEMPORARILY_LOCKED", "KYC_FORM",
			"CONTACT_FORM", "CUSTOMER_ENROLLMENT_REQUIRED", "THIRD_PARTY_ERROR"} {
			set[s] = true
		}
		set[collection.StatusCustomerEnrollmentCheck] = a.Market == "fr"
		set[collection.StatusRejectedIncorrectLoginMethod] = baltic
	case colWealthPreview:
		for _, s := range []st{"RUNNING", "LOGIN", "TWO_FACTOR_PENDING", "CONTACT_FORM_PENDING", "WAITING_FOR_USER_ACTION",
			"COLLECTING", "COMPLETED", "COMPLETED_PARTIAL", "COMPLETED_EMPTY", "FAILED", "FAILED_PDF_PARSE",
			"FAILED_PDF_USER_INPUT", "INCORRECT_CREDENTIALS", "AUTHENTICATION_TIMEOUT", "AUTHENTICATION_CANCELLED",
			"AUTHENTICATION_CONFLICT", "AUTHENTICATION_MISMATCH", "ACCOUNT_TEMPORARILY_LOCKED", "KYC_FORM",
			"CONTACT_FORM", "CUSTOMER_ENROLLMENT_REQUIRED", "THIRD_PARTY_ERROR",
			// version-wide from 2026-04-01 (API.md, SANDBOX.md)
			"AUTHENTICATION_ERROR", "LOGIN_METHOD_NOT_APPLICABLE"} {
			set[s] = true
		}
	}
	return set
}

func audiences() []aud {
	var out []aud
	for _, v := range httpapi.SupportedVersions() {
		for _, p := range []collection.Product{collection.ProductInsurance, collection.ProductWealth} {
			for _, m := range []string{"se", "ee", "lt", "lv", "fr", ""} {
				out = append(out, aud{v, p, m})
			}
		}
	}
	return out
}

// Every audience sees only statuses its column returns, sees those unchanged, and sees a final
// status exactly when the collection is final.
func TestMappingProperties(t *testing.T) {
	for _, a := range audiences() {
		returned := returnedBy(a)
		for _, s := range collection.AllStatuses() {
			got := Status(a, s)
			if !returned[got] {
				t.Errorf("%+v: %s presented as %s, which this audience is never returned", a, s, got)
			}
			if returned[s] && got != s {
				t.Errorf("%+v: %s is returned by this audience but presented as %s", a, s, got)
			}
			if got.IsFinal() != s.IsFinal() {
				t.Errorf("%+v: %s (final %v) presented as %s (final %v)", a, s, s.IsFinal(), got, got.IsFinal())
			}
		}
	}
}

func TestPollingInterval(t *testing.T) {
	for method, want := range map[string]int64{
		"SWEDISH_MOBILE_EID_OTHER_DEVICE":                           1000,
		"SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK":                      1000,
		"SWEDISH_MOBILE_EID_SAME_DEVICE_CLIENT_SIDE_AUTHENTICATION": 500,
		"PDF_UPLOAD": 2000,
		"UNKNOWN":    1000,
	} {
		if got := PollingInterval(method).Milliseconds(); got != want {
			t.Errorf("%s = %d ms, want %d", method, got, want)
		}
	}
}
