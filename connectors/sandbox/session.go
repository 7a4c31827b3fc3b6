package sandbox

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/samla/samla/connectors/sandbox/eidsim"
	"github.com/samla/samla/domain/company"
	"github.com/samla/samla/domain/eid"
	"github.com/samla/samla/domain/personnummer"
	"github.com/samla/samla/platform/shrink"
)

// Session states of the companies' login API. They map one to one to what a connector needs to
// do: keep polling (ENROLLMENT_CHECK, LOGIN, TWO_FACTOR_PENDING), show something to the user
// (AWAITING_SIGNATURE with the EID order, CLIENT_ACTION_REQUIRED with instructions), wait for
// the user with a deadline of its own (TWO_FACTOR_METHOD_SELECTION), ask the user for values
// (CONTACT_FORM_REQUIRED, INPUT_REQUIRED), upload (DOCUMENT_REQUIRED), read data
// (AUTHENTICATED) or give up (FAILED, with a failureReason). The company itself never gives up
// on a user who is slow: waiting has no deadline here but the session's TTL.
const (
	stateEnrollmentCheck   = "ENROLLMENT_CHECK"
	stateLogin             = "LOGIN"
	stateAwaitingSignature = "AWAITING_SIGNATURE"
	stateClientAction      = "CLIENT_ACTION_REQUIRED"
	stateMethodSelection   = "TWO_FACTOR_METHOD_SELECTION"
	stateTwoFactorPending  = "TWO_FACTOR_PENDING"
	stateContactForm       = "CONTACT_FORM_REQUIRED"
	stateInputRequired     = "INPUT_REQUIRED"
	stateDocumentRequired  = "DOCUMENT_REQUIRED"
	stateAuthenticated     = "AUTHENTICATED"
	stateFailed            = "FAILED"
)

// Input kinds the companies ask for.
const (
	inputEmail = "EMAIL"
	inputPhone = "MOBILE_PHONE_NUMBER"
)

// loginSession is a company login. Its state moves when read, by the clock (the simulated user
// acting after a delay, an EID order completing or expiring) and by requests (inputs, uploads,
// client responses); no timer or goroutine moves it, so a fake clock drives it exactly.
// Mutable fields are guarded by Sandbox.mu.
type loginSession struct {
	id             string
	companyID      string
	reference      string // the caller's reference, e.g. Samla's collection id; never personal
	loginMethod    string
	personalNumber string // "" when the login started without one
	idemKey        string
	persona        *persona
	created        time.Time
	accessToken    string
	clientToken    string // the user's device presents it on the client-side requests
	ticket         string // given to the device once the user signed; comes back in the ResponseObject

	state           string
	since           time.Time
	failureReason   string
	order           *eidsim.Order
	completion      *eidsim.CompletionData
	owner           *owner
	twoFactorMethod string
	document        *documentOutcome
}

func (ls *loginSession) enter(state string, at time.Time) {
	ls.state, ls.since = state, at
}

func (ls *loginSession) fail(reason string, at time.Time) {
	ls.state, ls.since, ls.failureReason = stateFailed, at, reason
}

type sessionView struct {
	SessionID      string         `json:"sessionId"`
	Reference      string         `json:"reference,omitempty"`
	LoginMethod    string         `json:"loginMethod"`
	State          string         `json:"state"`
	StateSince     time.Time      `json:"stateSince"`
	FailureReason  string         `json:"failureReason,omitempty"`
	Message        string         `json:"message,omitempty"`
	EIDOrder       *eidOrderView  `json:"eidOrder,omitempty"`
	Instructions   []instruction  `json:"instructions,omitempty"`
	TwoFactor      *twoFactorView `json:"twoFactor,omitempty"`
	RequiredInputs []string       `json:"requiredInputs,omitempty"`
	Document       *documentView  `json:"document,omitempty"`
	Customer       *customerView  `json:"customer,omitempty"`
	AccessToken    string         `json:"accessToken,omitempty"`
	Products       []string       `json:"products,omitempty"`
	CreatedAt      time.Time      `json:"createdAt"`
	ExpiresAt      *time.Time     `json:"expiresAt,omitempty"` // of the EID order while awaiting a signature
}

