package httpcmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/samla/samla/command/app"
	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/platform/uuids"
)

// Problem codes of supplement-info and of the collection resource.
const (
	CodeCollectionNotFound          = "COLLECTION_NOT_FOUND"
	CodeCollectionNotAwaitingInput  = "COLLECTION_NOT_AWAITING_INPUT"
	CodeCollectionCannotBeCancelled = "COLLECTION_CANNOT_BE_CANCELLED"
)

const (
	supplementInvalidDetail     = "The supplement-info request is invalid."
	supplementNotAwaitingDetail = "The collection is not in a status that takes this input; poll its status for what it asks for."
	supplementConflictDetail    = "The collection changed while the input was being recorded; retry the request."
)

// Limits of POST /collections/{collectionId}/supplement-info. A status asks for a couple of
// inputs (EMAIL, MOBILE_PHONE_NUMBER) or answers to a few instructions; the limits leave ample
// room for that and for instructions added later, and bound what one request can make Samla
// decode and store.
const (
	MaxSupplementInputs    = 20
	MaxSupplementResponses = 50
	// MaxResponseBodyBytes bounds the body of one ResponseObject: company answers to an EID
	// start or a login are small JSON documents.
	MaxResponseBodyBytes = 64 << 10
	// MaxResponseHeaders bounds the headers of one ResponseObject.
	MaxResponseHeaders = 50
	// MaxSupplementInfoBodyBytes bounds the whole request; a few maximal response bodies fit.
	MaxSupplementInfoBodyBytes int64 = 256 << 10
	// maxHeaderLength bounds one header name or value of a ResponseObject.
	maxHeaderLength = 8 << 10
)

// supplementLimits bound the shape of a supplement-info body before anything of it is decoded.
var supplementLimits = httpapi.Limits{Paths: map[string]httpapi.PathLimits{
	"inputs":                {MaxItems: MaxSupplementInputs},
	"responses":             {MaxItems: MaxSupplementResponses},
	"responses[].headers":   {MaxMembers: MaxResponseHeaders},
	"responses[].headers.*": {MaxStringBytes: maxHeaderLength},
	"responses[].body":      {MaxStringBytes: MaxResponseBodyBytes},
}}

// The bounds of one input and one response, decoded on their own: what supplementLimits held
// them to inside the body.
var (
	inputLimits    = supplementLimits.Sub("inputs[]")
	responseLimits = supplementLimits.Sub("responses[]")
)

// supplementRequest is either CollectionInput ({"inputs":[…]}) or a ResponseObject
// ({"responses":[…]}). Pointers tell an absent member (or null) from an empty one; items stay
// raw until each is decoded with its own path, so that an error names inputs[2].value.
type supplementRequest struct {
	Inputs    *[]json.RawMessage `json:"inputs"`
	Responses *[]json.RawMessage `json:"responses"`
}

// supplementCanonical is what the request hash of supplement-info covers: the decoded items.
type supplementCanonical struct {
	Inputs    []inputItem    `json:"inputs,omitempty"`
	Responses []responseItem `json:"responses,omitempty"`
}

type inputItem struct {
	Type  *string `json:"type"`
	Value *string `json:"value"`
}

type responseItem struct {
	RequestID *string           `json:"requestId"`
	Status    *int              `json:"status"`
	Headers   map[string]string `json:"headers"`
	Body      *string           `json:"body"`
}

