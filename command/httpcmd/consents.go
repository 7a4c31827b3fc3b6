package httpcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/samla/samla/command/app"
	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/consent"
	"github.com/samla/samla/domain/personnummer"
	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/platform/uuids"
)

// Problem codes of the consent commands (API.md, "Consents").
const (
	// CodeConsentNotSupported is a consent at a company that gives none (422).
	CodeConsentNotSupported = "CONSENT_NOT_SUPPORTED"
	// CodeLoginMethodNotApplicable is a consent with a login method the company does not offer
	// (422), in the spec's words for the same thing in a collection.
	CodeLoginMethodNotApplicable = "LOGIN_METHOD_NOT_APPLICABLE"
	// CodeConsentFinal is a DELETE of a consent that is final already (409).
	CodeConsentFinal = "CONSENT_FINAL"
	// CodeConsentNotFound is an unknown consent, or another client's (404).
	CodeConsentNotFound = "CONSENT_NOT_FOUND"
)

// MaxCreateConsentBodyBytes bounds POST /consents: a handful of short members.
const MaxCreateConsentBodyBytes int64 = 16 << 10

// maxScopes bounds the request's scope: three values exist; the margin lets a client that
// repeats one be told it is refused for its value, not its length.
const maxScopes = 10

// createConsentLimits bound the body's shape before it is decoded.
var createConsentLimits = httpapi.Limits{MaxStringBytes: 1 << 10, Paths: map[string]httpapi.PathLimits{
	"parameters": {MaxItems: MaxParameters},
	"scope":      {MaxItems: maxScopes},
}}

// ConsentCommands is the application service the consent routes drive (app.ConsentService).
type ConsentCommands interface {
	Create(ctx context.Context, cmd app.CreateConsent) (app.ConsentCreated, error)
	Revoke(ctx context.Context, cmd app.RevokeConsent) (*consent.Consent, error)
}

// registerConsents mounts the consent commands, which exist from 2026-04-01 on. A user's session
// may use them for its own user: the handlers check whose consent it is.
func (h *handlers) registerConsents(r gin.IRoutes) {
	since := httpapi.SinceVersion(httpapi.V20260401)
	r.POST("/consents", httpapi.AllowSessionsCheckedByHandler, since, httpapi.MaxBody(MaxCreateConsentBodyBytes), h.createConsent)
	r.DELETE("/consents/:consentId", httpapi.AllowSessionsCheckedByHandler, since, h.revokeConsent)
}

// createConsentRequest is the body of POST /consents. Pointers tell an absent member from an
// empty one; parameters are kept raw until their type is known.
type createConsentRequest struct {
	UserUUID    *string           `json:"userUuid"`
	Company     *string           `json:"company"`
	LoginMethod *string           `json:"loginMethod"`
	Parameters  []json.RawMessage `json:"parameters"`
	Scope       *[]string         `json:"scope"`
}

// consentInput is a POST /consents request, validated, ready for the command.
type consentInput struct {
	userUUID, company, loginMethod string
	personalNumber                 personnummer.Number
	scope                          []consent.Scope // nil: every scope
	personalNumberPath             string          // where the request carried the personal number
}

// consentCreatedResponse is the 201 body of POST /consents.
type consentCreatedResponse struct {
	ConsentID string `json:"consentId"`
	Status    string `json:"status"`
}

func (h *handlers) createConsent(c *gin.Context) {
	key, ferr := httpapi.IdempotencyKey(c)
	if ferr != nil {
		httpapi.AbortValidation(c, "The Idempotency-Key header is invalid.", *ferr)
		return
	}
	var req createConsentRequest
	if !httpapi.DecodeJSON(c, &req, createConsentLimits) {
		return
	}
	in, errs := validateConsent(req, h.deps.Now())
	if len(errs) > 0 {
		httpapi.AbortValidation(c, "The consent request is invalid.", errs...)
		return
	}
	// A session creates consents for its own user only.
	if !httpapi.RequireSessionUser(c, in.userUUID) {
		return
	}
	// The fingerprint covers what the request means, parsed: the same person and scope in
	// another spelling or order is the same request.
	hash, err := h.requestHash(c, httpapi.ServiceVersion(c), struct {
		UserUUID       string          `json:"userUuid"`
		Company        string          `json:"company"`
		LoginMethod    string          `json:"loginMethod"`
		PersonalNumber string          `json:"personalNumber"`
		Scope          []consent.Scope `json:"scope"`
	}{in.userUUID, in.company, in.loginMethod, in.personalNumber.String(), canonicalScope(in.scope)})
	if err != nil {
		httpapi.AbortInternal(c, err)
		return
	}
	ctx := c.Request.Context()
	created, err := h.deps.Consents.Create(ctx, app.CreateConsent{
		Tenant: httpapi.ClientID(c), IdempotencyKey: key, UserUUID: in.userUUID, Company: in.company,
		LoginMethod: in.loginMethod, Scope: in.scope, PersonalNumber: in.personalNumber,
		RequestHash: hash.current, LegacyRequestHash: hash.legacy,
		CorrelationID: httpapi.CorrelationID(ctx), RequestID: httpapi.RequestID(ctx),
	})
	if err != nil {
		writeConsentError(c, err, in)
		return
	}
	c.Header("Location", "/consents/"+created.ConsentID)
	if created.Replayed {
		c.Header("Idempotent-Replayed", "true")
	}
	c.JSON(http.StatusCreated, consentCreatedResponse{ConsentID: created.ConsentID, Status: string(created.Status)})
}

