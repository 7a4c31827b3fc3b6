package company

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/samla/samla/connectors/worker"
	"github.com/samla/samla/domain/collection"
	dcompany "github.com/samla/samla/domain/company"
)

// StartLogin opens a login session. The Idempotency-Key makes a retried POST (whose first
// answer was lost) return the session the first one opened instead of a second EID order. A
// PDF_UPLOAD login also uploads the document and returns the session as the company left it
// after reading it.
func (c *Client) StartLogin(ctx context.Context, companyID string, req worker.LoginRequest) (worker.CompanySession, error) {
	body, err := json.Marshal(wireLoginRequest{PersonalNumber: req.PersonalNumber, LoginMethod: req.LoginMethod, Reference: req.Reference})
	if err != nil {
		return worker.CompanySession{}, fmt.Errorf("encode login request: %w", err)
	}
	h := http.Header{}
	if req.IdempotencyKey != "" {
		h.Set("Idempotency-Key", req.IdempotencyKey)
	}
	resp, err := c.send(ctx, companyID, req.Reference, "start_login", http.MethodPost, "/sessions", body, h)
	if err != nil {
		return worker.CompanySession{}, err
	}
	switch {
	case resp.status == http.StatusOK || resp.status == http.StatusCreated:
	case resp.status == http.StatusUnprocessableEntity && resp.code() == "LOGIN_METHOD_NOT_SUPPORTED":
		return worker.CompanySession{}, fmt.Errorf("start login at %s with %s: %w", companyID, req.LoginMethod, worker.ErrLoginMethodNotSupported)
	case resp.status == http.StatusServiceUnavailable && resp.code() == "MAINTENANCE":
		return worker.CompanySession{}, fmt.Errorf("start login at %s: %w", companyID, worker.ErrCompanyUnavailable)
	default:
		return worker.CompanySession{}, resp.failure(companyID, "start login")
	}
	s, err := c.session(companyID, req.Reference, resp)
	if err != nil || req.LoginMethod != dcompany.LoginPDFUpload {
		return s, err
	}
	if req.Document == nil || len(req.Document.Content) == 0 {
		return worker.CompanySession{}, fmt.Errorf("PDF_UPLOAD login at %s without a document: %w", companyID, worker.ErrCompanyFailed)
	}
	return c.upload(ctx, companyID, s, *req.Document)
}

// upload sends the PDF of a PDF_UPLOAD session as it is (application/pdf).
func (c *Client) upload(ctx context.Context, companyID string, s worker.CompanySession, doc worker.Document) (worker.CompanySession, error) {
	h := http.Header{}
	h.Set("Content-Type", "application/pdf")
	resp, err := c.send(ctx, companyID, s.Reference, "upload_document", http.MethodPost, c.sessionPath(s)+"/document", doc.Content, h)
	if err != nil {
		return worker.CompanySession{}, err
	}
	if resp.status == http.StatusConflict {
		// A retried upload that the company had already read: the session says how it went.
		return c.PollLogin(ctx, companyID, s)
	}
	if resp.status != http.StatusOK {
		return worker.CompanySession{}, resp.failure(companyID, "upload document")
	}
	return c.session(companyID, s.Reference, resp)
}

// PollLogin reads a session's state.
func (c *Client) PollLogin(ctx context.Context, companyID string, s worker.CompanySession) (worker.CompanySession, error) {
	resp, err := c.send(ctx, companyID, s.Reference, "poll_login", http.MethodGet, c.sessionPath(s), nil, nil)
	if err != nil {
		return worker.CompanySession{}, err
	}
	if resp.status == http.StatusServiceUnavailable && resp.code() == "MAINTENANCE" {
		return worker.CompanySession{}, fmt.Errorf("poll login at %s: %w", companyID, worker.ErrCompanyUnavailable)
	}
	if resp.status != http.StatusOK {
		return worker.CompanySession{}, resp.failure(companyID, "poll login")
	}
	return c.session(companyID, s.Reference, resp)
}

