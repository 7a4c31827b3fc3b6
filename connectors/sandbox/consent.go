package sandbox

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/samla/samla/connectors/sandbox/eidsim"
	"github.com/samla/samla/domain/company"
	"github.com/samla/samla/domain/eid"
	"github.com/samla/samla/domain/personnummer"
)

// The PSD2 account-information API of a company with consents (se-demo-bank), shaped like a
// Berlin Group NextGenPSD2 ASPSP: the third party asks for a consent, the person (PSU)
// authorizes it with their electronic ID, and accounts and cards are then read under the
// consent's id (header Consent-ID) without a login session. Loans and savings are not PSD2
// products: they stay under the login session, as before.
//
//	POST   …/{companyId}/v1/consents              {personalNumber, loginMethod, scope[], reference?,
//	                                              validitySeconds?}, header Idempotency-Key?
//	                                              → 201 consent (200 and the same consent for a repeated key)
//	GET    …/{companyId}/v1/consents/{consentId}  → consent
//	GET    …/v1/consents/{consentId}/status       → {"consentStatus","failureReason"?}
//	DELETE …/v1/consents/{consentId}              → 204 (the third party ends the consent; a
//	                                              pending EID order is withdrawn)
//	GET    …/{companyId}/v1/accounts              header Consent-ID → {"accounts":[…]}: the
//	                                              checking (CACC) and savings (SVGS) accounts the
//	                                              consent's scope names
//	GET    …/{companyId}/v1/card-accounts         header Consent-ID → {"cardAccounts":[…]}
//
// A consent is {consentId, reference?, loginMethod, scope, consentStatus, statusSince,
// failureReason?, message?, eidOrder?, createdAt, authorizedAt?, validUntil?}. consentStatus is
// the Berlin Group's: received (the EID order waits for the person), valid (authorized, until
// validUntil), rejected (with the company's failureReason: USER_CANCELLED, ORDER_EXPIRED,
// ALREADY_IN_PROGRESS, PSU_MISMATCH — someone other than the person signed —, EID_START_FAILED,
// TECHNICAL_ERROR), terminatedByTpp (deleted) or expired. Scope values are CHECKING_ACCOUNTS,
// SAVINGS_ACCOUNTS and CREDIT_CARDS. A consent is valid for validitySeconds after its
// authorization, at most the bank's maximum (WithConsentValidity, 180 days by default).
//
// The data routes answer 401 CONSENT_INVALID (no Consent-ID, or a consent that is not
// authorized, was rejected or was deleted; the body's consentStatus says which), 401
// CONSENT_EXPIRED, 403 CONSENT_UNKNOWN (no such consent at this company) or 403
// SERVICE_INVALID (the consent's scope does not name the product). The consent routes answer
// 404 CONSENT_UNKNOWN for an unknown id, 400 INVALID_REQUEST | INVALID_PERSONAL_NUMBER |
// INVALID_SCOPE, 422 LOGIN_METHOD_NOT_SUPPORTED | IDEMPOTENCY_KEY_REUSED; a company without
// consents answers 404 PSD2_NOT_SUPPORTED on every one of these routes. The login session's own
// accounts and cards products answer 403 CONSENT_REQUIRED at such a company.
//
// Who signs decides, per SANDBOX.md's "Consents": the persona's EID action (cancel, never sign),
// its signer (another person: PSU_MISMATCH), its conflicting order (ALREADY_IN_PROGRESS) and its
// failing backend (TECHNICAL_ERROR once signed); everyone else's consent turns valid.

// DefaultConsentValidity is the longest a consent of the bank stays valid after its
// authorization: the 180 days PSD2's rules allow before the person must authenticate again.
const DefaultConsentValidity = 180 * 24 * time.Hour

// WithConsentValidity sets the bank's longest consent validity.
func WithConsentValidity(d time.Duration) Option { return func(o *options) { o.consentValidity = d } }

// Scope values of a consent, the access a person grants.
const (
	scopeCheckingAccounts = "CHECKING_ACCOUNTS"
	scopeSavingsAccounts  = "SAVINGS_ACCOUNTS"
	scopeCreditCards      = "CREDIT_CARDS"
)

var consentScopes = []string{scopeCheckingAccounts, scopeCreditCards, scopeSavingsAccounts}

// Consent statuses of the Berlin Group's consent model.
const (
	consentReceived   = "received"
	consentValid      = "valid"
	consentRejected   = "rejected"
	consentTerminated = "terminatedByTpp"
	consentExpired    = "expired"
)