// canonicalScope is the scope a request means: what the consent records for it.
func canonicalScope(scope []consent.Scope) []consent.Scope {
	out, err := consent.NormalizeScope(scope)
	if err != nil {
		return scope // validated before: never reached
	}
	return out
}

// validateConsent checks the request's shape: every member present and well-formed, one
// SwedishEidParameter naming a valid personal number, a scope of known values. Whether the
// company gives consents, and offers the login method, is the domain's rule (422), not the
// request's shape.
func validateConsent(req createConsentRequest, now time.Time) (consentInput, []httpapi.FieldError) {
	var in consentInput
	var company, loginMethod string
	if req.Company != nil {
		company = *req.Company
	}
	if req.LoginMethod != nil {
		loginMethod = *req.LoginMethod
	}
	errs := validateCommon(company, loginMethod)
	in.company, in.loginMethod = company, loginMethod
	switch {
	case req.UserUUID == nil || *req.UserUUID == "":
		errs = append(errs, httpapi.FieldError{Field: "userUuid", Message: "is required"})
	default:
		id, ok := uuids.Canonical(*req.UserUUID)
		if !ok {
			errs = append(errs, httpapi.FieldError{Field: "userUuid", Message: "must be a UUID"})
		}
		in.userUUID = id
	}

	eid := -1
	for i, raw := range req.Parameters {
		prefix := fmt.Sprintf("parameters[%d]", i)
		var head struct {
			Type *string `json:"type"`
		}
		if err := json.Unmarshal(raw, &head); err != nil {
			errs = append(errs, httpapi.FieldError{Field: prefix, Message: "must be an object with a string type"})
			continue
		}
		switch {
		case head.Type == nil || *head.Type == "":
			errs = append(errs, httpapi.FieldError{Field: prefix + ".type", Message: "is required"})
			continue
		case *head.Type != ParamSwedishEid:
			errs = append(errs, httpapi.FieldError{Field: prefix + ".type", Message: "must be " + ParamSwedishEid})
			continue
		case eid >= 0:
			errs = append(errs, httpapi.FieldError{Field: prefix + ".type",
				Message: fmt.Sprintf("%s already given at parameters[%d]; each type may appear once", ParamSwedishEid, eid)})
			continue
		}
		eid = i
		var p personalNumberParam
		if err := httpapi.StrictUnmarshal(raw, &p, parameterLimits); err != nil {
			if fe, ok := httpapi.JSONFieldError(prefix, err); ok {
				errs = append(errs, fe)
			} else {
				errs = append(errs, httpapi.FieldError{Field: prefix, Message: "is not a valid parameter object"})
			}
			continue
		}
		in.personalNumberPath = prefix + ".personalNumber"
		if p.PersonalNumber == nil || *p.PersonalNumber == "" {
			errs = append(errs, httpapi.FieldError{Field: in.personalNumberPath, Message: "is required"})
			continue
		}
		pn, fe := parsePersonalNumber(in.personalNumberPath, *p.PersonalNumber, now)
		if fe != nil {
			errs = append(errs, *fe)
			continue
		}
		in.personalNumber = pn
	}
	if eid < 0 {
		errs = append(errs, httpapi.FieldError{Field: "parameters",
			Message: "must hold a " + ParamSwedishEid + " naming the person who authorizes the consent"})
	}

	if req.Scope != nil {
		if len(*req.Scope) == 0 {
			// An empty scope would be a consent to read nothing; leaving scope out asks for all.
			errs = append(errs, httpapi.FieldError{Field: "scope", Message: "must name at least one scope when given; leave it out for all"})
		}
		known := make([]string, 0, len(consent.AllScopes()))
		for _, s := range consent.AllScopes() {
			known = append(known, string(s))
		}
		in.scope = make([]consent.Scope, 0, len(*req.Scope))
		for i, s := range *req.Scope {
			if _, err := consent.NormalizeScope([]consent.Scope{consent.Scope(s)}); err != nil {
				errs = append(errs, httpapi.FieldError{Field: fmt.Sprintf("scope[%d]", i), Message: "must be one of " + strings.Join(known, ", ")})
				continue
			}
			in.scope = append(in.scope, consent.Scope(s))
		}
	}
	return in, errs
}

