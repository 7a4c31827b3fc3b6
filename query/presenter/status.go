// Package presenter renders read models in the shape of each API version. It is pure: the same
// inputs always give the same output, so every mapping is covered by table tests.
package presenter

import (
	"strings"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/platform/httpapi"
)

// Audience is whom a status is presented to: the API version the client speaks (versions order
// as their dates do, so any version before the preview is presented as the stable one), and the
// company's product and market, on which the spec makes some statuses depend.
type Audience struct {
	Version httpapi.Version
	Product collection.Product
	Market  string // ISO 3166 alpha-2, lower case
}

// column is a "Returned by" column of the spec's status table, split by version where the table's
// version notes split it: I = insurance, W = stable wealth (2025-01-01), P = preview wealth
// (2026-04-01).
type column int

const (
	colInsuranceStable column = iota
	colInsurancePreview
	colWealthStable // W
	colWealthPreview
)

func (a Audience) column() column {
	preview := a.Version >= httpapi.V20260401
	switch {
	case a.Product == collection.ProductWealth && preview:
		return colWealthPreview
	case a.Product == collection.ProductWealth:
		return colWealthStable
	case preview:
		return colInsurancePreview
	}
	return colInsuranceStable
}

// Markers for the two cells that depend on the company, resolved by resolve.
const (
	// rejectedInBaltics: REJECTED_INCORRECT_LOGIN_METHOD in markets ee, lt and lv, FAILED elsewhere
	// (spec: "only version 2025-01-01 and only markets ee, lt, lv"; API.md applies it to both
	// products).
	rejectedInBaltics collection.Status = "~rejected-in-baltics"
	// enrollmentCheckInFrance: CUSTOMER_ENROLLMENT_CHECK for the French pension-information company
	// (the only wealth company in market fr), LOGIN elsewhere (spec: "W only for the French
	// pension-information company").
	enrollmentCheckInFrance collection.Status = "~enrollment-check-in-france"
)

// row is one status as each column presents it.
type row struct {
	status collection.Status
	cols   [4]collection.Status // indexed by column; "" means the status itself
}

