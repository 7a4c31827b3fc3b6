package sandbox

import (
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	"github.com/samla/samla/domain/company"
	"github.com/samla/samla/domain/eid"
)

// The client-side login (SWEDISH_MOBILE_EID_SAME_DEVICE_CLIENT_SIDE_AUTHENTICATION): the company
// hands out requests that the client app runs from the user's own device, because the company
// wants to see the device and not Samla's servers:
//
//	eid-autostart  POST …/client/{sessionId}/eid-order     → {"autoStartToken","launchUrl"}: the
//	               company starts an EID order; the app opens the EID app with the token
//	login-result   GET  …/client/{sessionId}/login-result  → {"status":"COMPLETE","loginTicket"} once
//	               the user signed (it waits for the signature a while), {"status":"FAILED",
//	               "hintCode"} or {"status":"PENDING"}
//
// The client returns what it got as a ResponseObject; Samla forwards it to
// POST …/sessions/{sessionId}/client-responses, and the login ticket in the login-result
// response is what lets the session go on. Responses to requests the company did not hand out
// are ignored.
const (
	requestEIDAutostart = "eid-autostart"
	requestLoginResult  = "login-result"
)

func (s *Sandbox) instructions(ls *loginSession, base string) []instruction {
	auth := "Bearer " + ls.clientToken
	body := `{"device":"mobile"}`
	prefix := base + "/client/" + url.PathEscape(ls.id)
	return []instruction{
		{RequestID: requestEIDAutostart, Method: http.MethodPost, URL: prefix + "/eid-order",
			Headers: map[string]string{"Authorization": auth, "Content-Type": "application/json", "Accept": "application/json"},
			Body:    &body},
		{RequestID: requestLoginResult, Method: http.MethodGet, URL: prefix + "/login-result",
			Headers: map[string]string{"Authorization": auth, "Accept": "application/json"}},
	}
}

// deviceSession finds the session of a device request and checks the device's token.
func (s *Sandbox) deviceSession(w http.ResponseWriter, r *http.Request) (*loginSession, *demoCompany, bool) {
	ls, co, ok := s.session(w, r)
	if !ok {
		return nil, nil, false
	}
	if ls.loginMethod != company.LoginEIDSameDeviceClientSide || !authorized(r, ls.clientToken) {
		writeError(w, http.StatusUnauthorized, "INVALID_TOKEN", "A valid device token is required.")
		return nil, nil, false
	}
	return ls, co, true
}