func (h *handlers) supplementInfo(c *gin.Context) {
	id, ok := pathCollectionID(c)
	if !ok {
		return
	}
	if !h.sessionMaySupply(c, id) {
		return
	}
	key, ferr := httpapi.IdempotencyKey(c)
	if ferr != nil {
		httpapi.AbortValidation(c, "The Idempotency-Key header is invalid.", *ferr)
		return
	}
	var req supplementRequest
	if !httpapi.DecodeJSON(c, &req, supplementLimits) {
		return
	}
	cmd, canonical, errs := validateSupplement(req)
	if len(errs) > 0 {
		httpapi.AbortValidation(c, supplementInvalidDetail, errs...)
		return
	}
	version := httpapi.ServiceVersion(c)
	hash, err := h.requestHash(c, version, canonical)
	if err != nil {
		httpapi.AbortInternal(c, err)
		return
	}
	ctx := c.Request.Context()
	cmd.Tenant, cmd.CollectionID, cmd.IdempotencyKey = httpapi.ClientID(c), id, key
	cmd.RequestHash, cmd.LegacyRequestHash = hash.current, hash.legacy
	cmd.CorrelationID, cmd.RequestID = httpapi.CorrelationID(ctx), httpapi.RequestID(ctx)
	out, err := h.deps.Collections.SupplyInfo(ctx, cmd)
	if err != nil {
		writeSupplementError(c, err)
		return
	}
	c.Header("Location", "/collections/"+id+"/status")
	if out.Replayed {
		c.Header("Idempotent-Replayed", "true")
	}
	// 202: the input is recorded; the collection acts on it asynchronously, as later polls show.
	c.Status(http.StatusAccepted)
}

// validateSupplement checks the shape: exactly one of the two members, their sizes and required
// members. Formats (EMAIL, phone numbers) and what the status asks for are the domain's rules.
func validateSupplement(req supplementRequest) (app.SupplyInfo, supplementCanonical, []httpapi.FieldError) {
	var canonical supplementCanonical
	switch {
	case req.Inputs != nil && req.Responses != nil:
		return app.SupplyInfo{}, canonical, []httpapi.FieldError{{Field: "responses",
			Message: "give either inputs (CollectionInput) or responses (ResponseObject), not both"}}
	case req.Inputs == nil && req.Responses == nil:
		return app.SupplyInfo{}, canonical, []httpapi.FieldError{{Field: "inputs",
			Message: "inputs (CollectionInput) or responses (ResponseObject) is required"}}
	case req.Inputs != nil:
		items := *req.Inputs
		if len(items) == 0 { // at most MaxSupplementInputs: supplementLimits saw to that
			return app.SupplyInfo{}, canonical, []httpapi.FieldError{{Field: "inputs", Message: "must hold at least one input"}}
		}
		var errs []httpapi.FieldError
		inputs := make([]collection.Input, 0, len(items))
		for i, raw := range items {
			prefix := fmt.Sprintf("inputs[%d]", i)
			var it inputItem
			if fe := decodeItem(prefix, raw, &it, inputLimits); fe != nil {
				errs = append(errs, *fe)
				continue
			}
			canonical.Inputs = append(canonical.Inputs, it)
			if it.Type == nil || *it.Type == "" {
				errs = append(errs, httpapi.FieldError{Field: prefix + ".type", Message: "is required"})
			}
			if it.Value == nil {
				errs = append(errs, httpapi.FieldError{Field: prefix + ".value", Message: "is required"})
			}
			if it.Type != nil && it.Value != nil {
				inputs = append(inputs, collection.Input{Type: *it.Type, Value: *it.Value})
			}
		}
		return app.SupplyInfo{Kind: collection.InputKindCollectionInput, Inputs: inputs}, canonical, errs
	}
	items := *req.Responses
	if len(items) == 0 { // at most MaxSupplementResponses: supplementLimits saw to that
		return app.SupplyInfo{}, canonical, []httpapi.FieldError{{Field: "responses", Message: "must hold at least one response"}}
	}
	var errs []httpapi.FieldError
	responses := make([]collection.ClientResponse, 0, len(items))
	for i, raw := range items {
		prefix := fmt.Sprintf("responses[%d]", i)
		var it responseItem
		if fe := decodeItem(prefix, raw, &it, responseLimits); fe != nil {
			errs = append(errs, *fe)
			continue
		}
		canonical.Responses = append(canonical.Responses, it)
		if fes := checkResponse(prefix, it); len(fes) > 0 {
			errs = append(errs, fes...)
			continue
		}
		r := collection.ClientResponse{RequestID: *it.RequestID, Status: *it.Status, Headers: it.Headers}
		if it.Body != nil {
			r.Body = *it.Body
		}
		responses = append(responses, r)
	}
	return app.SupplyInfo{Kind: collection.InputKindClientResponses, Responses: responses}, canonical, errs
}