type eidOrderView struct {
	OrderRef       string                 `json:"orderRef"`
	AutoStartToken string                 `json:"autoStartToken"`
	QRStartToken   string                 `json:"qrStartToken"`
	QRStartSecret  string                 `json:"qrStartSecret"`
	StartedAt      time.Time              `json:"startedAt"`
	ExpiresAt      time.Time              `json:"expiresAt"`
	Status         string                 `json:"status"`
	HintCode       string                 `json:"hintCode,omitempty"`
	CompletionData *eidsim.CompletionData `json:"completionData,omitempty"`
}

type instruction struct {
	RequestID string            `json:"requestId"`
	Method    string            `json:"method"`
	URL       string            `json:"url"`
	Headers   map[string]string `json:"headers"`
	Body      *string           `json:"body,omitempty"`
}

type twoFactorView struct {
	Methods []string `json:"methods"`
	Method  string   `json:"method,omitempty"`
}

type customerView struct {
	PersonalNumber string `json:"personalNumber"`
}

// twoFactorMethods are what the companies offer for the second factor.
var twoFactorMethods = []string{"SMS", "EMAIL"}

// advance applies every transition due by now. Transitions happen at the moment they were due,
// not at the moment somebody looked, so that the answers depend on the clock alone.
func (s *Sandbox) advance(ls *loginSession, co *demoCompany, now time.Time) {
	for {
		switch ls.state {
		case stateEnrollmentCheck:
			due := ls.since.Add(s.opts.stepDelay)
			if now.Before(due) {
				return
			}
			if ls.persona.failureReason == reasonNotACustomer {
				ls.fail(reasonNotACustomer, due)
				continue
			}
			s.beginLogin(ls, due)
		case stateLogin:
			due := ls.since.Add(s.opts.stepDelay)
			if now.Before(due) {
				return
			}
			switch ls.persona.flow {
			case flowTwoFactor, flowWrongCode:
				ls.twoFactorMethod = "SMS"
				ls.enter(stateTwoFactorPending, due)
			case flowMethodSelection:
				ls.enter(stateMethodSelection, due)
			case flowContactForm:
				ls.enter(stateContactForm, due)
			case flowInput:
				ls.enter(stateInputRequired, due)
			default:
				ls.fail(reasonTemporaryError, due)
			}
		case stateTwoFactorPending:
			due := ls.since.Add(s.opts.userDelay)
			if now.Before(due) {
				return
			}
			if ls.persona.flow == flowWrongCode {
				ls.fail(reasonIncorrectCode, due)
				continue
			}
			s.authenticate(ls, s.ownerOf(ls), due)
		case stateAwaitingSignature:
			r, err := s.eid.Collect(ls.order.OrderRef, now)
			if err != nil {
				ls.fail(reasonTemporaryError, now) // the provider forgot the order
				continue
			}
			switch r.Status {
			case eid.StatusPending:
				return
			case eid.StatusComplete:
				s.signed(ls, r, now)
			default:
				ls.fail(reasonOfHint(r.HintCode), r.At)
			}
		case stateClientAction:
			// The device drives this flow; the company only notices an order that failed.
			if ls.order == nil {
				return
			}
			r, err := s.eid.Collect(ls.order.OrderRef, now)
			if err != nil || r.Status != eid.StatusFailed {
				return
			}
			ls.fail(reasonOfHint(r.HintCode), r.At)
		default:
			return
		}
	}
}

// beginLogin starts the sign-in proper, after the enrollment check if the company has one.
func (s *Sandbox) beginLogin(ls *loginSession, at time.Time) {
	if ls.loginMethod == company.LoginPDFUpload {
		ls.enter(stateDocumentRequired, at)
		return
	}
	switch ls.persona.flow {
	case flowRefused:
		ls.fail(ls.persona.failureReason, at)
		return
	case flowEID:
	default:
		ls.enter(stateLogin, at)
		return
	}
	if ls.loginMethod == company.LoginEIDSameDeviceClientSide {
		ls.enter(stateClientAction, at) // the order starts when the device asks for it
		return
	}
	mock := ls.loginMethod == company.LoginEIDOtherDeviceMock
	actAfter := time.Duration(0)
	if mock {
		actAfter = s.opts.mockSignDelay
	}
	if err := s.startOrder(ls, at, actAfter, mock); err != nil {
		return
	}
	ls.enter(stateAwaitingSignature, at)
}