// writeConsentError maps the consent service's errors to the contract's problems.
func writeConsentError(c *gin.Context, err error, in consentInput) {
	switch fields := domain.FieldErrors(err); {
	case len(fields) > 0:
		errs := make([]httpapi.FieldError, len(fields))
		for i, f := range fields {
			path := f.Field
			if f.Field == consent.FieldPersonalNumber && in.personalNumberPath != "" {
				path = in.personalNumberPath
			}
			errs[i] = httpapi.FieldError{Field: path, Message: f.Reason}
		}
		httpapi.AbortValidation(c, "The consent request is invalid.", errs...)
	case errors.Is(err, consent.ErrNotSupported):
		httpapi.AbortProblem(c, http.StatusUnprocessableEntity, CodeConsentNotSupported,
			fmt.Sprintf("Company %s gives no PSD2 consents.", in.company))
	case errors.Is(err, consent.ErrLoginMethodNotSupported):
		httpapi.AbortProblem(c, http.StatusUnprocessableEntity, CodeLoginMethodNotApplicable,
			fmt.Sprintf("Company %s does not offer login method %s; GET /companies lists the ones it does.", in.company, in.loginMethod))
	case errors.Is(err, app.ErrUnknownUser):
		httpapi.AbortProblem(c, http.StatusUnprocessableEntity, CodeUnknownUser,
			"userUuid is not a user of this client, or the user was deleted; create the user with POST /users first.")
	default:
		writeCommandError(c, err, "The consent request is invalid.")
	}
}

// consentResponse is the API's consent: the body of DELETE /consents/{consentId} (and of the
// query side's GET /consents/{consentId}, which presents the read model the same way).
type consentResponse struct {
	ConsentID    string                `json:"consentId"`
	UserUUID     string                `json:"userUuid"`
	Company      string                `json:"company"`
	Status       string                `json:"status"`
	Scope        []string              `json:"scope"`
	CreatedAt    string                `json:"createdAt"`
	AuthorizedAt *string               `json:"authorizedAt,omitempty"`
	ExpiresAt    *string               `json:"expiresAt,omitempty"`
	Error        *consentErrorResponse `json:"error,omitempty"`
}

type consentErrorResponse struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// presentConsent is the consent as the API shows it at now.
func presentConsent(co *consent.Consent, now time.Time) consentResponse {
	scope := make([]string, 0, len(co.Scope()))
	for _, s := range co.Scope() {
		scope = append(scope, string(s))
	}
	out := consentResponse{ConsentID: co.ConsentID(), UserUUID: co.UserUUID(), Company: co.Company(),
		Status: string(co.EffectiveStatus(now)), Scope: scope, CreatedAt: httpapi.FormatTime(co.CreatedAt())}
	if t := co.AuthorizedAt(); !t.IsZero() {
		s := httpapi.FormatTime(t)
		out.AuthorizedAt = &s
	}
	if t := co.ExpiresAt(); !t.IsZero() {
		s := httpapi.FormatTime(t)
		out.ExpiresAt = &s
	}
	if e := co.Error(); e != nil {
		out.Error = &consentErrorResponse{Code: string(e.Code), Message: e.Message}
	}
	return out
}

// revokeConsent revokes the client's consent and answers it, now REVOKED. A session revokes its
// own user's consents only: another user's is a 403, found first, so that an unknown consent
// stays a 404 for a session too.
func (h *handlers) revokeConsent(c *gin.Context) {
	ctx := c.Request.Context()
	id, ok := uuids.Canonical(c.Param("consentId"))
	if !ok {
		consentNotFound(c)
		return
	}
	sessionUser, _ := httpapi.SessionUser(c)
	revoked, err := h.deps.Consents.Revoke(ctx, app.RevokeConsent{Tenant: httpapi.ClientID(c), ConsentID: id,
		SessionUser: sessionUser, CorrelationID: httpapi.CorrelationID(ctx), RequestID: httpapi.RequestID(ctx)})
	switch {
	case errors.Is(err, app.ErrConsentNotFound):
		consentNotFound(c)
		return
	case errors.Is(err, app.ErrConsentOfOtherUser):
		httpapi.AbortProblem(c, http.StatusForbidden, httpapi.CodeForbiddenForSession,
			"The session token reaches only its own user's resources.")
		return
	case errors.Is(err, consent.ErrFinal):
		httpapi.AbortProblem(c, http.StatusConflict, CodeConsentFinal,
			"The consent is final (failed, revoked or expired); there is nothing to revoke.")
		return
	case err != nil:
		writeCommandError(c, err, "The request is invalid.")
		return
	}
	c.JSON(http.StatusOK, presentConsent(revoked, h.deps.Now()))
}

func consentNotFound(c *gin.Context) {
	httpapi.AbortProblem(c, http.StatusNotFound, CodeConsentNotFound, "No such consent.")
}
