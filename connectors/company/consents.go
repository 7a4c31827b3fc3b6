package company

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/samla/samla/connectors/worker"
	"github.com/samla/samla/domain/consent"
)

// The PSD2 side of a bank with consents (the sandbox's consent.go lists the routes): consents
// the person authorizes with their electronic ID, and accounts and cards read under a consent
// id (header Consent-ID), without a login session.

var (
	_ worker.ConsentBank        = (*Client)(nil)
	_ worker.AccountInformation = (*Client)(nil)
)

type (
	wireConsentRequest struct {
		PersonalNumber  string          `json:"personalNumber"`
		LoginMethod     string          `json:"loginMethod"`
		Scope           []consent.Scope `json:"scope"`
		Reference       string          `json:"reference,omitempty"`
		ValiditySeconds int64           `json:"validitySeconds,omitempty"`
	}
	wireConsent struct {
		ConsentID     string          `json:"consentId"`
		Reference     string          `json:"reference"`
		Scope         []consent.Scope `json:"scope"`
		ConsentStatus string          `json:"consentStatus"`
		FailureReason string          `json:"failureReason"`
		EIDOrder      *struct {
			OrderRef       string    `json:"orderRef"`
			AutoStartToken string    `json:"autoStartToken"`
			QRStartToken   string    `json:"qrStartToken"`
			QRStartSecret  string    `json:"qrStartSecret"`
			StartedAt      time.Time `json:"startedAt"`
			ExpiresAt      time.Time `json:"expiresAt"`
			Status         string    `json:"status"`
			HintCode       string    `json:"hintCode"`
			CompletionData *struct {
				User struct {
					PersonalNumber string `json:"personalNumber"`
					Name           string `json:"name"`
				} `json:"user"`
			} `json:"completionData"`
		} `json:"eidOrder"`
		AuthorizedAt *time.Time `json:"authorizedAt"`
		ValidUntil   *time.Time `json:"validUntil"`
	}
)

// consentStates maps the Berlin Group's consent statuses to the port's.
var consentStates = map[string]worker.BankConsentState{
	"received":            worker.BankConsentPending,
	"partiallyAuthorised": worker.BankConsentPending,
	"valid":               worker.BankConsentAuthorized,
	"rejected":            worker.BankConsentFailed,
	"revokedByPsu":        worker.BankConsentRevoked,
	"terminatedByTpp":     worker.BankConsentRevoked,
	"expired":             worker.BankConsentExpired,
}

// consentFailures is the one table from the bank's reasons for a rejected consent to Samla's
// failure codes; a reason missing here is the bank's own trouble, THIRD_PARTY_ERROR.
var consentFailures = map[string]consent.FailureCode{
	"USER_CANCELLED":      consent.FailureAuthenticationCancelled,
	"ORDER_EXPIRED":       consent.FailureAuthenticationTimeout,
	"PSU_MISMATCH":        consent.FailureAuthenticationMismatch,
	"ALREADY_IN_PROGRESS": consent.FailureAuthenticationConflict,
}

func consentFailureOf(reason string) consent.FailureCode {
	if code, ok := consentFailures[reason]; ok {
		return code
	}
	return consent.FailureThirdPartyError
}

// CreateConsent asks the bank for a consent. The Idempotency-Key makes a retried POST (whose
// first answer was lost) return the consent the first one created instead of a second EID
// order.
func (c *Client) CreateConsent(ctx context.Context, companyID string, req worker.BankConsentRequest) (worker.BankConsent, error) {
	w := wireConsentRequest{PersonalNumber: req.PersonalNumber, LoginMethod: req.LoginMethod, Scope: req.Scope, Reference: req.Reference}
	if req.Validity > 0 {
		// Whole seconds, never less than asked for.
		w.ValiditySeconds = int64((req.Validity + time.Second - 1) / time.Second)
	}
	body, err := json.Marshal(w)
	if err != nil {
		return worker.BankConsent{}, fmt.Errorf("encode consent request: %w", err)
	}
	h := http.Header{}
	if req.IdempotencyKey != "" {
		h.Set("Idempotency-Key", req.IdempotencyKey)
	}
	resp, err := c.send(ctx, companyID, req.Reference, "create_consent", http.MethodPost, "/v1/consents", body, h)
	if err != nil {
		return worker.BankConsent{}, err
	}
	switch {
	case resp.status == http.StatusOK || resp.status == http.StatusCreated:
		return c.bankConsent(companyID, req.Reference, resp)
	case resp.status == http.StatusNotFound && resp.code() == "PSD2_NOT_SUPPORTED":
		return worker.BankConsent{}, fmt.Errorf("create consent at %s: %w", companyID, worker.ErrConsentsNotSupported)
	case resp.status == http.StatusUnprocessableEntity && resp.code() == "LOGIN_METHOD_NOT_SUPPORTED":
		return worker.BankConsent{}, fmt.Errorf("create consent at %s with %s: %w", companyID, req.LoginMethod, worker.ErrLoginMethodNotSupported)
	case resp.status == http.StatusServiceUnavailable && resp.code() == "MAINTENANCE":
		return worker.BankConsent{}, fmt.Errorf("create consent at %s: %w", companyID, worker.ErrCompanyUnavailable)
	}
	return worker.BankConsent{}, resp.failure(companyID, "create consent")
}