// Failure reasons of a consent beside the login's (persona.go).
const (
	// reasonPSUMismatch: someone other than the person the consent was asked for signed it.
	reasonPSUMismatch = "PSU_MISMATCH"
	// reasonTechnicalError: the bank's backend failed to register the signed consent.
	reasonTechnicalError = "TECHNICAL_ERROR"
)

// bankConsent is a PSD2 consent at a company. Like a login session, its status moves when read,
// by the clock and the EID order, never by a timer. Mutable fields are guarded by Sandbox.mu.
type bankConsent struct {
	id             string
	companyID      string
	reference      string // the third party's reference: Samla's consent id; never personal
	loginMethod    string
	personalNumber string // the PSU, whom the consent is for
	persona        *persona
	scope          []string // sorted, without repeats
	validity       time.Duration
	idemKey        string
	created        time.Time

	status        string
	since         time.Time
	failureReason string
	order         *eidsim.Order
	authorizedAt  time.Time
	validUntil    time.Time
}

func (bc *bankConsent) reject(reason string, at time.Time) {
	bc.status, bc.since, bc.failureReason = consentRejected, at, reason
}

func (bc *bankConsent) final() bool {
	return bc.status != consentReceived && bc.status != consentValid
}

type consentView struct {
	ConsentID     string        `json:"consentId"`
	Reference     string        `json:"reference,omitempty"`
	LoginMethod   string        `json:"loginMethod"`
	Scope         []string      `json:"scope"`
	ConsentStatus string        `json:"consentStatus"`
	StatusSince   time.Time     `json:"statusSince"`
	FailureReason string        `json:"failureReason,omitempty"`
	Message       string        `json:"message,omitempty"`
	EIDOrder      *eidOrderView `json:"eidOrder,omitempty"`
	CreatedAt     time.Time     `json:"createdAt"`
	AuthorizedAt  *time.Time    `json:"authorizedAt,omitempty"`
	ValidUntil    *time.Time    `json:"validUntil,omitempty"`
}

// advanceConsent applies every transition due by now, at the moment it was due.
func (s *Sandbox) advanceConsent(bc *bankConsent, now time.Time) {
	for {
		switch bc.status {
		case consentReceived:
			r, err := s.eid.Collect(bc.order.OrderRef, now)
			switch {
			case errors.Is(err, eidsim.ErrNoSuchOrder) && !now.Before(bc.order.ExpiresAt):
				// The provider forgot an order that had expired long ago.
				bc.reject(reasonOrderExpired, bc.order.ExpiresAt)
				continue
			case err != nil:
				bc.reject(reasonTemporaryError, now)
				continue
			}
			switch r.Status {
			case eid.StatusPending:
				return
			case eid.StatusComplete:
				s.consentSigned(bc, r)
			default:
				bc.reject(reasonOfHint(r.HintCode), r.At)
			}
		case consentValid:
			if now.Before(bc.validUntil) {
				return
			}
			bc.status, bc.since = consentExpired, bc.validUntil
		default:
			return
		}
	}
}

// consentSigned is the EID order completing: the bank authorizes the consent only for the
// person it was asked for, and only if its own backend works.
func (s *Sandbox) consentSigned(bc *bankConsent, r eidsim.CollectResult) {
	signer := ""
	if r.CompletionData != nil {
		signer = r.CompletionData.User.PersonalNumber
	}
	switch {
	case signer != bc.personalNumber:
		bc.reject(reasonPSUMismatch, r.At)
	case bc.persona.collectionFails:
		bc.reject(reasonTechnicalError, r.At)
	default:
		bc.status, bc.since, bc.authorizedAt = consentValid, r.At, r.At
		bc.validUntil = r.At.Add(bc.validity)
	}
}