// SubmitInputs sends the values the session asked for.
func (c *Client) SubmitInputs(ctx context.Context, companyID string, s worker.CompanySession, inputs []collection.Input) (worker.CompanySession, error) {
	w := struct {
		Inputs []wireInput `json:"inputs"`
	}{Inputs: make([]wireInput, len(inputs))}
	for i, in := range inputs {
		w.Inputs[i] = wireInput{Type: in.Type, Value: in.Value}
	}
	body, err := json.Marshal(w)
	if err != nil {
		return worker.CompanySession{}, fmt.Errorf("encode inputs: %w", err)
	}
	resp, err := c.send(ctx, companyID, s.Reference, "submit_inputs", http.MethodPost, c.sessionPath(s)+"/inputs", body, nil)
	if err != nil {
		return worker.CompanySession{}, err
	}
	switch {
	case resp.status == http.StatusOK:
		return c.session(companyID, s.Reference, resp)
	case resp.status == http.StatusBadRequest && resp.code() == "INVALID_INPUT":
		var e wireError
		_ = json.Unmarshal(resp.body, &e)
		rej := &worker.InputRejectedError{}
		for _, f := range e.Errors {
			rej.Fields = append(rej.Fields, worker.FieldError{Field: f.Field, Message: f.Message})
		}
		return worker.CompanySession{}, fmt.Errorf("submit inputs at %s: %w", companyID, rej)
	case resp.status == http.StatusConflict:
		return worker.CompanySession{}, fmt.Errorf("submit inputs at %s (%s): %w", companyID, resp.code(), worker.ErrNotAwaiting)
	}
	return worker.CompanySession{}, resp.failure(companyID, "submit inputs")
}

// SubmitClientResponses forwards the client's ResponseObject. A refusal fails the login at the
// company, so it comes back as a failed session rather than an error.
func (c *Client) SubmitClientResponses(ctx context.Context, companyID string, s worker.CompanySession, responses []collection.ClientResponse) (worker.CompanySession, error) {
	w := struct {
		Responses []wireClientResponse `json:"responses"`
	}{Responses: make([]wireClientResponse, len(responses))}
	for i, r := range responses {
		w.Responses[i] = wireClientResponse{RequestID: r.RequestID, Status: r.Status, Headers: r.Headers, Body: r.Body}
	}
	body, err := json.Marshal(w)
	if err != nil {
		return worker.CompanySession{}, fmt.Errorf("encode client responses: %w", err)
	}
	resp, err := c.send(ctx, companyID, s.Reference, "submit_client_responses", http.MethodPost, c.sessionPath(s)+"/client-responses", body, nil)
	if err != nil {
		return worker.CompanySession{}, err
	}
	switch {
	case resp.status == http.StatusOK:
		return c.session(companyID, s.Reference, resp)
	case resp.status == http.StatusUnprocessableEntity && resp.code() != "":
		c.log.Info("company refused the client responses", "company", companyID, "collection", s.Reference, "reason", resp.code())
		return worker.CompanySession{ID: s.ID, Reference: s.Reference, State: worker.LoginFailed,
			Outcome: outcomeOf(resp.code()), FailureReason: resp.code()}, nil
	case resp.status == http.StatusConflict:
		return worker.CompanySession{}, fmt.Errorf("submit client responses at %s (%s): %w", companyID, resp.code(), worker.ErrNotAwaiting)
	}
	return worker.CompanySession{}, resp.failure(companyID, "submit client responses")
}

// EndSession logs out. A session the company already forgot is fine.
func (c *Client) EndSession(ctx context.Context, companyID string, s worker.CompanySession) error {
	resp, err := c.send(ctx, companyID, s.Reference, "end_session", http.MethodDelete, c.sessionPath(s), nil, nil)
	if err != nil {
		return err
	}
	if resp.status/100 != 2 && resp.status != http.StatusNotFound {
		return resp.failure(companyID, "end session")
	}
	return nil
}

func (c *Client) sessionPath(s worker.CompanySession) string {
	return "/sessions/" + url.PathEscape(s.ID)
}