// ConsentStatus reads a consent at the bank.
func (c *Client) ConsentStatus(ctx context.Context, companyID, bankConsentID string) (worker.BankConsent, error) {
	resp, err := c.send(ctx, companyID, bankConsentID, "consent_status", http.MethodGet, consentPath(bankConsentID), nil, nil)
	if err != nil {
		return worker.BankConsent{}, err
	}
	switch {
	case resp.status == http.StatusOK:
		return c.bankConsent(companyID, "", resp)
	case resp.status == http.StatusNotFound && resp.code() == "CONSENT_UNKNOWN":
		return worker.BankConsent{}, fmt.Errorf("consent at %s: %w", companyID, worker.ErrBankConsentUnknown)
	case resp.status == http.StatusNotFound && resp.code() == "PSD2_NOT_SUPPORTED":
		return worker.BankConsent{}, fmt.Errorf("consent at %s: %w", companyID, worker.ErrConsentsNotSupported)
	case resp.status == http.StatusServiceUnavailable && resp.code() == "MAINTENANCE":
		return worker.BankConsent{}, fmt.Errorf("consent at %s: %w", companyID, worker.ErrCompanyUnavailable)
	}
	return worker.BankConsent{}, resp.failure(companyID, "read consent")
}

// RevokeConsent deletes a consent at the bank. One the bank does not know (any more) has
// nothing left to end.
func (c *Client) RevokeConsent(ctx context.Context, companyID, bankConsentID string) error {
	resp, err := c.send(ctx, companyID, bankConsentID, "revoke_consent", http.MethodDelete, consentPath(bankConsentID), nil, nil)
	if err != nil {
		return err
	}
	switch {
	case resp.status/100 == 2:
		return nil
	case resp.status == http.StatusNotFound && resp.code() == "CONSENT_UNKNOWN":
		c.log.Info("the bank does not know the consent it was asked to revoke", "company", companyID, "bank_consent", bankConsentID)
		return nil
	case resp.status == http.StatusNotFound && resp.code() == "PSD2_NOT_SUPPORTED":
		return fmt.Errorf("revoke consent at %s: %w", companyID, worker.ErrConsentsNotSupported)
	case resp.status == http.StatusServiceUnavailable && resp.code() == "MAINTENANCE":
		return fmt.Errorf("revoke consent at %s: %w", companyID, worker.ErrCompanyUnavailable)
	}
	return resp.failure(companyID, "revoke consent")
}

// psd2Paths are where the bank serves each PSD2 product.
var psd2Paths = map[worker.DataProduct]string{
	worker.ProductAccounts: "/v1/accounts",
	worker.ProductCards:    "/v1/card-accounts",
}

