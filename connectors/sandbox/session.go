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
	"strings"
	"time"

	"github.com/samla/samla/domain/personnummer"
)

// Session states of the company's login API. A session starts AWAITING_SIGNATURE (the EID
// order is out) or FAILED (refused at once), and ends AUTHENTICATED or FAILED.
const (
	stateAwaitingSignature = "AWAITING_SIGNATURE"
	stateAuthenticated     = "AUTHENTICATED"
	stateFailed            = "FAILED"
)

// loginSession is a company login. Its state is computed from the clock when read, not moved
// by timers, so that a paused or fast-forwarded clock gives the same answers and no goroutine
// outlives a request.
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
}

type sessionView struct {
	SessionID     string        `json:"sessionId"`
	Reference     string        `json:"reference,omitempty"`
	LoginMethod   string        `json:"loginMethod"`
	State         string        `json:"state"`
	FailureReason string        `json:"failureReason,omitempty"`
	Message       string        `json:"message,omitempty"`
	Customer      *customerView `json:"customer,omitempty"`
	AccessToken   string        `json:"accessToken,omitempty"`
	CreatedAt     time.Time     `json:"createdAt"`
	ExpiresAt     *time.Time    `json:"expiresAt,omitempty"` // of the EID order while awaiting a signature
}

type customerView struct {
	PersonalNumber string `json:"personalNumber"`
}

// state is the session's state at now.
func (s *Sandbox) state(ls *loginSession, now time.Time) sessionView {
	v := sessionView{SessionID: ls.id, Reference: ls.reference, LoginMethod: ls.loginMethod, CreatedAt: ls.created}
	p := ls.persona
	signedAt := ls.created.Add(s.opts.mockSignDelay)
	expiresAt := ls.created.Add(s.opts.eidOrderTimeout)
	awaiting := func() sessionView {
		v.State, v.Message, v.ExpiresAt = stateAwaitingSignature, "Open the Mobile EID app and sign.", &expiresAt
		return v
	}
	switch p.login {
	case refusedAtStart:
		v.State, v.FailureReason = stateFailed, p.failureReason
	case neverSigns:
		if now.Before(expiresAt) {
			return awaiting()
		}
		v.State, v.FailureReason = stateFailed, reasonOrderExpired
	case failsAtSignature:
		if now.Before(signedAt) {
			return awaiting()
		}
		v.State, v.FailureReason = stateFailed, p.failureReason
	default: // signs
		if now.Before(signedAt) {
			return awaiting()
		}
		who := ls.personalNumber
		if p.authenticatesAs != "" {
			who = p.authenticatesAs
		}
		v.State, v.AccessToken = stateAuthenticated, ls.accessToken
		if who != "" {
			v.Customer = &customerView{PersonalNumber: who}
		}
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
	if err := decodeJSON(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", err.Error())
		return
	}
	if !slices.Contains(co.loginMethods, req.LoginMethod) {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{
			"code": "LOGIN_METHOD_NOT_SUPPORTED", "message": "The company does not support this login method.",
			"supportedLoginMethods": co.loginMethods,
		})
		return
	}
	if !simulatedLoginMethods[req.LoginMethod] {
		writeError(w, http.StatusNotImplemented, "LOGIN_METHOD_NOT_IMPLEMENTED", "The sandbox does not simulate this login method yet.")
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

	s.mu.Lock()
	s.purgeLocked(now)
	if key != "" {
		if id, ok := s.idempotency[co.id+"\x00"+key]; ok {
			ls := s.sessions[id]
			s.mu.Unlock()
			if ls.personalNumber != pn || ls.loginMethod != req.LoginMethod || ls.reference != req.Reference {
				writeError(w, http.StatusUnprocessableEntity, "IDEMPOTENCY_KEY_REUSED", "The key was used for a different request.")
				return
			}
			// A retry of a request whose answer was lost: the same session, not a second order.
			writeJSON(w, http.StatusOK, s.state(ls, now))
			return
		}
	}
	ls := &loginSession{
		id: randomID(), companyID: co.id, reference: req.Reference, loginMethod: req.LoginMethod,
		personalNumber: pn, idemKey: key, persona: s.personas.lookup(pn), created: now, accessToken: randomID(),
	}
	s.sessions[ls.id] = ls
	if key != "" {
		s.idempotency[co.id+"\x00"+key] = ls.id
	}
	s.mu.Unlock()

	// The reference is Samla's collection id, not personal data; the personal number is never
	// logged.
	s.opts.logger.Debug("sandbox login started", "company", co.id, "session", ls.id, "reference", ls.reference)
	w.Header().Set("Location", r.URL.Path+"/"+ls.id)
	writeJSON(w, http.StatusCreated, s.state(ls, now))
}

// purgeLocked forgets sessions older than the TTL, as a company's session store would.
func (s *Sandbox) purgeLocked(now time.Time) {
	for id, ls := range s.sessions {
		if now.Sub(ls.created) > s.opts.sessionTTL {
			s.forgetLocked(id, ls)
		}
	}
}

func (s *Sandbox) forgetLocked(id string, ls *loginSession) {
	delete(s.sessions, id)
	if ls.idemKey != "" {
		delete(s.idempotency, ls.companyID+"\x00"+ls.idemKey)
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
		s.forgetLocked(ls.id, ls)
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
	ls, _, ok := s.session(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, s.state(ls, s.now()))
}

func (s *Sandbox) deleteSession(w http.ResponseWriter, r *http.Request) {
	ls, _, ok := s.session(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	s.forgetLocked(ls.id, ls)
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (s *Sandbox) getInsurances(w http.ResponseWriter, r *http.Request) {
	ls, co, ok := s.session(w, r)
	if !ok {
		return
	}
	now := s.now()
	if st := s.state(ls, now); st.State != stateAuthenticated {
		writeError(w, http.StatusConflict, "NOT_AUTHENTICATED", "The session is not authenticated.")
		return
	}
	token, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !found || subtle.ConstantTimeCompare([]byte(token), []byte(ls.accessToken)) != 1 {
		writeError(w, http.StatusUnauthorized, "INVALID_TOKEN", "A valid access token is required.")
		return
	}
	if !co.insurances {
		writeError(w, http.StatusNotFound, "NOT_AN_INSURER", "This company has no insurance data.")
		return
	}
	if ls.persona.collectionFails {
		writeError(w, http.StatusInternalServerError, "INTERNAL_ERROR", "Something went wrong on our side.")
		return
	}
	list := []insurance{}
	if ls.persona.insurances != nil {
		list = ls.persona.insurances(now, ls.persona.name)
	}
	writeJSON(w, http.StatusOK, map[string]any{"insurances": list})
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