// startOrder asks the EID provider for an order; a refusal fails the session.
func (s *Sandbox) startOrder(ls *loginSession, at time.Time, actAfter time.Duration, mock bool) error {
	if ls.persona.conflicting && ls.personalNumber != "" {
		// The persona's other device is signing in somewhere else right now. Its refusal, if
		// any, does not matter: an order for the person is running either way.
		_, _ = s.eid.Auth(eidsim.AuthRequest{PersonalNumber: ls.personalNumber, Reference: "elsewhere/" + ls.id}, at)
	}
	// The conflict persona's orders are never mock orders: its whole point is the conflict.
	o, err := s.eid.Auth(eidsim.AuthRequest{PersonalNumber: ls.personalNumber, Reference: ls.reference,
		ActAfter: actAfter, Mock: mock && !ls.persona.conflicting}, at)
	if errors.Is(err, eidsim.ErrAlreadyInProgress) {
		ls.fail(reasonAlreadyInProgress, at)
		return err
	}
	if err != nil {
		ls.fail(reasonEIDStartFailed, at)
		return err
	}
	ls.order = &o
	return nil
}

// signed is the EID order completing: the company's own checks of the person come next. It
// releases the order, whose completion the login keeps for its view (ls.completion).
func (s *Sandbox) signed(ls *loginSession, r eidsim.CollectResult, now time.Time) {
	ls.completion = r.CompletionData
	s.eid.Release(ls.order.OrderRef, now)
	if ls.persona.flow == flowEID && ls.persona.failureReason != "" {
		ls.fail(ls.persona.failureReason, r.At)
		return
	}
	who := defaultPersonalNumber
	if r.CompletionData != nil && r.CompletionData.User.PersonalNumber != "" {
		who = r.CompletionData.User.PersonalNumber
	}
	s.authenticate(ls, owner{persona: s.personas.lookup(who), personalNumber: who}, r.At)
}

func (s *Sandbox) authenticate(ls *loginSession, o owner, at time.Time) {
	ls.owner = &o
	ls.enter(stateAuthenticated, at)
}

// ownerOf is the person of a login that did not go through an EID order.
func (s *Sandbox) ownerOf(ls *loginSession) owner {
	pn := ls.personalNumber
	if pn == "" {
		pn = defaultPersonalNumber
	}
	return owner{persona: ls.persona, personalNumber: pn}
}

func reasonOfHint(hint string) string {
	switch hint {
	case eid.HintUserCancel:
		return reasonUserCancelled
	case eid.HintExpiredTransaction:
		return reasonOrderExpired
	case eid.HintCancelled:
		return reasonAlreadyInProgress
	case eid.HintStartFailed:
		return reasonEIDStartFailed
	}
	return reasonTemporaryError
}

func (ls *loginSession) requiredInputs() []string {
	switch ls.state {
	case stateContactForm:
		return ls.persona.contactDetails
	case stateInputRequired:
		return []string{inputEmail}
	}
	return nil
}

// products are what the session can read once authenticated.
func (ls *loginSession) products(co *demoCompany) []string {
	if ls.document != nil {
		if co.insurer() {
			return []string{productInsurances}
		}
		return []string{productPensions}
	}
	return co.dataProducts
}

