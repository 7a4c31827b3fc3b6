// Package httpapi is the HTTP plumbing shared by the command and query roles: problem+json
// errors (RFC 9457), the middleware chain (request and correlation ids, logging, metrics,
// recovery, Service-Version negotiation, header and path checks, client authentication, rate
// limiting, body limits), strict JSON decoding under shape limits, the Gin engine every role
// mounts its routes on, and the ops listener.
package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"
)

// ContentTypeProblem is the media type of every error body (RFC 9457).
const ContentTypeProblem = "application/problem+json"

// Stable problem codes. Clients branch on code, never on title or detail, so a code is never
// renamed once shipped.
const (
	CodeValidationFailed     = "VALIDATION_FAILED"
	CodeMalformedJSON        = "MALFORMED_JSON"
	CodeUnauthorized         = "UNAUTHORIZED"
	CodeNotFound             = "NOT_FOUND"
	CodeMethodNotAllowed     = "METHOD_NOT_ALLOWED"
	CodeConflict             = "CONFLICT"
	CodePayloadTooLarge      = "PAYLOAD_TOO_LARGE"
	CodeHeadersTooLarge      = "HEADERS_TOO_LARGE"
	CodeUnsupportedMediaType = "UNSUPPORTED_MEDIA_TYPE"
	CodeRefused              = "REFUSED"
	CodeRateLimited          = "RATE_LIMITED"
	CodeInternal             = "INTERNAL_ERROR"
	CodeServiceUnavailable   = "SERVICE_UNAVAILABLE"
)

// problemTypeBase prefixes the problem type URI. A URN is used on purpose: RFC 9457 only needs a
// URI that identifies the problem type, and a URN does not promise a documentation page that
// does not exist.
const problemTypeBase = "urn:samla:problem:"

// FieldError names one invalid member of a request. Field is a path in the request as the
// client wrote it (parameters[0].personalNumber, input.SWEDISH_PERSONAL_NUMBER) or a header name.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Problem is an RFC 9457 problem details object with Samla's extension members.
type Problem struct {
	Type   string       `json:"type"`
	Title  string       `json:"title"`
	Status int          `json:"status"`
	Detail string       `json:"detail,omitempty"`
	Code   string       `json:"code"`
	Errors []FieldError `json:"errors,omitempty"`
	// ErrorCount is how many field errors there were, present only when Errors lists just the
	// first MaxFieldErrors of them.
	ErrorCount int `json:"errorCount,omitempty"`
	// Reason refines a code whose refusals have several causes (CONSENT_INVALID: NOT_AUTHORIZED,
	// EXPIRED, REVOKED, OTHER_USER, OTHER_COMPANY), a stable UPPER_SNAKE value clients branch on.
	Reason string `json:"reason,omitempty"`
}

// MaxFieldErrors bounds the field errors one problem lists: enough to fix a request by, and a
// request with millions of bad items cannot turn into an answer of hundreds of megabytes.
const MaxFieldErrors = 20

// Bounds of one field error's path and message. Both may repeat what the client sent (a member
// name, a parameter type), so that a client cannot make an answer larger than its request.
const (
	maxFieldErrorPath    = 256
	maxFieldErrorMessage = 512
)

// NewProblem builds a problem whose type URI and title derive from the status and code, so that
// every call site stays one line and the type is always consistent with the code.
func NewProblem(status int, code, detail string) Problem {
	return Problem{
		Type:   problemTypeBase + strings.ToLower(strings.ReplaceAll(code, "_", "-")),
		Title:  http.StatusText(status),
		Status: status,
		Detail: detail,
		Code:   code,
	}
}

// ValidationProblem is the 400 for invalid request members. It lists at most MaxFieldErrors of
// errs; when there are more, ErrorCount has their number and the detail says so.
func ValidationProblem(detail string, errs ...FieldError) Problem {
	p := NewProblem(http.StatusBadRequest, CodeValidationFailed, detail)
	p.Errors = errs
	return p.capErrors()
}

// capErrors keeps the first MaxFieldErrors field errors and clips their paths and messages, in a
// slice of their own so that the caller's list stays as it was.
func (p Problem) capErrors() Problem {
	cloned := false
	for i, fe := range p.Errors {
		if len(fe.Field) <= maxFieldErrorPath && len(fe.Message) <= maxFieldErrorMessage {
			continue
		}
		if !cloned {
			p.Errors, cloned = slices.Clone(p.Errors), true // the caller's slice stays as it was
		}
		p.Errors[i] = FieldError{Field: clip(fe.Field, maxFieldErrorPath), Message: clip(fe.Message, maxFieldErrorMessage)}
	}
	if len(p.Errors) <= MaxFieldErrors {
		return p
	}
	p.ErrorCount = len(p.Errors)
	p.Errors = slices.Clone(p.Errors[:MaxFieldErrors])
	listed := fmt.Sprintf("The first %d errors are listed, and %d more.", MaxFieldErrors, p.ErrorCount-MaxFieldErrors)
	if p.Detail == "" {
		p.Detail = listed
	} else {
		p.Detail = p.Detail + " " + listed
	}
	return p
}

// WriteProblem writes p and aborts the chain, so no later handler can add to the response. A
// problem built by hand has its field errors capped as ValidationProblem's are.
func WriteProblem(c *gin.Context, p Problem) {
	p = p.capErrors()
	c.Header("Content-Type", ContentTypeProblem)
	// Errors must not be cached by shared caches; some carry per-client information.
	c.Header("Cache-Control", "no-store")
	c.AbortWithStatusJSON(p.Status, p)
}

// AbortProblem is shorthand for WriteProblem(c, NewProblem(status, code, detail)).
func AbortProblem(c *gin.Context, status int, code, detail string) {
	WriteProblem(c, NewProblem(status, code, detail))
}

// AbortValidation is shorthand for a 400 with field errors.
func AbortValidation(c *gin.Context, detail string, errs ...FieldError) {
	WriteProblem(c, ValidationProblem(detail, errs...))
}

// AbortInternal logs err (never the request body) and answers a 500 that reveals nothing of it:
// internals are for the log, which carries the request id the client gets in X-Request-Id.
//
// An err that is the request's own cancellation, because the client went away, is no fault:
// it is logged at warning level, and the access log and metrics record the request as 499
// (ClientClosed).
func AbortInternal(c *gin.Context, err error) {
	ctx := c.Request.Context()
	if errors.Is(err, context.Canceled) && ClientClosed(ctx) {
		Logger(ctx).Warn("client closed the request before its outcome was known", "error", err)
	} else {
		Logger(ctx).Error("request failed", "error", err)
	}
	AbortProblem(c, http.StatusInternalServerError, CodeInternal,
		"An unexpected error occurred; quote the X-Request-Id header when reporting it.")
}
