package collection

import "fmt"

// Status is the lifecycle state of a collection, exactly the spec's table.
type Status string

const (
	StatusRunning                         Status = "RUNNING"
	StatusLogin                           Status = "LOGIN"
	StatusCustomerEnrollmentCheck         Status = "CUSTOMER_ENROLLMENT_CHECK"
	StatusTwoFactorPending                Status = "TWO_FACTOR_PENDING"
	StatusTwoFactorMethodSelectionTimeout Status = "TWO_FACTOR_METHOD_SELECTION_TIMEOUT"
	StatusContactFormPending              Status = "CONTACT_FORM_PENDING"
	StatusCollectionInputPending          Status = "COLLECTION_INPUT_PENDING"
	StatusCollectionInputTimeout          Status = "COLLECTION_INPUT_TIMEOUT"
	StatusWaitingForUserAction            Status = "WAITING_FOR_USER_ACTION"
	StatusCollecting                      Status = "COLLECTING"
	StatusCompleted                       Status = "COMPLETED"
	StatusCompletedPartial                Status = "COMPLETED_PARTIAL"
	StatusCompletedEmpty                  Status = "COMPLETED_EMPTY"
	StatusFailed                          Status = "FAILED"
	StatusFailedPDFParse                  Status = "FAILED_PDF_PARSE"
	StatusFailedPDFUserInput              Status = "FAILED_PDF_USER_INPUT"
	StatusIncorrectCredentials            Status = "INCORRECT_CREDENTIALS"
	StatusIncorrectTwoFactorCode          Status = "INCORRECT_TWO_FACTOR_CODE"
	StatusAuthenticationTimeout           Status = "AUTHENTICATION_TIMEOUT"
	StatusWaitingForAuthentication        Status = "WAITING_FOR_AUTHENTICATION"
	StatusAuthenticationCancelled         Status = "AUTHENTICATION_CANCELLED"
	StatusAuthenticationConflict          Status = "AUTHENTICATION_CONFLICT"
	StatusAuthenticationMismatch          Status = "AUTHENTICATION_MISMATCH"
	StatusAuthenticationError             Status = "AUTHENTICATION_ERROR"
	StatusLoginMethodNotApplicable        Status = "LOGIN_METHOD_NOT_APPLICABLE"
	StatusRejectedIncorrectLoginMethod    Status = "REJECTED_INCORRECT_LOGIN_METHOD"
	StatusAccountTemporarilyLocked        Status = "ACCOUNT_TEMPORARILY_LOCKED"
	StatusKYCForm                         Status = "KYC_FORM"
	StatusContactForm                     Status = "CONTACT_FORM"
	StatusCustomerEnrollmentRequired      Status = "CUSTOMER_ENROLLMENT_REQUIRED"
	StatusThirdPartyError                 Status = "THIRD_PARTY_ERROR"
)

// AllStatuses lists every status in the order of the spec's table.
func AllStatuses() []Status {
	return []Status{
		StatusRunning, StatusLogin, StatusCustomerEnrollmentCheck, StatusTwoFactorPending,
		StatusTwoFactorMethodSelectionTimeout, StatusContactFormPending, StatusCollectionInputPending,
		StatusCollectionInputTimeout, StatusWaitingForUserAction, StatusCollecting, StatusCompleted,
		StatusCompletedPartial, StatusCompletedEmpty, StatusFailed, StatusFailedPDFParse,
		StatusFailedPDFUserInput, StatusIncorrectCredentials, StatusIncorrectTwoFactorCode,
		StatusAuthenticationTimeout, StatusWaitingForAuthentication, StatusAuthenticationCancelled,
		StatusAuthenticationConflict, StatusAuthenticationMismatch, StatusAuthenticationError,
		StatusLoginMethodNotApplicable, StatusRejectedIncorrectLoginMethod,
		StatusAccountTemporarilyLocked, StatusKYCForm, StatusContactForm,
		StatusCustomerEnrollmentRequired, StatusThirdPartyError,
	}
}

// ParseStatus accepts only the spec's status names.
func ParseStatus(s string) (Status, error) {
	for _, st := range AllStatuses() {
		if string(st) == s {
			return st, nil
		}
	}
	return "", fmt.Errorf("unknown collection status %q", s)
}