// view is the session's state at now; base is the company's API root as the caller reaches it
// (for the instructions' URLs).
func (s *Sandbox) view(ls *loginSession, co *demoCompany, now time.Time, base string) sessionView {
	s.advance(ls, co, now)
	v := sessionView{SessionID: ls.id, Reference: ls.reference, LoginMethod: ls.loginMethod, State: ls.state,
		StateSince: ls.since, FailureReason: ls.failureReason, CreatedAt: ls.created}
	if ls.order != nil && ls.loginMethod != company.LoginEIDSameDeviceClientSide {
		o := ls.order
		ov := &eidOrderView{OrderRef: o.OrderRef, AutoStartToken: o.AutoStartToken, QRStartToken: o.QRStartToken,
			QRStartSecret: o.QRStartSecret, StartedAt: o.StartedAt, ExpiresAt: o.ExpiresAt}
		if r, err := s.eid.Collect(o.OrderRef, now); err == nil {
			ov.Status, ov.HintCode, ov.CompletionData = r.Status, r.HintCode, r.CompletionData
		} else if ls.completion != nil {
			// The provider forgot the order the login was signed in with (released): the
			// connector still reads who signed from here (the authentication-mismatch rule).
			ov.Status, ov.CompletionData = eid.StatusComplete, ls.completion
		}
		v.EIDOrder = ov
	}
	switch ls.state {
	case stateEnrollmentCheck:
		v.Message = "Checking that you are a customer."
	case stateLogin:
		v.Message = "Signing in."
	case stateAwaitingSignature:
		v.Message = "Open the Mobile EID app and sign."
		exp := ls.order.ExpiresAt
		v.ExpiresAt = &exp
	case stateClientAction:
		v.Message = "Sign in with the Mobile EID app on this device."
		v.Instructions = s.instructions(ls, base)
	case stateMethodSelection:
		v.Message = "Choose how to receive your one-time code."
		v.TwoFactor = &twoFactorView{Methods: twoFactorMethods}
	case stateTwoFactorPending:
		v.Message = "Enter the code we sent you."
		v.TwoFactor = &twoFactorView{Methods: twoFactorMethods, Method: ls.twoFactorMethod}
	case stateContactForm:
		v.Message = "We need your contact details before you can continue."
		v.RequiredInputs = ls.requiredInputs()
	case stateInputRequired:
		v.Message = "We need more information before you can continue."
		v.RequiredInputs = ls.requiredInputs()
	case stateDocumentRequired:
		v.Message = "Upload your insurance letter (PDF)."
	case stateAuthenticated:
		v.AccessToken, v.Products = ls.accessToken, ls.products(co)
		if ls.owner != nil && ls.document == nil {
			v.Customer = &customerView{PersonalNumber: ls.owner.personalNumber}
		}
	}
	if ls.document != nil {
		v.Document = ls.document.view()
	}
	return v
}

type createSessionRequest struct {
	PersonalNumber string `json:"personalNumber"`
	LoginMethod    string `json:"loginMethod"`
	Reference      string `json:"reference"`
}

func (s *Sandbox) createSession(w http.ResponseWriter, r *http.Request) {
	co, ok := s.companies[r.PathValue("companyId")]
	if !ok {
		writeError(w, http.StatusNotFound, "UNKNOWN_COMPANY", "No such company.")
		return
	}
	if co.maintenance {
		writeError(w, http.StatusServiceUnavailable, "MAINTENANCE", "Planned maintenance; try again later.")
		return
	}
	var req createSessionRequest
	if err := decodeJSON(r, &req); err != nil || req.LoginMethod == "" {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", "The body must be {personalNumber?, loginMethod, reference?}.")
		return
	}
	if !slices.Contains(co.loginMethods, req.LoginMethod) {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{
			"code": "LOGIN_METHOD_NOT_SUPPORTED", "message": "This company does not support that login method.",
			"supportedLoginMethods": co.loginMethods,
		})
		return
	}
	now := s.now()
	var pn string
	if req.PersonalNumber != "" {
		n, err := personnummer.Parse(req.PersonalNumber, now)
		if err != nil {
			writeError(w, http.StatusBadRequest, "INVALID_PERSONAL_NUMBER", "The personal number is not valid.")
			return
		}
		pn = n.String()
	}
	key := r.Header.Get("Idempotency-Key")
	base := s.companyBase(r, co.id)

	s.mu.Lock()
	s.purgeLocked(now)
	if key != "" {
		if id, ok := s.idempotency[co.id+"\x00"+key]; ok {
			ls := s.sessions[id]
			if ls.personalNumber != pn || ls.loginMethod != req.LoginMethod || ls.reference != req.Reference {
				s.mu.Unlock()
				writeError(w, http.StatusUnprocessableEntity, "IDEMPOTENCY_KEY_REUSED", "The key was used for a different request.")
				return
			}
			// A retry of a request whose answer was lost: the same session, not a second order.
			v := s.view(ls, co, now, base)
			s.mu.Unlock()
			writeJSON(w, http.StatusOK, v)
			return
		}
	}
	ls := &loginSession{
		id: randomID(), companyID: co.id, reference: req.Reference, loginMethod: req.LoginMethod,
		personalNumber: pn, idemKey: key, persona: s.personas.lookup(pn), created: now,
		accessToken: randomID(), clientToken: randomID(), ticket: randomID(),
	}
	if co.enrollmentCheck && req.LoginMethod != company.LoginPDFUpload {
		ls.enter(stateEnrollmentCheck, now)
	} else {
		s.beginLogin(ls, now)
	}
	s.sessions[ls.id] = ls
	s.sessionsPeak.Saw(len(s.sessions))
	if key != "" {
		s.idempotency[co.id+"\x00"+key] = ls.id
	}
	v := s.view(ls, co, now, base)
	s.mu.Unlock()

	// The reference is Samla's collection id, not personal data; the personal number is never
	// logged.
	s.opts.logger.Debug("sandbox login started", "company", co.id, "session", ls.id, "reference", ls.reference, "method", ls.loginMethod)
	w.Header().Set("Location", r.URL.Path+"/"+ls.id)
	writeJSON(w, http.StatusCreated, v)
}