// deviceStartOrder starts the EID order for the device; asking again returns the same order.
func (s *Sandbox) deviceStartOrder(w http.ResponseWriter, r *http.Request) {
	ls, co, ok := s.deviceSession(w, r)
	if !ok {
		return
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advance(ls, co, now)
	if ls.state != stateClientAction {
		writeJSON(w, http.StatusConflict, map[string]string{"code": "SESSION_NOT_WAITING", "message": "The login is not waiting for the device.",
			"failureReason": ls.failureReason})
		return
	}
	if ls.order == nil {
		// The user is on the device: the app opens the EID app at once and they sign by
		// themselves after the usual delay (or when a tester signs with /sandbox/eid/sign).
		if err := s.startOrder(ls, now, s.opts.mockSignDelay, false); err != nil {
			writeJSON(w, http.StatusConflict, map[string]string{"code": ls.failureReason, "message": "The electronic ID could not be started."})
			return
		}
		_ = s.eid.AppStarted(ls.order.OrderRef, now)
	}
	writeJSON(w, http.StatusOK, map[string]string{
		"autoStartToken": ls.order.AutoStartToken,
		"launchUrl":      "bankid:///?autostarttoken=" + url.QueryEscape(ls.order.AutoStartToken) + "&redirect=null",
	})
}

// deviceLoginResult waits (a while) for the user's signature and answers the login ticket.
func (s *Sandbox) deviceLoginResult(w http.ResponseWriter, r *http.Request) {
	ls, _, ok := s.deviceSession(w, r)
	if !ok {
		return
	}
	waitUntil := time.Now().Add(s.opts.clientWait)
	for {
		s.mu.Lock()
		order, ticket, signedIn := ls.order, ls.ticket, ls.completion != nil
		s.mu.Unlock()
		if order == nil {
			writeError(w, http.StatusConflict, "ORDER_NOT_STARTED", "Run the eid-autostart request first.")
			return
		}
		res, err := s.eid.Collect(order.OrderRef, s.now())
		if err != nil && signedIn {
			// The company signed the login in with the order and released it: the device asking
			// again still learns that it is done.
			writeJSON(w, http.StatusOK, map[string]string{"status": "COMPLETE", "loginTicket": ticket})
			return
		}
		if err != nil {
			writeError(w, http.StatusConflict, "ORDER_NOT_FOUND", "The electronic-ID order is gone.")
			return
		}
		switch {
		case res.Status == eid.StatusComplete:
			writeJSON(w, http.StatusOK, map[string]string{"status": "COMPLETE", "loginTicket": ticket})
			return
		case res.Status == eid.StatusFailed:
			writeJSON(w, http.StatusOK, map[string]string{"status": "FAILED", "hintCode": res.HintCode})
			return
		case !time.Now().Before(waitUntil):
			writeJSON(w, http.StatusOK, map[string]string{"status": "PENDING", "hintCode": res.HintCode})
			return
		}
		t := time.NewTimer(min(50*time.Millisecond, time.Until(waitUntil)))
		select {
		case <-r.Context().Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

type clientResponse struct {
	RequestID string            `json:"requestId"`
	Status    int               `json:"status"`
	Headers   map[string]string `json:"headers"`
	Body      string            `json:"body"`
}

// submitClientResponses takes the client's ResponseObject. A login-result that carries the
// ticket lets the sign-in go on; one that is missing, failed or forged fails the login
// (CLIENT_RESPONSE_INVALID), as a company would refuse a session it cannot tie to the device.
func (s *Sandbox) submitClientResponses(w http.ResponseWriter, r *http.Request) {
	ls, co, ok := s.session(w, r)
	if !ok {
		return
	}
	var req struct {
		Responses []clientResponse `json:"responses"`
	}
	if err := decodeJSON(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", "The body must be {\"responses\": [{\"requestId\", \"status\", \"headers\", \"body\"}]}.")
		return
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advance(ls, co, now)
	if ls.state != stateClientAction {
		writeError(w, http.StatusConflict, "NOT_AWAITING_CLIENT_RESPONSES", "The session is not waiting for client responses.")
		return
	}
	var result *clientResponse
	for i := range req.Responses {
		if req.Responses[i].RequestID == requestLoginResult {
			result = &req.Responses[i]
		}
	}
	problem := ""
	var body struct {
		Status      string `json:"status"`
		LoginTicket string `json:"loginTicket"`
	}
	switch {
	case result == nil:
		problem = "no response to the login-result request"
	case result.Status != http.StatusOK:
		problem = "the login-result request did not succeed"
	case json.Unmarshal([]byte(result.Body), &body) != nil:
		problem = "the login-result body is not the company's JSON"
	case body.Status != "COMPLETE" || !equalSecret(body.LoginTicket, ls.ticket):
		problem = "the login-result does not carry this login's ticket"
	}
	if problem == "" && ls.order != nil {
		res, err := s.eid.Collect(ls.order.OrderRef, now)
		if err != nil || res.Status != eid.StatusComplete {
			problem = "the electronic ID was not signed"
		} else {
			res.At = now // the company learns of the signature from the device only now
			s.signed(ls, res, now)
		}
	} else if problem == "" {
		problem = "the electronic ID was never started"
	}
	if problem != "" {
		ls.fail(reasonClientResponseInvalid, now)
		writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"code": reasonClientResponseInvalid, "message": problem})
		return
	}
	writeJSON(w, http.StatusOK, s.view(ls, co, now, s.companyBase(r, co.id)))
}

func equalSecret(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