// FetchPSD2 reads a PSD2 product under a consent. The bank serves only what the consent's scope
// names; what the grant's scope does not name is dropped here too, so that a bank that serves
// more than it was asked for never puts it in a collection.
func (c *Client) FetchPSD2(ctx context.Context, companyID string, grant worker.PSD2Grant, product worker.DataProduct) (worker.ProductData, error) {
	path, ok := psd2Paths[product]
	if !ok {
		return worker.ProductData{}, fmt.Errorf("%q is not a PSD2 product: %w", product, worker.ErrCompanyFailed)
	}
	if grant.BankConsentID == "" {
		return worker.ProductData{}, fmt.Errorf("read %s at %s without a consent: %w", product, companyID, worker.ErrConsentNotUsable)
	}
	h := http.Header{}
	h.Set("Consent-ID", grant.BankConsentID)
	resp, err := c.send(ctx, companyID, grant.BankConsentID, "psd2_"+string(product), http.MethodGet, path, nil, h)
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return worker.ProductData{}, fmt.Errorf("read %s at %s: %w", product, companyID, worker.ErrProductTimeout)
		}
		return worker.ProductData{}, err
	}
	switch {
	case resp.status == http.StatusOK:
	case resp.status == http.StatusGatewayTimeout:
		return worker.ProductData{}, fmt.Errorf("read %s at %s (%s): %w", product, companyID, resp.code(), worker.ErrProductTimeout)
	case resp.status == http.StatusUnauthorized || resp.status == http.StatusForbidden:
		// Not authorized (yet), revoked, expired, unknown or outside its scope: the consent
		// cannot be used now, whichever it is, and asking again will not change that.
		var e struct {
			Code          string `json:"code"`
			ConsentStatus string `json:"consentStatus"`
		}
		_ = json.Unmarshal(resp.body, &e)
		return worker.ProductData{}, fmt.Errorf("read %s at %s: HTTP %d (%s %s): %w", product, companyID, resp.status, e.Code,
			e.ConsentStatus, worker.ErrConsentNotUsable)
	case resp.status == http.StatusServiceUnavailable && resp.code() == "MAINTENANCE":
		return worker.ProductData{}, fmt.Errorf("read %s at %s: %w", product, companyID, worker.ErrCompanyUnavailable)
	default:
		return worker.ProductData{}, resp.failure(companyID, "read "+string(product))
	}
	var w wireProduct
	if err := json.Unmarshal(resp.body, &w); err != nil {
		return worker.ProductData{}, fmt.Errorf("%s of %s are not JSON: %v: %w", product, companyID, err, worker.ErrCompanyFailed)
	}
	d := worker.ProductData{Product: product}
	if err := productReaders[product](companyID, w, &d); err != nil {
		return worker.ProductData{}, fmt.Errorf("%s of %s: %w: %w", product, companyID, err, worker.ErrCompanyFailed)
	}
	if !slices.Contains(grant.Scope, consent.ScopeCheckingAccounts) {
		d.CheckingAccounts = nil
	}
	if !slices.Contains(grant.Scope, consent.ScopeSavingsAccounts) {
		d.SavingsAccounts = nil
	}
	if !slices.Contains(grant.Scope, consent.ScopeCreditCards) {
		d.CreditCards = nil
	}
	return d, nil
}

func consentPath(bankConsentID string) string {
	return "/v1/consents/" + url.PathEscape(bankConsentID)
}

// bankConsent reads the bank's consent into the port's terms. reference is the caller's, ""
// when reading a consent by its id (the bank's answer names it then).
func (c *Client) bankConsent(companyID, reference string, resp response) (worker.BankConsent, error) {
	var w wireConsent
	if err := json.Unmarshal(resp.body, &w); err != nil || w.ConsentID == "" {
		return worker.BankConsent{}, fmt.Errorf("consent of %s is unreadable: %w", companyID, worker.ErrCompanyFailed)
	}
	if reference == "" {
		reference = w.Reference
	}
	bc := worker.BankConsent{ID: w.ConsentID, Reference: reference, Scope: w.Scope}
	state, known := consentStates[w.ConsentStatus]
	if !known {
		// A status this adapter does not know yet is not an ending it could act on: keep
		// polling rather than failing a consent on a harmless API addition.
		c.log.Warn("unknown consent status; read as pending", "company", companyID, "bank_consent", w.ConsentID, "status", w.ConsentStatus)
		state = worker.BankConsentPending
	}
	bc.State = state
	if o := w.EIDOrder; o != nil {
		bc.EIDOrder = &worker.EIDOrder{OrderRef: o.OrderRef, AutoStartToken: o.AutoStartToken, QRStartToken: o.QRStartToken,
			QRStartSecret: o.QRStartSecret, StartedAt: o.StartedAt, ExpiresAt: o.ExpiresAt, Status: o.Status, HintCode: o.HintCode}
		if cd := o.CompletionData; cd != nil && cd.User.PersonalNumber != "" {
			bc.Signer = &worker.EIDIdentity{PersonalNumber: cd.User.PersonalNumber, Name: cd.User.Name}
		}
	}
	if w.AuthorizedAt != nil {
		bc.AuthorizedAt = *w.AuthorizedAt
	}
	if w.ValidUntil != nil {
		bc.ValidUntil = *w.ValidUntil
	}
	switch state {
	case worker.BankConsentFailed:
		bc.FailureReason, bc.Outcome = w.FailureReason, consentFailureOf(w.FailureReason)
	case worker.BankConsentAuthorized:
		if bc.AuthorizedAt.IsZero() || bc.ValidUntil.IsZero() {
			return worker.BankConsent{}, fmt.Errorf("authorized consent of %s without its validity: %w", companyID, worker.ErrCompanyFailed)
		}
	}
	return bc, nil
}