// purgeLocked forgets sessions older than the TTL, as a company's session store would, looking
// at most once a second (every login starts with it, and thousands may be open).
func (s *Sandbox) purgeLocked(now time.Time) {
	if now.Sub(s.lastPurge) < time.Second && !now.Before(s.lastPurge) {
		return
	}
	s.lastPurge = now
	for id, ls := range s.sessions {
		if now.Sub(ls.created) > s.opts.sessionTTL {
			s.forgetLocked(id, ls, now)
		}
	}
	if s.sessionsPeak.Due(len(s.sessions)) {
		s.sessions = shrink.Map(s.sessions)
		s.idempotency = shrink.Map(s.idempotency)
		s.sessionsPeak.Reset(len(s.sessions))
	}
}

// forgetLocked drops a session and withdraws its EID order, so that a login the caller gave up
// does not block the person's next one.
func (s *Sandbox) forgetLocked(id string, ls *loginSession, now time.Time) {
	delete(s.sessions, id)
	if ls.idemKey != "" {
		delete(s.idempotency, ls.companyID+"\x00"+ls.idemKey)
	}
	if ls.order != nil {
		_ = s.eid.Cancel(ls.order.OrderRef, now)
	}
}

// session finds a live session of the company in the path, answering 404 itself otherwise.
func (s *Sandbox) session(w http.ResponseWriter, r *http.Request) (*loginSession, *demoCompany, bool) {
	co, ok := s.companies[r.PathValue("companyId")]
	if !ok {
		writeError(w, http.StatusNotFound, "UNKNOWN_COMPANY", "No such company.")
		return nil, nil, false
	}
	if co.maintenance {
		writeError(w, http.StatusServiceUnavailable, "MAINTENANCE", "Planned maintenance; try again later.")
		return nil, nil, false
	}
	now := s.now()
	s.mu.Lock()
	ls, ok := s.sessions[r.PathValue("sessionId")]
	if ok && now.Sub(ls.created) > s.opts.sessionTTL {
		s.forgetLocked(ls.id, ls, now)
		ok = false
	}
	s.mu.Unlock()
	if !ok || ls.companyID != co.id {
		writeError(w, http.StatusNotFound, "SESSION_NOT_FOUND", "No such session.")
		return nil, nil, false
	}
	return ls, co, true
}

func (s *Sandbox) getSession(w http.ResponseWriter, r *http.Request) {
	ls, co, ok := s.session(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	v := s.view(ls, co, s.now(), s.companyBase(r, co.id))
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, v)
}