// statusTable is the whole mapping, and only lists statuses some column does not return. Every
// other status is returned as it is by all four columns. A cell names what the column returns
// instead: the closest status it does return. Columns: I25 = insurance on 2025-01-01, I26 =
// insurance on 2026-04-01, W = wealth on 2025-01-01, P = wealth on 2026-04-01.
//
//	status                               column  presented as                             why
//	CUSTOMER_ENROLLMENT_CHECK            W       LOGIN, but itself in market fr           (1)
//	                                     P       LOGIN                                    (1)
//	TWO_FACTOR_METHOD_SELECTION_TIMEOUT  W       WAITING_FOR_AUTHENTICATION               (2)
//	                                     P       AUTHENTICATION_TIMEOUT                   (2)
//	CONTACT_FORM_PENDING                 W       LOGIN                                    (3)
//	COLLECTION_INPUT_PENDING             W       LOGIN                                    (3)
//	                                     P       CONTACT_FORM_PENDING                     (4)
//	COLLECTION_INPUT_TIMEOUT             W       WAITING_FOR_AUTHENTICATION               (2)
//	                                     P       AUTHENTICATION_TIMEOUT                   (2)
//	WAITING_FOR_USER_ACTION              W       LOGIN                                    (5)
//	INCORRECT_TWO_FACTOR_CODE            W, P    INCORRECT_CREDENTIALS                    (6)
//	AUTHENTICATION_TIMEOUT               W       WAITING_FOR_AUTHENTICATION               spec
//	WAITING_FOR_AUTHENTICATION           I25, I26, P  AUTHENTICATION_TIMEOUT              spec: same meaning
//	AUTHENTICATION_CONFLICT              W       AUTHENTICATION_CANCELLED                 (7)
//	AUTHENTICATION_MISMATCH              W       FAILED                                   (8)
//	AUTHENTICATION_ERROR                 I25, W  FAILED                                   API.md, (9)
//	LOGIN_METHOD_NOT_APPLICABLE          I25, W  REJECTED_INCORRECT_LOGIN_METHOD in ee, lt, lv; FAILED elsewhere   API.md, (9)
//	REJECTED_INCORRECT_LOGIN_METHOD      I25, W  itself in ee, lt, lv; FAILED elsewhere   spec
//	                                     I26, P  LOGIN_METHOD_NOT_APPLICABLE              spec
//
// Why:
//  1. The check runs between signing in and collecting and may go back to LOGIN; LOGIN keeps the
//     client polling without a status that jumps back and forth.
//  2. A final timeout waiting for the user ("offer retry"): the column's authentication timeout
//     has the same meaning and the same client action.
//  3. W cannot take supplementary input; the collection is still in progress and the client
//     should keep polling, which is what LOGIN says ("check extraInformation for further actions").
//  4. P takes supplementary input only as CONTACT_FORM_PENDING, whose action (submit the input
//     to supplement-info) is exactly what COLLECTION_INPUT_PENDING needs; REQUIRED_INPUT_TYPES
//     still travels in extraInformation.
//  5. LOGIN's action is "keep polling; check extraInformation", which covers the user action.
//  6. A wrong code is wrong credentials; the action (ask to re-enter) is the same.
//  7. The conflict cancelled the authentication; the action (offer retry) is the same.
//  8. W has no status for "someone else signed in"; the generic failure ("tell the user; offer
//     redo") is the honest one, where INCORRECT_CREDENTIALS would wrongly warn of a block.
//  9. The table marks AUTHENTICATION_ERROR and LOGIN_METHOD_NOT_APPLICABLE "I" with the note
//     "version 2026-04-01+"; API.md, the versioning section and SANDBOX.md treat them as
//     statuses of that version for both products, so P returns them too.
//
// Finality is preserved in every cell (a final status never maps to a non-final one or back), so
// a client of any version stops polling exactly when the collection ends.
var statusTable = []row{
	{status: collection.StatusCustomerEnrollmentCheck, cols: [4]collection.Status{
		colWealthStable: enrollmentCheckInFrance, colWealthPreview: collection.StatusLogin}},
	{status: collection.StatusTwoFactorMethodSelectionTimeout, cols: [4]collection.Status{
		colWealthStable: collection.StatusWaitingForAuthentication, colWealthPreview: collection.StatusAuthenticationTimeout}},
	{status: collection.StatusContactFormPending, cols: [4]collection.Status{
		colWealthStable: collection.StatusLogin}},
	{status: collection.StatusCollectionInputPending, cols: [4]collection.Status{
		colWealthStable: collection.StatusLogin, colWealthPreview: collection.StatusContactFormPending}},
	{status: collection.StatusCollectionInputTimeout, cols: [4]collection.Status{
		colWealthStable: collection.StatusWaitingForAuthentication, colWealthPreview: collection.StatusAuthenticationTimeout}},
	{status: collection.StatusWaitingForUserAction, cols: [4]collection.Status{
		colWealthStable: collection.StatusLogin}},
	{status: collection.StatusIncorrectTwoFactorCode, cols: [4]collection.Status{
		colWealthStable: collection.StatusIncorrectCredentials, colWealthPreview: collection.StatusIncorrectCredentials}},
	{status: collection.StatusAuthenticationTimeout, cols: [4]collection.Status{
		colWealthStable: collection.StatusWaitingForAuthentication}},
	{status: collection.StatusWaitingForAuthentication, cols: [4]collection.Status{
		colInsuranceStable: collection.StatusAuthenticationTimeout, colInsurancePreview: collection.StatusAuthenticationTimeout,
		colWealthPreview: collection.StatusAuthenticationTimeout}},
	{status: collection.StatusAuthenticationConflict, cols: [4]collection.Status{
		colWealthStable: collection.StatusAuthenticationCancelled}},
	{status: collection.StatusAuthenticationMismatch, cols: [4]collection.Status{
		colWealthStable: collection.StatusFailed}},
	{status: collection.StatusAuthenticationError, cols: [4]collection.Status{
		colInsuranceStable: collection.StatusFailed, colWealthStable: collection.StatusFailed}},
	{status: collection.StatusLoginMethodNotApplicable, cols: [4]collection.Status{
		colInsuranceStable: rejectedInBaltics, colWealthStable: rejectedInBaltics}},
	{status: collection.StatusRejectedIncorrectLoginMethod, cols: [4]collection.Status{
		colInsuranceStable: rejectedInBaltics, colInsurancePreview: collection.StatusLoginMethodNotApplicable,
		colWealthStable: rejectedInBaltics, colWealthPreview: collection.StatusLoginMethodNotApplicable}},
}

// Status presents a domain status to an audience. A status the table does not know (a newer
// projection than this code) is passed through rather than hidden.
func Status(a Audience, s collection.Status) collection.Status {
	for _, r := range statusTable {
		if r.status == s {
			if out := r.cols[a.column()]; out != "" {
				return resolve(out, a)
			}
			return s
		}
	}
	return s
}

func resolve(s collection.Status, a Audience) collection.Status {
	switch s {
	case rejectedInBaltics:
		switch strings.ToLower(a.Market) {
		case "ee", "lt", "lv":
			return collection.StatusRejectedIncorrectLoginMethod
		}
		return collection.StatusFailed
	case enrollmentCheckInFrance:
		if strings.ToLower(a.Market) == "fr" {
			return collection.StatusCustomerEnrollmentCheck
		}
		return collection.StatusLogin
	}
	return s
}