// IsFinal reports whether a collection in this status has ended: the spec makes every status
// from COMPLETED downward final, plus the two timeout statuses above it.
func (s Status) IsFinal() bool {
	switch s {
	case StatusRunning, StatusLogin, StatusCustomerEnrollmentCheck, StatusTwoFactorPending,
		StatusContactFormPending, StatusCollectionInputPending, StatusWaitingForUserAction,
		StatusCollecting:
		return false
	}
	return true
}

// IsPresentationOnly marks statuses the domain never enters: they exist only as what an older API
// version reports in place of a newer status (WAITING_FOR_AUTHENTICATION for
// AUTHENTICATION_TIMEOUT on stable wealth, REJECTED_INCORRECT_LOGIN_METHOD for
// LOGIN_METHOD_NOT_APPLICABLE on 2025-01-01 in markets ee, lt and lv).
func (s Status) IsPresentationOnly() bool {
	return s == StatusWaitingForAuthentication || s == StatusRejectedIncorrectLoginMethod
}

// failuresFromAnyActiveStatus are outcomes a company can report at any point of a session.
var failuresFromAnyActiveStatus = []Status{
	StatusFailed, StatusThirdPartyError, StatusAccountTemporarilyLocked, StatusKYCForm,
	StatusContactForm, StatusCustomerEnrollmentRequired,
}

var authenticationOutcomes = []Status{
	StatusIncorrectCredentials, StatusAuthenticationTimeout, StatusAuthenticationCancelled,
	StatusAuthenticationConflict, StatusAuthenticationMismatch, StatusAuthenticationError,
}

// transitions is the explicit state machine. Final statuses have no way out.
var transitions = func() map[Status]map[Status]bool {
	t := map[Status][]Status{
		StatusRunning: {
			StatusLogin, StatusCustomerEnrollmentCheck, StatusCollecting, StatusLoginMethodNotApplicable,
			StatusFailedPDFParse, StatusFailedPDFUserInput,
		},
		StatusLogin: {
			StatusWaitingForUserAction, StatusTwoFactorPending, StatusContactFormPending,
			StatusCollectionInputPending, StatusCustomerEnrollmentCheck, StatusCollecting,
			StatusTwoFactorMethodSelectionTimeout, StatusLoginMethodNotApplicable,
		},
		StatusWaitingForUserAction: {
			StatusLogin, StatusTwoFactorPending, StatusContactFormPending, StatusCollectionInputPending,
			StatusCustomerEnrollmentCheck, StatusCollecting,
		},
		StatusTwoFactorPending: {
			StatusLogin, StatusWaitingForUserAction, StatusCustomerEnrollmentCheck, StatusCollecting,
			StatusIncorrectTwoFactorCode, StatusTwoFactorMethodSelectionTimeout,
		},
		StatusContactFormPending: {
			StatusLogin, StatusWaitingForUserAction, StatusCustomerEnrollmentCheck, StatusCollecting,
		},
		StatusCollectionInputPending: {
			StatusLogin, StatusWaitingForUserAction, StatusCustomerEnrollmentCheck, StatusCollecting,
			StatusCollectionInputTimeout,
		},
		StatusCustomerEnrollmentCheck: {
			StatusLogin, StatusWaitingForUserAction, StatusCollecting, StatusCompletedEmpty,
		},
		StatusCollecting: {
			StatusCompleted, StatusCompletedPartial, StatusCompletedEmpty, StatusFailedPDFParse,
			StatusFailedPDFUserInput,
		},
	}
	out := make(map[Status]map[Status]bool, len(t))
	for from, tos := range t {
		set := make(map[Status]bool)
		for _, to := range tos {
			set[to] = true
		}
		for _, to := range failuresFromAnyActiveStatus {
			set[to] = true
		}
		// Authentication can fail wherever the user or the company is still signing in.
		if from != StatusCollecting {
			for _, to := range authenticationOutcomes {
				set[to] = true
			}
		}
		out[from] = set
	}
	return out
}()

// CanTransition reports whether the state machine allows from → to.
func CanTransition(from, to Status) bool {
	return transitions[from][to]
}