func (s *Sandbox) deleteSession(w http.ResponseWriter, r *http.Request) {
	ls, _, ok := s.session(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	s.forgetLocked(ls.id, ls, s.now())
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// selectTwoFactorMethod is the user picking how to get their code (at the company, not through
// Samla; the persona of SANDBOX.md never does, the endpoint is there for manual play).
func (s *Sandbox) selectTwoFactorMethod(w http.ResponseWriter, r *http.Request) {
	ls, co, ok := s.session(w, r)
	if !ok {
		return
	}
	var req struct {
		Method string `json:"method"`
	}
	if err := decodeJSON(r, &req); err != nil || !slices.Contains(twoFactorMethods, req.Method) {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", "The body must be {\"method\": \"SMS\" | \"EMAIL\"}.")
		return
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advance(ls, co, now)
	if ls.state != stateMethodSelection {
		writeError(w, http.StatusConflict, "NOT_AWAITING_METHOD_SELECTION", "The session is not waiting for a two-factor method.")
		return
	}
	ls.twoFactorMethod = req.Method
	ls.enter(stateTwoFactorPending, now)
	writeJSON(w, http.StatusOK, s.view(ls, co, now, s.companyBase(r, co.id)))
}

type inputValue struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

type fieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// submitInputs takes what the company asked for (contact details, more input). Values of kinds
// it did not ask for are ignored; every kind it asked for must come, well-formed, in one
// request, and then the sign-in goes on.
func (s *Sandbox) submitInputs(w http.ResponseWriter, r *http.Request) {
	ls, co, ok := s.session(w, r)
	if !ok {
		return
	}
	var req struct {
		Inputs []inputValue `json:"inputs"`
	}
	if err := decodeJSON(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", "The body must be {\"inputs\": [{\"type\", \"value\"}]}.")
		return
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advance(ls, co, now)
	required := ls.requiredInputs()
	if required == nil {
		writeError(w, http.StatusConflict, "NOT_AWAITING_INPUT", "The session is not waiting for input.")
		return
	}
	var errs []fieldError
	given := map[string]bool{}
	for i, in := range req.Inputs {
		if !slices.Contains(required, in.Type) {
			continue
		}
		if msg := checkInput(in.Type, in.Value); msg != "" {
			errs = append(errs, fieldError{Field: "inputs[" + strconv.Itoa(i) + "].value", Message: msg})
		}
		given[in.Type] = true
	}
	for _, t := range required {
		if !given[t] {
			errs = append(errs, fieldError{Field: "inputs", Message: t + " is required"})
		}
	}
	if len(errs) > 0 {
		writeJSON(w, http.StatusBadRequest, map[string]any{"code": "INVALID_INPUT", "message": "Some input is missing or malformed.", "errors": errs})
		return
	}
	s.authenticate(ls, s.ownerOf(ls), now)
	writeJSON(w, http.StatusOK, s.view(ls, co, now, s.companyBase(r, co.id)))
}

func checkInput(typ, v string) string {
	switch typ {
	case inputEmail:
		at := strings.LastIndexByte(v, '@')
		if at <= 0 || strings.ContainsAny(v, " \t\r\n") || strings.Count(v, "@") != 1 || len(v) > 256 {
			return "must be <address>@<domain>"
		}
		domain := v[at+1:]
		if !strings.Contains(domain, ".") || strings.HasPrefix(domain, ".") || strings.HasSuffix(domain, ".") || strings.Contains(domain, "..") {
			return "must be <address>@<domain>"
		}
	case inputPhone:
		if len(v) < 8 || len(v) > 15 || v[0] == '0' {
			return "must be digits only, with the country prefix"
		}
		for _, c := range v {
			if c < '0' || c > '9' {
				return "must be digits only, with the country prefix"
			}
		}
	}
	return ""
}

// authorized checks the session's access token on a data request.
func authorized(r *http.Request, want string) bool {
	token, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return found && subtle.ConstantTimeCompare([]byte(token), []byte(want)) == 1
}

// companyBase is the company's API root as a client outside reaches it: the public URL when
// one is configured (the sandbox mounted beside Samla's API), else the address the request
// came to.
func (s *Sandbox) companyBase(r *http.Request, companyID string) string {
	root := s.opts.publicURL
	if root == "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		root = scheme + "://" + r.Host
	}
	return strings.TrimRight(root, "/") + "/sandbox/companies/" + companyID
}

func randomID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("sandbox: crypto/rand failed: " + err.Error()) // never happens on supported platforms
	}
	return hex.EncodeToString(b[:])
}

func decodeJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errors.New("the body is not the expected JSON object")
	}
	return nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, errCode, message string) {
	writeJSON(w, code, map[string]string{"code": errCode, "message": message})
}