func (s *Sandbox) consentView(bc *bankConsent, now time.Time) consentView {
	s.advanceConsent(bc, now)
	v := consentView{ConsentID: bc.id, Reference: bc.reference, LoginMethod: bc.loginMethod, Scope: slices.Clone(bc.scope),
		ConsentStatus: bc.status, StatusSince: bc.since, FailureReason: bc.failureReason, CreatedAt: bc.created}
	if o := bc.order; o != nil {
		ov := &eidOrderView{OrderRef: o.OrderRef, AutoStartToken: o.AutoStartToken, QRStartToken: o.QRStartToken,
			QRStartSecret: o.QRStartSecret, StartedAt: o.StartedAt, ExpiresAt: o.ExpiresAt}
		if r, err := s.eid.Collect(o.OrderRef, now); err == nil {
			ov.Status, ov.HintCode, ov.CompletionData = r.Status, r.HintCode, r.CompletionData
		}
		v.EIDOrder = ov
	}
	switch bc.status {
	case consentReceived:
		v.Message = "Open the Mobile EID app and sign to give access to your accounts."
	case consentValid:
		at, until := bc.authorizedAt, bc.validUntil
		v.AuthorizedAt, v.ValidUntil = &at, &until
	case consentExpired:
		at, until := bc.authorizedAt, bc.validUntil
		v.AuthorizedAt, v.ValidUntil = &at, &until
		v.Message = "The consent has expired."
	case consentTerminated:
		v.Message = "The consent was ended by the third party."
		if !bc.authorizedAt.IsZero() {
			at := bc.authorizedAt
			v.AuthorizedAt = &at
		}
	case consentRejected:
		v.Message = "The consent was not authorized."
	}
	return v
}

// psd2Company finds a company with consents, answering itself otherwise.
func (s *Sandbox) psd2Company(w http.ResponseWriter, r *http.Request) (*demoCompany, bool) {
	co, ok := s.companies[r.PathValue("companyId")]
	if !ok {
		writeError(w, http.StatusNotFound, "UNKNOWN_COMPANY", "No such company.")
		return nil, false
	}
	if !co.consents {
		writeError(w, http.StatusNotFound, "PSD2_NOT_SUPPORTED", "This company has no PSD2 account-information API.")
		return nil, false
	}
	if co.maintenance {
		writeError(w, http.StatusServiceUnavailable, "MAINTENANCE", maintenanceMessage)
		return nil, false
	}
	return co, true
}

type createConsentRequest struct {
	PersonalNumber  string   `json:"personalNumber"`
	LoginMethod     string   `json:"loginMethod"`
	Scope           []string `json:"scope"`
	Reference       string   `json:"reference"`
	ValiditySeconds int64    `json:"validitySeconds"`
}

func (s *Sandbox) createConsent(w http.ResponseWriter, r *http.Request) {
	co, ok := s.psd2Company(w, r)
	if !ok {
		return
	}
	var req createConsentRequest
	if err := decodeJSON(r, &req); err != nil || req.LoginMethod == "" || req.PersonalNumber == "" || req.ValiditySeconds < 0 {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST",
			"The body must be {personalNumber, loginMethod, scope, reference?, validitySeconds?}.")
		return
	}
	scope, ok := normalizeConsentScope(req.Scope)
	if !ok {
		writeError(w, http.StatusBadRequest, "INVALID_SCOPE",
			"scope must name at least one of CHECKING_ACCOUNTS, SAVINGS_ACCOUNTS and CREDIT_CARDS, and nothing else.")
		return
	}
	// The person authorizes with the electronic ID; other login methods are the login
	// session's business.
	if !slices.Contains(co.loginMethods, req.LoginMethod) ||
		(req.LoginMethod != company.LoginEIDOtherDevice && req.LoginMethod != company.LoginEIDOtherDeviceMock) {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{
			"code": "LOGIN_METHOD_NOT_SUPPORTED", "message": "Consents are authorized with the Mobile EID on another device.",
			"supportedLoginMethods": []string{company.LoginEIDOtherDevice, company.LoginEIDOtherDeviceMock},
		})
		return
	}
	now := s.now()
	n, err := personnummer.Parse(req.PersonalNumber, now)
	if err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_PERSONAL_NUMBER", "The personal number is not valid.")
		return
	}
	pn := n.String()
	validity := s.opts.consentValidity
	if req.ValiditySeconds > 0 {
		validity = min(validity, time.Duration(req.ValiditySeconds)*time.Second)
	}
	key := r.Header.Get("Idempotency-Key")

	s.mu.Lock()
	s.purgeConsentsLocked(now)
	if key != "" {
		if id, ok := s.consentKeys[co.id+"\x00"+key]; ok {
			bc := s.consents[id]
			if bc.personalNumber != pn || bc.loginMethod != req.LoginMethod || bc.reference != req.Reference ||
				!slices.Equal(bc.scope, scope) || bc.validity != validity {
				s.mu.Unlock()
				writeError(w, http.StatusUnprocessableEntity, "IDEMPOTENCY_KEY_REUSED", "The key was used for a different request.")
				return
			}
			// A retry of a request whose answer was lost: the same consent, not a second order.
			v := s.consentView(bc, now)
			s.mu.Unlock()
			writeJSON(w, http.StatusOK, v)
			return
		}
	}
	bc := &bankConsent{
		id: randomID(), companyID: co.id, reference: req.Reference, loginMethod: req.LoginMethod, personalNumber: pn,
		persona: s.personas.lookup(pn), scope: scope, validity: validity, idemKey: key, created: now,
		status: consentReceived, since: now,
	}
	s.startConsentOrder(bc, now)
	s.consents[bc.id] = bc
	if key != "" {
		s.consentKeys[co.id+"\x00"+key] = bc.id
	}
	v := s.consentView(bc, now)
	s.mu.Unlock()

	// The reference is Samla's consent id, not personal data; the personal number is never logged.
	s.opts.logger.Debug("sandbox consent asked for", "company", co.id, "consent", bc.id, "reference", bc.reference,
		"method", bc.loginMethod, "status", bc.status)
	w.Header().Set("Location", r.URL.Path+"/"+bc.id)
	writeJSON(w, http.StatusCreated, v)
}