// decodeItem strictly decodes one array item under its limits, its errors named under prefix.
func decodeItem(prefix string, raw json.RawMessage, dst any, limits httpapi.Limits) *httpapi.FieldError {
	if err := httpapi.StrictUnmarshal(raw, dst, limits); err != nil {
		if fe, ok := httpapi.JSONFieldError(prefix, err); ok {
			return &fe
		}
		return &httpapi.FieldError{Field: prefix, Message: "must be an object"}
	}
	return nil
}

// checkResponse checks the presence of one ResponseObject's members and its header names; the
// sizes of its headers and body are supplementLimits'.
func checkResponse(prefix string, it responseItem) []httpapi.FieldError {
	var errs []httpapi.FieldError
	if it.RequestID == nil || *it.RequestID == "" {
		errs = append(errs, httpapi.FieldError{Field: prefix + ".requestId", Message: "is required"})
	}
	if it.Status == nil {
		errs = append(errs, httpapi.FieldError{Field: prefix + ".status", Message: "is required"})
	}
	for name := range it.Headers {
		if name == "" || len(name) > maxHeaderLength {
			errs = append(errs, httpapi.FieldError{Field: prefix + ".headers",
				Message: fmt.Sprintf("names must have 1 to %d characters", maxHeaderLength)})
			break
		}
	}
	return errs
}

// writeSupplementError maps the service's refusals to the contract's problems.
func writeSupplementError(c *gin.Context, err error) {
	switch rejected := domain.FieldErrors(err); {
	case errors.Is(err, app.ErrCollectionNotFound):
		collectionNotFound(c)
	case len(rejected) > 0:
		// The domain's field names are the request's paths (inputs[0].value, responses[1].status).
		fields := make([]httpapi.FieldError, len(rejected))
		for i, f := range rejected {
			fields[i] = httpapi.FieldError{Field: f.Field, Message: f.Reason}
		}
		httpapi.AbortValidation(c, supplementInvalidDetail, fields...)
	case errors.Is(err, collection.ErrNotAwaitingInput):
		httpapi.AbortProblem(c, http.StatusConflict, CodeCollectionNotAwaitingInput, supplementNotAwaitingDetail)
	case errors.Is(err, app.ErrUserDeleted):
		httpapi.AbortProblem(c, http.StatusConflict, CodeUserDeleted,
			"The collection's user was deleted and its personal data erased; the collection takes no more input.")
	case errors.Is(err, eventstore.ErrWrongExpectedRevision):
		httpapi.AbortProblem(c, http.StatusConflict, httpapi.CodeConflict, supplementConflictDetail)
	default:
		writeCommandError(c, err, supplementInvalidDetail)
	}
}

// cannotCancel answers DELETE /collections/{collectionId}. The answer is the same for every id,
// known or not, so it reveals nothing about other clients' collections. The collection itself has
// no method at all (its status, data and events are sub-resources), hence an empty Allow.
func cannotCancel(c *gin.Context) {
	c.Writer.Header()["Allow"] = []string{""} // gin's c.Header deletes a header set to ""
	httpapi.AbortProblem(c, http.StatusMethodNotAllowed, CodeCollectionCannotBeCancelled,
		"A collection cannot be cancelled by the client; it ends by itself in a final status.")
}

// pathCollectionID returns the path's id in canonical form (uuids.Canonical, any case), or
// answers 404: a malformed id names no collection, and loading it would only cost a read.
func pathCollectionID(c *gin.Context) (string, bool) {
	id, ok := uuids.Canonical(c.Param("collectionId"))
	if !ok {
		collectionNotFound(c)
		return "", false
	}
	return id, true
}

func collectionNotFound(c *gin.Context) {
	httpapi.AbortProblem(c, http.StatusNotFound, CodeCollectionNotFound, "No such collection.")
}