// session reads the company's session into the port's terms.
func (c *Client) session(companyID, reference string, resp response) (worker.CompanySession, error) {
	var w wireSession
	if err := json.Unmarshal(resp.body, &w); err != nil || w.SessionID == "" {
		return worker.CompanySession{}, fmt.Errorf("login session of %s is unreadable: %w", companyID, worker.ErrCompanyFailed)
	}
	s := worker.CompanySession{ID: w.SessionID, Reference: reference, Message: w.Message}
	if o := w.EIDOrder; o != nil {
		s.EIDOrder = &worker.EIDOrder{OrderRef: o.OrderRef, AutoStartToken: o.AutoStartToken, QRStartToken: o.QRStartToken,
			QRStartSecret: o.QRStartSecret, StartedAt: o.StartedAt, ExpiresAt: o.ExpiresAt, Status: o.Status, HintCode: o.HintCode}
		if cd := o.CompletionData; cd != nil && cd.User.PersonalNumber != "" {
			s.EIDCompletion = &worker.EIDIdentity{PersonalNumber: cd.User.PersonalNumber, Name: cd.User.Name}
		}
	}
	if w.TwoFactor != nil {
		s.TwoFactorMethods, s.TwoFactorMethod = w.TwoFactor.Methods, w.TwoFactor.Method
	}
	switch w.State {
	case "ENROLLMENT_CHECK":
		s.State = worker.LoginEnrollmentCheck
	case "LOGIN":
		s.State = worker.LoginPending
	case "AWAITING_SIGNATURE":
		// Without order data the user still signs: the client tells them to open the app.
		s.State = worker.LoginAwaitingUser
	case "CLIENT_ACTION_REQUIRED":
		if len(w.Instructions) == 0 {
			return worker.CompanySession{}, fmt.Errorf("client-side login of %s has no instructions: %w", companyID, worker.ErrCompanyFailed)
		}
		s.State = worker.LoginAwaitingClient
		for _, in := range w.Instructions {
			s.Instructions = append(s.Instructions, collection.Instruction{RequestID: in.RequestID, Method: in.Method,
				URL: in.URL, Headers: in.Headers, Body: in.Body})
		}
	case "TWO_FACTOR_METHOD_SELECTION":
		s.State = worker.LoginTwoFactorMethodSelection
	case "TWO_FACTOR_PENDING":
		s.State = worker.LoginTwoFactorPending
	case "CONTACT_FORM_REQUIRED", "INPUT_REQUIRED":
		if len(w.RequiredInputs) == 0 {
			return worker.CompanySession{}, fmt.Errorf("session of %s asks for input without saying which: %w", companyID, worker.ErrCompanyFailed)
		}
		s.State, s.RequiredInputTypes = worker.LoginInputRequired, w.RequiredInputs
		if w.State == "CONTACT_FORM_REQUIRED" {
			s.State = worker.LoginContactFormRequired
		}
	case "AUTHENTICATED":
		if w.AccessToken == "" {
			return worker.CompanySession{}, fmt.Errorf("authenticated session of %s has no access token: %w", companyID, worker.ErrCompanyFailed)
		}
		s.State, s.AccessToken = worker.LoginAuthenticated, w.AccessToken
		if w.Customer != nil {
			s.AuthenticatedPersonalNumber = w.Customer.PersonalNumber
		}
		for _, p := range w.Products {
			// A product this adapter cannot read is left out rather than failing the
			// collection on a harmless API addition.
			if _, ok := productReaders[worker.DataProduct(p)]; ok {
				s.Products = append(s.Products, worker.DataProduct(p))
			}
		}
	case "FAILED":
		s.State, s.Outcome, s.FailureReason = worker.LoginFailed, outcomeOf(w.FailureReason), w.FailureReason
	default:
		// States this adapter does not know yet are steps before the user is involved: keep
		// polling rather than failing a collection on a harmless API addition.
		s.State = worker.LoginPending
	}
	return s, nil
}