// startConsentOrder asks the EID provider for the consent's order, under the third party's
// reference so that a tester signs it with POST /sandbox/eid/sign {"consentId"}. A refusal
// rejects the consent at once.
func (s *Sandbox) startConsentOrder(bc *bankConsent, now time.Time) {
	mock := bc.loginMethod == company.LoginEIDOtherDeviceMock
	if bc.persona.conflicting {
		// The persona's other device is signing in somewhere else right now.
		_, _ = s.eid.Auth(eidsim.AuthRequest{PersonalNumber: bc.personalNumber, Reference: "elsewhere/" + bc.id}, now)
	}
	actAfter := time.Duration(0)
	if mock {
		actAfter = s.opts.mockSignDelay
	}
	o, err := s.eid.Auth(eidsim.AuthRequest{PersonalNumber: bc.personalNumber, Reference: bc.reference,
		ActAfter: actAfter, Mock: mock && !bc.persona.conflicting}, now)
	switch {
	case errors.Is(err, eidsim.ErrAlreadyInProgress):
		bc.reject(reasonAlreadyInProgress, now)
	case err != nil:
		bc.reject(reasonEIDStartFailed, now)
	default:
		bc.order = &o
	}
}

// normalizeConsentScope sorts the scope and drops repeats; false for an empty scope or an
// unknown value.
func normalizeConsentScope(in []string) ([]string, bool) {
	if len(in) == 0 {
		return nil, false
	}
	out := make([]string, 0, len(in))
	for _, v := range in {
		if !slices.Contains(consentScopes, v) {
			return nil, false
		}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out, true
}

// purgeConsentsLocked forgets consents that ended longer than the session TTL ago, and
// withdraws nothing: an ended consent has no live order.
func (s *Sandbox) purgeConsentsLocked(now time.Time) {
	for id, bc := range s.consents {
		s.advanceConsent(bc, now)
		if bc.final() && now.Sub(bc.since) > s.opts.sessionTTL {
			delete(s.consents, id)
			if bc.idemKey != "" {
				delete(s.consentKeys, bc.companyID+"\x00"+bc.idemKey)
			}
		}
	}
}

// consent finds a consent of the company in the path, answering 404 itself otherwise.
func (s *Sandbox) consent(w http.ResponseWriter, r *http.Request) (*bankConsent, bool) {
	co, ok := s.psd2Company(w, r)
	if !ok {
		return nil, false
	}
	s.mu.Lock()
	bc, ok := s.consents[r.PathValue("consentId")]
	s.mu.Unlock()
	if !ok || bc.companyID != co.id {
		writeError(w, http.StatusNotFound, "CONSENT_UNKNOWN", "No such consent.")
		return nil, false
	}
	return bc, true
}

func (s *Sandbox) getConsent(w http.ResponseWriter, r *http.Request) {
	bc, ok := s.consent(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	v := s.consentView(bc, s.now())
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, v)
}

func (s *Sandbox) getConsentStatus(w http.ResponseWriter, r *http.Request) {
	bc, ok := s.consent(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	s.advanceConsent(bc, s.now())
	out := map[string]string{"consentStatus": bc.status}
	if bc.failureReason != "" {
		out["failureReason"] = bc.failureReason
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// deleteConsent ends a consent for the third party. Deleting an ended consent changes nothing
// and is no error, so that a retried delete whose answer was lost succeeds.
func (s *Sandbox) deleteConsent(w http.ResponseWriter, r *http.Request) {
	bc, ok := s.consent(w, r)
	if !ok {
		return
	}
	now := s.now()
	s.mu.Lock()
	s.advanceConsent(bc, now)
	if !bc.final() {
		if bc.status == consentReceived && bc.order != nil {
			_ = s.eid.Cancel(bc.order.OrderRef, now)
		}
		bc.status, bc.since = consentTerminated, now
	}
	s.mu.Unlock()
	s.opts.logger.Debug("sandbox consent deleted", "company", bc.companyID, "consent", bc.id, "reference", bc.reference)
	w.WriteHeader(http.StatusNoContent)
}

// underConsent checks the Consent-ID of a PSD2 data request: an authorized, unexpired consent
// of this company whose scope names at least one of the product's scopes. It answers the
// refusal itself.
func (s *Sandbox) underConsent(w http.ResponseWriter, r *http.Request, product string, scopes ...string) (*bankConsent, *demoCompany, bool) {
	co, ok := s.psd2Company(w, r)
	if !ok {
		return nil, nil, false
	}
	id := strings.TrimSpace(r.Header.Get("Consent-ID"))
	if id == "" {
		writeError(w, http.StatusUnauthorized, "CONSENT_INVALID", "PSD2 data is read under a consent: the Consent-ID header is required.")
		return nil, nil, false
	}
	s.mu.Lock()
	bc, ok := s.consents[id]
	var status string
	if ok {
		s.advanceConsent(bc, s.now())
		status = bc.status
	}
	s.mu.Unlock()
	if !ok || bc.companyID != co.id {
		writeError(w, http.StatusForbidden, "CONSENT_UNKNOWN", "No such consent at this company.")
		return nil, nil, false
	}
	refuse := func(code, message string) {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"code": code, "message": message, "consentStatus": status})
	}
	switch status {
	case consentValid:
	case consentReceived:
		refuse("CONSENT_INVALID", "The consent is not authorized yet.")
		return nil, nil, false
	case consentRejected:
		refuse("CONSENT_INVALID", "The consent was not authorized.")
		return nil, nil, false
	case consentTerminated:
		refuse("CONSENT_INVALID", "The consent was revoked.")
		return nil, nil, false
	case consentExpired:
		refuse("CONSENT_EXPIRED", "The consent has expired; the person must authorize a new one.")
		return nil, nil, false
	default:
		refuse("CONSENT_INVALID", "The consent cannot be used.")
		return nil, nil, false
	}
	if !slices.ContainsFunc(scopes, func(sc string) bool { return slices.Contains(bc.scope, sc) }) {
		writeError(w, http.StatusForbidden, "SERVICE_INVALID", "The consent's scope does not cover "+product+".")
		return nil, nil, false
	}
	return bc, co, true
}

// consentOwner is whose data a consent shows: the person who authorized it (the bank
// authorizes only the person it was asked for).
func (s *Sandbox) consentOwner(bc *bankConsent) owner {
	return owner{persona: s.personas.lookup(bc.personalNumber), personalNumber: bc.personalNumber}
}

// psd2Accounts serves the checking and savings accounts the consent's scope names.
func (s *Sandbox) psd2Accounts(w http.ResponseWriter, r *http.Request) {
	bc, _, ok := s.underConsent(w, r, "accounts", scopeCheckingAccounts, scopeSavingsAccounts)
	if !ok {
		return
	}
	out := []psd2Account{}
	for _, a := range accountsOf(s.consentOwner(bc)) {
		want := scopeCheckingAccounts
		if a.CashAccountType == "SVGS" {
			want = scopeSavingsAccounts
		}
		if slices.Contains(bc.scope, want) {
			out = append(out, a)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"accounts": out})
}

// psd2Cards serves the card accounts of a consent whose scope names CREDIT_CARDS.
func (s *Sandbox) psd2Cards(w http.ResponseWriter, r *http.Request) {
	bc, _, ok := s.underConsent(w, r, "card accounts", scopeCreditCards)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"cardAccounts": cardsOf(s.consentOwner(bc))})
}
